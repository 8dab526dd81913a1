// Package gcs is the store of gs://bucket/prefix/ URIs: Google Cloud
// Storage, with a service-account key from a Secret or the platform's
// identity (Application Default Credentials: GKE workload identity, the
// metadata server), or a GCS-compatible endpoint (fake-gcs-server).
package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/auth/credentials/externalaccount"
	"cloud.google.com/go/auth/httptransport"
	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Scheme is the URI scheme this store is registered under.
const Scheme = "gs"

// Descriptor is the store's entry in stores.Default. A workload identity
// names its pool provider: Google's token audience has no default.
var Descriptor = store.Descriptor{Scheme: Scheme, Open: Open, SecretKeys: SecretKeys, Root: store.BucketRoot,
	DefaultHost:     func(*url.URL, string) (string, error) { return "storage.googleapis.com", nil },
	AudienceAllowed: AudienceAllowed, Cloud: Cloud, CloudHosts: CloudHosts, CloudDomains: CloudDomains}

// poolProvider is the audience of a Google workload identity pool
// provider: its full resource name.
var poolProvider = regexp.MustCompile(`^//iam\.googleapis\.com/projects/[0-9]{1,20}/locations/global/workloadIdentityPools/[a-z0-9-]{1,63}/providers/[a-z0-9-]{1,63}$`)

// AudienceAllowed is whether a workload identity's audience is a Google
// pool provider's.
func AudienceAllowed(audience string) bool { return poolProvider.MatchString(audience) }

// KeyFile is the key of a Secret (and the file of a credentials directory)
// holding a service account's JSON key.
const KeyFile = "service-account.json"

// Open returns the store of a gs:// source.
func Open(ctx context.Context, src store.Source, u *url.URL) (store.Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("source URI %q has no bucket: write gs://bucket/prefix/", src.URI)
	}
	opts, err := clientOptions(src)
	if err != nil {
		return nil, err
	}
	// Retries are ours (store.Retry): the client makes one attempt.
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gs://%s: %w", u.Host, err)
	}
	client.SetRetry(storage.WithPolicy(storage.RetryNever))
	return &gcsStore{client: client, bucket: u.Host, prefix: store.CleanPrefix(u.Path), retry: src.Retry.WithDefaults()}, nil
}

// clientOptions are the endpoint and an HTTP client with the source's
// credentials: a key from Credentials or CredentialsDir, else none for an
// endpoint of the author's (an emulator), else Application Default
// Credentials. The client is the store's own (store.HTTPClient's caps and
// redirects under the library's authentication), as are the clients of
// the credentials' token exchanges.
func clientOptions(src store.Source) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if src.Endpoint != "" {
		u, err := store.EndpointURL(src.Endpoint, src.Insecure)
		if err != nil {
			return nil, err
		}
		opts = append(opts, option.WithEndpoint(u.Scheme+"://"+u.Host+"/storage/v1/"))
	}
	creds, err := credentialsOf(src)
	if err != nil {
		return nil, err
	}
	hopts := &httptransport.Options{BaseRoundTripper: store.Transport(src.Endpoints.Gate(Cloud, store.UseStorage, "")), Credentials: creds, DisableAuthentication: creds == nil,
		DisableTelemetry: true}
	client, err := httptransport.NewClient(hopts)
	if err != nil {
		return nil, fmt.Errorf("gs: %w", err)
	}
	client.CheckRedirect = store.HTTPClient(nil).CheckRedirect
	return append(opts, option.WithHTTPClient(client)), nil
}

// credentialsOf returns the source's Google credentials; nil for none.
func credentialsOf(src store.Source) (*auth.Credentials, error) {
	if id := src.Identity; id != nil {
		return federated(id, src.Endpoints.Gate(Cloud, store.UseToken, ""))
	}
	key, err := serviceAccountKey(src)
	if err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// A key's assertion goes to Google's token hosts only; the platform's
	// own identity (the metadata server) to where its environment says.
	detect := &credentials.DetectOptions{Scopes: []string{storageScope}, Client: store.HTTPClient(nil)}
	switch {
	case key != nil:
		detect.Client = store.HTTPClient(src.Endpoints.Gate(Cloud, store.UseToken, ""))
		creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, key, detect)
		if err != nil {
			return nil, fmt.Errorf("credentials: %s is not a service account's JSON key Google's library accepts", KeyFile)
		}
		return creds, nil
	case src.Endpoint != "":
		return nil, nil
	}
	creds, err := credentials.DetectDefault(detect)
	if err != nil {
		return nil, fmt.Errorf("no credentials for gs://: name a Secret with %s, or give the pod a workload identity (%w)", KeyFile, err)
	}
	return creds, nil
}

// SecretKeys is what the store needs of a credentials Secret.
var SecretKeys = store.SecretKeys{
	Describe: "the key " + KeyFile + " (a service account's JSON key)",
	Complete: func(data map[string][]byte) bool { return len(data[KeyFile]) > 0 },
}

