// Package text reads line-oriented shards: JSON Lines, CSV and TSV. A shard
// is a run of whole records (lines, or CSV records, which may span lines)
// found by Scan; its schema is inferred once per stream and kept in the
// stream's index, so that every shard decodes to the same Arrow types.
package text

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	arrowcsv "github.com/apache/arrow-go/v18/arrow/csv"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"

	"github.com/shardfeed/shardfeed/sidecar/format"
)

// The text formats: JSON Lines, and records delimited by commas or tabs.
var (
	JSONL = &Format{kind: datav1alpha1.FormatJSONL, suffixes: []string{".jsonl", ".json", ".ndjson"}}
	CSV   = &Format{kind: datav1alpha1.FormatCSV, comma: ',', suffixes: []string{".csv"}}
	TSV   = &Format{kind: datav1alpha1.FormatTSV, comma: '\t', suffixes: []string{".tsv", ".tab"}}
)

// MaxRecordBytes bounds one record (a JSON line or a CSV record).
const MaxRecordBytes = 64 << 20

// Chunk is a run of whole records: bytes [Offset, Offset+Length) of the
// object, holding Records records.
type Chunk struct {
	Offset, Length, Records int64
}

// Scan reads a whole object and cuts it into chunks of about target bytes
// at record boundaries, inferring the schema from every record: a value
// the first records did not announce (a float in record 3001 of an integer
// column) widens the column, never fails a read later. With a given
// schema, a value its column's type cannot hold is an error naming the
// line. A CSV/TSV header row is not part of any chunk.
func Scan(r io.Reader, kind *Format, target int64, given []indexfile.Field) ([]indexfile.Field, []Chunk, error) {
	inf, err := newInference(given)
	if err != nil {
		return nil, nil, err
	}
	if kind.isJSON() {
		return scanJSONL(r, target, inf)
	}
	return scanCSV(r, kind.comma, target, inf)
}

func scanJSONL(r io.Reader, target int64, inf *inference) ([]indexfile.Field, []Chunk, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var chunks []Chunk
	var cur Chunk
	var pos int64
	for line := int64(1); ; line++ {
		b, err := readLine(br)
		if errors.Is(err, io.EOF) && len(b) == 0 {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("line %d: %w", line, err)
		}
		n := int64(len(b))
		trimmed := bytes.TrimSpace(b)
		if len(trimmed) > 0 {
			if err := inf.addObject(trimmed); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
			cur.Records++
		}
		cur.Length += n
		pos += n
		if cur.Length >= target && cur.Records > 0 {
			chunks = append(chunks, cur)
			cur = Chunk{Offset: pos}
		}
	}
	if cur.Records > 0 {
		chunks = append(chunks, cur)
	}
	if len(chunks) == 0 {
		return nil, nil, nil // an empty object (Spark writes empty part files): no shard
	}
	return inf.fields(), chunks, nil
}

// readLine returns one line with its newline, bounded by MaxRecordBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		frag, err := br.ReadSlice('\n')
		out = append(out, frag...)
		if len(out) > MaxRecordBytes {
			return nil, fmt.Errorf("longer than %d bytes", MaxRecordBytes)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return out, err
		}
	}
}

func scanCSV(r io.Reader, comma rune, target int64, inf *inference) ([]indexfile.Field, []Chunk, error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	cr.Comma = comma
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, nil // an empty object: no shard
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the header row: %w", err)
	}
	names := append([]string(nil), header...)
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || seen[n] {
			return nil, nil, fmt.Errorf("header row: column names must be unique and non-empty, got %q", names)
		}
		seen[n] = true
	}
	start := cr.InputOffset()
	cur := Chunk{Offset: start}
	var chunks []Chunk
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		for i, v := range rec {
			if err := inf.addCSV(names[i], v); err != nil {
				line, _ := cr.FieldPos(i)
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		inf.rows++
		cur.Records++
		end := cr.InputOffset()
		cur.Length = end - cur.Offset
		if cur.Length >= target {
			chunks = append(chunks, cur)
			cur = Chunk{Offset: end}
		}
	}
	if cur.Records > 0 {
		chunks = append(chunks, cur)
	}
	if len(chunks) == 0 {
		return nil, nil, nil // a header and no rows: no shard, and no types to merge
	}
	fields := make([]indexfile.Field, len(names))
	for i, n := range names {
		fields[i] = indexfile.Field{Name: n, Type: inf.typeOf(n)}
	}
	return fields, chunks, nil
}

