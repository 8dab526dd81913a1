package planner

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// bigParams is the plan of the benchmarks: samples in shards of equal size
// over two streams, 4096 splits, shuffled in blocks of 256Ki samples.
func bigParams(samples, shards int64) Params {
	per := samples / shards
	mk := func(n int64) StreamIndex {
		x := StreamIndex{Shards: make([]Shard, n)}
		for i := range x.Shards {
			x.Shards[i] = Shard{Name: fmt.Sprintf("shard.%07d.mds", i), Samples: per, Bytes: per * 2048, Hash: "xxh64:0"}
		}
		return x
	}
	return Params{
		Streams: []Stream{
			{Name: "web", Index: mk(shards * 3 / 4), Proportion: "0.7"},
			{Name: "code", Index: mk(shards / 4), Proportion: "0.3"},
		},
		Seed: 17, NumSplits: 4096, Shuffle: true, BlockSize: 1 << 18, GlobalBatchSize: 4096 * 4, DropLast: true,
	}
}

// BenchmarkPlanBuild builds the epoch plan of 1e6 to 1e10 samples (in shards
// of 1e4 samples): time and memory against the number of samples.
func BenchmarkPlanBuild(b *testing.B) {
	for _, size := range []struct{ samples, shards int64 }{{1e6, 1e2}, {1e7, 1e3}, {1e8, 1e4}, {1e9, 1e5}, {1e10, 1e6}} {
		b.Run(fmt.Sprintf("samples=%.0e/shards=%.0e", float64(size.samples), float64(size.shards)), func(b *testing.B) {
			benchBuild(b, bigParams(size.samples, size.shards))
		})
	}
}

// benchBuild builds p's plan and an epoch of it per iteration. B/op is the
// plan's memory: everything it allocates, it keeps.
func benchBuild(b *testing.B, p Params) {
	b.ReportAllocs()
	var ep *EpochPlan
	for i := 0; b.Loop(); i++ {
		pl, err := New(p)
		if err != nil {
			b.Fatal(err)
		}
		if ep, err = pl.Epoch(int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(ep)
}

// bigEpoch is epoch 3 of the plan of 1e10 samples in 1e6 shards.
func bigEpoch(b *testing.B) (*Plan, *EpochPlan) {
	b.Helper()
	pl, err := New(bigParams(1e10, 1e6))
	if err != nil {
		b.Fatal(err)
	}
	ep, err := pl.Epoch(3)
	if err != nil {
		b.Fatal(err)
	}
	return pl, ep
}

// BenchmarkPlanSeek maps random positions of random splits to samples.
func BenchmarkPlanSeek(b *testing.B) {
	pl, ep := bigEpoch(b)
	r := rand.New(rand.NewPCG(1, 1))
	pos := make([]int64, 1<<16)
	split := make([]int, len(pos))
	for i := range pos {
		pos[i], split[i] = r.Int64N(pl.SplitLen()), r.IntN(pl.NumSplits())
	}
	b.ReportAllocs()
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += ep.At(split[i&(len(pos)-1)], pos[i&(len(pos)-1)]).ID
	}
	runtime.KeepAlive(sink)
}

// BenchmarkPlanSequential reads one split in order, as a sidecar does.
func BenchmarkPlanSequential(b *testing.B) {
	pl, ep := bigEpoch(b)
	b.ReportAllocs()
	var sink int64
	for i := int64(0); b.Loop(); i++ {
		sink += ep.At(17, i%pl.SplitLen()).ID
	}
	runtime.KeepAlive(sink)
}

// BenchmarkMaterializedPermutation is the baseline: a shuffled array of every
// sample index, what loaders that materialise their epoch order hold
// (MosaicML Streaming keeps per-sample arrays of this kind), at a size this
// machine holds.
func BenchmarkMaterializedPermutation(b *testing.B) {
	const n = 1e8
	build := func(size int) []int64 {
		r := rand.New(rand.NewPCG(1, 2))
		perm := make([]int64, size)
		for i := range perm {
			perm[i] = int64(i)
		}
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		return perm
	}
	for _, size := range []int{1e6, 1e7, 1e8} {
		b.Run(fmt.Sprintf("build/samples=%.0e", float64(size)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				runtime.KeepAlive(build(size))
			}
		})
	}
	b.Run("seek/samples=1e+08", func(b *testing.B) {
		perm := build(n)
		r := rand.New(rand.NewPCG(1, 1))
		pos := make([]int64, 1<<16)
		for i := range pos {
			pos[i] = r.Int64N(n)
		}
		b.ResetTimer()
		var sink int64
		for i := 0; b.Loop(); i++ {
			sink += perm[pos[i&(len(pos)-1)]]
		}
		runtime.KeepAlive(sink)
	})
}

// scheduledParams is bigParams with what issue 24 adds: a filter on the
// web stream (per-shard matching counts in the index: 60–100 %), stratified
// batching and a 3-phase schedule (a ramp-up, a curriculum, a skip).
func scheduledParams(samples, shards int64) Params {
	p := bigParams(samples, shards)
	web := &p.Streams[0].Index
	web.Filter = "sha256:bench"
	for i := range web.Shards {
		web.Shards[i].Samples = web.Shards[i].Samples * int64(60+i%41) / 100
	}
	p.Batching = BatchingStratified
	p.Schedule = &Schedule{Phases: []Phase{
		{StartStep: 0, GlobalBatchSize: 4096},
		{StartStep: 20_000, GlobalBatchSize: 4096 * 4, Proportions: map[string]string{"web": "0.5", "code": "0.5"}},
		{StartStep: 50_000, SkipSteps: 300},
	}}
	return p
}

