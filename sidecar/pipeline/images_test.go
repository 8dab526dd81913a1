package pipeline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

const decodeJPG = "  decode:\n  - column: jpg\n    image: {height: 8, width: 6, resize: 10}\n"

func imagesStream(t *testing.T, n int) sampledata.Stream {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "img")
	if err := sampledata.Images(dir, n, 40, 24, 6000); err != nil {
		t.Fatal(err)
	}
	return sampledata.Stream{Name: "img", Format: "mds", URI: "file://" + dir + "/"}
}

// A decoded image column is height × width × 3 uint8 per row, the pixels of
// each row's own image, with the shape the clients reshape it to.
func TestAnImageColumnIsServedDecodedAndCropped(t *testing.T) {
	ctx := context.Background()
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{imagesStream(t, 64)}, "  numSplits: 2\n  globalBatchSize: 16\n"+decodeJPG), 0)
	f, _ := feed.Pipeline.Schema().FieldsByName("jpg")
	if len(f) != 1 || !arrow.TypeEqual(f[0].Type, arrow.FixedSizeListOf(8*6*3, arrow.PrimitiveTypes.Uint8)) {
		t.Fatalf("jpg is served as %v", f)
	}
	if shape, _ := f[0].Metadata.GetValue(format.MetaShape); shape != "8,6,3" {
		t.Fatalf("shape metadata %q, want 8,6,3", shape)
	}
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 1, World: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rows := 0
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		pix := rec.Column(rec.Schema().FieldIndices("jpg")[0]).(*array.FixedSizeList).ListValues().(*array.Uint8).Uint8Values()
		for i := range int(rec.NumRows()) {
			want := sampledata.ImageColor(ids.Value(i))
			for p := range 8 * 6 {
				for c := range 3 {
					// A flat colour through JPEG's rounding.
					if d := int(pix[(i*48+p)*3+c]) - int(want[c]); d < -3 || d > 3 {
						t.Fatalf("sample %d pixel %d channel %d: %d, want about %d", ids.Value(i), p, c, pix[(i*48+p)*3+c], want[c])
					}
				}
			}
			rows++
		}
		batch.Release()
	}
	if rows != 32 {
		t.Fatalf("rank 1 read %d rows, want 32", rows)
	}
}

// Decoding a column that is not there, not binary, or does not hold
// images is refused, naming the column or the sample.
func TestDecodingWhatIsNotAnImageColumnIsRefused(t *testing.T) {
	blobs := filepath.Join(t.TempDir(), "b")
	if err := sampledata.Blobs(blobs, 20, 30, 4000); err != nil {
		t.Fatal(err)
	}
	stream := sampledata.Stream{Name: "b", Format: "mds", URI: "file://" + blobs + "/"}
	for _, tc := range []struct{ decode, want string }{
		{"  decode:\n  - column: jpg\n    image: {height: 8, width: 8}\n", `column "jpg": the streams have no such column (their columns: blob, id)`},
		{"  decode:\n  - column: id\n    image: {height: 8, width: 8}\n", `column "id": it is int64, and images are decoded from binary columns`},
	} {
		if _, err := openFeedErr(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, "  numSplits: 1\n  globalBatchSize: 4\n"+tc.decode)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.decode, err, tc.want)
		}
	}
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, "  numSplits: 1\n  globalBatchSize: 4\n  shuffle: {enabled: false}\n  decode:\n  - column: blob\n    image: {height: 8, width: 8}\n"), 0)
	if _, err := feed.Pipeline.Sample(context.Background(), 3); err == nil || !strings.Contains(err.Error(), `column "blob": sample 3: not a JPEG or PNG image`) {
		t.Fatalf("a blob decoded as an image: %v", err)
	}
}
