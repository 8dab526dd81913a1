package planner

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomParams draws a valid plan configuration: 1–3 streams of 1–6 shards
// (some filtered, with shards that match no row; some in files of two
// shards with a footer), random weights of one kind, S, G, block size,
// shuffle, dropLast and a batching method.
func randomParams(r *rand.Rand) Params {
	for {
		p := Params{
			Seed:      r.Uint64(),
			NumSplits: []int{1, 2, 3, 4, 6, 8, 12}[r.IntN(7)],
			Shuffle:   r.IntN(4) != 0,
			BlockSize: int64(1 + r.IntN(20)),
			DropLast:  r.IntN(2) == 0,
		}
		p.GlobalBatchSize = int64(p.NumSplits * (1 + r.IntN(4)))
		kind := r.IntN(4) // none, proportion, repeat/choose, epochSize only
		for s := range 1 + r.IntN(3) {
			var sizes []int64
			for range 1 + r.IntN(6) {
				sizes = append(sizes, int64(1+r.IntN(40)))
			}
			if r.IntN(3) == 0 { // a filter: some shards match no row
				for h := range sizes {
					if h > 0 && r.IntN(3) == 0 {
						sizes[h] = 0
					}
				}
			}
			st := Stream{Name: fmt.Sprint("s", s), Index: index(sizes...)}
			if slices.Contains(sizes, 0) {
				st.Index.Filter = "sha256:f"
			}
			if r.IntN(2) == 0 { // files of two shards with a footer each
				footer := int64(1 + r.IntN(50))
				for h := range st.Index.Shards {
					st.Index.Shards[h].Shared, st.Index.Shards[h].SharedBytes = fmt.Sprint("file", h/2), footer+int64(h/2)
				}
			}
			switch kind {
			case 1:
				st.Proportion = fmt.Sprintf("%d.%d", r.IntN(3), 1+r.IntN(9))
			case 2:
				switch r.IntN(3) {
				case 0:
					st.Repeat = fmt.Sprintf("%d.%d", r.IntN(3), r.IntN(10))
				case 1:
					st.Choose = int64(1 + r.IntN(200))
				}
			}
			p.Streams = append(p.Streams, st)
		}
		if kind == 1 || kind == 3 {
			p.EpochSize = int64(r.IntN(300)) // 0: the default
		}
		p.Batching = []Batching{"", BatchingRandom, BatchingStratified, BatchingPerStream}[r.IntN(4)]
		if r.IntN(3) == 0 { // runs of samples kept together
			p.RunLength = int64(1 + r.IntN(int(p.BlockSize)))
		}
		if _, err := New(p); err == nil {
			return p
		}
	}
}

// forRandomPlans runs check on n random plans and epochs.
func forRandomPlans(t *testing.T, n int, check func(t *testing.T, ep *EpochPlan)) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		p := randomParams(r)
		epoch := int64(r.IntN(3))
		t.Run(fmt.Sprint("case", i), func(t *testing.T) {
			pl, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			ep, err := pl.Epoch(epoch)
			if err != nil {
				t.Fatal(err)
			}
			check(t, ep)
			if t.Failed() {
				t.Logf("params: %+v epoch %d", p, epoch)
			}
		})
	}
}

// innerSamples returns every sample of the epoch's spans, before any drop.
func innerSamples(ep *EpochPlan) []Sample {
	var out []Sample
	for j := range ep.plan.NumSplits() {
		out = append(out, splitSamples(ep, j)...)
	}
	return out
}

// splitSamples returns every sample of split j's spans, before any drop:
// with lanes, each stream's part of the split.
func splitSamples(ep *EpochPlan, j int) []Sample {
	var out []Sample
	for s, lane := range laneEpochs(ep) { // each stream cut on its own
		for _, x := range splitSamples(lane, j) {
			out = append(out, Sample{ID: ep.plan.streamOffset[s] + x.ID, Stream: s, Shard: x.Shard})
		}
	}
	if laneEpochs(ep) != nil {
		return out
	}
	re := randomOf(ep)
	for x := range re.orderedLen(j) {
		out = append(out, re.sampleAtInner(j, x))
	}
	return out
}

