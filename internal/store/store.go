// Package store is what every object store of a stream implements: list,
// ranged get, stat and put under a prefix, with one retry and error policy
// (Retry, StatusError, ErrNotFound) around them. Bytes in, bytes out; it
// knows nothing of shards or formats.
//
// Each store is a package of its own (internal/store/s3, internal/store/local)
// registered by URI scheme in a Registry; internal/store/stores holds the
// registry every part of shardfeed opens stores with.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Object describes one object of a store, by its key relative to the
// store's prefix.
type Object struct {
	Key  string
	Size int64
	// ETag is the store's version tag, when it has one.
	ETag string
}

// Store is a stream's prefix in object storage.
type Store interface {
	// URI returns the prefix, e.g. "s3://bucket/prefix/".
	URI() string
	// Get returns the bytes [off, off+n) of the object at key; n < 0 reads
	// to the end. The caller closes the reader.
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Stat describes the object at key.
	Stat(ctx context.Context, key string) (Object, error)
	// List returns every object under the prefix, sorted by key.
	List(ctx context.Context) ([]Object, error)
	// ListDir returns one level of the tree under dir ("" for the prefix
	// itself, else a key ending in "/"): the objects directly in it and
	// its sub-directories (keys ending in "/"), each sorted. Nothing under
	// a sub-directory is listed, so a caller walks only the branches it
	// wants (a partitioned table's selected partitions).
	ListDir(ctx context.Context, dir string) (Listing, error)
	// Put stores size bytes from r at key, atomically: readers see the old
	// object or the whole new one.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Delete removes the object at key; a missing object is no error.
	Delete(ctx context.Context, key string) error
}

// Local is a store on this machine's disk: its objects are files.
type Local interface {
	// LocalPath returns the file of the object at key.
	LocalPath(key string) (string, error)
}

// LocalPath returns the file of the object at key when st (or the store
// it wraps) is Local.
func LocalPath(st Store, key string) (string, bool) {
	for st != nil {
		if l, ok := st.(Local); ok {
			p, err := l.LocalPath(key)
			return p, err == nil
		}
		w, ok := st.(interface{ Unwrap() Store })
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	return "", false
}

// Listing is one level of a store's tree.
type Listing struct {
	Dirs    []string
	Objects []Object
}

// CheckDir checks a ListDir argument: "" or a plain relative key ending
// in "/".
func CheckDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !strings.HasSuffix(dir, "/") || CheckKey(strings.TrimSuffix(dir, "/")) != nil {
		return fmt.Errorf("directory %q is not a plain relative path ending in /", dir)
	}
	return nil
}

// ErrNotFound is wrapped by errors for objects that do not exist.
var ErrNotFound = errors.New("object not found")

// Source says where a store is and how to reach it: the fields of a
// TrainingDataset stream's source.
type Source struct {
	// URI is the prefix, <scheme>://…, e.g. s3://bucket/prefix/ or file:///path/.
	URI string
	// Endpoint of an S3-compatible store ("http://minio:9000" or
	// "minio:9000"); empty for AWS S3.
	Endpoint string
	Region   string
	// Insecure allows plain HTTP to the endpoint.
	Insecure bool
	// CredentialsDir holds the files AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY (and optionally AWS_SESSION_TOKEN), as a
	// mounted Kubernetes Secret does. Empty: the default credential chain.
	CredentialsDir string
	// CredentialsOptional says CredentialsDir is shared by the streams of a
	// manifest (the CLI's --credentials-dir): a store whose keys are not in
	// it reads as if no directory were given.
	CredentialsOptional bool
	// Credentials, when not nil, are those keys' values (a Secret's data
	// read through the API) and take the place of CredentialsDir.
	Credentials map[string][]byte
	// ConfigMapsDir is where ConfigMaps the stream names are, as files
	// DIR/<name>/<key> (the sidecar's mounts, the CLI's
	// --configmaps-dir): a tokenizer.json from a ConfigMap is read there.
	ConfigMapsDir string
	// Identity, when not nil, is a workload identity: the store exchanges
	// a Kubernetes ServiceAccount token for the cloud's credentials, and
	// uses nothing else (no Secret, no ambient chain).
	Identity *Identity
	// Endpoints, when not nil, is the platform's policy on hosts and
	// addresses: every request of the store, its token exchanges
	// included, goes only where it allows for that request's use (the
	// manager, the sidecar and the node agent set it; the CLI on a user's
	// own machine does not).
	Endpoints *Endpoints
	// Retry is the retry policy of every request; zero: DefaultRetry.
	Retry Retry
	// Counts, when not nil, counts the store's requests (see Counted).
	Counts *Counts
}

