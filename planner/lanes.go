package planner

import (
	"fmt"
	"math/bits"
)

// Stratified and per_stream batching (docs/planner.md, batching methods)
// cut each stream into the S splits on its own: each stream is a lane, a
// one-stream plan of the stream's samples per epoch with a seed of its own,
// whose split j position i is the stream's i-th sample of split j.
//
//   - stratified: position t of split j is, by the interleaving of the
//     lanes' split lengths from the split's offset, item i of lane s: every
//     batch holds each stream in its proportion of the epoch, fewer than
//     two off per split.
//   - per_stream: global batch k is, by the interleaving of the lanes' batch
//     counts, batch m of lane s: positions [m·G/S, (m+1)·G/S) of its splits.
//
// Either way a global batch is the same positions of every split, so every
// world size dividing S gets the same global batches, and every rank the
// same number.
type lanes struct {
	steady
	plans []*Plan
	// length is each lane's split length L_s; steps, with per_stream, each
	// lane's batches K_s.
	length, steps []int64
	mix           interleave
	// offsets, with stratified, are where each split starts in the
	// interleaving, and skipped[j][s] the items of lane s before it:
	// computed once, as every position of the split needs them.
	offsets []int64
	skipped [][]int64
}

// laneKind selects lanes for stratified and per_stream batching.
type laneKind struct{}

func (laneKind) selects(p *Params) bool      { return p.lanes() }
func (laneKind) cut(pl *Plan) (order, error) { return cutLanes(pl) }

// cutLanes builds the lanes of a plan whose samples per stream are known.
func cutLanes(pl *Plan) (*lanes, error) {
	p := &pl.params
	S := int64(p.NumSplits)
	l := &lanes{steady: steady{pl}}
	for s, st := range p.Streams {
		if pl.counts[s] < S {
			return nil, fieldErr("spec.batching", "%s batching cuts each stream into the %d splits on its own, and stream %q gives %d samples per epoch: give it more (repeat, choose, proportion) or batch at random",
				p.Batching, S, st.Name, pl.counts[s])
		}
		lane, err := newPlan(Params{
			Streams: []Stream{{Name: st.Name, Index: st.Index, Choose: pl.counts[s]}},
			Seed:    derive(derive(p.Seed, purposeLane), uint64(s)), NumSplits: p.NumSplits,
			Shuffle: p.Shuffle, BlockSize: p.BlockSize, RunLength: p.RunLength, GlobalBatchSize: S, DropLast: true,
		})
		if err != nil {
			return nil, fmt.Errorf("planner: lane %d: %w", s, err)
		}
		l.plans = append(l.plans, lane)
		l.length = append(l.length, lane.splitLen)
	}
	b := pl.perSplit
	pl.splitLen = 0
	for _, n := range l.length {
		pl.splitLen += n
	}
	if p.Batching == BatchingStratified {
		l.mix = newInterleave(l.length)
		for j := range p.NumSplits {
			o := mulDiv(int64(j), pl.splitLen, S)
			before := make([]int64, len(l.length))
			for s := range before {
				before[s] = l.mix.before(s, o)
			}
			l.offsets, l.skipped = append(l.offsets, o), append(l.skipped, before)
		}
		if p.DropLast {
			pl.steps = pl.splitLen / b
		} else {
			pl.steps = ceilDiv(pl.splitLen, b)
		}
	} else {
		pl.steps = 0
		for s, n := range l.length {
			k := ceilDiv(n, b)
			if p.DropLast {
				k = n / b
			}
			if k == 0 {
				return nil, fieldErr("spec.batching", "per_stream batching gives each batch to one stream, and stream %q has %d samples per split, fewer than the %d each split gives to a batch (globalBatchSize/numSplits): lower globalBatchSize, give the stream more, or set dropLast: false",
					p.Streams[s].Name, n, b)
			}
			l.steps = append(l.steps, k)
			pl.steps += k
		}
		l.mix = newInterleave(l.steps)
	}
	return l, nil
}

// laneEpoch is one epoch of lanes: each lane's own epoch.
type laneEpoch struct {
	steady
	l     *lanes
	lanes []*EpochPlan
}

func (l *lanes) epoch(e int64) (epochOrder, error) {
	ep := &laneEpoch{steady: l.steady, l: l}
	for _, lane := range l.plans {
		le, err := lane.Epoch(e)
		if err != nil {
			return nil, err
		}
		ep.lanes = append(ep.lanes, le)
	}
	return ep, nil
}

func (ep *laneEpoch) at(j int, t int64) Sample {
	l, pl := ep.l, ep.pl
	var s int
	var i int64
	pad := false
	if l.steps == nil { // stratified
		if t >= pl.splitLen {
			t -= pl.splitLen
			pad = true
		}
		s, i = l.rotated(pl, j, t)
	} else {
		var m int64
		s, m = l.mix.at(t / pl.perSplit)
		i = m*pl.perSplit + t%pl.perSplit
		if i >= l.length[s] { // the lane's last batch: its split's start again
			i %= l.length[s]
			pad = true
		}
	}
	x := ep.lanes[s].At(j, i)
	return Sample{ID: pl.streamOffset[s] + x.ID, Stream: s, Shard: x.Shard, Pad: pad}
}

