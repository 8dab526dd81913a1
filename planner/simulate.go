package planner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SimOptions describe a job for Simulate.
type SimOptions struct {
	Pods, ProcsPerPod int
	// Mesh, if set, lays the job's ranks out in replication groups (its
	// size is Pods × ProcsPerPod): a pod fetches the shards of the
	// data-parallel ranks of its ranks.
	Mesh *Mesh
	// Bandwidth is each pod's download rate from the store, bytes/s.
	Bandwidth float64
	// StepTime is the training time of one step.
	StepTime time.Duration
	// Prefetch is the shards a pod fetches ahead (the minimum cache counts
	// them).
	Prefetch int
	// QualitySteps bounds the steps the shuffle quality is measured on
	// (evenly spread over the epoch; 0: 200).
	QualitySteps int
	// PartBytes is how a pod's sidecar asks for a shard: a shard of at
	// least two parts in ranged GETs of PartBytes, a smaller one in one
	// GET (0: one GET per shard).
	PartBytes int64
	// RescaleTo, if set, moves the job (without a mesh) to RescaleTo pods
	// of ProcsPerPod ranks at step RescaleAt, with new pods and so empty
	// caches, as a Job made again with another size has.
	RescaleTo int
	RescaleAt int64
	// NodeBandwidth, if above 0, also predicts the job with the node
	// cache (the chart's node agent), one pod to a node: a shard on the
	// node comes at NodeBandwidth, and NodeCacheBytes (0: no limit)
	// bounds what a node keeps.
	NodeBandwidth  float64
	NodeCacheBytes int64
	// Trials, above 1, is a sweep: that many jobs of this plan and size,
	// one after another on the same nodes (hyperparameter trials).
	Trials int
}

// PodSim is what one pod of the job fetches and waits for in an epoch.
type PodSim struct {
	Pod int `json:"pod"`
	// Bytes and Shards the pod fetches in the epoch (each shard once).
	Bytes  int64 `json:"bytes"`
	Shards int   `json:"shards"`
	// MinCacheBytes is the cache that never evicts a shard still needed
	// (the same bound `shardfeed plan` and the webhook use).
	MinCacheBytes int64 `json:"minCacheBytes"`
	// FirstBatch is the time to the pod's first batch: the shards step 0
	// needs, downloaded at Bandwidth.
	FirstBatch time.Duration `json:"firstBatchNanos"`
	// Stall is the time the pod's ranks wait for data over the epoch,
	// first batch included: shards are downloaded back to back in the
	// order they are needed, and step k waits for the shards it reads.
	Stall time.Duration `json:"stallNanos"`
	// Epoch is the epoch's duration for this pod: steps × StepTime + Stall.
	Epoch time.Duration `json:"epochNanos"`
	// Requests is the GETs the pod's shards take (SimOptions.PartBytes).
	Requests int64 `json:"requests"`
}

// Rescale is what moving the job to another number of pods in the middle
// of the epoch costs: the new pods start with empty caches.
type Rescale struct {
	FromPods int   `json:"fromPods"`
	ToPods   int   `json:"toPods"`
	AtStep   int64 `json:"atStep"`
	// Before is what the old pods fetched for the steps before AtStep
	// (each the shards it needed first before it).
	Before int64 `json:"beforeBytes"`
	// After is what the new pods fetch from AtStep to the epoch's end.
	After int64 `json:"afterBytes"`
	// Refetched is the part of After that old pods had fetched already:
	// the shards in use at AtStep, which every new pod reading them
	// fetches again.
	Refetched int64 `json:"refetchedBytes"`
	// Unchanged is what the old pods would have fetched from AtStep on,
	// had the job kept its size.
	Unchanged int64 `json:"unchangedBytes"`
	// FirstBatch is the slowest new pod's time to its first batch: the
	// shards step AtStep may read, at SimOptions.Bandwidth.
	FirstBatch time.Duration `json:"firstBatchNanos"`
	// MinCacheBytes is the new pods' minimum cache.
	MinCacheBytes int64 `json:"minCacheBytes"`
	// NodeCache is the same rescale with the node cache, the new pod i
	// on the node of old pod i.
	NodeCache *RescaleOnNodes `json:"nodeCache,omitempty"`
}

