//go:build integration

package sidecar_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/big"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

const bucketedSpec = `  numSplits: 4
  globalBatchSize: 8
  batching: stratified
  shuffle: {seed: 5, blockSize: 16}
  bucketing: {column: image, aspectRatios: ["3/4", "4/3"]}
`

// imageShapes are the images' widths and heights: aspect ratios 1/2, 3/4,
// 1, 4/3 (a boundary: the upper bucket) and 2.
var imageShapes = [][2]int{{8, 16}, {12, 16}, {16, 16}, {16, 12}, {16, 8}, {20, 10}}

// bucketOfShape is the bucket of an image of aspect ratio w/h at 3/4, 4/3.
func bucketOfShape(w, h int) int {
	r := big.NewRat(int64(w), int64(h))
	switch {
	case r.Cmp(big.NewRat(3, 4)) < 0:
		return 0
	case r.Cmp(big.NewRat(4, 3)) < 0:
		return 1
	}
	return 2
}

// imageRows writes 300 rows (id, a PNG image of a random shape) to
// Parquet files of 100 rows, ids from base.
func imageRows(t *testing.T, dir string, base int64, seed uint64) {
	const n = 300
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 54))
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "image", Type: arrow.BinaryTypes.Binary}}, nil)
	for f := 0; f*100 < n; f++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := f * 100; i < min(n, (f+1)*100); i++ {
			s := imageShapes[r.IntN(len(imageShapes))]
			img := image.NewGray(image.Rect(0, 0, s[0], s[1]))
			img.Set(0, 0, color.Gray{Y: uint8(i)})
			var buf bytes.Buffer
			if err := png.Encode(&buf, img); err != nil {
				t.Fatal(err)
			}
			b.Field(0).(*array.Int64Builder).Append(base + int64(i))
			b.Field(1).(*array.BinaryBuilder).Append(buf.Bytes())
		}
		writeParquet(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), b)
	}
}

// samePlannedBucket fails unless a trained batch is plan --ids's line:
// its samples, and its images of the line's bucket.
func samePlannedBucket(t *testing.T, k int64, rank, world int, got imageBatch, want planLine) {
	t.Helper()
	if fmt.Sprint(got.ids) != fmt.Sprint(want.IDs) {
		t.Fatalf("step %d rank %d of %d: the lineage trained %v, plan --ids says %v", k, rank, world, got.ids, want.IDs)
	}
	if want.Bucket == nil || len(got.buckets) == 0 || got.buckets[0] != *want.Bucket {
		t.Fatalf("step %d rank %d: images of buckets %v, plan --ids says bucket %v", k, rank, got.buckets, want.Bucket)
	}
}

// imageDataset uploads two streams of imageRows (a from seed, b from
// seed+1, ids from 1000, with extra YAML) and writes the manifest of a
// dataset of them with spec.
func imageDataset(t *testing.T, name, spec string, seed uint64, bExtra string) dataset {
	t.Helper()
	bucket, dir := minioServer.Bucket(t), t.TempDir()
	imageRows(t, filepath.Join(dir, "a"), 0, seed)
	imageRows(t, filepath.Join(dir, "b"), 1000, seed+1)
	upload(t, bucket, "a", filepath.Join(dir, "a"))
	upload(t, bucket, "b", filepath.Join(dir, "b"))
	streams := []sampledata.Stream{{Name: "a", Format: "parquet", URI: "s3://" + bucket + "/a/", Endpoint: minioServer.URL()},
		{Name: "b", Format: "parquet", URI: "s3://" + bucket + "/b/", Endpoint: minioServer.URL(), Extra: bExtra}}
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest(name, streams, spec)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(t)}
}

// imageBatch is a received batch of images: its step, sample ids, pads,
// the rows' own ids and their buckets, read from the images' headers.
type imageBatch struct {
	step    int64
	ids     []int64
	pads    []bool
	rows    []int64
	buckets []int
}

