package mds

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// memFiles is a directory in memory for the writer.
type memFiles map[string][]byte

func (m memFiles) put(name string, data []byte) error {
	m[name] = bytes.Clone(data)
	return nil
}

func i32s(vs ...int32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

var allColumns = []Column{
	{"b", "bytes"}, {"s", "str"}, {"i", "int"}, {"u8", "uint8"}, {"u16", "uint16"}, {"u32", "uint32"}, {"u64", "uint64"},
	{"i8", "int8"}, {"i16", "int16"}, {"i32", "int32"}, {"i64", "int64"}, {"f16", "float16"}, {"f32", "float32"}, {"f64", "float64"},
	{"si", "str_int"}, {"sf", "str_float"}, {"sd", "str_decimal"}, {"j", "json"},
	{"img", "jpeg"}, {"imgs", "list[jpeg]"}, {"ja", "jpeg_array"},
	{"tok", "ndarray:int32:4"}, {"m", "ndarray:float32:2,2"}, {"dyn", "ndarray:int32"}, {"any", "ndarray"},
}

func sampleFor(i int) map[string]any {
	return map[string]any{
		"b": []byte(fmt.Sprintf("blob-%d", i)), "s": fmt.Sprintf("text %d é", i), "i": int64(-i * 1000),
		"u8": uint8(i), "u16": uint16(i * 300), "u32": uint32(i * 70000), "u64": uint64(i) << 40,
		"i8": int8(-i), "i16": int16(-i * 300), "i32": int32(-i * 70000), "i64": int64(-i) << 40,
		"f16": uint16(0x3c00), "f32": float32(i) / 4, "f64": float64(i) / 3,
		"si": int64(i * 12345), "sf": float64(i) + 0.5, "sd": fmt.Sprintf("%d.125", i), "j": fmt.Sprintf(`{"k": %d}`, i),
		"img": []byte{0xff, 0xd8, byte(i)}, "imgs": [][]byte{{1, 2}, {3}}, "ja": [][]byte{{byte(i)}},
		"tok": NDArray{DType: "int32", Shape: []int64{4}, Data: i32s(int32(i), 1, 2, 3)},
		"m":   NDArray{DType: "float32", Shape: []int64{2, 2}, Data: bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 4)},
		"dyn": NDArray{DType: "int32", Shape: []int64{1, int64(i + 1)}, Data: i32s(make([]int32, i+1)...)},
		"any": NDArray{DType: "uint16", Shape: []int64{300}, Data: make([]byte, 600)},
	}
}

func TestWriteThenReadEveryEncodingAndCompression(t *testing.T) {
	for _, comp := range []string{"", "zstd", "zstd:7", "gz:6", "br:4", "snappy"} {
		t.Run("compression="+comp, func(t *testing.T) {
			const n = 40
			x, files := writeShards(t, comp, 2000, n, "sha1", "xxh64")
			if len(x.Shards) < 2 {
				t.Fatalf("%d shards for a 2000-byte limit, want several", len(x.Shards))
			}
			got := 0
			for _, e := range x.Shards {
				rec := decodeStored(t, files[e.Stored().Basename], &e)
				for i := range int(rec.NumRows()) {
					checkRow(t, rec, i, got+i)
				}
				got += int(rec.NumRows())
				rec.Release()
			}
			if got != n {
				t.Fatalf("read %d samples, wrote %d", got, n)
			}
		})
	}
}

// decodeStored checks a stored shard against every hash its index entry
// records and decodes all of it into one record batch.
func decodeStored(t *testing.T, stored []byte, e *mdsindex.ShardEntry) arrow.RecordBatch {
	t.Helper()
	for algo, want := range e.Stored().Hashes {
		if sum, _ := checksum.Of(algo, stored); sum.Hex != want {
			t.Fatalf("%s: %s is %s, index says %s", e.Stored().Basename, algo, sum.Hex, want)
		}
	}
	sh, err := ReadShard(stored, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
	defer rb.Release()
	for i := range sh.Len() {
		if err := sh.Append(rb, i); err != nil {
			t.Fatal(err)
		}
	}
	return rb.NewRecordBatch()
}

func col(rec arrow.RecordBatch, name string) arrow.Array {
	idx := rec.Schema().FieldIndices(name)
	return rec.Column(idx[0])
}

func checkRow(t *testing.T, rec arrow.RecordBatch, row, i int) {
	t.Helper()
	want := sampleFor(i)
	check := func(name string, got, exp any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("sample %d column %s = %v, want %v", i, name, got, exp)
		}
	}
	check("b", string(col(rec, "b").(*array.Binary).Value(row)), string(want["b"].([]byte)))
	check("s", col(rec, "s").(*array.String).Value(row), want["s"])
	check("i", col(rec, "i").(*array.Int64).Value(row), want["i"])
	check("u64", col(rec, "u64").(*array.Uint64).Value(row), want["u64"])
	check("i16", col(rec, "i16").(*array.Int16).Value(row), want["i16"])
	check("f16", col(rec, "f16").(*array.Float16).Value(row).Float32(), 1.0)
	check("f32", col(rec, "f32").(*array.Float32).Value(row), want["f32"])
	if got := col(rec, "f64").(*array.Float64).Value(row); math.Abs(got-want["f64"].(float64)) != 0 {
		t.Fatalf("f64 = %v", got)
	}
	check("si", col(rec, "si").(*array.Int64).Value(row), want["si"])
	check("sf", col(rec, "sf").(*array.Float64).Value(row), want["sf"])
	check("sd", col(rec, "sd").(*array.String).Value(row), want["sd"])
	check("j", col(rec, "j").(*array.String).Value(row), want["j"])
	imgs := col(rec, "imgs").(*array.List)
	lo, hi := imgs.ValueOffsets(row)
	check("imgs", hi-lo, 2)
	tok := col(rec, "tok").(*array.FixedSizeList)
	vals := tok.ListValues().(*array.Int32).Int32Values()[row*4 : row*4+4]
	check("tok", vals, []int32{int32(i), 1, 2, 3})
	if md, _ := rec.Schema().Field(rec.Schema().FieldIndices("m")[0]).Metadata.GetValue(MetaShape); md != "2,2" {
		t.Fatalf("m shape metadata = %q", md)
	}
	dyn := col(rec, "dyn").(*array.Struct)
	shape := dyn.Field(1).(*array.List)
	slo, shi := shape.ValueOffsets(row)
	check("dyn.shape", shape.ListValues().(*array.Int64).Int64Values()[slo:shi], []int64{1, int64(i + 1)})
	anyArr := col(rec, "any").(*array.Struct)
	check("any.dtype", anyArr.Field(0).(*array.String).Value(row), "uint16")
	check("any.data", len(anyArr.Field(2).(*array.Binary).Value(row)), 600)
}