// RescaleOnNodes is a rescale with the node cache: a new pod reads from
// its node what the old pod there fetched before the step.
type RescaleOnNodes struct {
	// FromNodes is what the new pods read from their nodes; FromStore
	// the rest of After, and Refetched the part of it old pods had
	// fetched (on other nodes).
	FromNodes int64 `json:"fromNodesBytes"`
	FromStore int64 `json:"fromStoreBytes"`
	Refetched int64 `json:"refetchedBytes"`
	// FirstBatch is the slowest new pod's time to its first batch, the
	// shards on its node at SimOptions.NodeBandwidth.
	FirstBatch time.Duration `json:"firstBatchNanos"`
}

// Sweep is SimOptions.Trials jobs of the plan, one after another on the
// same nodes, with and without the node cache.
type Sweep struct {
	Trials int `json:"trials"`
	// Egress is what the trials fetch from the store: each trial the
	// whole epoch without the node cache; with it, the first trial's,
	// and again every trial whose pod's epoch does not fit its node's
	// cache (its shards are evicted, least recently used, before the
	// next trial reads them).
	Egress         int64 `json:"egressBytes"`
	EgressWithNode int64 `json:"egressWithNodeCacheBytes"`
	// FirstBatch is the slowest pod's time to its first batch from the
	// store; FirstBatchFromNode that of a later trial, from its node.
	FirstBatch         time.Duration `json:"firstBatchNanos"`
	FirstBatchFromNode time.Duration `json:"firstBatchFromNodeNanos"`
}

// Quality says how well the plan mixes samples.
type Quality struct {
	// MeanGap is the mean distance, in the streams' original order,
	// between consecutive samples of a rank's batches; MeanGapIdeal is
	// that of a uniform shuffle of the epoch (about samples / 3).
	MeanGap      float64 `json:"meanGap"`
	MeanGapIdeal float64 `json:"meanGapIdeal"`
	// DistinctShardsPerBatch is the mean fraction of a global batch's
	// samples that come from distinct shards (1: no two from one shard).
	DistinctShardsPerBatch float64 `json:"distinctShardsPerBatch"`
	// StepsMeasured is how many steps the two figures come from.
	StepsMeasured int `json:"stepsMeasured"`
}

// Simulation is the outcome of Simulate.
type Simulation struct {
	Steps   int64    `json:"steps"`
	Pods    []PodSim `json:"pods"`
	Quality Quality  `json:"quality"`
	Rescale *Rescale `json:"rescale,omitempty"`
	Sweep   *Sweep   `json:"sweep,omitempty"`
}

// Simulate predicts, for each pod of a job of o.Pods pods, what it fetches
// and waits for in this epoch, and measures the plan's shuffle quality. It
// needs no store: bytes come from the indexes, times from o.Bandwidth and
// o.StepTime.
func (ep *EpochPlan) Simulate(o SimOptions) (*Simulation, error) {
	if err := ep.whole(); err != nil {
		return nil, err
	}
	if o.ProcsPerPod < 1 {
		o.ProcsPerPod = 1
	}
	if o.Pods < 1 {
		return nil, fmt.Errorf("pods must be at least 1, got %d", o.Pods)
	}
	if o.Bandwidth <= 0 {
		return nil, fmt.Errorf("bandwidth must be above 0, got %g bytes/s", o.Bandwidth)
	}
	if o.StepTime < 0 {
		return nil, fmt.Errorf("step time must not be negative, got %s", o.StepTime)
	}
	if o.Trials > 1 && o.NodeBandwidth <= 0 {
		return nil, fmt.Errorf("a sweep of %d trials is compared with the node cache: give its bandwidth", o.Trials)
	}
	podRanks, dp, err := ep.layout(o.Pods, o.ProcsPerPod, o.Mesh)
	if err != nil {
		return nil, err
	}
	needs := make([][]ShardNeed, len(podRanks))
	for pod, ranks := range podRanks {
		needs[pod] = ep.NeedsOf(ranks, dp)
	}
	// One cache limit for all pods: the one the pod that needs most needs.
	cache, err := ep.minCacheOf(podRanks, dp, o.Prefetch, needs)
	if err != nil {
		return nil, err
	}
	steps := ep.plan.Steps()
	sim := &Simulation{Steps: steps}
	for pod := range podRanks {
		ps := PodSim{Pod: pod, Shards: len(needs[pod]), MinCacheBytes: cache}
		ps.Bytes, ps.Requests, ps.FirstBatch, ps.Stall, ps.Epoch = fetchTimes(needs[pod], 0, steps, o)
		sim.Pods = append(sim.Pods, ps)
	}
	if o.RescaleTo > 0 {
		if sim.Rescale, err = ep.rescale(o, needs); err != nil {
			return nil, err
		}
	}
	if o.Trials > 1 {
		sim.Sweep = sweep(o, needs, sim.Pods, steps)
	}
	sim.Quality, err = ep.quality(o.QualitySteps)
	return sim, err
}

