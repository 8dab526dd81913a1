package progress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// FileStore keeps the state in a local file, replaced atomically (write a
// temporary file, fsync, rename, fsync the directory): a crash at any point
// leaves the old state or the new one. Updates hold an flock on a lock file
// beside it, so that processes sharing the file do not lose each other's
// commits.
type FileStore struct {
	path string
	mu   sync.Mutex
}

// NewFileStore returns a store at path; its directory is created.
func NewFileStore(path string) (*FileStore, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &FileStore{path: path}, nil
}

// Load implements Store.
func (f *FileStore) Load(context.Context) (*configmaps.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.load()
}

func (f *FileStore) load() (*configmaps.State, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return &configmaps.State{Layout: configmaps.LayoutVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := configmaps.ParseState(b)
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w (move it away to start the job from scratch)", f.path, err)
	}
	return s, nil
}

// Update implements Store.
func (f *FileStore) Update(_ context.Context, fn func(*configmaps.State) error) (*configmaps.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	unlock, err := lockFile(f.path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("state file %s: %w", f.path, err)
	}
	defer unlock()
	s, err := f.load()
	if err != nil {
		return nil, err
	}
	if err := fn(s); err != nil {
		return nil, err
	}
	data, err := configmaps.StateData(s)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(f.path, []byte(data[configmaps.KeyState])); err != nil {
		return nil, fmt.Errorf("state file %s: %w", f.path, err)
	}
	return s, nil
}

// lockFile takes an exclusive flock on path, created if missing.
func lockFile(path string) (func(), error) {
	l, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil { //nolint:gosec // a file descriptor fits int
		_ = l.Close()
		return nil, err
	}
	return func() { _ = l.Close() }, nil // closing releases the lock
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
