package planner

import (
	"slices"
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
		{SimOptions{Pods: 4, Bandwidth: 1, RescaleTo: 3, RescaleAt: 1}, "rescaling to 3 pods"},
		{SimOptions{Pods: 4, Bandwidth: 1, RescaleTo: 2, RescaleAt: 1 << 40}, "outside the epoch"},
		{SimOptions{Pods: 4, ProcsPerPod: 1, Mesh: &Mesh{Dims: []MeshDim{{Name: "dp", Size: 4}}}, Bandwidth: 1, RescaleTo: 2}, "without a mesh"},
		{SimOptions{Pods: 4, Bandwidth: 1, Trials: 20}, "give its bandwidth"},
	} {
		if _, err := ep.Simulate(o.o); err == nil || !strings.Contains(err.Error(), o.says) {
			t.Errorf("%+v: got %v, want %q", o.o, err, o.says)
		}
	}
}

// fetchTimes by events is the step-by-step walk it replaces: each step
// waits for the shards first needed at it (or before), downloaded back to
// back in need order.
func TestFetchTimesWalksTheSteps(t *testing.T) {
	o := SimOptions{Bandwidth: 1000, StepTime: 30 * time.Millisecond}
	byStep := func(needs []ShardNeed, from, steps int64) (bytes int64, first, stall, epoch time.Duration) {
		readyAt := map[int64]time.Duration{}
		for _, nd := range needs {
			if nd.LastStep < from {
				continue
			}
			bytes += nd.Bytes
			k := max(nd.FirstStep, from)
			readyAt[k] = max(readyAt[k], time.Duration(float64(bytes)/o.Bandwidth*float64(time.Second)))
		}
		var now, latest time.Duration
		for k := from; k < steps; k++ {
			latest = max(latest, readyAt[k])
			if latest > now {
				stall += latest - now
				now = latest
			}
			now += o.StepTime
		}
		return bytes, readyAt[from], stall, now
	}
	for _, shuffle := range []bool{false, true} {
		ep := simEpoch(t, shuffle)
		steps := ep.plan.Steps()
		for pods := 1; pods <= 4; pods *= 2 {
			per := ep.plan.NumSplits() / pods
			for pod := range pods {
				needs := ep.ShardsNeeded(pod*per, per)
				// Out of order too: a step still waits for all of its shards.
				reversed := slices.Clone(needs)
				slices.Reverse(reversed)
				for _, n := range [][]ShardNeed{needs, reversed} {
					for from := int64(0); from < steps; from += max(steps/5, 1) {
						b, _, f, st, ep := fetchTimes(n, from, steps, o)
						wb, wf, wst, wep := byStep(n, from, steps)
						if b != wb || f != wf || st != wst || ep != wep {
							t.Fatalf("shuffle %v, pod %d/%d from step %d: bytes %d first %s stall %s epoch %s; step by step %d %s %s %s",
								shuffle, pod, pods, from, b, f, st, ep, wb, wf, wst, wep)
						}
					}
				}
			}
		}
	}
}

func TestShardRequests(t *testing.T) {
	for _, tt := range []struct{ bytes, part, want int64 }{
		{100, 0, 1},
		{31 << 20, 16 << 20, 1},
		{32 << 20, 16 << 20, 2},
		{33 << 20, 16 << 20, 3},
		{64 << 20, 16 << 20, 4},
	} {
		if got := shardRequests(tt.bytes, tt.part); got != tt.want {
			t.Errorf("%d bytes in parts of %d: %d requests, want %d", tt.bytes, tt.part, got, tt.want)
		}
	}
}

