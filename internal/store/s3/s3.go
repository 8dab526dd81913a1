// Package s3 is the store of s3://bucket/prefix/ URIs: AWS S3 or any
// S3-compatible endpoint (MinIO, Ceph, R2, …), with the credentials of a
// Secret or the default AWS chain.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Scheme is the URI scheme this store is registered under.
const Scheme = "s3"

// Audience is the token audience AWS STS expects of a web identity.
const Audience = "sts.amazonaws.com"

// Descriptor is the store's entry in stores.Default.
var Descriptor = store.Descriptor{Scheme: Scheme, Open: Open, SecretKeys: SecretKeys, Root: store.BucketRoot,
	DefaultHost: DefaultHost, Audience: Audience, AudienceAllowed: AudienceAllowed,
	Cloud: Cloud, CloudHosts: CloudHosts, CloudDomains: CloudDomains}

// Cloud is the name of AWS's hosts in a policy (store.CloudHost.Cloud).
const Cloud = "aws"

// Open returns the store of an s3:// source.
func Open(ctx context.Context, src store.Source, u *url.URL) (store.Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("source URI %q has no bucket: write s3://bucket/prefix/", src.URI)
	}
	return newS3Store(ctx, src, u.Host, store.CleanPrefix(u.Path))
}

// s3Store is a bucket prefix of an S3-compatible store.
type s3Store struct {
	client *minio.Client
	bucket string
	prefix string // "" or "a/b/"
	retry  store.Retry
}

func newS3Store(_ context.Context, src store.Source, bucket, prefix string) (*s3Store, error) {
	if err := CheckRegion(src.Region); err != nil {
		return nil, err
	}
	creds, err := credentialsFor(src)
	if err != nil {
		return nil, err
	}
	endpoint, secure, lookup := "s3.amazonaws.com", true, minio.BucketLookupAuto
	if src.Endpoint == "" {
		// The region selects the partition, and with it the hosts minio-go
		// reaches: a region of none is refused here, before any request.
		if _, err := DefaultHost(nil, src.Region); err != nil {
			return nil, err
		}
	} else {
		endpoint, secure, err = parseEndpoint(src.Endpoint)
		if err != nil {
			return nil, err
		}
		// Other stores are reached path-style: MinIO and most others do
		// not have a DNS name per bucket.
		lookup = minio.BucketLookupPath
	}
	if src.Insecure {
		secure = false
	} else if !secure {
		return nil, fmt.Errorf("endpoint %q is plain HTTP: set insecure: true on the stream's source to allow it", src.Endpoint)
	}
	client, err := minio.New(endpoint, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Region:       src.Region,
		BucketLookup: lookup,
		// Bodies capped (an endpoint is the author's choice), each request
		// to S3's hosts or the platform's only; minio-go follows no
		// redirects.
		Transport: store.Transport(src.Endpoints.Gate(Cloud, store.UseStorage, "")),
		// Retries are ours (Retry): one attempt per request here.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", src.Endpoint, err)
	}
	return &s3Store{client: client, bucket: bucket, prefix: prefix, retry: src.Retry.WithDefaults()}, nil
}

// parseEndpoint accepts "host:port" or "http(s)://host:port".
func parseEndpoint(e string) (host string, secure bool, err error) {
	if !strings.Contains(e, "://") {
		return e, true, nil
	}
	u, err := url.Parse(e)
	if err != nil {
		return "", false, fmt.Errorf("endpoint %q: %w", e, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", false, fmt.Errorf("endpoint %q: write host:port or http(s)://host:port", e)
	}
	return u.Host, u.Scheme == "https", nil
}

// Credential files of a mounted Secret.
const (
	AccessKeyFile    = "AWS_ACCESS_KEY_ID"
	SecretKeyFile    = "AWS_SECRET_ACCESS_KEY"
	SessionTokenFile = "AWS_SESSION_TOKEN"
)

// SecretKeys is what the store needs of a credentials Secret.
var SecretKeys = store.SecretKeys{
	Describe: "the keys " + AccessKeyFile + " and " + SecretKeyFile,
	Complete: func(data map[string][]byte) bool {
		return len(bytes.TrimSpace(data[AccessKeyFile])) > 0 && len(bytes.TrimSpace(data[SecretKeyFile])) > 0
	},
}

// regionPattern is what an AWS region (us-east-1, us-gov-west-1) or an
// S3-compatible store's region name may hold: letters, digits and
// hyphens. Nothing that could end a host name in a URL built with it.
var regionPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)

