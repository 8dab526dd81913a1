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
	sim.Quality, err = ep.quality(o.QualitySteps)
	return sim, err
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
	type ready struct {
		step int64
		at   time.Duration
	}
	var events []ready
	for _, nd := range needs {
		if nd.LastStep < from {
			continue
		}
		bytes += nd.Bytes
		requests += shardRequests(nd.Bytes, o.PartBytes)
		events = append(events, ready{max(nd.FirstStep, from), time.Duration(float64(bytes) / o.Bandwidth * float64(time.Second))})
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
	return r, nil
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
