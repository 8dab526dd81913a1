// Package icebergindex resolves an Apache Iceberg table, through its
// catalog, to a shardfeed index: the Parquet data files of one snapshot,
// one shard per row group, with the rows its position and equality delete
// files delete as runs the sidecar never serves, and the table's schema
// by field id. `shardfeed index --format iceberg` runs it with the
// author's credentials; the operator and the sidecars read only the index
// it writes (docs/formats.md).
package icebergindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
)

// Table is the table a stream reads (spec.streams[].iceberg) with the
// credentials of its catalog.
type Table struct {
	Catalog Catalog
	// Name is namespace.table.
	Name string
	// SnapshotID pins the snapshot; Ref names a branch or tag. Neither:
	// the table's current snapshot.
	SnapshotID int64
	Ref        string
}

// Options tune indexing.
type Options struct {
	// Hash is the algorithm of the shards' content hashes (default xxh64).
	Hash string
	// Progress, if set, is called after each data file.
	Progress func(done, total int, object string)
}

// Index resolves t at its snapshot and returns the index of the stream
// whose source is src: src.URI is where the index goes, and its bucket
// must hold every data file of the snapshot.
func Index(ctx context.Context, t Table, src store.Source, opts Options) (_ *indexfile.File, err error) {
	// iceberg-go parses the table's metadata and manifests, which the
	// table's writers control: a panic of its parsers is an error.
	defer recoverCorrupt("table "+t.Name, &err)
	if opts.Hash == "" {
		opts.Hash = "xxh64"
	}
	root, err := stores.Root(src.URI)
	if err != nil {
		return nil, err
	}
	register()
	fsys := newFiles(ctx, src)
	if !current.CompareAndSwap(nil, fsys) {
		return nil, errors.New("icebergindex: one table is indexed at a time")
	}
	defer current.Store(nil)

	cat, err := t.Catalog.open(ctx)
	if err != nil {
		return nil, err
	}
	if c, ok := cat.(interface{ Close() error }); ok {
		defer func() { _ = c.Close() }()
	}
	tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier(t.Name))
	if err != nil {
		return nil, fmt.Errorf("table %s in the %s catalog: %w", t.Name, t.Catalog.Describe(), err)
	}
	snap, err := t.snapshot(tbl.Metadata())
	if err != nil {
		return nil, err
	}
	if loc := strings.TrimSuffix(tbl.Location(), "/") + "/"; strings.HasPrefix(strings.TrimSuffix(src.URI, "/")+"/", loc) {
		return nil, fmt.Errorf("the index would be written at %s, inside the table's location %s, where Iceberg's orphan-file cleanup deletes files the table does not list: give the stream a source.uri outside it (e.g. %s.shardfeed/%s/)",
			src.URI, loc, root, t.Name)
	}
	scan := tbl.Scan(table.WithSnapshotID(snap.SnapshotID))
	schema, err := scan.Projection()
	if err != nil {
		return nil, fmt.Errorf("table %s: schema at snapshot %d: %w", t.Name, snap.SnapshotID, err)
	}
	arrowSchema, err := encodeSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("table %s: planning snapshot %d: %w", t.Name, snap.SnapshotID, err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("table %s has no rows at snapshot %d: nothing to train on", t.Name, snap.SnapshotID)
	}
	out := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatIceberg, Table: &indexfile.Table{
		Catalog: t.Catalog.Describe(), Name: t.Name, Location: tbl.Location(), Snapshot: snap.SnapshotID, Ref: t.Ref,
		SchemaID: schema.ID, ArrowSchema: arrowSchema, Root: root,
	}}
	d := newDeletes(fsys)
	for i, task := range tasks {
		if err := indexTask(ctx, fsys, root, task, d, out, opts); err != nil {
			return nil, fmt.Errorf("table %s at snapshot %d: %w", t.Name, snap.SnapshotID, err)
		}
		if opts.Progress != nil {
			opts.Progress(i+1, len(tasks), task.File.FilePath())
		}
	}
	out.Table.DeleteFiles = d.applied()
	return out, nil
}

