// Package lance reads Lance datasets as shardfeed streams (format: lance):
// a stream is one version of a dataset, pinned by shardfeed index, and a
// shard is a row range of one fragment, fetched as the byte ranges of its
// rows' pages and decoded with the tails of its data files
// (docs/formats.md, Lance). The file and table readers are lancefile and
// lancetable.
package lance

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancetable"
)

// Format is the lance format.
var Format format.Format = lanceFormat{}

type lanceFormat struct{}

func (lanceFormat) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatLance }

// IndexHelp is shardfeed index's help of a lance stream.
func (lanceFormat) IndexHelp() string {
	return `URI is a Lance dataset's directory (….lance/), read at one version
(--version, --tag, or the latest): one shard per row range of a
fragment, of about --shard-size, each with the byte ranges of its rows'
pages and its data files' tails; deleted rows are never served.
--columns keeps only those columns: their bytes alone are fetched. Blob
columns are served as their bytes, each shard fetching its rows' blobs
by range. The version enters the plan's fingerprint; pin by --tag, which
keeps the version from Lance's cleanup of old versions.`
}

func (lanceFormat) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if f.Lance == nil {
		return nil, fmt.Errorf("a lance index names its dataset: re-run shardfeed index --format lance")
	}
	rows, err := NewRows(f.Lance)
	if err != nil {
		return nil, err
	}
	return &reader{Rows: rows, file: f}, nil
}

// Rows reads a Lance table's shards from their parts alone: a lance
// stream's, or the frames table's pieces of a LeRobot shard.
type Rows struct {
	lx     *indexfile.Lance
	schema *arrow.Schema
	nodes  []*lancefile.Node
}

// NewRows reads the shards of the table an index describes.
func NewRows(lx *indexfile.Lance) (*Rows, error) {
	schema, err := format.DecodeSchema(lx.ArrowSchema)
	if err != nil {
		return nil, err
	}
	nodes, err := lancefile.Nodes(fieldsOf(lx.Fields))
	if err != nil {
		return nil, fmt.Errorf("the index's Lance fields: %w; re-run shardfeed index", err)
	}
	names := make([]string, schema.NumFields())
	for i, fl := range schema.Fields() {
		names[i] = fl.Name
	}
	if nodes, err = project(nodes, names); err != nil {
		return nil, fmt.Errorf("the index's schema: %w; re-run shardfeed index", err)
	}
	if err := lancefile.Readable(nodes); err != nil {
		return nil, fmt.Errorf("the index's Lance fields: %w; re-run shardfeed index", err)
	}
	return &Rows{lx: lx, schema: schema, nodes: nodes}, nil
}

// Schema is the indexed columns' schema.
func (r *Rows) Schema() *arrow.Schema { return r.schema }

func fieldsOf(fs []indexfile.LanceField) []lancefile.Field {
	out := make([]lancefile.Field, len(fs))
	for i, f := range fs {
		out[i] = lancefile.Field{Name: f.Name, ID: f.ID, Parent: f.Parent, LogicalType: f.LogicalType, Nullable: f.Nullable,
			Extension: f.Extension, Blob: f.Blob}
	}
	return out
}

type reader struct {
	*Rows
	file *indexfile.File
}

func (r *reader) Parts(i int) []format.Part { return r.ShardParts(r.file.Shard(i)) }

// ShardParts are a shard's ranges, then each data file's tail.
func (r *Rows) ShardParts(e *indexfile.Entry) []format.Part {
	out := make([]format.Part, 0, len(e.Ranges)+len(e.Files))
	for _, g := range e.Ranges {
		out = append(out, format.Part{Key: g.Object, Size: g.Length, Hash: g.Hash, Range: true, Offset: g.Offset})
	}
	for _, f := range e.Files {
		out = append(out, format.Part{Key: f.Tail.Object, Size: f.Tail.Length, Hash: f.Tail.Hash, Range: true, Offset: f.Tail.Offset})
	}
	return out
}

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

// sparse is a file's bytes where a shard's parts hold them.
type sparse struct {
	object string
	segs   []segment
}

type segment struct {
	off  uint64
	data []byte
}

func (s *sparse) ReadAt(off, n uint64) ([]byte, error) {
	k := sort.Search(len(s.segs), func(k int) bool { return s.segs[k].off+uint64(len(s.segs[k].data)) > off })
	for ; k < len(s.segs) && s.segs[k].off <= off; k++ {
		g := s.segs[k]
		if off+n <= g.off+uint64(len(g.data)) {
			return g.data[off-g.off : off-g.off+n], nil
		}
	}
	return nil, fmt.Errorf("%s: bytes [%d, %d) are not among the shard's ranges: the index does not match the dataset; re-run shardfeed index", s.object, off, off+n)
}

