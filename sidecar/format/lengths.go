package format

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/images"
)

// ShardRange is the shards From to To (excluded) of a stream's index: the
// range one pod measures where a stream's selection and lengths are
// measured in parts.
type ShardRange struct{ From, To int }

// AllShards is every shard of l's index.
func AllShards(l *index.Layout) ShardRange { return ShardRange{0, len(l.Index.Shards)} }

func (r ShardRange) len() int { return r.To - r.From }

func (r ShardRange) check(l *index.Layout) error {
	if r.From < 0 || r.To < r.From || r.To > len(l.Index.Shards) {
		return fmt.Errorf("shards %d to %d: the index has %d", r.From, r.To, len(l.Index.Shards))
	}
	return nil
}

// Selection is a row filter's selection with its runs object: the rows
// whose lengths are measured, where a stream is filtered.
type Selection struct {
	Index *sidefile.FilterIndex
	Runs  []byte
}

// MeasureOf says how a column of type t is measured: a list's elements,
// an image's height and width; an error for any other type, saying what
// would be measured.
func MeasureOf(name string, t arrow.DataType) (sidefile.Measure, error) {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW:
		return sidefile.Elements, nil
	case arrow.BINARY, arrow.LARGE_BINARY:
		return sidefile.ImageSize, nil
	case arrow.STRING, arrow.LARGE_STRING:
		return "", fmt.Errorf("column %q is text: its length in tokens needs a tokenizer, which this build does not run; measure a list column of token ids", name)
	}
	return "", fmt.Errorf("column %q is %s: lengths are measured in a list column (its elements, as tokens) or a binary column of JPEG or PNG images (height and width)", name, t)
}

// Lengths measures each sample's length in column over a stream of layout
// l whose shards are in st: a list column's elements, or the height and
// width in a binary column's image headers. Where sel is given (a
// filtered stream), only its matching rows are measured, so that a
// shard's lengths are those of its samples. It returns the lengths' index
// and object, written beside the stream's index.
func (r Registry) Lengths(ctx context.Context, st store.Store, l *index.Layout, column string, sel *Selection, progress func(done, total int, shard string)) (*sidefile.LengthsIndex, []byte, error) {
	return r.LengthsShards(ctx, st, l, column, sel, AllShards(l), progress)
}

// LengthsShards is Lengths over the shards of range in alone, sel the
// selection of those shards (SelectShards'): one part of lengths measured
// in parts, which sidefile.JoinLengths joins.
func (r Registry) LengthsShards(ctx context.Context, st store.Store, l *index.Layout, column string, sel *Selection, in ShardRange,
	progress func(done, total int, shard string)) (*sidefile.LengthsIndex, []byte, error) {
	if err := in.check(l); err != nil {
		return nil, nil, err
	}
	reader, read, schema, err := r.openScan(ctx, st, l)
	if err != nil {
		return nil, nil, err
	}
	idx := schema.FieldIndices(column)
	if len(idx) == 0 {
		return nil, nil, fmt.Errorf("the stream has no column %q; its columns are %s", column, columnNames(schema))
	}
	m, err := MeasureOf(column, schema.Field(idx[0]).Type)
	if err != nil {
		return nil, nil, err
	}
	out := &sidefile.LengthsIndex{Shardfeed: indexfile.Version, Column: column, Measure: m, Index: l.Index.ContentHash()}
	if sel != nil {
		out.Filter = sel.Index.Filter
	}
	return measureAll(ctx, reader, read, l, out, column, m, nil, sel, in, progress)
}

// TokenCount counts the tokens of row j of a text (or conversation)
// column as the sidecar tokenizes it (spec.tokenize): its ids, with the
// special and end-of-document tokens.
type TokenCount func(col arrow.Array, j int) (int, error)

