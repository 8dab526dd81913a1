package formats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/text"
)

func TestBuildTextStreamsCutsShardsAndMergesSchemas(t *testing.T) {
	dir := t.TempDir()
	var a, b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&a, "{\"id\": %d, \"x\": %d}\n", i, i)
	}
	for i := range 100 {
		fmt.Fprintf(&b, "{\"id\": %d, \"x\": %d.5, \"extra\": \"e\"}\n", 300+i, i)
	}
	for name, content := range map[string]string{"a.jsonl": a.String(), "sub/b.jsonl": b.String(), "notes.txt": "ignored"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var progress []string
	f, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 1000, Hash: "sha256", Progress: func(done, total int, o string) {
		progress = append(progress, fmt.Sprintf("%d/%d %s", done, total, o))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.Schema) != "[{id int64} {x float64} {extra utf8}]" {
		t.Errorf("schema = %v", f.Schema)
	}
	if strings.Join(progress, ",") != "1/2 a.jsonl,2/2 sub/b.jsonl" {
		t.Errorf("progress = %v", progress)
	}
	var samples int64
	for _, e := range f.Shards {
		samples += e.Samples
		data, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.Object)))
		sum, _ := checksum.Of("sha256", data[e.Offset:e.Offset+e.Length])
		if e.Hash != sum.String() {
			t.Fatalf("%s: hash %s, the range hashes to %s", e.Name, e.Hash, sum)
		}
		recs, err := text.Decode(data[e.Offset:e.Offset+e.Length], text.JSONL, f.Schema, nil)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		var n int64
		for _, r := range recs {
			n += r.NumRows()
		}
		if n != e.Samples {
			t.Fatalf("%s decodes to %d rows, index says %d", e.Name, n, e.Samples)
		}
	}
	if samples != 400 || len(f.Shards) < 8 {
		t.Fatalf("%d shards of %d samples", len(f.Shards), samples)
	}
	// Written and read back through the store, as plan reads it.
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	x, err := index.ReadStore(ctx, st)
	if err != nil || x.Samples() != 400 || len(x.Shards) != len(f.Shards) {
		t.Fatalf("ReadStore = %d samples, %v", x.Samples(), err)
	}
}

func TestBuildRefusesWhatItCannotIndex(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a.csv"), []byte("a,b\n1,2\n"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "b.csv"), []byte("a,c\n1,2\n"), 0o600)
	ctx := context.Background()
	st, _ := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	tests := []struct {
		format datav1alpha1.ShardFormat
		opts   format.IndexOptions
		want   string
	}{
		{"xml", format.IndexOptions{}, `format "xml" is not supported`},
		{"parquet", format.IndexOptions{}, "holds no parquet objects"},
		{"csv", format.IndexOptions{Hash: "crc"}, "not supported"},
		{"csv", format.IndexOptions{}, `b.csv: columns ["a" "c"] differ`},
		// A table format is indexed from its table, through the registry too.
		{"iceberg", format.IndexOptions{}, "iceberg streams are tables: name the table and its catalog (--table, --catalog-type"},
		{"iceberg", format.IndexOptions{Table: &format.TableOptions{}}, "an iceberg stream needs its table, namespace.table, and its catalog's type"},
		{"csv", format.IndexOptions{Table: &format.TableOptions{}}, "a table (--table) is for a table format, and csv is not one"},
	}
	for _, tt := range tests {
		if _, err := Default().Index(ctx, st, tt.format, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Build(%s) = %v, want %q", tt.format, err, tt.want)
		}
	}
}

