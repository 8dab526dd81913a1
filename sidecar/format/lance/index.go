package lance

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancefile"
	"github.com/shardfeed/shardfeed/sidecar/format/lance/lancetable"
)

// fieldIDKey is the Arrow field metadata key of a column's Lance field id.
const fieldIDKey = "lance:field_id"

// coalesceGap is the largest gap between two of a shard's byte ranges of
// one file that are fetched as one.
const coalesceGap = 64 << 10

// IndexTable indexes the dataset at st (a stream's source.uri, the
// dataset's directory) at the version opts.Table.Lance pins, or its latest.
func (lanceFormat) IndexTable(ctx context.Context, st store.Store, opts format.IndexOptions) (*indexfile.File, error) {
	var pin datav1alpha1.LanceTable
	var columns []string
	if opts.Table != nil {
		pin, columns = opts.Table.Lance, opts.Table.Columns
	}
	ds := &dataset{st: st}
	version, err := ds.resolve(ctx, pin)
	if err != nil {
		return nil, err
	}
	if pin.Version != nil && opts.Warn != nil {
		if msg, err := ds.unprotected(ctx, version); err != nil {
			return nil, err
		} else if msg != "" {
			opts.Warn(msg)
		}
	}
	m, err := ds.manifest(ctx, version)
	if err != nil {
		return nil, err
	}
	if err := m.CheckFlags(); err != nil {
		return nil, err
	}
	nodes, err := lancefile.Nodes(m.Fields)
	if err != nil {
		return nil, fmt.Errorf("version %d: %w", version, err)
	}
	if nodes, err = project(nodes, columns); err != nil {
		return nil, err
	}
	if err := lancefile.Readable(nodes); err != nil {
		return nil, fmt.Errorf("version %d: %w", version, err)
	}
	out := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatLance}
	lx := &indexfile.Lance{Root: st.URI(), Version: version, Tag: pin.Tag, DataFormat: m.DataFormat, Columns: columns}
	schema := arrowSchema(nodes)
	if lx.ArrowSchema, err = format.EncodeSchema(schema); err != nil {
		return nil, err
	}
	for _, f := range m.Fields {
		lx.Fields = append(lx.Fields, indexfile.LanceField{Name: f.Name, ID: f.ID, Parent: f.Parent, LogicalType: f.LogicalType, Nullable: f.Nullable,
			Extension: f.Extension, Blob: f.Blob})
	}
	out.Lance = lx
	ix := indexer{ds: ds, opts: opts, nodes: nodes}
	for k, frag := range m.Fragments {
		shards, err := ix.fragment(ctx, frag)
		if err != nil {
			return nil, fmt.Errorf("version %d, fragment %d: %w", version, frag.ID, err)
		}
		out.Shards = append(out.Shards, shards...)
		if opts.Progress != nil {
			opts.Progress(k+1, len(m.Fragments), fmt.Sprintf("fragment %d", frag.ID))
		}
	}
	if len(out.Shards) == 0 {
		return nil, fmt.Errorf("%s at version %d has no live rows", st.URI(), version)
	}
	return out, nil
}

// project keeps the nodes of the columns asked for (nil: all).
func project(nodes []*lancefile.Node, columns []string) ([]*lancefile.Node, error) {
	if columns == nil {
		return nodes, nil
	}
	var out []*lancefile.Node
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	for _, c := range columns {
		k := slices.Index(names, c)
		if k < 0 {
			return nil, fmt.Errorf("the dataset has no column %q: it has %v", c, names)
		}
		out = append(out, nodes[k])
	}
	return out, nil
}

// arrowSchema is the nodes' schema, each field with its Lance field id.
func arrowSchema(nodes []*lancefile.Node) *arrow.Schema {
	fields := make([]arrow.Field, len(nodes))
	for i, n := range nodes {
		fields[i] = arrow.Field{Name: n.Name, Type: n.Type, Nullable: n.Nullable,
			Metadata: arrow.NewMetadata([]string{fieldIDKey}, []string{strconv.Itoa(int(n.ID))})}
	}
	return arrow.NewSchema(fields, nil)
}

// dataset reads a Lance dataset's table layer from its store, under
// prefix (a table inside a larger dataset: LeRobot's frames.lance/).
type dataset struct {
	st     store.Store
	prefix string
}

