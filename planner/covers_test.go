package planner

import (
	"fmt"
	"testing"
)

// checkPodsCover runs checkCovers for every pod of a job of 1 pod and of
// S pods, each reading its splits.
func checkPodsCover(t *testing.T, ep *EpochPlan) {
	t.Helper()
	pl := ep.plan
	for _, P := range []int{1, pl.NumSplits()} {
		limit := must(ep.MinCacheBytes(P, 0))
		for pod := range P {
			first, n, _ := pl.PodSplits(pod, P)
			checkCovers(t, ep, ep.ShardsNeeded(first, n), limit, fmt.Sprintf("pod %d/%d", pod, P), func(k int64) []Sample {
				return must(ep.SplitsBatch(nil, k, first, n))
			})
		}
	}
}

// checkCovers checks that the shards read at each step of the epoch (read
// returns a step's samples, of a pod's ranks or splits) are in needs at
// that step, and that their bytes fit limit (a minimum cache without
// prefetch). what names the reader in failures.
func checkCovers(t *testing.T, ep *EpochPlan, needs []ShardNeed, limit int64, what string, read func(k int64) []Sample) {
	t.Helper()
	pl := ep.plan
	window := map[[2]int]ShardNeed{}
	for i, nd := range needs {
		if i > 0 && nd.FirstStep < needs[i-1].FirstStep {
			t.Fatalf("%s: needs not in order of first step: %+v before %+v", what, needs[i-1], nd)
		}
		window[[2]int{nd.Stream, nd.Shard}] = nd
	}
	for k := range pl.Steps() {
		bytes := map[[2]int]int64{}
		for _, smp := range read(k) {
			key := [2]int{smp.Stream, smp.Shard}
			if nd, ok := window[key]; !ok || k < nd.FirstStep || k > nd.LastStep {
				t.Fatalf("%s reads shard %v at step %d of epoch %d, outside its needs %+v (listed: %v)", what, key, k, ep.epoch, nd, ok)
			}
			// A bucketed stream's lanes read one object, cached once.
			o := pl.object(smp.Stream, smp.Shard)
			bytes[o] = max(bytes[o], pl.shardBytes(smp.Stream, int64(smp.Shard)))
		}
		var total int64
		for _, b := range bytes {
			total += b
		}
		if total > limit {
			t.Fatalf("%s reads %d bytes of shards at step %d of epoch %d, more than its minimum cache %d", what, total, k, ep.epoch, limit)
		}
	}
}
