package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
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

// phases are the schedule's phases; none without a schedule.
func (s *Schedule) phases() []Phase {
	if s == nil {
		return nil
	}
	return s.Phases
}

// setsBatchSize says whether a schedule sets the global batch size: any
// schedule does, even of no phase yet (phases may be appended while its
// jobs run); no schedule (nil) does not.
func (s *Schedule) setsBatchSize() bool { return s != nil }

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
			return fieldErr(f+".startStep", "must be from 0 to 2^60 (and in an epoch that ends by step 2^60), got %d", ph.StartStep)
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
// roundWeights rounds each weight to the nearest multiple of a billionth
// of the largest (a weight above 0 to one at least).
func roundWeights(rats []*big.Rat) {
	most := new(big.Rat)
	for _, r := range rats {
		if r.Cmp(most) > 0 {
			most.Set(r)
		}
	}
	if most.Sign() == 0 {
		return
	}
	for i, r := range rats {
		if r.Sign() == 0 {
			continue
		}
		q := new(big.Rat).Quo(r, most)
		q.Mul(q, big.NewRat(1_000_000_000, 1))
		n := new(big.Int).Quo(new(big.Int).Add(new(big.Int).Mul(q.Num(), big.NewInt(2)), q.Denom()), new(big.Int).Mul(q.Denom(), big.NewInt(2)))
		if n.Sign() == 0 {
			n.SetInt64(1)
		}
		rats[i] = new(big.Rat).SetInt(n)
	}
}

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
		var err error
		if rats[s], err = p.ofTokens(s, rats[s]); err != nil {
			return nil, err
		}
		sum.Add(sum, rats[s])
	}

	if sum.Sign() == 0 {
		return nil, fieldErr(field, "are all 0: give at least one stream a proportion above 0")
	}
	return p.integerWeights(field, rats, false)
}

// integerWeights turns the weights into integers in lowest terms, their
// sum a period of at most 2^40.
func (p *Params) integerWeights(field string, rats []*big.Rat, rounded bool) ([]int64, error) {
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
		if p.ProportionsOfTokens && !rounded {
			// Packs over tokens may have denominators too large for a
			// period: each weight to a billionth of the largest.
			roundWeights(rats)
			return p.integerWeights(field, rats, true)
		}
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

// PhaseHashes returns the hash of every phase of the schedule, in order
// (none without one): what a job's state records.
func (pl *Plan) PhaseHashes() []string {
	var out []string
	for _, ph := range pl.params.Schedule.phases() {
		out = append(out, ph.Hash())
	}
	return out
}

// PhaseStarts returns the global start step of every phase of the
// schedule, in order (none without one).
func (pl *Plan) PhaseStarts() []int64 {
	var out []int64
	for _, ph := range pl.params.Schedule.phases() {
		out = append(out, ph.StartStep)
	}
	return out
}

// DescribePhases says what each phase of the schedule changes, for the
// plan summary.
func (pl *Plan) DescribePhases() []string {
	p := &pl.params
	var names []string // the spec's streams: a bucketed plan's are lanes
	for _, st := range p.Streams {
		names = append(names, st.Name)
	}
	if p.Bucketing != nil {
		names = p.Bucketing.Streams
	}
	var out []string
	for _, ph := range p.Schedule.phases() {
		var parts []string
		if ph.Proportions != nil {
			var ws []string
			for _, name := range names {
				ws = append(ws, name+"="+ph.Proportions[name])
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
