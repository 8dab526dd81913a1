// Package cache keeps shards on local disk (the pod's emptyDir): each is
// downloaded once to a temporary name, checked against its size and hash,
// and renamed into place; a byte budget evicts shards no reader holds any
// more, never one still held; a restarted process reuses what it verified.
package cache

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
)

// Shard names one object to cache and what it must be.
type Shard struct {
	// Stream names the store the shard is in (and its cache directory).
	Stream string
	// Key is the object's key under the stream's prefix.
	Key string
	// Size is the expected size in bytes; negative: not checked.
	Size int64
	// Hash is the expected "algo:hex" digest; empty: not checked.
	Hash string
	// Range makes the shard bytes [Offset, Offset+Size) of the object (a
	// Parquet row group, a run of text records) rather than all of it.
	Range  bool
	Offset int64
	// Version, for a shard without a hash, names the object's version for
	// the node's cache (format.Part's); not part of the file's name.
	Version string
}

// file is the shard's file name under its stream's directory: the key, and
// for a range "@offset+size", so ranges of one object do not collide.
func (s Shard) file() string {
	if s.Range {
		return fmt.Sprintf("%s@%d+%d", s.Key, s.Offset, s.Size)
	}
	return s.Key
}

func (s Shard) id() string { return s.Stream + "/" + s.file() }

var rangeSuffix = regexp.MustCompile(`^(.+)@(\d+)\+(\d+)$`)

// shardOfFile inverts file for the files an earlier run left.
func shardOfFile(stream, name string) Shard {
	if m := rangeSuffix.FindStringSubmatch(name); m != nil {
		off, err1 := strconv.ParseInt(m[2], 10, 64)
		n, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 == nil && err2 == nil {
			return Shard{Stream: stream, Key: m[1], Range: true, Offset: off, Size: n}
		}
	}
	return Shard{Stream: stream, Key: name}
}

// Options configure a Cache.
type Options struct {
	// Dir is the cache directory.
	Dir string
	// LimitBytes bounds the bytes of the shards on disk, downloads in
	// flight included; 0: no limit.
	LimitBytes int64
	// Parallel bounds concurrent downloads of any size (default 4); small
	// ones take more slots while their bytes allow (slots.go).
	Parallel int
	// CorruptAttempts is how many downloads of a shard that does not match
	// its hash or size are made before it is declared corrupt (default 3).
	CorruptAttempts int
	// Keep, if set, names shards to evict only when no other will do
	// (the node agent's: those its pods read next); least recently used
	// first either way. It is called with the cache's lock held.
	Keep func(Shard) bool
	// FullTimeout is how long a download waits for held shards to be
	// released when the cache is full, before failing (default 1 minute).
	FullTimeout time.Duration
	// Retry is the backoff between downloads of a corrupt copy.
	Retry store.Retry
	// PartBytes splits a shard of at least two parts into ranged GETs of
	// PartBytes each, PartsParallel of them at once (defaults
	// DefaultPartBytes and 4): one connection to a cloud store moves a fraction of what a few
	// do, and a large shard is the first batch's wait.
	PartBytes     int64
	PartsParallel int
	// Node, when set, is asked first for every shard with a hash (the
	// node agent); OnNodeMiss hears why it could not give one.
	Node       NodeFetch
	OnNodeMiss func(Shard, error)
	// NodeWarm, if set, is where Hint names the shards a reader needs
	// next (the node agent's warm requests).
	NodeWarm NodeWarm
	// InPlace serves the shards of streams on this machine's disk
	// (store.Local: file://) from their own files, mapped and verified
	// once, instead of copying them into the cache (inplace.go).
	InPlace bool
}

// DefaultPartBytes is the size of a ranged GET of a large shard
// (`shardfeed simulate` counts a pod's requests with it).
const DefaultPartBytes = 16 << 20

