package text

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

func decodeAll(t *testing.T, data []byte, kind *Format, fields []indexfile.Field, chunks []Chunk, columns []string) []arrow.RecordBatch {
	t.Helper()
	var out []arrow.RecordBatch
	for _, c := range chunks {
		recs, err := Decode(data[c.Offset:c.Offset+c.Length], kind, fields, columns)
		if err != nil {
			t.Fatalf("chunk %+v: %v", c, err)
		}
		var n int64
		for _, r := range recs {
			n += r.NumRows()
		}
		if n != c.Records {
			t.Fatalf("chunk %+v decoded %d records", c, n)
		}
		out = append(out, recs...)
	}
	return out
}

func TestJSONLChunksAndSchema(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		if i == 7 {
			b.WriteString("\n") // blank lines are not records
		}
		fmt.Fprintf(&b, `{"id": %d, "score": %d, "text": "s%d", "tokens": [%d, 2], "ok": %v, "maybe": null}`+"\n", i, i%3, i, i, i%2 == 0)
	}
	// A float late in the inference window widens score to float64.
	b.WriteString(`{"id": 500, "score": 0.5, "text": "last", "tokens": [1], "ok": true, "maybe": "x"}` + "\n")
	data := []byte(b.String())
	fields, chunks, err := Scan(bytes.NewReader(data), JSONL, 4096, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "int64", "score": "float64", "text": "utf8", "tokens": "list<int64>", "ok": "bool", "maybe": "utf8"}
	for _, f := range fields {
		if want[f.Name] != f.Type {
			t.Errorf("column %s inferred %s, want %s", f.Name, f.Type, want[f.Name])
		}
	}
	var records, length int64
	for i, c := range chunks {
		if i > 0 && c.Offset != chunks[i-1].Offset+chunks[i-1].Length {
			t.Fatalf("chunks are not contiguous: %+v after %+v", c, chunks[i-1])
		}
		records += c.Records
		length += c.Length
	}
	if records != 501 || length != int64(len(data)) || len(chunks) < 5 {
		t.Fatalf("%d chunks of %d records and %d bytes, want several covering 501 records and %d bytes", len(chunks), records, length, len(data))
	}
	recs := decodeAll(t, data, JSONL, fields, chunks, []string{"id", "tokens"})
	var ids []int64
	for _, r := range recs {
		if r.NumCols() != 2 {
			t.Fatalf("projection kept %d columns", r.NumCols())
		}
		ids = append(ids, r.Column(0).(*array.Int64).Int64Values()...)
	}
	for i, id := range ids {
		if id != int64(i) {
			t.Fatalf("record %d has id %d", i, id)
		}
	}
}

func TestJSONLRecordThatDisagreesWithTheSchemaFailsClearly(t *testing.T) {
	fields := []indexfile.Field{{Name: "id", Type: "int64"}}
	_, err := Decode([]byte("{\"id\": 1}\n{\"id\": \"two\"}\n"), JSONL, fields, nil)
	if err == nil || !strings.Contains(err.Error(), `record 2: column "id" holds a utf8, the stream's schema says int64`) {
		t.Fatalf("Decode = %v", err)
	}
}

func TestCSVAndTSVWithQuotedNewlines(t *testing.T) {
	for _, kind := range []*Format{CSV, TSV} {
		t.Run(kind.String(), func(t *testing.T) {
			sep := ","
			if kind == TSV {
				sep = "\t"
			}
			var b strings.Builder
			b.WriteString(strings.Join([]string{"id", "price", "note", "flag"}, sep) + "\n")
			for i := range 300 {
				note := fmt.Sprintf("plain %d", i)
				if i%10 == 0 {
					note = fmt.Sprintf("\"two\nlines %d\"", i)
				}
				price := fmt.Sprintf("%d.25", i)
				if i == 5 {
					price = "" // null
				}
				fmt.Fprintf(&b, "%d%s%s%s%s%s%v\n", i, sep, price, sep, note, sep, i%2 == 0)
			}
			data := []byte(b.String())
			fields, chunks, err := Scan(bytes.NewReader(data), kind, 1000, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(fields) != "[{id int64} {price float64} {note utf8} {flag bool}]" {
				t.Fatalf("fields = %v", fields)
			}
			recs := decodeAll(t, data, kind, fields, chunks, nil)
			var notes []string
			var nulls int
			for _, r := range recs {
				for i := range int(r.NumRows()) {
					notes = append(notes, r.Column(2).(*array.String).Value(i))
				}
				nulls += r.Column(1).NullN()
			}
			if len(notes) != 300 || notes[10] != "two\nlines 10" || notes[11] != "plain 11" || nulls != 1 {
				t.Fatalf("decoded %d records; note 10 = %q, nulls %d", len(notes), notes[10], nulls)
			}
		})
	}
}

func TestScanRejectsBadInput(t *testing.T) {
	given := []indexfile.Field{{Name: "x", Type: "int64"}}
	tests := []struct {
		kind       *Format
		data, want string
		given      []indexfile.Field
	}{
		{JSONL, "{\"a\": 1}\n[1, 2]\n", "line 2: not a JSON object", nil},
		{CSV, "a,a\n1,2\n", "unique and non-empty", nil},
		{CSV, "a,b\n1,2,3\n", "wrong number of fields", nil},
		// A given schema: the first value its type cannot hold, by line.
		{JSONL, manyRecords("{\"x\": %d}\n", 3000) + "{\"x\": 1.5}\n", `line 3001: column "x" has a float64 value, the given schema says int64`, given},
		{CSV, "x\n" + manyRecords("%d\n", 2000) + "abc\n", `line 2002: column "x" has a utf8 value, the given schema says int64`, given},
	}
	for _, tt := range tests {
		if _, _, err := Scan(strings.NewReader(tt.data), tt.kind, 100, tt.given); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Scan(%s, %.60q…) = %v, want %q", tt.kind, tt.data, err, tt.want)
		}
	}
}

