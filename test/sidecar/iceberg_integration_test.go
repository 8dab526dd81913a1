//go:build integration

package sidecar_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// TestIntegrationAnIcebergTableAndMDSExactlyOnceThroughAKillAndARescale is
// the Iceberg issue's acceptance: a dataset of an MDS stream and an Iceberg
// table with position deletes (written by pyiceberg through Iceberg's own
// REST catalog server) is refused until its index exists, naming the
// command; that command, run as printed, indexes the table; the dataset
// then goes through a kill and a 4→2 rescale exactly once
// (trainKillAndResume), and each of the table's samples in its batches is
// the row pyiceberg reads at that place of the indexed snapshot, deletes
// applied (so a deleted row never reaches a batch). When the table then
// moves on and is indexed again, the job's next pod refuses to resume,
// naming both snapshots.
func TestIntegrationAnIcebergTableAndMDSExactlyOnceThroughAKillAndARescale(t *testing.T) {
	// The table's text is "p-<id>", what checkValues expects of stream "p".
	lake := testenv.NewIcebergLake(t, minioServer, "rest", "--tables", "posdel", "--text-prefix", "p-")
	bucket, dir := mdsInMinIO(t, 600)
	path := writeMixedManifest(t, dir, bucket, "    columns: [id, text]\n", fmt.Sprintf(`  - name: p
    format: iceberg
    source: {uri: "s3://%s/.shardfeed/p/", endpoint: %q, insecure: true}
    iceberg:
      catalog: {type: rest, uri: %q}
      table: ml.posdel
  numSplits: 4
  globalBatchSize: 16
  shuffle: {seed: 11, blockSize: 100}
`, lake.Bucket, minioServer.URL(), lake.CatalogURI))
	ds := dataset{bucket: bucket, manifest: path, credentials: minioServer.CredentialsDir(t)}

	out, err := runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials)
	_, command, ok := strings.Cut(out, "write it with: ")
	if err == nil || !ok {
		t.Fatalf("plan before the table's index: %v\n%s\nwant a refusal naming the command", err, out)
	}
	command, _, _ = strings.Cut(command, "\n")
	args := strings.Fields(command)
	if len(args) < 2 || args[0] != "shardfeed" || args[1] != "index" {
		t.Fatalf("the refusal names %q, not a shardfeed index command", command)
	}
	if out, err := runShardfeed(append(args[1:], "--credentials-dir", ds.credentials)...); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// The manifest's stream says the same: index -f resolves the same table.
	if out, err := runShardfeed("index", "-f", ds.manifest, "--stream", "p", "--dry-run", "--credentials-dir", ds.credentials); err != nil || !strings.Contains(out, "245 samples") {
		t.Fatalf("index -f --stream p: %v\n%s", err, out)
	}

	// Sample k of the table's stream (id 600+k: "m" has 600) is the k-th
	// row pyiceberg reads of the indexed snapshot, in the order of its one
	// data file, deletes applied.
	var read []int64
	for _, row := range lake.Read(t, "posdel", lake.Snapshots["posdel"]) {
		var r struct{ ID int64 }
		if err := json.Unmarshal([]byte(row), &r); err != nil {
			t.Fatal(err)
		}
		read = append(read, r.ID)
	}
	if len(read) != 245 {
		t.Fatalf("pyiceberg reads %d rows of the table, want 300 less 55 deleted", len(read))
	}
	lineage, state := trainKillAndResume(t, ds, "iceberg")
	trained := tableRowsTrained(t, lineage, read, "pyiceberg", nil)
	// The epoch drops 13 of its 845 samples (the odd one of the 4 splits
	// and each split's incomplete last batch): most of the table remains.
	if len(trained) < 245-13 {
		t.Errorf("trained on %d rows of the table's 245", len(trained))
	}

	// The table moves on and is indexed again: the job's next pod refuses
	// to resume on the new snapshot, naming both.
	var moved map[string]int64
	if err := json.Unmarshal(lake.Tables(t, "append", "posdel"), &moved); err != nil {
		t.Fatal(err)
	}
	if out, err := runShardfeed(append(args[1:], "--credentials-dir", ds.credentials)...); err != nil || !strings.Contains(out, "345 samples") {
		t.Fatalf("indexing the moved table: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, podArgs(ds, t.TempDir(), state, "iceberg", "a3", 2, 0)...)
	cmd.Env = append(os.Environ(), credentialsEnv(t, ds)...)
	out, err = runWithin(cmd, time.Minute)
	want := fmt.Sprintf("spec.streams[1].snapshot: %d, now %d", lake.Snapshots["posdel"], moved["posdel"])
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a pod resuming on the moved table: %v\n%s\nwant a refusal naming %q", err, out, want)
	}
}

// tableRowsTrained checks that each sample of a table stream (stream 1,
// its ids from 600: "m" has 600) is the row its reader (who) reads at that
// place, and that refused (when set) says nothing of it; it returns the
// rows trained (pads left out).
func tableRowsTrained(t *testing.T, lineage map[[2]int64]batch, read []int64, who string, refused func(row int64) string) map[int64]bool {
	t.Helper()
	trained := map[int64]bool{}
	for _, b := range lineage {
		for j, id := range b.ids {
			if b.streams[j] != 1 {
				continue
			}
			k := id - 600
			if k < 0 || k >= int64(len(read)) || b.rowIDs[j] != read[k] {
				t.Fatalf("step %d: sample %d of the table is row id %d, %s reads %v there", b.step, k, b.rowIDs[j], who, read[min(max(k, 0), int64(len(read))-1)])
			}
			if refused != nil {
				if why := refused(b.rowIDs[j]); why != "" {
					t.Fatalf("step %d: row %d, %s, reached a batch", b.step, b.rowIDs[j], why)
				}
			}
			if !b.pads[j] {
				trained[b.rowIDs[j]] = true
			}
		}
	}
	return trained
}

// runWithin runs cmd to its end, killed after d, and returns its output.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.String(), err
}