// Stats are the cache's counters.
type Stats struct {
	// FetchedBytes counts every byte downloaded, retries included.
	FetchedBytes int64
	Downloads    int64
	Hits         int64
	Evictions    int64
	// Reused counts shards found verified on disk at start.
	Reused     int64
	UsedBytes  int64
	HeldBytes  int64
	LimitBytes int64
	// PeakBytes is the most the cache held (on disk and reserved) at once.
	PeakBytes int64
	// DerivedHits and DerivedMisses count derived files (a shard's
	// tokenized columns) found and not found; DerivedStored those kept.
	DerivedHits   int64
	DerivedMisses int64
	DerivedStored int64
	// Node counts the shards the node's cache gave.
	Node NodeStats
	// AheadDownloads and AheadBytes are the part of Downloads and
	// FetchedBytes fetched ahead of any reader's need (store.Ahead): the
	// next epoch's first shards.
	AheadDownloads int64
	AheadBytes     int64
	// InPlaceVerified and InPlaceVerifiedBytes count the verifications of
	// shards served in place (Options.InPlace): once each, and again when
	// a file changed.
	InPlaceVerified      int64
	InPlaceVerifiedBytes int64
	// InPlaceReused counts in-place shards an earlier run verified, their
	// files unchanged since (not hashed again).
	InPlaceReused int64
}

type state int

const (
	downloading state = iota
	present
	unverified // on disk from an earlier run, not yet checked
)

type entry struct {
	shard   Shard
	state   state
	size    int64 // bytes on disk or reserved
	holds   int
	lastUse time.Time
	done    chan struct{} // closed when a download ends
	err     error
	// aborted: err is the end of the downloader's context (its reader
	// went away), not a fault of the shard or the store.
	aborted  bool
	reserved bool
}

// Cache is a directory of verified shards.
type Cache struct {
	opts   Options
	stores map[string]store.Store
	slots  *slots // downloads in flight (slots.go)
	// hinting says a hint to the node is in flight (Hint).
	hinting atomic.Bool

	mu      sync.Mutex
	changed *sync.Cond // holds released, entries evicted, downloads ended
	entries map[string]*entry
	placed  map[string]*placed // shards served in place (inplace.go)
	// recorded is the in-place verifications of earlier runs (.inplace).
	recorded map[string]verifiedFile
	logMu    sync.Mutex // appends to .inplace
	used     int64      // bytes on disk + reserved
	stats    Stats
	// reclaim, when set, is asked to let go of held shards it can do
	// without when the cache is full (see OnFull).
	reclaim func(context.Context) bool
}

// OnFull sets what a download that finds the cache full of held shards
// calls, without the cache's lock, before it waits: a holder that keeps
// shards only to save work (the pipeline's mapped shards) releases one
// and returns true, or returns false when it has none to give.
func (c *Cache) OnFull(reclaim func(context.Context) bool) {
	c.mu.Lock()
	c.reclaim = reclaim
	c.mu.Unlock()
}

// New opens the cache in opts.Dir, with the store of every stream. Files of
// an earlier run are kept and checked when first asked for; unfinished
// downloads are removed.
func New(opts Options, stores map[string]store.Store) (*Cache, error) {
	if opts.Dir == "" {
		return nil, errors.New("cache: a directory is required")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.CorruptAttempts <= 0 {
		opts.CorruptAttempts = 3
	}
	if opts.FullTimeout <= 0 {
		opts.FullTimeout = time.Minute
	}
	if opts.PartBytes <= 0 {
		opts.PartBytes = DefaultPartBytes
	}
	if opts.PartsParallel <= 0 {
		opts.PartsParallel = 4
	}
	if opts.LimitBytes < 0 {
		return nil, fmt.Errorf("cache: limit %d bytes is negative", opts.LimitBytes)
	}
	c := &Cache{
		opts:     opts,
		stores:   stores,
		slots:    newSlots(opts.Parallel),
		entries:  map[string]*entry{},
		placed:   map[string]*placed{},
		recorded: map[string]verifiedFile{},
	}
	c.changed = sync.NewCond(&c.mu)
	c.stats.LimitBytes = opts.LimitBytes
	if err := os.RemoveAll(c.tmpDir()); err != nil {
		return nil, fmt.Errorf("cache: removing unfinished downloads: %w", err)
	}
	if err := os.MkdirAll(c.tmpDir(), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if err := c.scan(); err != nil {
		return nil, err
	}
	if opts.InPlace {
		c.loadVerified()
	}
	return c, nil
}

func (c *Cache) tmpDir() string { return filepath.Join(c.opts.Dir, ".tmp") }

func (c *Cache) path(s Shard) string {
	return filepath.Join(c.opts.Dir, s.Stream, filepath.FromSlash(s.file()))
}

// scan records the files an earlier run left, to check on first use.
func (c *Cache) scan() error {
	return filepath.WalkDir(c.opts.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == c.tmpDir() || (filepath.Dir(p) == c.opts.Dir && strings.HasPrefix(d.Name(), ".") && d.Name() != derivedStream) {
				return filepath.SkipDir // downloads in flight, or not the cache's (the node agent's sums)
			}
			return nil
		}
		rel, err := filepath.Rel(c.opts.Dir, p)
		if err != nil {
			return err
		}
		stream, key, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		s := shardOfFile(stream, key)
		c.entries[s.id()] = &entry{shard: s, state: unverified, size: info.Size(), lastUse: info.ModTime()}
		c.used += info.Size()
		c.stats.PeakBytes = max(c.stats.PeakBytes, c.used)
		return nil
	})
}

