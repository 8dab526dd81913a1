//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// The training controllers platform teams run, built from their released
// modules (hack/controllers.sh): a PyTorchJob of the training operator (a
// master and 3 workers) through a deleted worker pod; a JobSet of 2 Jobs of 2 pods through a
// deleted pod and a rescale to 1 Job, each pod's rank the webhook's
// (Job index × 2 + completion index); a Kubeflow Trainer v2 TrainJob on the
// torch-distributed runtime trains on a TrainingDataset through a deleted
// node pod and ends exactly once; its node pods are wired from what
// Trainer sets on them (PET_NNODES, the completion index), not from the
// JobSet's global index.
func TestEndToEndTheTrainingControllersTrainExactlyOnce(t *testing.T) {
	o, ctx := clusterOptions(t, 800)
	rep, err := scenario.RunControllers(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.JobSet.Problems {
		t.Errorf("JobSet: %s", p)
	}
	if !rep.JobSet.OK() || rep.JobSet.Retrained == 0 || len(rep.JobSet.Worlds) != 2 {
		t.Errorf("JobSet: not exactly once through a deleted pod and a rescale 4 → 2: %s", rep.JobSet.Summary())
	}
	if len(rep.JobSetWiring) != 4 {
		t.Errorf("JobSet pods wired as %v, want 4", rep.JobSetWiring)
	}
	for _, w := range rep.JobSetWiring {
		var job, index, rank int
		if _, err := fmt.Sscanf(w, "job %d index %d: %d/4×1 train ", &job, &index, &rank); err != nil || rank != 2*job+index {
			t.Errorf("a JobSet pod wired as %q: want rank = Job index × 2 + completion index, of 4 pods", w)
		}
	}
	for _, p := range rep.PyTorchJob.Problems {
		t.Errorf("PyTorchJob: %s", p)
	}
	if !rep.PyTorchJob.OK() || rep.PyTorchJob.Retrained == 0 {
		t.Errorf("PyTorchJob: not exactly once through a deleted worker pod: %s", rep.PyTorchJob.Summary())
	}
	if len(rep.PyTorchJobWiring) != 4 {
		t.Errorf("PyTorchJob pods wired as %v, want 4", rep.PyTorchJobWiring)
	}
	for _, w := range rep.PyTorchJobWiring {
		var typ string
		var index, rank int
		if _, err := fmt.Sscanf(w, "%s %d: %d/4×1 train ", &typ, &index, &rank); err != nil ||
			(typ == "master" && rank != index) || (typ == "worker" && rank != 1+index) {
			t.Errorf("a PyTorchJob pod wired as %q: want the master rank 0, worker i rank 1 + i, of 4 pods", w)
		}
	}
	for _, p := range rep.TrainJob.Problems {
		t.Errorf("TrainJob: %s", p)
	}
	if !rep.TrainJob.OK() || rep.TrainJob.Retrained == 0 {
		t.Errorf("TrainJob: the committed lineage is not exactly the plan, or no step was trained again after the deleted pod: %s", rep.TrainJob.Summary())
	}
	if len(rep.TrainJobWiring) != 2 {
		t.Fatalf("TrainJob node pods wired as %v, want 2", rep.TrainJobWiring)
	}
	for _, w := range rep.TrainJobWiring {
		if !strings.HasPrefix(w, "0/2×1 train ") && !strings.HasPrefix(w, "1/2×1 train ") {
			t.Errorf("a TrainJob node pod wired as %q: want rank 0 or 1 of 2 pods, 1 process, job train", w)
		}
	}
}
