package planner

import (
	"cmp"
	"slices"
)

// ShardNeed is one shard a rank or pod needs in an epoch, with the steps
// between which it must be in the cache.
type ShardNeed struct {
	Stream int `json:"stream"`
	Shard  int `json:"shard"`
	// Bytes is the shard's, with its object's shared part (Shard.Shared)
	// for the first shard of the object in the list.
	Bytes int64 `json:"bytes"`
	// FirstStep is the first step that may read the shard, LastStep the
	// last one. With shuffle, a step may read any sample of the blocks its
	// positions fall in, so the range covers whole blocks.
	FirstStep int64 `json:"firstStep"`
	LastStep  int64 `json:"lastStep"`
}

// grain is the unit of the position → sample mapping inside a split: a
// block with shuffle, one position without.
func (pl *Plan) grain() int64 {
	if pl.params.Shuffle {
		return pl.params.BlockSize
	}
	return 1
}

// padRows returns the pad rows at the end of every split.
func (pl *Plan) padRows() int64 {
	if pl.params.DropLast {
		return 0
	}
	return pl.steps*pl.perSplit - pl.splitLen
}

// object names the object shard of stream is: a bucketed stream's lanes
// are views of the same objects (those of its first lane), which a pod
// fetches and caches once.
func (pl *Plan) object(stream, shard int) [2]int {
	if b := pl.params.Bucketing; b != nil {
		stream = stream / b.Buckets * b.Buckets
	}
	return [2]int{stream, shard}
}

func (pl *Plan) shardBytes(stream int, shard int64) int64 {
	return pl.params.Streams[stream].Index.shard(shard).Bytes
}

// ShardsNeeded lists the shards that splits [first, first+n) read in the
// epoch, each once, in the order they are first needed: what a rank (or a
// pod, with PodSplits) prefetches.
func (ep *EpochPlan) ShardsNeeded(first, n int) []ShardNeed {
	ep.mustHold(first, n)
	return ep.o.needs(first, n, true)
}

// ShardsAhead is ShardsNeeded without the needs' bytes (each Bytes 0):
// what a sidecar whose streams' shards are held apart (StreamIndex.Counts)
// prefetches by, resolving the entries of the needs a window ahead and
// sizing them then (NeedSizer), not every shard of its epoch at its start.
func (ep *EpochPlan) ShardsAhead(first, n int) []ShardNeed {
	ep.mustHold(first, n)
	return ep.o.needs(first, n, false)
}

// NeedSizer sets the bytes of the needs of ShardsAhead, a run at a time in
// their order, as ShardsNeeded has them: each object's shared part on its
// first shard.
type NeedSizer struct {
	pl     *Plan
	shared map[sharedKey]bool
}

// NeedSizer returns a sizer of one list of needs.
func (pl *Plan) NeedSizer() *NeedSizer { return &NeedSizer{pl: pl, shared: map[sharedKey]bool{}} }

// Size sets the bytes of needs, the next run of the list: their shards
// must be at hand (a held-apart stream's resolved).
func (z *NeedSizer) Size(needs []ShardNeed) {
	for i, nd := range needs {
		sh := z.pl.params.Streams[nd.Stream].Index.shard(int64(nd.Shard))
		needs[i].Bytes = sh.Bytes
		if sh.SharedBytes > 0 {
			if k := (sharedKey{nd.Stream, sh.Shared}); !z.shared[k] {
				z.shared[k] = true
				needs[i].Bytes += sh.SharedBytes
			}
		}
	}
}

// ShardRef names a shard of a stream.
type ShardRef struct {
	Stream, Shard int
}

// ShardsOf lists the shards of the pieces of splits [first, first+n) in
// the epoch, each once, in the order of their pieces, without their bytes
// (those of ShardsNeeded, and any whose only samples are dropped): what
// to fetch the entries of before asking for the splits' needs when a
// stream's shards are held apart (StreamIndex.Counts).
func (ep *EpochPlan) ShardsOf(first, n int) []ShardRef {
	ep.mustHold(first, n)
	var out []ShardRef
	if re, ok := ep.o.(*randomEpoch); ok {
		seen := map[int32]bool{}
		for _, pc := range re.pieces[re.pieceOff[first]:re.pieceOff[first+n]] {
			if !seen[pc.shard] {
				seen[pc.shard] = true
				out = append(out, ShardRef{Stream: int(pc.stream), Shard: int(int64(pc.shard) - ep.plan.shardBase[pc.stream])})
			}
		}
		return out
	}
	for _, nd := range ep.o.needs(first, n, false) {
		out = append(out, ShardRef{Stream: nd.Stream, Shard: nd.Shard})
	}
	return out
}