func (c *Cache) check(s Shard) error {
	if s.Stream == "" || strings.ContainsAny(s.Stream, `/\`) || s.Stream == "." || s.Stream == ".." || strings.HasPrefix(s.Stream, ".") {
		return fmt.Errorf("cache: stream name %q cannot name a directory", s.Stream)
	}
	if s.Key == "" || strings.HasPrefix(s.Key, "/") || filepath.ToSlash(filepath.Clean(s.Key)) != s.Key || strings.HasPrefix(s.Key, "../") {
		return fmt.Errorf("cache: stream %q: shard key %q is not a plain relative path", s.Stream, s.Key)
	}
	if _, ok := c.stores[s.Stream]; !ok {
		return fmt.Errorf("cache: no store for stream %q", s.Stream)
	}
	if s.Range && (s.Offset < 0 || s.Size < 0) {
		return fmt.Errorf("cache: stream %q: %s: a range needs a non-negative offset and size, got %d+%d", s.Stream, s.Key, s.Offset, s.Size)
	}
	return nil
}

// Acquire returns the path of the verified shard on disk, downloading it if
// needed, and holds it: it is not evicted until Release. Concurrent calls
// for one shard share one download.
func (c *Cache) Acquire(ctx context.Context, s Shard) (string, error) {
	p, _, err := c.AcquireFetched(ctx, s)
	return p, err
}

// AcquireFetched is Acquire, and says whether this call downloaded the
// shard (false: it was on disk, or another call's download gave it). A
// shard served in place (Options.InPlace) is verified, not copied: its
// path is its own file, and a range of a file has none of its own (""):
// read it with Map.
func (c *Cache) AcquireFetched(ctx context.Context, s Shard) (path string, fetched bool, err error) {
	if err := c.check(s); err != nil {
		return "", false, err
	}
	if src, ok := c.inPlace(s); ok {
		if err := c.verifyInPlace(ctx, s, src, hashInPlace); err != nil {
			return "", false, err
		}
		if s.Range {
			return "", false, nil
		}
		return src, false, nil
	}
	want, err := checksum.Parse(s.Hash)
	if err != nil {
		return "", false, fmt.Errorf("stream %q: %s: %w", s.Stream, s.Key, err)
	}
	c.mu.Lock()
	for {
		e, ok := c.entries[s.id()]
		if !ok {
			e = &entry{shard: s, state: downloading, holds: 1, done: make(chan struct{})}
			c.entries[s.id()] = e
			c.mu.Unlock()
			if err := c.download(ctx, e, want); err != nil {
				return "", false, err
			}
			return c.path(s), true, nil
		}
		switch e.state {
		case present:
			e.holds++
			e.lastUse = time.Now()
			c.stats.Hits++
			c.mu.Unlock()
			return c.path(s), false, nil
		case unverified:
			// Check the earlier run's file as if it were a download.
			e.state, e.holds, e.done, e.shard = downloading, 1, make(chan struct{}), s
			c.mu.Unlock()
			if c.reuse(e, want) {
				return c.path(s), false, nil
			}
			if err := c.download(ctx, e, want); err != nil {
				return "", false, err
			}
			return c.path(s), true, nil
		case downloading:
			e.holds++
			done := e.done
			c.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				c.Release(s)
				return "", false, context.Cause(ctx)
			}
			c.mu.Lock()
			if e.err != nil && e.aborted && ctx.Err() == nil {
				// The download ended with its reader's context, not
				// this one's: download it again for this reader.
				continue
			}
			if e.err != nil {
				err := e.err
				c.mu.Unlock()
				return "", false, err
			}
			c.stats.Hits++
			c.mu.Unlock()
			return c.path(s), false, nil
		}
	}
}

// Release ends one hold of a shard; without holds it may be evicted.
func (c *Cache) Release(s Shard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[s.id()]; ok && e.holds > 0 {
		e.holds--
		e.lastUse = time.Now()
		if e.holds == 0 {
			c.changed.Broadcast()
		}
	}
}

// Discard removes a shard found wrong on disk after it was verified (its
// file changed under the cache), so that the next Acquire downloads it
// again; false if another reader holds it still.
func (c *Cache) Discard(s Shard) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.placed[s.id()]; ok {
		// Verified again when next read, whatever an earlier run recorded.
		delete(c.placed, s.id())
		delete(c.recorded, s.id())
		return true
	}
	e, ok := c.entries[s.id()]
	if !ok || e.state != present || e.holds > 0 {
		return !ok
	}
	_ = os.Remove(c.path(e.shard))
	c.used -= e.size
	delete(c.entries, e.shard.id())
	c.changed.Broadcast()
	return true
}

// Present reports whether the shard is on disk and verified.
func (c *Cache) Present(s Shard) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.placed[s.id()]; ok {
		return p.verified.Load()
	}
	e, ok := c.entries[s.id()]
	return ok && e.state == present
}

// Fetched reports whether the shard is on disk or on its way: fetching it
// again would cost no request of its own.
func (c *Cache) Fetched(s Shard) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.placed[s.id()]; ok {
		return true
	}
	e, ok := c.entries[s.id()]
	return ok && (e.state == present || e.state == downloading)
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.UsedBytes = c.used
	for _, e := range c.entries {
		if e.holds > 0 {
			st.HeldBytes += e.size
		}
	}
	return st
}

// reuse checks a file an earlier run left; true when it is the shard.
func (c *Cache) reuse(e *entry, want checksum.Sum) bool {
	ok := e.shard.Size < 0 || e.size == e.shard.Size
	if ok && !want.IsZero() {
		f, err := os.Open(c.path(e.shard))
		if err == nil {
			h := want.New()
			_, err = io.Copy(h, f)
			_ = f.Close()
			ok = err == nil && hex.EncodeToString(h.Sum(nil)) == want.Hex
		} else {
			ok = false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		// Not the shard: drop the file; download() will account for it anew.
		_ = os.Remove(c.path(e.shard))
		c.used -= e.size
		e.size = 0
		return false
	}
	e.state = present
	e.lastUse = time.Now()
	e.reserved = false
	c.stats.Reused++
	close(e.done)
	c.changed.Broadcast()
	return true
}

// finish ends a download: present on success, removed on failure.
func (c *Cache) finish(e *entry, err error, aborted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		e.err, e.aborted = err, aborted
		e.holds = 0
		if e.reserved {
			c.used -= e.size
		}
		delete(c.entries, e.shard.id())
	} else {
		e.state = present
		e.lastUse = time.Now()
	}
	close(e.done)
	c.changed.Broadcast()
}

// download fetches, checks and installs the shard of e.
func (c *Cache) download(ctx context.Context, e *entry, want checksum.Sum) (err error) {
	defer func() { c.finish(e, err, ctx.Err() != nil) }()
	release, err := c.slots.acquire(ctx, e.shard.Size)
	if err != nil {
		return err
	}
	defer release()

	st := c.stores[e.shard.Stream]
	size := e.shard.Size
	if size < 0 {
		obj, err := st.Stat(ctx, e.shard.Key)
		if err != nil {
			return fmt.Errorf("stream %q: %w", e.shard.Stream, err)
		}
		size = obj.Size
	}
	if !e.reserved { // a coalesced read that gave up may have reserved it
		if err := c.reserve(ctx, e, size); err != nil {
			return err
		}
	}
	dst := c.path(e.shard)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if c.opts.Node != nil && (!want.IsZero() || e.shard.Version != "") && c.fromNode(ctx, e.shard, size, want, dst) {
		return nil
	}
	var last *CorruptError
	for attempt := 1; attempt <= c.opts.CorruptAttempts; attempt++ {
		err := c.opts.Retry.Do(ctx, func(ctx context.Context, cancel context.CancelFunc) error {
			defer cancel()
			return c.fetchOnce(ctx, st, e.shard, size, want, dst)
		})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			if errors.Is(err, store.ErrNotFound) {
				return goneSinceIndexed(e.shard, err)
			}
			if err != nil {
				return fmt.Errorf("stream %q: %w", e.shard.Stream, err)
			}
			return nil
		}
		last = ce
	}
	last.Attempts = c.opts.CorruptAttempts
	return last
}

// reserve makes room for size bytes, evicting shards no one holds, least
// recently used first; it waits for releases up to FullTimeout.
func (c *Cache) reserve(ctx context.Context, e *entry, size int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.opts.LimitBytes
	if limit > 0 && size > limit {
		return &FullError{Shard: e.shard, Need: size, Limit: limit, Held: 0}
	}
	deadline := time.Now().Add(c.opts.FullTimeout)
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	timer := time.AfterFunc(c.opts.FullTimeout, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	for limit > 0 && c.used+size > limit {
		if c.evictOne() {
			continue
		}
		if reclaim := c.reclaim; reclaim != nil {
			c.mu.Unlock()
			freed := reclaim(ctx)
			c.mu.Lock()
			if freed {
				continue
			}
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !time.Now().Before(deadline) {
			held := int64(0)
			for _, o := range c.entries {
				if o.holds > 0 && o != e {
					held += o.size
				}
			}
			return &FullError{Shard: e.shard, Need: size, Limit: limit, Held: held}
		}
		c.changed.Wait()
	}
	c.used += size
	c.stats.PeakBytes = max(c.stats.PeakBytes, c.used)
	e.size = size
	e.reserved = true
	return nil
}

// evictOne removes the least recently used shard no one holds, one
// Options.Keep keeps only when there is no other.
func (c *Cache) evictOne() bool {
	var victim, kept *entry
	for _, e := range c.entries {
		if e.holds > 0 || (e.state != present && e.state != unverified) {
			continue
		}
		if c.opts.Keep != nil && c.opts.Keep(e.shard) {
			if kept == nil || e.lastUse.Before(kept.lastUse) {
				kept = e
			}
		} else if victim == nil || e.lastUse.Before(victim.lastUse) {
			victim = e
		}
	}
	if victim == nil {
		victim = kept
	}
	if victim == nil {
		return false
	}
	_ = os.Remove(c.path(victim.shard))
	c.used -= victim.size
	delete(c.entries, victim.shard.id())
	c.stats.Evictions++
	return true
}

// fetchOnce downloads the object to a temporary file, checks it and renames
// it into place.
func (c *Cache) fetchOnce(ctx context.Context, st store.Store, s Shard, size int64, want checksum.Sum, dst string) error {
	tmp, err := os.CreateTemp(c.tmpDir(), "shard-*")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	var h hash.Hash
	if !want.IsZero() {
		h = want.New()
	}
	var n int64
	if size >= 2*c.opts.PartBytes && c.opts.PartsParallel > 1 {
		if n, err = c.fetchParts(ctx, st, s, size, tmp); err == nil && h != nil {
			_, err = io.Copy(h, io.NewSectionReader(tmp, 0, n))
		}
	} else {
		n, err = c.fetchWhole(ctx, st, s, size, tmp, h)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != size {
		return &CorruptError{Shard: s, Reason: fmt.Sprintf("size %d bytes, want %d", n, size)}
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); got != want.Hex {
			return &CorruptError{Shard: s, Reason: fmt.Sprintf("%s mismatch (index %s, got %s)", want.Algo, short(want.Hex), short(got))}
		}
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	c.downloaded(ctx)
	return nil
}

// fetchWhole copies the shard into f with one GET, hashing it into h (if
// not nil) on the way; it returns the bytes read.
func (c *Cache) fetchWhole(ctx context.Context, st store.Store, s Shard, size int64, f *os.File, h hash.Hash) (int64, error) {
	off, length := int64(0), int64(-1)
	if s.Range {
		off, length = s.Offset, s.Size
	}
	body, err := st.Get(ctx, s.Key, off, length)
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	w := io.Writer(f)
	if h != nil {
		w = io.MultiWriter(f, h)
	}
	// One byte more than expected shows an object that grew.
	n, err := io.Copy(w, io.LimitReader(body, size+1))
	c.fetched(ctx, n)
	return n, err
}

// fetchParts copies the shard into f as ranged GETs of PartBytes, at most
// PartsParallel at once, each written at its place; it returns the bytes
// read.
func (c *Cache) fetchParts(ctx context.Context, st store.Store, s Shard, size int64, f *os.File) (int64, error) {
	base := int64(0)
	if s.Range {
		base = s.Offset
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.PartsParallel)
	var total atomic.Int64
	for off := int64(0); off < size; off += c.opts.PartBytes {
		want := min(c.opts.PartBytes, size-off)
		ask := want
		if off+want == size && !s.Range {
			ask++ // one byte more than expected shows an object that grew
		}
		g.Go(func() error {
			body, err := st.Get(gctx, s.Key, base+off, ask)
			if err != nil {
				return err
			}
			defer func() { _ = body.Close() }()
			got, err := io.Copy(io.NewOffsetWriter(f, off), io.LimitReader(body, ask))
			total.Add(got)
			c.fetched(ctx, got)
			if err == nil && got != want {
				// Each part checks its own length: a short part and a long
				// last one must not add up to the right size.
				err = &CorruptError{Shard: s, Reason: fmt.Sprintf("bytes %d to %d of %d: %d bytes, want %d", off, off+want, size, got, want)}
			}
			return err
		})
	}
	err := g.Wait()
	return total.Load(), err
}

func (c *Cache) fetched(ctx context.Context, n int64) {
	c.mu.Lock()
	c.stats.FetchedBytes += n
	if store.IsAhead(ctx) {
		c.stats.AheadBytes += n
	}
	c.mu.Unlock()
}

func (c *Cache) downloaded(ctx context.Context) {
	c.mu.Lock()
	c.downloadedLocked(ctx)
	c.mu.Unlock()
}

func (c *Cache) downloadedLocked(ctx context.Context) {
	c.stats.Downloads++
	if store.IsAhead(ctx) {
		c.stats.AheadDownloads++
	}
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// CorruptError is a shard whose every download differed from its index.
type CorruptError struct {
	Shard    Shard
	Reason   string
	Attempts int
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("stream %q: %s: %s in %d downloads: the object changed after the index was written or is corrupt at the source; re-run shardfeed index or restore the object",
		e.Shard.Stream, e.Shard.file(), e.Reason, e.Attempts)
}

// FullError is a download that does not fit the cache limit.
type FullError struct {
	Shard       Shard
	Need, Limit int64
	Held        int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("cache: stream %q: %s needs %d bytes, but the cache limit is %d bytes and %d are held by shards still needed: raise cacheLimit to at least %d (shardfeed plan --summary prints the minimum per pod)",
		e.Shard.Stream, e.Shard.Key, e.Need, e.Limit, e.Held, e.Held+e.Need)
}

// goneSinceIndexed is the error of a shard whose object is no longer
// there: what deletes one, and what to do.
func goneSinceIndexed(s Shard, err error) error {
	return fmt.Errorf("stream %q: %s: %w: it was deleted after the index was written (a Lance dataset's cleanup_old_versions deletes the files of old versions no tag holds); re-run shardfeed index, or pin a Lance version by tag",
		s.Stream, s.Key, err)
}
