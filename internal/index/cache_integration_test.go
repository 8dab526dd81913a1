//go:build integration

package index_test

// Every format, uploaded to a real MinIO, indexed, and read back shard by
// shard through the cache, each shard fetched by its byte range.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

const rows = 900

// objects returns the objects of a stream of rows ids in format.
func objects(t *testing.T, format string) map[string][]byte {
	out := map[string][]byte{}
	switch format {
	case "jsonl":
		var b strings.Builder
		for i := range rows {
			fmt.Fprintf(&b, "{\"id\": %d, \"text\": \"row %d\"}\n", i, i)
		}
		out["a.jsonl"] = []byte(b.String())
	case "csv":
		var b strings.Builder
		b.WriteString("id,text\n")
		for i := range rows {
			fmt.Fprintf(&b, "%d,\"row\n%d\"\n", i, i)
		}
		out["a.csv"] = []byte(b.String())
	case "parquet":
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
		for part := range 2 {
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := part * rows / 2; i < (part+1)*rows/2; i++ {
				rb.Field(0).(*array.Int64Builder).Append(int64(i))
				rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
			}
			rec := rb.NewRecordBatch()
			var buf bytes.Buffer
			w, _ := pqarrow.NewFileWriter(schema, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(100)), pqarrow.DefaultWriterProps())
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			out[fmt.Sprintf("part-%d.parquet", part)] = buf.Bytes()
		}
	case "arrow":
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "text", Type: arrow.BinaryTypes.String}}, nil)
		var buf bytes.Buffer
		w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		for start := 0; start < rows; start += 150 {
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := start; i < start+150; i++ {
				rb.Field(0).(*array.Int64Builder).Append(int64(i))
				rb.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", i))
			}
			if err := w.Write(rb.NewRecordBatch()); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Close()
		out["a.arrow"] = buf.Bytes()
	case "mds":
		w, _ := mds.NewWriter(mds.WriterOptions{
			Columns: []mds.Column{{Name: "id", Encoding: "int"}, {Name: "text", Encoding: "str"}}, Compression: "zstd", Hashes: []string{"xxh64"}, SizeLimit: 4096,
			Put: func(name string, data []byte) error { out[name] = bytes.Clone(data); return nil },
		})
		for i := range rows {
			if err := w.Write(map[string]any{"id": int64(i), "text": fmt.Sprintf("row %d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Close()
	}
	return out
}

func TestIntegrationEveryFormatReadsBackThroughTheCacheByRange(t *testing.T) {
	for _, format := range []string{"parquet", "arrow", "jsonl", "csv", "mds"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			bucket := minioServer.Bucket(t)
			for name, data := range objects(t, format) {
				if _, err := minioServer.Client.PutObject(ctx, bucket, "s/"+name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			creds := minioServer.CredentialsDir(t)
			st, err := stores.Open(ctx, store.Source{URI: "s3://" + bucket + "/s/", Endpoint: "http://" + minioServer.Endpoint, Insecure: true, CredentialsDir: creds})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cache.New(cache.Options{Dir: t.TempDir(), Parallel: 4}, map[string]store.Store{"s": st})
			if err != nil {
				t.Fatal(err)
			}
			seen := make([]bool, rows)
			note := func(recs []arrow.RecordBatch) {
				for _, r := range recs {
					ids := r.Column(r.Schema().FieldIndices("id")[0]).(*array.Int64)
					for i := range ids.Len() {
						if seen[ids.Value(i)] {
							t.Fatalf("id %d read twice", ids.Value(i))
						}
						seen[ids.Value(i)] = true
					}
				}
			}
			read := func(s cache.Shard) []byte {
				p, err := c.Acquire(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Release(s)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			if format == "mds" {
				data := read(cache.Shard{Stream: "s", Key: "index.json", Size: -1})
				x, err := mds.ReadIndex(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range x.Shards {
					f := e.Stored()
					stored := read(cache.Shard{Stream: "s", Key: f.Basename, Size: f.Bytes, Hash: "xxh64:" + f.Hashes["xxh64"]})
					sh, err := mds.ReadShard(stored, &e, nil)
					if err != nil {
						t.Fatal(err)
					}
					rb := array.NewRecordBuilder(memory.DefaultAllocator, sh.Schema())
					for i := range sh.Len() {
						if err := sh.Append(rb, i); err != nil {
							t.Fatal(err)
						}
					}
					note([]arrow.RecordBatch{rb.NewRecordBatch()})
				}
			} else {
				f, err := index.Build(ctx, st, format, index.BuildOptions{ShardBytes: 2048})
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Shards) < 4 {
					t.Fatalf("%d shards, want several", len(f.Shards))
				}
				for _, e := range f.Shards {
					data := read(cache.Shard{Stream: "s", Key: e.Object, Range: true, Offset: e.Offset, Size: e.Length, Hash: e.Hash})
					var recs []arrow.RecordBatch
					switch format {
					case "parquet":
						tail := read(cache.Shard{Stream: "s", Key: e.Object, Range: true, Offset: e.FooterOffset, Size: e.FooterLength})
						recs, err = parquet.ReadRowGroupRange(ctx, e.ObjectSize, tail, e.Offset, data, e.Part, nil)
					case "arrow":
						tail := read(cache.Shard{Stream: "s", Key: e.Object, Range: true, Offset: e.FooterOffset, Size: e.FooterLength})
						var rec arrow.RecordBatch
						rec, err = arrowipc.ReadBatchRange(e.ObjectSize, tail, e.Offset, data, e.Part, nil)
						recs = []arrow.RecordBatch{rec}
					default:
						recs, err = text.Decode(data, format, f.Schema, nil)
					}
					if err != nil {
						t.Fatalf("%s: %v", e.Name, err)
					}
					note(recs)
				}
			}
			for i, ok := range seen {
				if !ok {
					t.Fatalf("id %d never read", i)
				}
			}
			if s := c.Stats(); s.FetchedBytes == 0 || s.Downloads == 0 {
				t.Fatalf("cache stats %+v", s)
			}
		})
	}
}
