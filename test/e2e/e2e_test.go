//go:build e2e

// The end-to-end test: the scenario of test/e2e/scenario on the local
// cluster (hack/e2e.sh brings it up, imports the images and runs this).
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// clusterOptions are the local cluster's, as hack/e2e.sh sets them up,
// and a context of 15 minutes for a story.
func clusterOptions(t *testing.T, samples int) (scenario.Options, context.Context) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, nodeIP := os.Getenv("KUBECONFIG"), os.Getenv("SHARDFEED_CLUSTER_NODE_IP")
	if kubeconfig == "" || nodeIP == "" {
		t.Fatal("no cluster: run this through hack/e2e.sh (make test-e2e), which brings the local cluster up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	return scenario.Options{Root: root, Bin: filepath.Join(root, "bin"), Kubeconfig: kubeconfig, NodeIP: nodeIP,
		Out: logWriter{t}, Samples: samples}, ctx
}

func TestEndToEndTrainingThroughAKillAndARescaleIsExactlyOnce(t *testing.T) {
	const samples = 1600
	o, ctx := clusterOptions(t, samples)
	rep, err := scenario.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep.Summary())
	// The trainers ask for their batches in shared memory: the sidecar's
	// memfd segments cross to the trainer's container over the socket.
	t.Logf("%d of %d steps trained came in the sidecar's shared memory", rep.HandedOff, rep.Trained)
	if rep.HandedOff < rep.Trained/2 {
		t.Errorf("only %d of %d steps came in the sidecar's shared memory: the hand-off across the pod's containers does not work", rep.HandedOff, rep.Trained)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if !rep.OK() {
		t.Errorf("the committed lineage is not exactly the plan: %s", rep.Summary())
	}
	// The text stream's filter keeps its even ids: half of it.
	if rep.Totals != samples+samples/2 {
		t.Errorf("the dataset reports %d samples, want %d", rep.Totals, samples+samples/2)
	}
	for _, p := range rep.InjectedSpecProblems {
		t.Error(p)
	}
	if !rep.SidecarFirst {
		t.Error("on some pod the trainer started before the sidecar")
	}
	if rep.SidecarRestarts < 1 {
		t.Error("the killed sidecar was not restarted")
	}
	if !strings.Contains(rep.RejectedMissingDataset, `TrainingDataset "missing", which does not exist`) {
		t.Errorf("a pod for a missing dataset was refused with %q", rep.RejectedMissingDataset)
	}
	if rep.Retrained == 0 {
		t.Error("no step was retrained after the pod was deleted: the kill did not happen mid-epoch")
	}
	if !rep.CleanedUp {
		t.Error("deleting the dataset left its objects behind")
	}
	if l := rep.Lineage; l.Repeated != 2*16 || l.ScheduleSkipped != 2*16 {
		t.Errorf("the schedule's repeated steps count %d samples and its skipped data %d, want 32 each", l.Repeated, l.ScheduleSkipped)
	}
	if !rep.Packed.OK() || rep.Packed.Retrained == 0 || len(rep.Packed.Worlds) != 2 {
		t.Errorf("the packed job (%d packs) through a deleted pod and a rescale: %s", rep.PackedSamples, rep.Packed.Summary())
	}
	if !rep.LeRobot.OK() || rep.LeRobot.Retrained == 0 || len(rep.LeRobot.Worlds) != 2 || rep.LeRobotSidecarRestarts < 1 {
		t.Errorf("the LeRobot job (%d frames, sidecar restarts %d) through a killed sidecar and a rescale: %s",
			rep.LeRobotSamples, rep.LeRobotSidecarRestarts, rep.LeRobot.Summary())
	}
	if rep.LeRobotSamples != 150 {
		t.Errorf("the LeRobot dataset reports %d frames, want LeRobot's 150", rep.LeRobotSamples)
	}
	if rep.HostNetwork == "" {
		t.Error("the hostNetwork pods were not checked")
	}
}
