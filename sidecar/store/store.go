// Package store reads and writes the objects of a stream: an S3-compatible
// bucket prefix (s3://bucket/prefix/) or a local directory (file:///path/).
// Bytes in, bytes out; it knows nothing of shards or formats.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
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
	// Put stores size bytes from r at key, atomically: readers see the old
	// object or the whole new one.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
}

// ErrNotFound is wrapped by errors for objects that do not exist.
var ErrNotFound = errors.New("object not found")

// Source says where a store is and how to reach it: the fields of a
// TrainingDataset stream's source.
type Source struct {
	// URI is s3://bucket/prefix/ or file:///path/.
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
	// Credentials, when not nil, are those keys' values (a Secret's data
	// read through the API) and take the place of CredentialsDir.
	Credentials map[string][]byte
	// Retry is the retry policy of every request; zero: DefaultRetry.
	Retry Retry
}

// Retry is how requests are retried on 5xx responses, timeouts and broken
// connections: exponential backoff with full jitter, until MaxElapsed.
type Retry struct {
	BaseDelay  time.Duration
	MaxDelay   time.Duration
	MaxElapsed time.Duration
	// RequestTimeout bounds one attempt.
	RequestTimeout time.Duration
}

// DefaultRetry rides out an object store that is down for two minutes.
var DefaultRetry = Retry{
	BaseDelay:      200 * time.Millisecond,
	MaxDelay:       10 * time.Second,
	MaxElapsed:     2 * time.Minute,
	RequestTimeout: 5 * time.Minute,
}

func (r Retry) withDefaults() Retry {
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
	return r
}

// Open returns the store of a source.
func Open(ctx context.Context, src Source) (Store, error) {
	u, err := url.Parse(src.URI)
	if err != nil {
		return nil, fmt.Errorf("source URI %q: %w", src.URI, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("source URI %q names host %q: write file:///absolute/path/", src.URI, u.Host)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("source URI %q has no path: write file:///absolute/path/", src.URI)
		}
		return newFileStore(u.Path), nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("source URI %q has no bucket: write s3://bucket/prefix/", src.URI)
		}
		return newS3Store(ctx, src, u.Host, cleanPrefix(u.Path))
	}
	return nil, fmt.Errorf("source URI %q: scheme %q is not supported: use s3:// or file://", src.URI, u.Scheme)
}

// cleanPrefix turns "/a/b" into "a/b/" and "" or "/" into "".
func cleanPrefix(p string) string {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

// checkKey refuses keys that would leave the prefix.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || path.Clean(key) != key || key == ".." || strings.HasPrefix(key, "../") {
		return fmt.Errorf("object key %q is not a plain relative path", key)
	}
	return nil
}
