package planner

import (
	"fmt"
	"math/big"
	"math/bits"
)

// Bucketing (spec.bucketing, docs/planner.md) draws every global batch
// from one bucket of samples (lengths, or an image's aspect ratio). The
// plan's streams are then lanes, stream-major: spec stream s's bucket k is
// Params.Streams[s·Buckets + k], the stream's rows in that bucket (its
// index filtered by the bucket's selection), with the stream's weight.
type Bucketing struct {
	// Buckets is the number of buckets of every stream.
	Buckets int
	// Streams are the spec streams' names, for messages.
	Streams []string
	// Labels say what each bucket holds ("length in [1024, 4096)"): for
	// messages, plan --summary and the fingerprint.
	Labels []string
	// BatchSizes are each bucket's global batch size (multiples of
	// NumSplits); nil: GlobalBatchSize for every bucket. A bucket of short
	// samples may take more of them (a token or pixel budget).
	BatchSizes []int64
}

// batchSize is bucket b's global batch size.
func (b *Bucketing) batchSize(k int, g int64) int64 {
	if b.BatchSizes == nil {
		return g
	}
	return b.BatchSizes[k]
}

// MaxBuckets bounds the buckets of a dataset (index.MaxBuckets).
const MaxBuckets = 64

// bucketWindow is the number of global batches whose buckets are drawn in
// a seeded order: each window holds each bucket in its share of the epoch,
// give or take one batch.
const bucketWindow = 64

// validateBucketing checks the shape of a bucketed dataset's lanes.
func (p *Params) validateBucketing() error {
	b := p.Bucketing
	switch {
	case b.Buckets < 1 || b.Buckets > MaxBuckets:
		return fieldErr("spec.bucketing", "%d buckets: from 1 to %d", b.Buckets, MaxBuckets)
	case len(b.Streams) == 0 || len(p.Streams) != len(b.Streams)*b.Buckets:
		return fmt.Errorf("planner: %d lanes for %d streams of %d buckets", len(p.Streams), len(b.Streams), b.Buckets)
	case len(b.Labels) != b.Buckets:
		return fmt.Errorf("planner: %d bucket labels for %d buckets", len(b.Labels), b.Buckets)
	case b.BatchSizes != nil && len(b.BatchSizes) != b.Buckets:
		return fieldErr("spec.bucketing.batchSizes", "%d batch sizes for %d buckets: give one a bucket", len(b.BatchSizes), b.Buckets)
	case b.BatchSizes != nil && p.Schedule.setsBatchSize():
		return fieldErr("spec.bucketing", "a schedule's phases set the global batch size: drop spec.bucketing.batchSizes (or budget), or spec.schedule")
	}
	for k, g := range b.BatchSizes {
		if g < 1 || g > maxSamples || g%int64(p.NumSplits) != 0 {
			return fieldErr(fmt.Sprintf("spec.bucketing.batchSizes[%d]", k), "must be a multiple of spec.numSplits (%d), got %d: every split gives the same number of samples to each batch", p.NumSplits, g)
		}
	}
	for s := range b.Streams {
		first := p.Streams[s*b.Buckets]
		for k := 1; k < b.Buckets; k++ {
			l := p.Streams[s*b.Buckets+k]
			if l.weightString() != first.weightString() || len(l.Index.Shards) != len(first.Index.Shards) {
				return fmt.Errorf("planner: the lanes of stream %q differ in weight or shards", b.Streams[s])
			}
		}
	}
	return nil
}

// bucketCounts is samplesPerStream for bucketed streams: each stream's
// samples per epoch from its weight, over all its buckets, then shared by
// its buckets in proportion to their rows (largest remainders, ties to
// the lower bucket). A bucket of a stream may have no row.
func (p *Params) bucketCounts() ([]int64, error) {
	b := p.Bucketing
	whole := *p
	whole.Bucketing = nil
	whole.Streams = make([]Stream, len(b.Streams))
	for s, name := range b.Streams {
		st := p.Streams[s*b.Buckets]
		st.Name = name
		st.Index.Shards = make([]Shard, len(st.Index.Shards))
		copy(st.Index.Shards, p.Streams[s*b.Buckets].Index.Shards)
		for h := range st.Index.Shards {
			st.Index.Shards[h].Samples = 0
			for k := range b.Buckets {
				sh := p.Streams[s*b.Buckets+k].Index.Shards[h]
				if sh.Samples < 0 {
					return nil, fieldErr(fmt.Sprintf("spec.streams[%d]", s), "stream %q: shard %d (%s) has a negative count in bucket %d: rebuild its buckets", name, h, sh.Name, k)
				}
				st.Index.Shards[h].Samples += sh.Samples
			}
		}
		whole.Streams[s] = st
	}
	counts, err := whole.samplesPerStream()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(p.Streams))
	for s, c := range counts {
		weights := make([]*big.Rat, b.Buckets)
		for k := range weights {
			weights[k] = new(big.Rat).SetInt64(p.Streams[s*b.Buckets+k].Index.Samples())
		}
		copy(out[s*b.Buckets:], largestRemainder(c, weights))
	}
	return out, nil
}