// BenchmarkPlanBuildScheduled builds the plan of 1e10 samples in 1e6 shards
// with a filter, stratified batching and a 3-phase schedule, and its first
// batch of one split (which builds each stream's first pass): the planner
// benchmark of issue 24 (under 1 s and 100 MB).
func BenchmarkPlanBuildScheduled(b *testing.B) {
	p := scheduledParams(1e10, 1e6)
	b.ReportAllocs()
	var sink []Sample
	for b.Loop() {
		pl, err := New(p)
		if err != nil {
			b.Fatal(err)
		}
		ep, err := pl.Epoch(0)
		if err != nil {
			b.Fatal(err)
		}
		if sink, err = ep.SplitsBatch(sink[:0], 0, 0, 1); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(sink)
}

// BenchmarkPlanBuildStratified is BenchmarkPlanBuild's largest plan with
// stratified batching: what cutting each stream on its own costs.
func BenchmarkPlanBuildStratified(b *testing.B) {
	p := bigParams(1e10, 1e6)
	p.Batching = BatchingStratified
	benchBuild(b, p)
}

// BenchmarkPlanSeekScheduled maps random positions of random splits at
// random steps of every phase (within the first passes) to samples: a
// resume's seek.
func BenchmarkPlanSeekScheduled(b *testing.B) {
	pl, err := New(scheduledParams(1e10, 1e6))
	if err != nil {
		b.Fatal(err)
	}
	sc := scheduleOf(pl)
	r := rand.New(rand.NewPCG(1, 1))
	steps := make([]int64, 1<<12)
	split := make([]int, len(steps))
	for i := range steps {
		steps[i], split[i] = r.Int64N(100_000), r.IntN(pl.NumSplits())
	}
	b.ReportAllocs()
	var sink int64
	for i := 0; b.Loop(); i++ {
		sink += sc.sample(steps[i&(len(steps)-1)], split[i&(len(steps)-1)], 0).ID
	}
	runtime.KeepAlive(sink)
}

// BenchmarkPlanBuildPacked is BenchmarkPlanBuild's largest plan packed
// (spec.packing): 1e10 packs in 1e6 shards, each shard's count its own,
// as shardfeed index counts them. Packs are samples, so the plan costs
// what any plan of as many samples does.
func BenchmarkPlanBuildPacked(b *testing.B) {
	p := bigParams(1e10, 1e6)
	r := rand.New(rand.NewPCG(54, 4))
	for s := range p.Streams {
		x := &p.Streams[s].Index
		for h := range x.Shards {
			x.Shards[h].Samples += r.Int64N(200) - 100
		}
		x.Packing = "tokens: bestFit length=4096 window=1024 overlong=cut"
	}
	benchBuild(b, p)
}

// BenchmarkPlanBuildBucketed is BenchmarkPlanBuild's largest plan bucketed
// (spec.bucketing) in 4 buckets, each shard's rows spread over them at
// random: a plan per bucket, each over every shard.
func BenchmarkPlanBuildBucketed(b *testing.B) {
	base := bigParams(1e10, 1e6)
	r := rand.New(rand.NewPCG(54, 5))
	const B = 4
	p := base
	p.Streams = nil
	p.Bucketing = &Bucketing{Buckets: B}
	for k := range B {
		p.Bucketing.Labels = append(p.Bucketing.Labels, fmt.Sprint("bucket ", k))
	}
	for _, st := range base.Streams {
		p.Bucketing.Streams = append(p.Bucketing.Streams, st.Name)
		lanes := make([]Stream, B)
		for k := range lanes {
			lanes[k] = st
			lanes[k].Name = fmt.Sprintf("%s[%d]", st.Name, k)
			lanes[k].Index.Shards = make([]Shard, len(st.Index.Shards))
			lanes[k].Index.Filter = fmt.Sprint("sha256:bucket", k)
		}
		for h, sh := range st.Index.Shards {
			left := sh.Samples
			for k := range lanes {
				n := left
				if k < B-1 {
					n = min(left, sh.Samples/B+r.Int64N(200)-100)
				}
				lanes[k].Index.Shards[h] = sh
				lanes[k].Index.Shards[h].Samples = n
				left -= n
			}
		}
		p.Streams = append(p.Streams, lanes...)
	}
	benchBuild(b, p)
}

// BenchmarkEpochOfAPod builds epoch e of the plan of 1e10 samples in 1e6
// shards for one pod of 1024 (EpochOf) and whole (Epoch): time and the
// memory each keeps.
func BenchmarkEpochOfAPod(b *testing.B) {
	pl, err := New(bigParams(1e10, 1e6))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		build func(e int64) (*EpochPlan, error)
	}{
		{"whole", pl.Epoch},
		{"pod=512of1024", func(e int64) (*EpochPlan, error) {
			first, n, err := pl.PodSplits(512, 1024)
			if err != nil {
				return nil, err
			}
			return pl.EpochOf(e, first, n)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var ep *EpochPlan
			for i := 0; b.Loop(); i++ {
				if ep, err = c.build(int64(i)); err != nil {
					b.Fatal(err)
				}
			}
			runtime.KeepAlive(ep)
		})
	}
}