// uri is the table's URI.
func (d *dataset) uri() string { return d.st.URI() + d.prefix }

// resolve returns the version a pin names: a number, a tag's, or the
// latest of the listed manifests.
func (d *dataset) resolve(ctx context.Context, pin datav1alpha1.LanceTable) (uint64, error) {
	switch {
	case pin.Version != nil && pin.Tag != "":
		return 0, errors.New("pin a Lance dataset with a version or a tag, not both (--version, --tag)")
	case pin.Version != nil:
		if *pin.Version < 1 {
			return 0, fmt.Errorf("version %d: Lance versions begin at 1", *pin.Version)
		}
		return uint64(*pin.Version), nil
	case pin.Tag != "":
		key, err := lancetable.TagKey(pin.Tag)
		if err != nil {
			return 0, err
		}
		b, err := d.small(ctx, key, 1<<20)
		if errors.Is(err, store.ErrNotFound) {
			return 0, fmt.Errorf("%s has no tag %q (_refs/tags/%s.json)", d.uri(), pin.Tag, pin.Tag)
		}
		if err != nil {
			return 0, err
		}
		t, err := lancetable.ParseTag(pin.Tag, b)
		if err != nil {
			return 0, err
		}
		return t.Version, nil
	}
	l, err := d.st.ListDir(ctx, d.prefix+"_versions/")
	if err != nil {
		return 0, err
	}
	var latest uint64
	for _, o := range l.Objects {
		if v, ok := lancetable.VersionOf(strings.TrimPrefix(o.Key, d.prefix)); ok && v > latest {
			latest = v
		}
	}
	if latest == 0 {
		return 0, fmt.Errorf("%s is not a Lance dataset: it has no _versions/*.manifest (give format: lance the dataset's directory, the one that ends in .lance/)", d.uri())
	}
	return latest, nil
}

// unprotected says why version v's files may be deleted under the index:
// it is not the latest and no tag holds it, so Lance's
// cleanup_old_versions may delete them ("" when a tag or being the latest
// keeps them).
func (d *dataset) unprotected(ctx context.Context, v uint64) (string, error) {
	latest, err := d.resolve(ctx, datav1alpha1.LanceTable{})
	if err != nil || v >= latest {
		return "", err
	}
	l, err := d.st.ListDir(ctx, d.prefix+"_refs/tags/")
	if err != nil {
		return "", err
	}
	for _, o := range l.Objects {
		name := strings.TrimSuffix(path.Base(o.Key), ".json")
		key, err := lancetable.TagKey(name)
		if err != nil {
			continue
		}
		b, err := d.small(ctx, key, 1<<20)
		if err != nil {
			return "", err
		}
		if t, err := lancetable.ParseTag(name, b); err == nil && t.Version == v {
			return "", nil
		}
	}
	return fmt.Sprintf("version %d is not the latest (%d) and no tag holds it: Lance's cleanup_old_versions may delete its files, and pods would then fail saying to re-run shardfeed index; tag it (lance.dataset(URI).tags.create(NAME, %d)) and pin the stream by tag", v, latest, v), nil
}

