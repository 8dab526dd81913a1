package source

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/sidecar/chat"
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
	// chat, when the column is a conversation: its template, the
	// template's variables, and the loss mask's column.
	chat *chat.Template
	vars map[string]any
	mask string
	// start and end: the markers of the assistant's text, for a template
	// without {% generation %}.
	start, end string
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
	tsrc, key, err := streams.TokenizerFile(s, src, t.Tokenizer)
	if err != nil {
		return nil, err
	}
	where := "tokenize.tokenizer.uri " + t.Tokenizer.URI
	if ref := t.Tokenizer.ConfigMapRef; ref != nil {
		where = fmt.Sprintf("tokenize.tokenizer.configMapRef %s/%s", ref.Name, ref.Key)
	}
	st, err := stores.Open(ctx, tsrc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	r, err := st.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	defer func() { _ = r.Close() }()
	var in io.Reader = r
	if strings.HasSuffix(key, ".gz") { // a ConfigMap's binaryData holds a large one gzipped
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: not gzip (a key ending in .gz is gunzipped): %w", where, err)
		}
		in = z
	}
	data, err := io.ReadAll(io.LimitReader(in, tokenizer.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(data) > tokenizer.MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", where, tokenizer.MaxFileBytes)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != t.Tokenizer.SHA256 {
		return nil, fmt.Errorf("%s has the sha256 %s, and tokenize.tokenizer.sha256 pins %s: the file changed; "+
			"a new tokenizer is a new plan: set its sha256 (sha256sum tokenizer.json, of the file gunzipped)", where, got, t.Tokenizer.SHA256)
	}
	tk, err := tokenizer.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
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
	if c := t.Chat; c != nil {
		tpl, err := chat.Parse(c.Template)
		if err != nil {
			return nil, fmt.Errorf("tokenize.chat.template: %w", err)
		}
		switch {
		case tpl.MarksAssistant() && c.AssistantStart != "":
			return nil, errors.New("tokenize.chat: the template marks what the assistant says with {% generation %}, and assistantStart marks it too: give one")
		case !tpl.MarksAssistant() && c.AssistantStart == "":
			return nil, errors.New("tokenize.chat.template has no {% generation %} block, and no tokenize.chat.assistantStart is given: wrap what the assistant says " +
				"({{ message['content'] }} and its end token) in {% generation %} … {% endgeneration %}, as transformers' return_assistant_tokens_mask needs, " +
				"or keep the model's template as it is and give the assistant's header and end of turn (assistantStart, assistantEnd)")
		}
		z.chat, z.mask, z.special = tpl, planspec.ChatLossMask(c), false
		z.start, z.end = c.AssistantStart, c.AssistantEnd
		z.vars = map[string]any{"bos_token": c.BOSToken, "eos_token": c.EOSToken}
	}
	return z, nil
}

// conversation is a chat document's ids and loss mask: its messages
// rendered, tokenized, then the end-of-document token (masked out).
func (z *tokenized) conversation(messages []any) ([]int32, []uint8, error) {
	text, spans, err := z.chat.Render(messages, z.vars)
	if err != nil {
		return nil, nil, err
	}
	if z.start != "" {
		spans = chat.MarkerSpans(text, z.start, z.end)
	}
	ids, mask, err := chat.Tokenize(z.tk, text, spans)
	if err != nil {
		return nil, nil, err
	}
	if z.eod >= 0 {
		ids, mask = append(ids, z.eod), append(mask, 0)
	}
	return ids, mask, nil
}

// ids are a document's ids: its text's, then the end-of-document token.
func (z *tokenized) ids(text string) []int32 {
	ids := z.tk.Encode(text, z.special)
	if z.eod >= 0 {
		ids = append(ids, z.eod)
	}
	return ids
}

