package planner

import "fmt"

// An order is how a plan orders the samples of its epochs (docs/planner.md):
// one implementation per kind, picked once by newOrder. Nothing else asks
// which kind a plan has: a new order (packing, bucketing, an evaluation
// order) is one new file that implements order and epochOrder, plus its
// case in newOrder.
//
// Today's orders:
//   - randomOrder (random.go's permutations, epoch.go): the streams cut
//     together into the splits, batched at random;
//   - lanes (lanes.go): each stream cut on its own, stratified or
//     per_stream batching;
//   - schedule (schedule*.go): passes of each stream over training steps,
//     with phases that change the mix and the batch size;
//   - buckets (bucket.go): a plan per bucket, every global batch from one;
//     with a schedule (bucket_schedule.go), each bucket's plan a schedule
//     and the global steps the buckets' data steps. What both bucketing
//     and a schedule select is that composition, not a check in either.
type order interface {
	// epoch builds the order of epoch e (e >= 0).
	epoch(e int64) (epochOrder, error)
	// dropped and padded are Plan.DroppedPerEpoch and Plan.PaddedPerEpoch.
	dropped() int64
	padded() int64
	// skips, cacheEpochs and batchSizes are Plan.Skips, Plan.CacheEpochs
	// and Plan.BatchSizes.
	skips() []Skip
	cacheEpochs() []int64
	batchSizes() []SizeRun
}

// epochOrder is the order of one epoch.
type epochOrder interface {
	// at is EpochPlan.At.
	at(j int, t int64) Sample
	// batch appends step k's samples of splits [first, first+n),
	// position-major; k and the splits are checked.
	batch(dst []Sample, k int64, first, n int) []Sample
	// needs is EpochPlan.ShardsNeeded; unsized, without the needs' bytes
	// (EpochPlan.ShardsAhead).
	needs(first, n int, sized bool) []ShardNeed
	// cacheBytes is the cache splits [first, first+n) need so that no
	// shard is fetched twice, without the prefetch (EpochPlan.MinCacheBytes).
	cacheBytes(first, n int) int64
	// batchSize and phase are EpochPlan.BatchSize and EpochPlan.Phase.
	batchSize(k int64) int64
	phase(k int64) (int, bool)
}

// orderKind is one kind of order: when it serves a plan, and how to build
// it (in the order's own file).
type orderKind interface {
	selects(p *Params) bool
	cut(pl *Plan) (order, error)
}

// orders are the kinds of order, tried in turn: the first that selects the
// parameters builds the plan's order.
var orders = []orderKind{scheduledBucketKind{}, bucketKind{}, scheduleKind{}, laneKind{}, randomKind{}}

// newOrder builds the order of a plan whose epoch geometry (counts, split
// length, steps) is set; an order may change the split length and steps.
func newOrder(pl *Plan) (order, error) {
	for _, k := range orders {
		if k.selects(&pl.params) {
			return k.cut(pl)
		}
	}
	return nil, fmt.Errorf("planner: internal error: no order selects the parameters")
}

// steady is what an order without a schedule shares: one batch size, no
// phases, no skips; epoch 0 sizes the cache of every epoch.
type steady struct{ pl *Plan }

func (s steady) skips() []Skip           { return nil }
func (s steady) cacheEpochs() []int64    { return []int64{0} }
func (s steady) batchSizes() []SizeRun   { return []SizeRun{{0, s.pl.params.GlobalBatchSize}} }
func (s steady) batchSize(int64) int64   { return s.pl.params.GlobalBatchSize }
func (s steady) phase(int64) (int, bool) { return -1, false }

// positionMajor appends step k's samples of splits [first, first+n) at
// perSplit positions a step: for every position, every split in order.
func positionMajor(dst []Sample, at func(j int, t int64) Sample, k, perSplit int64, first, n int) []Sample {
	for t := k * perSplit; t < (k+1)*perSplit; t++ {
		for j := first; j < first+n; j++ {
			dst = append(dst, at(j, t))
		}
	}
	return dst
}