// Objects indexed at once give the index of objects indexed one after
// another, into one index: the same shards in key order, and the same
// schema widened object by object (new columns in the order they come).
func TestIndexingAtOnceGivesTheIndexOfOneAfterAnother(t *testing.T) {
	dir := t.TempDir()
	var keys []string
	for k := range 40 {
		var b strings.Builder
		if k >= 2 { // two empty objects first: no shard, no schema
			for i := range 20 + k {
				switch k % 4 {
				case 0:
					fmt.Fprintf(&b, "{\"id\": %d, \"x\": %d}\n", i, i)
				case 1:
					fmt.Fprintf(&b, "{\"id\": %d, \"x\": %d.5, \"c%d\": \"v\"}\n", i, i, k%7)
				case 2:
					fmt.Fprintf(&b, "{\"id\": %d, \"c%d\": %d}\n", i, k%5, i)
				default:
					fmt.Fprintf(&b, "{\"id\": %d, \"x\": null, \"y\": [%d]}\n", i, i)
				}
			}
		}
		key := fmt.Sprintf("part-%03d.jsonl", k)
		keys = append(keys, key)
		if err := os.WriteFile(filepath.Join(dir, key), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	opts := format.IndexOptions{ShardBytes: 300, Hash: "xxh64"}
	want := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatJSONL}
	ix := Default()[datav1alpha1.FormatJSONL].(format.Indexer)
	for _, key := range keys {
		o, err := st.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.IndexObject(ctx, st, o, want, opts); err != nil {
			t.Fatal(err)
		}
	}
	for _, workers := range []int{1, 3, 16} {
		opts.Concurrency = workers
		var done []int
		opts.Progress = func(n, total int, _ string) { done = append(done, n) }
		got, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, opts)
		if err != nil {
			t.Fatal(err)
		}
		if got.Listing == nil || got.Listing.Objects != len(keys) {
			t.Fatalf("%d at once: listing %+v", workers, got.Listing)
		}
		got.Listing = nil // what was listed; the rest is the objects' own
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d at once: schema %v and %d shards, one after another: %v and %d", workers, got.Schema, len(got.Shards), want.Schema, len(want.Shards))
		}
		if !slices.IsSorted(done) || len(done) != len(keys) || done[len(done)-1] != len(keys) {
			t.Fatalf("%d at once: progress %v", workers, done)
		}
	}
}

