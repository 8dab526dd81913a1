package parquet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// writeParquet returns a Parquet file of rows rows (id int64, text string,
// tokens list<int32>) in row groups of rowGroup rows.
func writeParquet(t testing.TB, rows, rowGroup int) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d %s", i, strings.Repeat("x", i%7)))
		lb := b.Field(2).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{int32(i), int32(i * 2)}, nil)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return fileOf(t, rec, pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(rowGroup)), pq.WithCompression(compress.Codecs.Zstd), pq.WithDictionaryDefault(true)))
}

// fileOf writes rec as a Parquet file with props.
func fileOf(t testing.TB, rec arrow.RecordBatch, props *pq.WriterProperties) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFooterGivesRowGroupsAndTheirRanges(t *testing.T) {
	data := writeParquet(t, 1000, 300)
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + t.TempDir() + "/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "part-0.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	md, err := footerOf(context.Background(), st, "part-0.parquet", int64(len(data)), data[len(data)-8:])
	if err != nil {
		t.Fatal(err)
	}
	rgs, err := RowGroups("part-0.parquet", md, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var rows []int64
	prevEnd := int64(4)
	for _, rg := range rgs {
		rows = append(rows, rg.Rows)
		if rg.Offset < prevEnd || rg.Length <= 0 {
			t.Errorf("row group range [%d, %d) overlaps the previous one or is empty", rg.Offset, rg.Offset+rg.Length)
		}
		prevEnd = rg.Offset + rg.Length
	}
	if fmt.Sprint(rows) != "[300 300 300 100]" {
		t.Fatalf("row groups have %v rows, want [300 300 300 100]", rows)
	}
	// Every row group decodes alone, with projection.
	for i, rg := range rgs {
		recs, err := ReadRowGroup(context.Background(), data, i, []string{"tokens", "id"})
		if err != nil {
			t.Fatal(err)
		}
		if Rows(recs) != rg.Rows {
			t.Fatalf("row group %d decoded %d rows, footer says %d", i, Rows(recs), rg.Rows)
		}
		s := recs[0].Schema()
		if s.NumFields() != 2 || s.Field(0).Name != "id" && s.Field(0).Name != "tokens" {
			t.Fatalf("projected schema = %v", s)
		}
		ids := recs[0].Column(s.FieldIndices("id")[0]).(*array.Int64)
		if ids.Value(0) != int64(i*300) {
			t.Fatalf("row group %d starts at id %d", i, ids.Value(0))
		}
		for _, r := range recs {
			r.Release()
		}
	}
	if _, err := ReadRowGroup(context.Background(), data, 0, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `no column "nope": the file's columns are id, text, tokens`) {
		t.Fatalf("unknown column: %v", err)
	}
	if _, err := ReadRowGroup(context.Background(), data, 9, nil); err == nil {
		t.Fatal("row group 9 of 4 read")
	}
}

func TestBrokenFilesAreRefused(t *testing.T) {
	data := writeParquet(t, 50, 20)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"too short", []byte("PAR1"), "too short"},
		{"no magic", append(bytes.Clone(data[:len(data)-4]), 'X', 'X', 'X', 'X'), "not a Parquet file"},
		{"huge footer", append(bytes.Clone(data[:len(data)-8]), 0xff, 0xff, 0xff, 0x7f, 'P', 'A', 'R', '1'), "does not fit"},
		{"garbled footer", func() []byte {
			b := bytes.Clone(data)
			for i := len(b) - 60; i < len(b)-8; i++ {
				b[i] ^= 0x5a
			}
			return b
		}(), "corrupt Parquet footer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := stores.Open(context.Background(), store.Source{URI: "file://" + t.TempDir() + "/"})
			_ = st.Put(context.Background(), "f.parquet", bytes.NewReader(tt.data), int64(len(tt.data)))
			err := indexObject(context.Background(), st, store.Object{Key: "f.parquet", Size: int64(len(tt.data))}, &indexfile.File{}, format.IndexOptions{Hash: "xxh64"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("indexObject = %v, want %q", err, tt.want)
			}
		})
	}
}

// FuzzParseFooter: a malformed footer gives an error, never a panic.
func FuzzParseFooter(f *testing.F) {
	data := writeParquet(f, 30, 10)
	n := int(data[len(data)-8]) | int(data[len(data)-7])<<8
	f.Add(data[len(data)-8-n:len(data)-8], int64(len(data)))
	f.Add([]byte{0x15, 0x00}, int64(100))
	f.Fuzz(func(t *testing.T, footer []byte, size int64) {
		if md, err := ParseFooter("f", footer, size); err == nil {
			_, _ = RowGroups("f", md, size)
		}
	})
}

