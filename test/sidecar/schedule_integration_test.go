//go:build integration

package sidecar_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

const scheduleSpec = `  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 7, blockSize: 32}
  schedule:
    phases:
    - {startStep: 6, globalBatchSize: 16}
    - {startStep: 20, skipSteps: 3}
    - {startStep: 30, repeatSteps: 4}
    - startStep: 40
      proportions: [{stream: m, proportion: "1"}, {stream: p, proportion: "3"}]
`

// TestIntegrationAScheduleThroughAKillAndARescale: real sidecars serve a
// scheduled dataset (a batch-size ramp-up, skipped and repeated steps, a
// curriculum) through a kill and a 4 → 2 pod rescale: every batch of the
// committed lineage is `plan --ids`'s, and no sample is drawn twice
// within its stream's pass. A later sidecar with a phase appended
// registers; one with a phase changed is refused, naming it.
func TestIntegrationAScheduleThroughAKillAndARescale(t *testing.T) {
	ds := newDataset(t, 600, 600, scheduleSpec)
	lineage, state := trainKillAndResume(t, ds, "sched")

	// Each stream's draws, repeats left out: within a pass, once.
	plan := planIDs(t, ds, 0, 2, 1)
	drawn := map[int64]int{}
	repeated := 0
	for key, b := range lineage {
		if l := plan[[2]int64{key[0], key[1] % 2}]; key[0] >= 30 && key[0] < 34 {
			if l.Phase == nil || !l.Repeated {
				t.Fatalf("step %d: plan --ids says %+v, want a repeated step", key[0], l)
			}
			repeated++
			continue
		}
		for _, id := range b.ids {
			drawn[id]++
		}
	}
	if repeated == 0 {
		t.Fatal("the lineage has no repeated step")
	}
	for id, n := range drawn {
		if n > 4 { // at most the passes a window of this size starts (about 2 400 draws of 1 200 samples)
			t.Fatalf("sample %d drawn %d times in one epoch window", id, n)
		}
	}

	// The schedule grows: a sidecar with one more phase resumes the job;
	// one with a changed phase is refused.
	appended := strings.Replace(mustRead(t, ds.manifest), scheduleSpec, scheduleSpec+"    - {startStep: 200, globalBatchSize: 8}\n", 1)
	changed := strings.Replace(mustRead(t, ds.manifest), "{startStep: 6, globalBatchSize: 16}", "{startStep: 6, globalBatchSize: 24}", 1)
	for _, tc := range []struct {
		manifest string
		refused  string
	}{
		{changed, "ran with schedule phase 0 of hash"},
		{appended, ""},
	} {
		m := filepath.Join(t.TempDir(), "dataset.yaml")
		if err := os.WriteFile(m, []byte(tc.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		other := ds
		other.manifest = m
		if tc.refused == "" {
			srv := startEnv(t, dir, credentialsEnv(t, ds), podArgs(other, dir, state, "sched", "a3", 1, 0)...)
			srv.kill()
			continue
		}
		cmd := exec.Command(binary, podArgs(other, dir, state, "sched", "a3", 1, 0)...)
		cmd.Env = append(os.Environ(), credentialsEnv(t, ds)...)
		b, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("a sidecar with a changed phase served:\n%s", b)
		}
		mustContain(t, string(b), tc.refused, "append new phases after it")
	}
}

// TestIntegrationASidecarRestartsWhenPhasesAreAppended: a sidecar reading
// the mounted plan ConfigMap exits (to restart as a native sidecar) once
// the schedule there has new phases.
func TestIntegrationASidecarRestartsWhenPhasesAreAppended(t *testing.T) {
	ds := newDataset(t, 400, 0, "  numSplits: 2\n  globalBatchSize: 4\n  schedule:\n    phases:\n    - {startStep: 10, globalBatchSize: 8}\n")
	obj, fingerprint := plannedDataset(t, ds)
	dir := t.TempDir()
	planDir := filepath.Join(dir, "plan")
	write := func() { writePlanDir(t, planDir, obj.Spec, fingerprint) }
	write()
	env := append(credentialsEnv(t, ds), "SHARDFEED_DATASET=feed", "SHARDFEED_PLAN_DIR="+planDir, "SHARDFEED_JOB=j",
		"SHARDFEED_RANK_MODE=client", "SHARDFEED_SOCKET="+filepath.Join(dir, "run", "feed.sock"), "SHARDFEED_CACHE_DIR="+filepath.Join(dir, "cache"))
	srv := startEnv(t, dir, env, "sidecar", "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "", "--schedule-poll", "100ms")
	time.Sleep(300 * time.Millisecond)
	select {
	case <-srv.exited:
		t.Fatalf("the sidecar stopped with its schedule unchanged:\n%s", srv.logs())
	default:
	}
	obj.Spec.Schedule.Phases = append(obj.Spec.Schedule.Phases, datav1alpha1.SchedulePhase{StartStep: 50, SkipSteps: 2})
	write()
	select {
	case <-srv.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the sidecar did not restart for the new phase:\n%s", srv.logs())
	}
	var exit *exec.ExitError
	if errors.As(srv.err, &exit) {
		t.Fatalf("the sidecar exited with %v, want a clean exit to restart:\n%s", srv.err, srv.logs())
	}
	mustContain(t, srv.logs(), "The schedule changed: restarting to serve its new phases")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestIntegrationBatchingMethodsOnRealSidecars: stratified and per_stream
// batching served by real sidecars through a kill and a 4 → 2 rescale:
// every batch of the lineage is `plan --ids`'s, and the epoch's samples
// are each trained once.
func TestIntegrationBatchingMethodsOnRealSidecars(t *testing.T) {
	for _, method := range []string{"stratified", "per_stream"} {
		t.Run(method, func(t *testing.T) {
			ds := newDataset(t, 500, 300, "  numSplits: 4\n  globalBatchSize: 8\n  shuffle: {seed: 5, blockSize: 40}\n  batching: "+method+"\n")
			lineage, _ := trainKillAndResume(t, ds, "b-"+strings.ReplaceAll(method, "_", "-"))
			seen := map[int64]int{}
			for _, b := range lineage {
				for i, id := range b.ids {
					if !b.pads[i] {
						seen[id]++
					}
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("sample %d trained %d times", id, n)
				}
			}
			if len(seen) < 700 { // 800 samples, each split's remainders dropped
				t.Fatalf("%d samples trained of 800", len(seen))
			}
		})
	}
}