// TokenLengths measures each sample's length in tokens: its text column's
// tokens as count counts them, recorded as the lengths of output (the
// column of ids the sidecar serves) made by the tokenization key. The rest
// is Lengths'.
func (r Registry) TokenLengths(ctx context.Context, st store.Store, l *index.Layout, text, output, key string, count TokenCount, sel *Selection,
	progress func(done, total int, shard string)) (*sidefile.LengthsIndex, []byte, error) {
	return r.TokenLengthsShards(ctx, st, l, text, output, key, count, sel, AllShards(l), progress)
}

// TokenLengthsShards is TokenLengths over the shards of range in alone,
// as LengthsShards.
func (r Registry) TokenLengthsShards(ctx context.Context, st store.Store, l *index.Layout, text, output, key string, count TokenCount, sel *Selection, in ShardRange,
	progress func(done, total int, shard string)) (*sidefile.LengthsIndex, []byte, error) {
	if err := in.check(l); err != nil {
		return nil, nil, err
	}
	reader, read, schema, err := r.openScan(ctx, st, l)
	if err != nil {
		return nil, nil, err
	}
	idx := schema.FieldIndices(text)
	if len(idx) == 0 {
		return nil, nil, fmt.Errorf("the stream has no column %q (tokenize.column); its columns are %s", text, columnNames(schema))
	}
	out := &sidefile.LengthsIndex{Shardfeed: indexfile.Version, Column: output, Measure: sidefile.Elements, Index: l.Index.ContentHash(), Tokenize: key}
	if sel != nil {
		out.Filter = sel.Index.Filter
	}
	return measureAll(ctx, reader, read, l, out, text, sidefile.Elements, count, sel, in, progress)
}

// measureAll measures the samples of every shard in range in into out and
// its object; sel, where given, is the selection of those shards.
func measureAll(ctx context.Context, reader Reader, read ReadFunc, l *index.Layout, out *sidefile.LengthsIndex, column string, m sidefile.Measure, count TokenCount,
	sel *Selection, in ShardRange, progress func(done, total int, shard string)) (*sidefile.LengthsIndex, []byte, error) {
	if sel != nil && len(sel.Index.Shards) != in.len() {
		return nil, nil, fmt.Errorf("the selection has %d shards, the range measured %d", len(sel.Index.Shards), in.len())
	}
	var object []byte
	for i := in.From; i < in.To; i++ {
		sh := l.Index.Shards[i]
		lengths, err := shardLengths(ctx, reader, read, i, i-in.From, sh.Samples, column, m, count, sel)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sh.Name, err)
		}
		object = out.AppendShard(object, lengths)
		if progress != nil {
			progress(i+1-in.From, in.len(), sh.Name)
		}
	}
	return out, object, nil
}

