package arrowipc

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func writeIPC(t testing.TB, batches ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	writeBatches(t, func(schema *arrow.Schema) batchWriter {
		w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}, batches)
	return buf.Bytes()
}

// batchWriter is an Arrow IPC file or stream writer.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// writeBatches writes batches of the given sizes of (id, s) rows, ids
// counting from 0, with the writer open makes.
func writeBatches(t testing.TB, open func(*arrow.Schema) batchWriter, batches []int) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	w := open(schema)
	id := int64(0)
	for _, n := range batches {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for range n {
			b.Field(0).(*array.Int64Builder).Append(id)
			b.Field(1).(*array.StringBuilder).Append(strings.Repeat("s", int(id%5)))
			id++
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBatchesGiveRowsAndDisjointRanges(t *testing.T) {
	data := writeIPC(t, 100, 7, 300)
	bs, err := Batches(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 3 || bs[0].Rows != 100 || bs[1].Rows != 7 || bs[2].Rows != 300 {
		t.Fatalf("batches = %+v", bs)
	}
	for i, b := range bs {
		if b.Offset < 8 || b.Length <= 0 || b.Offset+b.Length > int64(len(data)) || i > 0 && b.Offset < bs[i-1].Offset+bs[i-1].Length {
			t.Fatalf("batch %d range [%d, %d) is not inside the file after the previous one", i, b.Offset, b.Offset+b.Length)
		}
	}
	rec, err := ReadBatch(data, 2, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if rec.NumCols() != 1 || rec.Column(0).(*array.Int64).Value(0) != 107 {
		t.Fatalf("batch 2 = %v", rec)
	}
	// A flipped byte in batch 1's range leaves batch 0 as it was.
	bad := bytes.Clone(data)
	bad[bs[1].Offset+bs[1].Length-1] ^= 0xff
	if r0, err := ReadBatch(bad, 0, nil); err != nil || r0.Column(0).(*array.Int64).Value(99) != 99 {
		t.Fatalf("batch 0 after damage to batch 1: %v", err)
	}
}

func TestBrokenFilesAreRefused(t *testing.T) {
	data := writeIPC(t, 10)
	for name, d := range map[string][]byte{"empty": nil, "garbage": []byte("ARROW1 not really"), "truncated": data[:len(data)/2]} {
		if _, err := Batches(d); err == nil {
			t.Errorf("%s: Batches accepted it", name)
		}
	}
	// An IPC stream (a Hugging Face datasets .arrow file) read as a file
	// says what it is, from its head or its tail.
	stream := writeStream(t, nil, 10, 3)
	for _, err := range []error{verify(stream), func() error { _, err := FooterLength(stream[len(stream)-10:], int64(len(stream))); return err }()} {
		if err == nil || !strings.Contains(err.Error(), "an Arrow IPC stream, not a file") || !strings.Contains(err.Error(), "format huggingface") {
			t.Errorf("a stream as a file: %v", err)
		}
	}
	if _, err := ReadBatch(data, 5, nil); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("batch 5 of 1: %v", err)
	}
	if _, err := ReadBatch(data, 0, []string{"x"}); err == nil || !strings.Contains(err.Error(), `no column "x": the file's columns are id, s`) {
		t.Errorf("unknown column: %v", err)
	}
}

// FuzzBatches: malformed files give errors, never panics.
func FuzzBatches(f *testing.F) {
	f.Add(writeIPC(f, 3, 2))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		if bs, err := Batches(data); err == nil {
			for i := range bs {
				if r, err := ReadBatch(data, i, nil); err == nil {
					r.Release()
				}
			}
		}
	})
}

func TestBatchDecodesFromItsRangeAndTheTailAlone(t *testing.T) {
	data := writeIPC(t, 50, 60, 70)
	bs, err := Batches(data)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(data))
	n, err := FooterLength(data[size-10:], size)
	if err != nil {
		t.Fatal(err)
	}
	tail := data[size-n:]
	for i, b := range bs {
		sparse := bytes.Repeat([]byte{0xee}, len(data))
		copy(sparse[b.Offset:], data[b.Offset:b.Offset+b.Length])
		got, err := ReadBatchRange(context.Background(), size, tail, b.Offset, sparse[b.Offset:b.Offset+b.Length], i, nil)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		want, _ := ReadBatch(data, i, nil)
		if !array.RecordEqual(got, want) {
			t.Fatalf("batch %d from its range differs", i)
		}
	}
	if _, err := ReadBatchRange(context.Background(), size, tail, bs[0].Offset, data[bs[0].Offset:bs[0].Offset+bs[0].Length], 2, nil); err == nil {
		t.Fatal("batch 2 decoded from batch 0's bytes")
	}
}

// A compressed buffer's uncompressed length is what arrow-go allocates
// before decompressing: a lying one is refused before the reader runs.
func TestLyingCompressedLengthIsRefused(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithZstd())
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	for i := range 1000 {
		b.Append(int64(i))
	}
	arr := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 1000)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	if err := Verify(good); err != nil {
		t.Fatalf("a zstd file is refused: %v", err)
	}
	// The values buffer's length prefix: 1000 int64s, 8000 bytes.
	want := []byte{0x40, 0x1f, 0, 0, 0, 0, 0, 0}
	at := bytes.Index(good, want)
	if at < 0 {
		t.Fatal("no uncompressed length of 8000 in the file")
	}
	bad := bytes.Clone(good)
	copy(bad[at:], []byte{0, 0, 0, 0, 0x40, 0, 0, 0}) // 256 GiB
	err = Verify(bad)
	if err == nil || !strings.Contains(err.Error(), "claims 274877906944 bytes") {
		t.Fatalf("Verify = %v, want a refusal of the claimed length", err)
	}
	if _, err := Batches(bad); err == nil {
		t.Fatal("Batches read a file whose buffer claims 256 GiB")
	}
}