func readImages(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, each func(imageBatch) bool) ([]imageBatch, error) {
	return readStream(ctx, c, req, func(rec arrow.RecordBatch) (imageBatch, error) {
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		b := imageBatch{step: col(pipeline.ColumnStep).(*array.Int64).Value(0),
			ids: slices.Clone(col(pipeline.ColumnIndex).(*array.Int64).Int64Values()), rows: slices.Clone(col("id").(*array.Int64).Int64Values())}
		pads, images := col(pipeline.ColumnPad).(*array.Boolean), col("image").(*array.Binary)
		for r := range int(rec.NumRows()) {
			b.pads = append(b.pads, pads.Value(r))
			cfg, err := png.DecodeConfig(bytes.NewReader(images.Value(r)))
			if err != nil {
				return b, fmt.Errorf("step %d row %d: %w", b.step, r, err)
			}
			b.buckets = append(b.buckets, bucketOfShape(cfg.Width, cfg.Height))
		}
		return b, nil
	}, each)
}

// TestIntegrationABucketedImageDatasetThroughAKillAndARescale: real
// sidecars serve two Parquet streams of PNG images of five aspect ratios
// (one stream filtered), bucketed at 3/4 and 4/3 and batched stratified
// within each bucket, through a kill and a 4 → 2 pod rescale
// (trainThroughARescale, which bounds what each resumed pod fetches):
// every batch of the committed lineage is `plan --ids`'s, every global
// batch's images are of one bucket (read from the PNG headers the sidecar
// serves), and each row is delivered at most once in the epoch.
func TestIntegrationABucketedImageDatasetThroughAKillAndARescale(t *testing.T) {
	ds := imageDataset(t, "bucketed", bucketedSpec, 1, "filter: \"id % 3 != 0\"")
	bucket, manifest := ds.bucket, ds.manifest
	// Stream b indexed without its buckets: plan names the command that
	// writes them.
	if out, err := exec.Command(binary, "index", "-f", manifest, "--stream", "a", "--credentials-dir", ds.credentials).CombinedOutput(); err != nil {
		t.Fatalf("index a: %v\n%s", err, out)
	}
	index := exec.Command(binary, "index", "s3://"+bucket+"/b/", "--format", "parquet", "--filter", "id % 3 != 0", "--endpoint", minioServer.URL(), "--insecure", "--credentials-dir", ds.credentials)
	if out, err := index.CombinedOutput(); err != nil {
		t.Fatalf("index b: %v\n%s", err, out)
	}
	out, err := exec.Command(binary, "plan", "-f", manifest, "--credentials-dir", ds.credentials).CombinedOutput()
	if err == nil {
		t.Fatalf("plan of a stream without its buckets' selections:\n%s", out)
	}
	mustContain(t, string(out), "spec.bucketing: the stream has no selection", "write the buckets' selections with: shardfeed index s3://"+bucket+"/b/ --format parquet --filter 'id % 3 != 0' --endpoint "+minioServer.URL()+" --insecure --selection-only --lengths 'image' --aspect-ratios 3/4,4/3")
	if out, err := exec.Command(binary, "index", "-f", manifest, "--stream", "b", "--credentials-dir", ds.credentials).CombinedOutput(); err != nil {
		t.Fatalf("index b: %v\n%s", err, out)
	}
	out, err = exec.Command(binary, "plan", "-f", manifest, "--credentials-dir", ds.credentials).CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	mustContain(t, string(out), "aspect ratio below 3/4", "aspect ratio from 3/4 below 4/3", "aspect ratio from 4/3", "every global batch is drawn from one bucket")
	if out, err = exec.Command(binary, "simulate", "-f", manifest, "--credentials-dir", ds.credentials, "--pods", "2").CombinedOutput(); err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	mustContain(t, string(out), "bucket 0 (aspect ratio below 3/4): ", "bucket 2 (aspect ratio from 4/3): ")

	r := trainThroughARescale(t, ds, "bucketed", readImages, func(b imageBatch) int64 { return b.step })
	seen := map[int64]bool{}
	for k := range r.steps {
		world, plan := r.planAt(k)
		bucketOf := -1
		for rank := range world {
			got := r.lineage[[2]int64{k, int64(rank)}]
			samePlannedBucket(t, k, rank, world, got, plan[[2]int64{k, int64(rank)}])
			for i, b := range got.buckets {
				if bucketOf < 0 {
					bucketOf = b
				}
				if b != bucketOf {
					t.Fatalf("step %d: images of buckets %d and %d in one global batch", k, bucketOf, b)
				}
				if row := got.rows[i]; !got.pads[i] {
					if seen[row] {
						t.Fatalf("row %d delivered twice in the epoch", row)
					}
					if row >= 1000 && row%3 == 0 {
						t.Fatalf("row %d of stream b, which its filter leaves out, delivered", row)
					}
					seen[row] = true
				}
			}
		}
	}
	// 300 rows of a, 200 of b: all but what each bucket's splits and
	// batches leave out.
	if len(seen) < 500-3*(4+8)*2 {
		t.Fatalf("%d of 500 rows delivered in the epoch", len(seen))
	}
}

