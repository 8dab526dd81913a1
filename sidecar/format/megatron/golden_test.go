package megatron_test

// Megatron indexed datasets written by megatron-core's own
// IndexedDatasetBuilder, and what its IndexedDataset reads of them,
// recorded in testdata/golden (test/oracle/megatron_oracle.py record; make
// golden), indexed by shardfeed index and read shard by shard as a pod
// reads them (its parts only): every sample equals megatron-core's, token
// for token, in order; damaged files are refused naming what is wrong.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

func TestMegatronServesMegatronCoreSamples(t *testing.T) {
	golden := testenv.Golden(t)
	for _, c := range []struct {
		stream     string // a folder of pairs (megatron_oracle.py's STREAMS)
		unit       string
		multimodal bool
		dtype      string
	}{
		{stream: "gpt-merged", unit: "document", dtype: "uint16"},
		{stream: "int32", unit: "document", dtype: "int32"},
		{stream: "sentences", unit: "document", dtype: "uint16"},
		{stream: "sentences", unit: "sequence", dtype: "uint16"},
		{stream: "multimodal", unit: "sequence", multimodal: true, dtype: "uint16"},
	} {
		t.Run(c.stream+"-"+c.unit, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(golden, c.stream)
			want := formattest.Lines(t, testenv.GoldenFile(t, golden, c.stream+"."+c.unit+".jsonl"))
			// Small shards: every .bin is cut into many.
			st := formattest.OpenDir(t, dir)
			f := formattest.Index(t, st, datav1alpha1.FormatMegatron, format.IndexOptions{ShardBytes: 1 << 10, Own: map[string]string{"unit": c.unit}})
			got := formattest.Rows(t, st, f, nil)
			if len(f.Shards) < 5 {
				t.Fatalf("%d shards: the case should cut its .bin files into several", len(f.Shards))
			}
			if f.Megatron.DType != c.dtype || f.Megatron.Unit != c.unit || f.Megatron.Modes != c.multimodal {
				t.Fatalf("indexed as %+v, want %s %ss (modes %t)", *f.Megatron, c.dtype, c.unit, c.multimodal)
			}
			formattest.Compare(t, c.unit+"s", "megatron-core", got, want)
			checkLengths(t, dir, f, want)
		})
	}
}

// checkLengths measures the tokens of each sample for packing and
// bucketing (shardfeed index --lengths tokens) from the .idx ranges
// alone: the totals are the oracle's, and no byte of a .bin (or of the
// modes) is read.
func checkLengths(t *testing.T, dir string, f *indexfile.File, want []string) {
	t.Helper()
	var counts store.Counts
	st := store.Counted(formattest.OpenDir(t, dir), &counts)
	l := index.LayoutOf(f)
	x, _, err := formats.Default().Lengths(context.Background(), st, l, "tokens", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tokens, largest int64
	for _, row := range want {
		var m struct{ Tokens []int64 }
		if err := json.Unmarshal([]byte(row), &m); err != nil {
			t.Fatal(err)
		}
		tokens += int64(len(m.Tokens))
		largest = max(largest, int64(len(m.Tokens)))
	}
	samples, sum, most := x.Totals()
	if samples != int64(len(want)) || sum != tokens || most != largest {
		t.Fatalf("lengths of %d samples, %d tokens, %d at most; megatron-core reads %d, %d and %d", samples, sum, most, len(want), tokens, largest)
	}
	var idxBytes int64
	for _, e := range f.Shards {
		idxBytes += e.Ranges[0].Length // the lengths, and a document's sequences (not a multimodal sequence's modes)
		if f.Megatron.Unit == "document" {
			idxBytes += e.Ranges[1].Length
		}
	}
	if got := counts.ReadBytes.Load(); got != idxBytes {
		t.Fatalf("measuring read %d bytes; the shards' .idx ranges are %d (no .bin byte is needed)", got, idxBytes)
	}
}

// Damaged pairs are refused when indexed, each naming what is wrong.
func TestMegatronRefusesDamagedPairs(t *testing.T) {
	golden := testenv.Golden(t)
	idx := testenv.GoldenFile(t, golden, "gpt-merged/gpt.idx")
	bin := testenv.GoldenFile(t, golden, "gpt-merged/gpt.bin")
	seqs := int64(binary.LittleEndian.Uint64(idx[18:]))
	put64 := func(b []byte, at int64, v uint64) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint64(b[at:], v)
		return b
	}
	for _, c := range []struct {
		name     string
		idx, bin []byte
		unit     string
		want     string
	}{
		{name: "magic", idx: append([]byte("MMIDIDY"), idx[7:]...), want: "does not start with"},
		{name: "version", idx: put64(idx, 9, 2), want: "version 2 of the Megatron .idx format is not supported"},
		{name: "dtype", idx: append(append(bytes.Clone(idx[:17]), 9), idx[18:]...), want: "dtype code 9"},
		{name: "truncated", idx: idx[:len(idx)-3], want: "truncated or corrupt"},
		{name: "counts", idx: put64(idx, 18, 1<<50), want: "corrupt"},
		{name: "pointer", idx: put64(idx, 34+4*seqs+8*3, 7), want: "sequence 3 starts at byte 7"},
		{name: "document index", idx: put64(idx, 34+12*seqs+8*4, 1), want: "document 3 ends at sequence 1"},
		{name: "first document", idx: put64(idx, 34+12*seqs, 1), want: "starts at sequence 1, not 0"},
		{name: "short bin", bin: bin[:len(bin)-2], want: "the pair does not match"},
		{name: "long bin", bin: append(bytes.Clone(bin), 0, 0), want: "the pair does not match"},
		{name: "unit", unit: "page", want: `not "page"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			if c.idx == nil {
				c.idx = idx
			}
			if c.bin == nil {
				c.bin = bin
			}
			for name, b := range map[string][]byte{"gpt.idx": c.idx, "gpt.bin": c.bin} {
				if err := os.WriteFile(filepath.Join(d, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, d), datav1alpha1.FormatMegatron, format.IndexOptions{Own: map[string]string{"unit": c.unit}})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "gpt.idx") {
				t.Fatalf("got %v, want an error naming gpt.idx and saying %q", err, c.want)
			}
		})
	}
	t.Run("no bin", func(t *testing.T) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "gpt.idx"), idx, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, d), datav1alpha1.FormatMegatron, format.IndexOptions{})
		if err == nil || !strings.Contains(err.Error(), "no gpt.bin beside it") {
			t.Fatalf("got %v, want the missing .bin named", err)
		}
	})
	t.Run("multimodal documents", func(t *testing.T) {
		_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, filepath.Join(golden, "multimodal")), datav1alpha1.FormatMegatron, format.IndexOptions{})
		if err == nil || !strings.Contains(err.Error(), "--unit sequence") {
			t.Fatalf("got %v, want the multimodal dataset sent to --unit sequence", err)
		}
	})
}
