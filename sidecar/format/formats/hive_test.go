package formats

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// recording is a real store that notes every key it lists or reads.
type recording struct {
	store.Store
	mu   sync.Mutex
	seen []string
	// ranges are the gets, as "key offset length".
	ranges []string
}

func (r *recording) note(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, key)
}

func (r *recording) List(ctx context.Context) ([]store.Object, error) {
	r.note("*")
	return r.Store.List(ctx)
}

func (r *recording) ListDir(ctx context.Context, dir string) (store.Listing, error) {
	r.note("list " + dir)
	return r.Store.ListDir(ctx, dir)
}

func (r *recording) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r.note("get " + key)
	r.mu.Lock()
	r.ranges = append(r.ranges, fmt.Sprint(key, " ", off, " ", n))
	r.mu.Unlock()
	return r.Store.Get(ctx, key, off, n)
}

// parquetFile is rows of id from start, and a column named extra if set.
func parquetFile(t *testing.T, start, rows int, extra string) []byte {
	t.Helper()
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}
	if extra != "" {
		fields = append(fields, arrow.Field{Name: extra, Type: arrow.PrimitiveTypes.Int64})
	}
	schema := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for i := start; i < start+rows; i++ {
		for f := range fields {
			rb.Field(f).(*array.Int64Builder).Append(int64(i))
		}
	}
	return writeParquet(t, rb, 10)
}

// writeParquet writes the builder's records as a Parquet file of rowGroup
// rows a row group (arrow-go's writer).
func writeParquet(t *testing.T, rb *array.RecordBuilder, rowGroup int64) []byte {
	t.Helper()
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(rowGroup)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	return buf.Bytes()
}

// hiveTree writes files (key → content) under a new directory and opens
// it as a recording store.
func hiveTree(t *testing.T, files map[string][]byte) *recording {
	t.Helper()
	dir := t.TempDir()
	for key, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return &recording{Store: st}
}

// threeLevels is date=/region=/bucket= with 20 rows per file, ids in
// key order, a null region and an escaped one.
func threeLevels(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	id := 0
	for _, date := range []string{"2024-01-01", "2024-01-02", "2024-01-03"} {
		for _, region := range []string{"eu", "us", indexfile.NullPartition, "a%2Fb"} {
			for _, bucket := range []string{"0", "1", "2"} {
				files[fmt.Sprintf("date=%s/region=%s/bucket=%s/part-0.parquet", date, region, bucket)] = parquetFile(t, id, 20, "")
				id += 20
			}
		}
	}
	files["_SUCCESS"] = []byte{}
	files["date=2024-01-01/.hidden/x.parquet"] = []byte("not parquet")
	return files
}

