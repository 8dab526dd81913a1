// Package azure is the store of az://account/container/prefix/ URIs (and
// the abfss://container@account.dfs.core.windows.net/prefix/ form users
// paste): Azure Blob Storage with a shared key, a SAS token or a
// connection string from a Secret, or the platform's identity (AKS
// workload identity), or an Azure-compatible endpoint (Azurite).
package azure

import (
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

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Schemes this store is registered under.
const (
	Scheme      = "az"
	SchemeABFSS = "abfss"
)

// Keys of a Secret (files of a credentials directory): one of them.
const (
	KeyFile              = "AZURE_STORAGE_KEY"
	SASFile              = "AZURE_STORAGE_SAS_TOKEN"
	ConnectionStringFile = "AZURE_STORAGE_CONNECTION_STRING"
)

// Audience is the token audience Entra's token exchange expects.
const Audience = "api://AzureADTokenExchange"

// The store's entries in stores.Default: az://account/container/prefix
// and abfss://container@account.dfs.core.windows.net/prefix, both read
// through the account's blob endpoint.
var (
	Descriptor      = descriptor(Scheme)
	DescriptorABFSS = descriptor(SchemeABFSS)
)

// containerRoot is an az:// URI's container: az://account/container/.
func containerRoot(u *url.URL) (string, error) {
	container, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if u.Host == "" || container == "" {
		return "", fmt.Errorf("%q names no account and container (az://account/container/…)", u.String())
	}
	return "az://" + u.Host + "/" + container + "/", nil
}

func descriptor(scheme string) store.Descriptor {
	root := store.BucketRoot
	if scheme == Scheme {
		root = containerRoot
	}
	return store.Descriptor{Scheme: scheme, Open: Open, SecretKeys: SecretKeys, Audience: Audience, AudienceAllowed: AudienceAllowed, Root: root,
		DefaultHost: func(u *url.URL, _ string) (string, error) { return Account(u) + ".blob.core.windows.net", nil },
		Account:     Account, Cloud: Cloud, CloudHosts: CloudHosts, CloudDomains: CloudDomains}
}

// Open returns the store of an az:// or abfss:// source.
func Open(ctx context.Context, src store.Source, u *url.URL) (store.Store, error) {
	account, containerName, prefix, err := parse(src.URI, u)
	if err != nil {
		return nil, err
	}
	serviceURL := "https://" + account + ".blob.core.windows.net/"
	if src.Endpoint != "" {
		e, err := store.EndpointURL(src.Endpoint, src.Insecure)
		if err != nil {
			return nil, err
		}
		// Emulators address the account by the path's first segment.
		serviceURL = e.Scheme + "://" + e.Host + "/" + account + "/"
	}
	account = strings.ToLower(account)
	client, err := newClient(src, account, serviceURL)
	if err != nil {
		return nil, err
	}
	return &azStore{client: client.ServiceClient().NewContainerClient(containerName), account: account, container: containerName,
		prefix: prefix, retry: src.Retry.WithDefaults()}, nil
}

// accountName is a storage account's name, as Azure allows it.
var accountName = regexp.MustCompile(`^[a-zA-Z0-9]{3,24}$`)

// parse reads az://account/container/prefix/ and
// abfss://container@account.dfs.core.windows.net/prefix/.
func parse(uri string, u *url.URL) (account, containerName, prefix string, err error) {
	switch u.Scheme {
	case Scheme:
		account = u.Host
		containerName, rest, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if account == "" || containerName == "" {
			return "", "", "", fmt.Errorf("source URI %q: write az://<account>/<container>/<prefix>/", uri)
		}
		if !accountName.MatchString(account) {
			return "", "", "", fmt.Errorf("source URI %q: %q is not a storage account's name (3 to 24 lower-case letters and digits): write az://<account>/<container>/<prefix>/", uri, account)
		}
		return account, containerName, store.CleanPrefix(rest), nil
	case SchemeABFSS:
		host, found := strings.CutSuffix(u.Hostname(), ".dfs.core.windows.net")
		if u.User == nil || u.User.Username() == "" || !found || !accountName.MatchString(host) {
			return "", "", "", fmt.Errorf("source URI %q: write abfss://<container>@<account>.dfs.core.windows.net/<prefix>/ or az://<account>/<container>/<prefix>/", uri)
		}
		return host, u.User.Username(), store.CleanPrefix(u.Path), nil
	}
	return "", "", "", fmt.Errorf("source URI %q: not an Azure Blob URI", uri)
}

// clientOptions leaves retries to store.Retry (one attempt per request)
// and sends every request through the store's client (store.HTTPClient:
// bodies capped, no redirect to another host, where the SharedKey
// signature or the SAS token would follow), to the account's hosts (or
// the platform's) only.
func clientOptions(gate *store.Gate) *azblob.ClientOptions {
	return &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1},
		Transport: store.HTTPClient(gate)}}
}

// identityOptions are the options of a workload identity's Entra
// credential: its token requests through the store's client, to Entra's
// hosts (or the platform's) only.
func identityOptions(src store.Source) azcore.ClientOptions {
	return azcore.ClientOptions{Transport: store.HTTPClient(src.Endpoints.Gate(Cloud, store.UseToken, ""))}
}