// cuts returns the epoch plans whose splits are cut from units: the epoch
// itself, or its lanes.
func cuts(ep *EpochPlan) []*EpochPlan {
	if lanes := laneEpochs(ep); lanes != nil {
		return lanes
	}
	return []*EpochPlan{ep}
}

func TestEpochSpansGiveEachStreamItsCountWithWholeShardRepeats(t *testing.T) {
	forRandomPlans(t, 300, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		perStream := make([]int64, len(pl.params.Streams))
		mult := map[int64]int64{}
		for _, s := range innerSamples(ep) {
			perStream[s.Stream]++
			mult[s.ID]++
		}
		if !slices.Equal(perStream, pl.counts) {
			t.Fatalf("samples per stream = %v, want %v", perStream, pl.counts)
		}
		for s, st := range pl.params.Streams {
			size := st.Index.Samples()
			full := pl.counts[s] / size
			cut := 0 // shards whose extra copy is partial
			for h, sh := range st.Index.Shards {
				first := pl.streamOffset[s] + pl.shardFirst[s][h]
				extra := int64(0)
				for x := range sh.Samples {
					m := mult[first+x] - full
					if m < 0 || m > 1 {
						t.Fatalf("stream %d shard %d sample %d appears %d times, want %d or %d", s, h, x, mult[first+x], full, full+1)
					}
					if m == 1 && extra != x {
						t.Fatalf("stream %d shard %d: the extra copy is not a prefix of the shard", s, h)
					}
					extra += m
				}
				if extra > 0 && extra < sh.Samples {
					cut++
				}
			}
			if cut > 1 {
				t.Fatalf("stream %d: %d shards cut, want at most 1", s, cut)
			}
		}
	})
}

func TestBlockShuffleIsAPermutationOfEachSplit(t *testing.T) {
	forRandomPlans(t, 200, func(t *testing.T, ep *EpochPlan) {
		for _, ep := range cuts(ep) {
			for j := range ep.plan.NumSplits() {
				re := randomOf(ep)
				n := re.orderedLen(j)
				seen := make([]bool, n)
				for x := range n {
					in := re.inner(j, x)
					if in < 0 || in >= n || seen[in] {
						t.Fatalf("split %d: position %d maps to %d, outside or taken", j, x, in)
					}
					seen[in] = true
				}
			}
		}
	})
}

// TestRunsKeepConsecutiveSamplesTogether checks the shape of a shuffle in
// runs: inside each block, the positions of a run map to consecutive places
// of one run, every run is used once, and a block's last n mod r positions
// stay last, in order.
func TestRunsKeepConsecutiveSamplesTogether(t *testing.T) {
	tests := []struct {
		name          string
		split, block  int64
		run           int64
		wantSomeMoved bool
	}{
		{"runs divide the block", 64, 16, 4, true},
		{"a short last run in each block", 60, 14, 4, true},
		{"a short last block", 50, 16, 4, true},
		{"one run per block", 32, 8, 8, false},
		{"runs of one sample", 32, 8, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, err := New(Params{Streams: []Stream{{Name: "a", Index: index(tt.split)}}, Seed: 9, NumSplits: 1,
				Shuffle: true, BlockSize: tt.block, RunLength: tt.run, GlobalBatchSize: 1, DropLast: true})
			if err != nil {
				t.Fatal(err)
			}
			ep, _ := pl.Epoch(0)
			moved := false
			for base := int64(0); base < tt.split; base += tt.block {
				n := min(tt.block, tt.split-base)
				full := n / tt.run * tt.run
				seenRun := map[int64]bool{}
				for u := range n {
					in := randomOf(ep).inner(0, base+u) - base
					if u >= full {
						if in != u {
							t.Fatalf("block at %d: tail position %d maps to %d, want itself", base, u, in)
						}
						continue
					}
					if in%tt.run != u%tt.run || in >= full {
						t.Fatalf("block at %d: position %d maps to %d, not the same place of a whole run", base, u, in)
					}
					if u%tt.run == 0 {
						if seenRun[in/tt.run] {
							t.Fatalf("block at %d: run %d used twice", base, in/tt.run)
						}
						seenRun[in/tt.run] = true
					} else if prev := randomOf(ep).inner(0, base+u-1) - base; in != prev+1 {
						t.Fatalf("block at %d: position %d maps to %d after %d: the run was cut", base, u, in, prev)
					}
					moved = moved || in != u
				}
			}
			if moved != tt.wantSomeMoved {
				t.Errorf("some run moved: %v, want %v", moved, tt.wantSomeMoved)
			}
		})
	}
}

