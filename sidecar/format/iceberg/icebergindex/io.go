package icebergindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	icebergio "github.com/apache/iceberg-go/io"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// MaxMetadataBytes bounds one read of a table's metadata file, manifest
// list or manifest: a larger one is refused, whatever the store sends.
const MaxMetadataBytes = 256 << 20

// files reads the files of a table (its metadata, manifests and data
// files) through shardfeed's own stores, with the stream's source
// settings: the endpoint, the credentials and the bounds of every other
// read, never an SDK's ambient chain of its own.
type files struct {
	ctx context.Context
	src store.Source

	mu    sync.Mutex
	roots map[string]store.Store
}

func newFiles(ctx context.Context, src store.Source) *files {
	return &files{ctx: ctx, src: src, roots: map[string]store.Store{}}
}

// locate returns the store of the bucket a file is in and the file's key
// in it. Iceberg writers spell S3 as s3a:// and s3n:// too, and a local
// path with no scheme.
func (f *files) locate(location string) (store.Store, string, error) {
	loc := location
	switch {
	case strings.HasPrefix(loc, "s3a://"), strings.HasPrefix(loc, "s3n://"):
		loc = "s3://" + loc[len("s3a://"):]
	case strings.HasPrefix(loc, "/"):
		loc = "file://" + loc
	}
	root, err := stores.Root(loc)
	if err != nil {
		return nil, "", fmt.Errorf("table file %q: %w", location, err)
	}
	key := strings.TrimPrefix(loc, root)
	if err := store.CheckKey(key); err != nil {
		return nil, "", fmt.Errorf("table file %q: %w", location, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.roots[root]; ok {
		return st, key, nil
	}
	src := f.src
	src.URI = root
	st, err := stores.Open(f.ctx, src)
	if err != nil {
		return nil, "", err
	}
	f.roots[root] = st
	return st, key, nil
}

// Open implements iceberg-go's io.IO: the whole file, read once, bounded.
func (f *files) Open(name string) (icebergio.File, error) {
	st, key, err := f.locate(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := st.Get(f.ctx, key, 0, -1)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer func() { _ = r.Close() }()
	data, err := io.ReadAll(io.LimitReader(r, MaxMetadataBytes+1))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if len(data) > MaxMetadataBytes {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("larger than the %d MiB shardfeed reads of one metadata file or manifest", MaxMetadataBytes>>20)}
	}
	return &memFile{Reader: bytes.NewReader(data), name: name}, nil
}

// Remove implements io.IO: shardfeed index never changes a table.
func (f *files) Remove(name string) error {
	return &fs.PathError{Op: "remove", Path: name, Err: errors.New("shardfeed index reads tables only")}
}

type memFile struct {
	*bytes.Reader
	name string
}

func (m *memFile) Close() error               { return nil }
func (m *memFile) Stat() (fs.FileInfo, error) { return memInfo{m}, nil }

type memInfo struct{ f *memFile }

func (i memInfo) Name() string       { return i.f.name }
func (i memInfo) Size() int64        { return i.f.Size() }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// iceberg-go finds a table's IO by the scheme of its location, in one
// registry of the process: shardfeed's stores take every scheme a table
// may be in, reading through the files of the one table being indexed.
var (
	registerOnce sync.Once
	current      atomic.Pointer[files]
)

var schemes = []string{"s3", "s3a", "s3n", "gs", "az", "abfss", "file", ""}

func register() {
	registerOnce.Do(func() {
		for _, scheme := range schemes {
			icebergio.Unregister(scheme)
			icebergio.Register(scheme, func(context.Context, *url.URL, map[string]string) (icebergio.IO, error) {
				f := current.Load()
				if f == nil {
					return nil, errors.New("shardfeed: no table is being indexed")
				}
				return f, nil
			})
		}
	})
}
