package lance

import (
	"context"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancetable"
)

// Table is a Lance table inside a larger dataset (LeRobot's frames.lance/
// and videos.lance/ beside its meta/), opened at its latest version to
// index row ranges of the caller's choosing: a range is indexed as one
// shard (a piece) per fragment it crosses, its objects keys of the
// dataset's store. Rows are its live rows, numbered across fragments in
// order (a scan's order, Lance's identity permutation): a deleted row has
// no number, and a piece lists it among its deleted rows.
type Table struct {
	ix *indexer
	m  *lancetable.Manifest
	lx *indexfile.Lance
	// starts are each fragment's first row (live rows before it);
	// deleted its deleted rows (physical, sorted).
	starts  []uint64
	deleted [][]uint32
	rows    uint64
	// open is the fragment last read, its data files kept.
	open *openFragment
}

type openFragment struct {
	k     int
	files []*openFile
	views []lancetable.FileView
}

// OpenTable opens the table under prefix ("frames.lance/") of st, its
// columns (nil: all), at its latest version.
func OpenTable(ctx context.Context, st store.Store, prefix string, columns []string, opts format.IndexOptions) (*Table, error) {
	ds := &dataset{st: st, prefix: prefix}
	version, err := ds.resolve(ctx, datav1alpha1.LanceTable{})
	if err != nil {
		return nil, err
	}
	m, err := ds.manifest(ctx, version)
	if err != nil {
		return nil, err
	}
	if err := m.CheckFlags(); err != nil {
		return nil, fmt.Errorf("%s: %w", ds.uri(), err)
	}
	nodes, err := lancefile.Nodes(m.Fields)
	if err == nil {
		nodes, err = project(nodes, columns)
	}
	if err == nil {
		err = lancefile.Readable(nodes)
	}
	if err != nil {
		return nil, fmt.Errorf("%s at version %d: %w", ds.uri(), version, err)
	}
	lx := &indexfile.Lance{Root: ds.uri(), Version: version, DataFormat: m.DataFormat, Columns: columns}
	if lx.ArrowSchema, err = format.EncodeSchema(arrowSchema(nodes)); err != nil {
		return nil, err
	}
	for _, f := range m.Fields {
		lx.Fields = append(lx.Fields, indexfile.LanceField{Name: f.Name, ID: f.ID, Parent: f.Parent, LogicalType: f.LogicalType, Nullable: f.Nullable,
			Extension: f.Extension, Blob: f.Blob})
	}
	t := &Table{ix: &indexer{ds: ds, opts: opts, nodes: nodes}, m: m, lx: lx}
	for _, frag := range m.Fragments {
		deleted, err := t.ix.deleted(ctx, frag)
		if err != nil {
			return nil, fmt.Errorf("%s at version %d, fragment %d: %w", ds.uri(), version, frag.ID, err)
		}
		t.starts = append(t.starts, t.rows)
		t.deleted = append(t.deleted, deleted)
		t.rows += frag.PhysicalRows - uint64(len(deleted))
	}
	return t, nil
}

// physical is the physical row of fragment k's live row l.
func (t *Table) physical(k int, l uint64) uint64 {
	p := l
	for _, d := range t.deleted[k] {
		if uint64(d) > p {
			break
		}
		p++
	}
	return p
}

// Descriptor is the table as an index records it (the frames table of a
// LeRobot index).
func (t *Table) Descriptor() *indexfile.Lance { return t.lx }

// Rows is the table's count of live rows.
func (t *Table) Rows() uint64 { return t.rows }

// Close removes the data files fetched to index it.
func (t *Table) Close() { t.closeFragment() }

func (t *Table) closeFragment() {
	if t.open != nil {
		for _, f := range t.open.files {
			_ = f.local.Close()
		}
		t.open = nil
	}
}

// fragment opens fragment k's data files (closing the last one opened).
func (t *Table) fragment(ctx context.Context, k int) (*openFragment, error) {
	if t.open != nil && t.open.k == k {
		return t.open, nil
	}
	t.closeFragment()
	o := &openFragment{k: k}
	frag := t.m.Fragments[k]
	for _, df := range frag.Files {
		f, err := t.ix.open(ctx, df)
		if err != nil {
			for _, g := range o.files {
				_ = g.local.Close()
			}
			return nil, err
		}
		o.files = append(o.files, f)
		if f.tail.Rows != frag.PhysicalRows {
			return nil, fmt.Errorf("%s holds %d rows, the fragment %d", f.key, f.tail.Rows, frag.PhysicalRows)
		}
		o.views = append(o.views, lancetable.FileView{Tail: f.tail, Source: f, Columns: f.columns, Blobs: t.ix.blobFiles(ctx, f)})
	}
	t.open = o
	return o, nil
}

