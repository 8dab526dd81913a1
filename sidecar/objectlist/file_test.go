package objectlist

import (
	"bytes"
	"compress/gzip"
	"crypto/md5" //nolint:gosec // as S3 Inventory's manifest
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// inventoryParquet is an S3 Inventory report's Parquet data file (its
// fields as the report names them) of rows bucket, key, size; a size < 0
// is null.
func inventoryParquet(t testing.TB, rows [][3]any) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "bucket", Type: arrow.BinaryTypes.String}, {Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "e_tag", Type: arrow.BinaryTypes.String},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r[0].(string))
		b.Field(1).(*array.StringBuilder).Append(r[1].(string))
		if n := r[2].(int64); n < 0 {
			b.Field(2).(*array.Int64Builder).AppendNull()
		} else {
			b.Field(2).(*array.Int64Builder).Append(n)
		}
		b.Field(3).(*array.StringBuilder).Append("etag")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, nil, pqarrow.DefaultWriterProps())
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

func gzipped(s string) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return buf.Bytes()
}

// report lays out an S3 Inventory report as `aws s3 sync` of its
// destination does: <config>/<date>/manifest.json and <config>/data/.
func report(t *testing.T, format string, files map[string][]byte, md5Of func(name string, data []byte) string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	var entries []string
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, "data", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, fmt.Sprintf(`{"key": "inv/bkt/cfg/data/%s", "size": %d, "MD5checksum": %q}`, name, len(data), md5Of(name, data)))
	}
	manifest := filepath.Join(root, "2026-11-29T01-00Z", "manifest.json")
	_ = os.MkdirAll(filepath.Dir(manifest), 0o755)
	body := fmt.Sprintf(`{"sourceBucket": "bkt", "destinationBucket": "arn:aws:s3:::inv", "version": "2016-11-30", "fileFormat": %q,
		"fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag", "files": [%s]}`, format, strings.Join(entries, ","))
	if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifest
}

func md5hex(_ string, data []byte) string {
	sum := md5.Sum(data) //nolint:gosec // as the manifest's
	return hex.EncodeToString(sum[:])
}

func TestReadFileOfEveryForm(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := "[{a.bin 10 } {b c.bin 20 }]"
	pq := inventoryParquet(t, [][3]any{{"bkt", "data/b c.bin", int64(20)}, {"bkt", "data/a.bin", int64(10)}, {"bkt", "other/x", int64(1)}})
	csvData := "\"bkt\",\"data/b%20c.bin\",\"20\",\"x\"\n\"bkt\",\"data/a.bin\",\"10\",\"x\"\n\"bkt\",\"other/x\",\"1\",\"x\"\n"
	for _, c := range []struct {
		name, file string
		form       Form
		want       string
	}{
		{"parquet", write("inv.parquet", pq), Parquet, want},
		{"gzipped csv", write("inv.csv.gz", gzipped(csvData)), S3InventoryCSV, want},
		{"manifest of csv", report(t, "CSV", map[string][]byte{"1.csv.gz": gzipped(csvData[:strings.Index(csvData, "\n")+1]), "2.csv.gz": gzipped(csvData[strings.Index(csvData, "\n")+1:])}, md5hex), S3Inventory, want},
		{"manifest of parquet", report(t, "Parquet", map[string][]byte{"1.parquet": pq}, md5hex), S3Inventory, want},
		{"a changed data file", report(t, "Parquet", map[string][]byte{"1.parquet": pq}, func(string, []byte) string { return strings.Repeat("0", 32) }), S3Inventory,
			"does not have the MD5 the manifest gives it"},
		{"orc", report(t, "ORC", map[string][]byte{"1.orc": []byte("x")}, md5hex), S3Inventory, `format "ORC": use CSV or Parquet`},
		{"another bucket's parquet", write("other.parquet", inventoryParquet(t, [][3]any{{"other", "data/a", int64(1)}})), Parquet, `row 1: an object of bucket "other"`},
		{"a delete marker", write("marker.parquet", inventoryParquet(t, [][3]any{{"bkt", "data/a", int64(-1)}})), Parquet, "row 1: a null key or size"},
		{"not parquet", write("x.parquet", []byte("PAR1 not really")), Parquet, "not a Parquet file"},
		{"twice across files", report(t, "CSV", map[string][]byte{"1.csv.gz": gzipped(csvData), "2.csv.gz": gzipped(csvData)}, md5hex), S3Inventory, "a.bin is listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, outside, err := ReadFile(c.file, c.form, "bkt", "data/", 0)
			got := fmt.Sprint(objs)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, c.want) || (err == nil && outside == 0) {
				t.Fatalf("got %s (%d outside), want %s", got, outside, c.want)
			}
		})
	}
	missing := report(t, "CSV", map[string][]byte{"1.csv.gz": gzipped(csvData)}, md5hex)
	_ = os.Remove(filepath.Join(filepath.Dir(missing), "..", "data", "1.csv.gz"))
	if _, _, err := ReadFile(missing, S3Inventory, "bkt", "data/", 0); err == nil || !strings.Contains(err.Error(), "copy the report's data files beside its manifest") {
		t.Fatalf("a data file not there: %v", err)
	}
}

// FuzzReadParquet: any bytes read as a Parquet list are refused with an
// error or give objects sorted, distinct and not negative; never a panic.
func FuzzReadParquet(f *testing.F) {
	f.Add(inventoryParquet(f, [][3]any{{"bkt", "data/b", int64(20)}, {"bkt", "data/a", int64(10)}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "l.parquet")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		objs, _, err := ReadFile(p, Parquet, "bkt", "data/", 1000)
		if err != nil {
			return
		}
		for i, o := range objs {
			if o.Size < 0 || o.Key == "" || (i > 0 && objs[i-1].Key >= o.Key) {
				t.Fatalf("objects %v", objs)
			}
		}
	})
}