// CheckRegion refuses a region that is not a plain region name: it is put
// into host names (sts.<region>.amazonaws.com).
func CheckRegion(region string) error {
	if region == "" || regionPattern.MatchString(region) {
		return nil
	}
	return fmt.Errorf("region %q is not a region name (lower-case letters, digits and hyphens, e.g. us-east-1)", region)
}

// STSURL is where a web identity is exchanged: an S3-compatible store's
// own endpoint (MinIO and Ceph serve STS there), else AWS's regional STS
// in the region's partition, else its global one. An endpoint of AWS's
// own (s3.eu-west-1.amazonaws.com) exchanges at AWS STS, never at S3.
func STSURL(src store.Source) (*url.URL, error) {
	if src.Endpoint != "" {
		u, err := store.EndpointURL(src.Endpoint, src.Insecure)
		if err != nil || !isAWSHost(u.Hostname()) {
			return u, err
		}
	}
	host, err := partitionHost("sts", src.Region)
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "https", Host: host}, nil
}

// tokenTimeout bounds one request for a workload identity token.
const tokenTimeout = 30 * time.Second

// webIdentity assumes id.RoleARN with the ServiceAccount token (STS
// AssumeRoleWithWebIdentity, as IAM roles for service accounts do), at
// the source's endpoint or the regional STS of its region.
func webIdentity(src store.Source, id *store.Identity) (*credentials.Credentials, error) {
	sts, err := STSURL(src)
	if err != nil {
		return nil, err
	}
	// Checked here too, so that a refused STS is said before any token is
	// requested; the client checks every request again.
	gate := src.Endpoints.Gate(Cloud, store.UseToken, "")
	if err := gate.Check(sts.Scheme, sts.Host); err != nil {
		return nil, fmt.Errorf("workload identity: AWS STS at %s: %w", sts.Host, err)
	}
	creds, err := credentials.NewSTSWebIdentity(sts.String(), func() (*credentials.WebIdentityToken, error) {
		ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
		defer cancel()
		token, err := id.Token(ctx)
		if err != nil {
			return nil, err
		}
		return &credentials.WebIdentityToken{Token: token}, nil
	}, func(w *credentials.STSWebIdentity) {
		w.RoleARN = id.RoleARN
		w.Client = store.HTTPClient(gate)
	})
	if err != nil {
		return nil, err
	}
	return credentials.New(&stsProvider{creds: creds}), nil
}

// stsProvider is a web identity whose errors carry the STS's error code
// if it is a known one, never its message.
type stsProvider struct{ creds *credentials.Credentials }

func (p *stsProvider) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	v, err := p.creds.GetWithContext(cc)
	return v, stsError(err)
}

func (p *stsProvider) Retrieve() (credentials.Value, error) {
	v, err := p.creds.GetWithContext(nil)
	return v, stsError(err)
}

func (p *stsProvider) IsExpired() bool { return p.creds.IsExpired() }

// stsCodes are AssumeRoleWithWebIdentity's documented error codes.
var stsCodes = map[string]bool{
	"AccessDenied": true, "ExpiredTokenException": true, "IDPCommunicationError": true, "IDPRejectedClaim": true,
	"InvalidIdentityToken": true, "MalformedPolicyDocument": true, "PackedPolicyTooLarge": true, "RegionDisabledException": true,
	"InvalidParameterValue": true, "InvalidClientTokenId": true,
}

func stsError(err error) error {
	if err == nil {
		return nil
	}
	var resp credentials.ErrorResponse
	if errors.As(err, &resp) {
		code := resp.STSError.Code
		if !stsCodes[code] {
			code = ""
		}
		return store.ExchangeError("AWS STS (AssumeRoleWithWebIdentity)", 0, code)
	}
	var netErr *url.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("workload identity: AWS STS: %w", err)
	}
	// Anything else came of a response the STS could not decode: say so,
	// without it.
	return store.ExchangeError("AWS STS (AssumeRoleWithWebIdentity)", 0, "")
}