// TokenCount counts a row's ids as a stream tokenized by t serves them
// (index counts by it what the sidecar will make): a string column's text,
// or a chat's conversation.
func TokenCount(tk *tokenizer.Tokenizer, t *datav1alpha1.Tokenize) (format.TokenCount, error) {
	z, err := newTokenized(tk, t)
	if err != nil {
		return nil, err
	}
	return func(col arrow.Array, j int) (int, error) {
		if z.chat != nil {
			msgs, err := messagesAt(col, j)
			if err != nil {
				return 0, err
			}
			ids, _, err := z.conversation(msgs)
			return len(ids), err
		}
		switch c := col.(type) {
		case *array.String:
			return len(z.ids(c.Value(j))), nil
		case *array.LargeString:
			return len(z.ids(c.Value(j))), nil
		}
		return 0, fmt.Errorf("tokenize.column is %s, and text is tokenized from a string column", col.DataType())
	}, nil
}

// tokenizeWith makes the stream serve its text column's ids: the text
// column must be a string column it decodes, the output a new name.
func (s *Stream) tokenizeWith(tk *tokenizer.Tokenizer, t *datav1alpha1.Tokenize) error {
	out := planspec.TokenizeOutput(t)
	k := s.native.FieldIndices(t.Column)
	switch {
	case len(k) == 0:
		return fmt.Errorf("stream %q: tokenize.column %q is not one of its columns (%s); keep it in spec.streams[].columns", s.Name, t.Column, ColumnNames(s.native))
	case t.Chat == nil && !isString(s.native.Field(k[0]).Type):
		return fmt.Errorf("stream %q: tokenize.column %q is %s, and text is tokenized from a string column", s.Name, t.Column, s.native.Field(k[0]).Type)
	case t.Chat != nil && !isString(s.native.Field(k[0]).Type) && !isConversation(s.native.Field(k[0]).Type):
		return fmt.Errorf("stream %q: tokenize.column %q is %s; a chat is a list of {role, content} structs, or a string of their JSON", s.Name, t.Column, s.native.Field(k[0]).Type)
	case len(s.native.FieldIndices(out)) > 0:
		return fmt.Errorf("stream %q: tokenize.output %q is a column the stream has: name another", s.Name, out)
	case t.Chat != nil && (len(s.native.FieldIndices(planspec.ChatLossMask(t.Chat))) > 0 || planspec.ChatLossMask(t.Chat) == out):
		return fmt.Errorf("stream %q: tokenize.chat.lossMask %q is a column the stream has, or the output's: name another", s.Name, planspec.ChatLossMask(t.Chat))
	}
	z, err := newTokenized(tk, t)
	if err != nil {
		return fmt.Errorf("stream %q: %w", s.Name, err)
	}
	s.tok, s.tokKey = z, planspec.TokenizeKey(t)
	fields := append(slices.Clone(s.native.Fields()), arrow.Field{Name: out, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true})
	if z.chat != nil {
		fields = append(fields, arrow.Field{Name: z.mask, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint8), Nullable: true})
	}
	s.native = arrow.NewSchema(fields, nil)
	s.served = s.native
	return nil
}

func isString(t arrow.DataType) bool {
	return slices.Contains([]arrow.Type{arrow.STRING, arrow.LARGE_STRING}, t.ID())
}

// isConversation says whether t is a list of structs (messages).
func isConversation(t arrow.DataType) bool {
	l, ok := t.(arrow.ListLikeType)
	return ok && l.Elem().ID() == arrow.STRUCT
}

// decoded is the schema shard records decode to before tokenization: the
// served one without the output column.
func (z *tokenized) decoded(served *arrow.Schema) *arrow.Schema {
	fields := slices.DeleteFunc(slices.Clone(served.Fields()), func(f arrow.Field) bool {
		return f.Name == z.output || (z.chat != nil && f.Name == z.mask)
	})
	return arrow.NewSchema(fields, nil)
}

