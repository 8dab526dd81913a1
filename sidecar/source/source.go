// Package source turns a stream's layout into what the pipeline fetches
// and decodes: for each shard, the byte ranges the cache holds (as the
// stream's format says) and the decoding of those bytes into one Arrow
// record with the stream's served schema.
package source

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/promote"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// ReadFunc returns the bytes of a cached object range.
type ReadFunc func(ctx context.Context, part cache.Shard) ([]byte, error)

// Stream reads the shards of one stream.
type Stream struct {
	// Name is the stream's name, also its cache directory.
	Name   string
	Layout *index.Layout
	// version is indexVersion's, computed once.
	versionOnce sync.Once
	version     string
	reader      format.Reader
	// columns projected, in order; nil: all.
	columns []string
	// native is the projected schema the shards decode to; served the one
	// every stream is cast to (after Unify).
	native *arrow.Schema
	served *arrow.Schema
	// filter is the stream's row filter, when it has one: each shard's
	// runs of matching rows are one more part, and only they are served.
	filter *streams.Filter
	// packs is the dataset's packing, when it has one: then each shard's
	// documents are packed as decoded, packed is the schema the stream
	// serves, and docBase[i] the global id of shard i's first document.
	packs   *streams.Packs
	packed  *arrow.Schema
	docBase []int64
	// units, where packs span shards (spec.packing.acrossShards), are
	// each shard's packing unit (sidefile.PacksIndex.Units): shard i's
	// packs are those of shards i to i+units[i]-1, fetched and decoded
	// together; a shard inside another's unit has none.
	units []int
	// tok, when the stream is tokenized, adds its text column's ids to
	// each decoded shard; tokKey is what makes them (planspec.TokenizeKey),
	// and derived, when set, keeps them for the next decode.
	tok     *tokenized
	tokKey  string
	derived DerivedCache
}

// Open reads the stream's schema through its format's reader: from the
// index, or from the objects (the footer of the first Parquet or Arrow
// object) through read.
func Open(ctx context.Context, name string, layout *index.Layout, reader format.Reader, columns []string, read ReadFunc) (*Stream, error) {
	s := &Stream{Name: name, Layout: layout, reader: reader, columns: columns}
	full, err := s.fullSchema(ctx, read)
	if err != nil {
		return nil, fmt.Errorf("stream %q: %w", name, err)
	}
	for _, f := range full.Fields() {
		if strings.HasPrefix(f.Name, ReservedPrefix) {
			return nil, fmt.Errorf("stream %q: column %q uses the prefix %s, which shardfeed reserves for the columns it adds: rename it", name, f.Name, ReservedPrefix)
		}
	}
	if columns == nil {
		s.native = full
	} else {
		fields := make([]arrow.Field, 0, len(columns))
		for _, c := range columns {
			i := full.FieldIndices(c)
			if len(i) == 0 {
				return nil, fmt.Errorf("stream %q has no column %q (spec.streams[].columns): its columns are %s", name, c, ColumnNames(full))
			}
			fields = append(fields, full.Field(i[0]))
		}
		s.native = arrow.NewSchema(fields, nil)
	}
	s.served = s.native
	return s, nil
}

// ReservedPrefix starts the names of the columns shardfeed adds to batches.
const ReservedPrefix = "_shardfeed_"

// ColumnNames lists the schema's column names, in order, for messages.
func ColumnNames(s *arrow.Schema) string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return strings.Join(out, ", ")
}

func sortedNames(s *arrow.Schema) string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func (s *Stream) fullSchema(ctx context.Context, read ReadFunc) (*arrow.Schema, error) {
	return s.reader.Schema(ctx, func(ctx context.Context, p format.Part) ([]byte, error) {
		return read(ctx, s.cachePart(p))
	})
}

func (s *Stream) cachePart(p format.Part) cache.Shard {
	if p.Hash == "" && p.Version != "" {
		// A part with no hash of its own (a footer every row group of its
		// file shares) is keyed in the node's cache by the index, which
		// changes when any of its objects does: one entry per file.
		p.Version = s.indexVersion()
	}
	return cache.Shard{Stream: s.Name, Key: p.Key, Size: p.Size, Hash: p.Hash, Range: p.Range, Offset: p.Offset, Version: p.Version}
}

// indexVersion is the stream index's content hash, as a checksum.
func (s *Stream) indexVersion() string {
	s.versionOnce.Do(func() { s.version = "sha256:" + s.Layout.Index.ContentHash() })
	return s.version
}

