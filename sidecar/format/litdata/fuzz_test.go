package litdata

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// chunk lays items out as LitData's writer does: the count, the offsets,
// then each item's leaf sizes and leaves (the fuzzer's seeds; the oracle
// tests read chunks litdata.optimize writes).
func chunk(items [][][]byte) []byte {
	n := len(items)
	header := 4 + 4*(n+1)
	out := binary.LittleEndian.AppendUint32(nil, uint32(n))
	var bodies [][]byte
	off := header
	out = binary.LittleEndian.AppendUint32(out, uint32(off))
	for _, leaves := range items {
		var b []byte
		for _, l := range leaves {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(l)))
		}
		for _, l := range leaves {
			b = append(b, l...)
		}
		bodies = append(bodies, b)
		off += len(b)
		out = binary.LittleEndian.AppendUint32(out, uint32(off))
	}
	for _, b := range bodies {
		out = append(out, b...)
	}
	return out
}

var fuzzIndex = &indexfile.LitData{Columns: []string{"id", "name", "tok", "ok"}, DataFormats: []string{"int", "str", "no_header_numpy:2", "bool"}}

// FuzzDecode: any chunk decodes to its items or is refused, never a panic
// or a short read.
func FuzzDecode(f *testing.F) {
	i64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	f.Add(chunk([][][]byte{{i64(1), []byte("a"), {1, 0, 0, 0, 2, 0, 0, 0}, {1}}, {i64(2), []byte(""), nil, {0}}}), int64(2))
	f.Add(append(chunk(nil), []byte("\x00\x00\x00\x00LDARW01\x00")...), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, samples int64) {
		rec, err := Decode(fuzzIndex, data, samples, nil)
		if err != nil {
			return
		}
		if rec.NumRows() != samples {
			t.Fatalf("decoded %d items, the index says %d", rec.NumRows(), samples)
		}
		rec.Release()
	})
}

func TestColumnsOfDataSpecs(t *testing.T) {
	for _, c := range []struct{ spec, want, err string }{
		{`[1, {"type": "builtins.dict", "context": "[\"a\", \"b\"]", "children_spec": [{"type": null, "context": null, "children_spec": []}, {"type": null, "context": null, "children_spec": []}]}]`, "[a b]", ""},
		{`[1, {"type": null, "context": null, "children_spec": []}]`, "[value]", ""},
		{`[1, {"type": "builtins.tuple", "context": "null", "children_spec": []}]`, "", "builtins.tuple"},
		{`[1, {"type": "builtins.dict", "context": "[1]", "children_spec": [{"type": null, "context": null, "children_spec": []}]}]`, "", "not a string"},
		{`{}`, "", "not a pytree spec"},
	} {
		got, err := Columns(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Columns(%s) = %v, %v; want an error saying %q", c.spec, got, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("Columns(%s) = %v, %v; want %s", c.spec, got, err, c.want)
		}
	}
}

// FuzzArrays: any chunk of "numpy" and "tensor" items teaches its arrays'
// dtypes and shapes or is refused, and one that teaches them decodes to
// its items or is refused, never a panic or an allocation past the bound.
func FuzzArrays(f *testing.F) {
	le, be := binary.LittleEndian, binary.BigEndian
	numpy := func(code uint32, shape []uint32, data []byte) []byte {
		b := le.AppendUint32(le.AppendUint32(nil, code), uint32(len(shape)))
		for _, d := range shape {
			b = le.AppendUint32(b, d)
		}
		return append(b, data...)
	}
	tensor := func(code uint32, shape []uint32, data []byte) []byte {
		b := be.AppendUint32(be.AppendUint32(nil, code), uint32(len(shape)))
		for _, d := range shape {
			b = be.AppendUint32(b, d)
		}
		return append(b, data...)
	}
	f.Add(chunk([][][]byte{
		{numpy(4, []uint32{2, 2}, []byte{1, 2, 3, 4}), tensor(11, []uint32{1, 3}, []byte{5, 6, 7})},
		{numpy(4, []uint32{2, 2}, []byte{8, 9, 10, 11}), tensor(11, []uint32{1, 3}, []byte{12, 13, 14})},
	}), int64(2))
	f.Add(chunk([][][]byte{{numpy(9, []uint32{1 << 20, 1 << 20}, nil), tensor(2, nil, make([]byte, 8))}}), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, samples int64) {
		l := &indexfile.LitData{Columns: []string{"a", "b"}, DataFormats: []string{"numpy", "tensor"}}
		if err := LearnArrays(l, data); err != nil {
			return
		}
		rec, err := Decode(l, data, samples, nil)
		if err != nil {
			return
		}
		if rec.NumRows() != samples {
			t.Fatalf("decoded %d items, the index says %d", rec.NumRows(), samples)
		}
		rec.Release()
	})
}