// manifest reads version v's manifest.
func (d *dataset) manifest(ctx context.Context, v uint64) (*lancetable.Manifest, error) {
	for _, key := range lancetable.ManifestKeys(v) {
		b, err := d.small(ctx, key, lancetable.MaxManifestBytes)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		m, err := lancetable.ManifestAt(b, 0, int64(len(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if m.Version != v {
			return nil, fmt.Errorf("%s says it is version %d, not %d", key, m.Version, v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s has no version %d (no _versions/ manifest of it: cleaned up, or never written)", d.uri(), v)
}

// small reads a whole object of at most limit bytes (key: under the
// table's prefix).
func (d *dataset) small(ctx context.Context, key string, limit int64) ([]byte, error) {
	key = d.prefix + key
	o, err := d.st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if o.Size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a reader takes", key, o.Size, limit)
	}
	return format.ReadRange(ctx, d.st, key, 0, o.Size)
}

// indexer cuts fragments into shards.
type indexer struct {
	ds    *dataset
	opts  format.IndexOptions
	nodes []*lancefile.Node
}

// openFile is a data file opened for indexing: its bytes in a temporary
// file, recording the ranges a shard's decoding reads.
type openFile struct {
	key     string
	df      lancetable.DataFile
	tail    *lancefile.Tail
	local   *os.File
	size    int64
	reads   [][2]uint64
	columns lancefile.Columns
	// blobs are its blob files a shard read, by key.
	blobs map[string]*blobFile
}

func (f *openFile) ReadAt(off, n uint64) ([]byte, error) {
	if off > uint64(f.size) || n > uint64(f.size)-off || n > lancefile.MaxPageBytes { //nolint:gosec // sizes are non-negative
		return nil, fmt.Errorf("%s: bytes [%d, +%d) lie past its %d bytes", f.key, off, n, f.size)
	}
	b := make([]byte, n)
	if _, err := f.local.ReadAt(b, int64(off)); err != nil { //nolint:gosec // checked above
		return nil, err
	}
	f.reads = append(f.reads, [2]uint64{off, off + n})
	return b, nil
}

// open fetches a data file into a temporary file and reads its tail.
func (ix *indexer) open(ctx context.Context, df lancetable.DataFile) (*openFile, error) {
	key := ix.ds.prefix + "data/" + df.Path
	o, err := ix.ds.st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if df.Size != 0 && uint64(o.Size) != df.Size { //nolint:gosec // a size
		return nil, fmt.Errorf("%s is %d bytes, the manifest says %d", key, o.Size, df.Size)
	}
	tmp, err := os.CreateTemp(ix.opts.TempDir, "shardfeed-lance-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(tmp.Name()) // gone when closed
	r, err := ix.ds.st.Get(ctx, key, 0, o.Size)
	if err != nil {
		_ = tmp.Close()
		return nil, err
	}
	_, err = io.Copy(tmp, io.LimitReader(r, o.Size))
	_ = r.Close()
	if err != nil {
		_ = tmp.Close()
		return nil, err
	}
	f := &openFile{key: key, df: df, local: tmp, size: o.Size}
	end, err := f.ReadAt(uint64(max(0, o.Size-65536)), uint64(min(o.Size, 65536))) //nolint:gosec // sizes
	if err != nil {
		_ = f.local.Close()
		return nil, err
	}
	start, err := lancefile.TailStart(end, o.Size)
	if err == nil && o.Size-start > lancefile.MaxTailBytes {
		err = fmt.Errorf("%w: a tail of %d bytes", lancefile.ErrCorrupt, o.Size-start)
	}
	var tail []byte
	if err == nil {
		tail, err = f.ReadAt(uint64(start), uint64(o.Size-start)) //nolint:gosec // checked
	}
	if err == nil {
		f.tail, err = lancefile.ParseTail(tail, start, o.Size)
	}
	if err == nil {
		f.columns, err = df.ColumnsOf()
	}
	if err != nil {
		_ = f.local.Close()
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	f.reads = nil
	return f, nil
}

// fragment cuts one fragment into shards of about ShardBytes.
func (ix *indexer) fragment(ctx context.Context, frag lancetable.Fragment) ([]indexfile.Entry, error) {
	var files []*openFile
	defer func() {
		for _, f := range files {
			_ = f.local.Close()
		}
	}()
	views := make([]lancetable.FileView, 0, len(frag.Files))
	for _, df := range frag.Files {
		f, err := ix.open(ctx, df)
		if err != nil {
			return nil, err
		}
		if f.tail.Rows != frag.PhysicalRows {
			return nil, fmt.Errorf("%s holds %d rows, the fragment %d", f.key, f.tail.Rows, frag.PhysicalRows)
		}
		files = append(files, f)
		views = append(views, lancetable.FileView{Tail: f.tail, Source: f, Columns: f.columns, Blobs: ix.blobFiles(ctx, f)})
	}
	deleted, err := ix.deleted(ctx, frag)
	if err != nil {
		return nil, err
	}
	ends, err := ix.cuts(frag, files, views, deleted)
	if err != nil {
		return nil, err
	}
	var out []indexfile.Entry
	r0 := uint64(0)
	for _, r1 := range ends {
		e, err := ix.shard(frag, files, views, deleted, r0, r1)
		if err != nil {
			return nil, err
		}
		if e.Samples > 0 {
			out = append(out, e)
		}
		r0 = r1
	}
	return out, nil
}

// pageBytes are the bytes of the indexed columns' pages in a fragment's
// files.
func (ix *indexer) pageBytes(files []*openFile) uint64 {
	var bytes uint64
	for _, n := range ix.nodes {
		for _, id := range n.Leaves() {
			for _, f := range files {
				if c, ok := f.columns[id]; ok && c < len(f.tail.Columns) {
					for _, p := range f.tail.Columns[c].Pages {
						for _, s := range p.Sizes {
							bytes += s
						}
					}
				}
			}
		}
	}
	return bytes
}

// cuts returns the end rows of a fragment's shards, of about ShardBytes
// each: equal row ranges, or, with blob columns, ranges whose live rows'
// blobs and share of the pages add up to about ShardBytes.
func (ix *indexer) cuts(frag lancetable.Fragment, files []*openFile, views []lancetable.FileView, deleted []uint32) ([]uint64, error) {
	want := uint64(max(ix.opts.ShardBytes, 1)) //nolint:gosec // positive
	pages := ix.pageBytes(files)
	var sizes []uint64
	for _, n := range ix.nodes {
		if !n.Blob {
			continue
		}
		s, err := lancetable.BlobSizes(n, views, 0, frag.PhysicalRows)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", n.Name, err)
		}
		if sizes == nil {
			sizes = s
			continue
		}
		for i := range s {
			sizes[i] += s[i]
		}
	}
	var ends []uint64
	if sizes == nil {
		step := max(frag.PhysicalRows, 1)
		if pages > want && frag.PhysicalRows > 0 {
			shards := (pages + want - 1) / want
			step = max(1, (frag.PhysicalRows+shards-1)/shards)
		}
		for r := uint64(0); r < frag.PhysicalRows; r += step {
			ends = append(ends, min(r+step, frag.PhysicalRows))
		}
		return ends, nil
	}
	perRow := float64(pages) / float64(max(frag.PhysicalRows, 1))
	acc := 0.0
	for r := range frag.PhysicalRows {
		acc += perRow
		if !isDeleted(deleted, r) {
			acc += float64(sizes[r])
		}
		if acc >= float64(want) || r+1 == frag.PhysicalRows {
			ends, acc = append(ends, r+1), 0
		}
	}
	return ends, nil
}

// isDeleted says whether row is among the sorted deleted rows.
func isDeleted(deleted []uint32, row uint64) bool {
	if row > math.MaxUint32 {
		return false
	}
	_, found := slices.BinarySearch(deleted, uint32(row))
	return found
}

// deleted reads a fragment's deleted rows.
func (ix *indexer) deleted(ctx context.Context, frag lancetable.Fragment) ([]uint32, error) {
	if frag.Deletion == nil {
		return nil, nil
	}
	key := frag.Deletion.Path(frag.ID)
	b, err := ix.ds.small(ctx, key, lancetable.MaxDeletionBytes)
	if err != nil {
		return nil, err
	}
	del, err := lancetable.Deleted(frag.Deletion, frag.PhysicalRows, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return del, nil
}

// shard decodes rows [r0, r1) of a fragment, recording the byte ranges
// the decoding reads: the shard's parts.
func (ix *indexer) shard(frag lancetable.Fragment, files []*openFile, views []lancetable.FileView, deleted []uint32, r0, r1 uint64) (indexfile.Entry, error) {
	for _, f := range files {
		f.reads = f.reads[:0]
	}
	for _, f := range files {
		for _, b := range f.blobs {
			b.segs = b.segs[:0]
		}
	}
	skip := func(row uint64) bool { return isDeleted(deleted, row) }
	for _, n := range ix.nodes {
		arr, err := lancetable.ReadLiveRows(n, views, r0, r1, skip)
		if err != nil {
			return indexfile.Entry{}, fmt.Errorf("rows [%d, %d) of column %q: %w", r0, r1, n.Name, err)
		}
		arr.Release()
	}
	e := indexfile.Entry{Name: fmt.Sprintf("fragment-%d-rows-%d", frag.ID, r0), Part: int(frag.ID), RowStart: int64(r0), Rows: int64(r1 - r0)} //nolint:gosec // bounded
	h := checksum.Sum{Algo: ix.opts.Hash}.New()
	for _, f := range files {
		for _, g := range coalesce(f.reads) {
			b, err := f.ReadAt(g[0], g[1]-g[0])
			if err != nil {
				return indexfile.Entry{}, err
			}
			rh := checksum.Sum{Algo: ix.opts.Hash}.New()
			_, _ = rh.Write(b)
			_, _ = h.Write(b)
			e.Ranges = append(e.Ranges, indexfile.Range{Object: f.key, Offset: int64(g[0]), Length: int64(g[1] - g[0]), //nolint:gosec // file offsets
				Hash: ix.opts.Hash + ":" + hex.EncodeToString(rh.Sum(nil))})
			e.Length += int64(g[1] - g[0]) //nolint:gosec // file offsets
		}
		for _, key := range slices.Sorted(maps.Keys(f.blobs)) {
			for _, g := range f.blobs[key].ranges() {
				rh := checksum.Sum{Algo: ix.opts.Hash}.New()
				_, _ = rh.Write(g.data)
				_, _ = h.Write(g.data)
				e.Ranges = append(e.Ranges, indexfile.Range{Object: key, Offset: int64(g.off), Length: int64(len(g.data)), //nolint:gosec // file offsets
					Hash: ix.opts.Hash + ":" + hex.EncodeToString(rh.Sum(nil))})
				e.Length += int64(len(g.data))
			}
		}
		tail, err := f.ReadAt(uint64(f.tail.Start), uint64(f.tail.Size)) //nolint:gosec // non-negative
		if err != nil {
			return indexfile.Entry{}, err
		}
		th := checksum.Sum{Algo: ix.opts.Hash}.New()
		_, _ = th.Write(tail)
		fields, cols := f.df.Fields, f.df.ColumnIndices
		if len(cols) == 0 {
			for k := range fields {
				cols = append(cols, int32(k)) //nolint:gosec // bounded
			}
		}
		e.Files = append(e.Files, indexfile.LanceFile{Tail: indexfile.Range{Object: f.key, Offset: f.tail.Start, Length: f.tail.Size,
			Hash: ix.opts.Hash + ":" + hex.EncodeToString(th.Sum(nil))}, Size: f.size, Fields: fields, Columns: cols})
	}
	if len(e.Ranges) > 0 {
		e.Object, e.Offset = e.Ranges[0].Object, e.Ranges[0].Offset
	} else {
		e.Object = e.Files[0].Tail.Object
	}
	e.Hash = ix.opts.Hash + ":" + hex.EncodeToString(h.Sum(nil))
	lo, _ := slices.BinarySearch(deleted, uint32(r0)) //nolint:gosec // rows are u32 in a deletion file
	for _, d := range deleted[lo:] {
		if uint64(d) >= r1 {
			break
		}
		off := int64(uint64(d) - r0) //nolint:gosec // within the shard
		if n := len(e.Deleted); n > 0 && e.Deleted[n-1][1] == off {
			e.Deleted[n-1][1]++
		} else {
			e.Deleted = append(e.Deleted, indexfile.Run{off, off + 1})
		}
	}
	e.Samples = e.Rows
	for _, d := range e.Deleted {
		e.Samples -= d.Count()
	}
	return e, nil
}

// coalesce sorts ranges and merges those that overlap or lie within
// coalesceGap of each other.
func coalesce(rs [][2]uint64) [][2]uint64 {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]uint64
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+coalesceGap {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// TableChange implements format.TableChanger: an index of a dataset not
// pinned to a version number is of an older version than the one its
// pin (a tag, or none: the latest) names now.
func (lanceFormat) TableChange(ctx context.Context, st store.Store, f *indexfile.File, pin format.TableOptions) (string, error) {
	if f.Lance == nil || pin.Lance.Version != nil {
		return "", nil // versions do not change
	}
	now, err := (&dataset{st: st}).resolve(ctx, pin.Lance)
	if err != nil || now == f.Lance.Version {
		return "", err
	}
	if pin.Lance.Tag != "" {
		return fmt.Sprintf("tag %q now names version %d, and the index is of version %d", pin.Lance.Tag, now, f.Lance.Version), nil
	}
	return fmt.Sprintf("the dataset's latest version is %d, and the index is of version %d", now, f.Lance.Version), nil
}
