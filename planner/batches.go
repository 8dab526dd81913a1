package planner

import (
	"fmt"
	"iter"
)

// Global order (design §3 step 5): global position g is position g div S of
// split g mod S, and global batch k is positions [kG, (k+1)G): positions
// [k·G/S, (k+1)·G/S) of every split, position-major.

// GlobalBatch appends the samples of global batch k to dst, in global order.
func (ep *EpochPlan) GlobalBatch(dst []Sample, k int64) ([]Sample, error) {
	if err := ep.checkStep(k); err != nil {
		return dst, err
	}
	if err := ep.whole(); err != nil {
		return dst, err
	}
	return ep.o.batch(dst, k, 0, ep.plan.params.NumSplits), nil
}

// LocalBatch appends the samples of rank's batch k to dst (design §3 step 6):
// for every position of the step and every split the rank owns, in order.
// The batch has G/world samples.
func (ep *EpochPlan) LocalBatch(dst []Sample, k int64, rank, world int) ([]Sample, error) {
	first, n, err := ep.plan.RankSplits(rank, world)
	if err != nil {
		return dst, err
	}
	return ep.SplitsBatch(dst, k, first, n)
}

func (ep *EpochPlan) checkStep(k int64) error {
	if k < 0 || k >= ep.plan.steps {
		return fieldErr("step", "%d is outside epoch %d, which has steps 0 to %d", k, ep.epoch, ep.plan.steps-1)
	}
	return nil
}

// RankSplits returns the splits rank owns in a world of world ranks: n
// splits from first.
func (pl *Plan) RankSplits(rank, world int) (first, n int, err error) {
	if err := pl.CheckWorld(world); err != nil {
		return 0, 0, err
	}
	if rank < 0 || rank >= world {
		return 0, 0, fieldErr("rank", "%d is outside a world of %d ranks (0 to %d)", rank, world, world-1)
	}
	n = pl.params.NumSplits / world
	return rank * n, n, nil
}

// PodSplits returns the splits of pod in a job of pods pods (each with the
// same number of local ranks): the union of its ranks' splits.
func (pl *Plan) PodSplits(pod, pods int) (first, n int, err error) {
	first, n, err = pl.RankSplits(pod, pods)
	if err != nil {
		return 0, 0, fmt.Errorf("pod %d of %d: %w", pod, pods, err)
	}
	return first, n, nil
}

// WorkerSteps yields the steps DataLoader worker w of n receives in an epoch
// of steps steps, for a stream that starts at step k0 (design §3 step 7):
// k0+w, k0+w+n, … A DataLoader that round-robins from worker 0 thus yields
// k0, k0+1, … in order.
func WorkerSteps(k0 int64, w, n int, steps int64) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		if n < 1 || w < 0 || w >= n || k0 < 0 {
			return
		}
		for k := k0 + int64(w); k < steps; k += int64(n) {
			if !yield(k) {
				return
			}
		}
	}
}

// SplitsBatch appends the samples step k reads from splits [first,
// first+n), position-major: a rank's batch when the splits are its own,
// a pod's reads when they are the pod's.
func (ep *EpochPlan) SplitsBatch(dst []Sample, k int64, first, n int) ([]Sample, error) {
	if err := ep.checkStep(k); err != nil {
		return dst, err
	}
	if first < 0 || n < 0 || first+n > ep.plan.params.NumSplits {
		return dst, fieldErr("splits", "[%d, %d) is outside the %d splits", first, first+n, ep.plan.params.NumSplits)
	}
	if n > 0 && !ep.Holds(first, n) {
		return dst, fieldErr("splits", "[%d, %d) are not the epoch's: it was built for splits [%d, %d) alone (EpochOf)", first, first+n, ep.lo, ep.hi)
	}
	return ep.o.batch(dst, k, first, n), nil
}
