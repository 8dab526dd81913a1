package mds

// MDS datasets written by mosaicml-streaming's own MDSWriter, every
// encoding it has, each compression and hash, and each sample as MDS
// stores it, recorded in testdata/golden (test/oracle/mds_oracle.py record;
// make golden): every sample decodes here equal, value for value. (The
// other way, mosaicml-streaming reading what shardfeed writes, is
// oracle_integration_test.go.)

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/index/mdsindex"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// jsonLines parses JSON lines, numbers kept as written.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("oracle line %.200q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// readDir decodes every sample of an MDS directory, in order, as the
// oracle's canonical JSON.
func readDir(t *testing.T, dir string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := mdsindex.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range idx.Shards {
		stored, err := os.ReadFile(filepath.Join(dir, e.Stored().Basename))
		if err != nil {
			t.Fatal(err)
		}
		rec := decodeStored(t, stored, &e)
		for row := range int(rec.NumRows()) {
			m := map[string]any{}
			for f, field := range rec.Schema().Fields() {
				m[field.Name] = canonicalValue(t, field, rec.Column(f), row)
			}
			out = append(out, m)
		}
		rec.Release()
	}
	return out
}

func b64(b []byte) map[string]any { return map[string]any{"b64": base64.StdEncoding.EncodeToString(b)} }

// leBytes returns the values of a numeric array as little-endian bytes.
func leBytes(a arrow.Array, lo, hi int) (string, []byte) {
	var out []byte
	switch v := a.(type) {
	case *array.Uint8:
		out = append(out, v.Uint8Values()[lo:hi]...)
	case *array.Int8:
		for _, x := range v.Int8Values()[lo:hi] {
			out = append(out, byte(x))
		}
	case *array.Uint16:
		for _, x := range v.Uint16Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint16(out, x)
		}
	case *array.Int16:
		for _, x := range v.Int16Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint16(out, uint16(x))
		}
	case *array.Float16:
		for _, x := range v.Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint16(out, x.Uint16())
		}
	case *array.Uint32:
		for _, x := range v.Uint32Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint32(out, x)
		}
	case *array.Int32:
		for _, x := range v.Int32Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint32(out, uint32(x))
		}
	case *array.Float32:
		for i := lo; i < hi; i++ {
			out = binary.LittleEndian.AppendUint32(out, mathFloat32bits(v.Value(i)))
		}
	case *array.Uint64:
		for _, x := range v.Uint64Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint64(out, x)
		}
	case *array.Int64:
		for _, x := range v.Int64Values()[lo:hi] {
			out = binary.LittleEndian.AppendUint64(out, uint64(x))
		}
	case *array.Float64:
		for i := lo; i < hi; i++ {
			out = binary.LittleEndian.AppendUint64(out, mathFloat64bits(v.Value(i)))
		}
	}
	return a.DataType().Name(), out
}

func canonicalValue(t *testing.T, field arrow.Field, a arrow.Array, row int) any {
	enc, _ := field.Metadata.GetValue(MetaEncoding)
	base, _, _ := strings.Cut(enc, ":")
	switch base {
	case "bytes", "jpeg", "png", "pil":
		return b64(a.(*array.Binary).Value(row))
	case "str", "str_decimal":
		return a.(*array.String).Value(row)
	case "json":
		var v any
		dec := json.NewDecoder(strings.NewReader(a.(*array.String).Value(row)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("column %s: %v", field.Name, err)
		}
		return v
	case "list[jpeg]", "list[png]", "list[pil]", "jpeg_array", "jpegarray":
		l := a.(*array.List)
		lo, hi := l.ValueOffsets(row)
		var out []any
		for i := lo; i < hi; i++ {
			out = append(out, b64(l.ListValues().(*array.Binary).Value(int(i))))
		}
		return out
	case "ndarray":
		switch v := a.(type) {
		case *array.FixedSizeList:
			n := v.DataType().(*arrow.FixedSizeListType).Len()
			dt, data := leBytes(v.ListValues(), row*int(n), (row+1)*int(n))
			shapeText, _ := field.Metadata.GetValue(MetaShape)
			var shape []any
			for _, d := range strings.Split(shapeText, ",") {
				shape = append(shape, json.Number(d))
			}
			return map[string]any{"dtype": dtypeName(dt), "shape": shape, "b64": b64(data)["b64"]}
		case *array.Struct:
			shapeList := v.Field(v.NumField() - 1)
			if v.NumField() == 3 {
				shapeList = v.Field(1)
			}
			sl := shapeList.(*array.List)
			slo, shi := sl.ValueOffsets(row)
			var shape []any
			for _, d := range sl.ListValues().(*array.Int64).Int64Values()[slo:shi] {
				shape = append(shape, json.Number(fmt.Sprint(d)))
			}
			if v.NumField() == 3 {
				return map[string]any{"dtype": v.Field(0).(*array.String).Value(row), "shape": shape, "b64": b64(v.Field(2).(*array.Binary).Value(row))["b64"]}
			}
			dl := v.Field(0).(*array.List)
			lo, hi := dl.ValueOffsets(row)
			dt, data := leBytes(dl.ListValues(), int(lo), int(hi))
			return map[string]any{"dtype": dtypeName(dt), "shape": shape, "b64": b64(data)["b64"]}
		}
	}
	// Scalars: through JSON, as numbers.
	var x any
	switch v := a.(type) {
	case *array.Float16:
		x = float64(v.Value(row).Float32())
	case *array.Float32:
		x = float64(v.Value(row)) // exact, as Python widens
	default:
		x = a.GetOneForMarshal(row)
	}
	b, _ := json.Marshal(x)
	return json.Number(b)
}

func dtypeName(arrowName string) string {
	if arrowName == "halffloat" {
		return "float16"
	}
	if arrowName == "float" {
		return "float32"
	}
	if arrowName == "double" {
		return "float64"
	}
	return arrowName
}

// sameJSON compares canonical values, numbers by exact value.
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if !sameJSON(v, y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	}
	return a == b
}

func TestReadsWhatMosaicMLStreamingWrites(t *testing.T) {
	golden := testenv.Golden(t)
	for _, name := range []string{"raw", "zstd7", "gz", "bz2", "br5", "snappy"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := jsonLines(t, testenv.GoldenFile(t, golden, name+".jsonl"))
			got := readDir(t, filepath.Join(golden, name))
			if len(got) != len(want) || len(want) == 0 {
				t.Fatalf("decoded %d samples, mosaicml-streaming wrote %d", len(got), len(want))
			}
			for s := range want {
				for col, w := range want[s] {
					if !sameJSON(got[s][col], w) {
						gb, _ := json.Marshal(got[s][col])
						wb, _ := json.Marshal(w)
						t.Fatalf("sample %d column %s:\n got %.300s\nwant %.300s", s, col, gb, wb)
					}
				}
			}
		})
	}
}
