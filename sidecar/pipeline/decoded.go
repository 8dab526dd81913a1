package pipeline

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardfeed/shardfeed/internal/arrowsize"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// shardKey names a shard of the plan: stream index, shard index.
type shardKey struct{ stream, shard int }

// decodedShard is a shard ready to gather rows from, shared by every batch
// that reads it (a shard needed by two local ranks is decoded once). Its
// parts stay mapped (and held in the cache) while it lives: the columns
// its format finds in place are read from them, and a decoder may have
// kept views of them.
type decodedShard struct {
	key  shardKey
	done chan struct{}
	sh   *source.Shard
	maps []*cache.Mapped
	err  error
	// refs are its holders: prefetchers keeping it and readers. pins are
	// the readers among them, reading its bytes now (a batch being built
	// or holding zero-copy views): only an unpinned shard may have its
	// mapped parts replaced by a copy on the heap.
	refs, pins int
	// moving: reclaim is copying it onto the heap.
	moving bool
	// bytes are the decoded columns' (the heap's); mapped the parts'.
	bytes, mapped int64
	lastUse       int64
	// skipped: the shard stayed corrupt and rec holds zeroed pad rows.
	skipped bool
	// aborted: err is the end of the context it was decoded under (its
	// reader went away), not a fault of the shard.
	aborted bool
}

// Skip is a shard delivered as pad rows under onCorruptShard: skip.
type Skip struct {
	Stream string
	// Shard is the shard's name in the index; Index its position.
	Shard string
	Index int
	// Samples is the shard's row count: every one is a pad row.
	Samples int64
	// Reason is the error that made it corrupt.
	Reason string
}

// decodedTable keeps decoded shards in memory within a byte budget,
// evicting the least recently used shard no batch or prefetch holds.
type decodedTable struct {
	streams []*source.Stream
	cache   *cache.Cache
	sem     chan struct{} // bounds concurrent decodes
	stats   *counters
	// skipCorrupt turns a corrupt shard into pad rows; onSkip hears of
	// each such shard once.
	skipCorrupt bool
	onSkip      func(Skip)

	mu      sync.Mutex
	shards  map[shardKey]*decodedShard
	used    int64 // decoded bytes: the heap's
	limit   int64
	mapped  int64 // bytes of the mapped parts
	maps    int   // mapped parts
	tick    int64
	changed chan struct{} // closed and replaced when memory is freed
	// skipped are the shards known corrupt: they are not fetched again.
	skipped map[shardKey]bool
	// needed reports whether a reader has yet to read the shard (nil:
	// none will): reclaim copies such a shard rather than drop it.
	needed func(shardKey) bool
}

func newDecodedTable(streams []*source.Stream, c *cache.Cache, limit int64, decoders int, stats *counters) *decodedTable {
	return &decodedTable{
		streams: streams, cache: c, sem: make(chan struct{}, decoders), stats: stats,
		shards: map[shardKey]*decodedShard{}, limit: limit, changed: make(chan struct{}),
		skipped: map[shardKey]bool{},
	}
}

// errNotNeeded: a prefetcher asked for a shard that is not in memory and
// that no reader will read again.
var errNotNeeded = errors.New("pipeline: no reader needs the shard")

// hold is how a holder uses a shard: keeps it for later, or reads it.
type hold bool

const (
	keep hold = false
	read hold = true
)

// acquire returns the decoded shard, decoding it (and fetching it through
// the cache) if needed, and holds it until release with the same hold. A
// keep of a shard no reader needs any more is errNotNeeded.
func (t *decodedTable) acquire(ctx context.Context, k shardKey, h hold) (*decodedShard, error) {
	for {
		d, again, err := t.acquireOnce(ctx, k, h)
		// A decode this reader waited on ended with the context of the
		// reader that started it (a client gone): decode it again under
		// this one's, rather than fail a stream for another's leaving.
		if !again || ctx.Err() != nil {
			return d, err
		}
	}
}

