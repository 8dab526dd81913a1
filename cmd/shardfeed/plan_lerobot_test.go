package main

import (
	"os"
	"path/filepath"
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
	dir := testenv.GoldenCopy(t, golden, "multicam")
	manifest := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: robots}
spec:
  streams:
  - name: robot
    format: lerobot
    source: {uri: "file://`+dir+`/"}
    lerobot: {deltaTimestamps: [{key: observation.images.front, seconds: ["-0.1", "0"]}]}
  numSplits: 2
  globalBatchSize: 4
`), 0o600); err != nil {
		t.Fatal(err)
	}
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
