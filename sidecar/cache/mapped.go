package cache

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// Mapped is a cached shard mapped read-only into memory and held (not
// evicted) until Close. Its pages are the file's: they count toward the
// page cache, not the process's heap, and the kernel can drop them under
// pressure and read them again.
type Mapped struct {
	c    *Cache
	s    Shard
	data []byte
	// whole is the mapping of a shard served in place (data is its
	// range); nil for a cached file's.
	whole []byte
}

// Map acquires the shard (downloading it if needed) and maps its file, or
// for a shard served in place (Options.InPlace) its bytes in its own file,
// verified.
func (c *Cache) Map(ctx context.Context, s Shard) (*Mapped, error) {
	if err := c.check(s); err != nil {
		return nil, err
	}
	if src, ok := c.inPlace(s); ok {
		// A shard not yet verified is hashed through the mapping that
		// then serves it: one pass over its bytes, where reading them for
		// the hash and mapping them again took two.
		var data, whole []byte
		hash := func(path string, off, size int64, want checksum.Sum) (string, error) {
			var err error
			if data, whole, err = mapInPlace(path, s, false); err != nil {
				return "", err
			}
			if int64(len(data)) != size {
				return "", fmt.Errorf("the file changed while it was verified: %d of %d bytes mapped", len(data), size)
			}
			return hashMapped(data, want)
		}
		if err := c.verifyInPlace(ctx, s, src, hash); err != nil {
			if whole != nil {
				_ = syscall.Munmap(whole)
			}
			return nil, err
		}
		if data == nil {
			var err error
			if data, whole, err = mapInPlace(src, s, true); err != nil {
				return nil, fmt.Errorf("stream %q: mapping %s: %w", s.Stream, s.Key, err)
			}
		}
		return &Mapped{c: c, s: s, data: data, whole: whole}, nil
	}
	path, err := c.Acquire(ctx, s)
	if err != nil {
		return nil, err
	}
	data, err := mapFile(path)
	if err != nil {
		c.Release(s)
		return nil, fmt.Errorf("stream %q: mapping cached %s: %w", s.Stream, s.Key, err)
	}
	return &Mapped{c: c, s: s, data: data}, nil
}

func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, fmt.Errorf("%d bytes do not fit the address space", st.Size())
	}
	return syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
}

// Bytes returns the shard's bytes, valid until Close.
func (m *Mapped) Bytes() []byte { return m.data }

// Close unmaps the shard and releases it to the cache.
func (m *Mapped) Close() {
	if m.whole != nil {
		_ = syscall.Munmap(m.whole)
		m.whole, m.data = nil, nil
		return
	}
	if len(m.data) > 0 {
		_ = syscall.Munmap(m.data)
	}
	m.data = nil
	m.c.Release(m.s)
}