// acquireOnce is one try of acquire; again: the decode it waited on was
// aborted by its own reader's context.
func (t *decodedTable) acquireOnce(ctx context.Context, k shardKey, h hold) (*decodedShard, bool, error) {
	t.mu.Lock()
	d, ok := t.shards[k]
	if ok {
		d.refs++
		if h == read {
			d.pins++
		}
		t.tick++
		d.lastUse = t.tick
		t.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			t.release(d, h)
			return nil, false, context.Cause(ctx)
		}
		if d.err != nil {
			t.release(d, h)
			return nil, d.aborted, d.err
		}
		t.stats.decodedHits.Add(1)
		return d, false, nil
	}
	// A prefetcher's view of the readers may be stale: a shard they have
	// all read since, and that is gone, is not fetched again.
	if h == keep && t.needed != nil && !t.needed(k) {
		t.mu.Unlock()
		return nil, false, errNotNeeded
	}
	d = &decodedShard{key: k, done: make(chan struct{}), refs: 1}
	if h == read {
		d.pins = 1
	}
	t.shards[k] = d
	t.mu.Unlock()

	sh, maps, skipped, err := t.decodeOrSkip(ctx, k)
	t.mu.Lock()
	// Set under the lock: the table's other users look at every shard.
	d.sh, d.maps, d.skipped, d.err = sh, maps, skipped, err
	d.aborted = err != nil && ctx.Err() != nil
	if d.err != nil {
		delete(t.shards, k) // the next reader tries again
	} else {
		if rec := d.sh.Record(); rec != nil {
			d.bytes = arrowsize.Record(rec)
		}
		for _, m := range d.maps {
			d.mapped += int64(len(m.Bytes()))
		}
		t.used += d.bytes
		t.mapped += d.mapped
		t.maps += len(d.maps)
		t.tick++
		d.lastUse = t.tick
		t.evictLocked()
	}
	t.mu.Unlock()
	close(d.done)
	if d.err != nil {
		t.release(d, h)
		return nil, false, d.err
	}
	return d, false, nil
}

// decodeOrSkip decodes the shard; under the skip policy a shard that stays
// corrupt (every download differs from its index, or its bytes do not
// decode to what the index says) becomes zeroed rows, which the batches
// mark as pad. A store that cannot be reached is never a reason to skip.
func (t *decodedTable) decodeOrSkip(ctx context.Context, k shardKey) (*source.Shard, []*cache.Mapped, bool, error) {
	s := t.streams[k.stream]
	rows := s.Rows(k.shard)
	t.mu.Lock()
	known := t.skipped[k]
	t.mu.Unlock()
	if known {
		return source.ShardOf(s.Zero(rows)), nil, true, nil
	}
	sh, maps, err := t.decode(ctx, k)
	if err == nil || !t.skipCorrupt || !corrupt(err) {
		return sh, maps, false, err
	}
	t.mu.Lock()
	first := !t.skipped[k]
	t.skipped[k] = true
	t.mu.Unlock()
	if first {
		t.stats.skippedShards.Add(1)
		t.stats.skippedRows.Add(rows)
		if t.onSkip != nil {
			t.onSkip(Skip{Stream: s.Name, Shard: s.Layout.Index.Shard(int64(k.shard)).Name, Index: k.shard, Samples: rows, Reason: err.Error()})
		}
	}
	return source.ShardOf(s.Zero(rows)), nil, true, nil
}

// corrupt reports whether err says the shard's bytes are bad at the source.
func corrupt(err error) bool {
	var ce *cache.CorruptError
	var de *source.DecodeError
	return errors.As(err, &ce) || errors.As(err, &de)
}