// Google's security token service and the impersonation endpoint, as
// Workload Identity Federation documents them.
const (
	stsURL           = "https://sts.googleapis.com/v1/token"
	impersonationURL = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/%s:generateAccessToken"
	jwtTokenType     = "urn:ietf:params:oauth:token-type:jwt"
	storageScope     = "https://www.googleapis.com/auth/devstorage.read_write"
)

// federated exchanges the ServiceAccount token for Google credentials:
// Workload Identity Federation with Kubernetes as the OIDC provider, then
// optionally impersonating a Google service account.
func federated(id *store.Identity, gate *store.Gate) (*auth.Credentials, error) {
	opts := &externalaccount.Options{
		Client:               store.HTTPClient(gate),
		Audience:             id.Audience,
		SubjectTokenType:     jwtTokenType,
		TokenURL:             stsURL,
		Scopes:               []string{storageScope},
		SubjectTokenProvider: subjectToken(id.Token),
	}
	if id.ServiceAccountEmail != "" {
		opts.ServiceAccountImpersonationURL = fmt.Sprintf(impersonationURL, url.PathEscape(id.ServiceAccountEmail))
	}
	creds, err := externalaccount.NewCredentials(opts)
	if err != nil {
		return nil, fmt.Errorf("workload identity (audience %q): %w", id.Audience, err)
	}
	return creds, nil
}

// oauthCodes are the error codes of OAuth 2.0 (RFC 6749) and token
// exchange (RFC 8693) responses.
var oauthCodes = map[string]bool{
	"invalid_request": true, "invalid_client": true, "invalid_grant": true, "unauthorized_client": true,
	"unsupported_grant_type": true, "invalid_scope": true, "invalid_target": true, "access_denied": true,
}

// oauthCode returns the error code of a token endpoint's JSON answer if it
// is a known one: nothing else of the body.
func oauthCode(body []byte) string {
	var r struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || !oauthCodes[r.Error] {
		return ""
	}
	return r.Error
}

// subjectToken is the ServiceAccount token as Google's external account
// credentials ask for it.
type subjectToken func(context.Context) (string, error)

func (f subjectToken) SubjectToken(ctx context.Context, _ *externalaccount.RequestOptions) (string, error) {
	return f(ctx)
}

// googleTokenURIs are where a service account key may send its signed
// assertion: Google's token endpoints.
var googleTokenURIs = map[string]bool{
	"":                                    true, // the library's default, Google's
	"https://oauth2.googleapis.com/token": true,
	"https://accounts.google.com/o/oauth2/token": true,
}

// checkKey refuses a key that is not a service account's, or whose
// token_uri is not Google's: the key's author would have the reader post
// signed requests to an address of their choosing, past the endpoint
// allow-list. The message quotes nothing of the Secret.
func checkKey(key []byte) error {
	if key == nil {
		return nil
	}
	var k struct {
		Type     string `json:"type"`
		TokenURI string `json:"token_uri"`
	}
	if err := json.Unmarshal(key, &k); err != nil || k.Type != "service_account" {
		return fmt.Errorf("credentials: %s is not a service account's JSON key (\"type\": \"service_account\")", KeyFile)
	}
	if !googleTokenURIs[k.TokenURI] {
		return fmt.Errorf("credentials: %s names a token_uri that is not Google's: shardfeed sends a key's assertions only to https://oauth2.googleapis.com/token", KeyFile)
	}
	return nil
}

// serviceAccountKey reads KeyFile from the source's Secret or directory;
// nil when the source names neither.
func serviceAccountKey(src store.Source) ([]byte, error) {
	if src.Credentials != nil {
		key := src.Credentials[KeyFile]
		if len(key) == 0 {
			return nil, fmt.Errorf("credentials: the Secret needs the key %s (a service account's JSON key)", KeyFile)
		}
		return key, nil
	}
	if src.CredentialsDir == "" {
		return nil, nil
	}
	key, err := os.ReadFile(filepath.Join(src.CredentialsDir, KeyFile))
	if errors.Is(err, os.ErrNotExist) && src.CredentialsOptional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: %w (the Secret needs the key %s, a service account's JSON key)", err, KeyFile)
	}
	return key, nil
}

// gcsStore is a bucket prefix of Google Cloud Storage.
type gcsStore struct {
	client *storage.Client
	bucket string
	prefix string // "" or "a/b/"
	retry  store.Retry
}

func (s *gcsStore) URI() string { return "gs://" + s.bucket + "/" + s.prefix }

