//go:build integration

package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// TestIntegrationALanceTableAndMDSExactlyOnceThroughAKillAndARescale is
// the Lance issue's acceptance: a dataset of an MDS stream and a Lance
// table on MinIO (written by pylance: several fragments, deletions, a row
// of 4 KiB of pixels the stream does not serve, a row filter) is refused
// until its index exists, naming the command; that command, run as
// printed, indexes only the stream's columns and writes the filter's
// selection; the dataset goes through a kill and a 4→2 rescale exactly once
// (trainKillAndResume: the lineage equals plan --ids at both world sizes,
// no pod over the plan's bound), each of the table's samples is the row
// pylance reads at that place of the indexed version with its own filter
// (no deleted or filtered-out row trains), and the pixels' bytes are
// never fetched. When the table then moves on and is indexed
// again, the job's next pod refuses to resume, naming both versions.
func TestIntegrationALanceTableAndMDSExactlyOnceThroughAKillAndARescale(t *testing.T) {
	local := filepath.Join(t.TempDir(), "p.lance")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", local, "--case", "train", "--version", "2.1")
	bucket, dir := mdsInMinIO(t, 600)
	upload(t, bucket, "p.lance", local)
	path := writeMixedManifest(t, dir, bucket, "    columns: [id, text]\n", fmt.Sprintf(`  - name: p
    format: lance
    source: {uri: "s3://%s/p.lance/", endpoint: %q, insecure: true}
    columns: [id, text]
    filter: "id %% 5 != 1"
  numSplits: 4
  globalBatchSize: 16
  shuffle: {seed: 11, blockSize: 100}
`, bucket, minioServer.URL()))
	ds := dataset{bucket: bucket, manifest: path, credentials: minioServer.CredentialsDir(t)}

	out, err := runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials)
	_, command, ok := strings.Cut(out, "write one with: ")
	if err == nil || !ok {
		t.Fatalf("plan before the table's index: %v\n%s\nwant a refusal naming the command", err, out)
	}
	command, _, _ = strings.Cut(command, "\n")
	if !strings.Contains(command, "--format lance") || !strings.Contains(command, "--columns 'id,text'") || !strings.Contains(command, "--filter 'id % 5 != 1'") {
		t.Fatalf("the refusal names %q, not an index of the stream's columns", command)
	}
	// Run as printed (a shell parses its quotes).
	if b, err := exec.Command("sh", "-c", strings.Replace(command, "shardfeed", binary, 1)+" --credentials-dir "+ds.credentials).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, b)
	}
	// The manifest's stream says the same.
	if out, err := runShardfeed("index", "-f", ds.manifest, "--stream", "p", "--dry-run", "--credentials-dir", ds.credentials); err != nil || !strings.Contains(out, "171 of 214 samples match") {
		t.Fatalf("index -f --stream p: %v\n%s", err, out)
	}

	// Sample k of the table's stream (id 600+k: "m" has 600) is the k-th
	// live row pylance reads of the indexed version with its own filter.
	var read []int64
	for _, line := range strings.Split(strings.TrimSpace(string(testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "read", local,
		"--columns", "id", "--filter", "id % 5 != 1"))), "\n") {
		var r struct{ ID int64 }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		read = append(read, r.ID)
	}
	if len(read) != 171 { // 300 rows less id%7=3 (43) and ids 210–259 (50), 7 of them both: 214, of which the filter keeps 171
		t.Fatalf("pylance reads %d live rows that the filter keeps", len(read))
	}

	// The index's shards (their ranges and tails: all a pod fetches of the
	// table) hold a sliver of the pixels' 1.2 MiB.
	type span struct {
		Object string `json:"object"`
		Length int64  `json:"length"`
	}
	var idx struct {
		Shards []struct {
			Ranges []span `json:"ranges"`
			Files  []struct {
				Tail span `json:"tail"`
			} `json:"files"`
		} `json:"shards"`
		Lance struct {
			Version uint64   `json:"version"`
			Columns []string `json:"columns"`
		} `json:"lance"`
	}
	raw := getObject(t, bucket, "p.lance/_shardfeed/index.json")
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	var lanceBytes int64
	tails := map[string]bool{} // a file's tail is fetched once, shared by its shards
	for _, s := range idx.Shards {
		for _, r := range s.Ranges {
			lanceBytes += r.Length
		}
		for _, f := range s.Files {
			if !tails[f.Tail.Object] {
				tails[f.Tail.Object] = true
				lanceBytes += f.Tail.Length
			}
		}
	}
	if strings.Join(idx.Lance.Columns, ",") != "id,text" || lanceBytes == 0 || lanceBytes > 300*4096/20 {
		t.Fatalf("the index projects %v and its %d shards take %d bytes: want id,text in under 5%% of the pixels' %d",
			idx.Lance.Columns, len(idx.Shards), lanceBytes, 300*4096)
	}

	t.Logf("the index of id and text: %d shards, %d bytes of ranges and tails (the pixels: %d)", len(idx.Shards), lanceBytes, 300*4096)
	lineage, state := trainKillAndResume(t, ds, "lance")
	trained := tableRowsTrained(t, lineage, read, "pylance", func(row int64) string {
		if row%7 == 3 || (row >= 210 && row < 260) || row%5 == 1 {
			return "deleted or filtered out"
		}
		return ""
	})
	if len(trained) < len(read)-13 {
		t.Errorf("trained on %d rows of the table's %d", len(trained), len(read))
	}

	// The table moves on and is indexed again: the job's next pod refuses
	// to resume on the new version, naming both.
	testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", local, "--case", "train-append")
	upload(t, bucket, "p.lance", local)
	if out, err := runShardfeed("index", "-f", ds.manifest, "--stream", "p", "--credentials-dir", ds.credentials); err != nil || !strings.Contains(out, "251 of 314 samples match") {
		t.Fatalf("indexing the moved table: %v\n%s", err, out)
	}
	cmd := exec.Command(binary, podArgs(ds, t.TempDir(), state, "lance", "a3", 2, 0)...)
	cmd.Env = append(os.Environ(), credentialsEnv(t, ds)...)
	out, err = runWithin(cmd, time.Minute)
	want := fmt.Sprintf("spec.streams[1].snapshot: lance:v%d, now lance:v%d", idx.Lance.Version, idx.Lance.Version+1)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("a pod resuming on the moved table: %v\n%s\nwant a refusal naming %q", err, out, want)
	}
}

