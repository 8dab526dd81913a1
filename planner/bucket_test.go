package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// bucketedParams draws a bucketed dataset of numSplits 12: 1–3 streams of
// 1–6 shards, each shard's rows spread over B buckets at random (a bucket
// may be empty in a shard, a stream or everywhere), random weights that
// draw each row at most once (none, or choose at most the stream), random
// batching, shuffle and dropLast.
func bucketedParams(r *rand.Rand) Params {
	B := 1 + r.IntN(4)
	p := Params{Seed: r.Uint64(), NumSplits: 12, GlobalBatchSize: int64(12 * (1 + r.IntN(2))), Shuffle: r.IntN(4) != 0, BlockSize: int64(1 + r.IntN(20)),
		Batching: []Batching{BatchingRandom, BatchingStratified, BatchingPerStream}[r.IntN(3)], DropLast: r.IntN(2) == 0,
		Bucketing: &Bucketing{Buckets: B}}
	sized := r.IntN(2) == 0 // a batch size per bucket
	for b := range B {
		p.Bucketing.Labels = append(p.Bucketing.Labels, fmt.Sprint("bucket ", b))
		if sized {
			p.Bucketing.BatchSizes = append(p.Bucketing.BatchSizes, int64(12*(1+r.IntN(3))))
		}
	}
	for s := range 1 + r.IntN(3) {
		name := fmt.Sprint("s", s)
		p.Bucketing.Streams = append(p.Bucketing.Streams, name)
		shards := 1 + r.IntN(6)
		lanes := make([]Stream, B)
		var rows int64
		for b := range lanes {
			lanes[b] = Stream{Name: fmt.Sprintf("%s[%d]", name, b), Index: StreamIndex{Filter: fmt.Sprint("sha256:bucket", b)}}
			skew := r.IntN(6) == 0 // a bucket that holds few rows
			for h := range shards {
				n := int64(r.IntN(150))
				if skew {
					n /= 10
				}
				rows += n
				lanes[b].Index.Shards = append(lanes[b].Index.Shards, Shard{Name: fmt.Sprint("part-", h), Samples: n, Bytes: int64(1000 + h), Hash: "xxh64:0"})
			}
		}
		if r.IntN(3) == 0 && rows > 1 {
			c := 1 + r.Int64N(rows-1)
			for b := range lanes {
				lanes[b].Choose = c
			}
		}
		p.Streams = append(p.Streams, lanes...)
	}
	return p
}