// sweep predicts o.Trials jobs of the plan on the same nodes, pod i of
// every trial on node i: with the node cache, a later trial's pod reads
// its node's copy of what the first trial's pod there fetched, if that
// fits the node's cache; one that does not is evicted as it is read (least
// recently used first) and fetched again by every trial.
func sweep(o SimOptions, needs [][]ShardNeed, pods []PodSim, steps int64) *Sweep {
	sw := &Sweep{Trials: o.Trials}
	all := func(ShardNeed) bool { return true }
	for i, ps := range pods {
		sw.Egress += int64(o.Trials) * ps.Bytes
		sw.FirstBatch = max(sw.FirstBatch, ps.FirstBatch)
		if o.NodeCacheBytes > 0 && ps.Bytes > o.NodeCacheBytes {
			sw.EgressWithNode += int64(o.Trials) * ps.Bytes
			sw.FirstBatchFromNode = max(sw.FirstBatchFromNode, ps.FirstBatch)
			continue
		}
		sw.EgressWithNode += ps.Bytes
		_, _, first, _, _ := fetchTimesFrom(needs[i], 0, steps, o, all)
		sw.FirstBatchFromNode = max(sw.FirstBatchFromNode, first)
	}
	return sw
}

// heldOnNode is what a node keeps of the shards its pod fetched before
// step at: all of them, or within o.NodeCacheBytes the most recently
// fetched.
func heldOnNode(o SimOptions, pod []ShardNeed, at int64) map[[2]int]bool {
	var before []ShardNeed
	for _, nd := range pod {
		if nd.FirstStep < at {
			before = append(before, nd)
		}
	}
	slices.SortStableFunc(before, func(a, b ShardNeed) int { return cmp.Compare(b.FirstStep, a.FirstStep) })
	held := map[[2]int]bool{}
	var bytes int64
	for _, nd := range before {
		if o.NodeCacheBytes > 0 && bytes+nd.Bytes > o.NodeCacheBytes {
			break
		}
		bytes += nd.Bytes
		held[[2]int{nd.Stream, nd.Shard}] = true
	}
	return held
}

// layout is the data-parallel ranks each pod serves, of how many: its own
// index in a job without replication groups, its ranks' coordinates in a
// mesh.
func (ep *EpochPlan) layout(pods, procsPerPod int, mesh *Mesh) ([][]int, int, error) {
	if mesh != nil {
		if mesh.Size() != pods*procsPerPod {
			return nil, 0, fmt.Errorf("the mesh %s has %d ranks, not the %d pods × %d procs per pod", mesh, mesh.Size(), pods, procsPerPod)
		}
		if err := ep.plan.CheckReplication(mesh.Size(), mesh.DataParallelSize()); err != nil {
			return nil, 0, err
		}
		return mesh.PodRanks(procsPerPod), mesh.DataParallelSize(), nil
	}
	if err := ep.plan.CheckWorld(pods * procsPerPod); err != nil {
		return nil, 0, err
	}
	podRanks := make([][]int, pods)
	for pod := range podRanks {
		podRanks[pod] = []int{pod}
	}
	return podRanks, pods, nil
}

