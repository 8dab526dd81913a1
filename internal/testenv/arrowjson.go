package testenv

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Row is row i of rec as the repository's pyarrow scripts write rows
// (test/orc): column name → value, binary as hex, dates as days,
// timestamps as integers of their unit, float32s as the doubles they
// widen to. Only the
// columns keep takes (nil: all).
func Row(rec arrow.RecordBatch, i int, keep func(name string) bool) map[string]any {
	m := map[string]any{}
	for col, field := range rec.Schema().Fields() {
		if keep == nil || keep(field.Name) {
			m[field.Name] = Plain(rec.Column(col), i)
		}
	}
	return m
}

// Plain is value i of a as the pyarrow scripts write it.
func Plain(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Binary:
		return hex.EncodeToString(a.Value(i))
	case *array.LargeBinary:
		return hex.EncodeToString(a.Value(i))
	case *array.FixedSizeBinary:
		return hex.EncodeToString(a.Value(i))
	case *array.Float32: // as the double it widens to, as Python prints it
		return float64(a.Value(i))
	case *array.Float16: // decoded here: arrow-go's Float32 gets subnormals wrong
		return halfFloat(a.Value(i).Uint16())
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Decimal128: // every digit of the scale, as Python's Decimal prints it
		scale := int(a.DataType().(*arrow.Decimal128Type).Scale)
		digits := a.Value(i).BigInt().String()
		sign := ""
		if digits[0] == '-' {
			sign, digits = "-", digits[1:]
		}
		if scale == 0 {
			return sign + digits
		}
		if scale < 0 { // the unscaled digits and the exponent: 1E+2 is not 1
			return sign + digits + "E+" + strconv.Itoa(-scale)
		}
		for len(digits) <= scale {
			digits = "0" + digits
		}
		return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	case *array.LargeList:
		lo, hi := a.ValueOffsets(i)
		out := []any{}
		for j := lo; j < hi; j++ {
			out = append(out, Plain(a.ListValues(), int(j)))
		}
		return out
	case *array.Date32:
		return int64(a.Value(i))
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		out := []any{}
		for j := lo; j < hi; j++ {
			out = append(out, Plain(a.ListValues(), int(j)))
		}
		return out
	case *array.FixedSizeList:
		n := int(a.DataType().(*arrow.FixedSizeListType).Len())
		out := []any{}
		for j := (a.Offset() + i) * n; j < (a.Offset()+i+1)*n; j++ {
			out = append(out, Plain(a.ListValues(), j))
		}
		return out
	case *array.Struct:
		out := map[string]any{}
		for f, field := range a.DataType().(*arrow.StructType).Fields() {
			out[field.Name] = Plain(a.Field(f), i)
		}
		return out
	}
	return a.GetOneForMarshal(i)
}

// Canonical is v as JSON in one form, whoever wrote it: keys sorted,
// 0.0 and 0 one number, int64s whole; -0.0 stays -0 (a reader that
// returns +0 for it is wrong, and the oracles print it so).
func Canonical(t testing.TB, v any) string {
	t.Helper()
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

func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil && (i != 0 || !strings.HasPrefix(string(v), "-")) {
			return i
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u
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

// halfFloat is the value of IEEE 754 binary16 bits.
func halfFloat(h uint16) float64 {
	sign, exp, frac := 1.0, int(h>>10&0x1f), float64(h&0x3ff)
	if h&0x8000 != 0 {
		sign = -1
	}
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}
