package planner

import (
	"fmt"
	"sort"
	"sync"
)

// A bucketed dataset with a schedule (docs/planner.md, bucketing): the
// buckets' order is over *data steps*, the global steps with the
// schedule's skips and repeats taken out: a skip of n steps at step a
// moves every later step n data steps on (the skipped data steps are
// drawn and never delivered), a repeat of n steps at a replays steps a−n …
// a−1 (their data steps) and moves every later step n data steps back.
// Data step d is step d mod K of data epoch d div K of the buckets' order,
// and bucket b's local step there is its plan's (scheduled over its own
// steps, its phases at the data steps of the dataset's).

// scheduledBucketKind selects what both bucketing and a schedule select
// (so it comes before either in orders).
type scheduledBucketKind struct{}

func (scheduledBucketKind) selects(p *Params) bool {
	return bucketKind{}.selects(p) && scheduleKind{}.selects(p)
}
func (scheduledBucketKind) cut(pl *Plan) (order, error) { return cutScheduledBuckets(pl) }

// scheduledBuckets is the order of a bucketed plan with a schedule: the
// buckets' data epochs, read at the data steps of the global steps.
type scheduledBuckets struct {
	*buckets
	steps *dataSteps
	// orders keeps the data epochs in use (orderOf).
	orders dataOrders
}

// cutScheduledBuckets plans each bucket as a schedule of no phase, which
// gives the buckets' steps, then again with the phases at its own steps: a
// phase changes no step count.
func cutScheduledBuckets(pl *Plan) (*scheduledBuckets, error) {
	b, err := cutBuckets(pl, &Schedule{})
	if err != nil {
		return nil, err
	}
	o := &scheduledBuckets{buckets: b}
	o.steps = newDataSteps(pl.params.Schedule, o)
	for i, k := range b.which {
		sub := b.plans[k].params
		sub.Schedule = &Schedule{Phases: o.bucketPhases(i)}
		bp, err := newPlan(sub)
		if err != nil {
			return nil, fmt.Errorf("spec.schedule: bucket %d (%s): %w", k, pl.params.Bucketing.Labels[k], err)
		}
		if bp.steps != b.plans[k].steps {
			return nil, fmt.Errorf("planner: internal error: bucket %d's phases changed its steps", k)
		}
		b.plans[k] = bp
	}
	return o, nil
}

// bucketPhases are the schedule's phases for bucket which[i]: each at the
// bucket's first step at or after the phase's data step, with the
// proportions of the bucket's lanes, so that a bucket's steps take the
// batch size and mix the schedule gives the global steps they are.
func (o *scheduledBuckets) bucketPhases(i int) []Phase {
	p := &o.pl.params
	B := p.Bucketing.Buckets
	var phases []Phase
	for _, ph := range p.Schedule.Phases {
		if ph.SkipSteps > 0 || ph.RepeatSteps > 0 {
			continue // the data steps' business (dataSteps)
		}
		d, _ := o.steps.data(ph.StartStep)
		at := o.before(i, d)
		local := Phase{StartStep: at, GlobalBatchSize: ph.GlobalBatchSize}
		if ph.Proportions != nil {
			local.Proportions = map[string]string{}
			for _, lane := range o.lanes[o.which[i]] {
				local.Proportions[p.Streams[lane].Name] = ph.Proportions[p.Bucketing.Streams[lane/B]]
			}
		}
		if n := len(phases); n > 0 && phases[n-1].StartStep == at { // no step of the bucket between them
			if local.GlobalBatchSize > 0 {
				phases[n-1].GlobalBatchSize = local.GlobalBatchSize
			}
			if local.Proportions != nil {
				phases[n-1].Proportions = local.Proportions
			}
			continue
		}
		phases = append(phases, local)
	}
	return phases
}

func (o *scheduledBuckets) epoch(e int64) (epochOrder, error) {
	return &scheduledBucketEpoch{o: o, e: e}, nil
}

// skips are the data steps each skip phase drew and never delivered.
func (o *scheduledBuckets) skips() []Skip { return append([]Skip{}, o.steps.skips...) }

