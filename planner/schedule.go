package planner

import (
	"fmt"
	"sort"
	"sync"
)

// schedule is the plan of a scheduled dataset.
type schedule struct {
	pl *Plan
	// passes are the streams cut on their own; length their split lengths.
	passes []*Plan
	length []int64
	// segments cover the global steps from 0, by start.
	segments []segment
	skipped  []Skip

	mu     sync.Mutex
	epochs map[[2]int64]*EpochPlan // (stream, pass)
	// units are each stream's shards in its passes' order, with the
	// end of each in the samples of a pass (built on first use).
	units [][]unit
}

// unit is a shard of a pass's order and where its samples end.
type unit struct {
	end   int64
	shard int
}

// segment is a run of global steps with one batch size and one mix: from
// its start to the next segment's.
type segment struct {
	start int64
	// repeat > 0: the steps replay those repeat steps earlier.
	repeat   int64
	perSplit int64
	weights  []int64
	period   int64
	mix      interleave
	// offset[j] is where split j starts in the interleaving; adj[j][s]
	// turns an item's index in the interleaving into stream s's index in
	// split j's sequence.
	offset []int64
	adj    [][]int64
	phase  int // the phase that started it; -1 before the first
}

// Skip is the data a phase skipped: what steps [0, Steps) of its segment
// would have delivered.
type Skip struct {
	Phase int
	// At is the global step whose data the skip jumped past.
	At, Steps int64
	// data draws the skipped steps: a schedule's from the segment seg, a
	// bucketed schedule's from the data step from (bucket_schedule.go).
	data skippedData
	seg  segment
	from int64
}

// skippedData draws step k of a skip's data (Plan.SkippedBatch).
type skippedData interface {
	skippedBatch(dst []Sample, sk Skip, k int64) []Sample
}

// scheduleKind selects a schedule for a dataset with one.
type scheduleKind struct{}

func (scheduleKind) selects(p *Params) bool      { return p.Schedule != nil }
func (scheduleKind) cut(pl *Plan) (order, error) { return cutSchedule(pl) }