// credentialsFor returns static credentials from the files of dir, or the
// default chain: environment, ~/.aws/credentials, then IAM (web identity /
// IRSA token file, ECS, EC2 instance metadata).
func credentialsFor(src store.Source) (*credentials.Credentials, error) {
	if id := src.Identity; id != nil {
		return webIdentity(src, id)
	}
	dir := src.CredentialsDir
	if src.Credentials != nil {
		key, secret := strings.TrimSpace(string(src.Credentials[AccessKeyFile])), strings.TrimSpace(string(src.Credentials[SecretKeyFile]))
		if key == "" || secret == "" {
			return nil, fmt.Errorf("credentials: the Secret needs the keys %s and %s", AccessKeyFile, SecretKeyFile)
		}
		return credentials.NewStaticV4(key, secret, strings.TrimSpace(string(src.Credentials[SessionTokenFile]))), nil
	}
	if src.CredentialsOptional {
		if _, err := os.Stat(filepath.Join(dir, AccessKeyFile)); errors.Is(err, os.ErrNotExist) {
			dir = ""
		}
	}
	if dir == "" {
		return credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.EnvMinio{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{Client: store.HTTPClient(nil)},
		}), nil
	}
	read := func(name string, required bool) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && !required {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("credentials: %w (the Secret needs the keys %s and %s)", err, AccessKeyFile, SecretKeyFile)
		}
		return strings.TrimSpace(string(b)), nil
	}
	key, err := read(AccessKeyFile, true)
	if err != nil {
		return nil, err
	}
	secret, err := read(SecretKeyFile, true)
	if err != nil {
		return nil, err
	}
	token, err := read(SessionTokenFile, false)
	if err != nil {
		return nil, err
	}
	return credentials.NewStaticV4(key, secret, token), nil
}

func (s *s3Store) URI() string { return "s3://" + s.bucket + "/" + s.prefix }

// describe turns a minio-go error into one that names the bucket, the key,
// the HTTP status and the S3 error code, and never carries the response's
// body: an endpoint is the dataset author's choice, and what it answers
// (minio-go puts a body that is not S3's XML into Message, and an XML
// body's text too) would reach the dataset's status, events and logs.
func (s *s3Store) describe(key string, err error) error {
	var resp minio.ErrorResponse
	switch {
	case errors.As(err, &resp) && resp.StatusCode == 0:
		// A 2xx answer minio-go could not read (a Last-Modified or
		// Content-Length it cannot parse): its Message quotes the
		// endpoint's header, so only its code is said.
		return &store.StatusError{Err: fmt.Errorf("s3://%s/%s%s: the endpoint's answer is not one S3 gives (%s; its Last-Modified or Content-Length header does not parse): check the stream's endpoint",
			s.bucket, s.prefix, key, knownCode(resp.Code)), Code: knownCode(resp.Code)}
	case !errors.As(err, &resp):
		return fmt.Errorf("s3://%s/%s%s: %w", s.bucket, s.prefix, key, err)
	}
	resp.Code = knownCode(resp.Code)
	e := fmt.Errorf("s3://%s/%s%s: HTTP %d", s.bucket, s.prefix, key, resp.StatusCode)
	if resp.Code != "" {
		e = fmt.Errorf("%w %s", e, resp.Code)
	}
	switch {
	case resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket":
		return fmt.Errorf("%w: %w", e, store.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden || resp.Code == "AccessDenied" || resp.Code == "InvalidAccessKeyId" || resp.Code == "SignatureDoesNotMatch":
		return fmt.Errorf("%w (check the stream's credentials and the bucket policy)", e)
	}
	return &store.StatusError{Err: e, Status: resp.StatusCode, Code: resp.Code}
}

func (s *s3Store) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	var body io.ReadCloser
	err := s.retry.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		opts := minio.GetObjectOptions{}
		if off > 0 || n >= 0 {
			end := int64(0)
			if n >= 0 {
				if n == 0 {
					body = io.NopCloser(strings.NewReader(""))
					cancel()
					return nil
				}
				end = off + n - 1
			}
			if err := opts.SetRange(off, end); err != nil {
				cancel()
				return err
			}
		}
		// Core's GetObject is one GET whose status is read here; the
		// Client's Object would send a HEAD first to show errors before
		// the first read, two round trips an object.
		getCtx, release := store.HeldObjectBody(ctx)
		obj, _, header, err := minio.Core{Client: s.client}.GetObject(getCtx, s.bucket, s.prefix+key, opts)
		release()
		if err == nil {
			err = checkRange(header.Get("Content-Range"), off, n)
		}
		if err != nil {
			cancel()
			if obj != nil {
				_ = obj.Close()
			}
			return s.describe(key, err)
		}
		// The attempt's timeout covers reading the body; closing ends it.
		body = &store.Body{ReadCloser: obj, Ctx: ctx, Cancel: cancel, Describe: func(err error) error { return s.describe(key, err) }}
		return nil
	})
	return body, err
}

