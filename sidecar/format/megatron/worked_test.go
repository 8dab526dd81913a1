package megatron

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// A pair written byte by byte (the layout in the package doc): two
// documents of uint16 tokens, [7 8 | 9] and [10], three sequences.
var (
	workedIdx = []byte("MMIDIDX\x00\x00" +
		"\x01\x00\x00\x00\x00\x00\x00\x00" + // version 1
		"\x08" + // dtype code 8: uint16
		"\x03\x00\x00\x00\x00\x00\x00\x00" + // 3 sequences
		"\x03\x00\x00\x00\x00\x00\x00\x00" + // 3 document index entries: 2 documents
		"\x02\x00\x00\x00" + "\x01\x00\x00\x00" + "\x01\x00\x00\x00" + // lengths: 2, 1, 1 tokens
		"\x00\x00\x00\x00\x00\x00\x00\x00" + // sequence 0 at byte 0 of the .bin
		"\x04\x00\x00\x00\x00\x00\x00\x00" + // sequence 1 at byte 4
		"\x06\x00\x00\x00\x00\x00\x00\x00" + // sequence 2 at byte 6
		"\x00\x00\x00\x00\x00\x00\x00\x00" + // document 0 starts at sequence 0
		"\x02\x00\x00\x00\x00\x00\x00\x00" + // document 1 at sequence 2
		"\x03\x00\x00\x00\x00\x00\x00\x00") // the end: 3 sequences
	workedBin = []byte{7, 0, 8, 0, 9, 0, 10, 0}
)

func TestAWorkedHeader(t *testing.T) {
	h, err := ParseHeader(workedIdx, int64(len(workedIdx)))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Header{DType: "uint16", ItemSize: 2, Sequences: 3, Documents: 2}); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	// One byte more per sequence: the modes of a multimodal file.
	if h, err := ParseHeader(workedIdx, int64(len(workedIdx))+3); err != nil || !h.Modes {
		t.Fatalf("with a mode a sequence: %+v, %v", h, err)
	}
	if _, err := ParseHeader(workedIdx, int64(len(workedIdx))+1); err == nil {
		t.Fatal("a byte too many was read as a header")
	}
}

// Each unit's samples from the worked pair, as megatron-core reads them:
// a document is its sequences' tokens end to end.
func TestAWorkedPairDecodes(t *testing.T) {
	st := pairStore(t, workedIdx, workedBin)
	for _, c := range []struct {
		unit string
		want string
	}{
		{indexfile.MegatronDocument, "[[7 8 9] [10]]"},
		{indexfile.MegatronSequence, "[[7 8] [9] [10]]"},
	} {
		t.Run(c.unit, func(t *testing.T) {
			x := &indexfile.File{Shardfeed: indexfile.Version, Format: Format{}.Kind()}
			o := store.Object{Key: "d.idx", Size: int64(len(workedIdx))}
			if err := (Format{}).IndexObject(context.Background(), st, o, x, format.IndexOptions{Hash: "xxh64", ShardBytes: 1 << 20, Own: map[string]string{unitOption: c.unit}}); err != nil {
				t.Fatal(err)
			}
			var got [][]uint16
			for _, e := range x.Shards {
				parts := [][]byte{workedBin[e.Offset : e.Offset+e.Length]}
				for _, g := range e.Ranges {
					parts = append(parts, workedIdx[g.Offset:g.Offset+g.Length])
				}
				rec, err := Decode(x.Megatron, e, parts, nil)
				if err != nil {
					t.Fatal(err)
				}
				tokens := rec.Column(0).(*array.List)
				values := tokens.ListValues().(*array.Uint16)
				for i := range tokens.Len() {
					lo, hi := tokens.ValueOffsets(i)
					got = append(got, values.Uint16Values()[lo:hi])
				}
				rec.Release()
			}
			if fmt.Sprint(got) != c.want {
				t.Fatalf("%ss %v, want %s", c.unit, got, c.want)
			}
		})
	}
}
