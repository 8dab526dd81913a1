//go:build integration

package sidecar_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// hiveSelection is the selection test/orc/stream.py filters hive.jsonl by.
const hiveSelection = "region == 'eu' && date >= '2024-01-02' && bucket < 2"

// pyarrowRows reads a stream.py oracle: the rows pyarrow reads, by id, as
// canonical JSON.
func pyarrowRows(t *testing.T, path string) map[int64]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[int64]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct{ ID int64 }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		out[row.ID] = testenv.Canonical(t, json.RawMessage(sc.Bytes()))
	}
	return out
}

// TestIntegrationORCAndAHiveTreeExactlyOnceThroughAKillAndARescale is the
// ORC and hive issue's acceptance: pyarrow writes an ORC stream "p" (a
// file in each compression its writer offers) and a hive-partitioned tree
// "h" of Parquet files and one "o" of ORC files (date=/region=/bucket=, a
// null region among them; o's types given, h's inferred); beside the MDS
// stream "m", `shardfeed index -f` indexes them, the trees with a
// selection; the dataset goes through a kill and a 4→2
// rescale exactly once (trainKillAndResume), every row id it trains is
// one pyarrow reads, and a real serve process delivers every row of the
// epoch with the values pyarrow reads, partition columns included.
func TestIntegrationORCAndAHiveTreeExactlyOnceThroughAKillAndARescale(t *testing.T) {
	files := t.TempDir()
	testenv.PythonScript(t, "venv", "test/orc/stream.py", files, "1000")
	// Stream by stream (m, p, h, o): the rows pyarrow reads, by id.
	oracle := []map[int64]string{nil, pyarrowRows(t, filepath.Join(files, "orc.jsonl")),
		pyarrowRows(t, filepath.Join(files, "hive.jsonl")), pyarrowRows(t, filepath.Join(files, "hive-orc.jsonl"))}
	if len(oracle[1]) != 1000 || len(oracle[2]) != 160 || len(oracle[3]) != 160 {
		t.Fatalf("pyarrow reads %d ORC rows and %d and %d selected hive rows", len(oracle[1]), len(oracle[2]), len(oracle[3]))
	}
	bucket, dir := mdsInMinIO(t, 600)
	upload(t, bucket, "p", filepath.Join(files, "orc"))
	upload(t, bucket, "h", filepath.Join(files, "hive"))
	upload(t, bucket, "o", filepath.Join(files, "hive-orc"))
	// The streams, each with its fields (and, to train beside "m", the
	// columns they share with it).
	streamYAML := func(name, format, extra string) string {
		return fmt.Sprintf("  - name: %s\n    format: %s\n    source: {uri: \"s3://%s/%s/\", endpoint: %q, insecure: true}\n%s", name, format, bucket, name, minioServer.URL(), extra)
	}
	selection := fmt.Sprintf("    partitions:\n      select: %q\n", hiveSelection)
	trees := []string{
		streamYAML("p", "orc", ""),
		streamYAML("h", "parquet", selection),
		streamYAML("o", "orc", selection+"      columns: [{name: date, type: utf8}, {name: region, type: utf8}, {name: bucket, type: int32}]\n"),
	}
	shared := "    columns: [id, text, tokens]\n"
	spec := "  numSplits: 4\n  globalBatchSize: 32\n  shuffle: {seed: 5, blockSize: 100}\n"
	path := writeMixedManifest(t, dir, bucket, "", strings.Join([]string{trees[0] + shared, trees[1] + shared, trees[2] + shared, spec}, ""))
	ds := dataset{bucket: bucket, manifest: path, credentials: minioServer.CredentialsDir(t)}

	// Before its index, the tree is refused naming the command.
	out, err := runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials)
	if err == nil || !strings.Contains(out, "index.json") {
		t.Fatalf("plan before the indexes: %v\n%s", err, out)
	}
	for stream, want := range map[string]string{"p": "1000 samples", "h": "160 samples", "o": "160 samples"} {
		if out, err := runShardfeed("index", "-f", ds.manifest, "--stream", stream, "--credentials-dir", ds.credentials); err != nil || !strings.Contains(out, want) {
			t.Fatalf("index --stream %s: %v\n%s\nwant %s", stream, err, out, want)
		}
	}
	// The index's selection is the spec's: another one is refused.
	other := filepath.Join(dir, "other.yaml")
	b, _ := os.ReadFile(path)
	writeFile(t, other, strings.Replace(string(b), "bucket < 2", "bucket < 3", 1))
	if out, err := runShardfeed("plan", "-f", other, "--credentials-dir", ds.credentials); err == nil || !strings.Contains(out, `its index selected "`+hiveSelection+`"`) {
		t.Fatalf("plan with another selection: %v\n%s", err, out)
	}

	// simulate plans the same dataset.
	if out, err := runShardfeed("simulate", "-f", ds.manifest, "--credentials-dir", ds.credentials, "--pods", "2", "-o", "json"); err != nil || !strings.Contains(out, `"steps"`) {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	// convert reads the ORC tree with the same selection: its Parquet has
	// the selected rows, partition columns included.
	if out, err := runShardfeed("convert", "s3://"+bucket+"/o/", "--from", "orc", "--hive", "--select", hiveSelection, "--to", "parquet",
		"--out", "s3://"+bucket+"/converted/", "--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", ds.credentials); err != nil || !strings.Contains(out, "160 samples") {
		t.Fatalf("convert: %v\n%s", err, out)
	}

	lineage, _ := trainKillAndResume(t, ds, "orc")
	for _, b := range lineage {
		for j, id := range b.rowIDs {
			if s := b.streams[j]; s > 0 && oracle[s][id] == "" {
				t.Fatalf("step %d: stream %s served row id %d, which pyarrow does not read", b.step, streamNames[s], id)
			}
		}
	}

	// A serve process per stream, one worker: every row of its epoch,
	// every value of every column, the partitions' included.
	seen := []map[int64]bool{nil}
	manifest := func(s int, fields string) dataset {
		path := filepath.Join(t.TempDir(), streamNames[s]+".yaml")
		writeFile(t, path, "apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: "+streamNames[s]+"}\nspec:\n  streams:\n"+trees[s-1]+spec+fields)
		return dataset{bucket: bucket, manifest: path, credentials: ds.credentials}
	}
	for s := 1; s <= len(trees); s++ {
		rows, _ := serveStream(t, manifest(s, ""), streamNames[s], oracle[s])
		seen = append(seen, rows)
	}
	trees = append(trees, streamYAML("converted", "parquet", ""))
	if rows, _ := serveStream(t, manifest(4, ""), "converted", oracle[3]); len(rows) < 160-32 {
		t.Fatalf("the converted tree served %d rows", len(rows))
	}
	// The epoch drops at most a batch's worth of each split.
	if len(seen[1]) < 1000-32 || len(seen[2]) < 160-32 || len(seen[3]) < 160-32 {
		t.Fatalf("served %d of the ORC rows and %d and %d of the hive rows", len(seen[1]), len(seen[2]), len(seen[3]))
	}

	// A stripe corrupt at the source is skipped under onCorruptShard: skip:
	// its rows are pads, every other row keeps its values.
	key := "p/part-2-snappy.orc"
	obj, err := minioServer.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 3; i < len(data)/3+16; i++ {
		data[i] ^= 0xff
	}
	if _, err := minioServer.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	rows, padded := serveStream(t, manifest(1, "  onCorruptShard: skip\n"), "p", oracle[1])
	if padded == 0 || len(rows) >= len(seen[1]) {
		t.Fatalf("with a corrupt stripe: %d rows served, %d padded; want the stripe's rows padded", len(rows), padded)
	}
}

// serveStream reads the epoch of a dataset of one stream from a serve
// process, one worker, and checks that every row not padded has the values
// of the row of its id in oracle (pyarrow's, as canonical JSON). It returns
// the ids served and the count of rows padded in place of a skipped shard.
func serveStream(t *testing.T, ds dataset, name string, oracle map[int64]string) (map[int64]bool, int) {
	t.Helper()
	srv := serve(t, ds, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := srv.client.Batches(ctx, shardfeed.Request{Rank: 0, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	seen, padded := map[int64]bool{}, 0
	for {
		rec, err := st.Next()
		if errors.Is(err, io.EOF) {
			return seen, padded
		}
		if err != nil {
			t.Fatalf("stream %s: %v\n%s", name, err, srv.logs())
		}
		pads := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnPad)[0]).(*array.Boolean)
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			if pads.Value(i) {
				padded++
				continue
			}
			got := testenv.Canonical(t, testenv.Row(rec, i, func(name string) bool { return !strings.HasPrefix(name, "_shardfeed_") }))
			if want := oracle[ids.Value(i)]; got != want {
				t.Fatalf("stream %s row id %d:\n got %s\nwant %s", name, ids.Value(i), got, want)
			}
			seen[ids.Value(i)] = true
		}
	}
}