// An empty object (Spark leaves empty part files) is no shard, not an
// error for the whole stream, as an empty Parquet file is.
func TestScanOfAnEmptyObjectIsNoShard(t *testing.T) {
	for _, tt := range []struct {
		kind *Format
		data string
	}{{JSONL, ""}, {JSONL, "\n  \n"}, {CSV, ""}, {CSV, "a,b\n"}, {TSV, ""}} {
		fields, chunks, err := Scan(strings.NewReader(tt.data), tt.kind, 100, nil)
		if err != nil || len(chunks) != 0 || fields != nil {
			t.Errorf("Scan(%s, %q) = %v, %v, %v: want no fields, no chunks, no error", tt.kind, tt.data, fields, chunks, err)
		}
	}
}

func manyRecords(format string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// Trap 2 of the first-hour issue: a value past the first thousand records
// used to be left out of the schema and failed only when a trainer read it.
func TestScanInfersTheSchemaFromEveryRecord(t *testing.T) {
	tests := []struct {
		name, last, want string
	}{
		{"a float after 3000 integers", `{"x": 1.5}`, "float64"},
		{"a string after 3000 integers", `{"x": "n/a"}`, "utf8"},
		{"a null after 3000 integers", `{"x": null}`, "int64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := manyRecords("{\"x\": %d}\n", 3000) + tt.last + "\n"
			fields, chunks, err := Scan(strings.NewReader(data), JSONL, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(fields) != 1 || fields[0].Type != tt.want {
				t.Fatalf("schema %+v, want x %s", fields, tt.want)
			}
			// The last record decodes under the inferred schema.
			last := chunks[len(chunks)-1]
			recs, err := Decode([]byte(data)[last.Offset:last.Offset+last.Length], JSONL, fields, nil)
			if err != nil {
				t.Fatalf("decoding under the inferred schema: %v", err)
			}
			release(recs)
		})
	}
}

// FuzzScan: malformed text gives an error, never a panic; chunks always
// tile the input.
func FuzzScan(f *testing.F) {
	f.Add([]byte("{\"a\": 1}\n{\"a\": [1.5]}\n"), true)
	f.Add([]byte("a,b\n1,\"x\ny\"\n2,3\n"), false)
	f.Add([]byte("{\"m\": {\"a\": [1, {\"b\": null}], \"c\": {}}}\n{\"m\": {\"a\": [], \"d\": [[true]]}}\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, jsonl bool) {
		kind := CSV
		if jsonl {
			kind = JSONL
		}
		fields, chunks, err := Scan(bytes.NewReader(data), kind, 16, nil)
		if err != nil {
			return
		}
		for _, c := range chunks {
			if c.Offset < 0 || c.Offset+c.Length > int64(len(data)) {
				t.Fatalf("chunk %+v outside %d bytes", c, len(data))
			}
			recs, err := Decode(data[c.Offset:c.Offset+c.Length], kind, fields, nil)
			if err == nil {
				release(recs)
			} else if jsonl {
				t.Fatalf("a chunk of %q does not decode under its inferred schema %v: %v", data, fields, err)
			}
		}
	})
}

func TestJSONLObjectsAndMixedValuesBecomeJSONText(t *testing.T) {
	data := []byte("{\"m\": {\"a\": [1, 2]}, \"x\": 1}\n{\"m\": \"plain\", \"x\": \"one\"}\n")
	fields, chunks, err := Scan(bytes.NewReader(data), JSONL, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(fields) != "[{m utf8} {x utf8}]" {
		t.Fatalf("fields = %v", fields)
	}
	recs := decodeAll(t, data, JSONL, fields, chunks, nil)
	m, x := recs[0].Column(0).(*array.String), recs[0].Column(1).(*array.String)
	if m.Value(0) != `{"a":[1,2]}` || m.Value(1) != "plain" || x.Value(0) != "1" || x.Value(1) != "one" {
		t.Fatalf("values = %q %q %q %q", m.Value(0), m.Value(1), x.Value(0), x.Value(1))
	}
}

// Nested JSON objects are structs and arrays of any type lists, as
// pyarrow.json infers them (test_text_types.py holds the two side by side):
// struct fields in the order first seen, merged over records.
func TestJSONLNestedValuesInferTheirTypes(t *testing.T) {
	for _, tt := range []struct {
		name, lines, want string
	}{
		{"object", `{"m": {"a": 1, "b": "x"}}`, `struct<"a":int64,"b":utf8>`},
		{"fields merge in the order first seen", `{"m": {"a": 1}}` + "\n" + `{"m": {"b": 2.5, "a": 2.5}}`, `struct<"a":float64,"b":float64>`},
		{"missing and null fields", `{"m": {"a": null}}` + "\n" + `{"m": null}` + "\n" + `{"m": {}}`, `struct<"a":utf8>`},
		{"empty object", `{"m": {}}`, `struct<>`},
		{"list of objects", `{"m": [{"x": 1}, {"y": "s"}]}`, `list<struct<"x":int64,"y":utf8>>`},
		{"nested lists", `{"m": [[1, 2], [3], []]}`, `list<list<int64>>`},
		{"list of bools", `{"m": [true, null]}`, `list<bool>`},
		{"object beside a number", `{"m": {"a": 1}}` + "\n" + `{"m": 3}`, `utf8`},
		{"odd field names", `{"m": {"a b": 1, "q\"": [null]}}`, `struct<"a b":int64,"q\"":list<int64>>`},
		{"deeper than the bound: JSON text there", `{"m": ` + strings.Repeat(`{"a": `, indexfile.MaxTypeDepth+1) + "1" + strings.Repeat("}", indexfile.MaxTypeDepth+1) + "}",
			strings.Repeat(`struct<"a":`, indexfile.MaxTypeDepth) + "utf8" + strings.Repeat(">", indexfile.MaxTypeDepth)},
		{"too many fields", `{"m": {` + manyKeys(indexfile.MaxTypeNodes) + `}}`, `utf8`},
		{"too many fields over records", `{"m": {` + manyKeys(indexfile.MaxTypeNodes/2) + "}}\n" + `{"m": {"z": {` + manyKeys(indexfile.MaxTypeNodes/2) + `}}}`, `utf8`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.lines + "\n")
			fields, chunks, err := Scan(bytes.NewReader(data), JSONL, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(fields) != 1 || fields[0].Type != tt.want {
				t.Fatalf("fields = %v, want m %s", fields, tt.want)
			}
			if _, err := indexfile.CheckColumnType(fields[0].Type); err != nil {
				t.Fatalf("the inferred type is not one an index holds: %v", err)
			}
			release(decodeAll(t, data, JSONL, fields, chunks, nil))
		})
	}
}

func manyKeys(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d": %d`, i, i)
	}
	return strings.Join(keys, ", ")
}