// getObject reads an object of the test's MinIO.
func getObject(t *testing.T, bucket, key string) []byte {
	t.Helper()
	o, err := minioServer.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Close() }()
	b, err := io.ReadAll(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// On a laptop: a Lance dataset in a local directory, indexed, sized by
// simulate, and served by `shardfeed serve` (what FeedDataset.from_manifest
// runs) for a whole epoch: every live row once, its text the one written.
func TestIntegrationServeReadsALocalLanceTable(t *testing.T) {
	dir := t.TempDir()
	// Stream "m": the sidecar tests' first stream, whose text is "m-<id>".
	testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", filepath.Join(dir, "m.lance"), "--case", "train", "--version", "2.0", "--text-prefix", "m")
	manifest := filepath.Join(dir, "dataset.yaml")
	writeFile(t, manifest, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: laptop}
spec:
  streams:
  - name: m
    format: lance
    source: {uri: m.lance/}
    lance: {tag: pinned}
    columns: [id, text]
  numSplits: 1
  globalBatchSize: 10
  dropLast: false
`)
	if out, err := runShardfeed("index", "-f", manifest); err != nil || !strings.Contains(out, "214 samples") {
		t.Fatalf("index: %v\n%s", err, out)
	}
	if out, err := runShardfeed("simulate", "-f", manifest); err != nil || !strings.Contains(out, "22 steps of 10 samples") {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	srv := serve(t, dataset{manifest: manifest, credentials: t.TempDir()}, t.TempDir())
	got, err := readAll(context.Background(), srv.client, shardfeed.Request{Rank: 0, World: 1}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, srv.logs())
	}
	seen := map[int64]bool{}
	for _, b := range got {
		for j, id := range b.rowIDs {
			if b.pads[j] {
				continue
			}
			if seen[id] || id%7 == 3 || (id >= 210 && id < 260) || id >= 300 {
				t.Fatalf("step %d: row %d served twice, or deleted, or not of the tagged version", b.step, id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 214 {
		t.Fatalf("an epoch served %d of the 214 live rows", len(seen))
	}
}
