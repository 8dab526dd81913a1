// Package format is what a shard format implements, and the registry that
// finds one by the API's format name (spec.streams[].format).
//
// A format turns the bytes of a stream's objects into Arrow records, in the
// shape of arrow-go's own readers: Open takes a stream's index (its
// index.Layout) and returns a Reader, which says which object ranges shard i
// needs (Parts), reads the stream's Arrow schema (Schema) and decodes a
// shard into an array.RecordReader (Records). A format that can index a
// stream's objects for `shardfeed index` and `shardfeed convert` also
// implements Indexer.
//
// The formats shardfeed reads are listed in one table, formats.Default
// (sidecar/format/formats). Adding a format is a package implementing Format
// (and Indexer) plus one row there; docs/development.md lists the steps. The
// index options one format alone takes are its own (Option): the CLI's
// flags, their help and checks, and a manifest's fields come from the
// registry's list of them, and their values reach the format in
// IndexOptions.Own.
// Index reading stays in internal/index, which decodes nothing, so that the
// operator links no decoder.
package format

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/images"
)

// MetaShape is the field metadata key with the shape of a column stored
// flattened as a fixed-size list ("3,4"): an MDS ndarray, a decoded image
// ("h,w,3"). The clients reshape the column's tensor by it.
const MetaShape = "shardfeed.shape"

// Format is one shard format.
type Format interface {
	// Kind is the format's name in the API and in shardfeed indexes.
	Kind() datav1alpha1.ShardFormat
	// Open checks that a stream's index has what this format needs to read
	// its shards and returns the stream's reader.
	Open(l *index.Layout) (Reader, error)
}

// Reader reads the shards of one stream.
type Reader interface {
	// Parts lists the object ranges shard i needs in the cache, the shard's
	// own bytes first (the ones its index hash covers).
	Parts(i int) []Part
	// Schema returns the stream's Arrow schema, from the index or from the
	// bytes of parts that read returns.
	Schema(ctx context.Context, read ReadFunc) (*arrow.Schema, error)
	// Records decodes shard i from the bytes of its parts, in Parts' order,
	// keeping only columns (nil: all). The caller releases the reader.
	Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error)
}

// RawReader is a Reader that finds the values of some columns in a shard's
// stored bytes, laid out as Arrow lays them out, so the sidecar serves them
// from the cached file without decoding a copy.
type RawReader interface {
	// RawShard checks shard i's parts (in Parts' order) and returns the
	// columns whose values it finds in place, of those asked for; the
	// caller decodes the others. nil: none. Only a column of one
	// fixed-width value buffer (a primitive, or a fixed-size list of them)
	// or of binary or string values, without nulls, can be raw.
	RawShard(i int, parts [][]byte, columns []string) (RawShard, error)
}

// RawShard finds a shard's values of its raw columns in its stored bytes,
// a row at a time (one look at a row serves all its columns).
type RawShard interface {
	// Columns names the raw columns, in the order Row gives them.
	Columns() []string
	// Row sets vals[k] to the bytes of row's value in column k, as Arrow
	// stores them (a fixed-width value, or a binary or UTF-8 string's
	// bytes): views of the parts. False when the stored bytes no longer
	// hold the row, having changed since RawShard checked them.
	Row(row int, vals [][]byte) bool
}

// Pruner is a Reader whose shards carry statistics of their columns (a
// Parquet row group's), by which a row filter rules a shard out unread.
type Pruner interface {
	// Stats returns what is known of shard i's columns, by name, reading
	// only what it needs (a footer) through read; nil when nothing is.
	Stats(ctx context.Context, i int, read ReadFunc) (map[string]expr.Stats, error)
}

// Measurer is a Reader that knows a list column's lengths from some of a
// shard's parts without its values (a Megatron shard's .idx ranges): the
// lengths of packing and bucketing come without reading the data.
type Measurer interface {
	// MeasuredParts are the indexes, into Parts(i), of the parts that
	// give column's lengths; nil when its values must be read.
	MeasuredParts(i int, column string) []int
	// Lengths returns each of shard i's samples' lengths in column from
	// its parts, where only MeasuredParts' are set.
	Lengths(i int, column string, parts [][]byte) ([]int64, error)
}

