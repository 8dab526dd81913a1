//go:build integration

package icebergindex_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/iceberg/icebergindex"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

// lake is testenv's lake of test tables with MinIO's keys for the index
// and the reads.
type lake struct {
	*testenv.IcebergLake
	credsDir string
}

// catalogKinds are the catalogs every table test runs through.
var catalogKinds = []datav1alpha1.IcebergCatalogType{datav1alpha1.IcebergCatalogSQL, datav1alpha1.IcebergCatalogREST}

func newLake(t *testing.T, kind datav1alpha1.IcebergCatalogType) *lake {
	t.Helper()
	return &lake{IcebergLake: testenv.NewIcebergLake(t, minioServer, string(kind)), credsDir: minioServer.CredentialsDir(t)}
}

func (l *lake) catalog() datav1alpha1.IcebergCatalog {
	return datav1alpha1.IcebergCatalog{Type: datav1alpha1.IcebergCatalogType(l.CatalogType), URI: l.CatalogURI}
}

// stream is the spec of a stream reading table name, its index in the
// lake's .shardfeed/ prefix.
func (l *lake) stream(name string) datav1alpha1.Stream {
	return datav1alpha1.Stream{Name: name, Format: datav1alpha1.FormatIceberg,
		Source:  datav1alpha1.Source{URI: "s3://" + l.Bucket + "/.shardfeed/" + name + "/", Endpoint: minioServer.Endpoint, Insecure: true},
		Iceberg: &datav1alpha1.IcebergTable{Table: "ml." + name, Catalog: l.catalog()}}
}

func (l *lake) source(s datav1alpha1.Stream) store.Source {
	src := streams.Source(s)
	src.CredentialsDir = l.credsDir
	return src
}

