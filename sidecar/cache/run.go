package cache

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/shardfeed/shardfeed/internal/checksum"
)

// Coalescing. Many small ranges of one object (the row groups of a Parquet
// file, runs of text records) cost a request each; a store bills and
// throttles requests. Ranges a reader is about to need that follow each
// other in the object come in one ranged GET instead, each still its own
// cached file, checked against its own size and hash. Only ranges with no
// byte between them: bytes read through would be egress beyond the plan's
// bound (another pod's row group may lie between two of this one's).

// Fits reports whether n more bytes fit the cache without evicting.
func (c *Cache) Fits(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.LimitBytes == 0 || c.used+n <= c.opts.LimitBytes
}

// FitsBesideHeld reports whether n more bytes fit the cache beside the
// shards held, those being fetched and those Options.Keep keeps: room
// that evicting the others (least recently used first) makes, with no
// holder asked to let go.
func (c *Cache) FitsBesideHeld(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts.LimitBytes == 0 {
		return true
	}
	busy := n
	for _, e := range c.entries {
		if e.holds > 0 || e.state == downloading || (c.opts.Keep != nil && c.opts.Keep(e.shard)) {
			busy += e.size
		}
	}
	return busy <= c.opts.LimitBytes
}

// AcquireRun holds the shards as Acquire does, fetching with one ranged GET
// each run of them that are ranges of one object, not yet cached, and
// follow each other directly in it (up to PartBytes a GET), the runs at
// once. A
// shard another caller is fetching is left to it. It returns the shards it
// holds, to Release, and the first error; a shard that failed is not held.
func (c *Cache) AcquireRun(ctx context.Context, shards []Shard) ([]Shard, error) {
	type item struct {
		e    *entry
		want checksum.Sum
	}
	var held []Shard
	var fetch []item
	c.mu.Lock()
	for _, s := range shards {
		if c.check(s) != nil || !s.Range || s.Size < 0 {
			continue // Acquire reports it, on its own
		}
		if _, ok := c.inPlace(s); ok {
			continue // nothing to fetch: Map verifies it in its file
		}
		want, err := checksum.Parse(s.Hash)
		if err != nil {
			continue
		}
		e, ok := c.entries[s.id()]
		switch {
		case !ok:
			e = &entry{shard: s, state: downloading, holds: 1, done: make(chan struct{})}
			c.entries[s.id()] = e
			fetch = append(fetch, item{e, want})
			held = append(held, s)
		case e.state == present:
			e.holds++
			c.stats.Hits++
			held = append(held, s)
		}
	}
	c.mu.Unlock()

	slices.SortFunc(fetch, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.e.shard.Stream, b.e.shard.Stream), cmp.Compare(a.e.shard.Key, b.e.shard.Key),
			cmp.Compare(a.e.shard.Offset, b.e.shard.Offset))
	})
	var (
		mu     sync.Mutex // guards first and failed
		first  error
		failed = map[string]bool{}
		wg     sync.WaitGroup
	)
	for len(fetch) > 0 {
		n, bytes := 1, fetch[0].e.shard.Size
		for n < len(fetch) {
			prev, next := fetch[n-1].e.shard, fetch[n].e.shard
			if next.Stream != prev.Stream || next.Key != prev.Key || next.Offset != prev.Offset+prev.Size || bytes+next.Size > c.opts.PartBytes {
				break
			}
			bytes += next.Size
			n++
		}
		run := fetch[:n]
		fetch = fetch[n:]
		entries := make([]*entry, len(run))
		wants := make([]checksum.Sum, len(run))
		for i, it := range run {
			entries[i], wants[i] = it.e, it.want
		}
		// The runs at once (the cache's download slots bound them): a
		// shard's row group and its footer apart are not two round trips
		// one after the other.
		wg.Go(func() {
			for i, err := range c.downloadRun(ctx, entries, wants) {
				if err != nil {
					mu.Lock()
					failed[entries[i].shard.id()] = true
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		held = slices.DeleteFunc(held, func(s Shard) bool { return failed[s.id()] })
	}
	return held, first
}

// downloadRun fetches entries, ranges of one object in offset order, with
// one GET, and installs each; an entry the GET did not bring whole and
// right is downloaded on its own, with the retries and checks of download.
// It returns each entry's error.
func (c *Cache) downloadRun(ctx context.Context, entries []*entry, wants []checksum.Sum) []error {
	errs := make([]error, len(entries))
	installed := make([]bool, len(entries))
	// With the node's cache, each range is asked of it first: a run
	// from the store would pass it by.
	if len(entries) > 1 && c.opts.Node == nil {
		c.fetchRun(ctx, entries, wants, installed)
	}
	for i, e := range entries {
		if installed[i] {
			c.finish(e, nil, false)
		} else {
			errs[i] = c.download(ctx, e, wants[i])
		}
	}
	return errs
}

// fetchRun is downloadRun's one GET: it marks the entries it installed.
// A range that does not match its hash is left out and the read goes on;
// a read that fails ends it.
func (c *Cache) fetchRun(ctx context.Context, entries []*entry, wants []checksum.Sum, installed []bool) {
	var size int64
	for _, e := range entries {
		size += e.shard.Size
	}
	release, err := c.slots.acquire(ctx, size)
	if err != nil {
		return
	}
	defer release()
	for _, e := range entries {
		if err := c.reserve(ctx, e, e.shard.Size); err != nil {
			return // download reserves, or fails, each on its own
		}
	}
	// One request: as bounded in time as each of download's.
	ctx, cancel := context.WithTimeoutCause(ctx, c.opts.Retry.WithDefaults().RequestTimeout,
		fmt.Errorf("%w: a coalesced read got no complete answer within the per-request timeout", context.DeadlineExceeded))
	defer cancel()
	first, last := entries[0].shard, entries[len(entries)-1].shard
	body, err := c.stores[first.Stream].Get(ctx, first.Key, first.Offset, last.Offset+last.Size-first.Offset)
	if err != nil {
		return
	}
	defer func() { _ = body.Close() }()
	at := first.Offset
	for i, e := range entries {
		if e.shard.Offset != at {
			return // AcquireRun makes runs of ranges that follow each other
		}
		at = e.shard.Offset + e.shard.Size
		ok, err := c.installFrom(ctx, body, e, wants[i])
		if err != nil {
			return
		}
		installed[i] = ok
	}
}

// installFrom writes the entry's shard from the next Size bytes of r into
// its place: false if they do not match its hash, an error if they could
// not be read or written.
func (c *Cache) installFrom(ctx context.Context, r io.Reader, e *entry, want checksum.Sum) (bool, error) {
	dst := c.path(e.shard)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(c.tmpDir(), "shard-*")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	w := io.Writer(tmp)
	var h hash.Hash
	if !want.IsZero() {
		h = want.New()
		w = io.MultiWriter(tmp, h)
	}
	n, err := io.CopyN(w, r, e.shard.Size)
	c.fetched(ctx, n)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, err
	}
	if h != nil && hex.EncodeToString(h.Sum(nil)) != want.Hex {
		return false, nil
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return false, err
	}
	c.downloaded(ctx)
	return true, nil
}