// describe turns a client error into one that names the object, the HTTP
// status and the service's reason, never the response's body: a
// googleapi.Error carries the body, which an endpoint the dataset's
// author chose may fill with anything.
func (s *gcsStore) describe(key string, err error) error {
	where := "gs://" + s.bucket + "/" + s.prefix + key
	if errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("%s: %w", where, store.ErrNotFound)
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return &store.StatusError{Err: fmt.Errorf("%s: HTTP 404: the bucket does not exist", where), Status: http.StatusNotFound, Code: "notFound"}
	}
	var ae *auth.Error
	if errors.As(err, &ae) {
		// A token exchange (STS, impersonation): its error prints the body.
		status := 0
		if ae.Response != nil {
			status = ae.Response.StatusCode
		}
		return fmt.Errorf("%s: %w", where, store.ExchangeError("Google's token service", status, oauthCode(ae.Body)))
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return fmt.Errorf("%s: %w", where, err)
	}
	reason := ""
	if len(ge.Errors) > 0 {
		reason = knownReason(ge.Errors[0].Reason)
	}
	e := fmt.Errorf("%s: HTTP %d", where, ge.Code)
	if reason != "" {
		e = fmt.Errorf("%w %s", e, reason)
	}
	switch ge.Code {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %w", e, store.ErrNotFound)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (check the stream's credentials and the bucket's IAM policy)", e)
	}
	return &store.StatusError{Err: e, Status: ge.Code, Code: reason}
}

// reasons are the error reasons Cloud Storage's JSON API answers with;
// any other is text the endpoint chose, and shown as none.
var reasons = map[string]bool{
	"badRequest": true, "invalid": true, "required": true, "notFound": true, "forbidden": true,
	"unauthorized": true, "authError": true, "conflict": true, "conditionNotMet": true, "rateLimitExceeded": true,
	"userRateLimitExceeded": true, "backendError": true, "internalError": true, "serviceUnavailable": true,
	"requestedRangeNotSatisfiable": true, "insufficientPermissions": true, "accountDisabled": true,
	"userProjectMissing": true, "invalidArgument": true, "tooManyRequests": true,
}

func knownReason(r string) string {
	if reasons[r] {
		return r
	}
	return ""
}

func (s *gcsStore) object(key string) *storage.ObjectHandle {
	return s.client.Bucket(s.bucket).Object(s.prefix + key)
}

func (s *gcsStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	var body io.ReadCloser
	err := s.retry.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		if n == 0 {
			if _, err := s.object(key).Attrs(ctx); err != nil {
				cancel()
				return s.describe(key, err)
			}
			body = io.NopCloser(strings.NewReader(""))
			cancel()
			return nil
		}
		r, err := s.object(key).NewRangeReader(store.ObjectBody(ctx), off, n)
		if err != nil {
			cancel()
			return s.describe(key, err)
		}
		// The attempt's timeout covers reading the body; closing ends it.
		body = &store.Body{ReadCloser: r, Ctx: ctx, Cancel: cancel, Describe: func(err error) error { return s.describe(key, err) }}
		return nil
	})
	return body, err
}

func (s *gcsStore) Stat(ctx context.Context, key string) (store.Object, error) {
	return s.retry.Stat(ctx, key, func(ctx context.Context) (store.Object, error) {
		attrs, err := s.object(key).Attrs(ctx)
		if err != nil {
			return store.Object{}, s.describe(key, err)
		}
		return store.Object{Key: key, Size: attrs.Size, ETag: attrs.Etag}, nil
	})
}

func (s *gcsStore) List(ctx context.Context) ([]store.Object, error) {
	return s.retry.List(ctx, func(ctx context.Context, out []store.Object) ([]store.Object, error) {
		it := s.client.Bucket(s.bucket).Objects(ctx, &storage.Query{Prefix: s.prefix})
		for {
			attrs, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return nil, s.describe("", err)
			}
			out = append(out, store.Object{Key: strings.TrimPrefix(attrs.Name, s.prefix), Size: attrs.Size, ETag: attrs.Etag})
		}
	})
}

func (s *gcsStore) ListDir(ctx context.Context, dir string) (store.Listing, error) {
	return s.retry.ListDir(ctx, dir, func(ctx context.Context) (out store.Listing, err error) {
		it := s.client.Bucket(s.bucket).Objects(ctx, &storage.Query{Prefix: s.prefix + dir, Delimiter: "/"})
		for {
			attrs, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return out, s.describe(dir, err)
			}
			if attrs.Prefix != "" { // a common prefix
				out.Dirs = append(out.Dirs, strings.TrimPrefix(attrs.Prefix, s.prefix))
				continue
			}
			out.Objects = append(out.Objects, store.Object{Key: strings.TrimPrefix(attrs.Name, s.prefix), Size: attrs.Size, ETag: attrs.Etag})
		}
	})
}

func (s *gcsStore) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	err := s.object(key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return s.describe(key, err)
	}
	return nil
}

func (s *gcsStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	// One attempt (a reader cannot be replayed); an upload that fails
	// leaves the old object: GCS writes are atomic.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.object(key).NewWriter(ctx)
	w.ChunkSize = 0 // one request: size is known and the object appears whole
	if _, err := io.CopyN(w, r, size); err != nil {
		cancel()
		_ = w.Close()
		return s.describe(key, err)
	}
	if err := w.Close(); err != nil {
		return s.describe(key, err)
	}
	return nil
}