// DerivedCache keeps what the sidecar made of a shard (the pod's shard
// cache: sidecar/cache), under its budget.
type DerivedCache interface {
	LoadDerived(stream, key string) ([]byte, bool)
	StoreDerived(stream, key string, data []byte) bool
}

// SetDerivedCache makes a tokenized stream keep each shard's token
// columns in c, keyed by the shard's content hash, the tokenization (the
// tokenizer's and the template's hashes, the options) and the row
// filter: a later epoch, a restarted sidecar or another pod reading the
// same cache tokenizes each shard once.
func (s *Stream) SetDerivedCache(c DerivedCache) { s.derived = c }

// tokenKeyOf is the cache key of shard i's tokens, "" when the shard has
// no content hash to key them by.
func (s *Stream) tokenKeyOf(i int) string {
	sh := s.shard(i)
	if sh.Hash == "" {
		return ""
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "tokens v1\n%s\n%s\n%s\n%s\n%d\n", s.tokKey, s.Layout.Index.Filter, sh.Name, sh.Hash, sh.Samples)
	return hex.EncodeToString(h.Sum(nil))
}

// tokenizeShard adds shard i's token columns to rec: from the cache when
// it has them for rec's rows, else made and kept there.
func (s *Stream) tokenizeShard(i int, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	key := ""
	if s.derived != nil {
		key = s.tokenKeyOf(i)
	}
	if key != "" {
		if data, ok := s.derived.LoadDerived(s.Name, key); ok {
			if cols, err := s.tok.readColumns(data, rec.NumRows()); err == nil {
				defer releaseAll(cols)
				return s.tok.with(rec, cols, s.served), nil
			}
		}
	}
	cols, err := s.tok.columns(rec)
	if err != nil {
		return nil, err
	}
	defer releaseAll(cols)
	if key != "" {
		if data, err := s.tok.writeColumns(cols); err == nil {
			s.derived.StoreDerived(s.Name, key, data)
		}
	}
	return s.tok.with(rec, cols, s.served), nil
}

func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		c.Release()
	}
}

// tokenSchema is the schema of the token columns: the ids, and a chat's
// mask.
func (z *tokenized) tokenSchema() *arrow.Schema {
	fields := []arrow.Field{{Name: z.output, Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true}}
	if z.chat != nil {
		fields = append(fields, arrow.Field{Name: z.mask, Type: arrow.ListOf(arrow.PrimitiveTypes.Uint8), Nullable: true})
	}
	return arrow.NewSchema(fields, nil)
}

// writeColumns writes the token columns as an Arrow IPC stream.
func (z *tokenized) writeColumns(cols []arrow.Array) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(z.tokenSchema()))
	rec := array.NewRecordBatch(z.tokenSchema(), cols, int64(cols[0].Len()))
	defer rec.Release()
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readColumns reads writeColumns' bytes: the token columns of rows rows.
func (z *tokenized) readColumns(data []byte, rows int64) ([]arrow.Array, error) {
	r, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Schema().Equal(z.tokenSchema()) || !r.Next() {
		return nil, errors.New("not this tokenization's columns")
	}
	rec := r.RecordBatch()
	if rec.NumRows() != rows {
		return nil, fmt.Errorf("%d rows, the shard has %d", rec.NumRows(), rows)
	}
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		cols[c] = rec.Column(c)
		cols[c].Retain()
	}
	return cols, nil
}

// with returns rec (of decoded's schema) with the token columns, in the
// served schema's order.
func (z *tokenized) with(rec arrow.RecordBatch, cols []arrow.Array, served *arrow.Schema) arrow.RecordBatch {
	out := make([]arrow.Array, served.NumFields())
	for c, f := range served.Fields() {
		switch {
		case f.Name == z.output:
			out[c] = cols[0]
		case z.chat != nil && f.Name == z.mask:
			out[c] = cols[1]
		default:
			out[c] = rec.Column(rec.Schema().FieldIndices(f.Name)[0])
		}
	}
	return array.NewRecordBatch(served, out, rec.NumRows())
}

