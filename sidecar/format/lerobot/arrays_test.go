package lerobot

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A feature of shape [2, 3] stored as lists of lists (Hugging Face's
// Array2D) is served as fixed-size lists of 2 of 3: every row checked,
// the first list of another length, or a null, named.
func TestArraysOfTheirShape(t *testing.T) {
	nested := func(t *testing.T, rows [][][]float32, nullRow int) arrow.Array {
		t.Helper()
		b := array.NewListBuilder(memory.DefaultAllocator, arrow.ListOf(arrow.PrimitiveTypes.Float32))
		defer b.Release()
		inner := b.ValueBuilder().(*array.ListBuilder)
		vals := inner.ValueBuilder().(*array.Float32Builder)
		for i, r := range rows {
			if i == nullRow {
				b.AppendNull()
				continue
			}
			b.Append(true)
			for _, l := range r {
				inner.Append(true)
				vals.AppendValues(l, nil)
			}
		}
		return b.NewArray()
	}
	good := [][][]float32{{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}}
	short := [][][]float32{{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11}}}
	three := [][][]float32{{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}, {13, 14, 15}}}
	for _, tc := range []struct {
		name    string
		rows    [][][]float32
		nullRow int
		shape   []int
		want    string // "" for the values 1..12 as [2][2][3]
	}{
		{"lists of lists", good, -1, []int{2, 3}, ""},
		{"an inner list short", short, -1, []int{2, 3}, "inner list 3 holds 2 values, and its shape says 3"},
		{"a frame of three lists", three, -1, []int{2, 3}, "frame 1 holds 3 values, and its shape says 2"},
		{"a null frame", good, 1, []int{2, 3}, "frame 1 is null"},
		{"a shape of another length", good, -1, []int{2, 4}, "holds 3 values, and its shape says 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := nested(t, tc.rows, tc.nullRow)
			defer a.Release()
			typ, err := arrayType(a.DataType(), tc.shape)
			if err != nil {
				t.Fatal(err)
			}
			got, err := asArray(a, typ)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.DataType().String() != "fixed_size_list<item: fixed_size_list<item: float32, nullable>[3], nullable>[2]" {
				t.Fatalf("served as %s", got.DataType())
			}
			flat := got.(*array.FixedSizeList).ListValues().(*array.FixedSizeList).ListValues().(*array.Float32).Float32Values()
			for i, v := range flat {
				if v != float32(i+1) {
					t.Fatalf("value %d is %v", i, flat)
				}
			}
		})
	}
	if typ, err := arrayType(arrow.ListOf(arrow.ListOf(arrow.FixedWidthTypes.Boolean)), []int{2, 2}); err != nil || typ.String() != "fixed_size_list<item: fixed_size_list<item: bool, nullable>[2], nullable>[2]" {
		t.Errorf("booleans of shape [2, 2]: %v, %v", typ, err)
	}
	for _, tc := range []struct {
		name   string
		stored arrow.DataType
		shape  []int
		want   string
	}{
		{"not nested deep enough", arrow.ListOf(arrow.PrimitiveTypes.Float32), []int{2, 3}, "float32, not lists nested 1 deep"},
		{"a fixed-size list of another length", arrow.FixedSizeListOf(4, arrow.ListOf(arrow.PrimitiveTypes.Int64)), []int{2, 3}, "lists of 4 values where its shape says 2"},
		{"strings", arrow.ListOf(arrow.ListOf(arrow.BinaryTypes.String)), []int{2, 3}, "not numbers or booleans"},
	} {
		if _, err := arrayType(tc.stored, tc.shape); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
