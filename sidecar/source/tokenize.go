package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// tokenized is a stream's tokenization: its text column's ids served in
// the output column, added to the schema its shards decode to.
type tokenized struct {
	tk      *tokenizer.Tokenizer
	text    string
	output  string
	special bool
	eod     int32 // -1: none
}

// loadTokenizer is LoadTokenizer for stream s, each file loaded once (by
// its hash) in loaded.
func loadTokenizer(ctx context.Context, s *streams.Stream, t *datav1alpha1.Tokenize, loaded map[string]*tokenizer.Tokenizer) (*tokenizer.Tokenizer, error) {
	if tk, ok := loaded[t.Tokenizer.SHA256]; ok {
		return tk, nil
	}
	tk, err := LoadTokenizer(ctx, s.Spec, s.Source, t)
	if err != nil {
		return nil, err
	}
	loaded[t.Tokenizer.SHA256] = tk
	return tk, nil
}

// LoadTokenizer reads a tokenization's tokenizer.json from the store of
// stream s (reached as src: its settings and credentials), at most
// tokenizer.MaxFileBytes, refuses a content of another sha256 than the
// pinned one, and loads it.
func LoadTokenizer(ctx context.Context, s datav1alpha1.Stream, src store.Source, t *datav1alpha1.Tokenize) (*tokenizer.Tokenizer, error) {
	tsrc, key, err := streams.TokenizerFile(s, src, t.Tokenizer.URI)
	if err != nil {
		return nil, err
	}
	st, err := stores.Open(ctx, tsrc)
	if err != nil {
		return nil, fmt.Errorf("tokenize.tokenizer.uri: %w", err)
	}
	r, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("tokenize.tokenizer.uri %s: %w", t.Tokenizer.URI, err)
	}
	data, err := io.ReadAll(io.LimitReader(r, tokenizer.MaxFileBytes+1))
	_ = r.Close()
	if err != nil {
		return nil, fmt.Errorf("tokenize.tokenizer.uri %s: %w", t.Tokenizer.URI, err)
	}
	if len(data) > tokenizer.MaxFileBytes {
		return nil, fmt.Errorf("tokenize.tokenizer.uri %s is larger than %d bytes", t.Tokenizer.URI, tokenizer.MaxFileBytes)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != t.Tokenizer.SHA256 {
		return nil, fmt.Errorf("tokenize.tokenizer.uri %s has the sha256 %s, and tokenize.tokenizer.sha256 pins %s: the file changed; "+
			"a new tokenizer is a new plan: set its sha256 (sha256sum tokenizer.json)", t.Tokenizer.URI, got, t.Tokenizer.SHA256)
	}
	tk, err := tokenizer.Load(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize.tokenizer.uri %s: %w", t.Tokenizer.URI, err)
	}
	return tk, nil
}

// newTokenized is tokenization t with tokenizer tk: the end-of-document
// token must be one of its tokens.
func newTokenized(tk *tokenizer.Tokenizer, t *datav1alpha1.Tokenize) (*tokenized, error) {
	z := &tokenized{tk: tk, text: t.Column, output: planspec.TokenizeOutput(t), special: ptr.Deref(t.AddSpecialTokens, true), eod: -1}
	if t.EndOfDocument != "" {
		id, ok := tk.TokenID(t.EndOfDocument)
		if !ok {
			return nil, fmt.Errorf("tokenize.endOfDocument %q is not a token of the tokenizer", t.EndOfDocument)
		}
		z.eod = id
	}
	return z, nil
}

// ids are a document's ids: its text's, then the end-of-document token.
func (z *tokenized) ids(text string) []int32 {
	ids := z.tk.Encode(text, z.special)
	if z.eod >= 0 {
		ids = append(ids, z.eod)
	}
	return ids
}

// TokenCount counts a text's ids as a stream tokenized by t serves them
// (index counts by it what the sidecar will make).
func TokenCount(tk *tokenizer.Tokenizer, t *datav1alpha1.Tokenize) (format.TokenCount, error) {
	z, err := newTokenized(tk, t)
	if err != nil {
		return nil, err
	}
	return func(text string) int { return len(z.ids(text)) }, nil
}

// tokenizeWith makes the stream serve its text column's ids: the text
// column must be a string column it decodes, the output a new name.
func (s *Stream) tokenizeWith(tk *tokenizer.Tokenizer, t *datav1alpha1.Tokenize) error {
	out := planspec.TokenizeOutput(t)
	k := s.native.FieldIndices(t.Column)
	switch {
	case len(k) == 0:
		return fmt.Errorf("stream %q: tokenize.column %q is not one of its columns (%s); keep it in spec.streams[].columns", s.Name, t.Column, ColumnNames(s.native))
	case !slices.Contains([]arrow.Type{arrow.STRING, arrow.LARGE_STRING}, s.native.Field(k[0]).Type.ID()):
		return fmt.Errorf("stream %q: tokenize.column %q is %s, and text is tokenized from a string column", s.Name, t.Column, s.native.Field(k[0]).Type)
	case len(s.native.FieldIndices(out)) > 0:
		return fmt.Errorf("stream %q: tokenize.output %q is a column the stream has: name another", s.Name, out)
	}
	z, err := newTokenized(tk, t)
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.Name, err)
	}
	s.tok = z
	s.native = arrow.NewSchema(append(slices.Clone(s.native.Fields()), arrow.Field{Name: out, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}), nil)
	s.served = s.native
	return nil
}

// decoded is the schema shard records decode to before tokenization: the
// served one without the output column.
func (z *tokenized) decoded(served *arrow.Schema) *arrow.Schema {
	fields := slices.DeleteFunc(slices.Clone(served.Fields()), func(f arrow.Field) bool { return f.Name == z.output })
	return arrow.NewSchema(fields, nil)
}

// add returns rec (of decoded's schema) with the output column, in the
// served schema's order: each row's text encoded (a null text, null ids).
func (z *tokenized) add(rec arrow.RecordBatch, served *arrow.Schema) (arrow.RecordBatch, error) {
	text := rec.Column(rec.Schema().FieldIndices(z.text)[0])
	b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Int32Builder)
	for r := range text.Len() {
		if text.IsNull(r) {
			b.AppendNull()
			continue
		}
		var s string
		switch a := text.(type) {
		case *array.String:
			s = a.Value(r)
		case *array.LargeString:
			s = a.Value(r)
		default:
			return nil, fmt.Errorf("tokenize.column %q is %s", z.text, text.DataType())
		}
		b.Append(true)
		vb.AppendValues(z.ids(s), nil)
	}
	tokens := b.NewArray()
	defer tokens.Release()
	cols := make([]arrow.Array, served.NumFields())
	for c, f := range served.Fields() {
		if f.Name == z.output {
			cols[c] = tokens
			continue
		}
		cols[c] = rec.Column(rec.Schema().FieldIndices(f.Name)[0])
	}
	return array.NewRecordBatch(served, cols, rec.NumRows()), nil
}
