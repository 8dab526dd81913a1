package planner

import (
	"fmt"
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
}

// Simulate predicts, for each pod of a job of o.Pods pods, what it fetches
// and waits for in this epoch, and measures the plan's shuffle quality. It
// needs no store: bytes come from the indexes, times from o.Bandwidth and
// o.StepTime.
func (ep *EpochPlan) Simulate(o SimOptions) (*Simulation, error) {
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
	// Each pod serves data-parallel ranks: its own index in a job without
	// replication groups, its ranks' coordinates in a mesh.
	podRanks, dp := make([][]int, o.Pods), o.Pods
	if o.Mesh != nil {
		if o.Mesh.Size() != o.Pods*o.ProcsPerPod {
			return nil, fmt.Errorf("the mesh %s has %d ranks, not the %d pods × %d procs per pod", o.Mesh, o.Mesh.Size(), o.Pods, o.ProcsPerPod)
		}
		if err := ep.plan.CheckReplication(o.Mesh.Size(), o.Mesh.DataParallelSize()); err != nil {
			return nil, err
		}
		podRanks, dp = o.Mesh.PodRanks(o.ProcsPerPod), o.Mesh.DataParallelSize()
	} else {
		if err := ep.plan.CheckWorld(o.Pods * o.ProcsPerPod); err != nil {
			return nil, err
		}
		for pod := range podRanks {
			podRanks[pod] = []int{pod}
		}
	}
	// One cache limit for all pods: the one the pod that needs most needs.
	var cache int64
	for _, ranks := range podRanks {
		c, err := ep.MinCacheBytesOf(ranks, dp, o.Prefetch)
		if err != nil {
			return nil, err
		}
		cache = max(cache, c)
	}
	steps := ep.plan.Steps()
	sim := &Simulation{Steps: steps}
	for pod, ranks := range podRanks {
		needs := ep.NeedsOf(ranks, dp)
		ps := PodSim{Pod: pod, Shards: len(needs), MinCacheBytes: cache}
		// Downloads back to back in need order; ready[k] is when the last
		// shard step k reads is in the cache.
		var fetched int64
		readyAt := make(map[int64]time.Duration, len(needs))
		for _, nd := range needs {
			fetched += nd.Bytes
			at := time.Duration(float64(fetched) / o.Bandwidth * float64(time.Second))
			if at > readyAt[nd.FirstStep] {
				readyAt[nd.FirstStep] = at
			}
		}
		ps.Bytes = fetched
		ps.FirstBatch = readyAt[0]
		var now, latest time.Duration
		for k := range steps {
			if r, ok := readyAt[k]; ok && r > latest {
				latest = r
			}
			if latest > now {
				ps.Stall += latest - now
				now = latest
			}
			now += o.StepTime
		}
		ps.Epoch = now
		sim.Pods = append(sim.Pods, ps)
	}
	var err error
	sim.Quality, err = ep.quality(o.QualitySteps)
	return sim, err
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
