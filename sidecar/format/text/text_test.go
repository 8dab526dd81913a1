package text

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index"
)

func decodeAll(t *testing.T, data []byte, kind *Format, fields []index.Field, chunks []Chunk, columns []string) []arrow.RecordBatch {
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
	fields, chunks, err := Scan(bytes.NewReader(data), JSONL, 4096)
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
	fields := []index.Field{{Name: "id", Type: "int64"}}
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
			fields, chunks, err := Scan(bytes.NewReader(data), kind, 1000)
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
	tests := []struct {
		kind       *Format
		data, want string
	}{
		{JSONL, "", "no JSON records"},
		{JSONL, "{\"a\": 1}\n[1, 2]\n", "line 2 is not a JSON object"},
		{CSV, "", "header row"},
		{CSV, "a,a\n1,2\n", "unique and non-empty"},
		{CSV, "a,b\n", "no records"},
		{CSV, "a,b\n1,2,3\n", "wrong number of fields"},
	}
	for _, tt := range tests {
		if _, _, err := Scan(strings.NewReader(tt.data), tt.kind, 100); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Scan(%s, %q) = %v, want %q", tt.kind, tt.data, err, tt.want)
		}
	}
}

// FuzzScan: malformed text gives an error, never a panic; chunks always
// tile the input.
func FuzzScan(f *testing.F) {
	f.Add([]byte("{\"a\": 1}\n{\"a\": [1.5]}\n"), true)
	f.Add([]byte("a,b\n1,\"x\ny\"\n2,3\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, jsonl bool) {
		kind := CSV
		if jsonl {
			kind = JSONL
		}
		fields, chunks, err := Scan(bytes.NewReader(data), kind, 16)
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
			}
		}
	})
}

func TestJSONLObjectsAndMixedValuesBecomeJSONText(t *testing.T) {
	data := []byte("{\"m\": {\"a\": [1, 2]}, \"x\": 1}\n{\"m\": \"plain\", \"x\": \"one\"}\n")
	fields, chunks, err := Scan(bytes.NewReader(data), JSONL, 1<<20)
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
