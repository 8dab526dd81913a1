package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseMesh(t *testing.T) {
	for _, tc := range []struct {
		in      string
		size    int
		dp      int
		wantErr string
	}{
		{in: "dp=8", size: 8, dp: 8},
		{in: "dp=4,tp=2", size: 8, dp: 4},
		{in: "pp=2, dp=2, tp=2", size: 8, dp: 2},
		{in: "dp_replicate=2,dp_shard=4,tp=2", size: 16, dp: 8},
		{in: "tp=8", wantErr: "no data-parallel dimension"},
		{in: "dp=2,dp=2", wantErr: "given twice"},
		{in: "dp=0", wantErr: "not name=size"},
		{in: "dp", wantErr: "not name=size"},
		{in: "DP=2", wantErr: "not name=size"},
		{in: "", wantErr: "not name=size"},
		{in: "dp=65536,tp=65536", wantErr: "more than"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := ParseMesh(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseMesh(%q) = %v, %v; want an error with %q", tc.in, m, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Size() != tc.size || m.DataParallelSize() != tc.dp {
				t.Fatalf("%q: size %d dp %d, want %d and %d", tc.in, m.Size(), m.DataParallelSize(), tc.size, tc.dp)
			}
			if again, _ := ParseMesh(m.String()); !slices.Equal(again.Dims, m.Dims) {
				t.Fatalf("%q does not round-trip: %q", tc.in, m.String())
			}
		})
	}
}

// TestDataParallelRankIsTheRowMajorIndexOfTheDataParallelCoordinates checks
// the layout against torch's DeviceMesh (torch.arange(world).reshape(dims)):
// for 2-D and 3-D meshes, the ranks of one data-parallel coordinate are
// those that differ only in the other dimensions.
func TestDataParallelRankIsTheRowMajorIndexOfTheDataParallelCoordinates(t *testing.T) {
	for _, tc := range []struct {
		mesh string
		want []int // data-parallel rank of each global rank
	}{
		{"dp=4", []int{0, 1, 2, 3}},
		{"dp=2,tp=2", []int{0, 0, 1, 1}},
		{"tp=2,dp=2", []int{0, 1, 0, 1}},
		{"pp=2,dp=2,tp=2", []int{0, 0, 1, 1, 0, 0, 1, 1}},
		{"dp=2,cp=2,tp=2", []int{0, 0, 0, 0, 1, 1, 1, 1}},
		{"dp_replicate=2,dp_shard=2,tp=2", []int{0, 0, 1, 1, 2, 2, 3, 3}},
	} {
		m, err := ParseMesh(tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for r := range m.Size() {
			got = append(got, m.DataParallelRank(r))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: data-parallel ranks %v, want %v", tc.mesh, got, tc.want)
		}
	}
}

func TestPodRanksAndSpread(t *testing.T) {
	for _, tc := range []struct {
		mesh   string
		procs  int
		want   [][]int
		spread int
	}{
		{"dp=4,tp=2", 2, [][]int{{0}, {1}, {2}, {3}}, 1},         // tensor parallel inside a pod
		{"dp=4,tp=2", 4, [][]int{{0, 1}, {2, 3}}, 1},             // two groups a pod
		{"pp=2,dp=2,tp=2", 4, [][]int{{0, 1}, {0, 1}}, 2},        // a pipeline stage a pod
		{"dp=2,pp=2,tp=2", 2, [][]int{{0}, {0}, {1}, {1}}, 2},    // a stage a pod, groups across pods
		{"tp=2,dp=4", 4, [][]int{{0, 1, 2, 3}, {0, 1, 2, 3}}, 2}, // dp innermost
	} {
		m, _ := ParseMesh(tc.mesh)
		got := m.PodRanks(tc.procs)
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s with %d procs per pod: pods serve %v, want %v", tc.mesh, tc.procs, got, tc.want)
		}
		if s := Spread(got); s != tc.spread {
			t.Errorf("%s with %d procs per pod: spread %d, want %d", tc.mesh, tc.procs, s, tc.spread)
		}
	}
}