func TestHivePartitionsAreSelectedBeforeTheyAreListed(t *testing.T) {
	ctx := context.Background()
	st := hiveTree(t, threeLevels(t))
	sel := "region == 'eu' && date >= '2024-01-02' && bucket < 2"
	f, err := Default().Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &format.PartitionOptions{Select: sel}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f.Partitions.Columns); got != "[{date utf8} {region utf8} {bucket int32}]" || f.Partitions.Given || f.Partitions.Select != sel {
		t.Fatalf("partitions = %+v", f.Partitions)
	}
	var objects []string
	for _, e := range f.Shards {
		if !slices.Contains(objects, e.Object) {
			objects = append(objects, e.Object)
		}
	}
	want := []string{
		"date=2024-01-02/region=eu/bucket=0/part-0.parquet", "date=2024-01-02/region=eu/bucket=1/part-0.parquet",
		"date=2024-01-03/region=eu/bucket=0/part-0.parquet", "date=2024-01-03/region=eu/bucket=1/part-0.parquet",
	}
	if fmt.Sprint(objects) != fmt.Sprint(want) {
		t.Fatalf("indexed %v, want %v", objects, want)
	}
	// Nothing under an unselected partition was listed or read: not the
	// first date, not another region, not the third bucket.
	for _, k := range st.seen {
		if k == "*" || strings.Contains(k, "2024-01-01") || strings.Contains(k, "region=us") || strings.Contains(k, "region=a%2Fb") ||
			strings.Contains(k, indexfile.NullPartition+"/") || strings.Contains(k, "bucket=2") {
			t.Errorf("%s: an unselected partition was touched", k)
		}
	}
	if !slices.Contains(st.seen, "list date=2024-01-02/region=eu/") {
		t.Fatalf("seen %v", st.seen)
	}

	// Read back: each row has its partition's values, typed.
	reader, err := Default().Open(&index.Layout{Format: f.Format, Index: f.StreamIndex(), File: f})
	if err != nil {
		t.Fatal(err)
	}
	read := func(ctx context.Context, p format.Part) ([]byte, error) {
		return format.ReadRange(ctx, st, p.Key, p.Offset, p.Size)
	}
	schema, err := reader.Schema(ctx, read)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, fl := range schema.Fields() {
		fields = append(fields, fl.Name+" "+fl.Type.String())
	}
	if fmt.Sprint(fields) != "[id int64 date utf8 region utf8 bucket int32]" {
		t.Fatalf("schema %v", fields)
	}
	for i, e := range f.Shards {
		var parts [][]byte
		for _, p := range reader.Parts(i) {
			b, err := read(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, b)
		}
		for _, cols := range [][]string{nil, {"bucket", "id"}, {"region"}} {
			rr, err := reader.Records(ctx, i, parts, cols)
			if err != nil {
				t.Fatalf("%s %v: %v", e.Name, cols, err)
			}
			var rows int64
			for rr.Next() {
				rec := rr.RecordBatch()
				rows += rec.NumRows()
				names := []string{}
				for _, fl := range rec.Schema().Fields() {
					names = append(names, fl.Name)
				}
				if cols == nil && fmt.Sprint(names) != "[id date region bucket]" || cols != nil && fmt.Sprint(names) != fmt.Sprint(cols) {
					t.Fatalf("%s %v: columns %v", e.Name, cols, names)
				}
				col := func(name string) arrow.Array { return rec.Column(slices.Index(names, name)) }
				if cols == nil {
					if d := col("date").(*array.String).Value(0); !strings.Contains(e.Object, "date="+d+"/") {
						t.Fatalf("%s: date %s", e.Name, d)
					}
				}
				if slices.Contains(names, "bucket") {
					if b := col("bucket").(*array.Int32).Value(int(rec.NumRows()) - 1); !strings.Contains(e.Object, fmt.Sprintf("bucket=%d/", b)) {
						t.Fatalf("%s: bucket %d", e.Name, b)
					}
				}
			}
			rr.Release()
			if rows != e.Samples {
				t.Fatalf("%s %v: %d rows, the index says %d", e.Name, cols, rows, e.Samples)
			}
		}
	}
}

func TestHiveTypesNullsAndEscapes(t *testing.T) {
	ctx := context.Background()
	st := hiveTree(t, threeLevels(t))
	// Given types; every partition; the null and the escaped value.
	given := []indexfile.Field{{Name: "date", Type: "utf8"}, {Name: "region", Type: "utf8"}, {Name: "bucket", Type: "int64"}}
	f, err := Default().Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &format.PartitionOptions{Columns: given, Select: "region == null || region == 'a/b'"}})
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string]bool{}
	for _, e := range f.Shards {
		if e.Partition[1] == nil {
			regions["null"] = true
		} else {
			regions[*e.Partition[1]] = true
		}
	}
	if fmt.Sprint(regions) != "map[a/b:true null:true]" || !f.Partitions.Given || f.Partitions.Columns[2].Type != "int64" {
		t.Fatalf("regions %v, partitions %+v", regions, f.Partitions)
	}
	// The index round-trips through its strict reader.
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	if _, err := index.ReadStore(ctx, st); err != nil {
		t.Fatal(err)
	}
}