// columns makes rec's token columns: each row's text encoded, or its
// conversation rendered and encoded (a null, null ids).
func (z *tokenized) columns(rec arrow.RecordBatch) ([]arrow.Array, error) {
	text := rec.Column(rec.Schema().FieldIndices(z.text)[0])
	b := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	defer b.Release()
	vb := b.ValueBuilder().(*array.Int32Builder)
	mb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Uint8)
	defer mb.Release()
	mvb := mb.ValueBuilder().(*array.Uint8Builder)
	for r := range text.Len() {
		if text.IsNull(r) {
			b.AppendNull()
			mb.AppendNull()
			continue
		}
		if z.chat != nil {
			msgs, err := messagesAt(text, r)
			if err == nil {
				var ids []int32
				var mask []uint8
				if ids, mask, err = z.conversation(msgs); err == nil {
					b.Append(true)
					vb.AppendValues(ids, nil)
					mb.Append(true)
					mvb.AppendValues(mask, nil)
					continue
				}
			}
			return nil, fmt.Errorf("row %d of tokenize.column %q: %w (a row filter, spec.streams[].filter, can leave such rows out)", r, z.text, err)
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
	if z.chat == nil {
		return []arrow.Array{b.NewArray()}, nil
	}
	return []arrow.Array{b.NewArray(), mb.NewArray()}, nil
}

// messagesAt reads row r of a conversation column: a list of structs, or
// a string of their JSON.
func messagesAt(col arrow.Array, r int) ([]any, error) {
	var v any
	var err error
	switch a := col.(type) {
	case *array.String:
		v, err = chat.FromJSON([]byte(a.Value(r)))
	case *array.LargeString:
		v, err = chat.FromJSON([]byte(a.Value(r)))
	default:
		v, err = arrowValue(col, r, 0)
	}
	if err != nil {
		return nil, err
	}
	msgs, ok := v.([]any)
	if !ok {
		return nil, errors.New("the conversation is not a list of messages")
	}
	return msgs, nil
}

// arrowValue is an Arrow value as a chat template sees it: a struct a
// dict of its fields in order (a null field None, as Hugging Face datasets
// gives it), a list a list.
func arrowValue(col arrow.Array, r, depth int) (any, error) {
	if depth > chat.MaxDepth {
		return nil, fmt.Errorf("a value nested more than %d deep", chat.MaxDepth)
	}
	if col.IsNull(r) {
		return nil, nil
	}
	switch a := col.(type) {
	case *array.String:
		return a.Value(r), nil
	case *array.LargeString:
		return a.Value(r), nil
	case *array.Boolean:
		return a.Value(r), nil
	case *array.Int8:
		return int64(a.Value(r)), nil
	case *array.Int16:
		return int64(a.Value(r)), nil
	case *array.Int32:
		return int64(a.Value(r)), nil
	case *array.Int64:
		return a.Value(r), nil
	case *array.Uint8:
		return int64(a.Value(r)), nil
	case *array.Uint16:
		return int64(a.Value(r)), nil
	case *array.Uint32:
		return int64(a.Value(r)), nil
	case *array.Float32:
		return float64(a.Value(r)), nil
	case *array.Float64:
		return a.Value(r), nil
	case *array.Struct:
		d := chat.NewDict()
		st := a.DataType().(*arrow.StructType)
		for i := range a.NumField() {
			v, err := arrowValue(a.Field(i), r, depth+1)
			if err != nil {
				return nil, err
			}
			d.Set(st.Field(i).Name, v)
		}
		return d, nil
	case array.ListLike:
		from, to := a.ValueOffsets(r)
		out := make([]any, 0, to-from)
		for i := from; i < to; i++ {
			v, err := arrowValue(a.ListValues(), int(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s value is not read by chat templates", col.DataType())
}