// decode maps the shard's cached parts (no copy on the heap) and decodes
// the columns its format cannot serve from them in place.
func (t *decodedTable) decode(ctx context.Context, k shardKey) (sh *source.Shard, maps []*cache.Mapped, err error) {
	s := t.streams[k.stream]
	parts := s.Parts(k.shard)
	data := make([][]byte, len(parts))
	defer func() {
		if err != nil {
			unmap(maps)
			maps = nil
		}
	}()
	start := time.Now()
	if missing := missingParts(t.cache, parts); len(missing) > 1 {
		// A shard's parts at once, those next to each other in one GET (a
		// Parquet file's last row group and its footer): each would
		// otherwise be a request's round trip after the other.
		held, _ := t.cache.AcquireRun(ctx, missing) // Map meets each error below
		defer func() {
			for _, h := range held {
				t.cache.Release(h)
			}
		}()
	}
	for i, p := range parts {
		m, err := t.cache.Map(ctx, p)
		if err != nil {
			return nil, maps, err
		}
		maps = append(maps, m)
		data[i] = m.Bytes()
	}
	t.stats.fetchNanos.Add(int64(time.Since(start)))
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, maps, context.Cause(ctx)
	}
	defer func() { <-t.sem }()
	start = time.Now()
	err = GuardFaults(func() error {
		sh, err = s.DecodeShard(ctx, k.shard, data)
		return err
	})
	t.stats.decodeNanos.Add(int64(time.Since(start)))
	if err != nil {
		return nil, maps, err
	}
	t.stats.decodedShards.Add(1)
	t.stats.decodedRows.Add(sh.Rows)
	return sh, maps, nil
}

// missingParts are the parts the cache lacks.
func missingParts(c *cache.Cache, parts []cache.Shard) []cache.Shard {
	var out []cache.Shard
	for _, p := range parts {
		if !c.Present(p) {
			out = append(out, p)
		}
	}
	return out
}

func unmap(maps []*cache.Mapped) {
	for _, m := range maps {
		m.Close()
	}
}

func (t *decodedTable) release(d *decodedShard, h hold) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.refs--
	if h == read {
		d.pins--
	}
	if d.refs == 0 {
		t.evictLocked()
	}
}

// maxMaps bounds the parts mapped at once, well below the kernel's
// default of 65 530 mappings per process.
const maxMaps = 16 << 10

// evictLocked drops unheld shards, least recently used first, while the
// table is over its budget or maps too many parts.
func (t *decodedTable) evictLocked() {
	freed := false
	for t.used > t.limit || t.maps > maxMaps {
		victim := t.victimLocked(false)
		if victim == nil {
			break
		}
		t.dropLocked(victim)
		freed = true
	}
	if freed {
		t.freedLocked()
	}
}

// victimLocked returns the least recently used shard no one holds (one
// with mapped parts if mapped), or nil.
func (t *decodedTable) victimLocked(mapped bool) *decodedShard {
	var victim *decodedShard
	for _, d := range t.shards {
		if d.refs == 0 && d.sh != nil && (!mapped || len(d.maps) > 0) && (victim == nil || d.lastUse < victim.lastUse) {
			victim = d
		}
	}
	return victim
}

func (t *decodedTable) dropLocked(d *decodedShard) {
	delete(t.shards, d.key)
	t.used -= d.bytes
	t.mapped -= d.mapped
	t.maps -= len(d.maps)
	d.sh.Release()
	unmap(d.maps)
	t.stats.decodedEvictions.Add(1)
}

// dropUnneeded drops mapped shards that nothing holds and no reader needs
// again, least recently used first and none of keep, until fits says the
// cache has room; it reports whether it has. Unlike reclaim it copies no
// shard onto the heap: what it makes room for is not needed yet.
func (t *decodedTable) dropUnneeded(keep map[shardKey]bool, fits func() bool) bool {
	tried := maps.Clone(keep)
	for !fits() {
		t.mu.Lock()
		d, done := t.reclaimableLocked(tried)
		if d == nil || !done {
			t.mu.Unlock()
			return false
		}
		t.dropLocked(d)
		t.freedLocked()
		t.mu.Unlock()
	}
	return true
}

