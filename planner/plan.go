// Package planner computes which sample every rank of a training job sees at
// every step (design §3): deterministic, the same global batches for every
// world size that divides the number of splits, resumable in O(1), and in
// O(shards) memory — never an array per sample. It does no I/O.
package planner

import (
	"fmt"
	"math"
	"slices"

	"github.com/shardfeed/shardfeed/internal/version"
)

// PlanVersion is the newest version of the plan algorithm this build
// computes. Any change to the sequence a plan yields bumps it (and the
// golden vectors in the tests); a plan that uses no feature of a newer
// version keeps the version, and the sequence, it had (Plan.Version).
const PlanVersion = version.PlanVersion

// Plan holds what is the same for every epoch: the streams, their samples per
// epoch, the split length and the batch geometry.
type Plan struct {
	params Params
	// counts is the samples per stream per epoch (design §3 step 1).
	counts []int64
	// total is T, splitLen L = T div S, longSplits m = T mod S.
	total, splitLen, longSplits int64
	// perSplit is G/S: the samples each split gives to one batch.
	perSplit int64
	steps    int64
	// streamOffset is the global id of the first sample of each stream.
	streamOffset []int64
	// shardBase is the global index of the first shard of each stream, with
	// the total number of shards at the end.
	shardBase []int64
	// shardFirst[s][h] is the index in stream s of the first sample of shard
	// h, with the stream size at the end.
	shardFirst [][]int64
	// sparseFirst stands for shardFirst[s] for a stream of ShardCounts.
	sparseFirst   []*sparseFirst
	maxShardBytes int64
	// summarized is a plan of a StreamIndex.Summary: no epoch.
	summarized  bool
	fingerprint Fingerprint
	// order is how the epochs order the samples (order.go).
	order order
}

// New validates the parameters and builds the epoch-independent part of the
// plan. Its errors are *FieldError.
func New(p Params) (*Plan, error) {
	pl, err := newPlan(p)
	if err != nil {
		return nil, err
	}
	pl.fingerprint = newFingerprint(p.version(), p.fingerprintInputs())
	return pl, nil
}

// newPlan is New without the fingerprint, which a lane does not need.
func newPlan(p Params) (*Plan, error) {
	counts, err := p.samplesPerStream()
	if err != nil {
		return nil, err
	}
	p.Streams = append([]Stream(nil), p.Streams...)
	pl := &Plan{
		params:       p,
		counts:       counts,
		perSplit:     p.GlobalBatchSize / int64(p.NumSplits),
		streamOffset: make([]int64, len(p.Streams)),
		shardBase:    make([]int64, len(p.Streams)+1),
		shardFirst:   make([][]int64, len(p.Streams)),
		sparseFirst:  make([]*sparseFirst, len(p.Streams)),
	}
	var offset int64
	for s, st := range p.Streams {
		pl.streamOffset[s] = offset
		pl.shardBase[s+1] = pl.shardBase[s] + st.Index.Len()
		if sum := st.Index.Summary; sum != nil {
			pl.summarized = pl.summarized || st.Index.Counts == nil
			pl.maxShardBytes = max(pl.maxShardBytes, sum.MaxShardBytes)
			if st.Index.Counts != nil {
				pl.sparseFirst[s] = newSparseFirst(st.Index.Counts, sum.Shards)
			}
			offset += sum.Samples
			continue
		}
		first := make([]int64, len(st.Index.Shards)+1)
		for h, sh := range st.Index.Shards {
			first[h+1] = first[h] + sh.Samples
			if sh.Samples > 0 { // a shard no filtered row is in is never fetched
				pl.maxShardBytes = max(pl.maxShardBytes, sh.Bytes)
			}
		}
		pl.shardFirst[s] = first
		offset += first[len(first)-1]
	}
	if pl.shardBase[len(p.Streams)] > math.MaxInt32 {
		return nil, fieldErr("spec.streams", "the streams have more than 2^31 shards together")
	}
	for _, c := range counts {
		pl.total += c
	}
	pl.splitLen = pl.total / int64(p.NumSplits)
	pl.longSplits = pl.total % int64(p.NumSplits)
	if p.DropLast {
		pl.steps = pl.splitLen / pl.perSplit
	} else {
		pl.steps = ceilDiv(pl.splitLen, pl.perSplit)
	}
	if pl.order, err = newOrder(pl); err != nil {
		return nil, err
	}
	if _, random := pl.order.(*randomOrder); !random && slices.ContainsFunc(p.Streams, func(s Stream) bool { return s.Index.Summary != nil }) {
		return nil, fieldErr("spec", "a plan of index summaries (compact indexes read by their headers) orders its samples at random only: the dataset's order needs every shard's counts")
	}
	return pl, nil
}