// Windowed is a Reader whose samples can carry windows of their
// neighbours: a lerobot stream's frames, as LeRobotDataset's
// delta_timestamps make them (spec.streams[].lerobot.deltaTimestamps).
type Windowed interface {
	// SetWindows serves each key of deltas as the frames at those
	// offsets, in seconds, from each sample's; tolerance is how far an
	// offset may be from whole frames (0: the format's default). It
	// changes the schema Schema returns.
	SetWindows(deltas map[string][]float64, tolerance float64) error
}

// FrameSizer is a Reader whose video frames can be resized and cropped
// as an image column's are (torchvision's Resize then CenterCrop): a
// lerobot stream's cameras (spec.streams[].lerobot.frames).
type FrameSizer interface {
	// SetFrameSize serves every camera's frames at spec's size. It
	// changes the schema Schema returns.
	SetFrameSize(spec images.Spec) error
}

// ClipServer is a Reader that can serve its cameras as clips of their
// compressed video, for the trainer to decode (a lerobot stream's
// cameras: Clips), instead of decoded frames.
type ClipServer interface {
	// ServeClips serves each camera as a column of clips and one of the
	// times of its frames in them. It changes the schema Schema returns.
	ServeClips() error
}

// ColumnChecker is a Reader that can tell, before any shard is read,
// whether this binary serves the columns asked for (nil: all): a lerobot
// stream's cameras need the video decoder a build may lack. A sidecar
// refuses such a stream at start (source.CheckDecoders), not shard by
// shard (which onCorruptShard: skip would turn into an epoch of pad rows).
type ColumnChecker interface {
	CheckColumns(columns []string) error
}

// Part is a range of an object that a shard needs: the whole object, or
// bytes [Offset, Offset+Size) of it when Range is set.
type Part struct {
	Key string
	// Size in bytes; negative: not known or checked.
	Size int64
	// Hash is the "algo:hex" digest of the bytes; empty: not checked.
	Hash   string
	Range  bool
	Offset int64
	// Version, for a part with no hash of its own (a Parquet file's
	// footer), is a hash that changes when the object does (its row
	// group's; the sidecar's source puts the index's content hash in its
	// place, the same for every row group of the file): the node's cache
	// keys the part by it.
	Version string
}

// ReadFunc returns the bytes of a part (through the sidecar's cache, or the
// store directly).
type ReadFunc func(ctx context.Context, part Part) ([]byte, error)

// Indexer is a Format that indexes a stream's objects: `shardfeed index`
// writes what it finds as the stream's index.json.
type Indexer interface {
	// Suffixes are the endings of the object names it indexes.
	Suffixes() []string
	// IndexObject appends the shards of one object to f (whose Format is
	// set), hashing each shard's bytes with opts.Hash.
	IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts IndexOptions) error
}

// Merger is an Indexer whose objects' indexes say more of the stream than
// their shards (a text stream's schema, inferred from each object): the
// objects are indexed at once, each into an index of its own that starts
// as the stream's first object's, and Merge folds each into the stream's
// in key order. An Indexer that is not one adds nothing to that head but
// its shards.
type Merger interface {
	Merge(dst, obj *indexfile.File) error
}

// Selector is an Indexer whose source may hold several data sets, told
// apart by files beside the objects (a Hugging Face DatasetDict's splits):
// Select keeps those of the one opts choose, or refuses a source of
// several without a choice. listing is every object under the prefix;
// files those with the format's suffixes. out records the choice.
type Selector interface {
	Select(ctx context.Context, st store.Store, listing, files []store.Object, out *indexfile.File, opts IndexOptions) ([]store.Object, error)
}

// StreamIndexer is an Indexer that indexes a stream's objects together
// (many at once, through ranged reads of their headers) rather than one
// after another: Registry.Index hands it every object it would have
// indexed.
type StreamIndexer interface {
	IndexObjects(ctx context.Context, st store.Store, objects []store.Object, f *indexfile.File, opts IndexOptions) error
}

// TableIndexer is a Format whose stream is a table (an Iceberg table
// resolved through its catalog, a Lance dataset at one version), not the
// objects under a prefix: it indexes the whole stream, st being the
// stream's source and IndexOptions.Table naming the table.
type TableIndexer interface {
	IndexTable(ctx context.Context, st store.Store, opts IndexOptions) (*indexfile.File, error)
}

