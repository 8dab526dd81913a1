package formats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// A source compared with its index says what was added, removed, resized
// or rewritten since it was indexed, as an index made now would list it:
// files of another format, shardfeed's own and objects a --shards pattern
// does not name are no change.
func TestASourceChangedSinceItsIndexSaysHow(t *testing.T) {
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name   string
		shards string
		change func(t *testing.T, dir string)
		want   string
	}{
		{name: "unchanged", change: func(*testing.T, string) {}},
		{name: "another format's file and our own", change: func(t *testing.T, dir string) {
			write(t, dir, "notes.txt", "not a stream object")
			write(t, dir, "index.json", "{}")
		}},
		{name: "a folder grown", change: func(t *testing.T, dir string) {
			jsonlObjects(t, dir, map[string]int{"d.jsonl": 5, "f.jsonl": 5})
		}, want: "2 objects added (d.jsonl, f.jsonl)"},
		{name: "a file removed", change: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "c.jsonl")); err != nil {
				t.Fatal(err)
			}
		}, want: "1 object removed (c.jsonl)"},
		{name: "a file grown", change: func(t *testing.T, dir string) {
			jsonlObjects(t, dir, map[string]int{"a.jsonl": 31})
		}, want: "1 object of another size (a.jsonl)"},
		{name: "a file rewritten in place", change: func(t *testing.T, dir string) {
			if err := os.Chtimes(filepath.Join(dir, "e.jsonl"), later, later); err != nil {
				t.Fatal(err)
			}
		}, want: "objects rewritten in place (the same names and sizes, another ETag or modification time)"},
		{name: "a file the pattern does not name", shards: "{a,c,e}.jsonl", change: func(t *testing.T, dir string) {
			jsonlObjects(t, dir, map[string]int{"b.jsonl": 5})
		}},
		{name: "a file the pattern names, gone", shards: "{a,c,e}.jsonl", change: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "a.jsonl")); err != nil {
				t.Fatal(err)
			}
		}, want: "1 object removed (a.jsonl)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			jsonlObjects(t, dir, map[string]int{"a.jsonl": 30, "c.jsonl": 40, "e.jsonl": 20})
			ctx := context.Background()
			st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
			if err != nil {
				t.Fatal(err)
			}
			f, err := Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200, Shards: c.shards})
			if err != nil {
				t.Fatal(err)
			}
			if f.Listing == nil || f.Listing.Objects != 3 || f.Listing.Shards != c.shards {
				t.Fatalf("listing = %+v", f.Listing)
			}
			if err := index.Write(ctx, st, f); err != nil {
				t.Fatal(err)
			}
			c.change(t, dir)
			l, err := index.ReadStoreLayout(ctx, st) // as plan reads it
			if err != nil {
				t.Fatal(err)
			}
			got, err := Default().Changes(ctx, st, l.File, format.TableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.None() != (c.want == "") || got.String() != c.want {
				t.Fatalf("change = %q (none: %t), want %q", got, got.None(), c.want)
			}
		})
	}
}

// An index written before indexes recorded their listing still tells a
// grown folder from its own objects; a rewrite in place it cannot tell.
func TestAnIndexWithNoListingComparesKeysAndSizes(t *testing.T) {
	ctx := context.Background()
	dir, st, f := indexedFolder(t, map[string]int{"a.jsonl": 30, "c.jsonl": 40})
	f.Listing = nil
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "a.jsonl"), later, later); err != nil {
		t.Fatal(err)
	}
	if got, err := Default().Changes(ctx, st, f, format.TableOptions{}); err != nil || !got.None() {
		t.Fatalf("a touched file with no listing to compare: %v, %v", got, err)
	}
	jsonlObjects(t, dir, map[string]int{"b.jsonl": 3})
	if got, err := Default().Changes(ctx, st, f, format.TableOptions{}); err != nil || got.String() != "1 object added (b.jsonl)" {
		t.Fatalf("a grown folder: %v, %v", got, err)
	}
}

// A hive tree is compared partition by partition as it was selected: a new
// file in a selected partition is a change, one in a partition the
// selection leaves out is not (and that partition is never listed).
func TestAHiveTreeIsComparedWithinItsSelection(t *testing.T) {
	ctx := context.Background()
	st := hiveTree(t, threeLevels(t))
	sel := "region == 'eu' && bucket < 2"
	f, err := Default().Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &format.PartitionOptions{Select: sel}})
	if err != nil {
		t.Fatal(err)
	}
	base, ok := store.LocalPath(st.Store, "_SUCCESS")
	if !ok {
		t.Fatal("not a local store")
	}
	dir := filepath.Dir(base)
	writeBytes(t, dir, "date=2024-01-04/region=us/bucket=0/part-0.parquet", parquetFile(t, 0, 5, ""))
	st.seen = nil
	if got, err := Default().Changes(ctx, st, f, format.TableOptions{}); err != nil || !got.None() {
		t.Fatalf("a file outside the selection: %v, %v", got, err)
	}
	for _, k := range st.seen {
		if strings.Contains(k, "region=us") {
			t.Errorf("%s: an unselected partition was listed", k)
		}
	}
	writeBytes(t, dir, "date=2024-01-04/region=eu/bucket=1/part-0.parquet", parquetFile(t, 0, 5, ""))
	got, err := Default().Changes(ctx, st, f, format.TableOptions{})
	if err != nil || got.String() != "1 object added (date=2024-01-04/region=eu/bucket=1/part-0.parquet)" {
		t.Fatalf("a file in a selected partition: %v, %v", got, err)
	}
}

// A long list of changed objects is named by its first few.
func TestAChangeNamesItsFirstObjects(t *testing.T) {
	c := &format.Change{Added: []string{"a", "b", "c", "d", "e"}, Table: "the dataset's latest version is 3, and the index is of version 2"}
	want := "5 objects added (a, b, c, … 2 more); the dataset's latest version is 3, and the index is of version 2"
	if c.String() != want || c.None() {
		t.Fatalf("%q", c)
	}
	if !(*format.Change)(nil).None() || !(&format.Change{}).None() {
		t.Fatal("no change is none")
	}
}

// indexedFolder is a new folder of JSON Lines objects (key → rows) and
// its index.
func indexedFolder(t *testing.T, rows map[string]int) (string, store.Store, *indexfile.File) {
	t.Helper()
	dir := t.TempDir()
	jsonlObjects(t, dir, rows)
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Default().Index(context.Background(), st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	return dir, st, f
}

func write(t *testing.T, dir, key, content string) {
	t.Helper()
	writeBytes(t, dir, key, []byte(content))
}

func writeBytes(t *testing.T, dir, key string, b []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(fmt.Errorf("writing %s: %w", key, err))
	}
}

// An object that holds no sample (an empty file) is listed, not new: a
// folder with one is unchanged run after run.
func TestAnEmptyObjectIsNoChange(t *testing.T) {
	ctx := context.Background()
	dir, st, f := indexedFolder(t, map[string]int{"a.jsonl": 30, "b.jsonl": 0})
	if fmt.Sprint(f.Listing.Empty) != "[b.jsonl]" {
		t.Fatalf("empty = %v", f.Listing.Empty)
	}
	if got, err := Default().Changes(ctx, st, f, format.TableOptions{}); err != nil || !got.None() {
		t.Fatalf("unchanged: %v, %v", got, err)
	}
	jsonlObjects(t, dir, map[string]int{"c.jsonl": 0})
	if got, err := Default().Changes(ctx, st, f, format.TableOptions{}); err != nil || got.String() != "1 object added (c.jsonl)" {
		t.Fatalf("a new empty file: %v, %v", got, err)
	}
}