func (r *reader) Records(_ context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	recs, err := r.Read(r.file.Shard(i), parts, columns)
	if err != nil {
		return nil, err
	}
	return format.RecordsOf(recs)
}

// Read decodes a shard's live rows from its parts, of the columns asked
// for (nil: all): a batch per run of rows between deleted ones.
func (r *Rows) Read(e *indexfile.Entry, parts [][]byte, columns []string) ([]arrow.RecordBatch, error) {
	if len(parts) != len(e.Ranges)+len(e.Files) {
		return nil, fmt.Errorf("shard %s: %d parts, want %d", e.Name, len(parts), len(e.Ranges)+len(e.Files))
	}
	files, err := views(*e, parts)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", e.Name, err)
	}
	nodes, fields, err := r.wanted(columns)
	if err != nil {
		return nil, err
	}
	from, to := uint64(e.RowStart), uint64(e.RowStart+e.Rows) //nolint:gosec // checked by the index
	cols := make([]arrow.Array, len(nodes))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	skip := func(row uint64) bool {
		off := int64(row) - e.RowStart //nolint:gosec // rows of the shard
		k := sort.Search(len(e.Deleted), func(k int) bool { return e.Deleted[k][1] > off })
		return k < len(e.Deleted) && e.Deleted[k][0] <= off
	}
	for k, n := range nodes {
		if cols[k], err = lancetable.ReadLiveRows(n, files, from, to, skip); err != nil {
			return nil, fmt.Errorf("shard %s: %w", e.Name, err)
		}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, e.Rows)
	defer rec.Release()
	return format.Undeleted(rec, 0, e.Deleted), nil
}

// wanted returns the nodes and fields of the columns asked for (nil: all).
func (r *Rows) wanted(columns []string) ([]*lancefile.Node, []arrow.Field, error) {
	var nodes []*lancefile.Node
	var fields []arrow.Field
	for k, n := range r.nodes {
		if columns != nil && !slices.Contains(columns, n.Name) {
			continue
		}
		nodes, fields = append(nodes, n), append(fields, r.schema.Field(k))
	}
	for _, c := range columns {
		if len(r.schema.FieldIndices(c)) == 0 {
			return nil, nil, fmt.Errorf("the index has no column %q (it was indexed with columns %v): re-run shardfeed index --columns with it", c, r.lx.Columns)
		}
	}
	return nodes, fields, nil
}

// views opens a shard's data files from its parts: its ranges, then each
// file's tail.
func views(e indexfile.Entry, parts [][]byte) ([]lancetable.FileView, error) {
	byObject := map[string]*sparse{}
	for k, g := range e.Ranges {
		if int64(len(parts[k])) != g.Length {
			return nil, fmt.Errorf("range %d of %s: %d bytes, want %d", k, g.Object, len(parts[k]), g.Length)
		}
		s := byObject[g.Object]
		if s == nil {
			s = &sparse{object: g.Object}
			byObject[g.Object] = s
		}
		s.segs = append(s.segs, segment{off: uint64(g.Offset), data: parts[k]}) //nolint:gosec // checked by the index
	}
	for _, s := range byObject {
		slices.SortFunc(s.segs, func(a, b segment) int { return cmp.Compare(a.off, b.off) })
	}
	out := make([]lancetable.FileView, len(e.Files))
	for k, f := range e.Files {
		tail, err := lancefile.ParseTail(parts[len(e.Ranges)+k], f.Tail.Offset, f.Size)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Tail.Object, err)
		}
		src := byObject[f.Tail.Object]
		if src == nil {
			src = &sparse{object: f.Tail.Object}
		}
		cols := lancefile.Columns{}
		for j, id := range f.Fields {
			cols[id] = int(f.Columns[j])
		}
		out[k] = lancetable.FileView{Tail: tail, Source: src, Columns: cols, Blobs: shardBlobs(byObject, f.Tail.Object)}
	}
	return out, nil
}

// shardBlobs opens a data file's blob files from a shard's parts.
func shardBlobs(byObject map[string]*sparse, dataKey string) lancetable.BlobFiles {
	return func(id uint32) (lancefile.Source, error) {
		key := blobKey(dataKey, id)
		if s := byObject[key]; s != nil {
			return s, nil
		}
		return &sparse{object: key}, nil // says the bytes are not among the parts
	}
}