// The values under a struct type decode as Arrow structs; the values of
// utf8 fields that are not strings become their JSON text, at any depth.
func TestJSONLStructValuesDecode(t *testing.T) {
	data := []byte(`{"m": {"a": 1, "t": {"k": [1, 2]}, "l": [{"x": 1}]}}
{"m": {"t": "plain", "l": [{"x": 2}, null, {}]}}
{"m": null}
{}
`)
	fields := []indexfile.Field{{Name: "m", Type: `struct<"a":int64,"t":utf8,"l":list<struct<"x":int64>>>`}}
	recs := decodeAll(t, data, JSONL, fields, []Chunk{{Length: int64(len(data)), Records: 4}}, nil)
	defer release(recs)
	got, err := recs[0].Column(0).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got = bytes.ReplaceAll(got, []byte("\n"), nil)
	want := `[{"a":1,"l":[{"x":1}],"t":"{\"k\":[1,2]}"},{"a":null,"l":[{"x":2},null,{"x":null}],"t":"plain"},null,null]`
	if string(got) != want {
		t.Fatalf("m = %s\nwant %s", got, want)
	}
}

// A key given twice in one object, at the top or nested, is refused at
// indexing, as pyarrow refuses it (which value is meant is unclear).
func TestJSONLKeysGivenTwiceAreRefused(t *testing.T) {
	for _, line := range []string{`{"a": 1, "a": 2}`, `{"m": {"a": 1, "a": 0.5}}`, `{"m": [{` + manyKeys(40) + `, "k39": 1}]}`} {
		_, _, err := Scan(strings.NewReader(line+"\n"), JSONL, 1<<20, nil)
		if err == nil || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "appears twice") {
			t.Errorf("%.40s: %v, want a refusal naming the line and the key", line, err)
		}
	}
}

