//go:build integration

package sidecar_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// mixedRow is a served row of the images-and-tokens dataset: its stream
// and what it holds.
type mixedRow struct {
	stream  int16
	key     string // an image's
	caption string
	image   bool // a decoded image, not null
	tokens  string
	pad     bool
}

type mixedBatch struct {
	step int64
	ids  []int64
	rows []mixedRow
}

func readMixed(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, each func(mixedBatch) bool) ([]mixedBatch, error) {
	return readStream(ctx, c, req, func(rec arrow.RecordBatch) (mixedBatch, error) {
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		b := mixedBatch{step: col(pipeline.ColumnStep).(*array.Int64).Value(0), ids: slices.Clone(col(pipeline.ColumnIndex).(*array.Int64).Int64Values())}
		streams, pads := col(pipeline.ColumnStream).(*array.Int16), col(pipeline.ColumnPad).(*array.Boolean)
		keys, captions := col("__key__").(*array.String), col("json").(*array.String)
		images, tokens := col("jpg").(*array.FixedSizeList), col("tokens").(*array.List)
		if n := images.DataType().(*arrow.FixedSizeListType).Len(); n != 16*16*3 {
			return b, fmt.Errorf("step %d: images of %d bytes, want decoded 16×16×3", b.step, n)
		}
		for r := range int(rec.NumRows()) {
			row := mixedRow{stream: streams.Value(r), pad: pads.Value(r), image: images.IsValid(r)}
			if keys.IsValid(r) {
				row.key, row.caption = keys.Value(r), captions.Value(r)
			}
			if tokens.IsValid(r) {
				row.tokens = fmt.Sprint(testenv.Plain(tokens, r))
			}
			b.rows = append(b.rows, row)
		}
		return b, nil
	}, each)
}

// TestIntegrationWebDatasetImagesBesideMegatronTokens is the formats
// issue's acceptance: a dataset of a WebDataset stream (JPEGs with JSON
// captions, written by webdataset's TarWriter, decoded to 16×16 in the
// sidecar) beside a Megatron token stream (written by megatron-core), each
// indexed by shardfeed index and served together (spec.missingColumns:
// null), through a kill and a 4 → 2 rescale: the committed lineage is
// `plan --ids`'s at both world sizes, no resumed pod fetches over its
// bound, each image row carries its own caption and a decoded image, and
// each token row the document megatron-core reads for it.
func TestIntegrationWebDatasetImagesBesideMegatronTokens(t *testing.T) {
	bucket, dir := minioServer.Bucket(t), t.TempDir()
	wds, meg := filepath.Join(dir, "wds"), filepath.Join(dir, "meg")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "write", wds, "--tars", "3", "--samples", "40", "--image-bytes", "900")
	if err := os.MkdirAll(meg, 0o755); err != nil {
		t.Fatal(err)
	}
	out := testenv.PythonScript(t, "venv-oracle", "test/oracle/megatron_oracle.py", "write", filepath.Join(meg, "docs"), "--case", "gpt", "--docs", "150", "--read", "document")
	_, lines, _ := bytes.Cut(out, []byte("\n"))
	var docs []string
	sc := bufio.NewScanner(bytes.NewReader(lines))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var d struct{ Tokens []int64 }
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, fmt.Sprint(d.Tokens))
	}
	upload(t, bucket, "wds", wds)
	upload(t, bucket, "meg", meg)
	ds := dataset{bucket: bucket, credentials: minioServer.CredentialsDir(t), manifest: filepath.Join(dir, "dataset.yaml")}
	for _, s := range []struct{ prefix, format, size string }{{"wds", "webdataset", "6KiB"}, {"meg", "megatron", "3KiB"}} {
		args := []string{"index", "s3://" + bucket + "/" + s.prefix + "/", "--format", s.format, "--shard-size", s.size,
			"--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", ds.credentials}
		if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
			t.Fatalf("index %s: %v\n%s", s.prefix, err, out)
		}
	}
	writeFile(t, ds.manifest, fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: mixed}