// reclaim gives the cache back the parts of one mapped shard, for a cache
// full of them (cache.OnFull); false if there is none to give. A shard
// nothing holds and no reader needs again is dropped. One that is still
// to be read (kept by a prefetcher, or let go by a rank that runs ahead of
// its pod mate) is decoded onto the heap from a copy of its parts, as
// shards were before they were mapped: dropping it would fetch it twice.
func (t *decodedTable) reclaim(ctx context.Context) bool {
	tried := map[shardKey]bool{}
	for {
		t.mu.Lock()
		d, done := t.reclaimableLocked(tried)
		if d == nil {
			t.mu.Unlock()
			return false
		}
		if done {
			t.dropLocked(d)
			t.freedLocked()
			t.mu.Unlock()
			return true
		}
		tried[d.key] = true
		d.refs++
		d.moving = true
		t.mu.Unlock()

		sh, err := t.decodeOnHeap(ctx, d)
		t.mu.Lock()
		d.moving = false
		moved := err == nil && d.pins == 0
		if moved {
			t.used -= d.bytes
			t.mapped -= d.mapped
			t.maps -= len(d.maps)
			d.sh.Release()
			unmap(d.maps)
			d.sh, d.maps, d.mapped = sh, nil, 0
			d.bytes = arrowsize.Record(sh.Record())
			t.used += d.bytes
			t.stats.heapCopies.Add(1)
		} else if sh != nil {
			sh.Release() // a reader came for it meanwhile: it stays mapped
		}
		d.refs--
		if d.refs == 0 {
			t.evictLocked()
		}
		if moved {
			t.freedLocked()
		}
		t.mu.Unlock()
		if moved {
			return true
		}
	}
}

// reclaimableLocked returns the shard reclaim takes next, or nil: the
// least recently used one with mapped parts that no reader reads now,
// preferring one that nothing holds and no reader needs (done: dropped,
// not copied).
func (t *decodedTable) reclaimableLocked(tried map[shardKey]bool) (*decodedShard, bool) {
	var unneeded, oldest *decodedShard
	for _, d := range t.shards {
		if d.sh == nil || len(d.maps) == 0 || d.pins > 0 || d.moving || tried[d.key] {
			continue
		}
		if oldest == nil || d.lastUse < oldest.lastUse {
			oldest = d
		}
		// Asked last: whether a reader needs it is the costly question.
		if d.refs == 0 && (unneeded == nil || d.lastUse < unneeded.lastUse) && (t.needed == nil || !t.needed(d.key)) {
			unneeded = d
		}
	}
	if unneeded != nil {
		return unneeded, true
	}
	return oldest, false
}

// decodeOnHeap decodes the shard again, whole, from a heap copy of its
// mapped parts.
func (t *decodedTable) decodeOnHeap(ctx context.Context, d *decodedShard) (*source.Shard, error) {
	s := t.streams[d.key.stream]
	data := make([][]byte, len(d.maps))
	err := GuardFaults(func() error {
		for i, m := range d.maps {
			data[i] = bytes.Clone(m.Bytes())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-t.sem }()
	rec, err := s.Decode(ctx, d.key.shard, data)
	if err != nil {
		return nil, err
	}
	return source.ShardOf(rec), nil
}

// freedLocked wakes those waiting for memory.
func (t *decodedTable) freedLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// room reports whether the table is within its budget, and a channel
// closed when memory is next freed.
func (t *decodedTable) room() (bool, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used < t.limit, t.changed
}

func (t *decodedTable) has(k shardKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.shards[k]
	return ok && d.sh != nil
}

func (t *decodedTable) usage() (bytes, mapped int64, shards int, rows int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.shards {
		if d.sh != nil {
			shards++
			rows += d.sh.Rows
		}
	}
	return t.used, t.mapped, shards, rows
}

func (t *decodedTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.shards {
		if d.sh != nil && d.refs == 0 {
			t.dropLocked(d)
		}
	}
}

// counters are the pipeline's statistics, updated without locks.
type counters struct {
	fetchNanos, decodeNanos, assembleNanos  atomic.Int64
	decodedShards, decodedRows, decodedHits atomic.Int64
	decodedEvictions, batches, batchRows    atomic.Int64
	heapCopies                              atomic.Int64
	prefetched, prefetchErrors              atomic.Int64
	warmedNext                              atomic.Int64
	skippedShards, skippedRows              atomic.Int64
}