// checkRange refuses an answer to a read from off (of n bytes, n < 0: to
// the end) that is not of those bytes: a store that ignored the range
// answers the whole object (no Content-Range), which reads as the bytes
// asked for only from offset 0; one that answered another range says so.
func checkRange(contentRange string, off, n int64) error {
	if contentRange == "" {
		if off > 0 {
			return fmt.Errorf("the endpoint answered a read from byte %d with the whole object (no Content-Range): %w", off, errWrongRange)
		}
		return nil
	}
	var first, last int64
	var total string
	if _, err := fmt.Sscanf(contentRange, "bytes %d-%d/%s", &first, &last, &total); err != nil || first != off || last < first ||
		n >= 0 && last > off+n-1 {
		return fmt.Errorf("the endpoint answered a read of bytes %d to %d with another range (%.80q): %w", off, off+n-1, contentRange, errWrongRange)
	}
	return nil
}

// errWrongRange is an answer of other bytes than those asked for.
var errWrongRange = errors.New("not the range asked for")

func (s *s3Store) Stat(ctx context.Context, key string) (store.Object, error) {
	return s.retry.Stat(ctx, key, func(ctx context.Context) (store.Object, error) {
		info, err := s.client.StatObject(ctx, s.bucket, s.prefix+key, minio.StatObjectOptions{})
		if err != nil {
			return store.Object{}, s.describe(key, err)
		}
		return store.Object{Key: key, Size: info.Size, ETag: info.ETag}, nil
	})
}

func (s *s3Store) List(ctx context.Context) ([]store.Object, error) {
	return s.retry.List(ctx, func(ctx context.Context, out []store.Object) ([]store.Object, error) {
		for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
			if info.Err != nil {
				return nil, s.describe("", info.Err)
			}
			out = append(out, store.Object{Key: strings.TrimPrefix(info.Key, s.prefix), Size: info.Size, ETag: info.ETag})
		}
		return out, nil
	})
}

func (s *s3Store) ListDir(ctx context.Context, dir string) (store.Listing, error) {
	return s.retry.ListDir(ctx, dir, func(ctx context.Context) (out store.Listing, err error) {
		for info := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + dir}) {
			if info.Err != nil {
				return out, s.describe(dir, info.Err)
			}
			key := strings.TrimPrefix(info.Key, s.prefix)
			if strings.HasSuffix(key, "/") { // a common prefix
				out.Dirs = append(out.Dirs, key)
				continue
			}
			out.Objects = append(out.Objects, store.Object{Key: key, Size: info.Size, ETag: info.ETag})
		}
		return out, nil
	})
}

func (s *s3Store) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	// S3 answers 204 for a missing key too.
	if err := s.client.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return s.describe(key, err)
	}
	return nil
}

func (s *s3Store) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	// A reader cannot be replayed, so Put is one attempt; S3 PUTs are
	// atomic, so a failed one leaves the old object.
	_, err := s.client.PutObject(ctx, s.bucket, s.prefix+key, r, size, minio.PutObjectOptions{})
	if err != nil {
		return s.describe(key, err)
	}
	return nil
}