// TestBucketedPlansKeepEveryGuarantee: bucketed plans at every world size
// dividing numSplits 12, resumed at a random step onto another: the same
// global batches, G/W rows a rank a step, every global batch from one
// bucket, each row at most once an epoch and exactly the rows the epoch
// does not count as dropped, each bucket's batches spread over the epoch
// in its share, and the pods' needs and caches covering what they read.
func TestBucketedPlansKeepEveryGuarantee(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 54))
	worlds := []int{1, 2, 3, 4, 6, 12}
	planned, refused := 0, 0
	for trial := range 150 {
		p := bucketedParams(r)
		pl, err := New(p)
		if err != nil {
			if !strings.Contains(err.Error(), "spec.") {
				t.Fatalf("trial %d: an error that names no field: %v", trial, err)
			}
			refused++
			if testing.Verbose() {
				t.Logf("trial %d refused: %v", trial, err)
			}
			continue
		}
		planned++
		if pl.Version() != 5 {
			t.Fatalf("trial %d: a bucketed plan of version %d", trial, pl.Version())
		}
		B := p.Bucketing.Buckets
		W1, W2 := worlds[r.IntN(6)], worlds[r.IntN(6)]
		epoch := int64(r.IntN(3))
		ep := must(pl.Epoch(epoch))
		resume := r.Int64N(pl.Steps() + 1)
		seen := map[int64]bool{}
		delivered := int64(0)
		var order strings.Builder
		perBucket := make([]int64, B)
		for k := range pl.Steps() {
			W := W1
			if k >= resume {
				W = W2
			}
			var got []int64
			bucket := -1
			for rank := range W {
				local := must(ep.LocalBatch(nil, k, rank, W))
				if int64(len(local)) != ep.BatchSize(k)/int64(W) {
					t.Fatalf("trial %d step %d rank %d of %d: %d rows, want %d", trial, k, rank, W, len(local), ep.BatchSize(k)/int64(W))
				}
				for _, smp := range local {
					got = append(got, smp.ID)
					if b := smp.Stream % B; bucket < 0 {
						bucket = b
					} else if b != bucket {
						t.Fatalf("trial %d step %d: rows of buckets %d and %d in one global batch", trial, k, bucket, b)
					}
					lane := p.Streams[smp.Stream]
					if off := pl.StreamOffset(smp.Stream); smp.ID < off || smp.ID >= off+lane.Index.Samples() {
						t.Fatalf("trial %d: sample %d of lane %d outside its ids", trial, smp.ID, smp.Stream)
					}
					if smp.Pad {
						continue
					}
					if seen[smp.ID] {
						t.Fatalf("trial %d: row %d delivered twice in epoch %d", trial, smp.ID, epoch)
					}
					seen[smp.ID] = true
					delivered++
				}
			}
			fmt.Fprint(&order, bucket)
			perBucket[bucket]++
			if g := p.Bucketing.batchSize(bucket, p.GlobalBatchSize); ep.BatchSize(k) != g {
				t.Fatalf("trial %d step %d: a batch of %d samples from bucket %d, whose batch size is %d", trial, k, ep.BatchSize(k), bucket, g)
			}
			slices.Sort(got)
			if want := sortedIDs(must(ep.GlobalBatch(nil, k))); !slices.Equal(got, want) {
				t.Fatalf("trial %d step %d (W %d → %d at %d): the ranks' rows are not the global batch", trial, k, W1, W2, resume)
			}
		}
		if want := pl.Total() - pl.DroppedPerEpoch(); delivered != want {
			t.Fatalf("trial %d: %d rows delivered in epoch %d, want the %d of the epoch less the %d it drops", trial, delivered, epoch, pl.Total(), pl.DroppedPerEpoch())
		}
		// Each bucket in its share of every prefix of the epoch, within a
		// window of batches.
		seq := order.String()
		for b := range B {
			for k := range len(seq) {
				n := int64(strings.Count(seq[:k], fmt.Sprint(b)))
				if share := perBucket[b] * int64(k) / pl.Steps(); n < share-bucketWindow-1 || n > share+bucketWindow+1 {
					t.Fatalf("trial %d: bucket %d has %d of the first %d batches, its share is %d", trial, b, n, k, share)
				}
			}
		}
		// A split's positions are its steps' samples in order, each step
		// at its batch size.
		j := r.IntN(p.NumSplits)
		var pos int64
		for k := range pl.Steps() {
			for _, want := range must(ep.SplitsBatch(nil, k, j, 1)) {
				if got := ep.At(j, pos); got != want {
					t.Fatalf("trial %d: split %d position %d (step %d) is %+v, its step has %+v", trial, j, pos, k, got, want)
				}
				pos++
			}
		}
		counts := ep.BatchSizeCounts(0)
		var steps int64
		for _, c := range counts {
			steps += c.Steps
		}
		if steps != pl.Steps() || (p.Bucketing.BatchSizes == nil) != (pl.BatchSizes() != nil) {
			t.Fatalf("trial %d: batch size counts %v for %d steps, runs %v", trial, counts, pl.Steps(), pl.BatchSizes())
		}
		checkPodsCover(t, ep)
		// A shard is fetched at most once per bucket it holds rows of, and
		// each pod boundary cuts one shard of each bucket's lanes.
		for _, P := range []int{2, 3, 12} {
			e := must(ep.Egress(P))
			var bound int64
			for s := range p.Bucketing.Streams {
				var largest int64
				for h, sh := range p.Streams[s*B].Index.Shards {
					for b := range B {
						if p.Streams[s*B+b].Index.Shards[h].Samples > 0 {
							bound += sh.Bytes
							largest = max(largest, sh.Bytes)
						}
					}
				}
				bound += int64(P-1) * int64(B) * largest
			}
			if e.FetchedBytes > bound {
				t.Fatalf("trial %d: %d pods fetch %d bytes, more than each shard once per bucket it holds plus a shard of each lane per pod boundary (%d)", trial, P, e.FetchedBytes, bound)
			}
		}
	}
	if planned < 90 || refused == 0 {
		t.Fatalf("%d of 150 random bucketed datasets planned, %d refused", planned, refused)
	}
}

