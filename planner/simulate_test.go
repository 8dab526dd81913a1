package planner

import (
	"strings"
	"testing"
	"time"
)

func simEpoch(t *testing.T, shuffle bool) *EpochPlan {
	t.Helper()
	p := Params{
		Streams:   []Stream{{Name: "a", Index: index(100, 100, 100, 100, 100, 100, 100, 100)}, {Name: "b", Index: index(50, 50, 50, 50)}},
		NumSplits: 4, GlobalBatchSize: 40, Shuffle: shuffle, BlockSize: 64, Seed: 3, DropLast: true,
	}
	pl := must(New(p))
	return must(pl.Epoch(0))
}

func TestSimulateMatchesThePlansBytesAndCache(t *testing.T) {
	ep := simEpoch(t, true)
	for _, pods := range []int{1, 2, 4} {
		sim, err := ep.Simulate(SimOptions{Pods: pods, Bandwidth: 1e6, StepTime: 10 * time.Millisecond, Prefetch: 2})
		if err != nil {
			t.Fatal(err)
		}
		e := must(ep.Egress(pods))
		cache := must(ep.MinCacheBytes(pods, 2))
		for i, ps := range sim.Pods {
			if ps.Bytes != e.PodBytes[i] || ps.Shards != e.PodShards[i] || ps.MinCacheBytes != cache {
				t.Errorf("pods %d pod %d: %+v, the plan says %d bytes, %d shards, cache %d", pods, i, ps, e.PodBytes[i], e.PodShards[i], cache)
			}
		}
	}
}

// TestSimulateAMesh: tensor parallelism inside a pod fetches as a job of
// one rank per pod; a pipeline stage per pod makes each pod fetch every
// data-parallel rank's shards.
func TestSimulateAMesh(t *testing.T) {
	ep := simEpoch(t, true)
	tp := must(ParseMesh("dp=4,tp=2"))
	sim := must(ep.Simulate(SimOptions{Pods: 4, ProcsPerPod: 2, Mesh: &tp, Bandwidth: 1e6, Prefetch: 2}))
	e := must(ep.Egress(4))
	for i, ps := range sim.Pods {
		if ps.Bytes != e.PodBytes[i] {
			t.Errorf("dp=4,tp=2 pod %d fetches %d bytes, a pod of a 4-pod job %d", i, ps.Bytes, e.PodBytes[i])
		}
	}
	pp := must(ParseMesh("pp=2,dp=4"))
	sim = must(ep.Simulate(SimOptions{Pods: 2, ProcsPerPod: 4, Mesh: &pp, Bandwidth: 1e6, Prefetch: 2}))
	all := must(ep.Egress(1))
	for i, ps := range sim.Pods {
		if ps.Bytes != all.PodBytes[0] {
			t.Errorf("pp=2,dp=4 pod %d fetches %d bytes, want every shard's %d", i, ps.Bytes, all.PodBytes[0])
		}
	}
	if _, err := ep.Simulate(SimOptions{Pods: 3, ProcsPerPod: 2, Mesh: &tp, Bandwidth: 1}); err == nil || !strings.Contains(err.Error(), "has 8 ranks, not the 3 pods") {
		t.Errorf("a mesh of another size: %v", err)
	}
}

func TestSimulateTimes(t *testing.T) {
	ep := simEpoch(t, true)
	steps := ep.Plan().Steps()
	tests := []struct {
		name      string
		bandwidth float64
		step      time.Duration
		check     func(t *testing.T, ps PodSim, firstBytes int64)
	}{
		{"no training time: the epoch is the download", 1e5, 0, func(t *testing.T, ps PodSim, _ int64) {
			want := time.Duration(float64(ps.Bytes) / 1e5 * float64(time.Second))
			if d := ps.Epoch - want; d < -time.Microsecond || d > time.Microsecond || ps.Stall != ps.Epoch {
				t.Errorf("epoch %s stall %s, want both %s", ps.Epoch, ps.Stall, want)
			}
		}},
		{"a fast store: only the first batch waits", 1e12, time.Second, func(t *testing.T, ps PodSim, _ int64) {
			if ps.Stall > time.Millisecond || ps.Epoch < time.Duration(steps)*time.Second {
				t.Errorf("stall %s epoch %s", ps.Stall, ps.Epoch)
			}
		}},
		{"the first batch is step 0's shards", 1e3, time.Millisecond, func(t *testing.T, ps PodSim, firstBytes int64) {
			want := time.Duration(float64(firstBytes) / 1e3 * float64(time.Second))
			if d := ps.FirstBatch - want; d < -time.Microsecond || d > time.Microsecond || ps.Stall < ps.FirstBatch {
				t.Errorf("first batch %s (stall %s), want %s", ps.FirstBatch, ps.Stall, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := must(ep.Simulate(SimOptions{Pods: 2, Bandwidth: tt.bandwidth, StepTime: tt.step}))
			for _, ps := range sim.Pods {
				first, n, err := ep.Plan().PodSplits(ps.Pod, 2)
				if err != nil {
					t.Fatal(err)
				}
				var firstBytes int64
				for _, nd := range ep.ShardsNeeded(first, n) {
					if nd.FirstStep == 0 {
						firstBytes += nd.Bytes
					}
				}
				tt.check(t, ps, firstBytes)
			}
		})
	}
}

func TestSimulateMeasuresTheShuffle(t *testing.T) {
	shuffled := simEpoch(t, true)
	in := must(simEpoch(t, false).Simulate(SimOptions{Pods: 1, Bandwidth: 1}))
	sh := must(shuffled.Simulate(SimOptions{Pods: 1, Bandwidth: 1}))
	if in.Quality.MeanGap > 1.5 {
		t.Errorf("without shuffle a split reads consecutive samples: mean gap %g", in.Quality.MeanGap)
	}
	if sh.Quality.MeanGap < 5*in.Quality.MeanGap || sh.Quality.MeanGapIdeal != float64(shuffled.Plan().Total())/3 {
		t.Errorf("shuffled mean gap %g vs %g in order (ideal %g)", sh.Quality.MeanGap, in.Quality.MeanGap, sh.Quality.MeanGapIdeal)
	}
	for _, q := range []Quality{in.Quality, sh.Quality} {
		if q.DistinctShardsPerBatch <= 0 || q.DistinctShardsPerBatch > 1 || q.StepsMeasured == 0 {
			t.Errorf("quality %+v", q)
		}
	}
	if sh.Quality.DistinctShardsPerBatch <= in.Quality.DistinctShardsPerBatch {
		t.Errorf("shuffling should spread a batch over more shards: %g vs %g", sh.Quality.DistinctShardsPerBatch, in.Quality.DistinctShardsPerBatch)
	}
}

func TestSimulateRejectsWhatCannotRun(t *testing.T) {
	ep := simEpoch(t, true)
	for _, o := range []struct {
		o    SimOptions
		says string
	}{
		{SimOptions{Pods: 3, Bandwidth: 1}, "divide"},
		{SimOptions{Pods: 0, Bandwidth: 1}, "pods must be at least 1"},
		{SimOptions{Pods: 1, Bandwidth: 0}, "bandwidth must be above 0"},
		{SimOptions{Pods: 2, ProcsPerPod: 4, Bandwidth: 1}, "divide"},
	} {
		if _, err := ep.Simulate(o.o); err == nil || !strings.Contains(err.Error(), o.says) {
			t.Errorf("%+v: got %v, want %q", o.o, err, o.says)
		}
	}
}
