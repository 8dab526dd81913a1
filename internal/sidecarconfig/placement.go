package sidecarconfig

import (
	"fmt"

	"github.com/shardfeed/shardfeed/planner"
)

// Placement is which ranks a sidecar serves. In rank mode pod, the ranks
// of pod Pod of a job of Pods pods with ProcsPerPod ranks each; in rank
// mode client, any rank a client names. DataParallel is the job's declared
// data-parallel size when its ranks form replication groups (0: every
// rank is its own, the data-parallel size is the world size).
type Placement struct {
	RankMode RankMode
	// Pod is the pod's index in the job (rank mode pod).
	Pod int
	// Pods is the job's pod count (rank mode pod).
	Pods        int
	ProcsPerPod int
	// DataParallel is the declared data-parallel size (0: none).
	DataParallel int
}

// PodMode says whether the sidecar serves its own pod's ranks only.
func (p Placement) PodMode() bool { return p.RankMode == RankModePod }

// procs is ProcsPerPod, at least 1.
func (p Placement) procs() int { return max(p.ProcsPerPod, 1) }

// World is the job's ranks in rank mode pod: pods × procs per pod.
func (p Placement) World() int { return p.Pods * p.procs() }

// Ranks are the ranks this pod serves, [lo, hi), in rank mode pod.
func (p Placement) Ranks() (lo, hi int) { return p.Pod * p.procs(), (p.Pod + 1) * p.procs() }

// PodScoped says whether the pod prefetches the splits of its ranks
// together, as one scope, from its start: in rank mode pod without
// replication groups. A pod of replication groups learns its
// data-parallel ranks from its clients, each its own scope.
func (p Placement) PodScoped() bool { return p.PodMode() && p.DataParallel == 0 }

// Check says whether a plan can serve the placement: the pod is in the
// job, and the world (and its replication groups) divide the plan's
// splits.
func (p Placement) Check(pl *planner.Plan) error {
	switch p.RankMode {
	case RankModeClient:
		if p.DataParallel > 0 {
			return pl.CheckReplication(p.DataParallel, p.DataParallel)
		}
	case RankModePod:
		if p.Pods < 1 || p.Pod < 0 || p.Pod >= p.Pods {
			return fmt.Errorf("rank mode pod needs the pod's rank in [0, pods): got pod %d of %d (set shardfeed.io/rank and shardfeed.io/pods)", p.Pod, p.Pods)
		}
		if p.DataParallel > 0 {
			if err := pl.CheckReplication(p.World(), p.DataParallel); err != nil {
				return fmt.Errorf("%d pods × %d procs per pod: %w", p.Pods, p.procs(), err)
			}
			return nil
		}
		if err := pl.CheckWorld(p.World()); err != nil {
			return fmt.Errorf("%d pods × %d procs per pod: %w", p.Pods, p.procs(), err)
		}
	default:
		return fmt.Errorf("rank mode %q is not supported: use pod or client", p.RankMode)
	}
	return nil
}