// shardLengths measures shard i's samples: its rows, or those of its
// selection's runs (the selection's shard si).
func shardLengths(ctx context.Context, reader Reader, read ReadFunc, i, si int, rows int64, column string, m sidefile.Measure, count TokenCount, sel *Selection) ([]sidefile.Length, error) {
	if rows == 0 {
		return nil, nil // no sample to measure (an empty row group): nothing read
	}
	var runs []indexfile.Run
	if sel != nil {
		s := sel.Index.Shards[si]
		if s.Matching == 0 {
			return nil, nil // nothing to measure, nothing to read
		}
		var err error
		if runs, err = sel.Index.ShardRuns(si, sel.Runs[s.Offset:s.Offset+s.Length], rows); err != nil {
			return nil, err
		}
	}
	keep := func(at int64) bool {
		for len(runs) > 0 && runs[0][1] <= at {
			runs = runs[1:]
		}
		return sel == nil || (len(runs) > 0 && at >= runs[0][0])
	}
	if ms, ok := reader.(Measurer); ok && m == sidefile.Elements && count == nil {
		if which := ms.MeasuredParts(i, column); which != nil {
			return measuredLengths(ctx, ms, reader.Parts(i), read, i, rows, column, which, keep)
		}
	}
	var parts [][]byte
	for _, p := range reader.Parts(i) {
		b, err := read(ctx, p)
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
	}
	rr, err := reader.Records(ctx, i, parts, []string{column})
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []sidefile.Length
	var row int64
	for rr.Next() {
		rec := rr.RecordBatch()
		col := rec.Column(0)
		for j := range int(rec.NumRows()) {
			at := row + int64(j)
			if !keep(at) {
				continue // not a sample of the filtered stream
			}
			l, err := lengthOf(col, j, m, count)
			if err != nil {
				return nil, fmt.Errorf("row %d, column %q: %w", at, column, err)
			}
			out = append(out, l)
		}
		row += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	if row != rows {
		return nil, fmt.Errorf("%d rows read, the index says %d: re-run shardfeed index", row, rows)
	}
	return out, nil
}

// measuredLengths measures shard i's samples from the parts a Measurer
// names alone: the others are not read.
func measuredLengths(ctx context.Context, ms Measurer, all []Part, read ReadFunc, i int, rows int64, column string, which []int, keep func(int64) bool) ([]sidefile.Length, error) {
	parts := make([][]byte, len(all))
	for _, k := range which {
		b, err := read(ctx, all[k])
		if err != nil {
			return nil, err
		}
		parts[k] = b
	}
	lengths, err := ms.Lengths(i, column, parts)
	if err != nil {
		return nil, err
	}
	if int64(len(lengths)) != rows {
		return nil, fmt.Errorf("%d rows measured, the index says %d: re-run shardfeed index", len(lengths), rows)
	}
	var out []sidefile.Length
	for at, n := range lengths {
		if !keep(int64(at)) {
			continue
		}
		if n < 0 || n > sidefile.MaxLength {
			return nil, fmt.Errorf("row %d, column %q: %d elements, past the bound of %d", at, column, n, sidefile.MaxLength)
		}
		out = append(out, sidefile.Length{uint32(n)}) //nolint:gosec // bounded above
	}
	return out, nil
}

// lengthOf measures row j of col: with count, a text's tokens.
func lengthOf(col arrow.Array, j int, m sidefile.Measure, count TokenCount) (sidefile.Length, error) {
	if count != nil {
		if col.IsNull(j) {
			return sidefile.Length{}, nil // a null text has no ids
		}
		n, err := count(col, j)
		if err != nil {
			return sidefile.Length{}, err
		}
		if n > sidefile.MaxLength {
			return sidefile.Length{}, fmt.Errorf("%d tokens, past the bound of %d", n, sidefile.MaxLength)
		}
		return sidefile.Length{uint32(n)}, nil //nolint:gosec // bounded above
	}
	if m == sidefile.ImageSize {
		if col.IsNull(j) {
			return sidefile.Length{}, errors.New("no image (a null): filter such rows out (spec.streams[].filter), or write an image")
		}
		var b []byte
		switch c := col.(type) {
		case *array.Binary:
			b = c.Value(j)
		case *array.LargeBinary:
			b = c.Value(j)
		}
		h, w, err := images.Size(b)
		if err != nil {
			return sidefile.Length{}, err
		}
		if h > sidefile.MaxSide || w > sidefile.MaxSide {
			return sidefile.Length{}, fmt.Errorf("the image is %d×%d pixels, a side above %d", h, w, sidefile.MaxSide)
		}
		return sidefile.Length{uint32(h), uint32(w)}, nil //nolint:gosec // bounded above
	}
	if col.IsNull(j) {
		return sidefile.Length{}, nil // no elements
	}
	list, ok := col.(array.ListLike)
	if !ok {
		return sidefile.Length{}, fmt.Errorf("a %s column has no elements to count", col.DataType())
	}
	start, end := list.ValueOffsets(j)
	n := end - start
	if n < 0 || n > sidefile.MaxLength {
		return sidefile.Length{}, fmt.Errorf("%d elements, past the bound of %d", n, sidefile.MaxLength)
	}
	return sidefile.Length{uint32(n)}, nil
}

// columnNames lists a schema's columns for a message.
func columnNames(s *arrow.Schema) string {
	out := ""
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += f.Name
	}
	return out
}