// addShared adds to the first shard of each object in needs the object's
// shared part (a Parquet footer), which it brings.
func (pl *Plan) addShared(needs []ShardNeed) {
	shared := map[sharedKey]bool{}
	for i, nd := range needs {
		if sh := pl.params.Streams[nd.Stream].Index.shard(int64(nd.Shard)); sh.SharedBytes > 0 {
			if k := (sharedKey{nd.Stream, sh.Shared}); !shared[k] {
				shared[k] = true
				needs[i].Bytes += sh.SharedBytes
			}
		}
	}
}

// sharedKey names an object's shared part in a stream.
type sharedKey struct {
	stream int
	object string
}

// MinCacheBytes returns the cache a pod of a job of pods pods needs so that
// it never waits for a shard it already fetched to be fetched again (design
// §3 step 11): for the pod that needs most, the sum over its splits of the
// bytes one step reads (at most all the shards it reads), plus
// prefetchShards of the largest shard. It is an upper bound: the splits'
// peaks are added as if they fell on one step.
func (ep *EpochPlan) MinCacheBytes(pods, prefetchShards int) (int64, error) {
	if err := ep.whole(); err != nil {
		return 0, err
	}
	if err := ep.plan.CheckWorld(pods); err != nil {
		return 0, err
	}
	per := ep.plan.params.NumSplits / pods
	var most int64
	for pod := range pods {
		most = max(most, ep.rangeCacheBytes(pod*per, per))
	}
	return most + int64(prefetchShards)*ep.plan.maxShardBytes, nil
}

// rangeCacheBytes is MinCacheBytes's need of splits [first, first+n),
// without the prefetch.
func (ep *EpochPlan) rangeCacheBytes(first, n int) int64 {
	ep.mustHold(first, n)
	return ep.o.cacheBytes(first, n)
}

// MinCacheBytesOf is MinCacheBytes for a pod that serves the data-parallel
// ranks ranks of dataParallel (a job with replication groups): the sum of
// the ranks' needs, at most every shard they read, plus the prefetch.
func (ep *EpochPlan) MinCacheBytesOf(ranks []int, dataParallel, prefetchShards int) (int64, error) {
	return ep.minCacheBytesOf(ranks, dataParallel, prefetchShards, nil)
}

// minCacheBytesOf is MinCacheBytesOf with the ranks' NeedsOf, if the
// caller has them already (nil: computed here).
func (ep *EpochPlan) minCacheBytesOf(ranks []int, dataParallel, prefetchShards int, needs []ShardNeed) (int64, error) {
	if err := ep.plan.CheckWorld(dataParallel); err != nil {
		return 0, err
	}
	per := ep.plan.params.NumSplits / dataParallel
	var need int64
	for _, d := range ranks {
		if d < 0 || d >= dataParallel {
			return 0, fieldErr("data-parallel rank", "%d is outside %d data-parallel ranks", d, dataParallel)
		}
		need += ep.rangeCacheBytes(d*per, per)
	}
	if needs == nil {
		needs = ep.NeedsOf(ranks, dataParallel)
	}
	var all int64
	for _, nd := range needs {
		all += nd.Bytes
	}
	return min(need, all) + int64(prefetchShards)*ep.plan.maxShardBytes, nil
}

// needSet gathers the needs of a range of splits: each shard once, from
// the first step any of them reads it to the last.
type needSet struct {
	pl  *Plan
	out []ShardNeed
	at  map[[2]int]int // (stream, shard) → its need in out
	// sized: with the needs' bytes (not for ShardsAhead).
	sized bool
}

func newNeedSet(pl *Plan, sized bool) *needSet {
	return &needSet{pl: pl, sized: sized, at: map[[2]int]int{}}
}

// add notes that shard of stream s is read from step first to step last.
func (n *needSet) add(s, shard int, first, last int64) {
	key := [2]int{s, shard}
	if i, dup := n.at[key]; dup {
		n.out[i].FirstStep, n.out[i].LastStep = min(n.out[i].FirstStep, first), max(n.out[i].LastStep, last)
		return
	}
	n.at[key] = len(n.out)
	var bytes int64
	if n.sized {
		bytes = n.pl.shardBytes(s, int64(shard))
	}
	n.out = append(n.out, ShardNeed{Stream: s, Shard: shard, Bytes: bytes, FirstStep: first, LastStep: last})
}

// needs are the needs in the order they are first needed (ties in the
// order they were added), each object's shared part on its first shard.
func (n *needSet) needs() []ShardNeed {
	slices.SortStableFunc(n.out, func(a, b ShardNeed) int { return cmp.Compare(a.FirstStep, b.FirstStep) })
	if n.sized {
		n.pl.addShared(n.out)
	}
	return n.out
}