// cacheEpochs: phaseEpochs, as a schedule's own.
func (o *scheduledBuckets) cacheEpochs() []int64 {
	return phaseEpochs(o.pl.params.Schedule, o.pl.steps)
}

// batchSizes is nil: each bucket takes a phase's batch size at its own
// step, so the size varies by step (EpochPlan.BatchSizeCounts counts them).
func (o *scheduledBuckets) batchSizes() []SizeRun { return nil }

// stepRun is a run of global steps from from (to the next run's): each
// step g is data step g + shift, or, in a repeat (back > 0), replays step
// g − back.
type stepRun struct {
	from, shift, back int64
}

// dataSteps maps global steps to data steps.
type dataSteps struct {
	runs []stepRun
	// skips are the data steps each skip phase drew and never delivered.
	skips []Skip
}

// newDataSteps maps the steps of sc; its skips' data draws from data.
func newDataSteps(sc *Schedule, data skippedData) *dataSteps {
	ds := &dataSteps{runs: []stepRun{{}}}
	var shift int64
	for i, ph := range sc.Phases {
		switch {
		case ph.SkipSteps > 0:
			ds.skips = append(ds.skips, Skip{Phase: i, At: ph.StartStep, Steps: ph.SkipSteps, data: data, from: ph.StartStep + shift})
			shift += ph.SkipSteps
			ds.runs = append(ds.runs, stepRun{from: ph.StartStep, shift: shift})
		case ph.RepeatSteps > 0:
			ds.runs = append(ds.runs, stepRun{from: ph.StartStep, back: ph.RepeatSteps})
			shift -= ph.RepeatSteps
			ds.runs = append(ds.runs, stepRun{from: ph.StartStep + ph.RepeatSteps, shift: shift})
		}
	}
	return ds
}

// data returns global step g's data step, and whether g repeats an
// earlier step.
func (ds *dataSteps) data(g int64) (int64, bool) {
	repeated := false
	for {
		r := ds.runs[sort.Search(len(ds.runs), func(i int) bool { return ds.runs[i].from > g })-1]
		if r.back == 0 {
			return g + r.shift, repeated
		}
		g -= r.back
		repeated = true
	}
}

// dataOrders keeps the buckets' orders of the data epochs in use, with each
// bucket's epoch: a few, as a schedule keeps its passes.
type dataOrders struct {
	mu     sync.Mutex
	epochs map[int64]*bucketEpoch
}

// orderOf returns data epoch e's order.
func (o *scheduledBuckets) orderOf(e int64) *bucketEpoch {
	o.orders.mu.Lock()
	defer o.orders.mu.Unlock()
	if ep, ok := o.orders.epochs[e]; ok {
		return ep
	}
	if len(o.orders.epochs) >= 8 {
		clear(o.orders.epochs)
	}
	ep, err := o.dataEpoch(e)
	if err != nil { // a scheduled bucket's epochs are all valid within maxSamples
		panic("planner: " + err.Error())
	}
	if o.orders.epochs == nil {
		o.orders.epochs = map[int64]*bucketEpoch{}
	}
	o.orders.epochs[e] = ep
	return ep
}

// scheduledBucketEpoch is one epoch of a bucketed schedule: K global
// steps from e·K, each a data step of some data epoch's order.
type scheduledBucketEpoch struct {
	o *scheduledBuckets
	e int64
}

// step returns global step k of the epoch as a bucket's step: the data
// epoch's order, the bucket (by position in which), its step in the data
// epoch, and whether the step repeats an earlier one.
func (ep *scheduledBucketEpoch) step(k int64) (*bucketEpoch, int, int64, bool) {
	d, repeated := ep.o.steps.data(ep.o.pl.GlobalStep(ep.e, k))
	be, i, m := ep.o.dataStep(d)
	return be, i, m, repeated
}

// dataStep returns data step d's order, bucket and the bucket's step.
func (o *scheduledBuckets) dataStep(d int64) (*bucketEpoch, int, int64) {
	K := o.pl.steps
	be := o.orderOf(d / K)
	i, m := be.batchOf(d % K)
	return be, i, m
}