// ShardFirst returns the index in stream s of shard h's first sample, and
// shard h's samples.
func (pl *Plan) ShardFirst(s int, h int64) (first, samples int64) { return pl.first(s, h) }

// first is ShardFirst.
func (pl *Plan) first(s int, h int64) (first, samples int64) {
	if f := pl.shardFirst[s]; f != nil {
		return f[h], f[h+1] - f[h]
	}
	return pl.sparseFirst[s].first(h), pl.params.Streams[s].Index.Counts.Samples(h)
}

// streamSamples is stream s's samples.
func (pl *Plan) streamSamples(s int) int64 {
	if f := pl.shardFirst[s]; f != nil {
		return f[len(f)-1]
	}
	return pl.params.Streams[s].Index.Summary.Samples
}

// sparseFirst is the first sample of every sparseEvery-th shard of a
// stream of ShardCounts: a shard's first sample is the nearest one's plus
// the counts between, a few bytes a shard instead of eight.
type sparseFirst struct {
	counts ShardCounts
	every  []int64
}

const sparseEvery = 64

func newSparseFirst(c ShardCounts, shards int64) *sparseFirst {
	sf := &sparseFirst{counts: c, every: make([]int64, 0, shards/sparseEvery+1)}
	var n int64
	for h := range shards {
		if h%sparseEvery == 0 {
			sf.every = append(sf.every, n)
		}
		n += c.Samples(h)
	}
	return sf
}

func (sf *sparseFirst) first(h int64) int64 {
	n := sf.every[h/sparseEvery]
	for g := h / sparseEvery * sparseEvery; g < h; g++ {
		n += sf.counts.Samples(g)
	}
	return n
}

// Summarized says whether the plan was made of index summaries (a compact
// index's header, StreamIndex.Summary): it has its fingerprint, counts and
// steps, and no epoch.
func (pl *Plan) Summarized() bool { return pl.summarized }

// errSummarized is an epoch of a summarized plan.
var errSummarized = fieldErr("spec.streams", "the plan was made of the indexes' summaries (their headers), which have no shards to order: read the indexes whole")

// Params returns the parameters the plan was built from.
func (pl *Plan) Params() Params { return pl.params }

// Version returns the plan's version: 1 for a plan that uses no feature
// of a later one.
func (pl *Plan) Version() int { return pl.params.version() }

// Fingerprint returns the plan's fingerprint (design §3 step 10).
func (pl *Plan) Fingerprint() Fingerprint { return pl.fingerprint }

// SamplesPerStream returns how many samples each stream gives per epoch
// before the drops of the splits and batches.
func (pl *Plan) SamplesPerStream() []int64 { return append([]int64(nil), pl.counts...) }

// Total returns T, the samples of an epoch before any drop.
func (pl *Plan) Total() int64 { return pl.total }

// SplitLen returns L, the samples of every split after the T mod S drop.
func (pl *Plan) SplitLen() int64 { return pl.splitLen }

// Steps returns K, the global batches per epoch.
func (pl *Plan) Steps() int64 { return pl.steps }

// NumSplits returns S.
func (pl *Plan) NumSplits() int { return pl.params.NumSplits }

// GlobalBatchSize returns G.
func (pl *Plan) GlobalBatchSize() int64 { return pl.params.GlobalBatchSize }

// DroppedPerEpoch returns the samples of an epoch that no batch delivers:
// the T mod S samples of the longer splits (per stream, with lanes) and,
// with dropLast, every split's tail shorter than G/S (per stream too, with
// per_stream batching).
func (pl *Plan) DroppedPerEpoch() int64 { return pl.order.dropped() }

// PaddedPerEpoch returns the pad rows of an epoch (without dropLast).
func (pl *Plan) PaddedPerEpoch() int64 { return pl.order.padded() }

// StreamOffset returns the global id of the first sample of stream s: ids
// are the stream offset plus the index of the sample in its stream.
func (pl *Plan) StreamOffset(s int) int64 { return pl.streamOffset[s] }

// MaxShardBytes returns the size of the largest shard.
func (pl *Plan) MaxShardBytes() int64 { return pl.maxShardBytes }

// CheckWorld checks that a job of world ranks can run the plan.
func (pl *Plan) CheckWorld(world int) error {
	if world < 1 || pl.params.NumSplits%world != 0 {
		return fieldErr("world size", "%d ranks do not divide spec.numSplits (%d): run with a world size that divides it (%s)",
			world, pl.params.NumSplits, divisors(pl.params.NumSplits))
	}
	return nil
}

