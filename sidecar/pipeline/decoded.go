package pipeline

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/internal/arrowsize"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// shardKey names a shard of the plan: stream index, shard index.
type shardKey struct{ stream, shard int }

// decodedShard is a shard decoded to one record, shared by every batch that
// reads it (a shard needed by two local ranks is decoded once).
type decodedShard struct {
	key     shardKey
	done    chan struct{}
	rec     arrow.RecordBatch
	err     error
	refs    int
	bytes   int64
	lastUse int64
}

// decodedTable keeps decoded shards in memory within a byte budget,
// evicting the least recently used shard no batch or prefetch holds.
type decodedTable struct {
	streams []*source.Stream
	cache   *cache.Cache
	sem     chan struct{} // bounds concurrent decodes
	stats   *counters

	mu      sync.Mutex
	shards  map[shardKey]*decodedShard
	used    int64
	limit   int64
	tick    int64
	changed chan struct{} // closed and replaced when memory is freed
}

func newDecodedTable(streams []*source.Stream, c *cache.Cache, limit int64, decoders int, stats *counters) *decodedTable {
	return &decodedTable{
		streams: streams, cache: c, sem: make(chan struct{}, decoders), stats: stats,
		shards: map[shardKey]*decodedShard{}, limit: limit, changed: make(chan struct{}),
	}
}

// acquire returns the decoded shard, decoding it (and fetching it through
// the cache) if needed, and holds it until release.
func (t *decodedTable) acquire(ctx context.Context, k shardKey) (*decodedShard, error) {
	t.mu.Lock()
	d, ok := t.shards[k]
	if ok {
		d.refs++
		t.tick++
		d.lastUse = t.tick
		t.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			t.release(d)
			return nil, context.Cause(ctx)
		}
		if d.err != nil {
			t.release(d)
			return nil, d.err
		}
		t.stats.decodedHits.Add(1)
		return d, nil
	}
	d = &decodedShard{key: k, done: make(chan struct{}), refs: 1}
	t.shards[k] = d
	t.mu.Unlock()

	d.rec, d.err = t.decode(ctx, k)
	t.mu.Lock()
	if d.err != nil {
		delete(t.shards, k) // the next reader tries again
	} else {
		d.bytes = arrowsize.Record(d.rec)
		t.used += d.bytes
		t.tick++
		d.lastUse = t.tick
		t.evictLocked()
	}
	t.mu.Unlock()
	close(d.done)
	if d.err != nil {
		t.release(d)
		return nil, d.err
	}
	return d, nil
}

func (t *decodedTable) decode(ctx context.Context, k shardKey) (arrow.RecordBatch, error) {
	s := t.streams[k.stream]
	parts := s.Parts(k.shard)
	data := make([][]byte, len(parts))
	start := time.Now()
	for i, p := range parts {
		path, err := t.cache.Acquire(ctx, p)
		if err != nil {
			return nil, err
		}
		data[i], err = os.ReadFile(path)
		t.cache.Release(p)
		if err != nil {
			return nil, fmt.Errorf("stream %q: reading cached %s: %w", s.Name, p.Key, err)
		}
	}
	t.stats.fetchNanos.Add(int64(time.Since(start)))
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-t.sem }()
	start = time.Now()
	rec, err := s.Decode(ctx, k.shard, data)
	t.stats.decodeNanos.Add(int64(time.Since(start)))
	if err == nil {
		t.stats.decodedShards.Add(1)
		t.stats.decodedRows.Add(rec.NumRows())
	}
	return rec, err
}

func (t *decodedTable) release(d *decodedShard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d.refs--
	if d.refs == 0 {
		t.evictLocked()
	}
}

// evictLocked drops unheld shards, least recently used first, while the
// table is over its budget.
func (t *decodedTable) evictLocked() {
	freed := false
	for t.used > t.limit {
		var victim *decodedShard
		for _, d := range t.shards {
			if d.refs == 0 && d.rec != nil && (victim == nil || d.lastUse < victim.lastUse) {
				victim = d
			}
		}
		if victim == nil {
			break
		}
		delete(t.shards, victim.key)
		t.used -= victim.bytes
		victim.rec.Release()
		t.stats.decodedEvictions.Add(1)
		freed = true
	}
	if freed {
		close(t.changed)
		t.changed = make(chan struct{})
	}
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
	return ok && d.rec != nil
}

func (t *decodedTable) usage() (bytes int64, shards int, rows int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.shards {
		if d.rec != nil {
			shards++
			rows += d.rec.NumRows()
		}
	}
	return t.used, shards, rows
}

func (t *decodedTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, d := range t.shards {
		if d.rec != nil && d.refs == 0 {
			d.rec.Release()
			delete(t.shards, k)
		}
	}
}

// counters are the pipeline's statistics, updated without locks.
type counters struct {
	fetchNanos, decodeNanos, assembleNanos  atomic.Int64
	decodedShards, decodedRows, decodedHits atomic.Int64
	decodedEvictions, batches, batchRows    atomic.Int64
	prefetched, prefetchErrors              atomic.Int64
}
