package index

import (
	"bytes"
	"testing"

	"github.com/shardfeed/shardfeed/planner"
)

// FuzzRead: any index, in any of its three forms (shardfeed, MDS, a plain
// list), is either rejected with an error or gives a layout and a stream
// index that the planner takes or rejects with an error; nothing panics.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"shardfeed": 1, "format": "parquet", "shards": [{"name": "a.parquet#0", "object": "a.parquet", "part": 0, "offset": 4, "length": 100, "samples": 10, "hash": "xxh3:00", "objectSize": 200, "footerOffset": 104, "footerLength": 96}]}`,
		`{"shardfeed": 1, "format": "jsonl", "schema": [{"name": "x", "type": "int64"}], "shards": [{"name": "a.jsonl#0", "object": "a.jsonl", "part": 0, "offset": 0, "length": 12, "samples": 2, "hash": "xxh3:00"}]}`,
		`{"version": 2, "shards": [{"column_encodings": ["int"], "column_names": ["id"], "column_sizes": [8], "compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "shard.00000.mds", "bytes": 100, "hashes": {}}, "samples": 10, "size_limit": 67108864, "version": 2, "zip_data": null}]}`,
		`{"shards": [{"name": "part-0.parquet", "samples": 1000, "bytes": 123456, "hash": "sha256:00"}]}`,
		`{"shards": []}`,
		icebergIndex(goodTable, `, "deleted": [[0, 1], [5, 7]]`, 7),
		`{"shardfeed": 1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		layout, lerr := ReadLayout(bytes.NewReader(data))
		x, err := Read(bytes.NewReader(data))
		if lerr == nil && err != nil {
			t.Fatalf("ReadLayout took an index that Read rejects: %v", err)
		}
		if err != nil {
			return
		}
		if lerr == nil && len(layout.Index.Shards) != len(x.Shards) {
			t.Fatalf("ReadLayout has %d shards, Read %d", len(layout.Index.Shards), len(x.Shards))
		}
		var samples int64
		for _, s := range x.Shards {
			samples += s.Samples
		}
		if samples <= 0 || samples > 1<<40 {
			return
		}
		p, err := planner.New(planner.Params{Streams: []planner.Stream{{Name: "s", Index: x}}, Seed: 1, NumSplits: 2,
			GlobalBatchSize: 2, Shuffle: true, BlockSize: 64})
		if err != nil {
			return
		}
		if ep, err := p.Epoch(0); err == nil && p.SplitLen() > 0 {
			_ = ep.At(0, 0)
		}
	})
}
