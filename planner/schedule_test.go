package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// randomSchedule adds to p a schedule of up to 4 phases over its first
// epochs: proportions, batch sizes, skips and repeats.
func randomSchedule(r *rand.Rand, p Params) Params {
	p.Batching = []Batching{"", BatchingStratified}[r.IntN(2)]
	sc := &Schedule{}
	step := int64(0)
	for range r.IntN(5) {
		step += int64(1 + r.IntN(6))
		ph := Phase{StartStep: step}
		switch r.IntN(4) {
		case 0:
			ph.Proportions = map[string]string{}
			for _, st := range p.Streams {
				ph.Proportions[st.Name] = []string{"0", "0.5", "1", "2.25", "3"}[r.IntN(5)]
			}
			ph.Proportions[p.Streams[r.IntN(len(p.Streams))].Name] = "1.5"
		case 1:
			ph.GlobalBatchSize = int64(p.NumSplits * (1 + r.IntN(4)))
		case 2:
			ph.SkipSteps = int64(1 + r.IntN(4))
		case 3:
			ph.RepeatSteps = min(int64(1+r.IntN(4)), step)
			step += ph.RepeatSteps
		}
		sc.Phases = append(sc.Phases, ph)
	}
	p.Schedule = sc
	return p
}

// forRandomSchedules runs check on n random scheduled plans.
func forRandomSchedules(t *testing.T, n int, check func(t *testing.T, pl *Plan, horizon int64)) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; {
		p := randomSchedule(r, randomParams(r))
		pl, err := New(p)
		if err != nil {
			continue // a stream smaller than S cannot be cut on its own
		}
		i++
		t.Run(fmt.Sprint("case", i), func(t *testing.T) {
			last := int64(0)
			for _, ph := range p.Schedule.Phases {
				last = ph.StartStep + ph.RepeatSteps
			}
			check(t, pl, max(3*pl.Steps(), last+5))
			if t.Failed() {
				t.Logf("params: %+v schedule %+v", p, *p.Schedule)
			}
		})
	}
}

// globalBatchAt returns the global batch of global step g.
func globalBatchAt(t *testing.T, pl *Plan, g int64) []Sample {
	t.Helper()
	ep := must(pl.Epoch(g / pl.Steps()))
	return must(ep.GlobalBatch(nil, g%pl.Steps()))
}

func TestScheduleEveryWorldSizeGetsTheSameGlobalBatches(t *testing.T) {
	forRandomSchedules(t, 100, func(t *testing.T, pl *Plan, horizon int64) {
		S := pl.NumSplits()
		for g := range horizon {
			ep := must(pl.Epoch(g / pl.Steps()))
			k := g % pl.Steps()
			global := must(ep.GlobalBatch(nil, k))
			if int64(len(global)) != ep.BatchSize(k) {
				t.Fatalf("step %d: %d samples, the batch size there is %d", g, len(global), ep.BatchSize(k))
			}
			want := sortedIDs(global)
			for W := 1; W <= S; W++ {
				if S%W != 0 {
					continue
				}
				var union []Sample
				for rank := range W {
					local := must(ep.LocalBatch(nil, k, rank, W))
					if int64(len(local)) != ep.BatchSize(k)/int64(W) {
						t.Fatalf("W=%d rank %d step %d: %d samples, want %d", W, rank, g, len(local), ep.BatchSize(k)/int64(W))
					}
					union = append(union, local...)
				}
				if !slices.Equal(sortedIDs(union), want) {
					t.Fatalf("W=%d step %d: the ranks' batches are not the global batch", W, g)
				}
			}
		}
	})
}