// index resolves the stream's table as shardfeed index does and writes
// the index.
func (l *lake) index(t *testing.T, s datav1alpha1.Stream) *indexfile.File {
	t.Helper()
	ctx := context.Background()
	tbl := icebergindex.Table{Catalog: icebergindex.Catalog{IcebergCatalog: s.Iceberg.Catalog}, Name: s.Iceberg.Table, Ref: s.Iceberg.Ref}
	if s.Iceberg.SnapshotID != nil {
		tbl.SnapshotID = *s.Iceberg.SnapshotID
	}
	f, err := icebergindex.Index(ctx, tbl, l.source(s), icebergindex.Options{})
	if err != nil {
		t.Fatalf("indexing %s: %v", s.Iceberg.Table, err)
	}
	st, err := stores.Open(ctx, l.source(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// served opens the stream as the sidecar does and decodes every shard
// through the iceberg format, returning each row as canonical JSON.
func (l *lake) served(t *testing.T, s datav1alpha1.Stream) []string {
	t.Helper()
	ctx := context.Background()
	opened, err := streams.Open(ctx, 0, s, nil, l.source(s), 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := formats.Default().Open(opened.Layout)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i, sh := range opened.Index.Shards {
		var parts [][]byte
		for _, p := range r.Parts(i) {
			parts = append(parts, readPart(t, opened.Store, p))
		}
		rr, err := r.Records(ctx, i, parts, nil)
		if err != nil {
			t.Fatalf("shard %s: %v", sh.Name, err)
		}
		var n int64
		for rr.Next() {
			rec := rr.RecordBatch()
			n += rec.NumRows()
			for row := range int(rec.NumRows()) {
				m := map[string]any{}
				for c, f := range rec.Schema().Fields() {
					m[f.Name] = rec.Column(c).GetOneForMarshal(row)
				}
				b, _ := json.Marshal(m)
				rows = append(rows, string(b))
			}
		}
		rr.Release()
		if n != sh.Samples {
			t.Errorf("shard %s served %d rows, the index counts %d", sh.Name, n, sh.Samples)
		}
	}
	return sortedByID(t, rows)
}

// oracle is what pyiceberg (pyarrow for equality deletes) reads of the
// table at a snapshot, deletes applied.
func (l *lake) oracle(t *testing.T, name string, snapshot int64) []string {
	t.Helper()
	return sortedByID(t, l.Read(t, name, snapshot))
}

func sortedByID(t *testing.T, rows []string) []string {
	id := func(r string) int64 {
		var m struct{ ID int64 }
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	slices.SortFunc(rows, func(a, b string) int { return int(id(a) - id(b)) })
	return rows
}

func readPart(t *testing.T, st store.Store, p format.Part) []byte {
	t.Helper()
	off, n := int64(0), int64(-1)
	if p.Range {
		off, n = p.Offset, p.Size
	}
	r, err := st.Get(context.Background(), p.Key, off, n)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The test tables, written through each kind of catalog (one lake per
// kind: the subtests use different tables).
func TestIntegrationIcebergTables(t *testing.T) {
	for _, kind := range catalogKinds {
		t.Run(string(kind), func(t *testing.T) {
			l := newLake(t, kind)
			t.Run("served as pyiceberg reads them", func(t *testing.T) { testTablesServeWhatPyicebergReads(t, l) })
			t.Run("a table that moves on", func(t *testing.T) { testATableThatMovesOn(t, l) })
			t.Run("refusals", func(t *testing.T) { testRefusals(t, l) })
		})
	}
}

// Each table is served, deletes applied and columns by field id, as
// pyiceberg reads the same snapshot.
func testTablesServeWhatPyicebergReads(t *testing.T, l *lake) {
	tests := []struct {
		table       string
		wantRows    int
		wantDeletes string // the content of the delete file the index lists
		wantColumns []string
	}{
		{"plain", 500, "", []string{"id", "text"}},
		{"evolved", 300, "", []string{"id", "body", "score"}},
		{"posdel", 245, "position", []string{"id", "text"}},
		{"eqdel", 287, "equality", []string{"id", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			s := l.stream(tt.table)
			f := l.index(t, s)
			if f.Table.Snapshot != l.Snapshots[tt.table] {
				t.Errorf("indexed snapshot %d, the table's current is %d", f.Table.Snapshot, l.Snapshots[tt.table])
			}
			if len(f.Shards) < 2 {
				t.Errorf("%d shards: the table's files have several row groups each", len(f.Shards))
			}
			switch {
			case tt.wantDeletes == "" && len(f.Table.DeleteFiles) != 0:
				t.Errorf("delete files %+v on a table without deletes", f.Table.DeleteFiles)
			case tt.wantDeletes != "" && (len(f.Table.DeleteFiles) != 1 || f.Table.DeleteFiles[0].Content != tt.wantDeletes):
				t.Errorf("delete files %+v, want one of %s deletes", f.Table.DeleteFiles, tt.wantDeletes)
			}
			got, want := l.served(t, s), l.oracle(t, tt.table, f.Table.Snapshot)
			if len(got) != tt.wantRows || !slices.Equal(got, want) {
				t.Fatalf("served %d rows, pyiceberg reads %d (want %d)\nfirst served: %v\nfirst read:   %v", len(got), len(want), tt.wantRows, head(got), head(want))
			}
			var first map[string]any
			_ = json.Unmarshal([]byte(got[0]), &first)
			for _, c := range tt.wantColumns {
				if _, ok := first[c]; !ok {
					t.Errorf("served rows have no column %q: %v", c, got[0])
				}
			}
			if len(first) != len(tt.wantColumns) {
				t.Errorf("served columns %v, want %v (a dropped column is not served)", first, tt.wantColumns)
			}
		})
	}
}

func head(rows []string) []string { return rows[:min(3, len(rows))] }

// A table that moves on after its index changes no plan until it is
// re-indexed, and then the plan's fingerprint names both snapshots; a
// pinned snapshot keeps its rows, and an index at another snapshot than
// the pinned one is refused naming both.
func testATableThatMovesOn(t *testing.T, l *lake) {
	s := l.stream("moving")
	before := l.index(t, s)
	var moved map[string]int64
	if err := json.Unmarshal(l.Tables(t, "append", "moving"), &moved); err != nil {
		t.Fatal(err)
	}
	if got := len(l.served(t, s)); got != 100 {
		t.Fatalf("served %d rows after the table moved on, want the indexed snapshot's 100", got)
	}
	after := l.index(t, s)
	if after.Table.Snapshot != moved["moving"] || after.Table.Snapshot == before.Table.Snapshot {
		t.Fatalf("re-indexed at %d, the table moved to %d from %d", after.Table.Snapshot, moved["moving"], before.Table.Snapshot)
	}
	fp := func(f *indexfile.File) planner.Fingerprint {
		spec := &datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{s}, NumSplits: 2, GlobalBatchSize: 4}
		p, err := planspec.Params(spec, []planner.StreamIndex{f.StreamIndex()})
		if err != nil {
			t.Fatal(err)
		}
		pl, err := planner.New(p)
		if err != nil {
			t.Fatal(err)
		}
		return pl.Fingerprint()
	}
	want := fmt.Sprintf("spec.streams[0].snapshot: %d, now %d", before.Table.Snapshot, after.Table.Snapshot)
	if diff := fp(before).Diff(fp(after)); !slices.Contains(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}

	pinned := l.stream("moving")
	pinned.Iceberg.SnapshotID = &before.Table.Snapshot
	_, err := streams.Open(context.Background(), 0, pinned, nil, l.source(pinned), 0)
	wantErr := fmt.Sprintf("pins snapshot %d, its index is at snapshot %d", before.Table.Snapshot, after.Table.Snapshot)
	if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "shardfeed index") {
		t.Fatalf("streams.Open = %v, want a refusal with %q naming the command", err, wantErr)
	}
	l.index(t, pinned)
	if got, want := l.served(t, pinned), l.oracle(t, "moving", before.Table.Snapshot); !slices.Equal(got, want) || len(got) != 100 {
		t.Fatalf("the pinned snapshot served %d rows, pyiceberg reads %d", len(got), len(want))
	}
}

// A table stream without its index is refused naming the whole command;
// an index inside the table's location is refused before it is written.
func testRefusals(t *testing.T, l *lake) {
	s := l.stream("plain")
	s.Source.URI = "s3://" + l.Bucket + "/.shardfeed/never-indexed/"
	_, err := streams.Open(context.Background(), 0, s, nil, l.source(s), 0)
	command := "shardfeed index " + s.Source.URI + " --format iceberg --catalog-type " + l.CatalogType + " --catalog-uri " + l.CatalogURI + " --table ml.plain"
	for _, want := range []string{"has no index", command} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("streams.Open = %v, want it to say %q", err, want)
		}
	}
	inside := l.stream("plain")
	inside.Source.URI = "s3://" + l.Bucket + "/wh/ml/plain/shardfeed/"
	_, err = icebergindex.Index(context.Background(), icebergindex.Table{Catalog: icebergindex.Catalog{IcebergCatalog: inside.Iceberg.Catalog}, Name: "ml.plain"}, l.source(inside), icebergindex.Options{})
	if err == nil || !strings.Contains(err.Error(), "orphan-file cleanup") {
		t.Errorf("Index inside the table's location = %v, want a refusal", err)
	}
	for _, tt := range []struct {
		name string
		tbl  icebergindex.Table
		want string
	}{
		{"no such table", icebergindex.Table{Name: "ml.nothing"}, "ml.nothing"},
		{"no such snapshot", icebergindex.Table{Name: "ml.plain", SnapshotID: 42}, "has no snapshot 42"},
		{"no such ref", icebergindex.Table{Name: "ml.plain", Ref: "nightly"}, `has no branch or tag "nightly"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.tbl.Catalog = icebergindex.Catalog{IcebergCatalog: s.Iceberg.Catalog}
			_, err := icebergindex.Index(context.Background(), tt.tbl, l.source(s), icebergindex.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Index = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
