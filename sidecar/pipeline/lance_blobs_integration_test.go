//go:build integration

package pipeline_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// A Lance blob column of PNGs (inline, packed and dedicated blobs, written
// by pylance) is decoded in the sidecar like any column of image bytes:
// every live row's pixels are its own image's, each deleted row absent.
func TestIntegrationALanceBlobColumnIsServedDecoded(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "images.lance")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/lance_oracle.py", "write", dir, "--case", "blob-images", "--version", "2.2")
	st := formattest.OpenDir(t, dir)
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLance, format.IndexOptions{ShardBytes: 8 << 10, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	stream := sampledata.Stream{Name: "images", Format: "lance", URI: "file://" + dir + "/"}
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream},
		"  numSplits: 2\n  globalBatchSize: 16\n  decode:\n  - column: image\n    image: {height: 12, width: 12, resize: 12}\n"), 0)
	b := openBatches(ctx, t, feed)
	defer b.Close()
	seen := map[int64]bool{}
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		pix := rec.Column(rec.Schema().FieldIndices("image")[0]).(*array.FixedSizeList).ListValues().(*array.Uint8).Uint8Values()
		for i := range int(rec.NumRows()) {
			id := ids.Value(i)
			if id%9 == 4 || seen[id] {
				t.Fatalf("row %d served (deleted, or twice)", id)
			}
			seen[id] = true
			// The 16×12 image's centre 12×12: from its column 2.
			for y := range 12 {
				for x := range 12 {
					for c := range 3 {
						want := byte((7*int(id) + 3*(x+2) + 5*y + c) % 256)
						if got := pix[((i*12+y)*12+x)*3+c]; got != want {
							t.Fatalf("row %d pixel (%d, %d) channel %d: %d, want %d", id, x, y, c, got, want)
						}
					}
				}
			}
		}
		batch.Release()
	}
	if want := 300 - 300/9 - 1; len(seen) < want-16 { // the plan's batches may leave out the last partial one
		t.Fatalf("%d rows decoded, the table has %d live", len(seen), want)
	}
	t.Logf("%d rows of %d shards decoded", len(seen), len(f.Shards))
}
