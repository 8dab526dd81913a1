package planner

import (
	"math"
	"slices"
	"sort"
)

// The schedule as an order: its epochs are runs of global steps, each step
// at its phase's batch size and mix (schedule.go cuts the segments).

// scheduleEpoch is one epoch of a schedule: K global steps from e·K.
type scheduleEpoch struct {
	sc    *schedule
	epoch int64
}

func (sc *schedule) epoch(e int64) (epochOrder, error) {
	if err := sc.checkSteps(e, sc.pl.steps); err != nil {
		return nil, err
	}
	return &scheduleEpoch{sc: sc, epoch: e}, nil
}

// dropped and padded: a schedule has no epochs of data; each pass drops
// its own (docs/planner.md).
func (sc *schedule) dropped() int64 { return 0 }
func (sc *schedule) padded() int64  { return 0 }

func (sc *schedule) skips() []Skip { return slices.Clone(sc.skipped) }

// cacheEpochs: phaseEpochs.
func (sc *schedule) cacheEpochs() []int64 { return phaseEpochs(sc.pl.params.Schedule, sc.pl.steps) }

// phaseEpochs are the epochs (of steps steps) whose minimum cache bounds
// every epoch's under sc: epoch 0, the epochs where a phase starts and the epoch
// after each (a phase's batch size and mix hold until the next, so later
// epochs read as those do).
func phaseEpochs(sc *Schedule, steps int64) []int64 {
	out := []int64{0}
	for _, ph := range sc.Phases {
		e := ph.StartStep / steps
		for _, x := range []int64{e, e + 1} {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

func (sc *schedule) batchSizes() []SizeRun {
	S := int64(sc.pl.params.NumSplits)
	var runs []SizeRun
	add := func(r SizeRun) {
		if n := len(runs); n > 0 && runs[n-1].GlobalBatchSize == r.GlobalBatchSize {
			return
		}
		if n := len(runs); n > 0 && runs[n-1].FromStep == r.FromStep {
			runs = runs[:n-1]
		}
		runs = append(runs, r)
	}
	for _, seg := range sc.segments {
		if seg.repeat == 0 {
			add(SizeRun{seg.start, seg.perSplit * S})
			continue
		}
		// The sizes of the steps it replays, shifted by the repeat.
		from, to := seg.start-seg.repeat, seg.start
		var replay []SizeRun
		for j, r := range runs {
			end := int64(math.MaxInt64)
			if j+1 < len(runs) {
				end = runs[j+1].FromStep
			}
			if a, b := max(r.FromStep, from), min(end, to); a < b {
				replay = append(replay, SizeRun{a + seg.repeat, r.GlobalBatchSize})
			}
		}
		for _, r := range replay {
			add(r)
		}
	}
	return runs
}

// at walks the epoch's steps to the one position t falls in: O(steps).
// A position past the epoch is the zero Sample.
func (ep *scheduleEpoch) at(j int, t int64) Sample {
	g := ep.sc.pl.GlobalStep(ep.epoch, 0)
	for end := g + ep.sc.pl.steps; g < end; g++ {
		b := ep.sc.perSplitAt(g)
		if t < b {
			return ep.sc.sample(g, j, t)
		}
		t -= b
	}
	return Sample{}
}

func (ep *scheduleEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	g := ep.sc.pl.GlobalStep(ep.epoch, k)
	for t := range ep.sc.perSplitAt(g) {
		for j := first; j < first+n; j++ {
			dst = append(dst, ep.sc.sample(g, j, t))
		}
	}
	return dst
}

func (ep *scheduleEpoch) batchSize(k int64) int64 {
	pl := ep.sc.pl
	return ep.sc.perSplitAt(pl.GlobalStep(ep.epoch, k)) * int64(pl.params.NumSplits)
}

func (ep *scheduleEpoch) phase(k int64) (int, bool) {
	seg := ep.sc.find(ep.sc.pl.GlobalStep(ep.epoch, k))
	return seg.phase, seg.repeat > 0
}

// needs: for every split of the range and every run of the epoch's steps,
// the positions each stream gives, as passes' positions, and the shards
// those read, with the steps that read them.
func (ep *scheduleEpoch) needs(first, n int, sized bool) []ShardNeed {
	pl := ep.sc.pl
	g0 := pl.GlobalStep(ep.epoch, 0)
	g1 := g0 + pl.steps
	set := newNeedSet(pl, sized)
	for j := first; j < first+n; j++ {
		ep.sc.stepNeeds(j, g0, g1, 0, func(s, shard int, f, l int64) { set.add(s, shard, f-g0, l-g0) })
	}
	return set.needs()
}

// cacheBytes is the most the needs hold at any one step.
func (ep *scheduleEpoch) cacheBytes(first, n int) int64 { return peakBytes(ep.needs(first, n, true)) }

// stepNeeds calls need for every shard split j reads in global steps
// [x, y), with the first and last of those steps (plus shift: a repeat
// reads at later steps what earlier ones read).
func (sc *schedule) stepNeeds(j int, x, y, shift int64, need func(s, shard int, first, last int64)) {
	for i := range sc.segments {
		seg := &sc.segments[i]
		end := int64(math.MaxInt64)
		if i+1 < len(sc.segments) {
			end = sc.segments[i+1].start
		}
		a, b := max(x, seg.start), min(y, end)
		if a >= b {
			continue
		}
		if seg.repeat > 0 {
			sc.stepNeeds(j, a-seg.repeat, b-seg.repeat, shift+seg.repeat, need)
			continue
		}
		v0, v1 := (a-seg.start)*seg.perSplit, (b-seg.start)*seg.perSplit
		o := seg.offset[j]
		for s := range seg.weights {
			if seg.weights[s] == 0 {
				continue
			}
			u0 := seg.adj[j][s] + seg.countBelow(s, o+v0)
			u1 := seg.adj[j][s] + seg.countBelow(s, o+v1)
			// step returns the step that reads item u of the stream.
			step := func(u int64) int64 {
				idx := u - seg.adj[j][s]
				pos := idx/seg.weights[s]*seg.period + seg.mix.pos(s, idx%seg.weights[s]) - o
				return seg.start + pos/seg.perSplit + shift
			}
			L := sc.length[s]
			exact := func(p int64) {
				t0, t1 := max(u0-p*L, 0), min(u1-p*L, L)
				for _, nd := range sc.passEpoch(s, p).ShardsNeeded(j, 1) {
					f, l := max(nd.FirstStep, t0), min(nd.LastStep, t1-1)
					if f > l {
						continue
					}
					need(s, nd.Shard, step(p*L+f), step(p*L+l))
				}
			}
			if u1 <= u0 {
				continue
			}
			pa, pb := u0/L, (u1-1)/L
			if pb-pa < 2*exactPasses+1 {
				for p := pa; p <= pb; p++ {
					exact(p)
				}
				continue
			}
			// Many passes: the first and last few exactly, and the whole
			// passes between read every shard of the split's part of the
			// stream, from the first of them to the last. The work is the
			// same for any batch size (a walk over each pass was linear in
			// it: a batch of 1.2e6 took minutes).
			for p := range int64(exactPasses) {
				exact(pa + p)
				exact(pb - p)
			}
			from, to := (pa+exactPasses)*L, (pb-exactPasses+1)*L-1
			for _, shard := range sc.splitShards(s, j) {
				need(s, shard, step(from), step(to))
			}
		}
	}
}

// exactPasses is how many passes at each end of a long run of them
// stepNeeds walks one by one.
const exactPasses = 2

// splitShards returns the shards of stream s that split j reads in some
// pass: those its widest range over the passes' cuts overlaps. A pass
// moves a split's bounds only by which splits are the longer ones (a
// sample each), so every pass reads a subset, most of them all.
func (sc *schedule) splitShards(s, j int) []int {
	sc.mu.Lock()
	if sc.units == nil {
		sc.units = make([][]unit, len(sc.passes))
	}
	if sc.units[s] == nil {
		sc.units[s] = sc.passes[s].unitsInOrder()
	}
	units := sc.units[s]
	sc.mu.Unlock()
	pl := sc.passes[s]
	lo := int64(j) * pl.splitLen
	hi := int64(j+1)*pl.splitLen + min(int64(j+1), pl.longSplits)
	i := sort.Search(len(units), func(i int) bool { return units[i].end > lo })
	var out []int
	for ; i < len(units); i++ {
		start := int64(0)
		if i > 0 {
			start = units[i-1].end
		}
		if start >= hi {
			break
		}
		if units[i].end > start { // a shard with no sample is never read
			out = append(out, units[i].shard)
		}
	}
	return out
}

// skippedBatch is Plan.SkippedBatch.
func (sc *schedule) skippedBatch(dst []Sample, sk Skip, k int64) []Sample {
	for t := range sk.seg.perSplit {
		for j := range sc.pl.params.NumSplits {
			smp := sc.segmentSample(&sk.seg, j, k*sk.seg.perSplit+t)
			smp.Skipped = true
			dst = append(dst, smp)
		}
	}
	return dst
}
