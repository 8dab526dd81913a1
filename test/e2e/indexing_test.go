//go:build e2e

package e2e

import (
	"testing"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// A dataset with spec.index over a bucket of Parquet and JSON Lines
// objects with no index is indexed by the operator's Jobs (3 pods a
// stream), through a slow store and a parts pod deleted midway, the JSON
// Lines stream's filter measured by the Measure and Join Jobs; it becomes
// Ready, its index and selection are the CLI's byte for byte, and a job of
// 2 pods trains it exactly once.
func TestEndToEndADatasetIndexesItselfInTheCluster(t *testing.T) {
	const samples = 1200
	o, ctx := clusterOptions(t, samples)
	rep, err := scenario.RunIndexing(ctx, o)
	if rep != nil {
		t.Log(rep.Summary())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"text", "lines"} {
		if rep.Objects[stream] != samples {
			t.Errorf("the operator's listing of %s found %d objects, want %d", stream, rep.Objects[stream], samples)
		}
		if !rep.SameAsCLI[stream] {
			t.Errorf("the Jobs' index of %s differs from shardfeed index's", stream)
		}
	}
	if rep.Parts != 3 || rep.KilledPod == "" || rep.KilledAt <= 0 || !rep.Replaced {
		t.Errorf("the parts (%d) were not indexed through a pod killed midway: %s", rep.Parts, rep.Summary())
	}
	// The lines' filter keeps two samples in three (id % 3 != 0).
	if want := int64(samples + samples*2/3); rep.Indexed != "2/2" || rep.Samples != want {
		t.Errorf("Ready with status.indexed %q and %d samples, want 2/2 and %d", rep.Indexed, rep.Samples, want)
	}
	if rep.Measured != 3 {
		t.Errorf("the lines' Measure Job completed %d parts, want 3", rep.Measured)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if !rep.OK() {
		t.Errorf("the job did not train the dataset exactly once: %s", rep.Lineage.Summary())
	}
}
