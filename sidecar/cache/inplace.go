package cache

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
)

// A stream on this machine's disk (file://) is served in place with
// Options.InPlace: each shard is mapped from its own file, never copied
// into the cache. It is verified (size and hash) the first time it is
// read, and again whenever its file's size, modification time or inode
// changed since; a shard that does not match its index is a CorruptError
// at once (a local file does not change by reading it again). In-place
// shards take nothing of the cache's budget and are never evicted.

// placed is one in-place shard's verification.
type placed struct {
	mu       sync.Mutex // held while it is verified; guards stamp
	verified atomic.Bool
	stamp    fileStamp
}

// fileStamp is what says a file is the one verified.
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// inPlace returns the file of s when its stream is served in place.
func (c *Cache) inPlace(s Shard) (string, bool) {
	if !c.opts.InPlace {
		return "", false
	}
	return store.LocalPath(c.stores[s.Stream], s.Key)
}

// verifyInPlace checks the file of an in-place shard against its index,
// unless it was verified and has not changed since.
func (c *Cache) verifyInPlace(ctx context.Context, s Shard, path string) error {
	want, err := checksum.Parse(s.Hash)
	if err != nil {
		return fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
	}
	c.mu.Lock()
	p := c.placed[s.id()]
	if p == nil {
		p = &placed{}
		c.placed[s.id()] = p
	}
	c.mu.Unlock()
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
	}
	stamp := stampOf(fi)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.verified.Load() && p.stamp == stamp {
		c.mu.Lock()
		c.stats.Hits++
		c.mu.Unlock()
		return nil
	}
	p.verified.Store(false)
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	off, size := int64(0), s.Size
	if s.Range {
		off = s.Offset
	}
	switch {
	case s.Range && fi.Size() < s.Offset+s.Size:
		return &CorruptError{Shard: s, Reason: fmt.Sprintf("the file has %d bytes, the range ends at %d", fi.Size(), s.Offset+s.Size), Attempts: 1}
	case !s.Range && s.Size >= 0 && fi.Size() != s.Size:
		return &CorruptError{Shard: s, Reason: fmt.Sprintf("size %d, want %d", fi.Size(), s.Size), Attempts: 1}
	case size < 0:
		size = fi.Size()
	}
	if !want.IsZero() {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
		}
		h := want.New()
		_, err = io.Copy(h, io.NewSectionReader(f, off, size))
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
			return &CorruptError{Shard: s, Reason: fmt.Sprintf("%s %s, want %s", want.Algo, short(got), short(want.Hex)), Attempts: 1}
		}
	}
	p.stamp = stamp
	p.verified.Store(true)
	c.mu.Lock()
	c.stats.InPlaceVerified++
	c.stats.InPlaceVerifiedBytes += size
	c.mu.Unlock()
	return nil
}

// mapInPlace maps the bytes of a verified in-place shard from its file.
func mapInPlace(path string, s Shard) ([]byte, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	off, size := int64(0), s.Size
	if !s.Range {
		fi, err := f.Stat()
		if err != nil {
			return nil, nil, err
		}
		size = fi.Size()
	} else {
		off = s.Offset
	}
	if size == 0 {
		return []byte{}, nil, nil
	}
	// mmap takes a page-aligned offset: map from the page the range
	// starts in.
	page := int64(os.Getpagesize())
	start := off - off%page
	n := size + off - start
	if n != int64(int(n)) {
		return nil, nil, fmt.Errorf("%d bytes do not fit the address space", n)
	}
	m, err := syscall.Mmap(int(f.Fd()), start, int(n), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return m[off-start:], m, nil
}