// FuzzTokens: any TokensLoader chunk decodes to its blocks or is refused,
// never a panic or a short read.
func FuzzTokens(f *testing.F) {
	le := binary.LittleEndian
	tokens := func(docs ...[]int32) []byte {
		var out []byte
		header := 4 + 4*(len(docs)+1)
		out = le.AppendUint32(out, uint32(len(docs)))
		off := header
		out = le.AppendUint32(out, uint32(off))
		var body []byte
		for _, d := range docs {
			for _, v := range d {
				body = le.AppendUint32(body, uint32(v))
			}
			off += 4 * len(d)
			out = le.AppendUint32(out, uint32(off))
		}
		return append(out, body...)
	}
	f.Add(tokens([]int32{1, 2, 3, 4}, []int32{5, 6, 7}), int64(2))
	f.Add(tokens(), int64(0))
	l := &indexfile.LitData{Columns: []string{"value"}, DataFormats: []string{"no_header_numpy:2"}, BlockSize: 3}
	f.Fuzz(func(t *testing.T, data []byte, samples int64) {
		rec, err := Decode(l, data, samples, nil)
		if err != nil {
			return
		}
		if rec.NumRows() != samples {
			t.Fatalf("decoded %d blocks, the index says %d", rec.NumRows(), samples)
		}
		rec.Release()
	})
}

// FuzzInflate: any chunk a compressed dataset holds inflates to a chunk
// of at most the bound, or is refused, never a panic; a framed chunk that
// inflates holds its directory's items.
func FuzzInflate(f *testing.F) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		f.Fatal(err)
	}
	plain := chunk([][][]byte{{[]byte("ab")}, {[]byte("cde")}})
	f.Add(enc.EncodeAll(plain, nil), "chunk")
	items := chunk([][][]byte{{enc.EncodeAll([]byte("xy"), nil)}, {enc.EncodeAll(nil, nil)}})
	f.Add(items, "sample")
	le := binary.LittleEndian
	frame := enc.EncodeAll([]byte("abcde"), nil)
	framed := append([]byte("LDFZ01\x00\x00"), 1, 0, 0, 0)
	framed = le.AppendUint32(le.AppendUint32(le.AppendUint32(framed, 2), 256), 1)
	framed = le.AppendUint32(le.AppendUint32(le.AppendUint32(framed, 0), 2), 5)
	table := 24 + 12 + 24
	framed = le.AppendUint32(le.AppendUint32(framed, 0), 2)
	framed = le.AppendUint64(framed, uint64(table))
	framed = le.AppendUint32(le.AppendUint32(framed, uint32(len(frame))), 5)
	f.Add(append(framed, frame...), "batch")
	f.Fuzz(func(t *testing.T, data []byte, level string) {
		l := &indexfile.LitData{Columns: []string{"a"}, DataFormats: []string{"bytes"}, CompressionLevel: level}
		out, err := Inflate(l, data)
		if err != nil {
			return
		}
		if len(out) > maxChunkBytes {
			t.Fatalf("inflated to %d bytes, past the bound", len(out))
		}
		if level == "batch" {
			n, err := u32(out, 0)
			if err != nil || n != int(le.Uint32(data[12:])) {
				t.Fatalf("a framed chunk of %d items inflated to %d (%v)", le.Uint32(data[12:]), n, err)
			}
		}
	})
}