// cutSchedule builds the passes and the segments of a scheduled plan.
func cutSchedule(pl *Plan) (*schedule, error) {
	p := &pl.params
	S := int64(p.NumSplits)
	sc := &schedule{pl: pl, epochs: map[[2]int64]*EpochPlan{}}
	for s, st := range p.Streams {
		size := pl.shardFirst[s][len(pl.shardFirst[s])-1]
		if size < S {
			return nil, fieldErr("spec.schedule", "a schedule cuts each stream into the %d splits on its own, and stream %q has %d samples: give it at least %d, or fewer splits",
				S, st.Name, size, S)
		}
		pass, err := newPlan(Params{
			Streams: []Stream{{Name: st.Name, Index: st.Index}},
			Seed:    derive(derive(p.Seed, purposePass), uint64(s)), NumSplits: p.NumSplits,
			Shuffle: p.Shuffle, BlockSize: p.BlockSize, RunLength: p.RunLength, GlobalBatchSize: S, DropLast: true,
		})
		if err != nil {
			return nil, fmt.Errorf("planner: the passes of stream %d: %w", s, err)
		}
		sc.passes = append(sc.passes, pass)
		sc.length = append(sc.length, pass.splitLen)
	}
	if pl.steps < 1 {
		pl.steps = 1
	}

	// Walk the phases, keeping each split's count of each stream so far.
	used := make([][]int64, S)
	for j := range used {
		used[j] = make([]int64, len(p.Streams))
	}
	weights, perSplit := reduced(pl.counts), pl.perSplit
	cur := sc.open(0, perSplit, weights, used, -1)
	for i, ph := range p.Schedule.Phases {
		a := ph.StartStep
		// The epoch the phase starts in and the one after it (which a plan
		// is sized by, cacheEpochs) must end within the 2^60 steps a
		// schedule addresses (a start of 2^60 itself was let through and
		// refused later as an epoch "past" them).
		if last := (maxSamples-pl.steps)/pl.steps - 1; a/pl.steps > last {
			return nil, fieldErr(fmt.Sprintf("spec.schedule.phases[%d].startStep", i), "%d is in epoch %d of %d steps, past the last epoch a phase may start in (epoch %d: it and the epoch after end within 2^60 steps): start the phase at step %d or earlier",
				a, a/pl.steps, pl.steps, last, (last+1)*pl.steps-1)
		}
		if cur.repeat == 0 {
			v, ok := positions(a-cur.start, cur.perSplit)
			if !ok {
				return nil, fieldErr(fmt.Sprintf("spec.schedule.phases[%d].startStep", i), "%d steps of the phase before at its batch of %d per split address more than 2^62 samples per split: start the phase earlier or lower the batch size",
					a-cur.start, cur.perSplit)
			}
			cur.consume(used, v)
		}
		if ph.GlobalBatchSize > 0 {
			perSplit = ph.GlobalBatchSize / S
		}
		if ph.Proportions != nil {
			weights, _ = p.phaseWeights("", ph.Proportions)
		}
		switch {
		case ph.SkipSteps > 0:
			skipped := sc.open(a, perSplit, weights, used, i)
			sc.segments = sc.segments[:len(sc.segments)-1] // data, not steps
			sc.skipped = append(sc.skipped, Skip{Phase: i, At: a, Steps: ph.SkipSteps, data: sc, seg: *skipped})
			v, ok := positions(ph.SkipSteps, perSplit)
			if !ok {
				return nil, fieldErr(fmt.Sprintf("spec.schedule.phases[%d].skipSteps", i), "%d steps at a batch of %d per split skip more than 2^62 samples per split", ph.SkipSteps, perSplit)
			}
			skipped.consume(used, v)
			cur = sc.open(a, perSplit, weights, used, i)
		case ph.RepeatSteps > 0:
			sc.add(segment{start: a, repeat: ph.RepeatSteps, perSplit: perSplit, phase: i})
			cur = sc.open(a+ph.RepeatSteps, perSplit, weights, used, i)
		default:
			cur = sc.open(a, perSplit, weights, used, i)
		}
	}
	// The epochs a plan is sized by must be addressable: past them a job
	// that reaches a step beyond 2^62 positions is refused at that epoch.
	for _, e := range sc.cacheEpochs() {
		if err := sc.checkSteps(e, pl.steps); err != nil {
			return nil, fieldErr("spec.schedule", "%v", err)
		}
	}
	return sc, nil
}

// maxPosition bounds a split's position in a segment (steps times the
// per-split batch), leaving room for the sums made of positions.
const maxPosition = 1 << 62

// positions returns steps·perSplit, or false where it passes maxPosition.
func positions(steps, perSplit int64) (int64, bool) {
	if steps > 0 && perSplit > maxPosition/steps {
		return 0, false
	}
	return steps * perSplit, true
}

// checkSteps refuses epoch e (of steps steps) where a segment's positions
// would pass maxPosition: a phase's batch of up to 2^60 is valid, and
// only so many of its steps can be addressed.
func (sc *schedule) checkSteps(e, steps int64) error {
	if e > (maxSamples-steps)/steps {
		return fieldErr("epoch", "%d is past the 2^60 steps a schedule addresses", e)
	}
	end := (e + 1) * steps
	for i, seg := range sc.segments {
		if seg.repeat > 0 || seg.start >= end {
			continue
		}
		last := end
		if i+1 < len(sc.segments) {
			last = min(last, sc.segments[i+1].start)
		}
		if _, ok := positions(last-seg.start, seg.perSplit); !ok {
			return fieldErr("epoch", "%d reaches step %d, and the phase from step %d (a batch of %d per split) addresses no more than 2^62 samples per split: lower its globalBatchSize",
				e, last-1, seg.start, seg.perSplit)
		}
	}
	return nil
}

// add appends seg, replacing a last segment that starts at the same step
// (which then has no step).
func (sc *schedule) add(seg segment) *segment {
	if n := len(sc.segments); n > 0 && sc.segments[n-1].start == seg.start {
		sc.segments = sc.segments[:n-1]
	}
	sc.segments = append(sc.segments, seg)
	return &sc.segments[len(sc.segments)-1]
}

