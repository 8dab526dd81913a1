package promote

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestTypes(t *testing.T) {
	i32, i64, u64 := arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint64
	f16, f32, f64 := arrow.FixedWidthTypes.Float16, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64
	str, bin := arrow.BinaryTypes.String, arrow.BinaryTypes.Binary
	tests := []struct {
		name string
		a, b arrow.DataType
		want arrow.DataType // nil: no promotion
	}{
		{"same", i32, i32, i32},
		{"large string (Parquet) and string (MDS str)", arrow.BinaryTypes.LargeString, str, str},
		{"large binary and binary", arrow.BinaryTypes.LargeBinary, bin, bin},
		{"int32 joins int64", i32, i64, i64},
		{"uint8 joins int64", arrow.PrimitiveTypes.Uint8, i64, i64},
		{"uint64 never joins int64", u64, i64, nil},
		{"float16 joins float64", f16, f64, f64},
		{"float32 and float16 do not meet", f32, f16, nil},
		{"int and float do not mix", i64, f64, nil},
		{"string and binary do not mix", str, bin, nil},
		{"fixed-size list joins list", arrow.FixedSizeListOf(2048, i32), arrow.ListOf(i32), arrow.ListOf(i32)},
		{"fixed-size lists of one length", arrow.FixedSizeListOf(4, i32), arrow.FixedSizeListOf(4, i64), arrow.FixedSizeListOf(4, i64)},
		{"fixed-size lists of two lengths become a list", arrow.FixedSizeListOf(4, i32), arrow.FixedSizeListOf(8, i32), arrow.ListOf(i32)},
		{"large list of int32 and list of int64", arrow.LargeListOf(i32), arrow.ListOf(i64), arrow.ListOf(i64)},
		{"lists of strings and ints", arrow.ListOf(str), arrow.ListOf(i64), nil},
		{"structs field by field",
			arrow.StructOf(arrow.Field{Name: "data", Type: arrow.ListOf(i32)}, arrow.Field{Name: "shape", Type: arrow.ListOf(i64)}),
			arrow.StructOf(arrow.Field{Name: "data", Type: arrow.ListOf(i64)}, arrow.Field{Name: "shape", Type: arrow.ListOf(i64)}),
			arrow.StructOf(arrow.Field{Name: "data", Type: arrow.ListOf(i64)}, arrow.Field{Name: "shape", Type: arrow.ListOf(i64)})},
		{"structs with other names", arrow.StructOf(arrow.Field{Name: "a", Type: i64}), arrow.StructOf(arrow.Field{Name: "b", Type: i64}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, order := range [][2]arrow.DataType{{tt.a, tt.b}, {tt.b, tt.a}} {
				got, ok := Types(order[0], order[1])
				if tt.want == nil {
					if ok {
						t.Fatalf("Types(%s, %s) = %s, want no promotion", order[0], order[1], got)
					}
					continue
				}
				if !ok || !arrow.TypeEqual(got, tt.want) {
					t.Fatalf("Types(%s, %s) = %v, %v; want %s", order[0], order[1], got, ok, tt.want)
				}
			}
		})
	}
}