// TableOptions name a table format's table and how to read its catalog.
type TableOptions struct {
	// Iceberg is the table and its catalog, as spec.streams[].iceberg
	// names them.
	Iceberg datav1alpha1.IcebergTable
	// Lance pins a Lance dataset's version (spec.streams[].lance).
	Lance datav1alpha1.LanceTable
	// Columns, where set, are the only columns a Lance index keeps: its
	// shards fetch no other column's bytes.
	Columns []string
	// Source is the stream's source: the bucket of the table's data
	// files, and where its index goes.
	Source store.Source
	// Token is a REST catalog's bearer token; Credential its OAuth2
	// client credential, "client-id:client-secret"; User and Password a
	// sql catalog's. They come from the indexer's environment, never a
	// manifest.
	Token, Credential, User, Password string
	// Timeout bounds each request to the catalog (0: the format's default).
	Timeout time.Duration
}

// IndexOptions tune indexing.
type IndexOptions struct {
	// Hash is the algorithm of the shards' content hashes (default xxh64).
	Hash string
	// ShardBytes is the size of a shard where the format cuts objects
	// itself, e.g. runs of text records (default 64 MiB).
	ShardBytes int64
	// TempDir holds objects while they are scanned (default: os.TempDir).
	TempDir string
	// Schema, for formats whose objects carry none, is used instead of the
	// inferred one; the records must fit it.
	Schema []indexfile.Field
	// Progress, if set, is called after each object.
	Progress func(done, total int, object string)
	// Warn, if set, is told what the index will work with but a user
	// should know (a pinned version cleanup may delete).
	Warn func(msg string)
	// Note, if set, is told how the objects were indexed where a format
	// has several ways (webdataset: Megatron-Energon's index reused).
	Note func(msg string)
	// Partitions, if set, read the stream as a hive-partitioned tree.
	Partitions *PartitionOptions
	// Table names the table of a table format (TableIndexer); set for
	// no other.
	Table *TableOptions
	// Own are the values of the format's own options (Option), by flag:
	// a megatron stream's "unit", a litdata stream's "block-size", a
	// huggingface stream's "split". Registry.Index refuses another
	// format's.
	Own map[string]string
	// Concurrency bounds the objects read at once (0: a StreamIndexer's
	// default, else DefaultIndexConcurrency).
	Concurrency int
	// Shards, if set, is a brace pattern of the stream's objects under
	// its prefix ("shards-{000000..000999}.tar"), as WebDataset names
	// shard sets: those objects alone are indexed, and each must exist.
	Shards string
	// Checkpoints, if set, keep the progress of a long index of objects
	// indexed one by one, and give it back to a run after an interruption.
	Checkpoints Checkpointer
	// Append, if set, is the stream's index: only the objects it does not
	// list are indexed, their shards after its own, which stay as they are.
	Append *indexfile.File
}

// Checkpointer keeps the index of a stream's first objects (index.Checkpoint).
type Checkpointer interface {
	// Load returns the index of the first n of objects an earlier run
	// kept, or nil and 0.
	Load(ctx context.Context, objects []store.Object) (*indexfile.File, int, error)
	// Save keeps f, the index of the objects done, when it is time to
	// (now: whenever).
	Save(ctx context.Context, f *indexfile.File, done []store.Object, now bool) error
}