// newClient picks the credential: a connection string, a shared key or a
// SAS token from the source's Secret or directory; else the platform's
// identity (workload identity, managed identity, the environment).
func newClient(src store.Source, account, serviceURL string) (*azblob.Client, error) {
	gate := src.Endpoints.Gate(Cloud, store.UseStorage, account)
	if id := src.Identity; id != nil {
		// Microsoft Entra Workload ID: the ServiceAccount token is the
		// client assertion of the federated application.
		cred, err := azidentity.NewClientAssertionCredential(id.TenantID, id.ClientID, id.Token,
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: identityOptions(src)})
		if err != nil {
			return nil, fmt.Errorf("workload identity (tenant %q, client %q): %w", id.TenantID, id.ClientID, err)
		}
		return azblob.NewClient(serviceURL, cred, clientOptions(gate))
	}
	creds, err := secretKeys(src)
	if err != nil {
		return nil, err
	}
	switch {
	case creds[ConnectionStringFile] != "":
		partition, err := checkConnectionString(src, account, creds[ConnectionStringFile])
		if err != nil {
			return nil, err
		}
		gate = gate.InPartition(partition)
		c, err := azblob.NewClientFromConnectionString(creds[ConnectionStringFile], clientOptions(gate))
		if err != nil {
			return nil, fmt.Errorf("credentials: %s is not a connection string Azure accepts", ConnectionStringFile)
		}
		return c, nil
	case creds[KeyFile] != "":
		key, err := azblob.NewSharedKeyCredential(account, creds[KeyFile])
		if err != nil {
			return nil, fmt.Errorf("credentials: %s is not a storage account key (base64)", KeyFile)
		}
		return azblob.NewClientWithSharedKeyCredential(serviceURL, key, clientOptions(gate))
	case creds[SASFile] != "":
		return azblob.NewClientWithNoCredential(serviceURL+"?"+strings.TrimPrefix(creds[SASFile], "?"), clientOptions(gate))
	case src.Credentials != nil || src.CredentialsDir != "" && !src.CredentialsOptional:
		return nil, fmt.Errorf("credentials: the Secret needs one of the keys %s, %s or %s", KeyFile, SASFile, ConnectionStringFile)
	case src.Endpoint != "":
		// An endpoint of the author's (an emulator, a public container)
		// never gets the platform's own identity's token: anonymous.
		return azblob.NewClientWithNoCredential(serviceURL, clientOptions(gate))
	}
	// The platform's own identity: its token hosts are the environment's
	// (managed identity's metadata address, the federated token's
	// authority), never the author's, so only its store requests are gated.
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: azcore.ClientOptions{Transport: store.HTTPClient(nil)}})
	if err != nil {
		return nil, fmt.Errorf("no credentials for %s: name a Secret with %s, %s or %s, or give the pod a workload identity (%w)",
			serviceURL, KeyFile, SASFile, ConnectionStringFile, err)
	}
	return azblob.NewClient(serviceURL, cred, clientOptions(gate))
}

// SecretKeys is what the store needs of a credentials Secret.
var SecretKeys = store.SecretKeys{
	Describe: "one of the keys " + KeyFile + ", " + SASFile + " or " + ConnectionStringFile,
	Complete: func(data map[string][]byte) bool {
		return len(data[KeyFile]) > 0 || len(data[SASFile]) > 0 || len(data[ConnectionStringFile]) > 0
	},
}

// secretKeys reads the credential keys a source's Secret or directory has.
func secretKeys(src store.Source) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range []string{KeyFile, SASFile, ConnectionStringFile} {
		switch {
		case src.Credentials != nil:
			out[k] = strings.TrimSpace(string(src.Credentials[k]))
		case src.CredentialsDir != "":
			b, err := os.ReadFile(filepath.Join(src.CredentialsDir, k))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("credentials: %w", err)
			}
			out[k] = strings.TrimSpace(string(b))
		}
	}
	return out, nil
}

// azStore is a container prefix of Azure Blob Storage.
type azStore struct {
	client                     *container.Client
	account, container, prefix string
	retry                      store.Retry
}

func (s *azStore) URI() string { return "az://" + s.account + "/" + s.container + "/" + s.prefix }

// describe turns an SDK error into one that names the blob, the HTTP
// status and Azure's error code, never the response's body (which
// azcore.ResponseError keeps, and an endpoint may fill with anything).
func (s *azStore) describe(key string, err error) error {
	where := s.URI() + key
	var af *azidentity.AuthenticationFailedError
	if errors.As(err, &af) {
		// Microsoft Entra's refusal: its error prints the body.
		status := 0
		if af.RawResponse != nil {
			status = af.RawResponse.StatusCode
		}
		return fmt.Errorf("%s: %w", where, store.ExchangeError("Microsoft Entra ID", status, ""))
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", where, err)
	}
	code := knownCode(re.ErrorCode)
	e := fmt.Errorf("%s: HTTP %d", where, re.StatusCode)
	if code != "" {
		e = fmt.Errorf("%w %s", e, code)
	}
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound) || re.StatusCode == http.StatusNotFound && code != string(bloberror.ContainerNotFound):
		return fmt.Errorf("%w: %w", e, store.ErrNotFound)
	case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w (check the stream's credentials and the account's access rules)", e)
	}
	return &store.StatusError{Err: e, Status: re.StatusCode, Code: code}
}