// minCacheOf is the largest of the pods' minimum caches; needs are the
// pods' NeedsOf.
func (ep *EpochPlan) minCacheOf(podRanks [][]int, dp, prefetch int, needs [][]ShardNeed) (int64, error) {
	var cache int64
	for pod, ranks := range podRanks {
		c, err := ep.minCacheBytesOf(ranks, dp, prefetch, needs[pod])
		if err != nil {
			return 0, err
		}
		cache = max(cache, c)
	}
	return cache, nil
}

// fetchTimes downloads the needs still to come at step from (those read
// at it or after) back to back in need order, and times the steps from
// it to the epoch's end: step k waits for the shards first needed at k
// (or, for the first step, before it) to be in the cache.
func fetchTimes(needs []ShardNeed, from, steps int64, o SimOptions) (bytes, requests int64, first, stall, epoch time.Duration) {
	return fetchTimesFrom(needs, from, steps, o, nil)
}

// fetchTimesFrom is fetchTimes where the shards onNode says are on the
// pod's node come at o.NodeBandwidth.
func fetchTimesFrom(needs []ShardNeed, from, steps int64, o SimOptions, onNode func(ShardNeed) bool) (bytes, requests int64, first, stall, epoch time.Duration) {
	type ready struct {
		step int64
		at   time.Duration
	}
	var events []ready
	var clock time.Duration
	for _, nd := range needs {
		if nd.LastStep < from {
			continue
		}
		rate := o.Bandwidth
		if onNode != nil && onNode(nd) {
			rate = o.NodeBandwidth
		}
		bytes += nd.Bytes
		requests += shardRequests(nd.Bytes, o.PartBytes)
		clock += time.Duration(float64(nd.Bytes) / rate * float64(time.Second))
		events = append(events, ready{max(nd.FirstStep, from), clock})
	}
	// Needs come in the order they are first needed; a step waits for the
	// last of its shards whatever the order.
	slices.SortStableFunc(events, func(a, b ready) int { return cmp.Compare(a.step, b.step) })
	merged := events[:0]
	for _, e := range events {
		if n := len(merged); n > 0 && merged[n-1].step == e.step {
			merged[n-1].at = max(merged[n-1].at, e.at)
		} else {
			merged = append(merged, e)
		}
	}
	events = merged
	if len(events) > 0 && events[0].step == from {
		first = events[0].at
	}
	// Between two steps that wait for shards, the steps only train.
	var now time.Duration
	k := from
	for _, e := range events {
		now += time.Duration(e.step-k) * o.StepTime
		k = e.step
		if e.at > now {
			stall += e.at - now
			now = e.at
		}
	}
	now += time.Duration(steps-k) * o.StepTime
	return bytes, requests, first, stall, now
}

// shardRequests is the GETs a shard of n bytes takes: ranged GETs of
// partBytes from two parts on, else one.
func shardRequests(n, partBytes int64) int64 {
	if partBytes <= 0 || n < 2*partBytes {
		return 1
	}
	return (n + partBytes - 1) / partBytes
}

