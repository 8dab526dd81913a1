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
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	arrowcsv "github.com/apache/arrow-go/v18/arrow/csv"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"

	"github.com/shardfeed/shardfeed/internal/index"
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
func Scan(r io.Reader, kind *Format, target int64, given []index.Field) ([]index.Field, []Chunk, error) {
	inf := newInference(given)
	if kind.isJSON() {
		return scanJSONL(r, target, inf)
	}
	return scanCSV(r, kind.comma, target, inf)
}

func scanJSONL(r io.Reader, target int64, inf *inference) ([]index.Field, []Chunk, error) {
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

func scanCSV(r io.Reader, comma rune, target int64, inf *inference) ([]index.Field, []Chunk, error) {
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
	fields := make([]index.Field, len(names))
	for i, n := range names {
		fields[i] = index.Field{Name: n, Type: inf.typeOf(n)}
	}
	return fields, chunks, nil
}

// inference widens each column's type as values are seen, or checks them
// against a given schema.
type inference struct {
	order []string
	types map[string]string
	given map[string]string
	rows  int
}

func newInference(given []index.Field) *inference {
	in := &inference{types: map[string]string{}}
	if given != nil {
		in.given = map[string]string{}
		for _, f := range given {
			in.given[f.Name] = f.Type
		}
	}
	return in
}

func (in *inference) note(name, typ string) error {
	if want, ok := in.given[name]; ok && widen(want, typ) != want {
		return fmt.Errorf("column %q has a %s value, the given schema says %s", name, typ, want)
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

// Widen returns the narrowest type holding both: int64 < float64, anything
// else mixed becomes utf8; "null" (only nulls seen) gives way to any.
func Widen(a, b string) string { return widen(a, b) }

func widen(a, b string) string {
	switch {
	case a == b:
		return a
	case a == "null":
		return b
	case b == "null":
		return a
	case a == "int64" && b == "float64" || a == "float64" && b == "int64":
		return "float64"
	case a == "list<int64>" && b == "list<float64>" || a == "list<float64>" && b == "list<int64>":
		return "list<float64>"
	}
	return "utf8"
}

// addObject notes the keys of one JSON object in the order they appear, so
// that the inferred schema (and the index) is the same on every run.
func (in *inference) addObject(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		var v any
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("not a JSON object: %w", err)
		}
		if err := in.note(key, jsonType(v)); err != nil {
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

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "int64"
		}
		return "float64"
	case string:
		return "utf8"
	case []any:
		elem := "null"
		for _, e := range x {
			elem = widen(elem, jsonType(e))
		}
		switch elem {
		case "int64", "float64", "utf8":
			return "list<" + elem + ">"
		case "null":
			return "list<int64>"
		}
	}
	return "utf8" // objects, nested lists: their JSON text
}

func (in *inference) addCSV(name, v string) error {
	t := "utf8"
	switch v {
	case "":
		t = "null"
	case "true", "false", "True", "False", "TRUE", "FALSE": // pyarrow's CSV booleans (1 and 0 are integers first)
		t = "bool"
	default:
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			t = "int64"
		} else if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsInf(f, 0) {
			t = "float64"
		}
	}
	return in.note(name, t)
}

func (in *inference) typeOf(name string) string {
	t := in.types[name]
	if t == "null" || t == "" {
		return "utf8"
	}
	return t
}

func (in *inference) fields() []index.Field {
	out := make([]index.Field, len(in.order))
	for i, n := range in.order {
		out[i] = index.Field{Name: n, Type: in.typeOf(n)}
	}
	return out
}

// Schema returns the Arrow schema of fields (types as index.FieldTypes
// names them); every column is nullable.
func Schema(fields []index.Field) (*arrow.Schema, error) {
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
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
func Decode(data []byte, kind *Format, fields []index.Field, columns []string) (recs []arrow.RecordBatch, err error) {
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
// column, not deep in the Arrow reader; and it turns the objects, arrays and
// mixed values of utf8 columns into their JSON text, as the schema says.
func normalizeJSONL(data []byte, fields []index.Field) ([]byte, error) {
	types := map[string]string{}
	for _, f := range fields {
		types[f.Name] = f.Type
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
			var val any
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.UseNumber()
			_ = dec.Decode(&val)
			got := jsonType(val)
			if got == "null" {
				continue
			}
			if want == "utf8" {
				if _, isString := val.(string); !isString {
					var compact bytes.Buffer
					_ = json.Compact(&compact, v)
					q, _ := json.Marshal(compact.String())
					raw[k] = q
					rewrite = true
				}
				continue
			}
			if widen(want, got) != want {
				return nil, fmt.Errorf("record %d: column %q holds a %s, the stream's schema says %s: the data changed after it was indexed; re-run shardfeed index", i+1, k, got, want)
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