// A record whose nested value the index's type cannot hold names the path
// to it; old indexes, which kept objects as utf8, still decode them so.
func TestJSONLStructMismatchNamesThePath(t *testing.T) {
	data := []byte(`{"m": {"a": {"b": 1.5}}}` + "\n")
	for _, tt := range []struct{ typ, err string }{
		{`struct<"a":struct<"b":int64>>`, `record 1: column "m"."a"."b" holds a float64, the stream's schema says int64`},
		{`struct<"a":list<int64>>`, `record 1: column "m"."a" holds an object, the stream's schema says list<int64>`},
		{`list<utf8>`, `record 1: column "m" holds an object, the stream's schema says list<utf8>`},
		{`utf8`, ``},
		{`struct<"a":utf8>`, ``},
	} {
		recs, err := Decode(data, JSONL, []indexfile.Field{{Name: "m", Type: tt.typ}}, nil)
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.typ, err)
			}
			release(recs)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want %s", tt.typ, err, tt.err)
		}
	}
}

// Lists of numbers take a fast path; it holds the same line as the slow one
// at int64's edges.
func TestJSONLNumberListsAtTheEdges(t *testing.T) {
	for _, tt := range []struct{ line, typ, err string }{
		{`{"m": [9223372036854775807, -9223372036854775808, null, 0, -0]}`, "list<int64>", ""},
		{`{"m": [9223372036854775808]}`, "list<int64>", `column "m"[] holds a float64, the stream's schema says int64`},
		{`{"m": [-9223372036854775809]}`, "list<int64>", `column "m"[] holds a float64`},
		{`{"m": [1, 2.5]}`, "list<int64>", `column "m"[] holds a float64`},
		{`{"m": [1e3, -2.5E-3, 7]}`, "list<float64>", ""},
		{`{"m": [1, "x"]}`, "list<float64>", `column "m"[] holds a utf8`},
		{`{"m": [1, true]}`, "list<int64>", `column "m"[] holds a bool`},
		{`{"m": [1, [2]]}`, "list<int64>", `column "m"[] holds a list`},
	} {
		data := []byte(tt.line + "\n")
		recs, err := Decode(data, JSONL, []indexfile.Field{{Name: "m", Type: tt.typ}}, nil)
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.line, err)
			}
			release(recs)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want %s", tt.line, err, tt.err)
		}
	}
}

// A given schema holds nested types: extra fields are left out as extra
// columns are; a value of another type is refused at indexing, naming it;
// a column or field of only nulls fits any type.
func TestJSONLGivenStructSchema(t *testing.T) {
	data := []byte(`{"m": {"a": 1, "extra": "x"}, "n": null}` + "\n" + `{"m": {"a": null}, "n": null}` + "\n")
	given := []indexfile.Field{{Name: "m", Type: `struct<"a":float64,"b":bool>`}, {Name: "n", Type: "int64"}}
	if _, _, err := Scan(bytes.NewReader(data), JSONL, 1<<20, given); err != nil {
		t.Fatalf("a schema that holds every value: %v", err)
	}
	recs, err := Decode(data, JSONL, given, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := recs[0].Column(0).MarshalJSON()
	release(recs)
	if got = bytes.ReplaceAll(got, []byte("\n"), nil); string(got) != `[{"a":1,"b":null},{"a":null,"b":null}]` {
		t.Fatalf("m = %s", got)
	}
	given[0].Type = `struct<"a":bool>`
	_, _, err = Scan(bytes.NewReader(data), JSONL, 1<<20, given)
	if err == nil || !strings.Contains(err.Error(), `line 1: column "m" has a struct<"a":int64,"extra":utf8> value, the given schema says struct<"a":bool>`) {
		t.Fatalf("a struct field of another type: %v", err)
	}
}