// TestBucketOrderIsSeededPerEpoch: the buckets' order differs between
// epochs and seeds, and is the same for the same seed and epoch.
func TestBucketOrderIsSeededPerEpoch(t *testing.T) {
	p := Params{NumSplits: 2, GlobalBatchSize: 2, DropLast: true, Bucketing: &Bucketing{Buckets: 2, Streams: []string{"a"}, Labels: []string{"short", "long"}},
		Streams: []Stream{{Name: "a[0]", Index: filteredIndex("sha256:b0", 100, 100)}, {Name: "a[1]", Index: filteredIndex("sha256:b1", 100, 100)}}}
	orderOf := func(seed uint64, e int64) string {
		p.Seed = seed
		pl := must(New(p))
		ep := must(pl.Epoch(e))
		var b strings.Builder
		for k := range pl.Steps() {
			fmt.Fprint(&b, must(ep.GlobalBatch(nil, k))[0].Stream)
		}
		return b.String()
	}
	a := orderOf(1, 0)
	if strings.Count(a, "0") != 100 || strings.Count(a, "1") != 100 {
		t.Fatalf("order %s: want 100 batches of each bucket", a)
	}
	if a == strings.Repeat("01", 100) || a != orderOf(1, 0) || a == orderOf(1, 1) || a == orderOf(2, 0) {
		t.Fatalf("bucket orders: seed 1 epoch 0 %s (twice: %s), epoch 1 %s, seed 2 %s", a, orderOf(1, 0), orderOf(1, 1), orderOf(2, 0))
	}
}