// TestRunLengthOneIsTheSampleShuffle: a run length of 1 is the shuffle of
// samples, plan and fingerprint alike (the version 1 plan).
func TestRunLengthOneIsTheSampleShuffle(t *testing.T) {
	for name, p := range goldenPlans() {
		if !p.Shuffle || p.RunLength != 0 {
			continue
		}
		a, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		p.RunLength = 1
		b, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if a.Fingerprint().Sum != b.Fingerprint().Sum || a.Version() != b.Version() {
			t.Errorf("%s: run length 1 plans %s (v%d), unset plans %s (v%d)", name, b.Fingerprint().Sum, b.Version(), a.Fingerprint().Sum, a.Version())
		}
	}
}

func TestDropsAndPadsAreCountedAndPadsMarked(t *testing.T) {
	forRandomPlans(t, 300, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		var real, pads int64
		for k := range pl.Steps() {
			batch, err := ep.GlobalBatch(nil, k)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range batch {
				if s.Pad {
					pads++
				} else {
					real++
				}
			}
		}
		if real != pl.Total()-pl.DroppedPerEpoch() || pads != pl.PaddedPerEpoch() {
			t.Fatalf("delivered %d real and %d pad rows, want %d (T %d - dropped %d) and %d",
				real, pads, pl.Total()-pl.DroppedPerEpoch(), pl.Total(), pl.DroppedPerEpoch(), pl.PaddedPerEpoch())
		}
		if pl.params.Batching == BatchingPerStream {
			// Pads complete a stream's last batch from its split's start: a
			// copy of a sample the split delivers.
			for j := range pl.NumSplits() {
				real := map[int64]bool{}
				var padded []int64
				for t2 := range pl.Steps() * pl.perSplit {
					if x := ep.At(j, t2); x.Pad {
						padded = append(padded, x.ID)
					} else {
						real[x.ID] = true
					}
				}
				for _, id := range padded {
					if !real[id] {
						t.Fatalf("split %d: pad row %d copies no sample of the split", j, id)
					}
				}
			}
			return
		}
		for j := range pl.NumSplits() {
			for t2 := pl.SplitLen(); t2 < pl.Steps()*pl.perSplit; t2++ {
				pad, orig := ep.At(j, t2), ep.At(j, t2-pl.SplitLen())
				if !pad.Pad || orig.Pad || pad.ID != orig.ID {
					t.Fatalf("split %d position %d = %+v, want the pad copy of position %d = %+v", j, t2, pad, t2-pl.SplitLen(), orig)
				}
			}
		}
	})
}

func sortedIDs(ss []Sample) []int64 {
	ids := make([]int64, len(ss))
	for i, s := range ss {
		ids[i] = s.ID
	}
	slices.Sort(ids)
	return ids
}

