package parquet

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// benchFile is one row group of n samples: "tokens" (fixed_size_list<int32>
// of 2048) or "images" (100 KB binary blobs), zstd-compressed.
func benchFile(b *testing.B, kind string, n int) ([]byte, int64) {
	var field arrow.Field
	if kind == "images" {
		field = arrow.Field{Name: "image", Type: arrow.BinaryTypes.Binary}
	} else {
		field = arrow.Field{Name: "tokens", Type: arrow.FixedSizeListOf(2048, arrow.PrimitiveTypes.Int32)}
	}
	schema := arrow.NewSchema([]arrow.Field{field, {Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	blob := bytes.Repeat([]byte{0xff, 0xd8, 0x42, 0x17}, 25_000)
	tokens := make([]int32, 2048)
	for i := range tokens {
		tokens[i] = int32(i * 7919 % 50257)
	}
	var raw int64
	for i := range n {
		if kind == "images" {
			rb.Field(0).(*array.BinaryBuilder).Append(blob)
			raw += int64(len(blob))
		} else {
			lb := rb.Field(0).(*array.FixedSizeListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int32Builder).AppendValues(tokens, nil)
			raw += 4 * 2048
		}
		rb.Field(1).(*array.Int64Builder).Append(int64(i))
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Zstd), pq.WithMaxRowGroupLength(int64(n))), pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes(), raw
}

// BenchmarkDecode decodes one row group to Arrow: MB/s of decoded values.
func BenchmarkDecode(b *testing.B) {
	for _, kind := range []string{"tokens", "images"} {
		b.Run(kind, func(b *testing.B) {
			data, raw := benchFile(b, kind, 256)
			b.SetBytes(raw)
			b.ReportAllocs()
			for b.Loop() {
				recs, err := ReadRowGroup(context.Background(), data, 0, nil)
				if err != nil {
					b.Fatal(err)
				}
				if Rows(recs) != 256 {
					b.Fatal(fmt.Sprint("rows ", Rows(recs)))
				}
				for _, r := range recs {
					r.Release()
				}
			}
			b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
