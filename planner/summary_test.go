package planner

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// summarize replaces every stream's shards with what a header says of them.
func summarize(p Params) Params {
	out := p
	out.Streams = append([]Stream(nil), p.Streams...)
	for i, s := range out.Streams {
		x := s.Index
		var maxBytes int64
		for _, sh := range x.Shards {
			if sh.Samples > 0 {
				maxBytes = max(maxBytes, sh.Bytes)
			}
		}
		out.Streams[i].Index = StreamIndex{Snapshot: x.Snapshot, Partitions: x.Partitions,
			Summary: &Summary{Shards: x.Len(), Samples: x.Samples(), Bytes: x.Bytes(), MaxShardBytes: maxBytes, ContentHash: x.ContentHash()}}
	}
	return out
}

// A plan of the indexes' summaries has the fingerprint, counts and steps
// of the plan of their shards, for every weighting and geometry of the
// random order, and no epoch.
func TestAPlanOfSummariesIsThePlanOfTheShardsWithoutEpochs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	planned := 0
	for range 300 {
		p := randomParams(r)
		for i := range p.Streams { // summaries are of unfiltered streams
			p.Streams[i].Index.Filter = ""
		}
		full, err := New(p)
		if err != nil {
			continue
		}
		if _, random := full.order.(*randomOrder); !random {
			continue
		}
		planned++
		sum, err := New(summarize(p))
		if err != nil {
			t.Fatalf("the summaries of a plan's indexes do not plan: %v", err)
		}
		if !sum.Summarized() || full.Summarized() || sum.Fingerprint().Sum != full.Fingerprint().Sum || sum.Total() != full.Total() ||
			sum.Steps() != full.Steps() || sum.SplitLen() != full.SplitLen() || sum.Version() != full.Version() {
			t.Fatalf("summarized: %v %d samples %d steps, full: %v %d samples %d steps", sum.Fingerprint(), sum.Total(), sum.Steps(), full.Fingerprint(), full.Total(), full.Steps())
		}
		var fe *FieldError
		if _, err := sum.Epoch(0); !errors.As(err, &fe) || !strings.Contains(err.Error(), "read the indexes whole") {
			t.Fatalf("the epoch of a summarized plan: %v", err)
		}
		if _, err := sum.MinCacheBytes(1, 2); err == nil {
			t.Fatal("a summarized plan sized a cache")
		}
	}
	if planned < 100 {
		t.Fatalf("%d plans of the random order compared, want 100", planned)
	}
	p := baseParams()
	p.Batching = BatchingPerStream
	if _, err := New(summarize(p)); err == nil || !strings.Contains(err.Error(), "at random only") {
		t.Fatalf("a per-stream plan of summaries: %v", err)
	}
	p = baseParams()
	p.Streams[0].Index = summarize(p).Streams[0].Index
	p.Streams[0].Index.Shards = index(1, 2).Shards
	if _, err := New(p); err == nil || !strings.Contains(err.Error(), "stands for its shards alone") {
		t.Fatalf("a summary with shards: %v", err)
	}
}

// An epoch built for some splits (a pod's) gives, for those splits, the
// samples, batches, needs and cache of the whole epoch, and holds no
// other split's pieces.
func TestAnEpochOfSomeSplitsIsThoseSplitsOfTheWholeEpoch(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	compared := 0
	for range 600 {
		p := randomParams(r)
		pl, err := New(p)
		if err != nil {
			continue
		}
		if _, random := pl.order.(*randomOrder); !random {
			continue
		}
		e := int64(r.IntN(3))
		whole, err := pl.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		pods := []int{1, 2, 3, 4, 6, 8, 12}[r.IntN(7)]
		if p.NumSplits%pods != 0 {
			continue
		}
		pod := r.IntN(pods)
		first, n, err := pl.PodSplits(pod, pods)
		if err != nil {
			t.Fatal(err)
		}
		part, err := pl.EpochOf(e, first, n)
		if err != nil {
			t.Fatal(err)
		}
		compared++
		for k := range pl.Steps() {
			a, errA := whole.SplitsBatch(nil, k, first, n)
			b, errB := part.SplitsBatch(nil, k, first, n)
			if errA != nil || errB != nil || !slices.Equal(a, b) {
				t.Fatalf("step %d of splits [%d, %d): %v %v, whole epoch %v %v", k, first, first+n, b, errB, a, errA)
			}
		}
		if a, b := whole.ShardsNeeded(first, n), part.ShardsNeeded(first, n); !slices.Equal(a, b) {
			t.Fatalf("needs of splits [%d, %d): %v, whole epoch %v", first, first+n, b, a)
		}
		// Sized a few at a time, as a sidecar reading its entries as it goes
		// does, the needs without their bytes are the needs.
		ahead := part.ShardsAhead(first, n)
		z, run := pl.NeedSizer(), 1+r.IntN(4)
		for i := 0; i < len(ahead); i += run {
			z.Size(ahead[i:min(i+run, len(ahead))])
		}
		if a := whole.ShardsNeeded(first, n); !slices.Equal(a, ahead) {
			t.Fatalf("needs of splits [%d, %d) sized %d at a time: %v, whole epoch %v", first, first+n, run, ahead, a)
		}
		if a, b := whole.rangeCacheBytes(first, n), part.rangeCacheBytes(first, n); a != b {
			t.Fatalf("cache of splits [%d, %d): %d, whole epoch %d", first, first+n, b, a)
		}
		w, pt := randomOf(whole), randomOf(part)
		if held := int64(len(pt.pieces)); held != w.pieceOff[first+n]-w.pieceOff[first] {
			t.Fatalf("the partial epoch holds %d pieces, its splits have %d", held, w.pieceOff[first+n]-w.pieceOff[first])
		}
		if pods > 1 {
			if _, err := part.GlobalBatch(nil, 0); err == nil || !strings.Contains(err.Error(), "EpochOf") {
				t.Fatalf("a global batch of a partial epoch: %v", err)
			}
			if _, err := part.MinCacheBytes(pods, 1); err == nil {
				t.Fatal("a partial epoch sized every pod's cache")
			}
			other := (pod + 1) % pods * n
			if _, err := part.SplitsBatch(nil, 0, other, n); err == nil {
				t.Fatalf("splits [%d, %d) of an epoch of [%d, %d)", other, other+n, first, first+n)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatalf("At(%d) of an epoch of splits [%d, %d) did not panic", other, first, first+n)
					}
				}()
				part.At(other, 0)
			}()
		}
	}
	if compared < 100 {
		t.Fatalf("%d epochs compared, want 100", compared)
	}
}