// rescale moves the job from o.Pods to o.RescaleTo pods at o.RescaleAt;
// needs are the old pods'.
func (ep *EpochPlan) rescale(o SimOptions, needs [][]ShardNeed) (*Rescale, error) {
	if o.Mesh != nil {
		return nil, errors.New("a rescale is simulated for a job without a mesh: give --pods and --procs-per-pod")
	}
	steps := ep.plan.Steps()
	at := o.RescaleAt
	if at < 0 || at >= steps {
		return nil, fmt.Errorf("the rescale's step %d is outside the epoch's %d steps", at, steps)
	}
	podRanks, dp, err := ep.layout(o.RescaleTo, o.ProcsPerPod, nil)
	if err != nil {
		return nil, fmt.Errorf("rescaling to %d pods: %w", o.RescaleTo, err)
	}
	r := &Rescale{FromPods: o.Pods, ToPods: o.RescaleTo, AtStep: at}
	fetched := map[[2]int]bool{} // shards some old pod fetched before the step
	for _, pod := range needs {
		for _, nd := range pod {
			if nd.FirstStep < at {
				r.Before += nd.Bytes
				fetched[[2]int{nd.Stream, nd.Shard}] = true
			} else {
				r.Unchanged += nd.Bytes
			}
		}
	}
	after := make([][]ShardNeed, len(podRanks))
	for i, ranks := range podRanks {
		pod := ep.NeedsOf(ranks, dp)
		after[i] = pod
		bytes, _, first, _, _ := fetchTimes(pod, at, steps, o)
		r.After += bytes
		r.FirstBatch = max(r.FirstBatch, first)
		for _, nd := range pod {
			if nd.LastStep >= at && fetched[[2]int{nd.Stream, nd.Shard}] {
				r.Refetched += nd.Bytes
			}
		}
	}
	if r.MinCacheBytes, err = ep.minCacheOf(podRanks, dp, o.Prefetch, after); err != nil {
		return nil, err
	}
	if o.NodeBandwidth > 0 {
		r.NodeCache = rescaleOnNodes(o, needs, after, fetched, at, steps)
	}
	return r, nil
}

// rescaleOnNodes is the rescale with the node cache: new pod i on the node
// of old pod i (a new node past the old pods' count), which holds what old
// pod i fetched before the step.
func rescaleOnNodes(o SimOptions, before, after [][]ShardNeed, fetched map[[2]int]bool, at, steps int64) *RescaleOnNodes {
	rn := &RescaleOnNodes{}
	for i, pod := range after {
		held := map[[2]int]bool{}
		if i < len(before) {
			held = heldOnNode(o, before[i], at)
		}
		onNode := func(nd ShardNeed) bool { return held[[2]int{nd.Stream, nd.Shard}] }
		_, _, first, _, _ := fetchTimesFrom(pod, at, steps, o, onNode)
		rn.FirstBatch = max(rn.FirstBatch, first)
		for _, nd := range pod {
			switch k := [2]int{nd.Stream, nd.Shard}; {
			case nd.LastStep < at:
			case held[k]:
				rn.FromNodes += nd.Bytes
			default:
				rn.FromStore += nd.Bytes
				if fetched[k] {
					rn.Refetched += nd.Bytes
				}
			}
		}
	}
	return rn
}

// quality measures, on up to n steps spread over the epoch,
// DistinctShardsPerBatch over global batches and MeanGap over the samples a
// split gives in a row (what one reader trains on in sequence).
func (ep *EpochPlan) quality(n int) (Quality, error) {
	if n <= 0 {
		n = 200
	}
	pl := ep.plan
	steps := pl.Steps()
	q := Quality{MeanGapIdeal: float64(pl.Total()) / 3}
	if steps == 0 {
		return q, nil
	}
	stride := max(steps/int64(n), 1)
	var gaps, pairs, distinct float64
	var batch []Sample
	var err error
	for k := int64(0); k < steps; k += stride {
		if batch, err = ep.GlobalBatch(batch[:0], k); err != nil {
			return q, err
		}
		shards := map[[2]int]bool{}
		rows := 0
		for _, s := range batch {
			if !s.Pad {
				rows++
				shards[[2]int{s.Stream, s.Shard}] = true
			}
		}
		if rows > 0 {
			distinct += float64(len(shards)) / float64(rows)
		}
		// Split j's samples of the step are positions j, j+S, … of the
		// global batch.
		S := pl.NumSplits()
		for j := range S {
			prev := batch[j]
			for i := j + S; i < len(batch); i += S {
				cur := batch[i]
				if !prev.Pad && !cur.Pad {
					d := cur.ID - prev.ID
					if d < 0 {
						d = -d
					}
					gaps += float64(d)
					pairs++
				}
				prev = cur
			}
		}
		q.StepsMeasured++
	}
	if pairs > 0 {
		q.MeanGap = gaps / pairs
	}
	q.DistinctShardsPerBatch = distinct / float64(q.StepsMeasured)
	return q, nil
}
