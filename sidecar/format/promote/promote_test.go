package promote

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

func TestCastServesEveryPromotion(t *testing.T) {
	ctx := context.Background()
	mem := memory.DefaultAllocator
	fsl := func() arrow.Array {
		b := array.NewFixedSizeListBuilder(mem, 2, arrow.PrimitiveTypes.Int32)
		defer b.Release()
		v := b.ValueBuilder().(*array.Int32Builder)
		b.Append(true)
		v.AppendValues([]int32{1, 2}, nil)
		b.AppendNull() // appends the null slot's child values itself
		b.Append(true)
		v.AppendValues([]int32{5, 6}, nil)
		return b.NewArray()
	}
	large := func() arrow.Array {
		b := array.NewLargeListBuilder(mem, arrow.PrimitiveTypes.Float32)
		defer b.Release()
		v := b.ValueBuilder().(*array.Float32Builder)
		b.Append(true)
		v.AppendValues([]float32{1.5}, nil)
		b.Append(true)
		b.Append(true)
		v.AppendValues([]float32{2, 3}, nil)
		return b.NewArray()
	}
	structOf := func() arrow.Array {
		b := array.NewStructBuilder(mem, arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int16, Nullable: true}))
		defer b.Release()
		b.Append(true)
		b.FieldBuilder(0).(*array.Int16Builder).Append(7)
		b.Append(true)
		b.FieldBuilder(0).(*array.Int16Builder).Append(-1)
		return b.NewArray()
	}
	tests := []struct {
		name string
		in   func() arrow.Array
		to   arrow.DataType
		want string
	}{
		{"fixed-size list to list of int64", fsl, arrow.ListOf(arrow.PrimitiveTypes.Int64), "[[1 2] (null) [5 6]]"},
		{"fixed-size list to fixed-size list of int64", fsl, arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int64), "[[1 2] (null) [5 6]]"},
		{"large list of float32 to list of float64", large, arrow.ListOf(arrow.PrimitiveTypes.Float64), "[[1.5] [] [2 3]]"},
		{"struct field by field", structOf, arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}), "{[7 -1]}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in()
			defer in.Release()
			for _, a := range []arrow.Array{in, array.NewSlice(in, 1, int64(in.Len()))} {
				out, err := Cast(ctx, a, tt.to)
				if err != nil {
					t.Fatal(err)
				}
				if !arrow.TypeEqual(out.DataType(), tt.to) {
					t.Errorf("type %s, want %s", out.DataType(), tt.to)
				}
				if a == in && out.String() != tt.want {
					t.Errorf("got %s, want %s", out.String(), tt.want)
				}
				if a != in && out.Len() != in.Len()-1 {
					t.Errorf("slice: %d rows, want %d", out.Len(), in.Len()-1)
				}
				out.Release()
			}
		})
	}
}
