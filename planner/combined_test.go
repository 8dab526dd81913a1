package planner

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
)

// combinedParams draws a plan of numSplits 12 with every feature at once:
// filtered streams (shards with no match), files with footers, stratified
// batching, and a schedule with a batch-size ramp-up, a skipped range and
// a repeated one.
func combinedParams(r *rand.Rand) Params {
	for {
		p := Params{Seed: r.Uint64(), NumSplits: 12, GlobalBatchSize: 12, Shuffle: r.IntN(3) != 0, BlockSize: int64(1 + r.IntN(30)),
			Batching: BatchingStratified, DropLast: true}
		for s := range 2 + r.IntN(2) {
			var sizes []int64
			for range 2 + r.IntN(5) {
				sizes = append(sizes, int64(r.IntN(60)))
			}
			st := Stream{Name: fmt.Sprint("s", s), Index: filteredIndex("sha256:f", sizes...)}
			for h := range st.Index.Shards {
				st.Index.Shards[h].Shared, st.Index.Shards[h].SharedBytes = fmt.Sprint("file", h/2), 40
			}
			p.Streams = append(p.Streams, st)
		}
		a := int64(1 + r.IntN(5))
		props := map[string]string{}
		for _, st := range p.Streams {
			props[st.Name] = []string{"0.5", "1", "2"}[r.IntN(3)]
		}
		p.Schedule = &Schedule{Phases: []Phase{
			{StartStep: a, GlobalBatchSize: 24},                    // ramp-up
			{StartStep: a + 3, GlobalBatchSize: 48},                // and again
			{StartStep: a + 5, SkipSteps: int64(1 + r.IntN(3))},    // a loss spike's data skipped
			{StartStep: a + 8, Proportions: props},                 // a curriculum
			{StartStep: a + 10, RepeatSteps: int64(1 + r.IntN(3))}, // replayed
		}}
		if _, err := New(p); err == nil {
			return p
		}
	}
}

// packedParams draws a packed, mixed and scheduled plan of numSplits 12:
// 2–3 streams of random documents packed as a random packing, a ramp-up
// and a curriculum.
func packedParams(r *rand.Rand) Params {
	pk := Packing{SeqLength: uint32(16 + r.IntN(100)), Method: []PackMethod{BestFit, FirstFit, Concatenate}[r.IntN(3)], Window: 1 + r.IntN(40)}
	p := Params{Seed: r.Uint64(), NumSplits: 12, GlobalBatchSize: 12, Shuffle: r.IntN(3) != 0, BlockSize: int64(1 + r.IntN(30)),
		Batching: BatchingStratified, DropLast: true}
	props := map[string]string{}
	for s := range 2 + r.IntN(2) {
		x, _, _ := packedStream(r, pk)
		name := fmt.Sprint("s", s)
		p.Streams = append(p.Streams, Stream{Name: name, Index: x})
		props[name] = []string{"0.5", "1", "2"}[r.IntN(3)]
	}
	a := int64(1 + r.IntN(5))
	p.Schedule = &Schedule{Phases: []Phase{{StartStep: a, GlobalBatchSize: 24}, {StartStep: a + 4, Proportions: props}}}
	return p
}

// TestCombinedFeaturesKeepEveryGuarantee: for plans with every feature
// (and bucketed plans, bucketedParams, and packed ones, packedParams), a
// job trains steps at one world size W1 (of {1, 2, 3, 4, 6, 12}, in a 2-D
// or 3-D mesh of replication groups) with w1 DataLoader workers, resumes
// at a random step at another data-parallel size W2 with w2 workers, over
// more than one epoch: every step's batches together are the global batch,
// every rank's batch has G/W rows, replicas get identical batches, the
// workers yield the steps in order, and each pod's needs and cache cover
// what its ranks read.
func TestCombinedFeaturesKeepEveryGuarantee(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	worlds := []int{1, 2, 3, 4, 6, 12}
	for i := range 80 {
		var p Params
		switch {
		case i < 40:
			p = combinedParams(r)
		case i < 60: // bucketed, with a batch size per bucket or not
			for p = bucketedParams(r); ; p = bucketedParams(r) {
				if _, err := New(p); err == nil {
					break
				}
			}
		default: // packed, and scheduled
			for p = packedParams(r); ; p = packedParams(r) {
				if _, err := New(p); err == nil {
					break
				}
			}
		}
		pl := must(New(p))
		W1, W2 := worlds[r.IntN(6)], worlds[r.IntN(6)]
		w1, w2 := 1+r.IntN(4), 1+r.IntN(4)
		horizon := pl.Steps() + int64(r.IntN(int(pl.Steps())+1))
		resume := r.Int64N(horizon)
		meshes := [2]Mesh{{Dims: []MeshDim{{"dp", W1}, {"tp", 2}}}, {Dims: []MeshDim{{"pp", 2}, {"dp", W2}, {"cp", 1 + r.IntN(2)}}}}
		t.Run(fmt.Sprint("case", i), func(t *testing.T) {
			got := map[int64][]int64{}
			run := func(m Mesh, workers int, from, to int64) {
				D := m.DataParallelSize()
				var order []int64
				pulls := make([]func() (int64, bool), workers)
				for w := range workers {
					next, stop := iter.Pull(WorkerSteps(from, w, workers, to))
					defer stop()
					pulls[w] = next
				}
				for w := 0; ; w = (w + 1) % workers {
					g, ok := pulls[w]()
					if !ok {
						break
					}
					order = append(order, g)
					ep := must(pl.Epoch(g / pl.Steps()))
					k := g % pl.Steps()
					byDP := map[int][]Sample{}
					for rank := range m.Size() {
						d := m.DataParallelRank(rank)
						local := must(ep.LocalBatch(nil, k, d, D))
						if int64(len(local)) != ep.BatchSize(k)/int64(D) {
							t.Fatalf("%s step %d rank %d: %d rows, want %d", m, g, rank, len(local), ep.BatchSize(k)/int64(D))
						}
						if prev, ok := byDP[d]; ok {
							if !slices.Equal(prev, local) {
								t.Fatalf("%s step %d: rank %d differs from its replication group", m, g, rank)
							}
							continue
						}
						byDP[d] = local
						for _, smp := range local {
							got[g] = append(got[g], smp.ID)
						}
					}
				}
				for i, g := range order {
					if g != from+int64(i) {
						t.Fatalf("workers yielded steps %v, want %d, %d, … in order", order, from, from+1)
					}
				}
			}
			run(meshes[0], w1, 0, resume)
			run(meshes[1], w2, resume, horizon)
			for g := range horizon {
				want := sortedIDs(globalBatchAt(t, pl, g))
				slices.Sort(got[g])
				if !slices.Equal(got[g], want) {
					t.Fatalf("W %d -> %d at step %d: step %d's batches are not the global batch", W1, W2, resume, g)
				}
			}
			// Pods of the second mesh, 4 ranks each: needs and cache.
			m := meshes[1]
			pods := m.PodRanks(4)
			D := m.DataParallelSize()
			e := resume / pl.Steps()
			ep := must(pl.Epoch(e))
			for pod, ranks := range pods {
				checkCovers(t, ep, ep.NeedsOf(ranks, D), must(ep.MinCacheBytesOf(ranks, D, 0)), fmt.Sprintf("pod %d (ranks %v)", pod, ranks), func(k int64) []Sample {
					var out []Sample
					for _, d := range ranks {
						out = append(out, must(ep.LocalBatch(nil, k, d, D))...)
					}
					return out
				})
			}
		})
	}
}
