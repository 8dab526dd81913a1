//go:build integration

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5" //nolint:gosec // as S3 Inventory's manifest
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

func parquetFile(t *testing.T, first, rows, rowGroup int) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range rows {
		b.Field(0).(*array.Int64Builder).Append(int64(first + i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(int64(rowGroup))), pqarrow.DefaultWriterProps())
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

func TestIntegrationIndexAndPlanAParquetStreamInMinIO(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	for i, rows := range []int{250, 100, 400} {
		data := parquetFile(t, i*1000, rows, 100)
		if _, err := minioServer.Client.PutObject(ctx, bucket, fmt.Sprintf("web/part-%d.parquet", i), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	creds := minioServer.CredentialsDir(t)
	endpoint := "http://" + minioServer.Endpoint
	uri := "s3://" + bucket + "/web/"
	out, err := runCLI(t, "index", uri, "--endpoint", endpoint, "--insecure", "--credentials-dir", creds)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 3 + 1 + 4 row groups of at most 100 rows.
	if !strings.Contains(out, "wrote "+uri+"_shardfeed/index.json: 8 shards, 750 samples") {
		t.Fatalf("index output:\n%s", out)
	}

	manifest := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: web}
spec:
  streams:
    - name: web
      format: parquet
      source: {uri: %q, endpoint: %q, insecure: true}
  numSplits: 5
  globalBatchSize: 10
`, uri, endpoint)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "plan", "-f", manifest, "--credentials-dir", creds, "-o", "json", "--pods", "1,5")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s.Samples != 750 || s.Steps != 75 || s.Streams[0].Shards != 8 || s.Pods[1].Pods != 5 {
		t.Fatalf("summary = %+v", s)
	}
	// Without credentials the error names the object and the status (a
	// --credentials-dir serves every store of a manifest: one whose keys
	// are not in it reads with its default chain, here anonymous).
	_, err = runCLI(t, "plan", "-f", manifest, "--credentials-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "index.json: HTTP 403 AccessDenied (check the stream's credentials") {
		t.Fatalf("plan without credentials: %v", err)
	}
}

func TestIntegrationIndexAndPlanTextAndArrowStreamsInMinIO(t *testing.T) {
	ctx := context.Background()
	creds := minioServer.CredentialsDir(t)
	var jsonl, csv strings.Builder
	csv.WriteString("id,name\n")
	for i := range 300 {
		fmt.Fprintf(&jsonl, "{\"id\": %d}\n", i)
		fmt.Fprintf(&csv, "%d,n%d\n", i, i)
	}
	var arrowFile bytes.Buffer
	{
		schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
		w, _ := ipc.NewFileWriter(&arrowFile, ipc.WithSchema(schema))
		for start := 0; start < 300; start += 100 {
			rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			for i := start; i < start+100; i++ {
				rb.Field(0).(*array.Int64Builder).Append(int64(i))
			}
			_ = w.Write(rb.NewRecordBatch())
		}
		_ = w.Close()
	}
	for format, obj := range map[string]struct {
		name string
		data []byte
	}{"jsonl": {"a.jsonl", []byte(jsonl.String())}, "csv": {"a.csv", []byte(csv.String())}, "arrow": {"a.arrow", arrowFile.Bytes()}} {
		t.Run(format, func(t *testing.T) {
			bucket := minioServer.Bucket(t)
			if _, err := minioServer.Client.PutObject(ctx, bucket, "s/"+obj.name, bytes.NewReader(obj.data), int64(len(obj.data)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			uri, endpoint := "s3://"+bucket+"/s/", "http://"+minioServer.Endpoint
			if out, err := runCLI(t, "index", uri, "--format", format, "--shard-size", "1KiB", "--endpoint", endpoint, "--insecure", "--credentials-dir", creds); err != nil || !strings.Contains(out, "300 samples") {
				t.Fatalf("index: %v\n%s", err, out)
			}
			manifest := filepath.Join(t.TempDir(), "ds.yaml")
			_ = os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: data.shardfeed.io/v1alpha1\nkind: TrainingDataset\nmetadata: {name: s}\nspec:\n  streams: [{name: s, format: %s, source: {uri: %q, endpoint: %q, insecure: true}}]\n  numSplits: 3\n  globalBatchSize: 3\n", format, uri, endpoint)), 0o600)
			out, err := runCLI(t, "plan", "-f", manifest, "--credentials-dir", creds, "--ids", "--world-size", "3")
			if err != nil {
				t.Fatalf("plan: %v\n%s", err, out)
			}
			n := 0
			for _, l := range readIDs(t, out) {
				n += len(l.IDs)
			}
			if n != 300 {
				t.Fatalf("plan delivers %d of 300 samples", n)
			}
		})
	}
}

// index --object-list: the stream's objects from an S3 Inventory report's
// CSV (keys URL-encoded, other prefixes' rows skipped) instead of a
// listing: no list request, and the very index a listing makes. A row of
// another bucket is refused, naming it.
func TestIntegrationIndexFromAnInventoryWithoutListing(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	var inventory strings.Builder
	for i, name := range []string{"web/a part-0.parquet", "web/sub/part-1.parquet", "web/sub/deeper/part-2.parquet", "other/x.parquet"} {
		data := parquetFile(t, i*1000, 150, 100)
		if _, err := minioServer.Client.PutObject(ctx, bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&inventory, "%q,%q,\"%d\",\"2026-11-29T00:00:00.000Z\",\"etag\"\n", bucket, strings.ReplaceAll(name, " ", "%20"), len(data))
	}
	list := filepath.Join(t.TempDir(), "inventory.csv")
	if err := os.WriteFile(list, []byte(inventory.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := minioServer.CredentialsDir(t)
	endpoint := "http://" + minioServer.Endpoint
	uri := "s3://" + bucket + "/web/"
	index := func(args ...string) (string, []byte) {
		out, err := runCLI(t, append([]string{"index", uri, "--endpoint", endpoint, "--insecure", "--credentials-dir", creds}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		obj, err := minioServer.Client.GetObject(ctx, bucket, "web/_shardfeed/index.json", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(obj); err != nil {
			t.Fatal(err)
		}
		return out, b.Bytes()
	}
	listedOut, listed := index("--list-parallel", "4")
	if !strings.Contains(listedOut, "6 shards, 450 samples") {
		t.Fatalf("index by listing:\n%s", listedOut)
	}
	out, fromInventory := index("--object-list", list, "--object-list-form", "s3-inventory-csv")
	if !strings.Contains(out, "3 objects under "+uri+" from "+list+", no listing (1 rows of other prefixes skipped)") || !strings.Contains(out, "(0 of them lists)") {
		t.Fatalf("index from an inventory:\n%s", out)
	}
	// The same index but its listing's record: an inventory gives sizes,
	// and no ETags to tell a rewrite by.
	if !bytes.Equal(listed, fromInventory) && !bytes.Equal(withoutListing(t, listed), withoutListing(t, fromInventory)) {
		t.Fatalf("the index from the inventory differs from the listing's:\n%s\n%s", fromInventory, listed)
	}
	// The whole report, as `aws s3 sync` of its destination copies it: a
	// manifest and its gzipped data files, checked by their MD5.
	report := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(inventory.String()))
	_ = zw.Close()
	_ = os.MkdirAll(filepath.Join(report, "data"), 0o755)
	_ = os.MkdirAll(filepath.Join(report, "2026-11-29T01-00Z"), 0o755)
	if err := os.WriteFile(filepath.Join(report, "data", "1.csv.gz"), gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(gz.Bytes()) //nolint:gosec // as S3 Inventory's manifest
	manifest := filepath.Join(report, "2026-11-29T01-00Z", "manifest.json")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, `{"sourceBucket": %q, "fileFormat": "CSV", "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
		"files": [{"key": "inv/%s/cfg/data/1.csv.gz", "size": %d, "MD5checksum": "%x"}]}`, bucket, bucket, gz.Len(), sum), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, fromReport := index("--object-list", manifest, "--object-list-form", "s3-inventory"); !bytes.Equal(fromInventory, fromReport) || !strings.Contains(out, "(0 of them lists)") {
		t.Fatalf("the index from the inventory's manifest differs from the listing's:\n%s\n%s", out, fromReport)
	}
	other := strings.Replace(inventory.String(), fmt.Sprintf("%q", bucket), `"another"`, 1)
	if err := os.WriteFile(list, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "index", uri, "--endpoint", endpoint, "--insecure", "--credentials-dir", creds, "--object-list", list, "--object-list-form", "s3-inventory-csv"); err == nil ||
		!strings.Contains(out+err.Error(), `row 1: an object of bucket "another"`) {
		t.Fatalf("an inventory of another bucket: %v\n%s", err, out)
	}
}

// A stream indexed compact on S3 reads back as its JSON index, with its
// content hash; --append indexes only the new objects, and the shards
// indexed before stay as they were.
func TestIntegrationIndexCompactAndAppendOnS3(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	put := func(names ...string) {
		for i, name := range names {
			data := parquetFile(t, i*1000, 150, 75)
			if _, err := minioServer.Client.PutObject(ctx, bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("web/a.parquet", "web/c.parquet", "web/e.parquet")
	creds := minioServer.CredentialsDir(t)
	src := store.Source{URI: "s3://" + bucket + "/web/", Endpoint: "http://" + minioServer.Endpoint, Insecure: true, CredentialsDir: creds}
	st, err := stores.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		out, err := runCLI(t, append([]string{"index", src.URI, "--endpoint", src.Endpoint, "--insecure", "--credentials-dir", creds}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	exists := func(key string) bool {
		_, err := st.Stat(ctx, key)
		return err == nil
	}
	read := func() *indexfile.File {
		l, _, err := index.ReadStoreIndex(ctx, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		return l.File
	}
	run("--index-form", "json")
	asJSON := read()
	if out := run("--index-form", "compact"); !strings.Contains(out, "_shardfeed/index.sfi: 6 shards") || !exists(compact.Key) || exists(indexfile.Key) {
		t.Fatalf("index --index-form compact:\n%s", out)
	}
	compact := read()
	if !reflect.DeepEqual(compact, asJSON) || compact.StreamIndex().ContentHash() != asJSON.StreamIndex().ContentHash() {
		t.Fatal("the compact index does not read back as the JSON index")
	}

	put("web/b.parquet", "web/f.parquet")
	if out := run("--append", "--index-form", "compact"); !strings.Contains(out, "10 shards, 4 of them new") {
		t.Fatalf("index --append:\n%s", out)
	}
	appended := read()
	if !reflect.DeepEqual(appended.Shards[:6], compact.Shards) || appended.Shards[6].Object != "b.parquet" || appended.Shards[9].Object != "f.parquet" {
		t.Fatalf("appended: %+v", appended.Shards)
	}
	if exists(index.CheckpointMetaKey) || exists(index.CheckpointKey) {
		t.Fatal("a checkpoint is left beside a written index")
	}
	data := parquetFile(t, 0, 170, 100) // c rewritten, with 170 rows
	if _, err := minioServer.Client.PutObject(ctx, bucket, "web/c.parquet", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "index", src.URI, "--endpoint", src.Endpoint, "--insecure", "--credentials-dir", creds, "--append"); err == nil ||
		!strings.Contains(out+err.Error(), "index the stream again, without --append") {
		t.Fatalf("append over a rewritten object: %v\n%s", err, out)
	}
}

// withoutListing is an index's JSON without its listing's record.
func withoutListing(t *testing.T, b []byte) []byte {
	t.Helper()
	var f map[string]json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if _, ok := f["listing"]; !ok {
		t.Fatalf("the index records no listing: %s", b)
	}
	delete(f, "listing")
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