// jsonlObjects writes objects key → rows of {"id": i} under dir.
func jsonlObjects(t *testing.T, dir string, rows map[string]int) {
	t.Helper()
	for key, n := range rows {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "{\"id\": %d, \"x\": %d}\n", i, i*3)
		}
		if err := os.WriteFile(filepath.Join(dir, key), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// --append indexes only the objects the index does not list, their shards
// after its own, which stay as they were; a change to what was indexed is
// refused, saying to index again.
func TestAppendIndexesOnlyNewObjects(t *testing.T) {
	dir := t.TempDir()
	jsonlObjects(t, dir, map[string]int{"a.jsonl": 30, "c.jsonl": 40, "e.jsonl": 20})
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	opts := format.IndexOptions{ShardBytes: 200, Hash: "xxh64"}
	first, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, opts)
	if err != nil {
		t.Fatal(err)
	}
	jsonlObjects(t, dir, map[string]int{"b.jsonl": 10, "f.jsonl": 15})
	opts.Append = first
	var counts store.Counts
	got, err := Default().Index(ctx, store.Counted(st, &counts), datav1alpha1.FormatJSONL, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Shards[:len(first.Shards)], first.Shards) || !reflect.DeepEqual(got.Schema, first.Schema) {
		t.Fatal("the shards indexed before changed")
	}
	var added []string
	for _, e := range got.Shards[len(first.Shards):] {
		if len(added) == 0 || added[len(added)-1] != e.Object {
			added = append(added, e.Object)
		}
	}
	if fmt.Sprint(added) != "[b.jsonl f.jsonl]" || got.StreamIndex().Samples() != 115 || counts.Gets.Load() != 2 {
		t.Fatalf("appended %v, %d samples in all, %d objects read", added, got.StreamIndex().Samples(), counts.Gets.Load())
	}
	if again, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200, Hash: "xxh64", Append: got}); err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("nothing new: %v", err)
	}

	tests := []struct {
		name    string
		change  func()
		wantErr string
	}{
		{"an indexed object grew", func() { jsonlObjects(t, dir, map[string]int{"c.jsonl": 41}) }, "bytes, and was"},
		{"an indexed object is gone", func() { _ = os.Remove(filepath.Join(dir, "e.jsonl")) }, "e.jsonl is in the index and no longer in the stream"},
		{"a new object of another column", func() {
			_ = os.WriteFile(filepath.Join(dir, "g.jsonl"), []byte("{\"id\": 1, \"x\": \"text\"}\n"), 0o600)
		}, "index the stream again, without --append"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := t.TempDir()
			dir = fresh
			jsonlObjects(t, dir, map[string]int{"a.jsonl": 30, "c.jsonl": 40, "e.jsonl": 20})
			st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
			if err != nil {
				t.Fatal(err)
			}
			base, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200, Hash: "xxh64"})
			if err != nil {
				t.Fatal(err)
			}
			tt.change()
			_, err = Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200, Hash: "xxh64", Append: base})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("append = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// An index stopped short by an object it refuses keeps the index of the
// objects before it in a checkpoint; run again, it reads only the objects
// after them, and writes the index a run from the start writes.
func TestACheckpointResumesAnIndexStoppedShort(t *testing.T) {
	dir := t.TempDir()
	rows := map[string]int{}
	for k := range 40 {
		rows[fmt.Sprintf("part-%03d.jsonl", k)] = 10 + k
	}
	jsonlObjects(t, dir, rows)
	bad := filepath.Join(dir, "part-030.jsonl")
	good, _ := os.ReadFile(bad)
	if err := os.WriteFile(bad, []byte("{\"id\": 1,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	opts := format.IndexOptions{ShardBytes: 200, Hash: "xxh64", Concurrency: 4, Note: func(s string) { notes = append(notes, s) }}
	opts.Checkpoints = &index.Checkpoint{Store: st, Options: opts.Key(datav1alpha1.FormatJSONL), Note: opts.Note}
	if _, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, opts); err == nil || !strings.Contains(err.Error(), "part-030.jsonl") {
		t.Fatalf("index = %v, want the bad object refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(index.CheckpointMetaKey))); err != nil {
		t.Fatalf("no checkpoint kept: %v (notes %q)", err, notes)
	}
	// Run as it is, the command meets the same object: the note says to
	// fix it first, not that the same command goes on.
	if len(notes) == 0 || !strings.Contains(notes[len(notes)-1], "once the object refused (below) is fixed or removed") {
		t.Fatalf("notes %q, want the kept checkpoint said with what to fix first", notes)
	}
	if err := os.WriteFile(bad, good, 0o600); err != nil {
		t.Fatal(err)
	}
	var counts store.Counts
	cst := store.Counted(st, &counts)
	notes = nil
	opts.Checkpoints = &index.Checkpoint{Store: cst, Options: opts.Key(datav1alpha1.FormatJSONL), Note: opts.Note}
	got, err := Default().Index(ctx, cst, datav1alpha1.FormatJSONL, opts)
	if err != nil {
		t.Fatal(err)
	}
	var kept int
	if len(notes) == 0 || !strings.HasPrefix(notes[0], "resuming from a checkpoint of ") {
		t.Fatalf("notes %q, want the resume said", notes)
	}
	_, _ = fmt.Sscanf(notes[0], "resuming from a checkpoint of %d objects", &kept)
	// The checkpoint's two objects, and one Get for each object not kept.
	if kept < 1 || kept > 30 || counts.Gets.Load() != int64(2+40-kept) {
		t.Fatalf("resumed from %d objects and read %d objects", kept, counts.Gets.Load())
	}
	want, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200, Hash: "xxh64"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the resumed index is not the index of a run from the start")
	}
	// Another run's options do not resume it.
	notes = nil
	other := opts
	other.ShardBytes = 300
	other.Checkpoints = &index.Checkpoint{Store: st, Options: other.Key(datav1alpha1.FormatJSONL), Note: opts.Note}
	if _, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, other); err != nil || len(notes) == 0 || !strings.Contains(notes[0], "of other options") {
		t.Fatalf("other options: %v, notes %q", err, notes)
	}
}