// buckets are what both orders of a bucketed plan share: each bucket a
// plan of its own over its lanes (the dataset's batching, weights and
// shuffle, one seed for every bucket, so that the buckets cut the shards
// in one order and a pod reads the same shards in every bucket as far as
// their rows allow), whose K_b batches a data epoch's K global batches
// interleave in proportion, the buckets' order inside each window of
// bucketWindow batches seeded per epoch. A bucket's batches keep their
// order: the needs of its plan map to steps monotonically. How global
// steps run over the data epochs is the order's: steadyBuckets below, or
// a schedule's (bucket_schedule.go).
type buckets struct {
	pl *Plan
	// plans are the buckets' plans (nil for a bucket with no sample),
	// lanes[b][i] the plan's stream of stream i of bucket b's plan.
	plans []*Plan
	lanes [][]int
	// which are the buckets with samples, in order; mix interleaves
	// their batch counts; per is each one's samples a split gives a step.
	which []int
	mix   interleave
	per   []int64
}

// steadyBuckets is the order of a bucketed plan without a schedule: epoch
// e is the buckets' data epoch e, each step at its bucket's batch size.
type steadyBuckets struct {
	*buckets
	steady
}

type bucketKind struct{}

func (bucketKind) selects(p *Params) bool { return p.Bucketing != nil }
func (bucketKind) cut(pl *Plan) (order, error) {
	b, err := cutBuckets(pl, nil)
	if err != nil {
		return nil, err
	}
	return &steadyBuckets{buckets: b, steady: steady{pl}}, nil
}

func (o *steadyBuckets) epoch(e int64) (epochOrder, error) { return o.dataEpoch(e) }

// batchSizes is one run of G when every bucket takes G; nil when the
// size varies by step (EpochPlan.BatchSizeCounts counts them).
func (o *steadyBuckets) batchSizes() []SizeRun {
	if o.buckets.pl.params.Bucketing.BatchSizes == nil {
		return o.steady.batchSizes()
	}
	return nil
}

// cutBuckets plans each bucket, under bucketSchedule (nil: none), and
// sets the bucketed plan's split length and steps: the buckets' sums.
func cutBuckets(pl *Plan, bucketSchedule *Schedule) (*buckets, error) {
	p := &pl.params
	B := p.Bucketing.Buckets
	o := &buckets{pl: pl, plans: make([]*Plan, B), lanes: make([][]int, B)}
	var steps []int64
	pl.splitLen, pl.steps = 0, 0
	for b := range B {
		g := p.Bucketing.batchSize(b, p.GlobalBatchSize)
		sub := Params{
			Seed: derive(p.Seed, purposeBucket), NumSplits: p.NumSplits, Shuffle: p.Shuffle, BlockSize: p.BlockSize, RunLength: p.RunLength,
			GlobalBatchSize: g, DropLast: p.DropLast, Batching: p.Batching, Schedule: bucketSchedule,
		}
		var total int64
		for s := range p.Bucketing.Streams {
			lane := s*B + b
			if pl.counts[lane] == 0 {
				continue
			}
			st := p.Streams[lane]
			sub.Streams = append(sub.Streams, Stream{Name: st.Name, Index: st.Index, Choose: pl.counts[lane]})
			o.lanes[b] = append(o.lanes[b], lane)
			total += pl.counts[lane]
		}
		if total == 0 {
			continue // no sample in the bucket: it has no batch
		}
		if S := int64(p.NumSplits); total/S < g/S {
			return nil, fieldErr("spec.bucketing", "bucket %d (%s) has %d samples per epoch, fewer than one global batch (%d) cut into %d splits: every batch is drawn from one bucket; merge the bucket with a neighbour, lower its batch size, or filter its rows out",
				b, p.Bucketing.Labels[b], total, g, S)
		}
		bp, err := newPlan(sub)
		if err != nil {
			return nil, fmt.Errorf("spec.bucketing: bucket %d (%s): %w", b, p.Bucketing.Labels[b], err)
		}
		o.plans[b] = bp
		o.which, o.per = append(o.which, b), append(o.per, bp.perSplit)
		steps = append(steps, bp.steps)
		pl.splitLen += bp.splitLen
		pl.steps += bp.steps
	}
	o.mix = newInterleave(steps)
	return o, nil
}