// TestScheduleDrawsEachStreamPassAfterPass follows every split's draws of
// every stream over the steps, skipped data included and repeats left
// out: they are the stream's passes in order, each continuing where the
// last draw stopped, whatever the phases' proportions and batch sizes.
func TestScheduleDrawsEachStreamPassAfterPass(t *testing.T) {
	forRandomSchedules(t, 150, func(t *testing.T, pl *Plan, horizon int64) {
		S := pl.NumSplits()
		drawn := map[[2]int][]Sample{} // (split, stream) → samples in order
		draw := func(batch []Sample) {
			for i, smp := range batch {
				key := [2]int{i % S, smp.Stream}
				drawn[key] = append(drawn[key], smp)
			}
		}
		skips := pl.Skips()
		repeats := 0
		for g := range horizon {
			for _, sk := range skips {
				if sk.At == g {
					for k := range sk.Steps {
						draw(pl.SkippedBatch(nil, sk, k))
					}
				}
			}
			batch := globalBatchAt(t, pl, g)
			if batch[0].Repeated {
				repeats++
				continue
			}
			draw(batch)
		}
		sc := scheduleOf(pl)
		for key, got := range drawn {
			j, s := key[0], key[1]
			for u, smp := range got {
				pass, pos := int64(u)/sc.length[s], int64(u)%sc.length[s]
				x := sc.passEpoch(s, pass).At(j, pos)
				if smp.ID != pl.streamOffset[s]+x.ID || smp.Pass != pass || smp.Shard != x.Shard {
					t.Fatalf("split %d stream %d draw %d is id %d (pass %d), want pass %d position %d: id %d",
						j, s, u, smp.ID, smp.Pass, pass, pos, pl.streamOffset[s]+x.ID)
				}
			}
		}
		want := 0
		for _, ph := range pl.params.Schedule.Phases {
			if ph.StartStep+ph.RepeatSteps <= horizon {
				want += int(ph.RepeatSteps)
			}
		}
		if repeats != want {
			t.Fatalf("%d repeated steps, the schedule repeats %d", repeats, want)
		}
	})
}

func TestScheduleRepeatsReplayAndSkipsJump(t *testing.T) {
	forRandomSchedules(t, 150, func(t *testing.T, pl *Plan, horizon int64) {
		for _, ph := range pl.params.Schedule.Phases {
			a := ph.StartStep
			for k := range ph.RepeatSteps {
				got, was := globalBatchAt(t, pl, a+k), globalBatchAt(t, pl, a-ph.RepeatSteps+k)
				for i := range got {
					if !got[i].Repeated || got[i].ID != was[i].ID {
						t.Fatalf("step %d row %d: %+v, want step %d's %+v repeated", a+k, i, got[i], a-ph.RepeatSteps+k, was[i])
					}
				}
			}
		}
		for _, sk := range pl.Skips() {
			for k := range sk.Steps {
				for _, smp := range pl.SkippedBatch(nil, sk, k) {
					if !smp.Skipped {
						t.Fatalf("skipped data not marked: %+v", smp)
					}
				}
			}
		}
	})
}

// TestSchedulePhasesMixTheirProportions: over a phase, each split gives each
// stream its share of the positions, within one.
func TestSchedulePhasesMixTheirProportions(t *testing.T) {
	p := Params{
		Streams: []Stream{{Name: "web", Index: index(400, 400)}, {Name: "code", Index: index(300)}, {Name: "math", Index: index(90)}},
		Seed:    9, NumSplits: 4, GlobalBatchSize: 8, Shuffle: true, BlockSize: 7,
		Schedule: &Schedule{Phases: []Phase{
			{StartStep: 10, Proportions: map[string]string{"web": "0.2", "code": "0.5", "math": "0.3"}, GlobalBatchSize: 20},
			{StartStep: 30, Proportions: map[string]string{"web": "1", "code": "0", "math": "0"}},
			{StartStep: 40, GlobalBatchSize: 4},
		}},
	}
	pl := must(New(p))
	count := func(from, to int64) map[int]int64 {
		n := map[int]int64{}
		for g := from; g < to; g++ {
			for _, smp := range globalBatchAt(t, pl, g) {
				n[smp.Stream]++
			}
		}
		return n
	}
	// Before the first phase: the streams' sizes, 800:300:90.
	for _, tc := range []struct {
		from, to int64
		size     int64
		shares   []float64
	}{
		{0, 10, 8, []float64{800. / 1190, 300. / 1190, 90. / 1190}},
		{10, 30, 20, []float64{0.2, 0.5, 0.3}},
		{30, 40, 20, []float64{1, 0, 0}},
		{40, 60, 4, []float64{1, 0, 0}},
	} {
		n := count(tc.from, tc.to)
		total := (tc.to - tc.from) * tc.size
		for s, share := range tc.shares {
			if d := float64(n[s]) - share*float64(total); d > 4 || d < -4 { // within one per split
				t.Errorf("steps %d to %d: stream %d has %d of %d samples, want %.1f", tc.from, tc.to, s, n[s], total, share*float64(total))
			}
		}
		ep := must(pl.Epoch(0))
		if tc.to <= pl.Steps() && ep.BatchSize(tc.from) != tc.size {
			t.Errorf("step %d: batch size %d, want %d", tc.from, ep.BatchSize(tc.from), tc.size)
		}
	}
}

