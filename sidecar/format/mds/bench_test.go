package mds

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// benchShard writes one shard of n samples of the given kind: "tokens"
// (ndarray:int32:2048) or "images" (100 KB byte blobs).
func benchShard(b *testing.B, kind, compression string, n int) ([]byte, *mdsindex.ShardEntry) {
	files := memFiles{}
	col := Column{"tokens", "ndarray:int32:2048"}
	if kind == "images" {
		col = Column{"image", "jpeg"}
	}
	w, err := NewWriter(WriterOptions{Columns: []Column{col, {"id", "int"}}, Compression: compression, SizeLimit: 1 << 30, Put: files.put})
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]byte, 2048*4)
	for i := range 2048 {
		binary.LittleEndian.PutUint32(tokens[4*i:], uint32(i*7919%50257))
	}
	blob := bytes.Repeat([]byte{0xff, 0xd8, 0x42, 0x17}, 25_000)
	for i := range n {
		s := map[string]any{"id": int64(i)}
		if kind == "images" {
			s["image"] = blob
		} else {
			s["tokens"] = NDArray{DType: "int32", Shape: []int64{2048}, Data: tokens}
		}
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	x, _ := mdsindex.Read(bytes.NewReader(files["index.json"]))
	e := x.Shards[0]
	return files[e.Stored().Basename], &e
}

// BenchmarkDecode decodes a whole shard to Arrow: MB/s of raw shard bytes.
func BenchmarkDecode(b *testing.B) {
	for _, kind := range []string{"tokens", "images"} {
		for _, comp := range []string{"", "zstd:3"} {
			b.Run(fmt.Sprintf("%s/compression=%s", kind, comp), func(b *testing.B) {
				stored, e := benchShard(b, kind, comp, 256)
				b.SetBytes(e.RawData.Bytes)
				b.ReportAllocs()
				for b.Loop() {
					sh, err := ReadShard(stored, e, nil)
					if err != nil {
						b.Fatal(err)
					}
					rb := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
					for i := range sh.Len() {
						if err := sh.Append(rb, i); err != nil {
							b.Fatal(err)
						}
					}
					rb.NewRecordBatch().Release()
					rb.Release()
				}
				b.ReportMetric(float64(256*b.N)/b.Elapsed().Seconds(), "samples/s")
			})
		}
	}
}