func TestEveryWorldSizeGetsTheSameGlobalBatches(t *testing.T) {
	forRandomPlans(t, 200, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		S := pl.NumSplits()
		for k := range pl.Steps() {
			global, _ := ep.GlobalBatch(nil, k)
			if int64(len(global)) != pl.GlobalBatchSize() {
				t.Fatalf("global batch %d has %d samples, want %d", k, len(global), pl.GlobalBatchSize())
			}
			want := sortedIDs(global)
			for W := 1; W <= S; W++ {
				if S%W != 0 {
					continue
				}
				var union []Sample
				for r := range W {
					local, err := ep.LocalBatch(nil, k, r, W)
					if err != nil {
						t.Fatal(err)
					}
					if int64(len(local)) != pl.GlobalBatchSize()/int64(W) {
						t.Fatalf("W=%d rank %d batch %d has %d samples, want G/W = %d", W, r, k, len(local), pl.GlobalBatchSize()/int64(W))
					}
					union = append(union, local...)
				}
				if got := sortedIDs(union); !slices.Equal(got, want) {
					t.Fatalf("W=%d: batch %d = %v, want %v", W, k, got, want)
				}
			}
		}
		// Every rank has exactly K batches.
		if _, err := ep.LocalBatch(nil, pl.Steps(), 0, 1); err == nil {
			t.Fatalf("batch K = %d exists", pl.Steps())
		}
	})
}

func TestRanksReadOnlyTheirOwnSplits(t *testing.T) {
	forRandomPlans(t, 200, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		S := pl.NumSplits()
		// Map every id to the splits that hold it (ids repeat only with
		// repeats, and then may sit in two splits).
		home := map[int64]map[int]bool{}
		for j := range S {
			for _, x := range splitSamples(ep, j) {
				id := x.ID
				if home[id] == nil {
					home[id] = map[int]bool{}
				}
				home[id][j] = true
			}
		}
		for _, W := range []int{1, S} {
			for r := range W {
				first, n, _ := pl.RankSplits(r, W)
				for k := range pl.Steps() {
					local, _ := ep.LocalBatch(nil, k, r, W)
					for _, s := range local {
						ok := false
						for j := first; j < first+n; j++ {
							ok = ok || home[s.ID][j]
						}
						if !ok {
							t.Fatalf("W=%d rank %d step %d got id %d from splits %v, outside its splits [%d, %d)", W, r, k, s.ID, home[s.ID], first, first+n)
						}
					}
				}
			}
		}
	})
}

func TestResumeWithAnotherWorldSizeYieldsTheUninterruptedBatches(t *testing.T) {
	forRandomPlans(t, 100, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		S := pl.NumSplits()
		var worlds []int
		for W := 1; W <= S; W++ {
			if S%W == 0 {
				worlds = append(worlds, W)
			}
		}
		r := rand.New(rand.NewPCG(uint64(S), uint64(pl.Steps())))
		W1, W2 := worlds[r.IntN(len(worlds))], worlds[r.IntN(len(worlds))]
		checkpoint := r.Int64N(pl.Steps() + 1)
		workers := 1 + r.IntN(3)
		// Before the checkpoint W1 ranks with one worker; after it W2 ranks
		// with several DataLoader workers, restarted at the checkpoint.
		got := make([][]int64, pl.Steps())
		collect := func(k int64, W int) {
			var all []Sample
			for rank := range W {
				local, err := ep.LocalBatch(nil, k, rank, W)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, local...)
			}
			if got[k] != nil {
				t.Fatalf("step %d delivered twice", k)
			}
			got[k] = sortedIDs(all)
		}
		for k := range checkpoint {
			collect(k, W1)
		}
		// The DataLoader round-robins over its workers from worker 0.
		var order []int64
		seqs := make([]func() (int64, bool), workers)
		for w := range workers {
			next, stop := iter.Pull(WorkerSteps(checkpoint, w, workers, pl.Steps()))
			defer stop()
			seqs[w] = next
		}
		for w := 0; ; w = (w + 1) % workers {
			k, ok := seqs[w]()
			if !ok {
				break
			}
			order = append(order, k)
			collect(k, W2)
		}
		for i, k := range order {
			if k != checkpoint+int64(i) {
				t.Fatalf("workers yielded steps %v, want %d, %d, ... in order", order, checkpoint, checkpoint+1)
			}
		}
		for k := range pl.Steps() {
			want, _ := ep.GlobalBatch(nil, k)
			if !slices.Equal(got[k], sortedIDs(want)) {
				t.Fatalf("W %d -> %d at step %d: batch %d = %v, want %v", W1, W2, checkpoint, k, got[k], sortedIDs(want))
			}
		}
	})
}