// TestScheduleAppendedPhasesKeepEarlierSteps: a phase appended after step
// a changes nothing before it, and the fingerprint stays.
func TestScheduleAppendedPhasesKeepEarlierSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		p := randomSchedule(r, randomParams(r))
		before, err := New(p)
		if err != nil {
			continue
		}
		last := int64(0)
		for _, ph := range p.Schedule.Phases {
			last = ph.StartStep + ph.RepeatSteps
		}
		q := p
		q.Schedule = &Schedule{Phases: append(slices.Clone(p.Schedule.Phases), Phase{StartStep: last + 3, GlobalBatchSize: int64(2 * p.NumSplits)})}
		after := must(New(q))
		if before.Fingerprint().Sum != after.Fingerprint().Sum {
			t.Fatalf("appending a phase changed the fingerprint: %s, now %s", before.Fingerprint(), after.Fingerprint())
		}
		for g := range last + 3 {
			a, b := globalBatchAt(t, before, g), globalBatchAt(t, after, g)
			if !slices.Equal(a, b) {
				t.Fatalf("step %d changed when a phase was appended at step %d", g, last+3)
			}
		}
	}
}

func TestScheduleIsRefusedClearly(t *testing.T) {
	base := Params{Streams: []Stream{{Name: "a", Index: index(100)}, {Name: "b", Index: index(50)}}, NumSplits: 4, GlobalBatchSize: 8}
	for _, tc := range []struct {
		name   string
		phases []Phase
		modify func(*Params)
		says   string
	}{
		{"out of order", []Phase{{StartStep: 5, GlobalBatchSize: 4}, {StartStep: 5, GlobalBatchSize: 8}}, nil, "is not after the previous phase's 5"},
		{"inside a repeat", []Phase{{StartStep: 5, RepeatSteps: 3}, {StartStep: 7, GlobalBatchSize: 8}}, nil, "falls in the steps the previous phase repeats (5 to 7)"},
		{"batch size", []Phase{{StartStep: 5, GlobalBatchSize: 6}}, nil, "must be a multiple of spec.numSplits (4), got 6"},
		{"nothing", []Phase{{StartStep: 5}}, nil, "changes nothing"},
		{"skip and more", []Phase{{StartStep: 5, SkipSteps: 2, GlobalBatchSize: 8}}, nil, "in a phase of its own"},
		{"repeat before the start", []Phase{{StartStep: 2, RepeatSteps: 3}}, nil, "only 2 come before step 2"},
		{"unknown stream", []Phase{{StartStep: 1, Proportions: map[string]string{"a": "1", "b": "1", "c": "1"}}}, nil, `names "c"`},
		{"missing stream", []Phase{{StartStep: 1, Proportions: map[string]string{"a": "1"}}}, nil, `no proportion for stream "b"`},
		{"all zero", []Phase{{StartStep: 1, Proportions: map[string]string{"a": "0", "b": "0.0"}}}, nil, "are all 0"},
		{"not a decimal", []Phase{{StartStep: 1, Proportions: map[string]string{"a": "1e3", "b": "1"}}}, nil, `"1e3" is not a decimal`},
		{"per_stream", []Phase{{StartStep: 1, GlobalBatchSize: 4}}, func(p *Params) { p.Batching = BatchingPerStream }, "per_stream batching cannot follow a schedule"},
		{"a stream below S", nil, func(p *Params) { p.Streams[1].Index = index(3) }, `stream "b" has 3 samples`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.Streams = slices.Clone(base.Streams)
			p.Schedule = &Schedule{Phases: tc.phases}
			if tc.modify != nil {
				tc.modify(&p)
			}
			_, err := New(p)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

func TestPhaseHashIgnoresHowDecimalsAreWritten(t *testing.T) {
	a := Phase{StartStep: 5, Proportions: map[string]string{"a": "0.5", "b": "1"}}
	b := Phase{StartStep: 5, Proportions: map[string]string{"b": "1.0", "a": "0.50"}}
	c := Phase{StartStep: 6, Proportions: map[string]string{"a": "0.5", "b": "1"}}
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() {
		t.Fatalf("hashes %s %s %s: want the first two equal, the third apart", a.Hash(), b.Hash(), c.Hash())
	}
}

// TestScheduleNeedsAndCacheCoverEveryStep: in every epoch's steps, the
// shards a pod's splits read at each step are in its needs at that step,
// within its minimum cache, and each pod's needs are the union of its
// ranks'.
func TestScheduleNeedsAndCacheCoverEveryStep(t *testing.T) {
	forRandomSchedules(t, 100, func(t *testing.T, pl *Plan, horizon int64) {
		for e := range horizon/pl.Steps() + 1 {
			checkPodsCover(t, must(pl.Epoch(e)))
		}
	})
}

// TestScheduleMinimumCacheCoversLaterPhases: a ramp-up in a later epoch
// needs more cache than epoch 0; the plan's minimum cache (what the webhook
// checks) covers it.
func TestScheduleMinimumCacheCoversLaterPhases(t *testing.T) {
	p := Params{Streams: []Stream{{Name: "a", Index: index(50, 50, 50, 50, 50, 50, 50, 50)}}, NumSplits: 2, GlobalBatchSize: 2,
		Seed: 1, Shuffle: true, BlockSize: 4}
	pl := must(New(p))
	p.Schedule = &Schedule{Phases: []Phase{{StartStep: 2*pl.Steps() + 7, GlobalBatchSize: 200}}}
	pl = must(New(p))
	if got := pl.CacheEpochs(); !slices.Equal(got, []int64{0, 2, 3}) {
		t.Fatalf("cache epochs %v, want [0 2 3]", got)
	}
	first := must(must(pl.Epoch(0)).MinCacheBytes(1, 0))
	later := must(must(pl.Epoch(3)).MinCacheBytes(1, 0))
	all := must(pl.MinCacheBytes(1, 0))
	if later <= first || all < later {
		t.Fatalf("epoch 0 needs %d, epoch 3 %d, the plan says %d: want the plan's to cover the ramp-up's", first, later, all)
	}
}

// TestScheduleEgressIsPerPass: in an epoch's steps, the pods together fetch
// each shard once per pass of its stream the steps draw from, plus one
// shard per pod boundary per stream per pass (each pass is cut on its own).
func TestScheduleEgressIsPerPass(t *testing.T) {
	forRandomSchedules(t, 100, func(t *testing.T, pl *Plan, horizon int64) {
		S := pl.NumSplits()
		for e := range horizon/pl.Steps() + 1 {
			ep := must(pl.Epoch(e))
			passes := map[int]map[int64]bool{} // stream → passes drawn in the epoch
			note := func(batch []Sample) {
				for _, smp := range batch {
					if passes[smp.Stream] == nil {
						passes[smp.Stream] = map[int64]bool{}
					}
					passes[smp.Stream][smp.Pass] = true
				}
			}
			for k := range pl.Steps() {
				note(must(ep.GlobalBatch(nil, k)))
			}
			for _, P := range []int{2, S} {
				if S%P != 0 {
					continue
				}
				var pairs, bound int
				for pod := range P {
					first, n, _ := pl.PodSplits(pod, P)
					pairs += len(ep.ShardsNeeded(first, n))
				}
				for s, ps := range passes {
					shards := 0
					for _, sh := range pl.params.Streams[s].Index.Shards {
						if sh.Samples > 0 {
							shards++
						}
					}
					bound += len(ps) * (shards + P - 1)
				}
				if pairs > bound {
					t.Fatalf("epoch %d, %d pods: %d (pod, shard) fetches, above passes × (shards + P − 1) = %d", e, P, pairs, bound)
				}
			}
		}
	})
}

func TestScheduleBatchSizesAreEveryStepsSize(t *testing.T) {
	forRandomSchedules(t, 150, func(t *testing.T, pl *Plan, horizon int64) {
		runs := pl.BatchSizes()
		for g := range horizon {
			i := len(runs) - 1
			for runs[i].FromStep > g {
				i--
			}
			ep := must(pl.Epoch(g / pl.Steps()))
			if want := ep.BatchSize(g % pl.Steps()); runs[i].GlobalBatchSize != want {
				t.Fatalf("step %d: the runs %v say %d, the plan %d", g, runs, runs[i].GlobalBatchSize, want)
			}
		}
	})
}

// TestTheLargestValidBatchSizesPlanInBoundedWork: a phase's batch size is
// valid up to 2^60, and the needs of a window (what a sidecar prefetches,
// what the reconciler sizes caches with, for several pod counts) once
// walked every pass of the stream the window spans: a batch of 1.2e6
// never finished. Every batch size up to the largest valid one plans,
// and the needs of a window that spans many passes hold every shard of
// the split, from the first step to the last.
func TestTheLargestValidBatchSizesPlanInBoundedWork(t *testing.T) {
	base := func(g int64) Params {
		return Params{Seed: 7, NumSplits: 4, Shuffle: true, BlockSize: 4, GlobalBatchSize: 8, DropLast: true,
			Streams:  []Stream{{Name: "a", Index: index(10, 30, 7, 25, 40, 12, 9, 33)}, {Name: "b", Index: index(50, 5, 17)}},
			Schedule: &Schedule{Phases: []Phase{{StartStep: 3, GlobalBatchSize: g}}}}
	}
	for _, tt := range []struct {
		g       int64
		refused bool // its epochs address more than 2^62 samples per split
	}{{4000, false}, {120_000, false}, {1_200_000, false}, {1 << 40, false}, {1 << 56, false}, {1 << 59, true}, {1 << 60, true}} {
		g := tt.g
		t.Run(fmt.Sprint(g), func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				pl, err := New(base(g))
				if tt.refused {
					if err == nil || !strings.Contains(err.Error(), "lower its globalBatchSize") {
						t.Errorf("New = %v, want a refusal that says to lower the batch size", err)
					}
					return
				}
				if err != nil {
					t.Errorf("New: %v", err)
					return
				}
				if _, err := pl.Epoch(1 << 50); err == nil || !strings.Contains(err.Error(), "2^6") {
					t.Errorf("an epoch past what the phase addresses: %v, want a refusal", err)
				}
				ep, err := pl.Epoch(0)
				if err != nil {
					t.Errorf("Epoch: %v", err)
					return
				}
				for j := range 4 {
					needs := ep.ShardsNeeded(j, 1)
					seen := map[[2]int]bool{}
					for _, nd := range needs {
						seen[[2]int{nd.Stream, nd.Shard}] = true
						if nd.FirstStep < 0 || nd.LastStep >= pl.Steps() || nd.FirstStep > nd.LastStep {
							t.Errorf("split %d: need %+v outside the epoch's %d steps", j, nd, pl.Steps())
						}
					}
					// Step 3 on reads each stream many times over: a split
					// reads every shard of its part of each stream.
					for _, b := range scheduleOf(pl).passes[0].mustEpoch(t, 0).ShardsNeeded(j, 1) {
						if !seen[[2]int{0, b.Shard}] {
							t.Errorf("split %d: shard %d of stream a, read at every pass, is not needed", j, b.Shard)
						}
					}
				}
				if g <= 120_000 { // every step's shards are in the needs, within the cache
					checkPodsCover(t, ep)
				}
				for _, pods := range []int{1, 2, 4} {
					if _, err := pl.MinCacheBytes(pods, 1); err != nil {
						t.Errorf("MinCacheBytes(%d): %v", pods, err)
					}
				}
				if g > 1<<21 { // a batch of 2^60 samples is not materialised
					return
				}
				var buf []Sample
				if buf, err = ep.SplitsBatch(buf, pl.Steps()-1, 0, 4); err != nil || int64(len(buf)) != g {
					t.Errorf("the last step: %d samples, %v; want %d", len(buf), err, g)
				}
			}()
			select {
			case <-done:
			case <-time.After(2 * time.Minute): // a hang, not a speed bound
				t.Fatalf("planning a phase of batch size %d did not finish in 2 minutes", g)
			}
		})
	}
}

func (pl *Plan) mustEpoch(t *testing.T, e int64) *EpochPlan {
	t.Helper()
	ep, err := pl.Epoch(e)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// A phase may start up to 2^60, and the message said so, but a start in
// an epoch that ends past 2^60 steps was refused as an epoch "past the
// 2^60 steps a schedule addresses": it is refused at the phase, naming
// the last step it may start at, and that step plans.
func TestAPhaseStartPastTheLastAddressableEpochNamesTheLastStart(t *testing.T) {
	params := func(start int64) Params {
		return Params{Seed: 7, NumSplits: 4, Shuffle: true, BlockSize: 4, GlobalBatchSize: 8, DropLast: true,
			Streams:  []Stream{{Name: "a", Index: index(10, 30, 7, 25)}},
			Schedule: &Schedule{Phases: []Phase{{StartStep: start, GlobalBatchSize: 16}}}}
	}
	_, err := New(params(1 << 60))
	if err == nil || !strings.Contains(err.Error(), "spec.schedule.phases[0].startStep") || !strings.Contains(err.Error(), "start the phase at step") {
		t.Fatalf("New = %v, want the phase's start refused with the last step it may start at", err)
	}
	var last int64
	_, tail, _ := strings.Cut(err.Error(), "start the phase at step ")
	if _, serr := fmt.Sscanf(tail, "%d", &last); serr != nil {
		t.Fatal(serr)
	}
	pl, err := New(params(last))
	if err != nil {
		t.Fatalf("the last start it names: %v", err)
	}
	if _, err := pl.Epoch(0); err != nil {
		t.Fatal(err)
	}
}
