// Package planner computes which sample every rank of a training job sees at
// every step (design §3): deterministic, the same global batches for every
// world size that divides the number of splits, resumable in O(1), and in
// O(shards) memory — never an array per sample. It does no I/O.
package planner

import (
	"fmt"
	"math"
	"sort"

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
	shardFirst    [][]int64
	maxShardBytes int64
	fingerprint   Fingerprint
	// lanes are the streams cut into the splits each on its own, for
	// stratified and per_stream batching (lanes.go); nil for random.
	lanes *lanes
	// sched is the plan of a scheduled dataset (schedule.go); nil without.
	sched *schedule
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
	}
	var offset int64
	for s, st := range p.Streams {
		pl.streamOffset[s] = offset
		pl.shardBase[s+1] = pl.shardBase[s] + int64(len(st.Index.Shards))
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
	switch {
	case p.Schedule != nil:
		if err := pl.cutSchedule(); err != nil {
			return nil, err
		}
	case p.lanes():
		if err := pl.cutLanes(); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

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
func (pl *Plan) DroppedPerEpoch() int64 {
	if pl.sched != nil { // no epochs: each pass drops its own (docs/planner.md)
		return 0
	}
	if pl.lanes != nil {
		return pl.lanes.dropped(pl)
	}
	dropped := pl.longSplits
	if pl.params.DropLast {
		dropped += int64(pl.params.NumSplits) * (pl.splitLen - pl.steps*pl.perSplit)
	}
	return dropped
}

// PaddedPerEpoch returns the pad rows of an epoch (without dropLast).
func (pl *Plan) PaddedPerEpoch() int64 {
	if pl.sched != nil {
		return 0
	}
	if pl.lanes != nil {
		return pl.lanes.padded(pl)
	}
	if pl.params.DropLast {
		return 0
	}
	return int64(pl.params.NumSplits) * (pl.steps*pl.perSplit - pl.splitLen)
}

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

// piece is the part of one shard's unit (all copies of the shard in the
// epoch, adjacent) that falls in one split.
type piece struct {
	shard  int32 // global shard index
	stream int32
	from   int64 // offset of the piece in its unit
}

// EpochPlan is the order of one epoch: for every split, its pieces in order,
// from which the sample at any position is computed in O(log pieces).
type EpochPlan struct {
	plan  *Plan
	epoch int64
	// pieces of split j are pieces[pieceOff[j]:pieceOff[j+1]]; pieceEnd is
	// each piece's end position in its split (exclusive).
	pieces   []piece
	pieceEnd []int64
	pieceOff []int64
	long     permutation // split j is one sample longer when long.Apply(j) < m
	blockKey uint64
	// lanes are the streams' own epochs, with lanes.
	lanes []*EpochPlan
}

// Epoch builds the order of epoch e (design §3 steps 1–4) in O(shards +
// splits) time and memory.
func (pl *Plan) Epoch(e int64) (*EpochPlan, error) {
	if e < 0 {
		return nil, fieldErr("epoch", "must be at least 0, got %d", e)
	}
	if pl.sched != nil { // steps and passes, not epochs: nothing to cut
		if err := pl.sched.checkSteps(e, pl.steps); err != nil {
			return nil, err
		}
		return &EpochPlan{plan: pl, epoch: e}, nil
	}
	if pl.lanes != nil {
		return pl.lanes.epoch(pl, e)
	}
	p := &pl.params
	seed := p.Seed
	ep := &EpochPlan{
		plan:     pl,
		epoch:    e,
		pieceOff: make([]int64, p.NumSplits+1),
		long:     newPermutation(uint64(p.NumSplits), derive(derive(derive(seed, purposeLongSplits), uint64(e)), 0)),
		blockKey: derive(derive(seed, purposeBlock), uint64(e)),
	}

	// Step 1: full passes, and whole shards in a seeded per-epoch order for
	// the rest, the last one cut.
	full := make([]int64, len(p.Streams))
	extra := make([][]int64, len(p.Streams))
	for s := range p.Streams {
		size := pl.shardFirst[s][len(pl.shardFirst[s])-1]
		full[s] = pl.counts[s] / size
		rem := pl.counts[s] % size
		if rem == 0 {
			continue
		}
		shards := p.Streams[s].Index.Shards
		extra[s] = make([]int64, len(shards))
		order := newPermutation(uint64(len(shards)), derive(derive(derive(seed, purposeShardPick), uint64(e)), uint64(s)))
		for i := uint64(0); rem > 0; i++ {
			h := order.Apply(i)
			take := min(rem, shards[h].Samples)
			extra[s][h] = take
			rem -= take
		}
	}

	// Steps 2–3: units (all copies of a shard, adjacent) in seed-only order
	// with shuffle, in (stream, shard) order without; cut into S splits.
	numShards := pl.shardBase[len(p.Streams)]
	unitOrder := newPermutation(uint64(numShards), derive(seed, purposeUnitOrder))
	ep.pieces = make([]piece, 0, numShards+int64(p.NumSplits))
	ep.pieceEnd = make([]int64, 0, numShards+int64(p.NumSplits))
	split, pos := 0, int64(0)
	splitLen := ep.orderedLen(0)
	stream := 0
	for i := int64(0); i < numShards; i++ {
		g := i
		if p.Shuffle {
			g = int64(unitOrder.Apply(uint64(i)))
			stream = sort.Search(len(p.Streams), func(s int) bool { return pl.shardBase[s+1] > g })
		} else {
			for pl.shardBase[stream+1] <= g {
				stream++
			}
		}
		h := g - pl.shardBase[stream]
		n := pl.shardFirst[stream][h+1] - pl.shardFirst[stream][h]
		length := full[stream] * n
		if extra[stream] != nil {
			length += extra[stream][h]
		}
		for from := int64(0); from < length; {
			take := min(length-from, splitLen-pos)
			ep.pieces = append(ep.pieces, piece{shard: int32(g), stream: int32(stream), from: from})
			pos += take
			from += take
			ep.pieceEnd = append(ep.pieceEnd, pos)
			if pos == splitLen {
				split++
				ep.pieceOff[split] = int64(len(ep.pieces))
				pos = 0
				if split < p.NumSplits {
					splitLen = ep.orderedLen(split)
				}
			}
		}
	}
	if split != p.NumSplits || pos != 0 {
		return nil, fmt.Errorf("planner: internal error: epoch %d cut into %d splits (+%d samples), want %d", e, split, pos, p.NumSplits)
	}

	// Step 4: the pieces of each split in a per-epoch order.
	if p.Shuffle {
		ep.shufflePieces()
	}
	return ep, nil
}

// orderedLen returns the length of split j before the last position of
// a longer split is dropped: L+1 for the T mod S longer splits, L otherwise.
func (ep *EpochPlan) orderedLen(j int) int64 {
	if int64(ep.long.Apply(uint64(j))) < ep.plan.longSplits {
		return ep.plan.splitLen + 1
	}
	return ep.plan.splitLen
}

func (ep *EpochPlan) shufflePieces() {
	p := &ep.plan.params
	pieceKey := derive(derive(p.Seed, purposePieceOrder), uint64(ep.epoch))
	var tmp []piece
	var lens []int64
	for j := range p.NumSplits {
		lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
		n := hi - lo
		if n < 2 {
			continue
		}
		tmp = append(tmp[:0], ep.pieces[lo:hi]...)
		lens = lens[:0]
		prev := int64(0)
		for _, end := range ep.pieceEnd[lo:hi] {
			lens = append(lens, end-prev)
			prev = end
		}
		order := newPermutation(uint64(n), derive(pieceKey, uint64(j)))
		pos := int64(0)
		for q := range n {
			old := int64(order.Apply(uint64(q)))
			ep.pieces[lo+q] = tmp[old]
			pos += lens[old]
			ep.pieceEnd[lo+q] = pos
		}
	}
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

// At returns the sample at position t of split j, for t in [0, K·G/S).
// Positions from L on are pad rows: the split's start again, marked.
// It allocates nothing.
func (ep *EpochPlan) At(j int, t int64) Sample {
	if ep.lanes != nil {
		return ep.plan.lanes.at(ep, j, t)
	}
	pad := false
	if t >= ep.plan.splitLen {
		t -= ep.plan.splitLen
		pad = true
	}
	s := ep.sampleAtInner(j, ep.inner(j, t))
	s.Pad = pad
	return s
}

// inner maps position t of split j to its place in the split's piece
// sequence: the keyed permutation of t's block (design §3 step 4), of its
// samples or, with a run length r > 1, of its runs of r samples (the
// block's last n mod r samples stay last, in order).
func (ep *EpochPlan) inner(j int, t int64) int64 {
	p := &ep.plan.params
	if !p.Shuffle {
		return t
	}
	b := p.BlockSize
	base := t / b * b
	n := b
	if base+b > ep.plan.splitLen { // the last block: its length depends on the split
		n = min(b, ep.orderedLen(j)-base)
	}
	key := derive(derive(ep.blockKey, uint64(j)), uint64(base/b))
	u := t - base
	if r := p.RunLength; r > 1 {
		runs := n / r
		if u >= runs*r {
			return t
		}
		return base + int64(newPermutation(uint64(runs), key).Apply(uint64(u/r)))*r + u%r
	}
	return base + int64(newPermutation(uint64(n), key).Apply(uint64(u)))
}

// sampleAtInner maps a position of split j's piece sequence to its sample.
func (ep *EpochPlan) sampleAtInner(j int, inner int64) Sample {
	lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
	ends := ep.pieceEnd[lo:hi]
	i, n := 0, len(ends)
	for i < n { // first piece whose end > inner
		m := int(uint(i+n) >> 1)
		if ends[m] > inner {
			n = m
		} else {
			i = m + 1
		}
	}
	start := int64(0)
	if i > 0 {
		start = ends[i-1]
	}
	pc := ep.pieces[lo+int64(i)]
	pl := ep.plan
	s := int(pc.stream)
	h := int64(pc.shard) - pl.shardBase[s]
	first := pl.shardFirst[s][h]
	size := pl.shardFirst[s][h+1] - first
	x := pc.from + inner - start
	return Sample{ID: pl.streamOffset[s] + first + x%size, Stream: s, Shard: int(h)}
}
