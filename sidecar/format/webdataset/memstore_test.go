package webdataset

import (
	"bytes"
	"context"
	"io"

	"github.com/shardfeed/shardfeed/internal/store"
)

// memStore is one object "t" in memory, for the fuzzer's ranged walk.
type memStore []byte

func (m memStore) URI() string { return "mem://" }
func (m memStore) Get(_ context.Context, _ string, off, n int64) (io.ReadCloser, error) {
	if off > int64(len(m)) {
		off = int64(len(m))
	}
	end := int64(len(m))
	if n >= 0 && off+n < end {
		end = off + n
	}
	return io.NopCloser(bytes.NewReader(m[off:end])), nil
}
func (m memStore) Stat(context.Context, string) (store.Object, error) {
	return store.Object{Key: "t", Size: int64(len(m))}, nil
}
func (m memStore) List(context.Context) ([]store.Object, error) {
	return []store.Object{{Key: "t", Size: int64(len(m))}}, nil
}
func (m memStore) ListDir(context.Context, string) (store.Listing, error) {
	return store.Listing{}, nil
}
func (m memStore) Put(context.Context, string, io.Reader, int64) error { return nil }
func (m memStore) Delete(context.Context, string) error                { return nil }
