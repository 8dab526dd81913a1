// Package local is the store of file:///path/ URIs: a directory of this
// machine, for local use and tests.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/shardfeed/shardfeed/internal/store"
)

// Scheme is the URI scheme this store is registered under.
const Scheme = "file"

// Descriptor is the store's entry in stores.Default: no credentials, no
// network.
var Descriptor = store.Descriptor{Scheme: Scheme, Open: Open, Root: func(*url.URL) (string, error) { return "file:///", nil }}

// ErrNotLocal is returned for a source URI that is not a local directory.
var ErrNotLocal = errors.New("not a " + Scheme + ":// URI")

// Open returns the store of a file:// source.
func Open(_ context.Context, src store.Source, u *url.URL) (store.Store, error) {
	dir, err := dirOf(src.URI, u)
	if err != nil {
		return nil, err
	}
	return newFileStore(dir), nil
}

// OpenDir returns the store of the folder dir (tests and tools that hold
// a path, not a source).
func OpenDir(dir string) store.Store { return newFileStore(dir) }

// Dir returns the directory of a file:// URI.
func Dir(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("source URI %q: %w", uri, err)
	}
	if u.Scheme != Scheme {
		return "", fmt.Errorf("source URI %q: %w", uri, ErrNotLocal)
	}
	return dirOf(uri, u)
}

func dirOf(uri string, u *url.URL) (string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("source URI %q names host %q: write file:///absolute/path/", uri, u.Host)
	}
	if u.Path == "" {
		return "", fmt.Errorf("source URI %q has no path: write file:///absolute/path/", uri)
	}
	return filepath.FromSlash(u.Path), nil
}

// fileStore is a local directory.
type fileStore struct{ dir string }

func newFileStore(dir string) *fileStore {
	return &fileStore{dir: filepath.Clean(dir)}
}

// URI is the directory's file:// URI, ending in one "/" (the root's is
// file:///, as store.Root names it).
func (s *fileStore) URI() string {
	return "file://" + strings.TrimSuffix(filepath.ToSlash(s.dir), "/") + "/"
}

func (s *fileStore) path(key string) (string, error) {
	if err := store.CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// LocalPath is the file of the object at key (store.Local).
func (s *fileStore) LocalPath(key string) (string, error) { return s.path(key) }

func (s *fileStore) wrap(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s%s: %w", s.URI(), key, store.ErrNotFound)
	}
	return fmt.Errorf("%s%s: %w", s.URI(), key, err)
}

func (s *fileStore) Get(_ context.Context, key string, off, n int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	if off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			_ = f.Close()
			return nil, s.wrap(key, err)
		}
	}
	if n < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, n), f}, nil
}

func (s *fileStore) Stat(_ context.Context, key string) (store.Object, error) {
	p, err := s.path(key)
	if err != nil {
		return store.Object{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return store.Object{}, s.wrap(key, err)
	}
	if fi.IsDir() {
		return store.Object{}, s.wrap(key, fmt.Errorf("is a directory: %w", store.ErrNotFound))
	}
	return store.Object{Key: key, Size: fi.Size(), ETag: modTag(fi)}, nil
}

func (s *fileStore) List(_ context.Context) ([]store.Object, error) {
	var out []store.Object
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil && p == s.dir && errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll // no directory: no objects, as an S3 prefix with none
		}
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".shardfeed-tmp-") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		out = append(out, store.Object{Key: filepath.ToSlash(rel), Size: info.Size(), ETag: modTag(info)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", s.URI(), err)
	}
	slices.SortFunc(out, func(a, b store.Object) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (s *fileStore) ListDir(_ context.Context, dir string) (store.Listing, error) {
	if err := store.CheckDir(dir); err != nil {
		return store.Listing{}, err
	}
	var out store.Listing
	entries, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil // no directory: nothing in it, as an S3 prefix with none
	}
	if err != nil {
		return out, fmt.Errorf("listing %s%s: %w", s.URI(), dir, err)
	}
	for _, e := range entries { // sorted by name
		switch {
		case strings.HasPrefix(e.Name(), ".shardfeed-tmp-"):
		case e.IsDir():
			out.Dirs = append(out.Dirs, dir+e.Name()+"/")
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return out, fmt.Errorf("listing %s%s: %w", s.URI(), dir, err)
			}
			out.Objects = append(out.Objects, store.Object{Key: dir + e.Name(), Size: info.Size(), ETag: modTag(info)})
		}
	}
	return out, nil
}

func (s *fileStore) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.wrap(key, err)
	}
	return nil
}

// filePerm is the mode of the files Put writes.
const filePerm = 0o644

func (s *fileStore) Put(_ context.Context, key string, r io.Reader, size int64) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return s.wrap(key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".shardfeed-tmp-*")
	if err != nil {
		return s.wrap(key, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	n, err := io.Copy(tmp, r)
	if err == nil && size >= 0 && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		// What a written file usually is (CreateTemp makes 0600): data
		// sets are read by other users and by the pods' containers.
		err = tmp.Chmod(filePerm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		return s.wrap(key, err)
	}
	return nil
}

// modTag is a file's version tag, as a store's ETag: its modification
// time, which a rewrite changes.
func modTag(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.ModTime().UnixNano(), 36)
}