// Key identifies the index the options make of a stream of kind: a
// checkpoint of other options is not resumed.
func (o IndexOptions) Key(kind datav1alpha1.ShardFormat) string {
	appendTo := ""
	if o.Append != nil {
		appendTo = o.Append.StreamIndex().ContentHash()
	}
	data, _ := json.Marshal(struct {
		Kind       datav1alpha1.ShardFormat
		Hash       string
		ShardBytes int64
		Schema     []indexfile.Field
		Partitions *PartitionOptions
		Own        map[string]string
		Shards     string
		Append     string
	}{kind, o.Hash, o.ShardBytes, o.Schema, o.Partitions, givenOwn(o.Own), o.Shards, appendTo})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Registry finds formats by kind.
type Registry map[datav1alpha1.ShardFormat]Format

// NewRegistry returns a registry of formats, each under its Kind.
func NewRegistry(formats ...Format) Registry {
	r := Registry{}
	for _, f := range formats {
		r.Register(f)
	}
	return r
}

// Register adds a format under its Kind, replacing one of the same kind.
func (r Registry) Register(f Format) { r[f.Kind()] = f }

// Lookup returns the format of a kind.
func (r Registry) Lookup(kind datav1alpha1.ShardFormat) (Format, error) {
	f, ok := r[kind]
	if !ok {
		return nil, fmt.Errorf("format %q is not supported: use %s", kind, r.names(func(Format) bool { return true }))
	}
	return f, nil
}

// Open returns the reader of a stream's layout, by the format its index
// names.
func (r Registry) Open(l *index.Layout) (Reader, error) {
	f, err := r.Lookup(l.Format)
	if err != nil {
		return nil, err
	}
	reader, err := f.Open(l)
	if err != nil {
		return nil, err
	}
	return withPartitions(reader, l), nil
}

// names lists the kinds of the formats keep takes, sorted, as "a, b or c".
func (r Registry) names(keep func(Format) bool) string {
	var names []string
	for k, f := range r {
		if keep(f) {
			names = append(names, string(k))
		}
	}
	slices.Sort(names)
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Kinds lists the kinds of the registry's formats that keep keeps, sorted:
// what the CLI's help and errors name, from the registry itself.
func (r Registry) Kinds(keep func(Format) bool) []string {
	var out []string
	for k, f := range r {
		if keep(f) {
			out = append(out, string(k))
		}
	}
	slices.Sort(out)
	return out
}

// IndexesObjects says whether shardfeed index writes the index of a
// stream of f's objects.
func IndexesObjects(f Format) bool {
	_, ok := f.(Indexer)
	return ok
}

// IsTable says whether f's streams are tables resolved through a catalog.
func IsTable(f Format) bool {
	_, ok := f.(TableIndexer)
	return ok
}

func isIndexer(f Format) bool {
	_, ok := f.(Indexer)
	_, table := f.(TableIndexer)
	return ok || table
}

// Index indexes the objects of a stream in the format of kind: every
// object whose name has one of the format's suffixes, in key order, each
// shard's bytes hashed; never the stream's own index.json. A table
// format's stream is its table at one snapshot (opts.Table).
func (r Registry) Index(ctx context.Context, st store.Store, kind datav1alpha1.ShardFormat, opts IndexOptions) (*indexfile.File, error) {
	f, ok := r[kind]
	if ok {
		if err := r.CheckOptions(kind, opts.Own, "--format"); err != nil {
			return nil, err
		}
	}
	if tx, isTable := f.(TableIndexer); ok && isTable {
		if opts.Append != nil {
			return nil, fmt.Errorf("--append: a %s stream's index is of one version of its table: index it again", kind)
		}
		if err := opts.defaults(); err != nil {
			return nil, err
		}
		return tx.IndexTable(ctx, st, opts)
	}
	ix, isIx := f.(Indexer)
	if !ok || !isIx {
		return nil, fmt.Errorf("shardfeed index: format %q is not supported: use %s (MDS streams have their own index.json)", kind, r.names(isIndexer))
	}
	if opts.Table != nil {
		return nil, fmt.Errorf("shardfeed index: a table (--table) is for a table format, and %s is not one", kind)
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	out := &indexfile.File{Shardfeed: indexfile.Version, Format: kind}
	files, keep, err := formatFiles(ctx, st, kind, ix, out, opts)
	if err != nil {
		return nil, err
	}
	_, fromList := st.(store.Listed)
	listing := listingOf(objectsOf(files), opts.Shards, fromList)
	done, err := r.indexFiles(ctx, st, kind, ix, files, out, opts, keep)
	if err != nil {
		return nil, err
	}
	listing.Empty = emptyObjects(objectsOf(files), done)
	done.Listing = listing
	return done, nil
}

// indexFiles indexes files, the stream's objects, into out.
func (r Registry) indexFiles(ctx context.Context, st store.Store, kind datav1alpha1.ShardFormat, ix Indexer, files []partitionFile, out *indexfile.File,
	opts IndexOptions, keep func(string) bool) (*indexfile.File, error) {
	if opts.Append != nil {
		var err error
		if files, out, err = appendTo(kind, files, &opts, keep, st.URI()); err != nil || len(files) == 0 {
			return out, err
		}
	}
	if sx, ok := ix.(StreamIndexer); ok && opts.Partitions == nil {
		return indexTogether(ctx, st, sx, objectsOf(files), out, opts)
	}
	if err := indexEach(ctx, st, ix, files, out, opts); err != nil {
		if opts.Append != nil {
			return nil, fmt.Errorf("--append: %w (a new object must fit the stream's index as it is; or index the stream again, without --append)", err)
		}
		return nil, err
	}
	if opts.Append != nil {
		if err := sameHead(out, opts.Append); err != nil {
			return nil, err
		}
	}
	if out.Partitions != nil {
		// A column of the files named as a partition column is refused
		// now, not when a pod reads the stream.
		if err := checkSchema(ctx, r, st, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sourceFiles lists the objects of a stream that its index is made of:
// those keep takes, or the files of the partitions selected, less the
// splits not chosen. out's head records the partitions and the split.
func sourceFiles(ctx context.Context, st store.Store, ix Indexer, keep func(string) bool, out *indexfile.File, opts IndexOptions) ([]partitionFile, error) {
	var files []partitionFile
	if opts.Partitions != nil {
		var err error
		files, out.Partitions, err = walkPartitions(ctx, st, *opts.Partitions, keep)
		return files, err
	}
	objs, err := st.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if !sidefile.Own(o.Key) && keep(o.Key) {
			files = append(files, partitionFile{Object: o})
		}
	}
	sel, ok := ix.(Selector)
	if !ok {
		return files, nil
	}
	kept, err := sel.Select(ctx, st, objs, objectsOf(files), out, opts)
	if err != nil {
		return nil, err
	}
	files = files[:0]
	for _, o := range kept {
		files = append(files, partitionFile{Object: o})
	}
	return files, nil
}

// defaults sets the hash and shard size where the options leave them, and
// checks the hash.
func (o *IndexOptions) defaults() error {
	if o.Hash == "" {
		o.Hash = "xxh64"
	}
	if o.ShardBytes <= 0 {
		o.ShardBytes = 64 << 20
	}
	_, err := checksum.Of(o.Hash, nil)
	return err
}

// indexTogether indexes objects with a StreamIndexer into out; appended,
// into an index of their own, which must read as out's does.
func indexTogether(ctx context.Context, st store.Store, sx StreamIndexer, objs []store.Object, out *indexfile.File, opts IndexOptions) (*indexfile.File, error) {
	if opts.Append == nil {
		return out, sx.IndexObjects(ctx, st, objs, out, opts)
	}
	into := &indexfile.File{Shardfeed: indexfile.Version, Format: out.Format}
	if err := sx.IndexObjects(ctx, st, objs, into, opts); err != nil {
		return nil, err
	}
	if err := sameHead(into, opts.Append); err != nil {
		return nil, err
	}
	out.Shards = append(out.Shards, into.Shards...)
	return out, nil
}

// checkSchema reads the schema of an index's stream from its store.
func checkSchema(ctx context.Context, r Registry, st store.Store, f *indexfile.File) error {
	reader, err := r.Open(&index.Layout{Format: f.Format, Index: f.StreamIndex(), File: f})
	if err != nil {
		return err
	}
	_, err = reader.Schema(ctx, StoreRead(st))
	return err
}

// StoreRead reads parts straight from a store, with no cache: for the
// commands that read a stream once (index, its checks, a filter's
// selection).
func StoreRead(st store.Store) ReadFunc {
	return func(ctx context.Context, p Part) ([]byte, error) {
		if !p.Range { // a whole object
			o, err := st.Stat(ctx, p.Key)
			if err != nil {
				return nil, err
			}
			return ReadRange(ctx, st, p.Key, 0, o.Size)
		}
		return ReadRange(ctx, st, p.Key, p.Offset, p.Size)
	}
}

// HashRange returns the "algo:hex" digest of bytes [off, off+n) of an
// object, read from the store.
func HashRange(ctx context.Context, st store.Store, key string, off, n int64, algo string) (string, error) {
	h := checksum.Sum{Algo: algo}.New()
	if n == 0 { // an empty shard: nothing to read
		return algo + ":" + hex.EncodeToString(h.Sum(nil)), nil
	}
	r, err := st.Get(ctx, key, off, n)
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	got, err := io.Copy(h, r)
	if err != nil {
		return "", err
	}
	if got != n {
		return "", fmt.Errorf("%s: read %d bytes of [%d, %d)", key, got, off, off+n)
	}
	return algo + ":" + hex.EncodeToString(h.Sum(nil)), nil
}

// ReadRange returns bytes [off, off+n) of the object at key: exactly n of
// them, or an error.
func ReadRange(ctx context.Context, st store.Store, key string, off, n int64) ([]byte, error) {
	r, err := st.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("%s: read %d bytes at %d, want %d", key, len(b), off, n)
	}
	return b, nil
}

// RecordsOf hands decoded records, all of one schema, over to a
// RecordReader, which holds the only reference to them.
func RecordsOf(recs []arrow.RecordBatch) (array.RecordReader, error) {
	schema := arrow.NewSchema(nil, nil)
	if len(recs) > 0 {
		schema = recs[0].Schema()
	}
	rr, err := array.NewRecordReader(schema, recs)
	for _, r := range recs {
		r.Release()
	}
	return rr, err
}

// FileOf returns the shardfeed index a layout was read from, for the
// formats whose shards it lists.
func FileOf(l *index.Layout) (*indexfile.File, error) {
	if l.File == nil {
		return nil, fmt.Errorf("a %s stream is read through a shardfeed index (shardfeed index --format %s), not %s", l.Format, l.Format, l.Form())
	}
	return l.File, nil
}

// FileParts are the parts of shard i of a shardfeed index: its range of
// the object, and with footer the object's footer range, without which
// formats such as Parquet and Arrow IPC do not decode a range.
func FileParts(f *indexfile.File, i int, footer bool) []Part {
	e := f.Shard(i)
	parts := []Part{{Key: e.Object, Size: e.Length, Hash: e.Hash, Range: true, Offset: e.Offset}}
	if footer {
		parts = append(parts, Part{Key: e.Object, Size: e.FooterLength, Range: true, Offset: e.FooterOffset, Version: e.Hash})
	}
	return parts
}

// Undeleted returns the slices of rec, whose first row is row start of
// its part, that hold no deleted row (deleted: sorted runs of the part's
// rows), each a new reference.
func Undeleted(rec arrow.RecordBatch, start int64, deleted []indexfile.Run) []arrow.RecordBatch {
	end := start + rec.NumRows()
	var out []arrow.RecordBatch
	from := start
	for _, d := range deleted {
		if d[1] <= from {
			continue
		}
		if d[0] >= end {
			break
		}
		if d[0] > from {
			out = append(out, rec.NewSlice(from-start, d[0]-start))
		}
		from = max(from, d[1])
	}
	if from < end {
		out = append(out, rec.NewSlice(from-start, end-start))
	}
	return out
}

// formatFiles lists the objects of st that are ix's format's (keep says
// which keys are), those of --shards alone where it is given, into out's
// listing; none is an error naming the suffixes looked for.
func formatFiles(ctx context.Context, st store.Store, kind datav1alpha1.ShardFormat, ix Indexer, out *indexfile.File,
	opts IndexOptions) ([]partitionFile, func(string) bool, error) {
	exts := ix.Suffixes()
	keep := func(key string) bool {
		return slices.ContainsFunc(exts, func(ext string) bool { return strings.HasSuffix(key, ext) })
	}
	files, err := sourceFiles(ctx, st, ix, keep, out, opts)
	if err != nil {
		return nil, nil, err
	}
	if opts.Shards != "" {
		if files, err = matchShards(files, opts.Shards, st.URI()); err != nil {
			return nil, nil, err
		}
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("%s holds no %s objects (%s)", st.URI(), kind, strings.Join(exts, ", "))
	}
	return files, keep, nil
}

// EncodeSchema writes a schema as an index holds it (an iceberg, lance or
// lerobot index's arrowSchema): an Arrow IPC schema message, in base64.
func EncodeSchema(s *arrow.Schema) (string, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// DecodeSchema reads a schema EncodeSchema wrote.
func DecodeSchema(b64 string) (*arrow.Schema, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the index's arrowSchema is not base64: %w", err)
	}
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the index's arrowSchema is not an Arrow schema: %w", err)
	}
	defer r.Release()
	return r.Schema(), nil
}