// The splits' starts (offsets) spread over the interleaving, with
// stratified batching, so that the splits' windows of a step differ and a
// global batch mixes the streams even when each split gives it one sample.

// rotated maps position t of split j to its lane and lane position, with
// stratified batching: the interleaving from the split's offset, around.
func (l *lanes) rotated(pl *Plan, j int, t int64) (int, int64) {
	s, g := l.mix.at((t + l.offsets[j]) % pl.splitLen)
	return s, (g - l.skipped[j][s] + l.length[s]) % l.length[s]
}

// position is rotated's inverse: the position of split j that lane s's
// position i is at.
func (l *lanes) position(pl *Plan, j, s int, i int64) int64 {
	g := (i + l.skipped[j][s]) % l.length[s]
	return (l.mix.pos(s, g) - l.offsets[j] + pl.splitLen) % pl.splitLen
}

// step returns the global step that reads position i of lane s in split
// j, and false for a position no step delivers (dropLast).
func (l *lanes) step(pl *Plan, j, s int, i int64) (int64, bool) {
	var k int64
	if l.steps == nil {
		k = l.position(pl, j, s, i) / pl.perSplit
	} else {
		m := i / pl.perSplit
		if m >= l.steps[s] {
			return 0, false
		}
		k = l.mix.pos(s, m)
	}
	return k, k < pl.steps
}

func (ep *laneEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	return positionMajor(dst, ep.at, k, ep.pl.perSplit, first, n)
}

// cacheBytes is the most the needs hold at any one step.
func (ep *laneEpoch) cacheBytes(first, n int) int64 { return peakBytes(ep.needs(first, n, true)) }

// needs is ShardsNeeded with lanes: each lane's needs, in lane positions,
// mapped to the steps that read them.
func (ep *laneEpoch) needs(first, n int, sized bool) []ShardNeed {
	l, pl := ep.l, ep.pl
	set := newNeedSet(pl, sized)
	for s, le := range ep.lanes {
		for j := first; j < first+n; j++ {
			for _, nd := range le.ShardsNeeded(j, 1) {
				if f, k, ok := l.stepsOf(pl, j, s, nd.FirstStep, nd.LastStep); ok {
					set.add(s, nd.Shard, f, k)
				}
			}
		}
	}
	return set.needs()
}

// stepsOf returns the steps that read positions [a, b] of lane s in split
// j, pad rows included; ok is false when no step does.
func (l *lanes) stepsOf(pl *Plan, j, s int, a, b int64) (first, last int64, ok bool) {
	first, last = pl.steps, -1
	add := func(k int64) { first, last = min(first, k), max(last, k) }
	// A lane's positions are at increasing positions of the split (the
	// rotation starts the lane where it starts the split), so the ends of
	// the range give the steps.
	if k, ok := l.step(pl, j, s, a); ok {
		add(k)
	}
	for i := b; i >= a; i-- { // the last position a step delivers
		if k, ok := l.step(pl, j, s, i); ok {
			add(k)
			break
		}
	}
	// Pad rows reread a split's first positions: below padTo, in padStep.
	if !pl.params.DropLast {
		if l.steps == nil {
			// The pads are the split's first positions: the lane's first
			// items among interleaving positions [o, o+pad), around.
			if pad := pl.steps*pl.perSplit - pl.splitLen; pad > 0 {
				o := l.offsets[j]
				padTo := l.mix.before(s, min(o+pad, pl.splitLen)) - l.skipped[j][s]
				if o+pad > pl.splitLen {
					padTo += l.mix.before(s, o+pad-pl.splitLen)
				}
				if a < padTo {
					add(pl.steps - 1)
				}
			}
		} else if padTo := l.steps[s]*pl.perSplit - l.length[s]; padTo > 0 && a < padTo {
			add(l.mix.pos(s, l.steps[s]-1))
		}
	}
	return first, last, last >= 0
}

// mulDiv returns floor(a·b/c) for 0 <= a <= c and b >= 0, without overflow.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b)) //nolint:gosec // non-negative
	q, _ := bits.Div64(hi, lo, uint64(c))      //nolint:gosec // a <= c: q <= b
	return int64(q)                            //nolint:gosec // <= b
}

// dropped is DroppedPerEpoch with lanes.
func (l *lanes) dropped() int64 {
	pl := l.pl
	S := int64(pl.params.NumSplits)
	var d int64
	for s, lane := range l.plans {
		d += lane.longSplits
		if pl.params.DropLast && l.steps != nil {
			d += S * (l.length[s] - l.steps[s]*pl.perSplit)
		}
	}
	if pl.params.DropLast && l.steps == nil {
		d += S * (pl.splitLen - pl.steps*pl.perSplit)
	}
	return d
}

// padded is PaddedPerEpoch with lanes.
func (l *lanes) padded() int64 {
	pl := l.pl
	if pl.params.DropLast {
		return 0
	}
	S := int64(pl.params.NumSplits)
	if l.steps == nil {
		return S * (pl.steps*pl.perSplit - pl.splitLen)
	}
	var p int64
	for s := range l.plans {
		p += S * (l.steps[s]*pl.perSplit - l.length[s])
	}
	return p
}