func TestCheckReplication(t *testing.T) {
	pl := must(New(Params{NumSplits: 12, GlobalBatchSize: 12, Streams: []Stream{{Name: "a", Index: index(100)}}}))
	for _, tc := range []struct {
		world, dp int
		wantErr   string
	}{
		{24, 12, ""},
		{16, 4, ""},
		{8, 8, "8 does not divide spec.numSplits (12)"},
		{6, 4, "4 does not divide the world size 6"},
		{8, 0, "does not divide spec.numSplits"},
	} {
		err := pl.CheckReplication(tc.world, tc.dp)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckReplication(%d, %d) = %v, want %q", tc.world, tc.dp, err, tc.wantErr)
		}
	}
}

// randomMesh draws a 2-D or 3-D layout of a job whose data-parallel size
// divides S, and how many of its ranks a pod runs.
func randomMesh(r *rand.Rand, splits int) (Mesh, int) {
	var dps []int
	for d := 1; d <= splits; d++ {
		if splits%d == 0 {
			dps = append(dps, d)
		}
	}
	dims := []MeshDim{{"dp", dps[r.IntN(len(dps))]}, {"tp", 1 + r.IntN(3)}}
	if r.IntN(2) == 0 {
		dims = append(dims, MeshDim{"pp", 1 + r.IntN(3)})
	}
	r.Shuffle(len(dims), func(i, j int) { dims[i], dims[j] = dims[j], dims[i] })
	m := Mesh{Dims: dims}
	var procs []int
	for p := 1; p <= m.Size(); p++ {
		if m.Size()%p == 0 {
			procs = append(procs, p)
		}
	}
	return m, procs[r.IntN(len(procs))]
}

// TestReplicationGroupsShareBatchesAndTheEgressBound checks, for 2-D and 3-D
// layouts over random plans: the ranks of one data-parallel coordinate get
// identical batches and the data-parallel ranks together the global batch;
// a pod's needs and cache cover what its ranks read; and the pods fetch at
// most spread × (distinct + (D−1)·(largest shard + footers)).
func TestReplicationGroupsShareBatchesAndTheEgressBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	forRandomPlans(t, 200, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		m, procs := randomMesh(r, pl.NumSplits())
		W, D := m.Size(), m.DataParallelSize()
		if err := pl.CheckReplication(W, D); err != nil {
			t.Fatal(err)
		}
		k := r.Int64N(max(pl.Steps(), 1))
		if pl.Steps() > 0 {
			global := sortedIDs(must(ep.GlobalBatch(nil, k)))
			byGroup := map[int][]Sample{}
			var union []Sample
			for rank := range W {
				d := m.DataParallelRank(rank)
				local := must(ep.LocalBatch(nil, k, d, D))
				if prev, ok := byGroup[d]; ok {
					if !slices.Equal(prev, local) {
						t.Fatalf("%s: rank %d (data-parallel rank %d) got another batch than its group", m, rank, d)
					}
					continue
				}
				byGroup[d] = local
				union = append(union, local...)
			}
			if !slices.Equal(sortedIDs(union), global) {
				t.Fatalf("%s: the data-parallel ranks' batches %v are not the global batch %v", m, sortedIDs(union), global)
			}
		}

		pods := m.PodRanks(procs)
		e := must(ep.EgressOf(pods, D))
		largest, footers := pl.MaxShardBytes(), int64(0)
		if lanesOf(pl) != nil {
			largest = 0
			for _, lane := range lanesOf(pl).plans {
				largest += lane.MaxShardBytes()
			}
		}
		seen := map[sharedKey]bool{}
		for s, st := range pl.params.Streams {
			for _, sh := range st.Index.Shards {
				if key := (sharedKey{s, sh.Shared}); sh.SharedBytes > 0 && !seen[key] {
					seen[key] = true
					footers += sh.SharedBytes
				}
			}
		}
		if bound := int64(Spread(pods)) * (e.DistinctBytes + int64(D-1)*(largest+footers)); e.FetchedBytes > bound {
			t.Fatalf("%s, %d procs per pod: pods fetch %d bytes, more than spread %d x (distinct %d + (D-1) x (largest %d + footers %d))",
				m, procs, e.FetchedBytes, Spread(pods), e.DistinctBytes, largest, footers)
		}

		for pod, ranks := range pods {
			checkCovers(t, ep, ep.NeedsOf(ranks, D), must(ep.MinCacheBytesOf(ranks, D, 0)), fmt.Sprintf("%s: pod %d (ranks %v)", m, pod, ranks), func(k int64) []Sample {
				var out []Sample
				for _, d := range ranks {
					out = append(out, must(ep.LocalBatch(nil, k, d, D))...)
				}
				return out
			})
		}
	})
}
