//go:build e2e

package e2e

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// The training controllers platform teams run, built from their released
// modules (hack/controllers.sh): a JobSet of 2 Jobs of 2 pods through a
// deleted pod and a rescale to 1 Job; a Kubeflow Trainer v2 TrainJob on
// the torch-distributed runtime through a deleted node pod; a PyTorchJob
// of the training operator (a master and 3 workers) through a deleted
// worker pod. Each ends exactly once, and each pod's rank is the one the
// webhook computes for its kind: a JobSet's Job index × 2 + completion
// index; a TrainJob node's from what Trainer sets on it (PET_NNODES, the
// completion index), not the JobSet's global index; a PyTorchJob's master
// 0 and worker i 1 + i.
func TestEndToEndTheTrainingControllersTrainExactlyOnce(t *testing.T) {
	o, ctx := clusterOptions(t, 800)
	rep, err := scenario.RunControllers(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		name   string
		l      scenario.Lineage
		worlds int
	}{{"JobSet", rep.JobSet, 2}, {"TrainJob", rep.TrainJob, 1}, {"PyTorchJob", rep.PyTorchJob, 1}} {
		for _, p := range s.l.Problems {
			t.Errorf("%s: %s", s.name, p)
		}
		if !s.l.OK() || s.l.Retrained == 0 || len(s.l.Worlds) != s.worlds {
			t.Errorf("%s: not exactly once through a deleted pod (and %d world sizes): %s", s.name, s.worlds, s.l.Summary())
		}
	}
	for _, s := range []struct {
		name   string
		wiring []string
		pods   int
		// parse reads a pod's wiring line; want is its rank.
		parse func(line string) (rank, want int, err error)
	}{
		{"JobSet", rep.JobSetWiring, 4, func(w string) (int, int, error) {
			var job, index, rank int
			_, err := fmt.Sscanf(w, "job %d index %d: %d/4×1 train ", &job, &index, &rank)
			return rank, 2*job + index, err
		}},
		{"TrainJob", rep.TrainJobWiring, 2, func(w string) (int, int, error) {
			var rank int
			_, err := fmt.Sscanf(w, "%d/2×1 train ", &rank)
			return rank, rank, err // a rank of 2 pods, either
		}},
		{"PyTorchJob", rep.PyTorchJobWiring, 4, func(w string) (int, int, error) {
			var typ string
			var index, rank int
			_, err := fmt.Sscanf(w, "%s %d: %d/4×1 train ", &typ, &index, &rank)
			if typ == "worker" {
				return rank, 1 + index, err
			}
			return rank, index, err
		}},
	} {
		if len(s.wiring) != s.pods {
			t.Errorf("%s: pods wired as %v, want %d", s.name, s.wiring, s.pods)
		}
		seen := map[int]bool{}
		for _, w := range s.wiring {
			rank, want, err := s.parse(w)
			if err != nil || rank != want || seen[rank] {
				t.Errorf("%s: a pod wired as %q (%v): want rank %d of %d pods, 1 process, job train, each rank once", s.name, w, err, want, s.pods)
			}
			seen[rank] = true
		}
	}
}

// Kueue: a queued Indexed Job of 2 pods, preempted mid-epoch by a job of a
// higher priority (Kueue suspends it: its pods go), admitted again once
// that one is done, ends exactly once, under the one attempt its Job's UID
// names. Kueue counts for it what its pods ask for, sidecars included (the
// reservation in its template): the quota is exactly that, so the
// preempting job fits only once the first is suspended.
func TestEndToEndKueuePreemptsAndResumesAQueuedJobExactlyOnce(t *testing.T) {
	o, ctx := clusterOptions(t, 800)
	rep, err := scenario.RunKueue(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Lineage.Problems {
		t.Error(p)
	}
	if !rep.Lineage.OK() || rep.Lineage.Retrained == 0 {
		t.Errorf("not exactly once through a preemption: %s", rep.Lineage.Summary())
	}
	if rep.Evicted != "Preempted" || !rep.Suspended {
		t.Errorf("the queued job was evicted for %q (suspended: %v): want Preempted, its Job suspended", rep.Evicted, rep.Suspended)
	}
	sidecars := resource.MustParse("100m") // 2 sidecars of 50m; the trainers ask for none
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		usage, asked := rep.Usage[name], rep.PodRequests[name]
		if usage.Cmp(asked) != 0 {
			t.Errorf("Kueue counted %s %s for the job; its pods ask for %s", name, usage.String(), asked.String())
		}
	}
	if cpu := rep.Usage[corev1.ResourceCPU]; cpu.Cmp(sidecars) != 0 {
		t.Errorf("Kueue counted cpu %s: want the sidecars' %s", cpu.String(), sidecars.String())
	}
	if len(rep.Attempts) != 1 {
		t.Errorf("the job's pods had attempts %v: a suspended Job keeps its UID, its attempt", rep.Attempts)
	}
}