func TestEgressIsAtMostDistinctBytesPlusOneShardAndTheFootersPerPodBoundary(t *testing.T) {
	forRandomPlans(t, 300, func(t *testing.T, ep *EpochPlan) {
		pl := ep.plan
		for P := 1; P <= pl.NumSplits(); P++ {
			if pl.NumSplits()%P != 0 {
				continue
			}
			e, err := ep.Egress(P)
			if err != nil {
				t.Fatal(err)
			}
			// Each pod also fetches the footer of every file it reads from.
			var footers int64
			seen := map[sharedKey]bool{}
			for s, st := range pl.params.Streams {
				for _, sh := range st.Index.Shards {
					if k := (sharedKey{s, sh.Shared}); sh.SharedBytes > 0 && !seen[k] {
						seen[k] = true
						footers += sh.SharedBytes
					}
				}
			}
			// A pod boundary cuts one shard; with lanes, one of each stream.
			largest := pl.MaxShardBytes()
			if lanesOf(pl) != nil {
				largest = 0
				for _, lane := range lanesOf(pl).plans {
					largest += lane.MaxShardBytes()
				}
			}
			if bound := e.DistinctBytes + int64(P-1)*(largest+footers); e.FetchedBytes > bound {
				t.Fatalf("P=%d pods fetch %d bytes, more than distinct %d + (P-1) x (largest shard(s) %d + footers %d)", P, e.FetchedBytes, e.DistinctBytes, largest, footers)
			}
		}
	})
}

func TestShardsNeededAndMinCacheCoverEveryStep(t *testing.T) {
	forRandomPlans(t, 200, checkPodsCover)
}

