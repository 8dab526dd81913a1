package planner

import (
	"cmp"
	"slices"
)

// The steps of a plan: global steps, their batch sizes and phases, and the
// data a schedule skipped. Without a schedule, every step has batch size G
// and no phase.

// GlobalStep returns the global step of step k of epoch e: e·K + k.
func (pl *Plan) GlobalStep(e, k int64) int64 { return e*pl.steps + k }

// BatchSize returns the global batch size of step k of the epoch: G, or
// the schedule's at that step.
func (ep *EpochPlan) BatchSize(k int64) int64 { return ep.o.batchSize(k) }

// Phase returns the index of the phase whose data step k of the epoch
// delivers (-1 before the first phase), and whether the step repeats
// earlier steps. Unscheduled plans: -1, false.
func (ep *EpochPlan) Phase(k int64) (int, bool) { return ep.o.phase(k) }

// Skips returns the data the schedule's skip phases jumped past.
func (pl *Plan) Skips() []Skip { return pl.order.skips() }

// SkippedBatch appends the samples step k of a skip would have delivered
// (k in [0, Steps)), position-major over every split: they are never
// delivered, and never lost.
func (pl *Plan) SkippedBatch(dst []Sample, sk Skip, k int64) []Sample {
	return sk.data.skippedBatch(dst, sk, k)
}

// CacheEpochs returns the epochs whose minimum cache bounds every epoch's:
// epoch 0 without a schedule; with one, also the epochs where a phase
// starts and the epoch after each.
func (pl *Plan) CacheEpochs() []int64 { return pl.order.cacheEpochs() }

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
// needs to count the rows, or micro-batches, still to come. It is nil
// where the size varies with each epoch's order (a bucketed plan with a
// batch size per bucket): EpochPlan.BatchSizeCounts counts them.
func (pl *Plan) BatchSizes() []SizeRun { return pl.order.batchSizes() }

// SizeCount is a global batch size and the number of steps of it.
type SizeCount struct {
	GlobalBatchSize int64 `json:"globalBatchSize"`
	Steps           int64 `json:"steps"`
}

// BatchSizeCounts counts the epoch's steps from step from to its end by
// their global batch size, smallest first: what a client needs to count
// the micro-batches still to come where the size varies by step
// (BatchSizes is nil). It costs O(steps).
func (ep *EpochPlan) BatchSizeCounts(from int64) []SizeCount {
	counts := map[int64]int64{}
	for k := max(from, 0); k < ep.plan.steps; k++ {
		counts[ep.BatchSize(k)]++
	}
	var out []SizeCount
	for g, n := range counts {
		out = append(out, SizeCount{g, n})
	}
	slices.SortFunc(out, func(a, b SizeCount) int { return cmp.Compare(a.GlobalBatchSize, b.GlobalBatchSize) })
	return out
}

// Scheduled reports whether the dataset has a schedule (spec.schedule),
// even one of no phases yet: phases may be appended while its jobs run.
// It is for what callers show and watch; the plan's own code never asks.
func (pl *Plan) Scheduled() bool { return pl.params.Schedule != nil }
