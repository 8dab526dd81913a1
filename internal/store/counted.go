package store

import (
	"context"
	"io"
	"sync/atomic"
)

// Counts are the requests a store made, by kind, and the bytes its reads
// returned: what the store's owner is billed per request and per byte.
// Each attempt counts, so a retried read counts twice (Retries says how
// many were retries).
type Counts struct {
	Gets, Stats, Lists, Puts, Deletes, Retries atomic.Int64
	// ReadBytes are the bytes read from the bodies of Gets.
	ReadBytes atomic.Int64
	// AheadGets are the Gets made ahead of any reader's need (Ahead).
	AheadGets atomic.Int64
}

type aheadKey struct{}

// Ahead marks the reads made with ctx as ahead of any reader's need (a
// sidecar's fetch of the next epoch's first shards): counted apart, so
// that the plan's reads stay what the plan says and what reading ahead
// cost is seen.
func Ahead(ctx context.Context) context.Context { return context.WithValue(ctx, aheadKey{}, true) }

// IsAhead says whether ctx was marked by Ahead.
func IsAhead(ctx context.Context) bool { return ctx.Value(aheadKey{}) != nil }

// Requests is every request made, retries included.
func (c *Counts) Requests() int64 {
	return c.Gets.Load() + c.Stats.Load() + c.Lists.Load() + c.Puts.Load() + c.Deletes.Load() + c.Retries.Load()
}

// counted is a Store that counts its requests.
type counted struct {
	Store
	c *Counts
}

// Counted returns st counting its requests into c. A ListDir is one List;
// retries are counted by Registry.Open, which sees the retry policy.
func Counted(st Store, c *Counts) Store { return counted{Store: st, c: c} }

// Unwrap returns the store counted.
func (s counted) Unwrap() Store { return s.Store }

func (s counted) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if IsAhead(ctx) {
		s.c.AheadGets.Add(1)
	}
	s.c.Gets.Add(1)
	r, err := s.Store.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return countingReader{r, &s.c.ReadBytes}, nil
}

func (s counted) Stat(ctx context.Context, key string) (Object, error) {
	s.c.Stats.Add(1)
	return s.Store.Stat(ctx, key)
}

func (s counted) List(ctx context.Context) ([]Object, error) {
	s.c.Lists.Add(1)
	return s.Store.List(ctx)
}

func (s counted) ListDir(ctx context.Context, dir string) (Listing, error) {
	s.c.Lists.Add(1)
	return s.Store.ListDir(ctx, dir)
}

func (s counted) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	s.c.Puts.Add(1)
	return s.Store.Put(ctx, key, r, size)
}

func (s counted) Delete(ctx context.Context, key string) error {
	s.c.Deletes.Add(1)
	return s.Store.Delete(ctx, key)
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}