func divisors(n int) string {
	var ds []int
	for d := 1; d <= n && len(ds) < 12; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	s := fmt.Sprint(ds)
	if len(ds) == 12 && ds[11] != n {
		s = s[:len(s)-1] + " …]"
	}
	return s
}

// EpochPlan is the order of one epoch: the sample at any position of any
// split, computed in O(log pieces) (with a schedule, O(steps)).
type EpochPlan struct {
	plan  *Plan
	epoch int64
	o     epochOrder
	// lo and hi are the splits it holds: [0, S) unless built by EpochOf.
	lo, hi int
}

// EpochOf builds epoch e for splits [first, first+n) alone (a pod's,
// Plan.PodSplits): what a sidecar serves. The random order walks every
// shard, as Epoch does, and keeps only those splits' pieces: O(shards)
// time, O(their pieces) memory. Other orders build the whole epoch. The
// epoch answers for those splits only: a batch or the needs of another
// split panics, and what takes every split (GlobalBatch, MinCacheBytes,
// Egress, Simulate) is refused.
func (pl *Plan) EpochOf(e int64, first, n int) (*EpochPlan, error) {
	S := pl.params.NumSplits
	if first < 0 || n < 1 || first+n > S {
		return nil, fieldErr("splits", "[%d, %d) is not a range of the %d splits", first, first+n, S)
	}
	ro, random := pl.order.(*randomOrder)
	if !random || (first == 0 && n == S) {
		return pl.Epoch(e)
	}
	if e < 0 {
		return nil, fieldErr("epoch", "must be at least 0, got %d", e)
	}
	if pl.summarized {
		return nil, errSummarized
	}
	o, err := ro.epochOf(e, first, first+n)
	if err != nil {
		return nil, err
	}
	return &EpochPlan{plan: pl, epoch: e, o: o, lo: first, hi: first + n}, nil
}

// Holds says whether the epoch holds splits [first, first+n).
func (ep *EpochPlan) Holds(first, n int) bool {
	return first >= ep.lo && first+n <= ep.hi
}

// mustHold panics on splits the epoch does not hold: a caller's mistake
// (EpochOf's splits are the caller's own).
func (ep *EpochPlan) mustHold(first, n int) {
	if n > 0 && !ep.Holds(first, n) {
		panic(fmt.Sprintf("planner: splits [%d, %d) of an epoch built for splits [%d, %d) alone (EpochOf)", first, first+n, ep.lo, ep.hi))
	}
}

// whole refuses what needs every split of a partial epoch.
func (ep *EpochPlan) whole() error {
	if ep.lo != 0 || ep.hi != ep.plan.params.NumSplits {
		return fieldErr("splits", "the epoch was built for splits [%d, %d) alone (EpochOf): build it whole (Epoch) for every pod's figures", ep.lo, ep.hi)
	}
	return nil
}

// Epoch builds the order of epoch e (design §3 steps 1–4) in O(shards +
// splits) time and memory.
func (pl *Plan) Epoch(e int64) (*EpochPlan, error) {
	if e < 0 {
		return nil, fieldErr("epoch", "must be at least 0, got %d", e)
	}
	if pl.summarized {
		return nil, errSummarized
	}
	o, err := pl.order.epoch(e)
	if err != nil {
		return nil, err
	}
	return &EpochPlan{plan: pl, epoch: e, o: o, hi: pl.params.NumSplits}, nil
}

// Plan returns the epoch-independent plan.
func (ep *EpochPlan) Plan() *Plan { return ep.plan }

// Epoch returns the epoch number.
func (ep *EpochPlan) Epoch() int64 { return ep.epoch }

// Sample is one row of a batch.
type Sample struct {
	// ID is the global sample id: the stream's offset plus the index of
	// the sample in its stream.
	ID int64
	// Stream is the index of the stream in Params.Streams.
	Stream int
	// Shard is the index of the shard in its stream's index.
	Shard int
	// Pad marks a row that completes the last batch of a split without
	// dropLast: it repeats a sample from the split's start.
	Pad bool
	// Pass is the stream's pass the sample is from, under a schedule.
	Pass int64
	// Repeated marks a sample of a step a schedule repeats; Skipped one
	// of the data a schedule skipped (Plan.SkippedBatch).
	Repeated, Skipped bool
}

// At returns the sample at position t of split j, for t in [0, K·G/S)
// (under a schedule, the positions of the epoch's steps in order, each
// step at its batch size). Positions from L on are pad rows: the split's
// start again, marked. It allocates nothing.
func (ep *EpochPlan) At(j int, t int64) Sample {
	ep.mustHold(j, 1)
	return ep.o.at(j, t)
}
