package litdata_test

// LitData datasets written by litdata.optimize itself, and what
// litdata.StreamingDataset reads of them, recorded in testdata/golden
// (test/oracle/litdata_oracle.py record; make golden), indexed by shardfeed
// index from their index.json and read chunk by chunk as a pod reads them:
// every item equals StreamingDataset's, in order; what shardfeed does not
// read is refused when indexed, naming it.

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"image"
	_ "image/jpeg" // the JPEG leaves' shapes
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

func hexReader(t *testing.T, s string) *bytes.Reader {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// answers reads what StreamingDataset read of a recorded dataset (with
// TokensLoader blocks of block tokens, where block is not 0).
func answers(t *testing.T, golden, name string, block int64) []string {
	t.Helper()
	if block > 0 {
		name += ".block" + strconv.FormatInt(block, 10)
	}
	return formattest.Lines(t, testenv.GoldenFile(t, golden, name+".jsonl"))
}

// shapes are the arrays case's shapes: shardfeed serves an array flat in
// a fixed-size list (the shape in its field's metadata), the oracle nested.
var shapes = map[string][]int{"x": {2, 3}, "m": {3, 2, 2}, "img": {4, 4}}

// nest returns flat's values as nested lists of shape.
func nest(flat []any, shape []int) []any {
	if len(shape) == 1 {
		return flat
	}
	step := len(flat) / shape[0]
	out := make([]any, shape[0])
	for i := range out {
		out[i] = nest(flat[i*step:(i+1)*step], shape[1:])
	}
	return out
}

func TestLitDataServesStreamingDatasetItems(t *testing.T) {
	golden := testenv.Golden(t)
	for _, kase := range []string{"mixed", "strings", "jpeg", "arrays"} {
		t.Run(kase, func(t *testing.T) {
			t.Parallel()
			want := answers(t, golden, kase, 0)
			st := formattest.OpenDir(t, filepath.Join(golden, kase))
			f := formattest.Index(t, st, datav1alpha1.FormatLitData, format.IndexOptions{})
			if len(f.Shards) < 3 {
				t.Fatalf("%d chunks: the case writes several", len(f.Shards))
			}
			if kase == "arrays" {
				for c, want := range shapes {
					if got := f.LitData.Arrays[c].Shape; !slices.Equal(got, want) {
						t.Fatalf("column %s: shape %v in the index, want %v", c, got, want)
					}
				}
			}
			got := formattest.Rows(t, st, f, func(row map[string]any) {
				for c, shape := range shapes {
					if flat, ok := row[c].([]any); ok && kase == "arrays" {
						row[c] = nest(flat, shape)
					}
				}
				if img, ok := row["image"].(string); ok { // StreamingDataset decodes it: compare shapes
					cfg, _, err := image.DecodeConfig(hexReader(t, img))
					if err != nil {
						t.Fatalf("the image is not a JPEG: %v", err)
					}
					row["image"] = map[string]any{"shape": []int{3, cfg.Height, cfg.Width}}
				}
			})
			formattest.Compare(t, kase, "litdata", got, want)
		})
	}
}

func TestLitDataRefusesWhatItDoesNotRead(t *testing.T) {
	golden := testenv.Golden(t)
	for _, c := range []struct{ kase, where, want string }{
		{"nested", "index.json", `a sample's "a" is a builtins.dict`},
		{"ragged2d", "chunk-0-0.bin", `column "x": item 1 is an array of dtype 9 and shape [2 4], earlier ones of dtype 9 and shape [2 3]`},
	} {
		t.Run(c.kase, func(t *testing.T) {
			_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, filepath.Join(golden, c.kase)), datav1alpha1.FormatLitData, format.IndexOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, c.where, c.want)
			}
		})
	}
}

// A dataset written with LitData's TokensLoader is read as its
// TokensLoader(block_size) reads it: each chunk's tokens cut into blocks,
// a chunk's rest left out; without a block size it is refused, saying how
// to give one, and a block size is refused for any other dataset.
func TestLitDataServesTokensLoaderBlocks(t *testing.T) {
	golden := testenv.Golden(t)
	st := formattest.OpenDir(t, filepath.Join(golden, "tokens"))
	for _, block := range []int64{64, 300} {
		f := formattest.Index(t, st, datav1alpha1.FormatLitData, format.IndexOptions{Own: map[string]string{"block-size": strconv.FormatInt(block, 10)}})
		if len(f.Shards) < 3 || f.LitData.BlockSize != block {
			t.Fatalf("%d chunks, block size %d: the case writes several chunks", len(f.Shards), f.LitData.BlockSize)
		}
		got := formattest.Rows(t, st, f, nil)
		want := answers(t, golden, "tokens", block)
		formattest.Compare(t, fmt.Sprintf("tokens in blocks of %d", block), "litdata", got, want)
	}
	_, err := formats.Default().Index(context.Background(), st, datav1alpha1.FormatLitData, format.IndexOptions{})
	if err == nil || !strings.Contains(err.Error(), "TokensLoader") || !strings.Contains(err.Error(), "--block-size N or spec.streams[].litdata.blockSize") {
		t.Fatalf("a TokensLoader dataset without a block size: %v", err)
	}
	_, err = formats.Default().Index(context.Background(), formattest.OpenDir(t, filepath.Join(golden, "strings")), datav1alpha1.FormatLitData, format.IndexOptions{Own: map[string]string{"block-size": "64"}})
	if err == nil || !strings.Contains(err.Error(), "its item loader is PyTreeLoader: drop it") {
		t.Fatalf("a block size for a PyTreeLoader dataset: %v", err)
	}
}

// Chunks LitData compresses with zstd, each of the three ways it wraps
// them (compression_level: the whole chunk, frames of runs of items, each
// item), are read as StreamingDataset reads them.
func TestLitDataReadsCompressedChunks(t *testing.T) {
	golden := testenv.Golden(t)
	for _, c := range []struct {
		kase, level string
		block       int64
	}{{"mixed", "chunk", 0}, {"mixed", "batch", 0}, {"arrays", "sample", 0}, {"tokens", "chunk", 64}} {
		t.Run(c.kase+" "+c.level, func(t *testing.T) {
			t.Parallel()
			name := c.kase + "-zstd-" + c.level
			st := formattest.OpenDir(t, filepath.Join(golden, name))
			f := formattest.Index(t, st, datav1alpha1.FormatLitData, format.IndexOptions{Own: map[string]string{"block-size": strconv.FormatInt(c.block, 10)}})
			if f.LitData.CompressionLevel != c.level || len(f.Shards) < 2 {
				t.Fatalf("indexed %d chunks compressed %q, want several compressed %q", len(f.Shards), f.LitData.CompressionLevel, c.level)
			}
			got := formattest.Rows(t, st, f, func(row map[string]any) {
				for col, shape := range shapes {
					if flat, ok := row[col].([]any); ok && c.kase == "arrays" {
						row[col] = nest(flat, shape)
					}
				}
			})
			formattest.Compare(t, c.kase+" "+c.level, "litdata", got, answers(t, golden, name, c.block))
		})
	}
}