// inference widens each column's type as values are seen, or checks them
// against a given schema.
type inference struct {
	order []string
	types map[string]*indexfile.ColumnType
	given map[string]*indexfile.ColumnType
	rows  int
}

func newInference(given []indexfile.Field) (*inference, error) {
	in := &inference{types: map[string]*indexfile.ColumnType{}}
	if given != nil {
		in.given = map[string]*indexfile.ColumnType{}
		for _, f := range given {
			t, err := indexfile.ParseColumnType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("the given schema: column %q: %w", f.Name, err)
			}
			in.given[f.Name] = t
		}
	}
	return in, nil
}

func (in *inference) note(name string, typ *indexfile.ColumnType) error {
	if want, ok := in.given[name]; ok && !fits(want, typ) {
		return fmt.Errorf("column %q has a %s value, the given schema says %s", name, describe(final(typ)), describe(want))
	}
	old, ok := in.types[name]
	if !ok {
		in.order = append(in.order, name)
		in.types[name] = typ
		return nil
	}
	in.types[name] = widen(old, typ)
	return nil
}

// describe spells a type for a message, cut short if long.
func describe(t *indexfile.ColumnType) string {
	s := t.String()
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Widen returns the narrowest type holding values of both type names (see
// widen); a name that does not parse widens to utf8.
func Widen(a, b string) string {
	ta, err := indexfile.ParseColumnType(a)
	if err != nil {
		return "utf8"
	}
	tb, err := indexfile.ParseColumnType(b)
	if err != nil {
		return "utf8"
	}
	return widen(ta, tb).String()
}

// widen returns the narrowest type holding both: int64 < float64; lists
// widen their elements; structs merge their fields (in the order first
// seen); "null" (only nulls seen) gives way to any; anything else mixed is
// utf8 (each value's JSON text), as is a type past indexfile.MaxTypeDepth or
// indexfile.MaxTypeNodes. It returns a itself when a already holds b, and
// never changes either.
func widen(a, b *indexfile.ColumnType) *indexfile.ColumnType {
	switch {
	case a == b:
		return a
	case a.Kind == "null":
		return b
	case b.Kind == "null":
		return a
	case a.Kind == b.Kind:
		switch a.Kind {
		case "list":
			e := widen(a.Elem, b.Elem)
			if e == a.Elem {
				return a
			}
			return bounded(indexfile.ListOf(e))
		case "struct":
			return mergeStruct(a, b)
		}
		return a
	case a.Kind == "int64" && b.Kind == "float64":
		return b
	case a.Kind == "float64" && b.Kind == "int64":
		return a
	}
	return indexfile.UTF8Type
}

// mergeStruct widens a's fields by b's and adds b's others after them.
func mergeStruct(a, b *indexfile.ColumnType) *indexfile.ColumnType {
	var out []indexfile.StructField // a's fields, copied on the first change
	fields := a.Fields
	for i, f := range b.Fields {
		j := i
		if j >= len(fields) || fields[j].Name != f.Name {
			j = fieldIndex(fields, f.Name)
		}
		if j >= 0 {
			w := widen(fields[j].Type, f.Type)
			if w == fields[j].Type {
				continue
			}
			if out == nil {
				out = slices.Clone(fields)
				fields = out
			}
			out[j].Type = w
			continue
		}
		if out == nil {
			out = slices.Clone(fields)
		}
		out = append(out, f)
		fields = out
	}
	if out == nil {
		return a
	}
	return bounded(indexfile.StructOf(out...))
}

func fieldIndex(fields []indexfile.StructField, name string) int {
	for i, f := range fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// bounded is t, or utf8 where t is past the type bounds.
func bounded(t *indexfile.ColumnType) *indexfile.ColumnType {
	if !t.WithinBounds() {
		return indexfile.UTF8Type
	}
	return t
}

// fits says whether values of type got decode under want: want holds got
// as widen would, and a struct's fields that want does not name are left
// out, as a record's keys the schema does not name are.
func fits(want, got *indexfile.ColumnType) bool {
	switch {
	case got.Kind == "null", want.Kind == "utf8", want == got:
		return true
	case want.Kind == "float64" && got.Kind == "int64":
		return true
	case want.Kind != got.Kind:
		return false
	case want.Kind == "list":
		return fits(want.Elem, got.Elem)
	case want.Kind == "struct":
		for _, f := range got.Fields {
			if w := want.Field(f.Name); w != nil && !fits(w, f.Type) {
				return false
			}
		}
	}
	return true
}

// final is an inferred type as an index records it: a column or field of
// only nulls is utf8, a list of only empty lists or nulls list<int64>.
func final(t *indexfile.ColumnType) *indexfile.ColumnType {
	switch t.Kind {
	case "null":
		return indexfile.UTF8Type
	case "list":
		if t.Elem.Kind == "null" {
			return indexfile.ListOf(indexfile.Int64Type)
		}
		if e := final(t.Elem); e != t.Elem {
			return indexfile.ListOf(e)
		}
	case "struct":
		var out []indexfile.StructField
		for i, f := range t.Fields {
			if ft := final(f.Type); ft != f.Type {
				if out == nil {
					out = slices.Clone(t.Fields)
				}
				out[i].Type = ft
			}
		}
		if out != nil {
			return indexfile.StructOf(out...)
		}
	}
	return t
}

// addObject notes the keys of one JSON object in the order they appear, so
// that the inferred schema (and the index) is the same on every run.
func (in *inference) addObject(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	var keys keySet
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not a JSON object: %w", err)
		}
		key, _ := tok.(string)
		if !keys.add(key) {
			return fmt.Errorf("key %q appears twice in the object (JSON readers disagree on which value to keep; pyarrow refuses it too)", key)
		}
		t, err := valueType(dec, 0)
		if err != nil {
			return fmt.Errorf("not a JSON object: %w", err)
		}
		if err := in.note(key, t); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return errors.New("not a JSON object: unterminated object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("not a JSON object: data after the object")
	}
	in.rows++
	return nil
}

// valueType reads the next JSON value and returns its type: objects are
// structs of their keys in order, arrays lists of their elements' widened
// type. A value nested past indexfile.MaxTypeDepth, or whose type holds more
// than indexfile.MaxTypeNodes types, is utf8 (its JSON text).
func valueType(dec *json.Decoder, depth int) (*indexfile.ColumnType, error) {
	if depth >= indexfile.MaxTypeDepth {
		var skip json.RawMessage
		return indexfile.UTF8Type, dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case nil:
		return indexfile.NullType, nil
	case bool:
		return indexfile.BoolType, nil
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return indexfile.Int64Type, nil
		}
		return indexfile.Float64Type, nil
	case string:
		return indexfile.UTF8Type, nil
	case json.Delim:
		if v == '[' {
			elem := indexfile.NullType
			for dec.More() {
				e, err := valueType(dec, depth+1)
				if err != nil {
					return nil, err
				}
				elem = widen(elem, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return bounded(indexfile.ListOf(elem)), nil
		}
		t := indexfile.StructOf()
		nodes := 1
		var keys keySet
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := tok.(string)
			if !keys.add(key) {
				return nil, fmt.Errorf("key %q appears twice in a nested object (JSON readers disagree on which value to keep; pyarrow refuses it too)", key)
			}
			ft, err := valueType(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if nodes > indexfile.MaxTypeNodes {
				continue // past the bounds already: read on, keep nothing
			}
			t.Fields = append(t.Fields, indexfile.StructField{Name: key, Type: ft})
			nodes += ft.Nodes()
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return bounded(t), nil
	}
	return nil, fmt.Errorf("unexpected %v", tok)
}

// keySet is the keys of one object: a list while short, a map once long,
// so that an object of a million keys costs no more than its size.
type keySet struct {
	few  []string
	many map[string]bool
}

// add adds key and says whether it was new.
func (k *keySet) add(key string) bool {
	if k.many != nil {
		if k.many[key] {
			return false
		}
		k.many[key] = true
		return true
	}
	if slices.Contains(k.few, key) {
		return false
	}
	k.few = append(k.few, key)
	if len(k.few) > 32 {
		k.many = map[string]bool{}
		for _, s := range k.few {
			k.many[s] = true
		}
	}
	return true
}

func (in *inference) addCSV(name, v string) error {
	t := indexfile.UTF8Type
	switch v {
	case "":
		t = indexfile.NullType
	case "true", "false", "True", "False", "TRUE", "FALSE": // pyarrow's CSV booleans (1 and 0 are integers first)
		t = indexfile.BoolType
	default:
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			t = indexfile.Int64Type
		} else if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
			t = indexfile.Float64Type
		}
	}
	return in.note(name, t)
}

func (in *inference) typeOf(name string) string {
	t, ok := in.types[name]
	if !ok {
		return "utf8"
	}
	return final(t).String()
}

func (in *inference) fields() []indexfile.Field {
	out := make([]indexfile.Field, len(in.order))
	for i, n := range in.order {
		out[i] = indexfile.Field{Name: n, Type: in.typeOf(n)}
	}
	return out
}

// Schema returns the Arrow schema of fields (types as index.FieldTypes
// names them); every column is nullable.
func Schema(fields []indexfile.Field) (*arrow.Schema, error) {
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
		if strings.Contains(f.Type, "binary") {
			return nil, fmt.Errorf("column %q: text records hold no binary values; use utf8", f.Name)
		}
		t, err := format.ArrowType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		out[i] = arrow.Field{Name: f.Name, Type: t, Nullable: true}
	}
	return arrow.NewSchema(out, nil), nil
}

// Decode reads the records of one chunk into Arrow with the stream's
// schema, keeping only columns (nil: all).
func Decode(data []byte, kind *Format, fields []indexfile.Field, columns []string) (recs []arrow.RecordBatch, err error) {
	schema, err := Schema(fields)
	if err != nil {
		return nil, err
	}
	var rr array.RecordReader
	if kind.isJSON() {
		norm, err := normalizeJSONL(data, fields)
		if err != nil {
			return nil, err
		}
		rr = array.NewJSONReader(bytes.NewReader(norm), schema, array.WithChunk(1<<14))
	} else {
		rr = arrowcsv.NewReader(bytes.NewReader(data), schema, arrowcsv.WithComma(kind.comma),
			arrowcsv.WithHeader(false), arrowcsv.WithChunk(1<<14), arrowcsv.WithNullReader(true, ""))
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.RecordBatch()
		p, err := project(rec, columns)
		if err != nil {
			release(recs)
			return nil, err
		}
		recs = append(recs, p)
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		release(recs)
		return nil, err
	}
	return recs, nil
}

// normalizeJSONL checks that every line's values fit the schema, so that a
// shard that disagrees with the inferred types fails with the line and the
// column, not deep in the Arrow reader; and it turns the values of utf8
// columns and fields that are not strings (objects, arrays, mixed values)
// into their JSON text, as the schema says. Lines it need not change are
// passed on as they are.
func normalizeJSONL(data []byte, fields []indexfile.Field) ([]byte, error) {
	types := map[string]*indexfile.ColumnType{}
	for _, f := range fields {
		t, err := indexfile.ParseColumnType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		types[f.Name] = t
	}
	var out []byte
	for i, line := range bytes.Split(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(line, &raw); err != nil {
			return nil, fmt.Errorf("record %d of the shard is not a JSON object: %w", i+1, err)
		}
		rewrite := false
		for k, v := range raw {
			want, ok := types[k]
			if !ok {
				continue // not in the schema: ignored
			}
			nv, changed, err := conform(v, want, strconv.Quote(k))
			if err != nil {
				return nil, fmt.Errorf("record %d: %w: the data changed after it was indexed; re-run shardfeed index", i+1, err)
			}
			if changed {
				raw[k] = nv
				rewrite = true
			}
		}
		if rewrite {
			b, err := json.Marshal(raw)
			if err != nil {
				return nil, err
			}
			line = b
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out, nil
}

// conform checks one JSON value against its type, and returns it with
// every value a utf8 type holds that is not a string turned into its JSON
// text (changed says whether it did). path names the value in an error:
// "m", "m"."a", "m"[].
func conform(v json.RawMessage, want *indexfile.ColumnType, path string) (json.RawMessage, bool, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return v, false, nil
	}
	mismatch := func() error {
		return fmt.Errorf("column %s holds %s, the stream's schema says %s", path, kindOf(v), describe(want))
	}
	switch want.Kind {
	case "utf8":
		if v[0] == '"' {
			return v, false, nil
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, v); err != nil {
			return nil, false, err
		}
		q, err := json.Marshal(compact.String())
		return q, true, err
	case "bool":
		if v[0] != 't' && v[0] != 'f' {
			return nil, false, mismatch()
		}
	case "int64":
		if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
			return nil, false, mismatch()
		}
	case "float64":
		if !isNumber(v) {
			return nil, false, mismatch()
		}
	case "list":
		if v[0] != '[' {
			return nil, false, mismatch()
		}
		if numbersFit(v, want.Elem.Kind) {
			return v, false, nil
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return nil, false, err
		}
		changed := false
		for i, e := range elems {
			ne, c, err := conform(e, want.Elem, path+"[]")
			if err != nil {
				return nil, false, err
			}
			if c {
				elems[i], changed = ne, true
			}
		}
		if changed {
			b, err := json.Marshal(elems)
			return b, true, err
		}
	case "struct":
		if v[0] != '{' {
			return nil, false, mismatch()
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(v, &obj); err != nil {
			return nil, false, err
		}
		changed := false
		for k, fv := range obj {
			ft := want.Field(k)
			if ft == nil {
				continue // not in the schema: ignored
			}
			nv, c, err := conform(fv, ft, path+"."+strconv.Quote(k))
			if err != nil {
				return nil, false, err
			}
			if c {
				obj[k], changed = nv, true
			}
		}
		if changed {
			b, err := json.Marshal(obj)
			return b, true, err
		}
	}
	return v, false, nil
}

// numbersFit is the fast path of a list of numbers (token ids, embeddings):
// whether v, a valid JSON array, holds only nulls and numbers that elem
// (int64 or float64) holds. False sends it the slow way, which names what
// does not fit.
func numbersFit(v []byte, elem string) bool {
	if elem != "int64" && elem != "float64" {
		return false
	}
	for i := 1; i < len(v); {
		switch c := v[i]; {
		case c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r' || c == ']':
			i++
		case c == 'n': // null
			i += 4
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(v) && (v[j] >= '0' && v[j] <= '9' || v[j] == '.' || v[j] == 'e' || v[j] == 'E' || v[j] == '+' || v[j] == '-') {
				j++
			}
			if elem == "int64" && !isInt64(v[i:j]) {
				return false
			}
			i = j
		default:
			return false
		}
	}
	return true
}

// isInt64 says whether a JSON number is an integer int64 holds.
func isInt64(n []byte) bool {
	neg := n[0] == '-'
	if neg {
		n = n[1:]
	}
	if len(n) == 0 || len(n) > 19 { // 19 digits never overflow a uint64
		return false
	}
	var u uint64
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
		u = u*10 + uint64(c-'0')
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	return u <= limit
}

func isNumber(v []byte) bool {
	return v[0] == '-' || '0' <= v[0] && v[0] <= '9'
}

// kindOf names what a JSON value is, for a message.
func kindOf(v []byte) string {
	switch {
	case v[0] == '"':
		return "a utf8"
	case v[0] == 't' || v[0] == 'f':
		return "a bool"
	case v[0] == '[':
		return "a list"
	case v[0] == '{':
		return "an object"
	case isNumber(v):
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return "an int64"
		}
		return "a float64"
	}
	return "a value"
}

func project(rec arrow.RecordBatch, columns []string) (arrow.RecordBatch, error) {
	if columns == nil {
		rec.Retain()
		return rec, nil
	}
	var idx []int
	var fields []arrow.Field
	for _, c := range columns {
		ix := rec.Schema().FieldIndices(c)
		if len(ix) == 0 {
			var names []string
			for _, f := range rec.Schema().Fields() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("no column %q: the stream's columns are %s", c, strings.Join(names, ", "))
		}
		idx = append(idx, ix[0])
		fields = append(fields, rec.Schema().Field(ix[0]))
	}
	cols := make([]arrow.Array, len(idx))
	for i, j := range idx {
		cols[i] = rec.Column(j)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
