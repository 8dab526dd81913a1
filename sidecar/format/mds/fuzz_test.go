package mds

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
)

// seedShard writes a small dataset with every encoding and returns the
// index and the stored bytes of its first shard.
func seedShard(tb testing.TB, compression string) ([]byte, []byte) {
	files := memFiles{}
	w, err := NewWriter(WriterOptions{Columns: allColumns, Compression: compression, Put: files.put})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 3 {
		if err := w.Write(sampleFor(i)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	x := files["index.json"]
	idx, _ := mdsindex.Read(bytes.NewReader(x))
	return x, files[idx.Shards[0].Stored().Basename]
}

// FuzzReadIndex: malformed index.json gives an error, never a panic.
func FuzzReadIndex(f *testing.F) {
	x, _ := seedShard(f, "")
	f.Add(x)
	f.Add([]byte(`{"version": 2, "shards": []}`))
	f.Add([]byte(`{"version": 2, "shards": [{"format": "mds", "raw_data": null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := mdsindex.Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, s := range idx.Shards {
			_, _ = Columns(&s)
		}
		_ = idx.StreamIndex()
	})
}

// FuzzReadShard: a malformed shard (raw or compressed) gives an error from
// ReadShard or Append, never a panic or an allocation beyond the index's
// limits.
func FuzzReadShard(f *testing.F) {
	for _, comp := range []string{"", "zstd", "gz", "snappy", "br"} {
		x, shard := seedShard(f, comp)
		f.Add(x, shard)
	}
	f.Fuzz(func(t *testing.T, index, shard []byte) {
		idx, err := mdsindex.Read(bytes.NewReader(index))
		if err != nil || len(idx.Shards) == 0 {
			return
		}
		e := idx.Shards[0]
		if e.RawData.Bytes > 1<<24 { // keep the fuzzer's memory bounded
			return
		}
		sh, err := ReadShard(shard, &e, nil)
		if err != nil {
			return
		}
		rb := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
		defer rb.Release()
		for i := range sh.Len() {
			if err := sh.Append(rb, i); err != nil {
				return
			}
		}
		rb.NewRecordBatch().Release()
	})
}