// NeedsOf is ShardsNeeded for the splits of the data-parallel ranks ranks
// of dataParallel together (what a pod serving them prefetches): each
// shard once, from the first step any of them reads it to the last.
func (ep *EpochPlan) NeedsOf(ranks []int, dataParallel int) []ShardNeed {
	per := ep.plan.params.NumSplits / max(dataParallel, 1)
	if len(ranks) == 1 {
		return ep.ShardsNeeded(ranks[0]*per, per)
	}
	set := newNeedSet(ep.plan, true)
	for _, d := range ranks {
		for _, nd := range ep.ShardsNeeded(d*per, per) {
			set.add(nd.Stream, nd.Shard, nd.FirstStep, nd.LastStep)
		}
	}
	return set.needs()
}

// Egress is what the pods of a job fetch in one epoch.
type Egress struct {
	// PodBytes is the bytes of the distinct shards each pod reads.
	PodBytes []int64 `json:"podBytes"`
	// PodShards is the number of distinct shards each pod reads.
	PodShards []int `json:"podShards"`
	// FetchedBytes is the sum of PodBytes.
	FetchedBytes int64 `json:"fetchedBytes"`
	// DistinctBytes is the bytes of the distinct shards the epoch reads.
	DistinctBytes int64 `json:"distinctBytes"`
}

// Ratio is FetchedBytes / DistinctBytes: 1 when every shard is fetched by
// one pod only.
func (e Egress) Ratio() float64 {
	if e.DistinctBytes == 0 {
		return 0
	}
	return float64(e.FetchedBytes) / float64(e.DistinctBytes)
}

// Egress returns the bytes each of pods pods fetches in the epoch, each
// shard once per pod.
func (ep *EpochPlan) Egress(pods int) (Egress, error) {
	ranks := make([][]int, pods)
	for pod := range ranks {
		ranks[pod] = []int{pod}
	}
	return ep.EgressOf(ranks, pods)
}

// EgressOf returns the bytes each pod fetches in the epoch when pod i serves
// the data-parallel ranks ranks[i] of dataParallel (a job with replication
// groups: a group's ranks on different pods fetch the same shards).
func (ep *EpochPlan) EgressOf(ranks [][]int, dataParallel int) (Egress, error) {
	if err := ep.whole(); err != nil {
		return Egress{}, err
	}
	if err := ep.plan.CheckWorld(dataParallel); err != nil {
		return Egress{}, err
	}
	e := Egress{PodBytes: make([]int64, len(ranks)), PodShards: make([]int, len(ranks))}
	seen := map[[2]int]bool{}
	seenLane := map[[2]int]bool{} // bucketed: the lanes whose runs count
	sharedSeen := map[sharedKey]bool{}
	for pod, rs := range ranks {
		for _, d := range rs {
			if d < 0 || d >= dataParallel {
				return Egress{}, fieldErr("data-parallel rank", "%d is outside %d data-parallel ranks", d, dataParallel)
			}
		}
		fetched := map[[2]int]bool{}
		for _, nd := range ep.NeedsOf(rs, dataParallel) {
			key, lane := ep.plan.object(nd.Stream, nd.Shard), [2]int{nd.Stream, nd.Shard}
			sh := ep.plan.params.Streams[nd.Stream].Index.shard(int64(nd.Shard))
			if fetched[key] { // another bucket's lane of a shard the pod fetches: its runs
				e.PodBytes[pod] += sh.RunsBytes
			} else {
				fetched[key] = true
				e.PodBytes[pod] += nd.Bytes
				e.PodShards[pod]++
			}
			switch {
			case !seen[key]:
				seen[key], seenLane[lane] = true, true
				e.DistinctBytes += sh.Bytes
				if k := (sharedKey{nd.Stream, sh.Shared}); sh.SharedBytes > 0 && !sharedSeen[k] {
					sharedSeen[k] = true
					e.DistinctBytes += sh.SharedBytes
				}
			case !seenLane[lane]:
				seenLane[lane] = true
				e.DistinctBytes += sh.RunsBytes
			}
		}
		e.FetchedBytes += e.PodBytes[pod]
	}
	return e, nil
}

// peakBytes is the most bytes of needs that any one step holds: each need
// from its first step to its last.
func peakBytes(needs []ShardNeed) int64 {
	type event struct {
		step  int64
		bytes int64
	}
	events := make([]event, 0, 2*len(needs))
	for _, nd := range needs {
		events = append(events, event{nd.FirstStep, nd.Bytes}, event{nd.LastStep + 1, -nd.Bytes})
	}
	slices.SortFunc(events, func(a, b event) int { return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.bytes, b.bytes)) })
	var now, peak int64
	for _, e := range events {
		now += e.bytes
		peak = max(peak, now)
	}
	return peak
}
