package pipeline

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shardfeed/shardfeed/planner"
)

// A prefetcher's needs start with the shards its start steps read, in the
// order they first read them: with shuffle every shard of a block is
// needed from the block's first step, and fetched in the plan's order a
// pod waited for most of its splits' blocks before its start step's few.
// The others keep the plan's order, and no need is lost or repeated.
func TestAPrefetcherFetchesItsStartStepsShardsFirst(t *testing.T) {
	var idx planner.StreamIndex
	for h := range 400 {
		idx.Shards = append(idx.Shards, planner.Shard{Name: fmt.Sprintf("s%03d", h), Samples: 100, Bytes: 1000, Hash: fmt.Sprint(h)})
	}
	pl, err := planner.New(planner.Params{Streams: []planner.Stream{{Name: "s", Index: idx}}, Seed: 3, NumSplits: 16,
		Shuffle: true, BlockSize: 2000, GlobalBatchSize: 64, DropLast: true})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := pl.Epoch(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		first, n int
		start    int64
	}{
		{"a pod at the epoch's start", 0, 4, 0},
		{"a pod mid-epoch", 8, 4, pl.Steps() / 2},
		{"a pod at the last step", 12, 4, pl.Steps() - 1},
		{"every split", 0, 16, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := ep.ShardsNeeded(tc.first, tc.n)
			needs := slices.Clone(plan)
			moved := startFirst(needs, ep, pl.Steps(), tc.start, tc.first, tc.n)
			// The steps' shards, in the order they first read them.
			var want []shardKey
			for k := tc.start; k < min(tc.start+urgentSteps, pl.Steps()); k++ {
				batch, err := ep.SplitsBatch(nil, k, tc.first, tc.n)
				if err != nil {
					t.Fatal(err)
				}
				for _, smp := range batch {
					if key := (shardKey{smp.Stream, smp.Shard}); !slices.Contains(want, key) {
						want = append(want, key)
					}
				}
			}
			var got []shardKey
			for _, nd := range needs[:moved] {
				got = append(got, shardKey{nd.Stream, nd.Shard})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the first %d needs are %v, want the start steps' shards %v", moved, got, want)
			}
			// The rest in the plan's order, each need once.
			var rest []planner.ShardNeed
			for _, nd := range plan {
				if !slices.Contains(want, shardKey{nd.Stream, nd.Shard}) {
					rest = append(rest, nd)
				}
			}
			if !slices.Equal(needs[moved:], rest) {
				t.Fatalf("the needs after the start steps' are not the others in the plan's order")
			}
			// In the plan's order they were not first: that is why.
			step, err := ep.SplitsBatch(nil, tc.start, tc.first, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			firsts := map[shardKey]bool{}
			for _, smp := range step {
				firsts[shardKey{smp.Stream, smp.Shard}] = true
			}
			inPlace := 0
			for _, nd := range plan[:len(firsts)] {
				if firsts[shardKey{nd.Stream, nd.Shard}] {
					inPlace++
				}
			}
			if inPlace == len(firsts) && len(plan) > 2*len(firsts) {
				t.Errorf("the plan's order had the start step's %d shards first already", len(firsts))
			}
		})
	}
}