spec:
  streams:
  - name: images
    format: webdataset
    source: {uri: "s3://%[1]s/wds/", endpoint: %[2]q, insecure: true}
  - name: tokens
    format: megatron
    source: {uri: "s3://%[1]s/meg/", endpoint: %[2]q, insecure: true}
  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 3, blockSize: 16}
  missingColumns: "null"
  decode:
  - {column: jpg, image: {height: 16, width: 16}}
`, bucket, minioServer.URL()))
	// Without missingColumns the streams' columns differ: refused, with
	// the way out named.
	refused := filepath.Join(dir, "refused.yaml")
	manifest, _ := os.ReadFile(ds.manifest)
	writeFile(t, refused, strings.Replace(string(manifest), "  missingColumns: \"null\"\n", "", 1))
	if out, err := exec.Command(binary, "plan", "-f", refused, "--credentials-dir", ds.credentials).CombinedOutput(); err == nil {
		t.Fatalf("plan of streams of different columns without spec.missingColumns:\n%s", out)
	} else {
		mustContain(t, string(out), `stream "tokens" has columns [tokens]`, "spec.missingColumns: null")
	}

	r := trainThroughARescale(t, ds, "mixed", readMixed, func(b mixedBatch) int64 { return b.step })
	images, tokens := 0, 0
	for k := range r.steps {
		world, plan := r.planAt(k)
		for rank := range world {
			got, want := r.lineage[[2]int64{k, int64(rank)}], plan[[2]int64{k, int64(rank)}]
			if fmt.Sprint(got.ids) != fmt.Sprint(want.IDs) {
				t.Fatalf("step %d rank %d of %d: the lineage trained %v, plan --ids says %v", k, rank, world, got.ids, want.IDs)
			}
			for i, row := range got.rows {
				switch row.stream {
				case 0: // an image: its own caption, decoded, no tokens
					var c struct{ Caption string }
					if err := json.Unmarshal([]byte(row.caption), &c); err != nil || !row.image || row.tokens != "" {
						t.Fatalf("step %d: image row %+v: %v", k, row, err)
					}
					var tar, n int
					if _, err := fmt.Sscanf(row.key, "s%04d%05d", &tar, &n); err != nil || c.Caption != fmt.Sprintf("a picture %d/%d ✓", tar, n) {
						t.Fatalf("step %d: sample %s has the caption %q", k, row.key, c.Caption)
					}
					images++
				case 1: // a document: megatron-core's, no image
					doc := got.ids[i] - 120 // the images stream's 120 samples come first
					if row.image || row.key != "" || doc < 0 || doc >= int64(len(docs)) || row.tokens != docs[doc] {
						t.Fatalf("step %d: token row %d (document %d) is %+v, megatron-core reads %.80s", k, got.ids[i], doc, row, docs[min(max(doc, 0), int64(len(docs)-1))])
					}
					tokens++
				}
			}
		}
	}
	t.Logf("%d steps trained: %d image rows, %d token rows", r.steps, images, tokens)
	if images < 60 || tokens < 60 {
		t.Fatalf("%d image rows and %d token rows trained: both streams should be served", images, tokens)
	}
}

// TestIntegrationADamagedTarShardIsSkippedUnderThePolicy: a WebDataset
// tar indexed from its headers (no content hash) whose header is damaged
// afterwards: its decode fails on the header's checksum, and under
// onCorruptShard: skip that shard's samples arrive as pad rows with their
// planned ids, every other sample once, and the state names the shard and
// the reason.
func TestIntegrationADamagedTarShardIsSkippedUnderThePolicy(t *testing.T) {
	bucket, dir := minioServer.Bucket(t), t.TempDir()
	var w struct {
		Tars    []string `json:"tars"`
		Members [][]any  `json:"members"`
	}
	if err := json.Unmarshal(testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "write", dir, "--tars", "3", "--samples", "20", "--image-bytes", "600"), &w); err != nil {
		t.Fatal(err)
	}
	upload(t, bucket, "wds", dir)
	ds := dataset{bucket: bucket, credentials: minioServer.CredentialsDir(t), manifest: filepath.Join(t.TempDir(), "dataset.yaml")}
	if out, err := exec.Command(binary, "index", "s3://"+bucket+"/wds/", "--format", "webdataset", "--shard-size", "8KiB",
		"--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", ds.credentials).CombinedOutput(); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	writeFile(t, ds.manifest, fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: damaged}
spec:
  streams:
  - name: images
    format: webdataset
    source: {uri: "s3://%s/wds/", endpoint: %q, insecure: true}
  numSplits: 2
  globalBatchSize: 8
  shuffle: {seed: 2, blockSize: 16}
  onCorruptShard: skip
`, bucket, minioServer.URL()))
	// The first tar's third member's header (its name), after indexing.
	ctx := context.Background()
	key := "wds/" + w.Tars[0]
	data, err := os.ReadFile(filepath.Join(dir, w.Tars[0]))
	if err != nil {
		t.Fatal(err)
	}
	at := int(w.Members[2][1].(float64))
	data[at] ^= 0x20
	if _, err := minioServer.Client.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, ds, t.TempDir(), "--prefetch", "0")
	plan := planIDs(t, ds, 0, 1, 1)
	got, err := readPads(ctx, srv.client)
	if err != nil {
		t.Fatalf("the stream failed: %v\n%s", err, srv.logs())
	}
	delivered, skipped := map[int64]int{}, map[int64]int{}
	for _, b := range got {
		line := plan[[2]int64{b.step, 0}]
		if fmt.Sprint(b.ids) != fmt.Sprint(line.IDs) {
			t.Fatalf("step %d: ids %v, the plan has %v", b.step, b.ids, line.IDs)
		}
		for i, id := range b.ids {
			if b.pads[i] {
				skipped[id]++
			} else {
				delivered[id]++
			}
		}
	}
	if len(got) != len(plan) || len(skipped) == 0 || len(skipped) > 20 {
		t.Fatalf("%d steps of %d, %d samples skipped: one shard of the damaged tar should be", len(got), len(plan), len(skipped))
	}
	for id, n := range delivered {
		if n != 1 || skipped[id] != 0 {
			t.Fatalf("sample %d delivered %d times, skipped %d", id, n, skipped[id])
		}
	}
	var state configmaps.State
	if err := json.Unmarshal([]byte(get(t, srv.socket, "/v1/state")), &state); err != nil {
		t.Fatal(err)
	}
	if state.SkippedShards != 1 || len(state.Skipped) != 1 || !strings.HasPrefix(state.Skipped[0].Shard, w.Tars[0]+"#") || !strings.Contains(state.Skipped[0].Reason, "checksum") {
		t.Fatalf("the state records %+v; want one shard of %s skipped for its header's checksum", state.Skipped, w.Tars[0])
	}
}

type padBatch struct {
	step int64
	ids  []int64
	pads []bool
}

// readPads reads rank 0 of 1's epoch 0: steps, ids and pads.
func readPads(ctx context.Context, c *shardfeed.Client) ([]padBatch, error) {
	return readStream(ctx, c, shardfeed.Request{Rank: 0, World: 1, Epoch: ptr(int64(0))}, func(rec arrow.RecordBatch) (padBatch, error) {
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		b := padBatch{step: col(pipeline.ColumnStep).(*array.Int64).Value(0), ids: slices.Clone(col(pipeline.ColumnIndex).(*array.Int64).Int64Values())}
		pads := col(pipeline.ColumnPad).(*array.Boolean)
		for i := range b.ids {
			b.pads = append(b.pads, pads.Value(i))
		}
		return b, nil
	}, nil)
}
