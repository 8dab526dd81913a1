package cache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
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
// read, and again whenever its file's size, modification or change time
// or inode changed since; a shard that does not match its index is a
// CorruptError at once (a local file does not change by reading it
// again). In-place shards take nothing of the cache's budget and are never
// evicted. Each verification is recorded in the cache directory
// (.inplace), so a later sidecar on the same files and cache directory
// (the next run) verifies only what changed.

// placed is one in-place shard's verification.
type placed struct {
	mu       sync.Mutex // held while it is verified; guards stamp
	verified atomic.Bool
	stamp    fileStamp
}

// fileStamp is what says a file is the one verified: its change time
// moves with any write (a modification time can be set back).
type fileStamp struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Ino   uint64 `json:"ino"`
}

func stampOf(fi os.FileInfo) fileStamp {
	st := fileStamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.Ino = sys.Ino
		st.Ctime = time.Unix(sys.Ctim.Unix()).UnixNano()
	}
	return st
}

// verifiedFile is a verification as .inplace records it: the shard, the
// hash it was verified against, and its file's stamp then.
type verifiedFile struct {
	ID    string    `json:"id"`
	Hash  string    `json:"hash"`
	Stamp fileStamp `json:"stamp"`
}

// inplaceLog is the file of the verifications, one JSON line each, in the
// cache directory (a hidden name the cache's scan skips).
func (c *Cache) inplaceLog() string { return filepath.Join(c.opts.Dir, ".inplace") }

// loadVerified reads the verifications an earlier run recorded; a line
// that does not parse ends the reading (a run killed mid-write), and the
// file is written again without what was not read and without the
// verifications later lines replaced.
func (c *Cache) loadVerified() {
	f, err := os.Open(c.inplaceLog())
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	lines, broken := 0, false
	sc := bufio.NewScanner(io.LimitReader(f, maxInplaceLog))
	for sc.Scan() {
		var v verifiedFile
		if json.Unmarshal(sc.Bytes(), &v) != nil || v.ID == "" {
			broken = true
			break
		}
		lines++
		c.recorded[v.ID] = v
	}
	if broken || lines > 2*len(c.recorded) || sc.Err() != nil {
		var b bytes.Buffer
		for _, v := range c.recorded {
			line, _ := json.Marshal(v)
			b.Write(append(line, '\n'))
		}
		tmp := c.inplaceLog() + ".tmp"
		if os.WriteFile(tmp, b.Bytes(), 0o644) == nil {
			_ = os.Rename(tmp, c.inplaceLog())
		}
	}
}

// maxInplaceLog bounds what is read of .inplace (about a million shards).
const maxInplaceLog = 256 << 20

// record appends a verification to .inplace (best effort: without it the
// next run verifies again).
func (c *Cache) record(v verifiedFile) {
	line, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.logMu.Lock()
	defer c.logMu.Unlock()
	f, err := os.OpenFile(c.inplaceLog(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(append(line, '\n'))
	_ = f.Close()
}

// inPlace returns the file of s when its stream is served in place.
func (c *Cache) inPlace(s Shard) (string, bool) {
	if !c.opts.InPlace {
		return "", false
	}
	return store.LocalPath(c.stores[s.Stream], s.Key)
}

// hasher hashes the bytes [off, off+size) of an in-place shard's file with
// the algorithm of want, returning the hex digest.
type hasher func(path string, off, size int64, want checksum.Sum) (string, error)

// verifyInPlace checks the file of an in-place shard against its index,
// unless it was verified and has not changed since; hash reads its bytes
// (hashInPlace, or Map's mapping that then serves them).
func (c *Cache) verifyInPlace(ctx context.Context, s Shard, path string, hash hasher) error {
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
	if errors.Is(err, fs.ErrNotExist) {
		return goneSinceIndexed(s, err)
	}
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
	c.mu.Lock()
	earlier, ok := c.recorded[s.id()]
	c.mu.Unlock()
	if ok && earlier.Stamp == stamp && earlier.Hash == s.Hash && s.Hash != "" && !p.verified.Load() {
		// An earlier run verified this very file against this hash.
		p.stamp = stamp
		p.verified.Store(true)
		c.mu.Lock()
		c.stats.InPlaceReused++
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
		got, err := hash(path, off, size, want)
		if err != nil {
			return fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
		}
		if got != want.Hex {
			return &CorruptError{Shard: s, Reason: fmt.Sprintf("%s %s, want %s", want.Algo, short(got), short(want.Hex)), Attempts: 1}
		}
	}
	p.stamp = stamp
	p.verified.Store(true)
	if s.Hash != "" {
		c.record(verifiedFile{ID: s.id(), Hash: s.Hash, Stamp: stamp})
	}
	c.mu.Lock()
	c.stats.InPlaceVerified++
	c.stats.InPlaceVerifiedBytes += size
	c.mu.Unlock()
	return nil
}

// hashInPlace hashes the bytes [off, off+size) of a file, read through a
// reused buffer: for a shard verified without being served (Acquire), as
// Map hashes through the mapping it serves from instead. A file cut short
// meanwhile is an error.
func hashInPlace(path string, off, size int64, want checksum.Sum) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := want.New()
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	n, err := io.CopyBuffer(h, io.NewSectionReader(f, off, size), *buf)
	switch {
	case err != nil:
		return "", err
	case n != size:
		return "", fmt.Errorf("the file changed while it was verified: %d of %d bytes read", n, size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashMapped hashes mapped bytes of a file. A fault on them (the file
// truncated under the mapping: SIGBUS) is an error, not a crash.
func hashMapped(data []byte, want checksum.Sum) (sum string, err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(runtime.Error); !ok {
				panic(r)
			}
			sum, err = "", fmt.Errorf("the file changed while it was verified (%v)", r)
		}
	}()
	h := want.New()
	_, _ = h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashBuffers are the verifications' read buffers: large reads, few calls.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// mapInPlace maps the bytes of an in-place shard from its file, its pages
// populated in the call where populate says.
func mapInPlace(path string, s Shard, populate bool) ([]byte, []byte, error) {
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
	// A verified shard's pages are populated in one call: faulting each in
	// as the readers jump about the shard costs more. A shard about to be
	// hashed is not: the hash reads it in order, and the kernel maps the
	// pages around each fault with it, cheaper than populating first (the
	// first epoch of a new sidecar 6-9 % faster here).
	flags := syscall.MAP_SHARED
	if populate {
		flags |= syscall.MAP_POPULATE
	}
	m, err := syscall.Mmap(int(f.Fd()), start, int(n), syscall.PROT_READ, flags)
	if err != nil {
		return nil, nil, err
	}
	return m[off-start:], m, nil
}