func TestReadShardProjectsAndRefuses(t *testing.T) {
	files := memFiles{}
	w, _ := NewWriter(WriterOptions{Columns: []Column{{"a", "int"}, {"z", "str"}}, Put: files.put})
	_ = w.Write(map[string]any{"a": int64(7), "z": "x"})
	_ = w.Close()
	x, _ := mdsindex.Read(bytes.NewReader(files["index.json"]))
	e := x.Shards[0]
	sh, err := ReadShard(files["shard.00000.mds"], &e, []string{"z"})
	if err != nil {
		t.Fatal(err)
	}
	if sh.Schema().NumFields() != 1 || sh.Schema().Field(0).Name != "z" {
		t.Fatalf("schema = %v, want only z", sh.Schema())
	}
	if _, err := ReadShard(files["shard.00000.mds"], &e, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `no column "nope": its columns are a, z`) {
		t.Fatalf("unknown column: %v", err)
	}
	// A pkl column: readable around, refused when read.
	pk := e
	pk.ColumnEncodings = []string{"pkl", "str"}
	pk.ColumnSizes = []*int64{nil, nil}
	if _, err := ReadShard(files["shard.00000.mds"], &pk, nil); err == nil || !strings.Contains(err.Error(), `column "a" uses the pkl encoding`) {
		t.Fatalf("pkl column: %v", err)
	}
}

func TestWriterRejectsBadInput(t *testing.T) {
	files := memFiles{}
	tests := []struct {
		name string
		opts WriterOptions
		want string
	}{
		{"no columns", WriterOptions{Put: files.put}, "no columns"},
		{"pkl", WriterOptions{Columns: []Column{{"a", "pkl"}}, Put: files.put}, "does not write pkl"},
		{"bad encoding", WriterOptions{Columns: []Column{{"a", "int128"}}, Put: files.put}, "unknown MDS encoding"},
		{"bad compression", WriterOptions{Columns: []Column{{"a", "int"}}, Compression: "lz4", Put: files.put}, "not supported"},
		{"bad level", WriterOptions{Columns: []Column{{"a", "int"}}, Compression: "zstd:99", Put: files.put}, "levels are 1 to 22"},
		{"bz2 write", WriterOptions{Columns: []Column{{"a", "int"}}, Compression: "bz2", Put: files.put}, "does not write them"},
		{"bad hash", WriterOptions{Columns: []Column{{"a", "int"}}, Hashes: []string{"crc"}, Put: files.put}, "not supported"},
		{"duplicate", WriterOptions{Columns: []Column{{"a", "int"}, {"a", "str"}}, Put: files.put}, "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewWriter(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewWriter = %v, want %q", err, tt.want)
			}
		})
	}
	w, _ := NewWriter(WriterOptions{Columns: []Column{{"a", "int"}, {"t", "ndarray:int32:2"}}, Put: files.put})
	for _, s := range []map[string]any{
		{"a": "x", "t": NDArray{DType: "int32", Shape: []int64{2}, Data: i32s(1, 2)}},
		{"a": 1},
		{"a": 1, "t": NDArray{DType: "int32", Shape: []int64{3}, Data: i32s(1, 2, 3)}},
		{"a": 1, "t": NDArray{DType: "int64", Shape: []int64{2}, Data: make([]byte, 16)}},
	} {
		if err := w.Write(s); err == nil {
			t.Errorf("Write(%v) accepted a bad sample", s)
		}
	}
}
