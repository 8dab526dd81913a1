package megatron

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// pair writes the .idx and .bin of uint16 documents, each a list of
// sequences, as megatron-core's IndexedDatasetBuilder lays them out: the
// fuzzer's seeds (the oracle tests check the layout against megatron-core
// itself).
func pair(docs [][][]uint16, modes bool) (idx, bin []byte) {
	var lens []int32
	var ptrs []int64
	dix := []int64{0}
	for _, d := range docs {
		for _, s := range d {
			ptrs = append(ptrs, int64(len(bin)))
			lens = append(lens, int32(len(s)))
			for _, v := range s {
				bin = binary.LittleEndian.AppendUint16(bin, v)
			}
		}
		dix = append(dix, int64(len(lens)))
	}
	idx = append([]byte(Magic), 1, 0, 0, 0, 0, 0, 0, 0, 8)
	idx = binary.LittleEndian.AppendUint64(idx, uint64(len(lens)))
	idx = binary.LittleEndian.AppendUint64(idx, uint64(len(dix)))
	for _, n := range lens {
		idx = binary.LittleEndian.AppendUint32(idx, uint32(n))
	}
	for _, p := range ptrs {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(p))
	}
	for _, d := range dix {
		idx = binary.LittleEndian.AppendUint64(idx, uint64(d))
	}
	if modes {
		for k := range lens {
			idx = append(idx, byte(k%3))
		}
	}
	return idx, bin
}

// pairStore writes a pair as d.idx and d.bin in a temporary folder and
// opens it as a stream's store.
func pairStore(t *testing.T, idx, bin []byte) store.Store {
	t.Helper()
	dir := t.TempDir()
	for name, b := range map[string][]byte{"d.idx": idx, "d.bin": bin} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return local.OpenDir(dir)
}

// FuzzIndexAndDecode: any .idx and .bin is indexed or refused, never a
// panic, and every shard of a pair that indexes decodes to the samples its
// index counts.
func FuzzIndexAndDecode(f *testing.F) {
	docs := [][][]uint16{{{1, 2, 3}}, {}, {{4}, {5, 6}}, {{7, 8, 9, 10}}}
	idx, bin := pair(docs, false)
	f.Add(idx, bin, false)
	f.Add(idx, bin, true)
	idx, bin = pair(docs, true)
	f.Add(idx, bin, true)
	f.Add([]byte(Magic), []byte{}, false)
	f.Fuzz(func(t *testing.T, idx, bin []byte, sequences bool) {
		st := pairStore(t, idx, bin)
		unit := indexfile.MegatronDocument
		if sequences {
			unit = indexfile.MegatronSequence
		}
		x := &indexfile.File{Shardfeed: indexfile.Version, Format: Format{}.Kind()}
		o := store.Object{Key: "d.idx", Size: int64(len(idx))}
		if err := (Format{}).IndexObject(context.Background(), st, o, x, format.IndexOptions{Hash: "xxh64", ShardBytes: 4, Own: map[string]string{unitOption: unit}}); err != nil {
			return
		}
		for _, e := range x.Shards {
			parts := [][]byte{bin[e.Offset : e.Offset+e.Length]}
			for _, g := range e.Ranges {
				parts = append(parts, idx[g.Offset:g.Offset+g.Length])
			}
			rec, err := Decode(x.Megatron, e, parts, nil)
			if err != nil {
				t.Fatalf("shard %s indexed but does not decode: %v", e.Name, err)
			}
			if rec.NumRows() != e.Samples {
				t.Fatalf("shard %s decodes %d samples, its index says %d", e.Name, rec.NumRows(), e.Samples)
			}
			rec.Release()
			// A shard whose .idx ranges are damaged is an error, never a
			// panic or a short read.
			for k := 1; k < len(parts); k++ {
				bad := bytes.Clone(parts[k])
				for j := range bad {
					bad[j] ^= 0xff
				}
				damaged := append(append([][]byte{}, parts[:k]...), bad)
				damaged = append(damaged, parts[k+1:]...)
				if rec, err := Decode(x.Megatron, e, damaged, nil); err == nil {
					if rec.NumRows() != e.Samples {
						t.Fatalf("a damaged shard decodes %d samples of %d", rec.NumRows(), e.Samples)
					}
					rec.Release()
				}
			}
		}
	})
}

// Decode refuses parts that do not fit the shard, naming the mismatch.
func TestDecodeRefusesPartsThatDoNotFit(t *testing.T) {
	idx, bin := pair([][][]uint16{{{1, 2}}, {{3}}}, false)
	m := &indexfile.Megatron{DType: "uint16", Unit: indexfile.MegatronDocument}
	e := indexfile.Entry{Length: int64(len(bin)), Samples: 2, Ranges: []indexfile.Range{{Offset: int64(HeaderSize), Length: 8}, {Offset: int64(HeaderSize) + 8 + 16, Length: 24}}}
	lens, docs := idx[HeaderSize:HeaderSize+8], idx[HeaderSize+24:HeaderSize+48]
	if rec, err := Decode(m, e, [][]byte{bin, lens, docs}, nil); err != nil || rec.NumRows() != 2 {
		t.Fatalf("the shard does not decode: %v", err)
	}
	for _, c := range []struct {
		name  string
		parts [][]byte
		cols  []string
		want  string
	}{
		{"short tokens", [][]byte{bin[:4], lens, docs}, nil, "the shard's tokens are 6 bytes"},
		{"lengths", [][]byte{bin, lens[:6], docs}, nil, "4 bytes each"},
		{"documents", [][]byte{bin, lens, docs[:16]}, nil, "not 8 for each of 2 documents"},
		{"parts", [][]byte{bin, lens}, nil, "has 2 parts, not 3"},
		{"column", [][]byte{bin, lens, docs}, []string{"text"}, `no column "text"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Decode(m, e, c.parts, c.cols); err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