func (ep *scheduledBucketEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	be, i, m, repeated := ep.step(k)
	from := len(dst)
	dst = be.epochs[i].o.batch(dst, m, first, n)
	for q := from; q < len(dst); q++ {
		dst[q] = be.lift(i, dst[q])
		dst[q].Repeated = repeated
	}
	return dst
}

func (ep *scheduledBucketEpoch) batchSize(k int64) int64 {
	be, i, m, _ := ep.step(k)
	return be.epochs[i].BatchSize(m)
}

// phase is the last phase that starts at or before the step.
func (ep *scheduledBucketEpoch) phase(k int64) (int, bool) {
	g := ep.o.pl.GlobalStep(ep.e, k)
	_, repeated := ep.o.steps.data(g)
	phases := ep.o.pl.params.Schedule.Phases
	return sort.Search(len(phases), func(i int) bool { return phases[i].StartStep > g }) - 1, repeated
}

// at walks the epoch's steps to the one position t falls in, O(steps), as
// a schedule's own.
func (ep *scheduledBucketEpoch) at(j int, t int64) Sample {
	S := int64(ep.o.pl.params.NumSplits)
	for k := range ep.o.pl.steps {
		if size := ep.batchSize(k) / S; t >= size {
			t -= size
			continue
		}
		return ep.batch(nil, k, j, 1)[t]
	}
	return Sample{}
}

// needs are each run of the epoch's steps as data steps, each data epoch's
// part of them as each bucket's steps, their needs clipped to those steps
// and mapped back to the global steps that read them (a repeat's again at
// its own).
func (ep *scheduledBucketEpoch) needs(first, n int, sized bool) []ShardNeed {
	o, K := ep.o, ep.o.pl.steps
	set := newNeedSet(o.pl, sized)
	sub := map[[2]int64][]ShardNeed{} // (data epoch, bucket) → needs
	g0 := o.pl.GlobalStep(ep.e, 0)
	for k := int64(0); k < K; {
		// The run of steps from k whose data steps follow on.
		d0, _ := o.steps.data(g0 + k)
		end := k + 1
		for end < K {
			if d, _ := o.steps.data(g0 + end); d != d0+end-k {
				break
			}
			end++
		}
		for e := d0 / K; e <= (d0+end-k-1)/K; e++ {
			be := o.orderOf(e)
			lo, hi := max(d0, e*K)-e*K, min(d0+end-k, (e+1)*K)-e*K // the data epoch's steps of the run
			for i := range o.which {
				key := [2]int64{e, int64(i)}
				if _, ok := sub[key]; !ok {
					sub[key] = be.epochs[i].ShardsNeeded(first, n)
				}
				for _, nd := range sub[key] {
					a, b := be.stepOf(i, nd.FirstStep), be.stepOf(i, nd.LastStep)
					if b < lo || a >= hi {
						continue
					}
					// Data steps a … b of the epoch are global steps of the run.
					a, b = max(a, lo)+e*K-d0+k, min(b, hi-1)+e*K-d0+k
					set.add(o.lanes[o.which[i]][nd.Stream], nd.Shard, a, b)
				}
			}
		}
		k = end
	}
	return set.needs()
}

func (ep *scheduledBucketEpoch) cacheBytes(first, n int) int64 {
	return objectPeak(ep.o.pl, ep.needs(first, n, true))
}

// skippedBatch is SkippedBatch of a bucketed schedule: data step
// sk.from + k, marked skipped.
func (o *scheduledBuckets) skippedBatch(dst []Sample, sk Skip, k int64) []Sample {
	be, i, m := o.dataStep(sk.from + k)
	from := len(dst)
	dst = be.epochs[i].o.batch(dst, m, 0, o.pl.params.NumSplits)
	for q := from; q < len(dst); q++ {
		dst[q] = be.lift(i, dst[q])
		dst[q].Skipped = true
	}
	return dst
}