// snapshot is the table's snapshot the stream reads.
func (t Table) snapshot(md table.Metadata) (*table.Snapshot, error) {
	switch {
	case t.SnapshotID != 0:
		if s := md.SnapshotByID(t.SnapshotID); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("table %s has no snapshot %d (expired, or of another table): pin one of its snapshots, or drop snapshotID for the current one", t.Name, t.SnapshotID)
	case t.Ref != "":
		if s := md.SnapshotByName(t.Ref); s != nil {
			return s, nil
		}
		return nil, fmt.Errorf("table %s has no branch or tag %q", t.Name, t.Ref)
	}
	if s := md.CurrentSnapshot(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("table %s has no snapshot: it has never been written", t.Name)
}

// encodeSchema writes the table's schema as an Arrow IPC schema message,
// in base64, with each field's Iceberg field id.
func encodeSchema(sc *iceberg.Schema) (string, error) {
	as, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return "", fmt.Errorf("schema %d has no Arrow form: %w", sc.ID, err)
	}
	return format.EncodeSchema(as)
}

// indexTask appends the row groups of one data file, with their deleted
// runs, to out.
func indexTask(ctx context.Context, fsys *files, root string, task table.FileScanTask, d *deletes, out *indexfile.File, opts Options) error {
	df := task.File
	path := df.FilePath()
	if df.FileFormat() != iceberg.ParquetFile {
		return fmt.Errorf("data file %s is %s: shardfeed reads Iceberg tables of Parquet data files", path, df.FileFormat())
	}
	if len(task.DeletionVectorFiles) > 0 {
		return fmt.Errorf("data file %s has deletion vectors (%s), which shardfeed does not apply yet: rewrite the table's deletes (Spark's rewrite_position_delete_files) or pin a snapshot without them; never served with deleted rows", path, filePaths(task.DeletionVectorFiles))
	}
	st, key, err := fsys.locate(path)
	if err != nil {
		return err
	}
	if st.URI() != root {
		return fmt.Errorf("data file %s is not in %s, the bucket of the stream's source.uri: the sidecars read the table's files there with the stream's credentials; put source.uri in the table's bucket", path, root)
	}
	obj, err := st.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("data file %s: %w", path, err)
	}
	if obj.Size != df.FileSizeBytes() {
		return fmt.Errorf("data file %s is %d bytes, the table's manifest says %d: the file changed under the table", path, obj.Size, df.FileSizeBytes())
	}
	first := len(out.Shards)
	if err := parquet.Format.IndexObject(ctx, st, obj, out, format.IndexOptions{Hash: opts.Hash}); err != nil {
		return fmt.Errorf("data file %s: %w", path, err)
	}
	groups := out.Shards[first:]
	var rows int64
	for _, g := range groups {
		rows += g.Samples
	}
	if rows != df.Count() {
		return fmt.Errorf("data file %s has %d rows, the table's manifest says %d", path, rows, df.Count())
	}
	deleted, err := d.positions(ctx, st, key, task)
	if err != nil {
		return fmt.Errorf("data file %s: %w", path, err)
	}
	var start int64
	for i := range groups {
		g := &groups[i]
		g.Rows = g.Samples
		g.Deleted = runsIn(deleted, start, start+g.Rows)
		for _, r := range g.Deleted {
			g.Samples -= r.Count()
		}
		start += g.Rows
	}
	return nil
}

// runsIn turns the sorted, distinct positions of a file that fall in
// [lo, hi) into runs relative to lo.
func runsIn(pos []int64, lo, hi int64) []indexfile.Run {
	i, _ := slices.BinarySearch(pos, lo)
	var out []indexfile.Run
	for ; i < len(pos) && pos[i] < hi; i++ {
		p := pos[i] - lo
		if n := len(out); n > 0 && out[n-1][1] == p {
			out[n-1][1]++
			continue
		}
		out = append(out, indexfile.Run{p, p + 1})
	}
	return out
}

func filePaths(dfs []iceberg.DataFile) string {
	out := make([]string, len(dfs))
	for i, df := range dfs {
		out[i] = df.FilePath()
	}
	return strings.Join(out, ", ")
}