// A null partition is null under every comparison, as in pyarrow's hive
// partitioning: a > 0 and a != 2 leave it out, a == null selects it.
func TestANullPartitionIsSelectedOnlyByANullTest(t *testing.T) {
	ctx := context.Background()
	ok := parquetFile(t, 0, 5, "")
	files := map[string][]byte{"a=" + indexfile.NullPartition + "/a.parquet": ok, "a=1/a.parquet": ok, "a=2/a.parquet": ok}
	for sel, want := range map[string]string{
		"a > 0":                 "[a=1/a.parquet a=2/a.parquet]",
		"a != 2":                "[a=1/a.parquet]",
		"!(a == 2)":             "[a=1/a.parquet]",
		"a == null":             "[a=" + indexfile.NullPartition + "/a.parquet]",
		"a == null || a == 2":   "[a=2/a.parquet a=" + indexfile.NullPartition + "/a.parquet]",
		"!(a != null && a < 2)": "[a=2/a.parquet a=" + indexfile.NullPartition + "/a.parquet]", // NOT (false AND null)
		"!(a < 2)":              "[a=2/a.parquet]",
	} {
		t.Run(sel, func(t *testing.T) {
			f, err := Default().Index(ctx, hiveTree(t, files), datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &format.PartitionOptions{Select: sel}})
			if err != nil {
				t.Fatal(err)
			}
			var objects []string
			for _, sh := range f.Shards {
				objects = append(objects, sh.Object)
			}
			slices.Sort(objects)
			if got := fmt.Sprint(objects); got != want {
				t.Fatalf("selected %s, want %s", got, want)
			}
		})
	}
}

func TestHiveRefusals(t *testing.T) {
	ctx := context.Background()
	ok := parquetFile(t, 0, 5, "")
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		opts  format.PartitionOptions
		want  string
	}{
		{"no partitions", map[string][]byte{"a.parquet": ok}, format.PartitionOptions{}, "has no key=value directories"},
		{"a plain directory", map[string][]byte{"x/a.parquet": ok}, format.PartitionOptions{}, "x/ is not a key=value directory"},
		{"files beside directories", map[string][]byte{"a=1/a.parquet": ok, "a=1/b=2/a.parquet": ok}, format.PartitionOptions{}, "holds both files and partition directories"},
		{"files at two depths", map[string][]byte{"a=1/a.parquet": ok, "a=2/b=2/a.parquet": ok}, format.PartitionOptions{}, "files at partition depth"},
		{"two names at one depth", map[string][]byte{"a=1/a.parquet": ok, "b=2/a.parquet": ok}, format.PartitionOptions{}, `partition column 1 is "a", and "b" here`},
		{"an unknown column", map[string][]byte{"a=1/a.parquet": ok}, format.PartitionOptions{Select: "a == 1 || zone == 'x'"}, "no column zone: the columns are a"},
		{"a syntax error", map[string][]byte{"a=1/a.parquet": ok}, format.PartitionOptions{Select: "a =="}, "not a CEL expression"},
		{"a wrong type", map[string][]byte{"a=1/a.parquet": ok}, format.PartitionOptions{Select: "a == 'x'"}, "no matching overload"},
		{"nothing selected", map[string][]byte{"a=1/a.parquet": ok}, format.PartitionOptions{Select: "a == 2"}, "selects no partition's files"},
		{"a value not of its given type", map[string][]byte{"a=x/a.parquet": ok}, format.PartitionOptions{Columns: []indexfile.Field{{Name: "a", Type: "int64"}}}, `partition a: "x" is not a int64 (give its type`},
		{"more levels than given", map[string][]byte{"a=1/b=2/a.parquet": ok}, format.PartitionOptions{Columns: []indexfile.Field{{Name: "a", Type: "int64"}}}, `a partition column "b" beyond the 1 given`},
		{"fewer levels than given", map[string][]byte{"a=1/a.parquet": ok}, format.PartitionOptions{Columns: []indexfile.Field{{Name: "a", Type: "int64"}, {Name: "b", Type: "utf8"}}}, "files are under 1 partition directories, and 2 partition columns are given"},
		{"a column of the files", map[string][]byte{"a=1/a.parquet": parquetFile(t, 0, 5, "a")}, format.PartitionOptions{}, `"a" is both a column of the files and a partition column`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			_, err := Default().Index(ctx, hiveTree(t, tc.files), datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &opts})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