// open starts a segment at step start: each split's interleaving from its
// offset, each stream's index in a split continuing from used.
func (sc *schedule) open(start, perSplit int64, weights []int64, used [][]int64, phase int) *segment {
	seg := segment{start: start, perSplit: perSplit, weights: weights, mix: newInterleave(weights), phase: phase}
	for _, w := range weights {
		seg.period += w
	}
	S := int64(len(used))
	for j := range used {
		o := mulDiv(int64(j), seg.period, S)
		adj := make([]int64, len(weights))
		for s := range adj {
			adj[s] = used[j][s] - seg.countBelow(s, o)
		}
		seg.offset, seg.adj = append(seg.offset, o), append(seg.adj, adj)
	}
	return sc.add(seg)
}

// countBelow is how many items of stream s the endless interleaving holds
// at positions below x.
func (seg *segment) countBelow(s int, x int64) int64 {
	q, r := x/seg.period, x%seg.period
	return q*seg.weights[s] + seg.mix.before(s, r)
}

// consume adds to used what each split's first v positions of the segment
// take from each stream.
func (seg *segment) consume(used [][]int64, v int64) {
	for j := range used {
		o := seg.offset[j]
		for s := range used[j] {
			used[j][s] += seg.countBelow(s, o+v) - seg.countBelow(s, o)
		}
	}
}

// at returns stream s and its index in split j's sequence for position v
// of split j in the segment.
func (seg *segment) at(j int, v int64) (int, int64) {
	x := seg.offset[j] + v
	q, r := x/seg.period, x%seg.period
	s, i := seg.mix.at(r)
	return s, seg.adj[j][s] + q*seg.weights[s] + i
}

// find returns the segment of global step g.
func (sc *schedule) find(g int64) *segment {
	i := sort.Search(len(sc.segments), func(i int) bool { return sc.segments[i].start > g }) - 1
	return &sc.segments[i]
}

// passEpoch returns pass p of stream s, built once.
func (sc *schedule) passEpoch(s int, p int64) *EpochPlan {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	key := [2]int64{int64(s), p}
	if ep, ok := sc.epochs[key]; ok {
		return ep
	}
	if len(sc.epochs) >= 4*len(sc.passes) { // the passes in use: a few per stream
		clear(sc.epochs)
	}
	ep, err := sc.passes[s].Epoch(p)
	if err != nil { // p ≥ 0 always: no other error
		panic(fmt.Sprintf("planner: pass %d of stream %d: %v", p, s, err))
	}
	sc.epochs[key] = ep
	return ep
}

// perSplitAt returns G/S at global step g.
func (sc *schedule) perSplitAt(g int64) int64 {
	seg := sc.find(g)
	for seg.repeat > 0 {
		g -= seg.repeat
		seg = sc.find(g)
	}
	return seg.perSplit
}

// unitsInOrder returns the shards of a one-stream plan in the order its
// epochs cut them into splits (Epoch's steps 2–3), with where each ends.
func (pl *Plan) unitsInOrder() []unit {
	n := pl.shardBase[len(pl.params.Streams)]
	order := newPermutation(uint64(n), derive(pl.params.Seed, purposeUnitOrder))
	out := make([]unit, n)
	var end int64
	for i := range n {
		g := i
		if pl.params.Shuffle {
			g = int64(order.Apply(uint64(i)))
		}
		end += pl.shardFirst[0][g+1] - pl.shardFirst[0][g]
		out[i] = unit{end: end, shard: int(g)}
	}
	return out
}

// sample returns position i of split j at global step g.
func (sc *schedule) sample(g int64, j int, i int64) Sample {
	seg := sc.find(g)
	repeated := false
	for seg.repeat > 0 {
		g -= seg.repeat
		repeated = true
		seg = sc.find(g)
	}
	smp := sc.segmentSample(seg, j, (g-seg.start)*seg.perSplit+i)
	smp.Repeated = repeated
	return smp
}

// segmentSample returns position v of split j in seg.
func (sc *schedule) segmentSample(seg *segment, j int, v int64) Sample {
	s, u := seg.at(j, v)
	pass, t := u/sc.length[s], u%sc.length[s]
	x := sc.passEpoch(s, pass).At(j, t)
	return Sample{ID: sc.pl.streamOffset[s] + x.ID, Stream: s, Shard: x.Shard, Pass: pass}
}
