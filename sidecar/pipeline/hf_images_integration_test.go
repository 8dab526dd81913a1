//go:build integration

package pipeline_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
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

// hfStream writes a Hugging Face dataset with datasets' save_to_disk (an
// Image feature of 2×2 grey PNGs whose first pixel is the row's number,
// test/oracle/hf_oracle.py) and indexes it beside its Arrow files.
func hfStream(t *testing.T, rows int) sampledata.Stream {
	t.Helper()
	var w struct{ Stream string }
	out := testenv.PythonScript(t, "venv-hf", "test/oracle/hf_oracle.py", "write", t.TempDir(), "--case", "disk", "--rows", strconv.Itoa(rows))
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	st := formattest.OpenDir(t, w.Stream)
	f, err := formats.Default().Index(context.Background(), st, datav1alpha1.FormatHuggingFace, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(context.Background(), st, f); err != nil {
		t.Fatal(err)
	}
	return sampledata.Stream{Name: "hf", Format: "huggingface", URI: "file://" + filepath.Clean(w.Stream) + "/"}
}

// A Hugging Face Image feature ({bytes, path}) is decoded in the sidecar
// from its bytes, like a binary column: every row's pixels are its own
// image's.
func TestIntegrationAHuggingFaceImageFeatureIsServedDecoded(t *testing.T) {
	ctx := context.Background()
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{hfStream(t, 200)},
		"  numSplits: 2\n  globalBatchSize: 20\n  decode:\n  - column: image\n    image: {height: 2, width: 2, resize: 2}\n"), 0)
	b := openBatches(ctx, t, feed)
	defer b.Close()
	seen := 0
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		score := rec.Column(rec.Schema().FieldIndices("score")[0]).(*array.Float32)
		pix := rec.Column(rec.Schema().FieldIndices("image")[0]).(*array.FixedSizeList).ListValues().(*array.Uint8).Uint8Values()
		for i := range int(rec.NumRows()) {
			row := int(score.Value(i) * 8)
			// Pixels (0,0) and (1,0) are the row's number, (0,1) and
			// (1,1) 7, each grey as RGB.
			for p, want := range []int{row % 256, 7, row % 256, 7} {
				for c := range 3 {
					if got := int(pix[(i*4+p)*3+c]); got != want {
						t.Fatalf("row %d pixel %d channel %d: %d, want %d", row, p, c, got, want)
					}
				}
			}
			seen++
		}
		batch.Release()
	}
	if seen != 200 {
		t.Fatalf("%d rows decoded, the dataset has 200", seen)
	}
}

// A decoded column must be an image's bytes: another struct is refused,
// naming what is decoded.
func TestIntegrationADecodedStructNeedsItsBytes(t *testing.T) {
	_, err := openFeedErr(t, sampledata.Manifest("ds", []sampledata.Stream{hfStream(t, 20)},
		"  numSplits: 2\n  globalBatchSize: 4\n  decode:\n  - column: meta\n    image: {height: 2, width: 2, resize: 2}\n"))
	if err == nil || !strings.Contains(err.Error(), `decoding column "meta"`) || !strings.Contains(err.Error(), "a struct of their bytes (a Hugging Face Image feature") {
		t.Fatalf("decoding a struct without bytes: %v", err)
	}
}