// Identity is a Kubernetes ServiceAccount federated with a cloud: each
// store exchanges Token's JWT with its cloud's security token service (AWS
// STS AssumeRoleWithWebIdentity, Google STS, Microsoft Entra) as that
// cloud's workload identity documents it.
type Identity struct {
	// Token returns a current ServiceAccount token for Audience. The store
	// calls it for each exchange; it caches nothing.
	Token func(ctx context.Context) (string, error)
	// Audience of the token (a Google pool provider's resource name for
	// gs://).
	Audience string
	// RoleARN is the AWS role to assume (s3://).
	RoleARN string
	// ServiceAccountEmail is a Google service account to impersonate (gs://,
	// optional).
	ServiceAccountEmail string
	// ClientID and TenantID are the Entra application (az://).
	ClientID, TenantID string
}

// TokenFile is an Identity's Token for a projected ServiceAccount token:
// the file is read at each exchange, since the kubelet rotates it.
func TokenFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("workload identity token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// ExchangeError is a refused workload identity exchange, as a store reports
// it: the service, the HTTP status (0: none) and the service's error code
// if it is a known one, never the response body, which an endpoint of the
// author's choice could fill.
func ExchangeError(service string, status int, code string) error {
	e := fmt.Sprintf("workload identity: %s refused the ServiceAccount token", service)
	if status != 0 {
		e += fmt.Sprintf(": HTTP %d", status)
	}
	if code != "" {
		e += " " + code
	}
	return fmt.Errorf("%s (check the cloud's federation with the cluster: the ServiceAccount, the audience and the role it may assume)", e)
}

// SecretKeys is what a store needs of a credentials Secret.
type SecretKeys struct {
	// Describe names the keys for messages, e.g. "the keys A and B".
	Describe string
	// Complete reports whether a Secret's data has them.
	Complete func(data map[string][]byte) bool
}

// EndpointURL reads a source's endpoint, "http(s)://host[:port]" or
// "host[:port]" (HTTPS, or plain HTTP when insecure is set, as the s3
// store reads it), refusing plain HTTP unless insecure is set.
func EndpointURL(endpoint string, insecure bool) (*url.URL, error) {
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
		if insecure {
			raw = "http://" + endpoint
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("endpoint %q: write host[:port] or http(s)://host[:port], with no path", endpoint)
	}
	if u.Scheme == "http" && !insecure {
		return nil, fmt.Errorf("endpoint %q is plain HTTP: set insecure: true on the stream's source to allow it", endpoint)
	}
	return &url.URL{Scheme: u.Scheme, Host: u.Host}, nil
}

// Retry is how requests are retried on 5xx responses, timeouts and broken
// connections: exponential backoff with full jitter, until MaxElapsed.
type Retry struct {
	BaseDelay  time.Duration
	MaxDelay   time.Duration
	MaxElapsed time.Duration
	// RequestTimeout bounds one attempt.
	RequestTimeout time.Duration
	// OnRetry, if set, hears of each failed attempt that will be retried:
	// its error (the cause), its number, and the wait before the next. A
	// store that is down must not look like a hung command.
	OnRetry func(err error, attempt int, wait time.Duration)
}

// DefaultMaxElapsed is how long DefaultRetry retries: an object store that
// is down for two minutes is ridden out.
const DefaultMaxElapsed = 2 * time.Minute

// DefaultRetry is the retry of stores opened without their own. A command
// may set it once before it opens any (the CLI's --store-timeout).
var DefaultRetry = Retry{
	BaseDelay:      200 * time.Millisecond,
	MaxDelay:       10 * time.Second,
	MaxElapsed:     DefaultMaxElapsed,
	RequestTimeout: 5 * time.Minute,
}

// WithDefaults fills the fields left zero from DefaultRetry.
func (r Retry) WithDefaults() Retry {
	if r.BaseDelay <= 0 {
		r.BaseDelay = DefaultRetry.BaseDelay
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = DefaultRetry.MaxDelay
	}
	if r.MaxElapsed <= 0 {
		r.MaxElapsed = DefaultRetry.MaxElapsed
	}
	if r.RequestTimeout <= 0 {
		r.RequestTimeout = DefaultRetry.RequestTimeout
	}
	if r.OnRetry == nil {
		r.OnRetry = DefaultRetry.OnRetry
	}
	return r
}

// Opener opens the store of a source whose URI parsed as u, with u.Scheme
// the scheme it is registered under.
type Opener func(ctx context.Context, src Source, u *url.URL) (Store, error)

// Descriptor is everything shardfeed knows of a store, exported by its
// package and looked up by its scheme (stores.Lookup): how to open it,
// what it needs of a credentials Secret, where it reaches without an
// endpoint, and the token audience of its workload identity.
type Descriptor struct {
	Scheme string
	Open   Opener
	// SecretKeys are what it needs of a credentials Secret; a nil
	// Complete: it takes no credentials (file://).
	SecretKeys SecretKeys
	// DefaultHost is the host a source whose URI parsed as u reaches when
	// it names no endpoint, lower-cased (region: the source's); nil: it
	// reaches no network.
	DefaultHost func(u *url.URL, region string) (string, error)
	// Root is the URI of the bucket (or container) a URI of the store is
	// in, ending in "/": keys under it are the objects' paths in the
	// bucket.
	Root func(u *url.URL) (string, error)
	// Account is the storage account a URI names, to which the stream's
	// credentials are bound ("": none, the store's credentials are not
	// an account's); nil: none.
	Account func(u *url.URL) string
	// Audience is the token audience of a workload identity that names
	// none; "": the source must name its own (a Google pool provider).
	Audience string
	// AudienceAllowed reports whether a workload identity's audience is
	// one of this store's cloud's token exchanges.
	AudienceAllowed func(audience string) bool
	// Cloud names the cloud whose hosts CloudHosts are ("aws"); "" for a
	// store of no cloud.
	Cloud string
	// CloudHosts are the hosts the cloud operates for the store and its
	// token exchange, per partition and use; CloudDomains the domains it
	// owns, where plain HTTP is refused.
	CloudHosts   []CloudHost
	CloudDomains []string
}

// Registry maps URI schemes to the stores that open them.
type Registry map[string]Opener

// Open returns the store of a source, by its URI's scheme.
func (r Registry) Open(ctx context.Context, src Source) (Store, error) {
	u, err := url.Parse(src.URI)
	if err != nil {
		return nil, fmt.Errorf("source URI %q: %w", src.URI, err)
	}
	open, ok := r[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("source URI %q: scheme %q is not supported: use %s", src.URI, u.Scheme, r.schemes())
	}
	c := src.Counts
	if c == nil {
		return open(ctx, src, u)
	}
	heard := src.Retry.OnRetry
	src.Retry.OnRetry = func(err error, attempt int, wait time.Duration) {
		c.Retries.Add(1)
		if heard != nil {
			heard(err, attempt, wait)
		}
	}
	st, err := open(ctx, src, u)
	if err != nil {
		return nil, err
	}
	return Counted(st, c), nil
}

// schemes lists the registered schemes, sorted, as "file:// or s3://".
func (r Registry) schemes() string {
	names := make([]string, 0, len(r))
	for s := range r {
		names = append(names, s+"://")
	}
	slices.Sort(names)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// CleanPrefix turns "/a/b" into "a/b/" and "" or "/" into "".
func CleanPrefix(p string) string {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

// CheckKey refuses keys that would leave the prefix; every store checks
// each key it is given.
func CheckKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || path.Clean(key) != key || key == ".." || strings.HasPrefix(key, "../") {
		return fmt.Errorf("object key %q is not a plain relative path", key)
	}
	return nil
}

// Body is an object's body read under its request attempt's context (see
// Retry.Do): Close releases the context, and a read error says why the
// attempt stopped (its timeout) and, through Describe, which object.
type Body struct {
	io.ReadCloser
	Ctx    context.Context
	Cancel context.CancelFunc
	// Describe turns a read error into the store's error for the object.
	Describe func(error) error
}

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		if cause := context.Cause(b.Ctx); cause != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		err = b.Describe(err)
	}
	return n, err
}

// Close closes the body and releases the attempt's context.
func (b *Body) Close() error {
	defer b.Cancel()
	return b.ReadCloser.Close()
}

// BucketRoot is the root of a store whose URIs name a bucket as their
// host (s3://bucket/…, gs://bucket/…, abfss://container@account…/…):
// the scheme, the host (with its user part) and "/".
func BucketRoot(u *url.URL) (string, error) {
	if u.Host == "" {
		return "", fmt.Errorf("%q names no bucket", u.String())
	}
	host := u.Host
	if u.User != nil { // abfss://container@account…
		host = u.User.String() + "@" + host
	}
	return u.Scheme + "://" + host + "/", nil
}
