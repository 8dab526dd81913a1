package planner

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Schedules (docs/planner.md, schedules): a plan over training steps
// instead of epochs. Each stream is cut into the S splits on its own, pass
// after pass: pass p of stream s is epoch p of a one-stream plan of all its
// samples with a seed of its own, so a stream's sample repeats only after
// its whole pass, in a new order. Every split draws, at each step, G/S
// samples from the streams in the proportions of the step's phase,
// interleaved from the split's own offset, each stream's from where its
// sequence in that split stopped. The global steps count from the job's
// start: step k of epoch e is global step e·K + k, K the steps an epoch has
// without a schedule. A global batch is the same positions of every split,
// so every world size dividing S gets the same global batches.

// Schedule is the phases of a scheduled plan, in order of their steps.
// Only that the plan is scheduled is in the fingerprint: phases may be
// appended while jobs run (after their committed steps).
type Schedule struct {
	Phases []Phase
}

// Phase changes the plan from global step StartStep on. A phase sets
// Proportions, GlobalBatchSize or both; or skips or repeats steps, and
// nothing else.
type Phase struct {
	StartStep int64
	// Proportions, if set, are every stream's weight (an exact decimal, 0
	// allowed) from StartStep on.
	Proportions map[string]string
	// GlobalBatchSize, if not 0, is G from StartStep on: a multiple of S.
	GlobalBatchSize int64
	// SkipSteps skips the data of that many steps: step StartStep gets
	// what step StartStep+SkipSteps would have had. Their samples are
	// skipped: never delivered, never lost.
	SkipSteps int64
	// RepeatSteps replays the steps before StartStep: steps StartStep …
	// StartStep+RepeatSteps−1 get the batches of the RepeatSteps steps
	// before StartStep again, marked repeated; then the data continues
	// where it stopped.
	RepeatSteps int64
}

// maxPhases bounds a schedule (memory is O(phases · splits · streams)).
const maxPhases = 1000

// maxPeriod bounds the interleaving period of a phase's proportions.
const maxPeriod = int64(1) << 40