// Has says whether the stream's shards hold column name (with
// spec.missingColumns: null, a served column may be another stream's).
func (s *Stream) Has(name string) bool { return len(s.native.FieldIndices(name)) > 0 }

// Schema returns the schema the stream's batches are served with.
func (s *Stream) Schema() *arrow.Schema {
	if s.packed != nil {
		return s.packed
	}
	return s.served
}

// Shards returns the number of shards.
func (s *Stream) Shards() int { return int(s.Layout.Index.Len()) }

// shard is the planner's view of shard i (of a stream read in parts, one
// resolved: Resolve).
func (s *Stream) shard(i int) planner.Shard { return s.Layout.Index.Shard(int64(i)) }

// Lean is the shards of a stream whose index is read in parts, which
// Resolve fetches; nil for one read whole.
func (s *Stream) Lean() *compact.Counts { return s.Layout.Lean }

// Resolve fetches the entries of the shards of a stream read in parts
// (Lean) that it has not yet: before their parts or decoding are asked
// for. Nothing for a stream read whole.
func (s *Stream) Resolve(shards []int64) error {
	c := s.Lean()
	if c == nil {
		return nil
	}
	if s.units != nil { // and the other shards of their units
		var more []int64
		for _, h := range shards {
			for _, j := range s.unit(int(h)) {
				if int64(j) != h {
					more = append(more, int64(j))
				}
			}
		}
		shards = append(slices.Clip(shards), more...)
	}
	if err := c.Resolve(shards); err != nil {
		return fmt.Errorf("stream %q: reading its index's entries: %w", s.Name, err)
	}
	return nil
}

// Rows returns the rows shard i serves: the rows its filter matches, in a
// filtered stream.
func (s *Stream) Rows(i int) int64 {
	if s.packs != nil {
		return s.packs.Index.Shards[i].Packs
	}
	if s.filter != nil {
		return s.filter.Index.Shards[i].Matching
	}
	return s.Layout.Index.ShardSamples(int64(i))
}

// Parts returns the object ranges shard i needs in the cache, as its
// format says (for Parquet and Arrow, the shard and the object's footer,
// without which its bytes do not decode), and in a filtered stream the
// shard's runs of matching rows last.
func (s *Stream) Parts(i int) []cache.Shard {
	if s.units == nil || s.units[i] < 2 {
		return s.shardParts(i)
	}
	var out []cache.Shard // a unit's, of its shards with a document
	for _, j := range s.unit(i) {
		out = append(out, s.shardParts(j)...)
	}
	return out
}

// unit lists the shards whose documents shard i's packs hold: i, and
// where packs span shards those of its unit with a document (a shard of
// none, an empty row group or one its filter matches nothing of, is
// neither fetched nor decoded).
func (s *Stream) unit(i int) []int {
	if s.units == nil || s.units[i] < 2 {
		return []int{i}
	}
	out := make([]int, 0, s.units[i])
	for j := i; j < i+s.units[i]; j++ {
		if s.packs.Index.Shards[j].Docs > 0 {
			out = append(out, j)
		}
	}
	return out
}

// shardParts is Parts of one shard.
func (s *Stream) shardParts(i int) []cache.Shard {
	parts := s.reader.Parts(i)
	out := make([]cache.Shard, len(parts), len(parts)+1)
	for j, p := range parts {
		out[j] = s.cachePart(p)
	}
	if f := s.filter; f != nil {
		sel := f.Index.Shards[i]
		out = append(out, cache.Shard{Stream: cmp.Or(f.StoreName, s.Name), Key: f.RunsKey, Size: sel.Length, Hash: sel.Hash, Range: true, Offset: sel.Offset})
	}
	return out
}