// before returns the steps of bucket which[i] before data step g: its
// steps of the data epochs before g's, and those of g's before it.
func (o *buckets) before(i int, g int64) int64 {
	K := o.pl.steps
	e, k := g/K, g%K
	ep := &bucketEpoch{o: o, key: o.epochKey(e)}
	w := ep.window(k / bucketWindow)
	n := w.before[i]
	for _, l := range w.labels[:k%bucketWindow] {
		if int(l) == i {
			n++
		}
	}
	return e*o.mix.n[i] + n
}

func (o *buckets) dropped() int64 {
	var d int64
	for _, b := range o.which {
		d += o.plans[b].order.dropped()
	}
	return d
}

func (o *buckets) padded() int64 {
	var n int64
	for _, b := range o.which {
		n += o.plans[b].order.padded()
	}
	return n
}

// bucketEpoch is one data epoch of the buckets: each bucket's own epoch,
// and the key of the buckets' order in each window.
type bucketEpoch struct {
	steady
	o      *buckets
	epochs []*EpochPlan // by position in o.which
	key    uint64
}

// dataEpoch is data epoch e's order, with each bucket's epoch e.
func (o *buckets) dataEpoch(e int64) (*bucketEpoch, error) {
	ep := &bucketEpoch{steady: steady{o.pl}, o: o, key: o.epochKey(e)}
	for _, b := range o.which {
		be, err := o.plans[b].Epoch(e)
		if err != nil {
			return nil, err
		}
		ep.epochs = append(ep.epochs, be)
	}
	return ep, nil
}

// epochKey seeds the buckets' order in the windows of data epoch e.
func (o *buckets) epochKey(e int64) uint64 {
	return derive(derive(o.pl.params.Seed, purposeBucketOrder), uint64(e)) //nolint:gosec // e >= 0
}

// window holds the buckets of one window of global batches: labels[q] is
// the bucket (by position in which) of batch w·bucketWindow + q, and
// before[i] the batches of bucket i before the window.
type window struct {
	labels [bucketWindow]uint8
	n      int
	before [MaxBuckets]int64
}

// window computes window w: the proportional interleaving's batches of the
// window, their order shuffled by the epoch's key.
func (ep *bucketEpoch) window(w int64) *window {
	mix := ep.o.mix
	out := &window{}
	start := w * bucketWindow
	out.n = int(min(bucketWindow, mix.total-start))
	var next [MaxBuckets]int64
	for i := range mix.n {
		out.before[i] = mix.before(i, start)
		next[i] = out.before[i]
	}
	var det [bucketWindow]uint8
	for q := range out.n {
		best := -1
		for i, n := range mix.n {
			if next[i] == n {
				continue
			}
			if best < 0 || keyLess(next[i], n, next[best], mix.n[best]) {
				best = i
			}
		}
		det[q] = uint8(best) //nolint:gosec // < MaxBuckets
		next[best]++
	}
	perm := newPermutation(uint64(out.n), derive(ep.key, uint64(w))) //nolint:gosec // both non-negative
	for q := range out.n {
		out.labels[q] = det[perm.Apply(uint64(q))]
	}
	return out
}

// keyLess reports whether (2a+1)/(2n) < (2c+1)/(2m): the interleaving's
// keys, compared exactly.
func keyLess(a, n, c, m int64) bool {
	lh, ll := bits.Mul64(uint64(2*a+1), uint64(m)) //nolint:gosec // positive
	rh, rl := bits.Mul64(uint64(2*c+1), uint64(n)) //nolint:gosec // positive
	return lh < rh || lh == rh && ll < rl
}

// at returns the bucket (by position in which) and the bucket's batch of
// global batch k.
func (ep *bucketEpoch) batchOf(k int64) (int, int64) {
	w := ep.window(k / bucketWindow)
	q := int(k % bucketWindow)
	i := int(w.labels[q])
	m := w.before[i]
	for _, l := range w.labels[:q] {
		if int(l) == i {
			m++
		}
	}
	return i, m
}

// stepOf is batchOf's inverse: the global batch of bucket i's batch m.
func (ep *bucketEpoch) stepOf(i int, m int64) int64 {
	wi := ep.o.mix.pos(i, m) / bucketWindow
	w := ep.window(wi)
	r := m - w.before[i]
	for q, l := range w.labels[:w.n] {
		if int(l) == i {
			if r == 0 {
				return wi*bucketWindow + int64(q)
			}
			r--
		}
	}
	panic("planner: bucket batch outside its window")
}

