// Package pipeline turns the plan into ready batches: fetch (shards in the
// order the plan needs them, ahead of the readers, through the shard cache)
// → decode (a shard to one Arrow record, shared by every reader) → assemble
// (a rank's local batch with the projected columns and the four
// _shardfeed_ columns of design §1) → a bounded queue per reader.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/bufpool"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/source"
)

// The columns added to every batch (design §1).
const (
	ColumnIndex  = "_shardfeed_index"
	ColumnStream = "_shardfeed_stream"
	ColumnStep   = "_shardfeed_step"
	ColumnPad    = "_shardfeed_pad"
)

// Options configure a Pipeline.
type Options struct {
	Plan *planner.Plan
	// Streams in the plan's stream order, unified (source.Unify).
	Streams []*source.Stream
	Cache   *cache.Cache
	// PrefetchShards is how many shards are fetched and decoded ahead of
	// the ones the readers need now.
	PrefetchShards int
	// DecodedLimitBytes bounds the memory of decoded shards not in use
	// (default 1 GiB); shards in use are kept whatever it says.
	DecodedLimitBytes int64
	// QueueBatches is the number of batches assembled ahead per reader
	// (default 2).
	QueueBatches int
	// Decoders bounds concurrent shard decodes (default GOMAXPROCS).
	Decoders int
	// Fetchers bounds the shards a prefetcher fetches at once (default 4).
	Fetchers int
	// SkipCorrupt delivers the rows of a shard that stays corrupt after the
	// cache's retries as zeroed rows marked _shardfeed_pad, in their planned
	// places with their planned ids (onCorruptShard: skip); otherwise the
	// batches that need it fail with an error naming it.
	SkipCorrupt bool
	// OnSkip, if set, is called once per skipped shard, from the goroutine
	// that found it corrupt.
	OnSkip func(Skip)
	// Images are the binary columns served decoded (spec.decode): each
	// value an image, each row height × width × 3 uint8.
	Images map[string]images.Spec
	// FirstSplit and Splits are the splits the pipeline serves (a pod's):
	// where a stream's index is read in parts (source.Stream.Lean), each
	// epoch is built for them alone (planner.Plan.EpochOf), and a request
	// for another split is refused. Splits 0: every split.
	FirstSplit, Splits int
}

// Pipeline serves the batches of one plan.
type Pipeline struct {
	opts    Options
	plan    *planner.Plan
	schema  *arrow.Schema
	decoded *decodedTable
	// images are the decoded image columns by position.
	images map[int]*imageColumn
	stats  counters
	// lean says a stream's index is read in parts: its shards' entries
	// are resolved before their parts are fetched or decoded.
	lean bool

	mu     sync.Mutex
	epochs map[int64]*planner.EpochPlan
	scopes map[scopeKey]*scope
	ctx    context.Context
	cancel context.CancelFunc
	// warms are the prefetchers' fetches of the next epoch's first steps;
	// warmed the parts they hold, by epoch and shard (keepWarm).
	warms  sync.WaitGroup
	warmed map[int64]map[shardKey][]cache.Shard
}