func TestRowGroupDecodesFromItsRangeAndTheFooterAlone(t *testing.T) {
	data := writeParquet(t, 1000, 300)
	size := int64(len(data))
	n := int64(data[size-8]) | int64(data[size-7])<<8 | int64(data[size-6])<<16
	tail := data[size-8-n:]
	md, err := ParseFooter("f", tail[:n], size)
	if err != nil {
		t.Fatal(err)
	}
	rgs, _ := RowGroups("f", md, size)
	for i, rg := range rgs {
		// Everything outside the row group and the footer is garbage.
		sparse := bytes.Repeat([]byte{0xee}, len(data))
		copy(sparse[rg.Offset:], data[rg.Offset:rg.Offset+rg.Length])
		got, err := ReadRowGroupRange(context.Background(), format.FootedPart{Size: size, Tail: tail, Offset: rg.Offset, Data: sparse[rg.Offset : rg.Offset+rg.Length], Index: i}, []string{"id", "text"})
		if err != nil {
			t.Fatalf("row group %d: %v", i, err)
		}
		want, _ := ReadRowGroup(context.Background(), data, i, []string{"id", "text"})
		if Rows(got) != rg.Rows || !array.RecordEqual(got[0], want[0]) {
			t.Fatalf("row group %d from its range differs from the whole file's", i)
		}
	}
	if _, err := ReadRowGroupRange(context.Background(), format.FootedPart{Size: size, Tail: tail, Offset: rgs[0].Offset, Data: data[rgs[0].Offset : rgs[0].Offset+rgs[0].Length], Index: 1}, nil); err == nil || !strings.Contains(err.Error(), "were not fetched") {
		t.Fatalf("reading row group 1 with row group 0's bytes: %v", err)
	}
}

// FuzzReadRowGroup: a malformed file (footer, page headers, pages, any
// compression) gives an error from Schema or ReadRowGroup, never a panic.
func FuzzReadRowGroup(f *testing.F) {
	f.Add(writeParquet(f, 30, 10))
	f.Add(writeParquet(f, 5, 5))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 || len(data) < 8 {
			return
		}
		size := int64(len(data))
		n := int64(data[size-8]) | int64(data[size-7])<<8 | int64(data[size-6])<<16 | int64(data[size-5])<<24
		if n <= 0 || n > size-8 {
			return
		}
		if _, err := Schema(size, data[size-8-n:]); err != nil {
			return
		}
		md, err := ParseFooter("f", data[size-8-n:size-8], size)
		if err != nil {
			return
		}
		rgs, err := RowGroups("f", md, size)
		if err != nil {
			return
		}
		for i, rg := range rgs {
			if rg.Rows > 1<<16 {
				return // keep the fuzzer's memory bounded
			}
			if recs, err := ReadRowGroup(context.Background(), data, i, nil); err == nil {
				if Rows(recs) != rg.Rows {
					t.Fatalf("row group %d: %d rows, the footer says %d", i, Rows(recs), rg.Rows)
				}
				for _, r := range recs {
					r.Release()
				}
			}
		}
	})
}

// Indexing reads an object's end once: a small object's footer and row
// groups come in one GET; a larger one's row groups before the tail, and a
// footer longer than the tail, in more. The entries are those of reading
// each part apart.
func TestIndexingReadsAnObjectsTailOnce(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name           string
		rows, rowGroup int
		most           int64
	}{
		{"small: one GET", 100, 30, 1},
		{"row groups before the tail", 60000, 20000, 4},
		{"a footer past the tail", 40000, 8, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeParquet(t, tt.rows, tt.rowGroup)
			var counts store.Counts
			st, err := stores.Open(ctx, store.Source{URI: "file://" + t.TempDir() + "/", Counts: &counts})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Put(ctx, "p.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			gets := counts.Gets.Load()
			var f indexfile.File
			if err := indexObject(ctx, st, store.Object{Key: "p.parquet", Size: int64(len(data))}, &f, format.IndexOptions{Hash: "xxh64"}); err != nil {
				t.Fatal(err)
			}
			gets = counts.Gets.Load() - gets
			n := int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
			md, err := ParseFooter("p.parquet", data[int64(len(data))-8-n:len(data)-8], int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			rgs, err := RowGroups("p.parquet", md, int64(len(data)))
			if err != nil || len(rgs) != len(f.Shards) {
				t.Fatalf("%d row groups (%v), %d shards", len(rgs), err, len(f.Shards))
			}
			for p, rg := range rgs {
				sum, err := format.HashRange(ctx, st, "p.parquet", rg.Offset, rg.Length, "xxh64")
				if e := f.Shards[p]; err != nil || e.Hash != sum || e.Offset != rg.Offset || e.Length != rg.Length || e.Samples != rg.Rows {
					t.Fatalf("shard %d: %+v, row group %+v hashed %s (%v)", p, e, rg, sum, err)
				}
			}
			switch {
			case tt.most > 0 && gets > tt.most:
				t.Fatalf("%d GETs for a %d-byte object, want at most %d", gets, len(data), tt.most)
			case tt.most < 0 && n <= tailBytes-8:
				t.Fatalf("a footer of %d bytes is not past the tail", n)
			}
			t.Logf("%d bytes, footer %d, %d row groups: %d GETs", len(data), n, len(rgs), gets)
		})
	}
}