// lift maps a sample of bucket i's plan to the dataset's plan.
func (ep *bucketEpoch) lift(i int, x Sample) Sample {
	b := ep.o.which[i]
	lane := ep.o.lanes[b][x.Stream]
	x.ID += ep.pl.streamOffset[lane] - ep.o.plans[b].streamOffset[x.Stream]
	x.Stream = lane
	return x
}

// positions returns the split positions of the global batches before
// window w (each step a bucket's samples a split).
func (ep *bucketEpoch) positions(w *window) int64 {
	var t int64
	for i, n := range w.before[:len(ep.o.per)] {
		t += n * ep.o.per[i]
	}
	return t
}

// stepAt returns the step whose positions hold split position t, and
// where it starts.
func (ep *bucketEpoch) stepAt(t int64) (k, start int64) {
	// The last window that starts at or before t.
	lo, hi := int64(0), (ep.o.mix.total-1)/bucketWindow
	for lo < hi {
		m := lo + (hi-lo+1)/2
		if ep.positions(ep.window(m)) <= t {
			lo = m
		} else {
			hi = m - 1
		}
	}
	w := ep.window(lo)
	start = ep.positions(w)
	for q := range w.n {
		next := start + ep.o.per[w.labels[q]]
		if t < next {
			return lo*bucketWindow + int64(q), start
		}
		start = next
	}
	panic("planner: bucket position out of range")
}

func (ep *bucketEpoch) at(j int, t int64) Sample {
	k, start := ep.stepAt(t)
	i, m := ep.batchOf(k)
	return ep.lift(i, ep.epochs[i].At(j, m*ep.o.per[i]+t-start))
}

func (ep *bucketEpoch) batchSize(k int64) int64 {
	i, m := ep.batchOf(k)
	return ep.epochs[i].BatchSize(m)
}

func (ep *bucketEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	i, m := ep.batchOf(k)
	from := len(dst)
	dst = ep.epochs[i].o.batch(dst, m, first, n)
	for q := from; q < len(dst); q++ {
		dst[q] = ep.lift(i, dst[q])
	}
	return dst
}

// needs maps each bucket's needs, in its batches, to the global steps.
func (ep *bucketEpoch) needs(first, n int, sized bool) []ShardNeed {
	set := newNeedSet(ep.pl, sized)
	for i, be := range ep.epochs {
		b := ep.o.which[i]
		for _, nd := range be.ShardsNeeded(first, n) {
			set.add(ep.o.lanes[b][nd.Stream], nd.Shard, ep.stepOf(i, nd.FirstStep), ep.stepOf(i, nd.LastStep))
		}
	}
	return set.needs()
}

// cacheBytes counts a shard once while any of its buckets holds it.
func (ep *bucketEpoch) cacheBytes(first, n int) int64 {
	return objectPeak(ep.pl, ep.needs(first, n, true))
}

// objectPeak is peakBytes with each object once: a bucketed stream's lanes
// are the same objects, which a pod caches once, with each lane's runs.
func objectPeak(pl *Plan, needs []ShardNeed) int64 {
	set := newNeedSet(pl, true)
	for _, nd := range needs {
		o := pl.object(nd.Stream, nd.Shard)
		i, held := set.at[o]
		set.add(o[0], o[1], nd.FirstStep, nd.LastStep)
		if held { // another lane of the shard: its own runs too
			set.out[i].Bytes += pl.params.Streams[nd.Stream].Index.Shards[nd.Shard].RunsBytes
		} else {
			i = set.at[o]
			set.out[i].Bytes = max(set.out[i].Bytes, nd.Bytes)
		}
	}
	return peakBytes(set.needs())
}

// BucketSummary is one bucket of a bucketed plan, per epoch.
type BucketSummary struct {
	Label string `json:"label"`
	// Samples are the bucket's samples per epoch (before drops); Steps
	// the global batches drawn from it.
	Samples int64 `json:"samples"`
	Steps   int64 `json:"steps"`
}

// Buckets returns a bucketed plan's buckets (nil for other plans).
func (pl *Plan) Buckets() []BucketSummary {
	if o, ok := pl.order.(bucketed); ok {
		return o.summary()
	}
	return nil
}

// bucketed is either order of a bucketed plan, steady or scheduled: both
// hold the buckets.
type bucketed interface{ summary() []BucketSummary }

func (o *buckets) summary() []BucketSummary {
	b := o.pl.params.Bucketing
	out := make([]BucketSummary, b.Buckets)
	for k := range out {
		out[k].Label = b.Labels[k]
		for s := range b.Streams {
			out[k].Samples += o.pl.counts[s*b.Buckets+k]
		}
		if o.plans[k] != nil {
			out[k].Steps = o.plans[k].steps
		}
	}
	return out
}