// Decode decodes shard i from the bytes of its parts (as Parts lists them)
// into one record with the served schema.
// Bytes that do not decode, or decode to another row count than the index
// says, are a *DecodeError.
func (s *Stream) Decode(ctx context.Context, i int, parts [][]byte) (arrow.RecordBatch, error) {
	if s.packs == nil {
		return s.decodeRows(ctx, i, parts)
	}
	name := s.shard(i).Name
	var docs []arrow.RecordBatch // the documents of i's unit, shard by shard
	defer func() {
		for _, r := range docs {
			r.Release()
		}
	}()
	for _, j := range s.unit(i) {
		n := len(s.shardParts(j))
		if n > len(parts) {
			return nil, &DecodeError{Stream: s.Name, Shard: name, Err: fmt.Errorf("%d parts for a unit of %d shards", len(parts), len(s.unit(i)))}
		}
		rec, err := s.decodeRows(ctx, j, parts[:n])
		if err != nil {
			return nil, err
		}
		docs = append(docs, rec)
		parts = parts[n:]
	}
	if len(docs) == 0 { // a unit of no document has no pack to serve
		return nil, &DecodeError{Stream: s.Name, Shard: name, Err: errors.New("its packing unit holds no document: re-run shardfeed index --lengths --pack-length")}
	}
	rec, err := concatRecords(docs)
	if err != nil {
		return nil, &DecodeError{Stream: s.Name, Shard: name, Err: err}
	}
	defer rec.Release()
	packed, err := s.packShard(i, rec)
	if err != nil {
		return nil, &DecodeError{Stream: s.Name, Shard: name, Err: err}
	}
	return packed, nil
}