// Hash identifies the phase: what a job's state records of each phase it
// used, so that a resume under another phase of that step is refused.
func (ph Phase) Hash() string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "start=%d;g=%d;skip=%d;repeat=%d", ph.StartStep, ph.GlobalBatchSize, ph.SkipSteps, ph.RepeatSteps)
	names := make([]string, 0, len(ph.Proportions))
	for n := range ph.Proportions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		_, _ = fmt.Fprintf(h, ";%s=%s", n, canonicalDecimal(ph.Proportions[n]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// schedule is the plan of a scheduled dataset.
type schedule struct {
	// passes are the streams cut on their own; length their split lengths.
	passes []*Plan
	length []int64
	// segments cover the global steps from 0, by start.
	segments []segment
	skips    []Skip

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
	seg       segment
}

// validateSchedule checks the phases against the streams.
func (p *Params) validateSchedule() error {
	sc := p.Schedule
	if p.Batching == BatchingPerStream {
		return fieldErr("spec.batching", "per_stream batching cannot follow a schedule: a schedule mixes the streams of every batch in its phase's proportions (stratified)")
	}
	if len(sc.Phases) > maxPhases {
		return fieldErr("spec.schedule.phases", "has %d phases, more than %d", len(sc.Phases), maxPhases)
	}
	for i, ph := range sc.Phases {
		f := fmt.Sprintf("spec.schedule.phases[%d]", i)
		if ph.StartStep < 0 || ph.StartStep > maxSamples {
			return fieldErr(f+".startStep", "must be from 0 to 2^60, got %d", ph.StartStep)
		}
		if i > 0 {
			prev := sc.Phases[i-1]
			if ph.StartStep <= prev.StartStep {
				return fieldErr(f+".startStep", "%d is not after the previous phase's %d: phases are in the order of their steps", ph.StartStep, prev.StartStep)
			}
			if ph.StartStep < prev.StartStep+prev.RepeatSteps {
				return fieldErr(f+".startStep", "%d falls in the steps the previous phase repeats (%d to %d)", ph.StartStep, prev.StartStep, prev.StartStep+prev.RepeatSteps-1)
			}
		}
		changes := ph.Proportions != nil || ph.GlobalBatchSize != 0
		switch {
		case ph.SkipSteps < 0 || ph.RepeatSteps < 0 || ph.GlobalBatchSize < 0:
			return fieldErr(f, "skipSteps, repeatSteps and globalBatchSize must not be negative")
		case ph.SkipSteps > 0 && ph.RepeatSteps > 0, (ph.SkipSteps > 0 || ph.RepeatSteps > 0) && changes:
			return fieldErr(f, "a phase skips steps, repeats steps, or changes the proportions and batch size: put each in a phase of its own")
		case ph.SkipSteps == 0 && ph.RepeatSteps == 0 && !changes:
			return fieldErr(f, "changes nothing: set proportions, globalBatchSize, skipSteps or repeatSteps")
		case ph.RepeatSteps > ph.StartStep:
			return fieldErr(f+".repeatSteps", "repeats %d steps, but only %d come before step %d", ph.RepeatSteps, ph.StartStep, ph.StartStep)
		case ph.SkipSteps > maxSamples || ph.RepeatSteps > maxSamples:
			return fieldErr(f, "skips or repeats more than 2^60 steps")
		}
		if ph.GlobalBatchSize%int64(p.NumSplits) != 0 || ph.GlobalBatchSize > maxSamples {
			return fieldErr(f+".globalBatchSize", "must be a multiple of spec.numSplits (%d), got %d: every split gives each batch the same number of samples", p.NumSplits, ph.GlobalBatchSize)
		}
		if ph.Proportions != nil {
			if _, err := p.phaseWeights(f+".proportions", ph.Proportions); err != nil {
				return err
			}
		}
	}
	return nil
}

// phaseWeights turns a phase's proportions into integer weights per stream
// in the ratio of the decimals, reduced.
func (p *Params) phaseWeights(field string, props map[string]string) ([]int64, error) {
	rats := make([]*big.Rat, len(p.Streams))
	for name := range props {
		if !slices.ContainsFunc(p.Streams, func(s Stream) bool { return s.Name == name }) {
			return nil, fieldErr(field, "names %q, which is not a stream of spec.streams", name)
		}
	}
	sum := new(big.Rat)
	for s, st := range p.Streams {
		v, ok := props[st.Name]
		if !ok {
			return nil, fieldErr(field, "gives no proportion for stream %q: give every stream one (0 leaves it out)", st.Name)
		}
		if !decimalPattern.MatchString(v) || len(v) > 20 {
			return nil, fieldErr(field+"."+st.Name, "%q is not a decimal number of at most 20 characters, e.g. \"0.25\" or \"3\"", v)
		}
		rats[s], _ = new(big.Rat).SetString(v)
		sum.Add(sum, rats[s])
	}
	if sum.Sign() == 0 {
		return nil, fieldErr(field, "are all 0: give at least one stream a proportion above 0")
	}
	lcm := big.NewInt(1)
	for _, r := range rats {
		d := r.Denom()
		g := new(big.Int).GCD(nil, nil, lcm, d)
		lcm.Mul(lcm, new(big.Int).Div(d, g))
	}
	ints := make([]*big.Int, len(rats))
	g := new(big.Int)
	for s, r := range rats {
		ints[s] = new(big.Int).Div(new(big.Int).Mul(r.Num(), lcm), r.Denom())
		g.GCD(nil, nil, g, ints[s])
	}
	weights := make([]int64, len(rats))
	total := new(big.Int)
	for s := range ints {
		ints[s].Div(ints[s], g)
		total.Add(total, ints[s])
	}
	if total.Cmp(big.NewInt(maxPeriod)) > 0 {
		return nil, fieldErr(field, "are too fine: their ratio in lowest terms sums to more than 2^40; round them")
	}
	for s := range ints {
		weights[s] = ints[s].Int64()
	}
	return weights, nil
}

// reduced divides counts by their greatest common divisor.
func reduced(counts []int64) []int64 {
	g := int64(0)
	for _, c := range counts {
		a, b := g, c
		for b != 0 {
			a, b = b, a%b
		}
		g = a
	}
	out := make([]int64, len(counts))
	for s, c := range counts {
		out[s] = c / max(g, 1)
	}
	return out
}

// cutSchedule builds the passes and the segments of a scheduled plan.
func (pl *Plan) cutSchedule() error {
	p := &pl.params
	S := int64(p.NumSplits)
	sc := &schedule{epochs: map[[2]int64]*EpochPlan{}}
	for s, st := range p.Streams {
		size := pl.shardFirst[s][len(pl.shardFirst[s])-1]
		if size < S {
			return fieldErr("spec.schedule", "a schedule cuts each stream into the %d splits on its own, and stream %q has %d samples: give it at least %d, or fewer splits",
				S, st.Name, size, S)
		}
		pass, err := newPlan(Params{
			Streams: []Stream{{Name: st.Name, Index: st.Index}},
			Seed:    derive(derive(p.Seed, purposePass), uint64(s)), NumSplits: p.NumSplits,
			Shuffle: p.Shuffle, BlockSize: p.BlockSize, RunLength: p.RunLength, GlobalBatchSize: S, DropLast: true,
		})
		if err != nil {
			return fmt.Errorf("planner: the passes of stream %d: %w", s, err)
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
		if cur.repeat == 0 {
			v, ok := positions(a-cur.start, cur.perSplit)
			if !ok {
				return fieldErr(fmt.Sprintf("spec.schedule.phases[%d].startStep", i), "%d steps of the phase before at its batch of %d per split address more than 2^62 samples per split: start the phase earlier or lower the batch size",
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
			sc.skips = append(sc.skips, Skip{Phase: i, At: a, Steps: ph.SkipSteps, seg: *skipped})
			v, ok := positions(ph.SkipSteps, perSplit)
			if !ok {
				return fieldErr(fmt.Sprintf("spec.schedule.phases[%d].skipSteps", i), "%d steps at a batch of %d per split skip more than 2^62 samples per split", ph.SkipSteps, perSplit)
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
	pl.sched = sc
	// The epochs a plan is sized by must be addressable: past them a job
	// that reaches a step beyond 2^62 positions is refused at that epoch.
	for _, e := range pl.CacheEpochs() {
		if err := sc.checkSteps(e, pl.steps); err != nil {
			return fieldErr("spec.schedule", "%v", err)
		}
	}
	return nil
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

// sample returns position i of split j at global step g.
func (pl *Plan) sample(g int64, j int, i int64) Sample {
	sc := pl.sched
	seg := sc.find(g)
	repeated := false
	for seg.repeat > 0 {
		g -= seg.repeat
		repeated = true
		seg = sc.find(g)
	}
	smp := pl.segmentSample(seg, j, (g-seg.start)*seg.perSplit+i)
	smp.Repeated = repeated
	return smp
}

// segmentSample returns position v of split j in seg.
func (pl *Plan) segmentSample(seg *segment, j int, v int64) Sample {
	sc := pl.sched
	s, u := seg.at(j, v)
	pass, t := u/sc.length[s], u%sc.length[s]
	x := sc.passEpoch(s, pass).At(j, t)
	return Sample{ID: pl.streamOffset[s] + x.ID, Stream: s, Shard: x.Shard, Pass: pass}
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

// Scheduled reports whether the plan follows a schedule.
func (pl *Plan) Scheduled() bool { return pl.sched != nil }

// GlobalStep returns the global step of step k of epoch e: e·K + k.
func (pl *Plan) GlobalStep(e, k int64) int64 { return e*pl.steps + k }

// BatchSize returns the global batch size of step k of the epoch: G, or
// the schedule's at that step.
func (ep *EpochPlan) BatchSize(k int64) int64 {
	pl := ep.plan
	if pl.sched == nil {
		return pl.params.GlobalBatchSize
	}
	return pl.sched.perSplitAt(pl.GlobalStep(ep.epoch, k)) * int64(pl.params.NumSplits)
}

// Phase returns the index of the phase whose data step k of the epoch
// delivers (-1 before the first phase), and whether the step repeats
// earlier steps. Unscheduled plans: -1, false.
func (ep *EpochPlan) Phase(k int64) (int, bool) {
	pl := ep.plan
	if pl.sched == nil {
		return -1, false
	}
	seg := pl.sched.find(pl.GlobalStep(ep.epoch, k))
	if seg.repeat > 0 {
		return seg.phase, true
	}
	return seg.phase, false
}

// scheduledBatch appends step k's samples of splits [first, first+n),
// position-major.
func (ep *EpochPlan) scheduledBatch(dst []Sample, k int64, first, n int) []Sample {
	pl := ep.plan
	g := pl.GlobalStep(ep.epoch, k)
	b := pl.sched.perSplitAt(g)
	for t := range b {
		for j := first; j < first+n; j++ {
			dst = append(dst, pl.sample(g, j, t))
		}
	}
	return dst
}

// Skips returns the data the schedule's skip phases jumped past.
func (pl *Plan) Skips() []Skip {
	if pl.sched == nil {
		return nil
	}
	return slices.Clone(pl.sched.skips)
}

// SkippedBatch appends the samples step k of a skip would have delivered
// (k in [0, Steps)), position-major over every split: they are never
// delivered, and never lost.
func (pl *Plan) SkippedBatch(dst []Sample, sk Skip, k int64) []Sample {
	for t := range sk.seg.perSplit {
		for j := range pl.params.NumSplits {
			smp := pl.segmentSample(&sk.seg, j, k*sk.seg.perSplit+t)
			smp.Skipped = true
			dst = append(dst, smp)
		}
	}
	return dst
}

// DescribePhases says what each phase of the schedule changes, for the
// plan summary.
func (pl *Plan) DescribePhases() []string {
	p := &pl.params
	if p.Schedule == nil {
		return nil
	}
	var out []string
	for _, ph := range p.Schedule.Phases {
		var parts []string
		if ph.Proportions != nil {
			var ws []string
			for _, st := range p.Streams {
				ws = append(ws, st.Name+"="+ph.Proportions[st.Name])
			}
			parts = append(parts, "proportions "+strings.Join(ws, " "))
		}
		if ph.GlobalBatchSize > 0 {
			parts = append(parts, fmt.Sprint("globalBatchSize ", ph.GlobalBatchSize))
		}
		if ph.SkipSteps > 0 {
			parts = append(parts, fmt.Sprintf("skip the data of steps %d to %d", ph.StartStep, ph.StartStep+ph.SkipSteps-1))
		}
		if ph.RepeatSteps > 0 {
			parts = append(parts, fmt.Sprintf("repeat steps %d to %d", ph.StartStep-ph.RepeatSteps, ph.StartStep-1))
		}
		out = append(out, fmt.Sprintf("from step %d: %s", ph.StartStep, strings.Join(parts, ", ")))
	}
	return out
}

// scheduledNeeds is ShardsNeeded under a schedule: for every split of the
// range and every run of the epoch's steps, the positions each stream
// gives, as passes' positions, and the shards those read, with the steps
// that read them.
func (ep *EpochPlan) scheduledNeeds(first, n int) []ShardNeed {
	pl := ep.plan
	g0 := pl.GlobalStep(ep.epoch, 0)
	g1 := g0 + pl.steps
	var out []ShardNeed
	at := map[[2]int]int{}
	add := func(s, shard int, f, l int64) {
		key := [2]int{s, shard}
		if i, dup := at[key]; dup {
			out[i].FirstStep, out[i].LastStep = min(out[i].FirstStep, f), max(out[i].LastStep, l)
			return
		}
		at[key] = len(out)
		out = append(out, ShardNeed{Stream: s, Shard: shard, Bytes: pl.shardBytes(s, int64(shard)), FirstStep: f, LastStep: l})
	}
	for j := first; j < first+n; j++ {
		pl.sched.stepNeeds(j, g0, g1, 0, func(s, shard int, f, l int64) { add(s, shard, f-g0, l-g0) })
	}
	slices.SortStableFunc(out, func(a, b ShardNeed) int { return cmp.Compare(a.FirstStep, b.FirstStep) })
	pl.addShared(out)
	return out
}

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

// PhaseHashes returns the hash of every phase of the schedule, in order
// (none without one): what a job's state records.
func (pl *Plan) PhaseHashes() []string {
	if pl.params.Schedule == nil {
		return nil
	}
	var out []string
	for _, ph := range pl.params.Schedule.Phases {
		out = append(out, ph.Hash())
	}
	return out
}

// PhaseStarts returns the global start step of every phase of the
// schedule, in order (none without one).
func (pl *Plan) PhaseStarts() []int64 {
	if pl.params.Schedule == nil {
		return nil
	}
	var out []int64
	for _, ph := range pl.params.Schedule.Phases {
		out = append(out, ph.StartStep)
	}
	return out
}

// CacheEpochs returns the epochs whose minimum cache bounds every epoch's:
// epoch 0 without a schedule; with one, also the epochs where a phase
// starts and the epoch after each (a phase's batch size and mix hold until
// the next, so later epochs read as those do).
func (pl *Plan) CacheEpochs() []int64 {
	out := []int64{0}
	if pl.params.Schedule == nil {
		return out
	}
	for _, ph := range pl.params.Schedule.Phases {
		e := ph.StartStep / pl.steps
		for _, x := range []int64{e, e + 1} {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out
}

// MinCacheBytes is EpochPlan.MinCacheBytes over the epochs of CacheEpochs:
// the cache a pod of a job of pods pods needs in any epoch.
func (pl *Plan) MinCacheBytes(pods, prefetchShards int) (int64, error) {
	var most int64
	for _, e := range pl.CacheEpochs() {
		ep, err := pl.Epoch(e)
		if err != nil {
			return 0, err
		}
		need, err := ep.MinCacheBytes(pods, prefetchShards)
		if err != nil {
			return 0, err
		}
		most = max(most, need)
	}
	return most, nil
}

// SizeRun is a run of global steps from FromStep (to the next run's) with
// one global batch size.
type SizeRun struct {
	FromStep        int64 `json:"fromStep"`
	GlobalBatchSize int64 `json:"globalBatchSize"`
}

// BatchSizes returns the global batch size of every global step as runs
// (one run of G without a schedule), repeats included: what a client
// needs to count the rows, or micro-batches, still to come.
func (pl *Plan) BatchSizes() []SizeRun {
	S := int64(pl.params.NumSplits)
	if pl.sched == nil {
		return []SizeRun{{0, pl.params.GlobalBatchSize}}
	}
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
	for _, seg := range pl.sched.segments {
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
