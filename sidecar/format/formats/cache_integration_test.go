//go:build integration

package formats_test

// Every format, uploaded to a real MinIO, indexed, and read back shard by
// shard through the cache, each shard fetched by its byte range.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	fmtpkg "github.com/shardfeed/shardfeed/sidecar/format"

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
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/mds"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

const rows = 900

// objects returns the objects of a stream of rows ids in format.
func objects(t *testing.T, format datav1alpha1.ShardFormat) map[string][]byte {
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
	case "orc":
		// pyarrow's files, one per compression, ids running on across them.
		dir := t.TempDir()
		testenv.PythonScript(t, "venv", "test/orc/stream.py", dir, fmt.Sprint(rows))
		files, _ := filepath.Glob(filepath.Join(dir, "orc", "*.orc"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = b
		}
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
	for _, format := range []datav1alpha1.ShardFormat{datav1alpha1.FormatParquet, datav1alpha1.FormatArrow, datav1alpha1.FormatORC, datav1alpha1.FormatJSONL, datav1alpha1.FormatCSV, datav1alpha1.FormatMDS} {
		t.Run(string(format), func(t *testing.T) {
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
			reg := formats.Default()
			var layout *index.Layout
			if _, ok := reg[format].(fmtpkg.Indexer); ok {
				x, err := reg.Index(ctx, st, format, fmtpkg.IndexOptions{ShardBytes: 2048})
				if err != nil {
					t.Fatal(err)
				}
				layout = &index.Layout{Format: format, Index: x.StreamIndex(), File: x}
			} else {
				data := read(cache.Shard{Stream: "s", Key: "index.json", Size: -1})
				if layout, err = index.ReadLayout(bytes.NewReader(data)); err != nil {
					t.Fatal(err)
				}
			}
			if format != datav1alpha1.FormatMDS && len(layout.Index.Shards) < 4 {
				t.Fatalf("%d shards, want several", len(layout.Index.Shards))
			}
			reader, err := reg.Open(layout)
			if err != nil {
				t.Fatal(err)
			}
			for i, sh := range layout.Index.Shards {
				var parts [][]byte
				for _, p := range reader.Parts(i) {
					parts = append(parts, read(cache.Shard{Stream: "s", Key: p.Key, Range: p.Range, Offset: p.Offset, Size: p.Size, Hash: p.Hash}))
				}
				rr, err := reader.Records(ctx, i, parts, nil)
				if err != nil {
					t.Fatalf("%s: %v", sh.Name, err)
				}
				var recs []arrow.RecordBatch
				for rr.Next() {
					rec := rr.RecordBatch()
					rec.Retain()
					recs = append(recs, rec)
				}
				note(recs)
				for _, r := range recs {
					r.Release()
				}
				rr.Release()
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