// New returns a pipeline; it starts nothing until asked for batches or to
// prefetch.
func New(opts Options) (*Pipeline, error) {
	if opts.Plan == nil || len(opts.Streams) != len(opts.Plan.Params().Streams) {
		return nil, errors.New("pipeline: a plan and one source per stream are needed")
	}
	if opts.DecodedLimitBytes <= 0 {
		opts.DecodedLimitBytes = 1 << 30
	}
	if opts.QueueBatches <= 0 {
		opts.QueueBatches = 2
	}
	if opts.Decoders <= 0 {
		opts.Decoders = runtime.GOMAXPROCS(0)
	}
	if opts.Fetchers <= 0 {
		opts.Fetchers = 4
	}
	if S := opts.Plan.NumSplits(); opts.Splits == 0 {
		opts.FirstSplit, opts.Splits = 0, S
	} else if opts.FirstSplit < 0 || opts.Splits < 0 || opts.FirstSplit+opts.Splits > S {
		return nil, fmt.Errorf("pipeline: splits [%d, %d) are not splits of the plan's %d", opts.FirstSplit, opts.FirstSplit+opts.Splits, S)
	}
	p := &Pipeline{opts: opts, plan: opts.Plan, epochs: map[int64]*planner.EpochPlan{}, scopes: map[scopeKey]*scope{}, warmed: map[int64]map[shardKey][]cache.Shard{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	fields := append([]arrow.Field(nil), opts.Streams[0].Schema().Fields()...)
	var err error
	if p.images, err = imageColumns(opts.Streams[0].Schema(), opts.Images, opts.Streams); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	for c, ic := range p.images {
		fields[c] = imageField(fields[c], ic.spec)
	}
	fields = append(fields,
		arrow.Field{Name: ColumnIndex, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColumnStream, Type: arrow.PrimitiveTypes.Int16},
		arrow.Field{Name: ColumnStep, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColumnPad, Type: arrow.FixedWidthTypes.Boolean},
	)
	p.schema = arrow.NewSchema(fields, nil)
	for i, st := range opts.Plan.Params().Streams {
		if int64(opts.Streams[i].Shards()) != st.Index.Len() {
			return nil, fmt.Errorf("pipeline: stream %q has %d shards in its source and %d in the plan", st.Name, opts.Streams[i].Shards(), st.Index.Len())
		}
		p.lean = p.lean || opts.Streams[i].Lean() != nil
	}
	for _, s := range opts.Streams {
		// A tokenized stream keeps each shard's tokens beside the shard.
		s.SetDerivedCache(opts.Cache)
	}
	p.decoded = newDecodedTable(opts.Streams, opts.Cache, opts.DecodedLimitBytes, opts.Decoders, &p.stats)
	p.decoded.skipCorrupt, p.decoded.onSkip = opts.SkipCorrupt, opts.OnSkip
	p.decoded.needed = p.needed
	// Decoded shards hold their cached parts mapped: a download that finds
	// the cache full of them takes one back.
	opts.Cache.OnFull(p.decoded.reclaim)
	return p, nil
}

// Schema returns the schema of every batch.
func (p *Pipeline) Schema() *arrow.Schema { return p.schema }

// Plan returns the plan.
func (p *Pipeline) Plan() *planner.Plan { return p.plan }

// Close stops the prefetchers and frees decoded shards.
func (p *Pipeline) Close() {
	p.cancel()
	p.mu.Lock()
	scopes := p.scopes
	p.scopes = map[scopeKey]*scope{}
	p.mu.Unlock()
	for _, s := range scopes {
		s.stop()
	}
	p.warms.Wait()
	p.unwarmBefore(math.MaxInt64)
	p.opts.Cache.OnFull(nil)
	p.decoded.close()
}

// Epoch returns the order of epoch e, computed once and kept for the two
// newest epochs asked for: of the pipeline's splits alone where a stream's
// index is read in parts.
func (p *Pipeline) Epoch(e int64) (*planner.EpochPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ep, ok := p.epochs[e]; ok {
		return ep, nil
	}
	build := p.plan.Epoch
	if p.lean {
		build = func(e int64) (*planner.EpochPlan, error) { return p.plan.EpochOf(e, p.opts.FirstSplit, p.opts.Splits) }
	}
	ep, err := build(e)
	if err != nil {
		return nil, err
	}
	p.epochs[e] = ep
	for old := range p.epochs {
		if old < e-1 {
			delete(p.epochs, old)
		}
	}
	return ep, nil
}

// Request asks for the batches of one DataLoader worker of one rank.
type Request struct {
	Epoch       int64
	Rank, World int
	// Worker w of Workers receives steps Start, Start+Workers, …
	Worker, Workers int
	Start           int64
	// Scope is the splits the sidecar prefetches for this request: the
	// pod's in rank mode pod, the rank's otherwise (zero: the rank's).
	ScopeFirst, ScopeSplits int
	// ZeroCopy makes batches for a writer that sends placeholder buffers'
	// segments (Batch.Segments) instead of their bytes.
	ZeroCopy bool
}

// Batch is one assembled local batch. Release it when done.
type Batch struct {
	Step int64
	// Record is the batch; with zero copy, its large value buffers are
	// placeholders whose bytes Segments gives.
	Record arrow.RecordBatch
	zc     *zeroCopy
	holds  []*decodedShard
	p      *Pipeline
}

// Release frees the record and the decoded shards it points into.
func (b *Batch) Release() {
	if b.Record != nil {
		b.Record.Release()
		b.Record = nil
	}
	if b.zc != nil {
		b.zc.release()
		b.zc = nil
	}
	for _, d := range b.holds {
		b.p.decoded.release(d, read)
	}
	b.holds = nil
}

// Batches is one reader's stream of batches, assembled ahead into a
// bounded queue.
type Batches struct {
	ch     chan batchOrErr
	cancel context.CancelFunc
	done   chan struct{}
}

type batchOrErr struct {
	b   Batch
	err error
}

// Batches starts assembling the batches of req.
func (p *Pipeline) Batches(ctx context.Context, req Request) (*Batches, error) {
	first, n, err := p.plan.RankSplits(req.Rank, req.World)
	if err != nil {
		return nil, err
	}
	if req.Workers < 1 || req.Worker < 0 || req.Worker >= req.Workers {
		return nil, fmt.Errorf("worker %d is outside %d workers", req.Worker, req.Workers)
	}
	if req.Start < 0 {
		return nil, fmt.Errorf("step %d is negative", req.Start)
	}
	ep, err := p.Epoch(req.Epoch)
	if err != nil {
		return nil, err
	}
	if req.ScopeSplits == 0 {
		req.ScopeFirst, req.ScopeSplits = first, n
	}
	if !ep.Holds(first, n) || !ep.Holds(req.ScopeFirst, req.ScopeSplits) {
		return nil, fmt.Errorf("rank %d of %d reads splits [%d, %d), and this sidecar serves splits [%d, %d) alone (its pod's): ask the sidecar of the rank's pod",
			req.Rank, req.World, first, first+n, p.opts.FirstSplit, p.opts.FirstSplit+p.opts.Splits)
	}
	sc := p.scope(ep, req.ScopeFirst, req.ScopeSplits, req.Start)
	ctx, cancel := context.WithCancel(ctx)
	b := &Batches{ch: make(chan batchOrErr, p.opts.QueueBatches), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer close(b.ch)
		id := sc.register(req.Start, first, n)
		defer sc.unregister(id)
		for k := req.Start; k < p.plan.Steps(); k += int64(req.Workers) {
			batch, err := p.assemble(ctx, ep, k, req.Rank, req.World, req.ZeroCopy)
			if err == nil {
				// The batch holds what it read: this reader is at its next
				// step now, not when the queue takes the batch, so that what
				// no one needs any more is let go at once.
				sc.advance(id, k+int64(req.Workers))
			}
			select {
			case b.ch <- batchOrErr{batch, err}:
			case <-ctx.Done():
				batch.Release()
				return
			}
			if err != nil {
				return
			}
		}
		// This reader is done with the epoch: the prefetcher may let go of
		// what only it needed.
		sc.advance(id, p.plan.Steps())
	}()
	return b, nil
}

// Next returns the next batch, io.EOF after the last one. The caller
// releases the batch.
func (b *Batches) Next(ctx context.Context) (Batch, error) {
	select {
	case r, ok := <-b.ch:
		if !ok {
			return Batch{}, io.EOF
		}
		return r.b, r.err
	case <-ctx.Done():
		return Batch{}, context.Cause(ctx)
	}
}

// Close stops the stream and frees its queued batches.
func (b *Batches) Close() {
	b.cancel()
	for r := range b.ch {
		r.b.Release()
	}
	<-b.done
}

// assemble builds rank's local batch k.
func (p *Pipeline) assemble(ctx context.Context, ep *planner.EpochPlan, k int64, rank, world int, zc bool) (Batch, error) {
	batch := Batch{Step: k, p: p}
	scratch := scratchPool.Get().(*scratch)
	defer scratchPool.Put(scratch)
	samples, err := ep.LocalBatch(scratch.samples[:0], k, rank, world)
	scratch.samples = samples
	if err != nil {
		return batch, err
	}
	rows, keys := p.rowsOf(samples, scratch)
	if err := p.resolve(keys); err != nil {
		return batch, fmt.Errorf("step %d: %w", k, err)
	}
	shards := make([]*decodedShard, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.Fetchers)
	for i, key := range keys {
		g.Go(func() error {
			d, err := p.decoded.acquire(gctx, key, read)
			shards[i] = d
			return err
		})
	}
	err = g.Wait()
	for _, d := range shards {
		if d != nil {
			batch.holds = append(batch.holds, d)
		}
	}
	if err != nil {
		batch.Release()
		return Batch{Step: k, p: p}, fmt.Errorf("step %d: %w", k, err)
	}
	start := time.Now()
	defer func() { p.stats.assembleNanos.Add(int64(time.Since(start))) }()
	if zc {
		batch.zc = &zeroCopy{}
	}
	err = GuardFaults(func() (err error) {
		batch.Record, err = p.build(shards, rows, samples, k, batch.zc)
		return err
	})
	if err != nil || !zc {
		// A copied batch no longer needs the shards.
		for _, d := range batch.holds {
			p.decoded.release(d, read)
		}
		batch.holds = nil
	}
	if err != nil {
		return Batch{Step: k, p: p}, err
	}
	return batch, nil
}

// scratch is what assembling a batch uses and drops: reused from batch to
// batch, which keeps the collector's work per batch down.
type scratch struct {
	samples []planner.Sample
	rows    []rowRef
	keys    []shardKey
	starts  []int64 // of keys' shards, their first rows
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

// rowsOf returns where each sample is (its row of the batch's i-th shard)
// and the batch's shards in the order first needed. A batch reads a few
// shards, mostly in runs of samples of one: looking a sample's shard up
// from the last one found costs less than hashing it (which took a twentieth
// of the sidecar's time at batches of 512).
func (p *Pipeline) rowsOf(samples []planner.Sample, scratch *scratch) ([]rowRef, []shardKey) {
	rows := slices.Grow(scratch.rows[:0], len(samples))[:len(samples)]
	keys, starts := scratch.keys[:0], scratch.starts[:0]
	last := -1
	for i, s := range samples {
		key := shardKey{s.Stream, s.Shard}
		if last < 0 || keys[last] != key {
			last = slices.Index(keys, key)
			if last < 0 {
				last = len(keys)
				keys = append(keys, key)
				first, _ := p.plan.ShardFirst(s.Stream, int64(s.Shard))
				starts = append(starts, p.plan.StreamOffset(s.Stream)+first)
			}
		}
		rows[i] = rowRef{Src: last, Row: int(s.ID - starts[last])}
	}
	scratch.rows, scratch.keys, scratch.starts = rows, keys, starts
	return rows, keys
}

// build gathers the batch's rows (rowsOf) from the decoded shards and adds
// the _shardfeed_ columns.
func (p *Pipeline) build(shards []*decodedShard, rows []rowRef, samples []planner.Sample, step int64, z *zeroCopy) (arrow.RecordBatch, error) {
	nData := p.schema.NumFields() - 4
	cols := make([]arrow.Array, 0, p.schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	raw, err := rawValues(shards, rows, nData)
	if err != nil {
		return nil, err
	}
	defer rawPool.Put(raw)
	srcs := make([]column, len(shards))
	for c := range nData {
		for i, d := range shards {
			srcs[i] = column{arr: d.sh.Arrays[c], raw: d.sh.RawIndex[c] >= 0}
		}
		var col arrow.Array
		if ic := p.images[c]; ic != nil {
			col, err = ic.gather(p.schema.Field(c).Type, srcs, rows, raw.column(c, len(rows)), samples)
		} else {
			col, err = gather(p.schema.Field(c).Type, srcs, rows, raw.column(c, len(rows)), z)
		}
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", p.schema.Field(c).Name, err)
		}
		cols = append(cols, col)
	}
	cols = append(cols, metaColumns(samples, rows, shards, step)...)
	p.stats.batches.Add(1)
	p.stats.batchRows.Add(int64(len(samples)))
	return array.NewRecordBatch(p.schema, cols, int64(len(samples))), nil
}

// metaColumns returns the _shardfeed_ columns of a batch, written into one
// buffer from the shared pool (four builders per batch made four buffers
// to allocate, zero and collect).
func metaColumns(samples []planner.Sample, rows []rowRef, shards []*decodedShard, step int64) []arrow.Array {
	n := len(samples)
	sizes := [4]int{8 * n, 2 * n, 8 * n, int(bitutil.BytesForBits(int64(n)))}
	var at [4]int
	end := 0
	for i, size := range sizes {
		at[i] = end
		end += (size + 63) &^ 63 // each buffer 64-byte aligned, as Arrow asks
	}
	buf := memory.NewResizableBuffer(bufpool.Shared)
	defer buf.Release()
	buf.Reserve(max(end, bufpool.MinPooled)) // small: reserved large enough for the pool to keep it
	buf.Resize(end)
	b := buf.Bytes()
	index := arrow.Int64Traits.CastFromBytes(b[at[0] : at[0]+sizes[0]])
	streams := arrow.Int16Traits.CastFromBytes(b[at[1] : at[1]+sizes[1]])
	steps := arrow.Int64Traits.CastFromBytes(b[at[2] : at[2]+sizes[2]])
	pad := b[at[3] : at[3]+sizes[3]]
	clear(pad) // the pool's memory is not zeroed
	for i, s := range samples {
		index[i] = s.ID
		streams[i] = int16(s.Stream) //nolint:gosec // streams are few
		steps[i] = step
		if s.Pad || shards[rows[i].Src].skipped {
			bitutil.SetBit(pad, i)
		}
	}
	types := [4]arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Boolean}
	cols := make([]arrow.Array, 4)
	for i, dt := range types {
		values := memory.SliceBuffer(buf, at[i], sizes[i])
		data := array.NewData(dt, n, []*memory.Buffer{nil, values}, nil, 0, 0)
		cols[i] = array.MakeFromData(data)
		data.Release()
		values.Release()
	}
	return cols
}

// Sample returns the one-row batch of global sample id g (step -1).
func (p *Pipeline) Sample(ctx context.Context, g int64) (arrow.RecordBatch, error) {
	params := p.plan.Params()
	for s, st := range params.Streams {
		off := p.plan.StreamOffset(s)
		if g < off || g >= off+st.Index.Samples() {
			continue
		}
		row := g - off
		// The last shard that starts at or before row and holds a sample.
		n := int(st.Index.Len())
		shard := sort.Search(n, func(h int) bool {
			first, samples := p.plan.ShardFirst(s, int64(h))
			return first+samples > row
		})
		key := shardKey{s, shard}
		if err := p.resolve([]shardKey{key}); err != nil {
			return nil, err
		}
		d, err := p.decoded.acquire(ctx, key, read)
		if err != nil {
			return nil, err
		}
		defer p.decoded.release(d, read)
		var rec arrow.RecordBatch
		samples := []planner.Sample{{ID: g, Stream: s, Shard: shard}}
		rows, _ := p.rowsOf(samples, &scratch{})
		err = GuardFaults(func() (err error) {
			rec, err = p.build([]*decodedShard{d}, rows, samples, -1, nil)
			return err
		})
		return rec, err
	}
	return nil, fmt.Errorf("sample %d is not in the dataset, whose ids are 0 to %d", g, p.lastID())
}

func (p *Pipeline) lastID() int64 {
	streams := p.plan.Params().Streams
	s := len(streams) - 1
	return p.plan.StreamOffset(s) + streams[s].Index.Samples() - 1
}

// resolve fetches the entries of the shards of streams read in parts
// (source.Stream.Lean) that are not at hand: before a batch or a
// prefetch asks for their parts.
func (p *Pipeline) resolve(keys []shardKey) error {
	if !p.lean {
		return nil
	}
	by := map[int][]int64{}
	for _, k := range keys {
		by[k.stream] = append(by[k.stream], int64(k.shard))
	}
	for s, shards := range by {
		if err := p.opts.Streams[s].Resolve(shards); err != nil {
			return err
		}
	}
	return nil
}
