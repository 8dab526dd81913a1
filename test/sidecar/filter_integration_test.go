//go:build integration

package sidecar_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// parquetFilter is the filter test/filter/stream.py applies with pyarrow.
// score == score rules out NaN (a float's statistics leave it out), so
// the row groups' statistics of score decide too.
const parquetFilter = "lang == 'en' && score == score && score >= 0.5"

// TestIntegrationRowFiltersExactlyOnceThroughAKillAndARescale is the row
// filters' acceptance: pyarrow writes a Parquet stream "p" and the ids its
// own filter keeps; beside the MDS stream "m", each stream gets a filter
// (p's over columns it does not serve). The dataset is refused until
// `shardfeed index --filter` has written the selections, which name an
// unknown column with the stream's columns, and skip the row groups whose
// statistics rule the filter out; then it goes through a kill and a 4→2
// rescale exactly once (trainKillAndResume: real sidecar processes equal
// to plan --ids, every value the one written, within the egress bound),
// and the rows it trains are exactly those pyarrow's filter keeps.
func TestIntegrationRowFiltersExactlyOnceThroughAKillAndARescale(t *testing.T) {
	files := t.TempDir()
	testenv.PythonScript(t, "venv", "test/filter/stream.py", files)
	var oracle []int64
	b, err := os.ReadFile(filepath.Join(files, "filtered.json"))
	if err == nil {
		err = json.Unmarshal(b, &oracle)
	}
	if err != nil || len(oracle) != 132 {
		t.Fatalf("pyarrow's filter keeps %d rows (%v), want 132", len(oracle), err)
	}
	bucket, dir := mdsInMinIO(t, 600)
	upload(t, bucket, "p", filepath.Join(files, "parquet"))
	p := fmt.Sprintf("  - name: p\n    format: parquet\n    source: {uri: \"s3://%s/p/\", endpoint: %q, insecure: true}\n    filter: %q\n    columns: [id, text, tokens]\n",
		bucket, minioServer.URL(), parquetFilter)
	spec := "  numSplits: 4\n  globalBatchSize: 8\n  dropLast: false\n  shuffle: {seed: 9, blockSize: 16}\n"
	path := writeMixedManifest(t, dir, bucket, "    filter: \"id % 5 == 0\"\n", p+spec)
	ds := dataset{bucket: bucket, manifest: path, credentials: minioServer.CredentialsDir(t)}

	// Before its selection, a filtered stream is refused, naming the command.
	out, err := runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials)
	if err == nil || !strings.Contains(out, "has no selection for its filter") || !strings.Contains(out, "--filter 'id % 5 == 0'") {
		t.Fatalf("plan before the selections: %v\n%s", err, out)
	}
	// An unknown column is refused at index time, naming the columns.
	out, err = runShardfeed("index", "s3://"+bucket+"/p/", "--format", "parquet", "--filter", "langue == 'en'",
		"--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", ds.credentials)
	if err == nil || !strings.Contains(out, "no column langue: the columns are id, text, lang, score") {
		t.Fatalf("index --filter with an unknown column: %v\n%s", err, out)
	}
	for stream, want := range map[string][]string{
		"p": {"132 of 1200 samples match", "in 8 of 24 shards; 16 shards ruled out by their statistics, unread"},
		"m": {"120 of 600 samples match"},
	} {
		out, err := runShardfeed("index", "-f", ds.manifest, "--stream", stream, "--credentials-dir", ds.credentials)
		if err != nil {
			t.Fatalf("index --stream %s: %v\n%s", stream, err, out)
		}
		mustContain(t, out, want...)
	}
	out, err = runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	mustContain(t, out, "(version 2, random batching)", "filter  p: "+parquetFilter, "132 matching samples in 8 of 24 shards", "252 samples in 4 splits of 63")

	lineage, _ := trainKillAndResume(t, ds, "filter")
	served := [2][]int64{}
	for _, b := range lineage {
		for j, id := range b.rowIDs {
			if !b.pads[j] {
				served[b.streams[j]] = append(served[b.streams[j]], id)
			}
		}
	}
	slices.Sort(served[0])
	slices.Sort(served[1])
	var fifths []int64
	for id := int64(0); id < 600; id += 5 {
		fifths = append(fifths, id)
	}
	if fmt.Sprint(served[0]) != fmt.Sprint(fifths) {
		t.Errorf("stream m trained rows %v, want the multiples of 5 below 600", served[0])
	}
	if fmt.Sprint(served[1]) != fmt.Sprint(oracle) {
		t.Errorf("stream p trained rows\n %v\npyarrow's filter keeps\n %v", served[1], oracle)
	}
}
