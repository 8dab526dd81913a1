// Package formattest reads a stream as a pod reads it, for the formats'
// oracle tests: each shard from its parts alone (format.StoreRead), each
// row as canonical JSON, to compare with what the format's own project
// reads (test/oracle/*.py).
package formattest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// OpenDir opens a local directory (absolute, or relative to the test's
// own) as a stream's store.
func OpenDir(t testing.TB, dir string) store.Store {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := stores.Open(context.Background(), store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Lines parses an oracle's JSON lines, each as canonical JSON.
func Lines(t testing.TB, out []byte) []string {
	t.Helper()
	var rs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("oracle line %.200q: %v", sc.Text(), err)
		}
		rs = append(rs, testenv.Canonical(t, m))
	}
	return rs
}

// Index indexes a stream of kind, checking that the index reads back
// through its JSON and its strict reader.
func Index(t testing.TB, st store.Store, kind datav1alpha1.ShardFormat, opts format.IndexOptions) *indexfile.File {
	t.Helper()
	f, err := formats.Default().Index(context.Background(), st, kind, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.ReadLayout(bytes.NewReader(raw)); err != nil {
		t.Fatalf("the index does not read back: %v", err)
	}
	return f
}

// Open opens the reader of the index f, as a pod does.
func Open(t testing.TB, f *indexfile.File) format.Reader {
	t.Helper()
	r, err := formats.Default().Open(index.LayoutOf(f))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Rows reads every shard of an index from its parts alone, as a pod
// does, and returns its rows in order as canonical JSON, each passed
// through edit first where it is set (to put a row in the oracle's
// terms). A shard of another row count than its index says fails.
func Rows(t testing.TB, st store.Store, f *indexfile.File, edit func(row map[string]any)) []string {
	t.Helper()
	ctx := context.Background()
	r := Open(t, f)
	if _, err := r.Schema(ctx, format.StoreRead(st)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, e := range f.Shards {
		var parts [][]byte
		for _, p := range r.Parts(i) {
			b, err := format.StoreRead(st)(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := checksum.Parse(p.Hash); !want.IsZero() {
				if got, _ := checksum.Of(want.Algo, b); got != want {
					t.Fatalf("shard %s: part %s@%d hashes to %s, the index says %s", e.Name, p.Key, p.Offset, got, want)
				}
			}
			parts = append(parts, b)
		}
		rr, err := r.Records(ctx, i, parts, nil)
		if err != nil {
			t.Fatalf("shard %s: %v", e.Name, err)
		}
		n := 0
		for rr.Next() {
			rec := rr.RecordBatch()
			for j := range int(rec.NumRows()) {
				row := testenv.Row(rec, j, nil)
				if edit != nil {
					edit(row)
				}
				out = append(out, testenv.Canonical(t, row))
				n++
			}
		}
		rr.Release()
		if int64(n) != e.Samples {
			t.Fatalf("shard %s served %d rows, its index says %d", e.Name, n, e.Samples)
		}
	}
	return out
}

// Compare fails unless got (what shardfeed serves) equals want (what peer
// reads), row for row, showing the first differences.
func Compare(t testing.TB, what, peer string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows served, %s reads %d", what, len(got), peer, len(want))
	}
	bad := 0
	for i := range want {
		if got[i] != want[i] {
			if bad++; bad <= 2 {
				t.Errorf("%s: row %d:\n got %.300s\nwant %.300s", what, i, got[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d rows differ from %s's", what, bad, len(want), peer)
	}
}