// A rescale's bytes add up: before the step the old pods' shards, after it
// the new pods' from an empty cache; a rescale at step 0 refetches
// nothing and costs what the new size costs for the whole epoch.
func TestSimulateARescale(t *testing.T) {
	ep := simEpoch(t, true)
	steps := ep.plan.Steps()
	old := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, Prefetch: 2}))
	two := must(ep.Simulate(SimOptions{Pods: 2, Bandwidth: 1e6, Prefetch: 2}))
	var oldBytes, twoBytes int64
	for _, ps := range old.Pods {
		oldBytes += ps.Bytes
	}
	for _, ps := range two.Pods {
		twoBytes += ps.Bytes
	}
	for _, tt := range []struct {
		name string
		at   int64
	}{{"at the epoch's start", 0}, {"a third in", steps / 3}, {"in the middle", steps / 2}, {"at the last step", steps - 1}} {
		t.Run(tt.name, func(t *testing.T) {
			sim := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, Prefetch: 2, RescaleTo: 2, RescaleAt: tt.at}))
			r := sim.Rescale
			if r == nil || r.FromPods != 4 || r.ToPods != 2 || r.AtStep != tt.at {
				t.Fatalf("rescale %+v", r)
			}
			if r.Before+r.Unchanged != oldBytes {
				t.Errorf("before %d + unchanged %d != the old pods' %d bytes", r.Before, r.Unchanged, oldBytes)
			}
			if r.Refetched > r.After || r.After > twoBytes || r.MinCacheBytes != two.Pods[0].MinCacheBytes {
				t.Errorf("refetched %d, after %d, 2 pods' epoch %d bytes, cache %d (2 pods: %d)", r.Refetched, r.After, twoBytes, r.MinCacheBytes, two.Pods[0].MinCacheBytes)
			}
			if tt.at == 0 && (r.Before != 0 || r.Refetched != 0 || r.After != twoBytes || r.FirstBatch != two.Pods[0].FirstBatch && r.FirstBatch != two.Pods[1].FirstBatch) {
				t.Errorf("at step 0: %+v, want nothing before or refetched and the 2 pods' epoch (%d bytes)", r, twoBytes)
			}
			if tt.at > 0 && (r.Refetched == 0 || r.FirstBatch <= 0) {
				t.Errorf("mid-epoch: %+v, want the shards in use refetched and a first batch to wait for", r)
			}
		})
	}
}

// With the node cache, a sweep's later trials read their nodes' copies
// (unless a pod's epoch does not fit its node's cache), and a rescale's new
// pods read from their nodes what the old pods there fetched.
func TestSimulateTheNodeCache(t *testing.T) {
	ep := simEpoch(t, true)
	steps := ep.plan.Steps()
	plain := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, Prefetch: 2}))
	var epoch, largest int64
	for _, ps := range plain.Pods {
		epoch += ps.Bytes
		largest = max(largest, ps.Bytes)
	}
	for _, tt := range []struct {
		name     string
		limit    int64
		wantWith int64
	}{{"every pod's epoch fits its node", 0, epoch}, {"no pod's epoch fits", 1, 20 * epoch}} {
		t.Run(tt.name, func(t *testing.T) {
			sw := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, NodeBandwidth: 1e8, NodeCacheBytes: tt.limit, Prefetch: 2, Trials: 20})).Sweep
			if sw == nil || sw.Egress != 20*epoch || sw.EgressWithNode != tt.wantWith {
				t.Fatalf("sweep %+v; want %d bytes without the node cache and %d with", sw, 20*epoch, tt.wantWith)
			}
			if tt.limit == 0 && (sw.FirstBatchFromNode <= 0 || sw.FirstBatchFromNode >= sw.FirstBatch) {
				t.Errorf("a later trial's first batch %s, the first's %s: want it sooner from the node", sw.FirstBatchFromNode, sw.FirstBatch)
			}
		})
	}
	for _, at := range []int64{0, steps / 2} {
		r := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, NodeBandwidth: 1e8, Prefetch: 2, RescaleTo: 2, RescaleAt: at})).Rescale
		n := r.NodeCache
		if n == nil || n.FromNodes+n.FromStore != r.After || n.Refetched > r.Refetched || n.FirstBatch > r.FirstBatch {
			t.Fatalf("at step %d: %+v with the node cache, %+v without", at, n, r)
		}
		if at > 0 && (n.FromNodes == 0 || n.Refetched >= r.Refetched) {
			t.Errorf("mid-epoch: %+v; want the new pods to read what their nodes held, refetching less than %d", n, r.Refetched)
		}
		if at == 0 && n.FromNodes != 0 {
			t.Errorf("at step 0 the nodes held nothing, yet %d bytes came from them", n.FromNodes)
		}
	}
	// A node cache of one shard keeps less than an unbounded one.
	small := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, NodeBandwidth: 1e8, NodeCacheBytes: largest / 8, Prefetch: 2, RescaleTo: 2, RescaleAt: steps / 2})).Rescale.NodeCache
	big := must(ep.Simulate(SimOptions{Pods: 4, Bandwidth: 1e6, NodeBandwidth: 1e8, Prefetch: 2, RescaleTo: 2, RescaleAt: steps / 2})).Rescale.NodeCache
	if small.FromNodes >= big.FromNodes {
		t.Errorf("a node cache of %d bytes gave %d bytes, an unbounded one %d", largest/8, small.FromNodes, big.FromNodes)
	}
}
