package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// A LeRobot dataset with cameras is indexed and planned by any build (the
// laptop's portable CLI plans what the image's sidecar serves): plan
// lists its ids, whether or not this binary decodes video; only serve
// refuses cameras it cannot decode.
func TestPlanOfALeRobotDatasetNeedsNoVideoDecoder(t *testing.T) {
	golden := testenv.GoldenAt(t, filepath.Join("..", "..", "sidecar", "format", "lerobot", "testdata", "golden"))
	manifest := multicamManifest(t, golden, `lerobot: {deltaTimestamps: [{key: observation.images.front, seconds: ["-0.1", "0"]}]}`, 2, 4)
	if out, err := runCLI(t, "index", "-f", manifest); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	out, err := runCLI(t, "plan", "-f", manifest, "--ids", "--world-size", "2", "--epoch", "0")
	if err != nil {
		t.Fatalf("plan of a dataset with cameras (FFmpeg linked: %v): %v\n%s", video.Available, err, out)
	}
	if lines := strings.Count(out, `"ids":`); lines != 2*37 {
		t.Fatalf("plan --ids printed %d batches, want 37 steps of 2 ranks:\n%s", lines, out)
	}
}

// Tasks are selected with a row filter (spec.streams[].filter) on the
// task string the format serves, or on task_index: the plan holds the
// frames of those tasks, as many as LeRobotDataset's items of them.
func TestALeRobotStreamSelectsTasksWithAFilter(t *testing.T) {
	golden := testenv.GoldenAt(t, filepath.Join("..", "..", "sidecar", "format", "lerobot", "testdata", "golden"))
	frames := map[string]int{} // LeRobotDataset's items per task
	for _, line := range strings.Split(strings.TrimSpace(string(testenv.GoldenFile(t, golden, "multicam-plain.jsonl"))), "\n") {
		var item struct {
			Task      string `json:"task"`
			TaskIndex int    `json:"task_index"`
		}
		if err := json.Unmarshal([]byte(line), &item); err != nil {
			t.Fatal(err)
		}
		frames[item.Task]++
		frames["task_index == "+strconv.Itoa(item.TaskIndex)]++
	}
	if len(frames) != 4 {
		t.Fatalf("the recording's multicam dataset has tasks %v, want two", frames)
	}
	for what, want := range frames {
		filter := what
		if !strings.HasPrefix(what, "task_index") {
			filter = "task == '" + what + "'"
		}
		t.Run(filter, func(t *testing.T) {
			manifest := multicamManifest(t, golden, `filter: "`+filter+`"`, 1, 1)
			if out, err := runCLI(t, "index", "-f", manifest); err != nil {
				t.Fatalf("index: %v\n%s", err, out)
			}
			out, err := runCLI(t, "plan", "-f", manifest, "--ids", "--world-size", "1", "--epoch", "0")
			if err != nil {
				t.Fatalf("plan: %v\n%s", err, out)
			}
			if got := strings.Count(out, `"ids":`); got != want {
				t.Fatalf("the plan has %d samples, LeRobotDataset %d frames of %s", got, want, what)
			}
		})
	}
}

// multicamManifest writes a manifest of one lerobot stream over a copy of
// the recording's multicam dataset, with the stream's setting (a line of
// YAML), and returns its path.
func multicamManifest(t *testing.T, golden, setting string, splits, batch int) string {
	t.Helper()
	dir := testenv.GoldenCopy(t, golden, "multicam")
	manifest := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: robots}
spec:
  streams:
  - name: robot
    format: lerobot
    source: {uri: "file://%s/"}
    %s
  numSplits: %d
  globalBatchSize: %d
`, dir, setting, splits, batch)), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifest
}
