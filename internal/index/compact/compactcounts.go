package compact

import (
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/planner"
)

// Counts are a compact index's shards as a planner reads them
// (planner.ShardCounts): every shard's samples, from its sampleCounts
// column read once (a few bytes a shard), and the entries of the shards
// Resolve was given, fetched together by ranged reads and kept.
type Counts struct {
	r      *Reader
	col    compactColumn
	values []byte // the column's stored values (none for width 0)

	mu      sync.Mutex
	entries map[int64]*indexfile.Entry
}

// Counts reads the index's sample counts whole, each block checked, and
// checks that they add up to the header's samples.
func (r *Reader) Counts() (*Counts, error) {
	c := &Counts{r: r, col: r.meta.SampleCounts, entries: map[int64]*indexfile.Entry{}}
	if c.col.Width > 0 {
		var err error
		if c.values, err = r.block("sampleCounts", c.col.Section, 0, c.col.Section.Length); err != nil {
			return nil, err
		}
	}
	var sum int64
	for h := range r.meta.Shards {
		v, ok := c.col.value(h, c.values[h*int64(c.col.Width):])
		if !ok || v > r.meta.Samples-sum {
			return nil, compactError("its shards' samples pass its header's %d at shard %d", r.meta.Samples, h)
		}
		sum += v
	}
	if sum != r.meta.Samples {
		return nil, compactError("its shards' samples add to %d, its header says %d", sum, r.meta.Samples)
	}
	return c, nil
}

// Lean is the planner's view of the index with its counts and no shard
// held (planner.StreamIndex.Summary and Counts): what a sidecar plans
// with, reading its shards' entries as it needs them (Resolve).
func (r *Reader) Lean() (planner.StreamIndex, *Counts, error) {
	c, err := r.Counts()
	if err != nil {
		return planner.StreamIndex{}, nil, err
	}
	x := r.Summary()
	x.Counts = c
	return x, c, nil
}

// LeanFile is the index as a sidecar reads it: its header's File, whose
// shards (File.Shard) are those the returned counts resolved, and the
// planner's view of it with those counts (Lean). The first shard is
// resolved at once: readers take a stream's schema from it.
func (r *Reader) LeanFile() (*indexfile.File, planner.StreamIndex, *Counts, error) {
	x, c, err := r.Lean()
	if err != nil {
		return nil, planner.StreamIndex{}, nil, err
	}
	f := r.File.InParts(c)
	if r.meta.Shards > 0 {
		if err := c.Resolve([]int64{0}); err != nil {
			return nil, planner.StreamIndex{}, nil, err
		}
	}
	return f, x, c, nil
}

// StreamIndex is the planner's view of the index with these counts
// (Lean's).
func (c *Counts) StreamIndex() planner.StreamIndex {
	x := c.r.Summary()
	x.Counts = c
	return x
}

// Shards is the number of shards of the index.
func (c *Counts) Shards() int64 { return c.r.meta.Shards }

// BytesRead is the bytes of the index read so far, its header's included.
func (c *Counts) BytesRead() int64 { return c.r.BytesRead() }

// Samples implements planner.ShardCounts.
func (c *Counts) Samples(h int64) int64 {
	v, _ := c.col.value(h, c.values[h*int64(c.col.Width):]) // checked by Counts
	return v
}

// Shard implements planner.ShardCounts, for a shard Resolve was given:
// asking for another is the caller's mistake.
func (c *Counts) Shard(h int64) planner.Shard {
	return c.r.File.ShardOf(c.MustEntry(h))
}

// Entry is shard h's entry, if Resolve was given it.
func (c *Counts) Entry(h int64) (indexfile.Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[h]
	if !ok {
		return indexfile.Entry{}, false
	}
	return *e, true
}

// MustEntry is shard h's entry, which Resolve was given.
func (c *Counts) MustEntry(h int64) *indexfile.Entry {
	c.mu.Lock()
	e, ok := c.entries[h]
	c.mu.Unlock()
	if !ok {
		panic(fmt.Sprintf("index: shard %d of a compact index was not resolved before it was asked for", h))
	}
	return e
}

// resolveAtOnce bounds the runs of shards Resolve reads at once.
const resolveAtOnce = 32

// Resolve fetches the entries of shards not fetched yet: the records of
// shards close together (in one block of records) in one ranged read, up
// to resolveAtOnce such runs at once, each entry checked as a reader of
// the whole index checks it.
func (c *Counts) Resolve(shards []int64) error {
	c.mu.Lock()
	var need []int64
	for _, h := range shards {
		if _, ok := c.entries[h]; !ok && h >= 0 && h < c.r.meta.Shards {
			need = append(need, h)
		}
	}
	c.mu.Unlock()
	slices.Sort(need)
	need = slices.Compact(need)
	span := max(1, c.r.meta.BlockSize/max(1, c.r.meta.Records.width()))
	var g errgroup.Group
	g.SetLimit(resolveAtOnce)
	for i := 0; i < len(need); {
		j := i + 1
		for j < len(need) && need[j]-need[i] < span {
			j++
		}
		run := need[i:j]
		g.Go(func() error { return c.resolveRun(run) })
		i = j
	}
	return g.Wait()
}

// resolveRun fetches the entries of a run of shards, sorted, in one block
// of records.
func (c *Counts) resolveRun(run []int64) error {
	lo, hi := run[0], run[len(run)-1]+1
	got, err := c.r.entries(lo, hi, c.Samples)
	if err != nil {
		return err
	}
	head := *c.r.File
	for _, h := range run {
		e := got[h-lo]
		head.Shards = []indexfile.Entry{e}
		if err := head.CheckShards(); err != nil {
			return err
		}
		c.mu.Lock()
		c.entries[h] = &e
		c.mu.Unlock()
	}
	return nil
}

// ResolvedShards yields the shards whose entries are held, in no order.
func (c *Counts) ResolvedShards(yield func(int) bool) {
	c.mu.Lock()
	held := make([]int, 0, len(c.entries))
	for h := range c.entries {
		held = append(held, int(h))
	}
	c.mu.Unlock()
	for _, h := range held {
		if !yield(h) {
			return
		}
	}
}

// Resolved is how many shards' entries are held.
func (c *Counts) Resolved() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