const bucketedScheduledSpec = `  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 6, blockSize: 16}
  bucketing: {column: image, aspectRatios: ["3/4", "4/3"]}
  schedule:
    phases:
    - {startStep: 4, globalBatchSize: 16}
    - startStep: 9
      proportions: [{stream: a, proportion: "1"}, {stream: b, proportion: "3"}]
    - {startStep: 12, repeatSteps: 2}
    - {startStep: 15, skipSteps: 3}
`

// TestIntegrationABucketedScheduledDatasetThroughAKillAndARescale: the
// bucketed images of the test above with a schedule (a batch-size ramp-up
// at step 4, a curriculum at step 9, steps 10–11 repeated at 12, the data
// of three steps skipped at 15), through a kill and a 4 → 2 rescale: every
// batch of the committed lineage is `plan --ids`'s, each step at its
// phase's batch size, steps 12–13 the images of 10–11, and every global
// batch's images of one bucket.
func TestIntegrationABucketedScheduledDatasetThroughAKillAndARescale(t *testing.T) {
	ds := imageDataset(t, "bucketed-scheduled", bucketedScheduledSpec, 3, "")
	manifest := ds.manifest
	for _, s := range []string{"a", "b"} {
		if out, err := exec.Command(binary, "index", "-f", manifest, "--stream", s, "--credentials-dir", ds.credentials).CombinedOutput(); err != nil {
			t.Fatalf("index %s: %v\n%s", s, err, out)
		}
	}
	out, err := exec.Command(binary, "plan", "-f", manifest, "--credentials-dir", ds.credentials).CombinedOutput()
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	mustContain(t, string(out), "from step 9: proportions a=1 b=3", "from step 4: globalBatchSize 16")
	r := trainThroughARescale(t, ds, "bucketed-scheduled", readImages, func(b imageBatch) int64 { return b.step })
	for k := range r.steps {
		world, plan := r.planAt(k)
		bucketOf, rows := -1, 0
		for rank := range world {
			got := r.lineage[[2]int64{k, int64(rank)}]
			samePlannedBucket(t, k, rank, world, got, plan[[2]int64{k, int64(rank)}])
			rows += len(got.ids)
			for _, b := range got.buckets {
				if bucketOf < 0 {
					bucketOf = b
				}
				if b != bucketOf {
					t.Fatalf("step %d: images of buckets %d and %d in one global batch", k, bucketOf, b)
				}
			}
		}
		if want := map[bool]int{true: 8, false: 16}[k < 4]; rows != want {
			t.Fatalf("step %d: a global batch of %d images, its phase's is %d", k, rows, want)
		}
	}
	for k := int64(12); k < 14; k++ {
		world, _ := r.planAt(k)
		if before, _ := r.planAt(k - 2); before != world {
			t.Fatalf("the commit at step %d falls in the repeat", r.commitAt)
		}
		for rank := range world {
			again, first := r.lineage[[2]int64{k, int64(rank)}], r.lineage[[2]int64{k - 2, int64(rank)}]
			if len(again.rows) == 0 || fmt.Sprint(again.rows) != fmt.Sprint(first.rows) {
				t.Fatalf("step %d rank %d trained %v, not step %d's %v again", k, rank, again.rows, k-2, first.rows)
			}
		}
	}
}