// sliceCounts are ShardCounts over a slice of shards.
type sliceCounts []Shard

func (c sliceCounts) Samples(h int64) int64 { return c[h].Samples }
func (c sliceCounts) Shard(h int64) Shard   { return c[h] }

// A plan of summaries with their shards' counts (a compact index's
// column) is the plan of the shards: the same fingerprint and, epoch by
// epoch, the same batches, needs and cache, whole or a pod's.
func TestAPlanOfCountsIsThePlanOfTheShards(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	compared := 0
	for range 600 {
		p := randomParams(r)
		for i := range p.Streams {
			p.Streams[i].Index.Filter = ""
		}
		full, err := New(p)
		if err != nil {
			continue
		}
		if _, random := full.order.(*randomOrder); !random {
			continue
		}
		lean := summarize(p)
		for i := range lean.Streams {
			lean.Streams[i].Index.Counts = sliceCounts(p.Streams[i].Index.Shards)
		}
		pl, err := New(lean)
		if err != nil {
			t.Fatalf("a plan of counts: %v", err)
		}
		if pl.Summarized() || pl.Fingerprint().Sum != full.Fingerprint().Sum || pl.Steps() != full.Steps() {
			t.Fatalf("counts: %v, %d steps; shards: %v, %d steps", pl.Fingerprint().Sum, pl.Steps(), full.Fingerprint().Sum, full.Steps())
		}
		compared++
		e := int64(r.IntN(3))
		a, err := full.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pl.Epoch(e)
		if err != nil {
			t.Fatal(err)
		}
		S := p.NumSplits
		for k := range pl.Steps() {
			x, _ := a.GlobalBatch(nil, k)
			y, err := b.GlobalBatch(nil, k)
			if err != nil || !slices.Equal(x, y) {
				t.Fatalf("step %d: %v %v, of the shards %v", k, y, err, x)
			}
		}
		if x, y := a.ShardsNeeded(0, S), b.ShardsNeeded(0, S); !slices.Equal(x, y) {
			t.Fatalf("needs %v, of the shards %v", y, x)
		}
		x, _ := a.MinCacheBytes(1, 2)
		y, err := b.MinCacheBytes(1, 2)
		if err != nil || x != y {
			t.Fatalf("cache %d %v, of the shards %d", y, err, x)
		}
	}
	if compared < 100 {
		t.Fatalf("%d plans compared, want 100", compared)
	}
	// Counts that do not add up to the summary are refused.
	p := summarize(baseParams())
	p.Streams[0].Index.Counts = sliceCounts(index(100, 100, 99).Shards)
	if _, err := New(p); err == nil || !strings.Contains(err.Error(), "add to 299, its index says 300") {
		t.Fatalf("counts short of the summary: %v", err)
	}
}

// The first sample of a shard of counts, from every 64th shard's and the
// counts between, is the running sum's, past many blocks of 64.
func TestSparseFirstIsTheRunningSum(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var shards []int64
	for range 1000 {
		shards = append(shards, int64(r.IntN(50)))
	}
	x := index(shards...)
	sf := newSparseFirst(sliceCounts(x.Shards), int64(len(shards)))
	var n int64
	for h, c := range shards {
		if got := sf.first(int64(h)); got != n {
			t.Fatalf("first(%d) = %d, want %d", h, got, n)
		}
		n += c
	}
}
