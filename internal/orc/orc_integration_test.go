//go:build integration

package orc_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/orc"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// pyarrowFiles writes test/orc/files.py's files into a fresh directory.
func pyarrowFiles(t *testing.T, rows int) string {
	t.Helper()
	dir := t.TempDir()
	testenv.PythonScript(t, "venv", "test/orc/files.py", dir, fmt.Sprint(rows))
	return dir
}

// plain is a value as files.py writes it: binary as hex, dates as days.
func plain(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Binary:
		return hex.EncodeToString(a.Value(i))
	case *array.Date32:
		return int64(a.Value(i))
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		out := []any{}
		for j := lo; j < hi; j++ {
			out = append(out, plain(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		out := map[string]any{}
		for f, field := range a.DataType().(*arrow.StructType).Fields() {
			out[field.Name] = plain(a.Field(f), i)
		}
		return out
	}
	return a.GetOneForMarshal(i)
}

func canonical(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(numbers(m))
	return string(b)
}

// numbers makes 0.0 and 0 one number, keeping int64s whole.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	}
	return v
}

// Every compression pyarrow writes, dictionary-encoded strings and RLE v1
// (file version 0.11) read back, stripe by stripe, as pyarrow reads them.
func TestIntegrationPyarrowFilesReadAsPyarrowReadsThem(t *testing.T) {
	dir := pyarrowFiles(t, 20000)
	for _, c := range []string{"uncompressed", "zlib", "snappy", "zstd", "lz4", "dictionary", "v0.11"} {
		t.Run(c, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, c+".orc"))
			if err != nil {
				t.Fatal(err)
			}
			size := int64(len(data))
			n, err := orc.TailLength(size, data[max(0, len(data)-orc.TailSize):])
			if err != nil {
				t.Fatal(err)
			}
			f, err := orc.ParseTail(size, data[size-n:])
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Stripes) < 2 {
				t.Errorf("%d stripes: the test wants several", len(f.Stripes))
			}
			want, err := os.Open(filepath.Join(dir, c+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = want.Close() }()
			sc := bufio.NewScanner(want)
			sc.Buffer(nil, 1<<20)
			row := 0
			for i, s := range f.Stripes {
				rec, err := f.ReadStripe(data[s.Offset:s.Offset+s.Length()], i, nil, 0, memory.DefaultAllocator)
				if err != nil {
					t.Fatalf("stripe %d: %v", i, err)
				}
				for r := range int(rec.NumRows()) {
					m := map[string]any{}
					for col, field := range rec.Schema().Fields() {
						m[field.Name] = plain(rec.Column(col), r)
					}
					if !sc.Scan() {
						t.Fatalf("row %d: pyarrow read fewer rows", row)
					}
					got, exp := canonical(t, m), canonical(t, json.RawMessage(sc.Bytes()))
					if got != exp {
						t.Fatalf("stripe %d row %d (file row %d):\n got %s\nwant %s", i, r, row, got, exp)
					}
					row++
				}
				rec.Release()
			}
			if sc.Scan() || row != 20000 {
				t.Fatalf("read %d rows, pyarrow reads 20000", row)
			}
		})
	}
}