// span calls fn for each fragment live rows [from, to) cross, with the
// physical rows [r0, r1) that hold them (and the deleted rows between).
func (t *Table) span(ctx context.Context, from, to uint64, fn func(k int, o *openFragment, r0, r1 uint64) error) error {
	if from > to || to > t.rows {
		return fmt.Errorf("%s: rows [%d, %d) of a table of %d", t.lx.Root, from, to, t.rows)
	}
	for k, start := range t.starts {
		end := start + t.m.Fragments[k].PhysicalRows - uint64(len(t.deleted[k]))
		if end <= from || start >= to || start == end {
			continue
		}
		o, err := t.fragment(ctx, k)
		if err != nil {
			return fmt.Errorf("fragment %d: %w", t.m.Fragments[k].ID, err)
		}
		r0, r1 := t.physical(k, max(from, start)-start), t.physical(k, min(to, end)-start-1)+1
		if err := fn(k, o, r0, r1); err != nil {
			return fmt.Errorf("fragment %d: %w", t.m.Fragments[k].ID, err)
		}
	}
	return nil
}

// live are the runs of fragment k's live rows in physical rows [r0, r1).
func (t *Table) live(k int, r0, r1 uint64) [][2]uint64 {
	var out [][2]uint64
	at := r0
	for _, d := range t.deleted[k] {
		p := uint64(d)
		if p < at {
			continue
		}
		if p >= r1 {
			break
		}
		if p > at {
			out = append(out, [2]uint64{at, p})
		}
		at = p + 1
	}
	if at < r1 {
		out = append(out, [2]uint64{at, r1})
	}
	return out
}

// Index indexes rows [from, to): a piece per fragment they cross.
func (t *Table) Index(ctx context.Context, from, to uint64) ([]indexfile.Entry, error) {
	var out []indexfile.Entry
	err := t.span(ctx, from, to, func(k int, o *openFragment, r0, r1 uint64) error {
		e, err := t.ix.shard(t.m.Fragments[k], o.files, o.views, t.deleted[k], r0, r1)
		if err == nil {
			out = append(out, e)
		}
		return err
	})
	return out, err
}

// Read decodes rows [from, to) of the indexed columns.
func (t *Table) Read(ctx context.Context, from, to uint64) (arrow.RecordBatch, error) {
	schema := arrowSchema(t.ix.nodes)
	chunks := make([][]arrow.Array, len(t.ix.nodes))
	defer func() {
		for _, cs := range chunks {
			for _, c := range cs {
				c.Release()
			}
		}
	}()
	err := t.span(ctx, from, to, func(k int, o *openFragment, r0, r1 uint64) error {
		for _, run := range t.live(k, r0, r1) {
			for c, n := range t.ix.nodes {
				arr, err := lancetable.ReadRows(n, o.views, run[0], run[1])
				if err != nil {
					return fmt.Errorf("column %q: %w", n.Name, err)
				}
				chunks[c] = append(chunks[c], arr)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, len(chunks))
	for c, cs := range chunks {
		if len(cs) == 0 {
			arr, err := lancefile.Nulls(t.ix.nodes[c].Type, 0)
			if err != nil {
				return nil, err
			}
			cols[c] = arr
			continue
		}
		all, err := array.Concatenate(cs, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		cols[c] = all
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(schema, cols, int64(to-from)), nil //nolint:gosec // bounded by the table's rows
}

// BlobLocation is where one row's blob lies in the dataset's store.
type BlobLocation struct {
	Null bool
	// Object and Offset are the object holding the blob and where it
	// begins in it; Size its length.
	Object       string
	Offset, Size int64
}

// Blobs locates the blobs of rows [from, to) of a blob column.
func (t *Table) Blobs(ctx context.Context, column string, from, to uint64) ([]BlobLocation, error) {
	var n *lancefile.Node
	for _, c := range t.ix.nodes {
		if c.Name == column {
			n = c
		}
	}
	if n == nil || !n.Blob {
		return nil, fmt.Errorf("%s has no blob column %q", t.lx.Root, column)
	}
	var out []BlobLocation
	err := t.span(ctx, from, to, func(k int, o *openFragment, r0, r1 uint64) error {
		i, err := lancetable.FileOf(n, o.views)
		if err != nil {
			return fmt.Errorf("column %q: %w", column, err)
		}
		if i < 0 {
			return fmt.Errorf("column %q: no data file of the fragment holds it", column)
		}
		f, of := o.views[i], o.files[i]
		refs, err := f.Tail.ReadBlobRefs(f.Source, n, f.Columns, r0, r1)
		if err != nil {
			return err
		}
		for j, r := range refs {
			if isDeleted(t.deleted[k], r0+uint64(j)) { //nolint:gosec // j < rows
				continue
			}
			loc := BlobLocation{Null: r.Null}
			switch {
			case r.Null:
			case r.External:
				return fmt.Errorf("%w: column %q, row %d: a blob stored outside the dataset (its descriptor names a URI)", lancetable.ErrUnsupported, column, r0+uint64(j)) //nolint:gosec // j < rows
			case r.Position > math.MaxInt64-r.Size:
				return fmt.Errorf("column %q, row %d: a blob at [%d, +%d)", column, r0+uint64(j), r.Position, r.Size) //nolint:gosec // j < rows
			case r.InBlobFile:
				loc.Object = blobKey(of.key, r.ID)
			default:
				loc.Object = of.key
			}
			loc.Offset, loc.Size = int64(r.Position), int64(r.Size) //nolint:gosec // checked above
			out = append(out, loc)
		}
		return nil
	})
	return out, err
}

// Schema is the indexed columns' schema.
func (t *Table) Schema() *arrow.Schema { return arrowSchema(t.ix.nodes) }