// concatRecords joins records of one schema into one, in order.
func concatRecords(recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	for c := range cols {
		of := make([]arrow.Array, len(recs))
		for k, r := range recs {
			of[k] = r.Column(c)
		}
		var err error
		if cols[c], err = array.Concatenate(of, memory.DefaultAllocator); err != nil {
			return nil, fmt.Errorf("joining a packing unit's shards: %w", err)
		}
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// decodeRows decodes shard i into its served rows: its filter's matching
// rows, with their token ids where the stream is tokenized.
func (s *Stream) decodeRows(ctx context.Context, i int, parts [][]byte) (arrow.RecordBatch, error) {
	name := s.shard(i).Name
	var runs []byte
	if s.filter != nil {
		parts, runs = parts[:len(parts)-1], parts[len(parts)-1]
	}
	served := s.served
	if s.tok != nil {
		served = s.tok.decoded(served)
	}
	rec, err := s.decodeAs(ctx, i, parts, s.columns, served)
	if err != nil {
		return nil, err
	}
	if s.filter != nil {
		kept, err := s.keep(ctx, i, rec, runs)
		rec.Release()
		if err != nil {
			return nil, err
		}
		rec = kept
	}
	if s.tok != nil { // the rows served alone
		tokens, err := s.tokenizeShard(i, rec)
		rec.Release()
		if err != nil {
			return nil, &DecodeError{Stream: s.Name, Shard: name, Err: err}
		}
		rec = tokens
	}
	return rec, nil
}

// keep returns the rows of shard i's record that its filter's runs select.
func (s *Stream) keep(ctx context.Context, i int, rec arrow.RecordBatch, runs []byte) (arrow.RecordBatch, error) {
	name := s.shard(i).Name
	want := s.shard(i).Samples
	matching, err := s.filter.Index.ShardRuns(i, runs, want)
	if err != nil {
		return nil, &DecodeError{Stream: s.Name, Shard: name, Err: fmt.Errorf("its filter's selection: %w: re-run shardfeed index --filter", err)}
	}
	kept, err := keepRuns(ctx, rec, matching)
	if err != nil {
		return nil, s.decodeError(ctx, name, err)
	}
	return kept, nil
}

// keepRuns returns the rows of rec that runs (sorted, disjoint, within
// its rows) cover, in order.
func keepRuns(ctx context.Context, rec arrow.RecordBatch, runs []indexfile.Run) (arrow.RecordBatch, error) {
	if len(runs) == 1 && runs[0] == (indexfile.Run{0, rec.NumRows()}) {
		rec.Retain()
		return rec, nil
	}
	if len(runs) == 1 {
		return rec.NewSlice(runs[0][0], runs[0][1]), nil
	}
	b := array.NewBooleanBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(int(rec.NumRows()))
	var end int64
	for _, r := range runs {
		b.AppendEmptyValues(int(r[0] - end)) // false: not matching
		for range r.Count() {
			b.UnsafeAppend(true)
		}
		end = r[1]
	}
	b.AppendEmptyValues(int(rec.NumRows() - end))
	mask := b.NewBooleanArray()
	defer mask.Release()
	return compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
}

// decodeError wraps a decoding failure, unless the context ended it.
func (s *Stream) decodeError(ctx context.Context, shard string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("stream %q: shard %s: %w", s.Name, shard, err)
	}
	return &DecodeError{Stream: s.Name, Shard: shard, Err: err}
}

// DecodeError is a shard whose bytes (as the cache checked them) do not
// decode to what the index says: corrupt at the source.
type DecodeError struct {
	Stream, Shard string
	Err           error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("stream %q: shard %s: %v", e.Stream, e.Shard, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Zero returns a record of n rows of the served schema with zero values
// (0, false, empty strings and lists of zeros): what a skipped shard
// delivers.
func (s *Stream) Zero(n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s.Schema())
	defer b.Release()
	for _, f := range b.Fields() {
		f.AppendEmptyValues(int(n))
	}
	return b.NewRecordBatch()
}

// Shard is a shard as the pipeline reads it: each column of the served
// schema is an Arrow array, or the stored bytes of its values where the
// stream's format finds them in place (format.RawReader), which cost no
// decoded copy. Raw values are views of the parts it was decoded from.
type Shard struct {
	Rows int64
	// Arrays[c] is column c, nil where RawIndex[c] ≥ 0: then it is
	// column RawIndex[c] of Raw.
	Arrays   []arrow.Array
	Raw      format.RawShard
	RawIndex []int
	rec      arrow.RecordBatch
}

// ShardOf wraps a record of the served schema.
func ShardOf(rec arrow.RecordBatch) *Shard {
	return &Shard{Rows: rec.NumRows(), Arrays: rec.Columns(), RawIndex: notRaw(int(rec.NumCols())), rec: rec}
}

func notRaw(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	return out
}

// Record returns the decoded columns (nil when every column is raw).
func (sh *Shard) Record() arrow.RecordBatch { return sh.rec }

// Release frees the decoded columns.
func (sh *Shard) Release() {
	if sh.rec != nil {
		sh.rec.Release()
		sh.rec = nil
	}
}

// DecodeShard is Decode for the pipeline: the columns the format finds in
// place in the parts stay there (a filtered stream's rows, and a column
// cast to a promoted type, are decoded).
func (s *Stream) DecodeShard(ctx context.Context, i int, parts [][]byte) (*Shard, error) {
	rr, ok := s.reader.(format.RawReader)
	if !ok || s.filter != nil || s.packs != nil || s.tok != nil {
		rec, err := s.Decode(ctx, i, parts)
		if err != nil {
			return nil, err
		}
		return ShardOf(rec), nil
	}
	name := s.shard(i).Name
	var same []string
	for _, f := range s.served.Fields() {
		if k := s.native.FieldIndices(f.Name); len(k) > 0 && arrow.TypeEqual(f.Type, s.native.Field(k[0]).Type) {
			same = append(same, f.Name)
		}
	}
	raw, err := rr.RawShard(i, parts, same)
	if err != nil {
		return nil, s.decodeError(ctx, name, err)
	}
	sh := &Shard{Rows: s.shard(i).Samples, Arrays: make([]arrow.Array, s.served.NumFields()), Raw: raw, RawIndex: notRaw(s.served.NumFields())}
	var rawNames []string
	if raw != nil {
		rawNames = raw.Columns()
	}
	var rest []arrow.Field
	for c, f := range s.served.Fields() {
		if sh.RawIndex[c] = slices.Index(rawNames, f.Name); sh.RawIndex[c] < 0 {
			rest = append(rest, f)
		}
	}
	if len(rest) == 0 {
		return sh, nil
	}
	names := make([]string, 0, len(rest))
	for _, f := range rest {
		if len(s.native.FieldIndices(f.Name)) > 0 { // the others are null (conform)
			names = append(names, f.Name)
		}
	}
	rec, err := s.decodeAs(ctx, i, parts, names, arrow.NewSchema(rest, nil))
	if err != nil {
		return nil, err
	}
	sh.rec = rec
	k := 0
	for c := range sh.Arrays {
		if sh.RawIndex[c] < 0 {
			sh.Arrays[c] = rec.Column(k)
			k++
		}
	}
	return sh, nil
}

// decodeAs decodes columns of shard i (all of a filtered shard's rows) into
// one record of schema, which must hold the index's row count.
func (s *Stream) decodeAs(ctx context.Context, i int, parts [][]byte, columns []string, schema *arrow.Schema) (arrow.RecordBatch, error) {
	name := s.shard(i).Name
	recs, err := s.decodeColumns(ctx, i, parts, columns)
	if err != nil {
		return nil, s.decodeError(ctx, name, err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	rec, err := s.conform(ctx, recs, schema)
	if err != nil {
		return nil, s.decodeError(ctx, name, err)
	}
	if want := s.shard(i).Samples; rec.NumRows() != want {
		rec.Release()
		return nil, &DecodeError{Stream: s.Name, Shard: name, Err: fmt.Errorf("decoded to %d rows, the index says %d: re-run shardfeed index", rec.NumRows(), want)}
	}
	return rec, nil
}

func (s *Stream) decodeColumns(ctx context.Context, i int, parts [][]byte, columns []string) ([]arrow.RecordBatch, error) {
	rr, err := s.reader.Records(ctx, i, parts, columns)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var recs []arrow.RecordBatch
	for rr.Next() {
		rec := rr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rr.Err(); err != nil {
		for _, r := range recs {
			r.Release()
		}
		return nil, err
	}
	return recs, nil
}

// conform joins recs into one record whose columns are schema's (the
// served schema's, or some of them), by name, in order, cast where a
// promotion applies.
func (s *Stream) conform(ctx context.Context, recs []arrow.RecordBatch, schema *arrow.Schema) (arrow.RecordBatch, error) {
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range schema.Fields() {
		chunks := make([]arrow.Array, 0, len(recs))
		lacks := len(s.native.FieldIndices(f.Name)) == 0 // a column of other streams (spec.missingColumns: null)
		for _, r := range recs {
			idx := r.Schema().FieldIndices(f.Name)
			if len(idx) == 0 {
				if lacks {
					continue
				}
				return nil, fmt.Errorf("decoded data has no column %q", f.Name)
			}
			chunks = append(chunks, r.Column(idx[0]))
		}
		var col arrow.Array
		switch {
		case lacks:
			cols = append(cols, array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rows)))
			continue
		case len(chunks) == 0:
			col = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
		case len(chunks) == 1:
			col = chunks[0]
			col.Retain()
		default:
			var err error
			if col, err = array.Concatenate(chunks, memory.DefaultAllocator); err != nil {
				return nil, fmt.Errorf("column %q: %w", f.Name, err)
			}
		}
		cast, err := promote.Cast(ctx, col, f.Type)
		col.Release()
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		cols = append(cols, cast)
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// OpenAll opens the streams of a spec, as opened by internal/streams,
// through their formats' readers and unifies their schemas: what serve
// checks before it plans, and what plan and simulate check too. read
// reads a part of any of them (cache.Shard.Stream says which).
func OpenAll(ctx context.Context, opened []*streams.Stream, registry format.Registry, read ReadFunc, missing datav1alpha1.MissingColumnsPolicy) ([]*Stream, error) {
	if missing != "" && missing != datav1alpha1.MissingColumnsRefuse && missing != datav1alpha1.MissingColumnsNull {
		return nil, fmt.Errorf("spec.missingColumns %q is %q or %q", missing, datav1alpha1.MissingColumnsRefuse, datav1alpha1.MissingColumnsNull)
	}
	out := make([]*Stream, len(opened))
	loaded := map[string]*tokenizer.Tokenizer{}
	for i, s := range opened {
		layout, err := s.Served()
		if err != nil {
			return nil, err
		}
		reader, err := registry.Open(layout)
		if err != nil {
			return nil, fmt.Errorf("stream %q: %w", s.Spec.Name, err)
		}
		if err := setWindows(reader, s.Spec.LeRobot); err != nil {
			return nil, fmt.Errorf("stream %q: spec.streams[].lerobot: %w", s.Spec.Name, err)
		}
		columns := s.Spec.Columns
		if s.Packs != nil {
			columns = []string{s.Packs.Column} // the documents: all a pack holds
			if t := s.Tokenize; t != nil && s.Packs.Column == planspec.TokenizeOutput(t) {
				columns = []string{t.Column} // the text its ids are made of
			}
		}
		if out[i], err = Open(ctx, s.Spec.Name, layout, reader, columns, read); err != nil {
			return nil, err
		}
		out[i].filter = s.Filter
		out[i].packs = s.Packs
		if s.Packs != nil && s.Packs.Packing.AcrossShards {
			out[i].units = s.Packs.Index.Units()
		}
		if t := s.Tokenize; t != nil {
			tk, err := loadTokenizer(ctx, s, t, loaded)
			if err != nil {
				return nil, fmt.Errorf("stream %q: %w", s.Spec.Name, err)
			}
			if err := out[i].tokenizeWith(tk, t); err != nil {
				return nil, err
			}
		}
	}
	if out[0].packs != nil {
		// Packed: each stream's documents may be any list of the one
		// integer type; the packs are what must be one schema.
		if err := packAll(out); err != nil {
			return nil, err
		}
		return out, nil
	}
	if _, err := Unify(out, missing == datav1alpha1.MissingColumnsNull); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckDecoders refuses a stream whose served columns this binary cannot
// decode (format.ColumnChecker: a lerobot stream's cameras, where the
// build has no FFmpeg), before any shard is read. The sidecar calls it;
// plan and simulate do not: the binary that plans a dataset (a laptop's)
// need not be the one that serves it (the image's).
func CheckDecoders(all []*Stream) error {
	for _, s := range all {
		if c, ok := s.reader.(format.ColumnChecker); ok {
			if err := c.CheckColumns(s.columns); err != nil {
				return fmt.Errorf("stream %q: %w", s.Name, err)
			}
		}
	}
	return nil
}

// setWindows sets a lerobot stream's windows and frame size on its
// reader.
func setWindows(reader format.Reader, spec *datav1alpha1.LeRobotStream) error {
	if spec == nil {
		return nil
	}
	if f := spec.Frames; f != nil {
		sized, ok := reader.(format.FrameSizer)
		if !ok {
			return errors.New("frames: the stream's format serves no video frames")
		}
		if err := sized.SetFrameSize(images.SpecOf(*f)); err != nil {
			return err
		}
	}
	if spec.Cameras == datav1alpha1.CamerasClips {
		clips, ok := reader.(format.ClipServer)
		if !ok {
			return errors.New("cameras: the stream's format serves no video")
		}
		if err := clips.ServeClips(); err != nil {
			return err
		}
	}
	if len(spec.DeltaTimestamps) == 0 && spec.Tolerance == "" {
		return nil
	}
	w, ok := reader.(format.Windowed)
	if !ok {
		return errors.New("the stream's format serves no windows")
	}
	deltas := make(map[string][]float64, len(spec.DeltaTimestamps))
	for _, d := range spec.DeltaTimestamps {
		for _, sec := range d.Seconds {
			v, err := strconv.ParseFloat(sec, 64)
			if err != nil {
				return fmt.Errorf("deltaTimestamps %q: %q is not a number of seconds", d.Key, sec)
			}
			deltas[d.Key] = append(deltas[d.Key], v)
		}
	}
	var tolerance float64
	if spec.Tolerance != "" {
		v, err := strconv.ParseFloat(spec.Tolerance, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("tolerance %q is not a number of seconds", spec.Tolerance)
		}
		tolerance = v
	}
	return w.SetWindows(deltas, tolerance)
}

// Unify sets every stream's served schema to the one they share: the same
// columns, each of one type after the documented promotions. With union
// (spec.missingColumns: null), a column some streams lack is served too,
// nullable, null in their rows. It fails with every difference listed.
func Unify(streams []*Stream, union bool) (*arrow.Schema, error) {
	base := streams[0].native
	fields := slices.Clone(base.Fields())
	var diffs []string
	for _, s := range streams[1:] {
		if got, want := sortedNames(s.native), sortedNames(base); got != want && !union {
			diffs = append(diffs, fmt.Sprintf("stream %q has columns [%s], stream %q has [%s]", s.Name, got, streams[0].Name, want))
			continue
		}
		for _, f := range s.native.Fields() {
			i := slices.IndexFunc(fields, func(g arrow.Field) bool { return g.Name == f.Name })
			if i < 0 { // only with union: a column the streams before lack
				f.Nullable, f.Metadata = true, arrow.Metadata{}
				fields = append(fields, f)
				continue
			}
			t, ok := promote.Types(fields[i].Type, f.Type)
			if !ok {
				diffs = append(diffs, fmt.Sprintf("column %q is %s in stream %q and %s in stream %q", f.Name, fields[i].Type, streams[0].Name, f.Type, s.Name))
				continue
			}
			fields[i].Type = t
			fields[i].Nullable = fields[i].Nullable || f.Nullable
			fields[i].Metadata = arrow.Metadata{}
		}
	}
	if union {
		for i := range fields { // a column some stream lacks is null there
			for _, s := range streams {
				if len(s.native.FieldIndices(fields[i].Name)) == 0 {
					fields[i].Nullable = true
				}
			}
		}
	}
	if len(diffs) > 0 {
		return nil, fmt.Errorf("the streams cannot be served as one schema (docs/formats.md, promotions):\n  %s\npick a common set with spec.streams[].columns, serve every stream's columns with spec.missingColumns: null, or rewrite a stream with shardfeed convert",
			strings.Join(diffs, "\n  "))
	}
	served := arrow.NewSchema(fields, nil)
	if len(streams) == 1 {
		served = base
	}
	for _, s := range streams {
		s.served = served
	}
	return served, nil
}