// knownCode returns code if it is one of Blob Storage's error codes, else
// "": any other is text the endpoint chose.
func knownCode(code string) string {
	for _, c := range []bloberror.Code{bloberror.AuthenticationFailed, bloberror.AuthorizationFailure, bloberror.AuthorizationPermissionMismatch,
		bloberror.BlobNotFound, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted, bloberror.InternalError, bloberror.InvalidRange,
		bloberror.OperationTimedOut, bloberror.ServerBusy, bloberror.InvalidQueryParameterValue, bloberror.InvalidHeaderValue,
		bloberror.AccountIsDisabled, bloberror.InsufficientAccountPermissions, bloberror.ResourceNotFound, bloberror.InvalidAuthenticationInfo} {
		if string(c) == code {
			return code
		}
	}
	return ""
}

func (s *azStore) blob(key string) *blob.Client { return s.client.NewBlobClient(s.prefix + key) }

func (s *azStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	var body io.ReadCloser
	err := s.retry.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
		if n == 0 {
			defer cancel()
			if _, err := s.blob(key).GetProperties(ctx, nil); err != nil {
				return s.describe(key, err)
			}
			body = io.NopCloser(strings.NewReader(""))
			return nil
		}
		opts := &blob.DownloadStreamOptions{}
		if off > 0 || n > 0 {
			opts.Range = blob.HTTPRange{Offset: off, Count: max(n, 0)}
		}
		resp, err := s.blob(key).DownloadStream(store.ObjectBody(ctx), opts)
		if err != nil {
			cancel()
			return s.describe(key, err)
		}
		// The attempt's timeout covers reading the body; closing ends it.
		body = &store.Body{ReadCloser: resp.Body, Ctx: ctx, Cancel: cancel, Describe: func(err error) error { return s.describe(key, err) }}
		return nil
	})
	return body, err
}

func (s *azStore) Stat(ctx context.Context, key string) (store.Object, error) {
	return s.retry.Stat(ctx, key, func(ctx context.Context) (store.Object, error) {
		p, err := s.blob(key).GetProperties(ctx, nil)
		if err != nil {
			return store.Object{}, s.describe(key, err)
		}
		out := store.Object{Key: key, Size: deref(p.ContentLength)}
		if p.ETag != nil {
			out.ETag = string(*p.ETag)
		}
		return out, nil
	})
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// listPage is the blobs a listing asks for a page: 1000, as S3 and Cloud
// Storage answer, so that a page stays well under store.MaxAnswerBody
// (Blob Storage's own default is 5000).
var listPage = int32(1000)

func (s *azStore) List(ctx context.Context) ([]store.Object, error) {
	return s.retry.List(ctx, func(ctx context.Context, out []store.Object) ([]store.Object, error) {
		prefix := s.prefix
		pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix, MaxResults: &listPage})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, s.describe("", err)
			}
			for _, b := range page.Segment.BlobItems {
				if o, ok := s.object(b); ok {
					out = append(out, o)
				}
			}
		}
		return out, nil
	})
}

// object describes a listed blob; false for one the listing left
// undescribed.
func (s *azStore) object(b *container.BlobItem) (store.Object, bool) {
	if b.Name == nil || b.Properties == nil {
		return store.Object{}, false
	}
	o := store.Object{Key: strings.TrimPrefix(*b.Name, s.prefix), Size: deref(b.Properties.ContentLength)}
	if b.Properties.ETag != nil {
		o.ETag = string(*b.Properties.ETag)
	}
	return o, true
}

func (s *azStore) ListDir(ctx context.Context, dir string) (store.Listing, error) {
	return s.retry.ListDir(ctx, dir, func(ctx context.Context) (out store.Listing, err error) {
		prefix := s.prefix + dir
		pager := s.client.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: &prefix, MaxResults: &listPage})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return out, s.describe(dir, err)
			}
			for _, p := range page.Segment.BlobPrefixes {
				if p.Name != nil {
					out.Dirs = append(out.Dirs, strings.TrimPrefix(*p.Name, s.prefix))
				}
			}
			for _, b := range page.Segment.BlobItems {
				if o, ok := s.object(b); ok {
					out.Objects = append(out.Objects, o)
				}
			}
		}
		return out, nil
	})
}

func (s *azStore) Delete(ctx context.Context, key string) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if _, err := s.blob(key).Delete(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return s.describe(key, err)
	}
	return nil
}

func (s *azStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := store.CheckKey(key); err != nil {
		return err
	}
	// One attempt (a reader cannot be replayed). Blocks are committed in
	// one list at the end: readers see the old blob or the whole new one.
	_, err := s.client.NewBlockBlobClient(s.prefix+key).UploadStream(ctx, io.LimitReader(r, size), nil)
	if err != nil {
		return s.describe(key, err)
	}
	return nil
}