// TestBucketingIsRefusedClearly: what a bucketed plan cannot be is
// refused naming the field and the fix.
func TestBucketingIsRefusedClearly(t *testing.T) {
	base := func() Params {
		return Params{NumSplits: 2, GlobalBatchSize: 8, DropLast: true, Bucketing: &Bucketing{Buckets: 2, Streams: []string{"a"}, Labels: []string{"length below 10", "length at least 10"}},
			Streams: []Stream{{Name: "a[0]", Index: filteredIndex("sha256:b0", 100, 100)}, {Name: "a[1]", Index: filteredIndex("sha256:b1", 3, 4)}}}
	}
	for _, tc := range []struct {
		name string
		edit func(p *Params)
		want string
	}{
		{"a bucket smaller than a batch", func(*Params) {}, "spec.bucketing: bucket 1 (length at least 10) has 7 samples per epoch, fewer than one global batch (8)"},
		{"a schedule and batch sizes", func(p *Params) {
			p.Streams[1].Index = filteredIndex("sha256:b1", 30, 40)
			p.Schedule, p.Bucketing.BatchSizes = &Schedule{}, []int64{8, 8}
		}, "drop spec.bucketing.batchSizes (or budget), or spec.schedule"},
		{"a curriculum that leaves a bucket no stream", func(p *Params) {
			p.Streams = append(p.Streams, Stream{Name: "b[0]", Index: filteredIndex("sha256:c0", 50, 50)}, Stream{Name: "b[1]", Index: filteredIndex("sha256:c1", 0, 0)})
			p.Streams[1].Index = filteredIndex("sha256:b1", 30, 40)
			p.Bucketing.Streams = []string{"a", "b"}
			p.Schedule = &Schedule{Phases: []Phase{{StartStep: 3, Proportions: map[string]string{"a": "0", "b": "1"}}}}
		}, "spec.schedule: bucket 1 (length at least 10)"},
		{"too many buckets", func(p *Params) { p.Bucketing.Buckets = 65 }, "65 buckets: from 1 to 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.edit(&p)
			_, err := New(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Phases that change the batch size and the proportions plan.
	p := base()
	p.Streams[1].Index = filteredIndex("sha256:b1", 30, 40)
	p.Schedule = &Schedule{Phases: []Phase{{StartStep: 3, GlobalBatchSize: 16}, {StartStep: 5, Proportions: map[string]string{"a": "1"}}}}
	if _, err := New(p); err != nil {
		t.Fatalf("a bucketed schedule: %v", err)
	}
	// An empty bucket has no batch; the others plan.
	p = base()
	p.Streams[1].Index = filteredIndex("sha256:b1", 0, 0)
	if pl, err := New(p); err != nil || pl.Steps() != 25 {
		t.Fatalf("an empty bucket: %v", err)
	}
}

// TestScheduledBucketedPlansKeepEveryGuarantee: bucketed plans with a
// schedule of batch-size ramp-ups, curricula, skips and repeats, over global steps past an
// epoch, at every world size dividing numSplits 12 with a resume onto
// another: the same global batches, BatchSize/W rows a rank, one bucket a
// global batch, each step at the batch size and in the phase the schedule
// gives its global step, a repeat replaying its steps, each split drawing
// each lane pass after pass (no row twice in a pass, skipped data
// included), and the pods' needs and caches covering what they
// read in the epochs that size the cache.
func TestScheduledBucketedPlansKeepEveryGuarantee(t *testing.T) {
	r := rand.New(rand.NewPCG(38, 54))
	worlds := []int{1, 2, 3, 4, 6, 12}
	planned := 0
	for trial := range 120 {
		p := bucketedParams(r)
		if p.Batching == BatchingPerStream {
			p.Batching = BatchingStratified
		}
		p.Bucketing.BatchSizes = nil
		K := int64(4 + r.IntN(20)) // about an epoch's steps
		var phases []Phase
		for a := int64(r.IntN(3)); len(phases) < 5; a += 1 + r.Int64N(K) {
			ph := Phase{StartStep: a}
			switch kind := r.IntN(5); {
			case kind == 0 && a > 0: // a loss spike's data skipped
				ph.SkipSteps = 1 + r.Int64N(3)
			case kind == 1 && a > 0: // replayed
				ph.RepeatSteps = 1 + r.Int64N(min(a, 3))
				a += ph.RepeatSteps
			case kind < 3:
				ph.GlobalBatchSize = int64(12 * (1 + r.IntN(3)))
			default:
				ph.Proportions = map[string]string{}
				for _, name := range p.Bucketing.Streams {
					ph.Proportions[name] = []string{"1", "2", "0.5"}[r.IntN(3)]
				}
			}
			phases = append(phases, ph)
		}
		p.Schedule = &Schedule{Phases: phases}
		pl, err := New(p)
		if err != nil {
			continue
		}
		planned++
		B := p.Bucketing.Buckets
		horizon := pl.Steps() + r.Int64N(pl.Steps()+1)
		W1, W2, resume := worlds[r.IntN(6)], worlds[r.IntN(6)], r.Int64N(horizon)
		seq := map[[2]int][]int64{} // (split, lane) → its draws in order, skipped ones too
		for g := range horizon {
			ep := must(pl.Epoch(g / pl.Steps()))
			k := g % pl.Steps()
			// The phase and batch size the schedule gives step g: a
			// repeated step's are those of the step it replays.
			want, replays, repeated := -1, g, false
			for i, ph := range phases {
				if ph.StartStep <= g {
					want = i
				}
			}
			for again := true; again; {
				again = false
				for _, ph := range phases {
					if ph.RepeatSteps > 0 && replays >= ph.StartStep && replays < ph.StartStep+ph.RepeatSteps {
						replays, repeated, again = replays-ph.RepeatSteps, true, true
					}
				}
			}
			size := p.GlobalBatchSize
			for _, ph := range phases {
				if ph.StartStep <= replays && ph.GlobalBatchSize > 0 {
					size = ph.GlobalBatchSize
				}
			}
			if ph, rep := ep.Phase(k); ph != want || rep != repeated || ep.BatchSize(k) != size {
				t.Fatalf("trial %d step %d: phase %d (repeated %v) at batch size %d, the schedule gives phase %d (%v) at %d", trial, g, ph, rep, ep.BatchSize(k), want, repeated, size)
			}
			if repeated {
				if got, want := sortedIDs(must(ep.GlobalBatch(nil, k))), sortedIDs(globalBatchAt(t, pl, replays)); !slices.Equal(got, want) {
					t.Fatalf("trial %d: step %d does not replay step %d", trial, g, replays)
				}
			}
			// The data a skip drew at this step, never delivered: in each
			// split's draws before the step's.
			for _, sk := range pl.Skips() {
				if sk.At != g {
					continue
				}
				for m := range sk.Steps {
					for q, smp := range pl.SkippedBatch(nil, sk, m) {
						if !smp.Skipped {
							t.Fatalf("trial %d: skipped data not marked", trial)
						}
						key := [2]int{q % p.NumSplits, smp.Stream}
						seq[key] = append(seq[key], smp.ID)
					}
				}
			}
			W := W1
			if g >= resume {
				W = W2
			}
			var got []int64
			bucket := -1
			for rank := range W {
				local := must(ep.LocalBatch(nil, k, rank, W))
				if int64(len(local)) != size/int64(W) {
					t.Fatalf("trial %d step %d rank %d of %d: %d rows, want %d", trial, g, rank, W, len(local), size/int64(W))
				}
				for _, smp := range local {
					got = append(got, smp.ID)
					if b := smp.Stream % B; bucket < 0 {
						bucket = b
					} else if b != bucket {
						t.Fatalf("trial %d step %d: rows of buckets %d and %d in one global batch", trial, g, bucket, b)
					}
				}
			}
			slices.Sort(got)
			if want := sortedIDs(must(ep.GlobalBatch(nil, k))); !slices.Equal(got, want) {
				t.Fatalf("trial %d step %d (W %d → %d at %d): the ranks' rows are not the global batch", trial, g, W1, W2, resume)
			}
			for j := range p.NumSplits {
				for _, smp := range must(ep.SplitsBatch(nil, k, j, 1)) {
					if smp.Repeated != repeated {
						t.Fatalf("trial %d step %d: a sample marked repeated %v", trial, g, smp.Repeated)
					}
					if !repeated { // a replay draws nothing new
						seq[[2]int{j, smp.Stream}] = append(seq[[2]int{j, smp.Stream}], smp.ID)
					}
				}
			}
		}
		// Each split draws each lane pass after pass: a pass (the lane's
		// size div S rows a split) holds no row twice.
		for key, ids := range seq {
			pass := p.Streams[key[1]].Index.Samples() / int64(p.NumSplits)
			for from := int64(0); from < int64(len(ids)); from += pass {
				chunk := slices.Clone(ids[from:min(from+pass, int64(len(ids)))])
				slices.Sort(chunk)
				if len(slices.Compact(chunk)) != len(chunk) {
					t.Fatalf("trial %d: split %d draws a row of lane %d twice in one pass of %d: %v", trial, key[0], key[1], pass, ids[from:min(from+pass, int64(len(ids)))])
				}
			}
		}
		for _, e := range pl.CacheEpochs() {
			if e*pl.Steps() < horizon+pl.Steps() {
				checkPodsCover(t, must(pl.Epoch(e)))
			}
		}
	}
	if planned < 60 {
		t.Fatalf("only %d of 120 random scheduled bucketed datasets planned", planned)
	}
}