func TestShuffleChangesOrderAndDropsPerEpochAndIsReproducible(t *testing.T) {
	p := Params{
		Streams:   []Stream{{Name: "a", Index: index(40, 40, 40, 40, 40)}, {Name: "b", Index: index(33, 33, 33)}},
		Seed:      7,
		NumSplits: 8, Shuffle: true, BlockSize: 16, GlobalBatchSize: 16, DropLast: true,
	}
	pl, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(e int64) []int64 {
		ep, err := pl.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for k := range pl.Steps() {
			b, _ := ep.GlobalBatch(nil, k)
			for _, s := range b {
				out = append(out, s.ID)
			}
		}
		return out
	}
	e0, e1, again := ids(0), ids(1), ids(0)
	if !slices.Equal(e0, again) {
		t.Fatal("the same seed and epoch gave two orders")
	}
	if slices.Equal(e0, e1) {
		t.Fatal("epochs 0 and 1 have the same order")
	}
	// T = 299, S = 8: 3 samples dropped per epoch (and dropLast tails);
	// which ones changes with the epoch.
	dropped := func(order []int64) []int64 {
		seen := map[int64]bool{}
		for _, id := range order {
			seen[id] = true
		}
		var d []int64
		for id := range int64(299) {
			if !seen[id] {
				d = append(d, id)
			}
		}
		return d
	}
	if d0, d1 := dropped(e0), dropped(e1); slices.Equal(d0, d1) || int64(len(d0)) != pl.DroppedPerEpoch() {
		t.Fatalf("dropped samples %v (epoch 0) and %v (epoch 1), want %d each, different", d0, d1, pl.DroppedPerEpoch())
	}
	// A different seed gives a different order.
	p.Seed = 8
	other, _ := New(p)
	ep, _ := other.Epoch(0)
	b, _ := ep.GlobalBatch(nil, 0)
	if first, _ := pl.Epoch(0); slices.Equal(sortedIDs(b), sortedIDs(must(first.GlobalBatch(nil, 0)))) {
		t.Fatal("seeds 7 and 8 give the same first batch")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestWithoutShuffleEachSplitIsInIndexOrder(t *testing.T) {
	p := Params{
		Streams:   []Stream{{Name: "a", Index: index(10, 20, 5)}, {Name: "b", Index: index(7, 9)}},
		NumSplits: 4, GlobalBatchSize: 4, DropLast: true,
	}
	pl, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := pl.Epoch(3)
	for j := range pl.NumSplits() {
		for t2 := int64(1); t2 < pl.SplitLen(); t2++ {
			if prev, id := ep.At(j, t2-1).ID, ep.At(j, t2).ID; id != prev+1 {
				t.Fatalf("split %d position %d has id %d after %d: not index order", j, t2, id, prev)
			}
		}
	}
	// Splits are contiguous in index order: split 0 starts at id 0.
	if id := ep.At(0, 0).ID; id != 0 {
		t.Fatalf("split 0 starts at id %d, want 0", id)
	}
}

// goldenPlans are the plans whose sample ids, fingerprints and index
// content hashes are pinned.
func goldenPlans() map[string]Params {
	return map[string]Params{
		"shuffle-proportions": {
			Streams: []Stream{
				{Name: "a", Index: index(100, 37, 250, 3), Proportion: "0.7"},
				{Name: "b", Index: index(64, 64), Proportion: "0.3"},
			},
			EpochSize: 1000, Seed: 2026, NumSplits: 6, Shuffle: true, BlockSize: 50, GlobalBatchSize: 24, DropLast: false,
		},
		"shuffle-repeat": {
			Streams: []Stream{
				{Name: "a", Index: index(10, 20, 30), Repeat: "2.5"},
				{Name: "b", Index: index(5, 5, 5, 5), Choose: 33},
			},
			Seed: 1, NumSplits: 4, Shuffle: true, BlockSize: 7, GlobalBatchSize: 8, DropLast: true,
		},
		"ordered": {
			Streams:   []Stream{{Name: "a", Index: index(9, 9, 9)}},
			NumSplits: 2, GlobalBatchSize: 2, DropLast: true,
		},
		"filtered": {
			Streams: []Stream{
				{Name: "a", Index: filteredIndex("sha256:0f", 30, 0, 7, 19, 0), Proportion: "2"},
				{Name: "b", Index: index(20, 20), Proportion: "1"},
			},
			Seed: 3, NumSplits: 4, Shuffle: true, BlockSize: 5, GlobalBatchSize: 8,
		},
		"stratified": {
			Streams: []Stream{
				{Name: "a", Index: index(30, 11, 7, 19), Proportion: "2"},
				{Name: "b", Index: index(20, 20), Proportion: "1"},
			},
			Seed: 4, NumSplits: 4, Shuffle: true, BlockSize: 5, GlobalBatchSize: 8, Batching: BatchingStratified,
		},
		"per_stream": {
			Streams: []Stream{
				{Name: "a", Index: index(30, 11, 7, 19)},
				{Name: "b", Index: index(20, 20), Repeat: "1.5"},
			},
			Seed: 5, NumSplits: 4, Shuffle: true, BlockSize: 5, GlobalBatchSize: 8, Batching: BatchingPerStream,
		},
		"runs": {
			Streams: []Stream{
				{Name: "a", Index: index(100, 37, 250, 3), Proportion: "0.7"},
				{Name: "b", Index: index(64, 64), Proportion: "0.3"},
			},
			EpochSize: 1000, Seed: 2026, NumSplits: 6, Shuffle: true, BlockSize: 50, RunLength: 8, GlobalBatchSize: 24, DropLast: false,
		},
		"scheduled": {
			Streams: []Stream{
				{Name: "a", Index: index(30, 11, 7, 19)},
				{Name: "b", Index: index(20, 20), Repeat: "2"},
			},
			Seed: 6, NumSplits: 4, Shuffle: true, BlockSize: 5, GlobalBatchSize: 8,
			Schedule: &Schedule{Phases: []Phase{
				{StartStep: 3, GlobalBatchSize: 4},
				{StartStep: 9, Proportions: map[string]string{"a": "0.25", "b": "0.75"}, GlobalBatchSize: 12},
				{StartStep: 14, SkipSteps: 2},
				{StartStep: 17, RepeatSteps: 3},
			}},
		},
		"bucketed": {
			Streams: []Stream{
				{Name: "a[0]", Index: filteredIndex("sha256:a0", 30, 11, 7, 19)},
				{Name: "a[1]", Index: filteredIndex("sha256:a1", 3, 20, 0, 9)},
				{Name: "b[0]", Index: filteredIndex("sha256:b0", 20, 0), Repeat: "2"},
				{Name: "b[1]", Index: filteredIndex("sha256:b1", 5, 25), Repeat: "2"},
			},
			Seed: 7, NumSplits: 4, Shuffle: true, BlockSize: 5, GlobalBatchSize: 8,
			Bucketing: &Bucketing{Buckets: 2, Streams: []string{"a", "b"}, Labels: []string{"length below 128", "length at least 128"}},
		},
	}
}

// filteredIndex is an index of a stream filtered by the filter of hash
// filter: samples are each shard's matching rows.
func filteredIndex(filter string, samples ...int64) StreamIndex {
	x := index(samples...)
	x.Filter = filter
	return x
}

// TestPlanGoldenVectors pins whole plans of each plan version: if any id of
// these epochs changes, the plan changed, and its version must be bumped
// with new vectors. A plan that uses no feature of a later version keeps
// version 1's sequence byte for byte.
func TestPlanGoldenVectors(t *testing.T) {
	golden := map[int]map[string]string{
		1: {
			"shuffle-proportions": "b14df106bae4230317e74880",
			"shuffle-repeat":      "8323dd051999bb638a9e58f1",
			"ordered":             "c1ac76e1191366b2883895b5",
		},
		2: {
			"filtered":   "f6d1cad41fdb4d2ea21e6f8b",
			"stratified": "25e7fd849804dd2381fcdf35",
			"per_stream": "9fb65e4aafc931be9a27c8d7",
			"scheduled":  "9eff162b85a8f8da188023c4",
		},
		3: {
			"runs": "bb66bd63a32d35d8bc189884",
		},
		5: {
			"bucketed": "aa754f0f13ae2ce868a1f45d",
		},
	}
	for name, p := range goldenPlans() {
		t.Run(name, func(t *testing.T) {
			pl, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			want := golden[pl.Version()]
			if want[name] == "" {
				t.Fatalf("no golden vector for plan %s of version %d", name, pl.Version())
			}
			h := sha256.New()
			for e := range int64(3) {
				ep, _ := pl.Epoch(e)
				for k := range pl.Steps() {
					b, _ := ep.GlobalBatch(nil, k)
					for _, s := range b {
						_ = binary.Write(h, binary.LittleEndian, s.ID)
						_ = binary.Write(h, binary.LittleEndian, s.Pad)
					}
				}
			}
			got := hex.EncodeToString(h.Sum(nil))[:24]
			if got != want[name] {
				t.Errorf("plan %s hashes to %s, want %s: the plan changed; bump PlanVersion", name, got, want[name])
			}
		})
	}
}

// TestPlanGoldenFingerprints pins every golden plan's fingerprint and its
// streams' index content hashes: a refactor that changes either would make
// a running job's resume refused ("the plan changed"). A deliberate change
// comes with a PlanVersion bump and new values here.
func TestPlanGoldenFingerprints(t *testing.T) {
	type pinned struct {
		sum     string
		content map[string]string
	}
	golden := map[int]map[string]pinned{
		1: {
			"shuffle-proportions": {sum: "v1-244f013a0de84af24fc3efa6e23406d9", content: map[string]string{
				"a": "56158dfacba73f4c846c8dcdcbff0f8acc123033516d72226a11678b1d9c11a9",
				"b": "1ffcfdd496804575d366dded16d57f32332051a451e2d135eb7e5e3d7a752a02"}},
			"shuffle-repeat": {sum: "v1-d6c8f6b616bc9beed4bcf106a68f9ed0", content: map[string]string{
				"a": "df04ac9ff078963be437df839111bf8f225c03efc6118c5469844f9e7cb67812",
				"b": "58844a227cbc8084d7c928464a97210de9396d4f39c8dd966b09208e285b7057"}},
			"ordered": {sum: "v1-4e862adf9b8c8e2b409ce432f6ed731a", content: map[string]string{
				"a": "51ed76cd0532087fca60ade3aaba1f97009985992108a7702c521e0968a2bb01"}},
		},
		2: {
			"filtered": {sum: "v2-134cbe99bab7f00179b98476b3ae58ad", content: map[string]string{
				"a": "7d3c5e8e55c6bf48399bf4a410e507e1d983a9938f3d454f5a408858bdac602b",
				"b": "2db9167919e63e9a1054ff838a2efec1aab7494c1466fa0b101c959a5908e963"}},
			"stratified": {sum: "v2-8144287d202d20af943587786d7b61ef", content: map[string]string{
				"a": "5d0bce3e95ea3b1be0e197d31de29d4cfb81c141e8b3a5cb8a3039252891da6b",
				"b": "2db9167919e63e9a1054ff838a2efec1aab7494c1466fa0b101c959a5908e963"}},
			"per_stream": {sum: "v2-028d600185d38bbb6466a7860aa61bd0", content: map[string]string{
				"a": "5d0bce3e95ea3b1be0e197d31de29d4cfb81c141e8b3a5cb8a3039252891da6b",
				"b": "2db9167919e63e9a1054ff838a2efec1aab7494c1466fa0b101c959a5908e963"}},
			"scheduled": {sum: "v2-dda35e7d23f9f347de76c82c70b19775", content: map[string]string{
				"a": "5d0bce3e95ea3b1be0e197d31de29d4cfb81c141e8b3a5cb8a3039252891da6b",
				"b": "2db9167919e63e9a1054ff838a2efec1aab7494c1466fa0b101c959a5908e963"}},
		},
		3: {
			"runs": {sum: "v3-64a574e4340773322e3f5243b37a6e35", content: map[string]string{
				"a": "56158dfacba73f4c846c8dcdcbff0f8acc123033516d72226a11678b1d9c11a9",
				"b": "1ffcfdd496804575d366dded16d57f32332051a451e2d135eb7e5e3d7a752a02"}},
		},
		5: {
			"bucketed": {sum: "v5-f7ebe35cd935273ad610a12443d0fda7", content: map[string]string{
				"a[0]": "5d0bce3e95ea3b1be0e197d31de29d4cfb81c141e8b3a5cb8a3039252891da6b",
				"a[1]": "19dbd8c3c3f564b3c5ff75006f53be5257eeca13329167c237f956329af12e75",
				"b[0]": "ada87c5af0b72e65ed716453de8bac0f2908e5b8a1db4af0f128bfc3b8ba5fc5",
				"b[1]": "1fe88fe07cb34a86a86594b4e70df6266e0b9dea608a277b00bfd2a05d43bfe6"}},
		},
	}
	for name, p := range goldenPlans() {
		t.Run(name, func(t *testing.T) {
			pl, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := golden[pl.Version()]
			if _, pinnedPlan := want[name]; !ok || !pinnedPlan {
				t.Fatalf("no golden fingerprint for plan %s of version %d", name, pl.Version())
			}
			if v := pl.Fingerprint().Version(); v != pl.Version() {
				t.Errorf("fingerprint %s says version %d, the plan is version %d", pl.Fingerprint().Sum, v, pl.Version())
			}
			got := pinned{sum: pl.Fingerprint().Sum, content: map[string]string{}}
			for _, s := range p.Streams {
				got.content[s.Name] = s.Index.ContentHash()
			}
			w := want[name]
			if got.sum != w.sum {
				t.Errorf("fingerprint of %s is %s, want %s: the plan's inputs or their encoding changed; a running job's resume would be refused", name, got.sum, w.sum)
			}
			for s, h := range w.content {
				if got.content[s] != h {
					t.Errorf("stream %s: index content hash %s, want %s", s, got.content[s], h)
				}
			}
			if len(got.content) != len(w.content) {
				t.Errorf("%d streams, %d pinned", len(got.content), len(w.content))
			}
		})
	}
}
