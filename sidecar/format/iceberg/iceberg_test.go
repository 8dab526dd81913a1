package iceberg

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

func ids(n int64) arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(i)
	}
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, n)
}

// keep serves exactly the rows no run deletes, across the batches of a
// row group.
func TestKeepSlicesOutTheDeletedRuns(t *testing.T) {
	tests := []struct {
		name    string
		start   int64
		deleted []indexfile.Run
		want    []int64
	}{
		{"none", 0, nil, []int64{0, 1, 2, 3, 4, 5}},
		{"inside", 0, []indexfile.Run{{1, 3}}, []int64{0, 3, 4, 5}},
		{"edges", 0, []indexfile.Run{{0, 1}, {5, 6}}, []int64{1, 2, 3, 4}},
		{"all", 0, []indexfile.Run{{0, 6}}, nil},
		{"a later batch", 10, []indexfile.Run{{2, 11}, {13, 14}, {20, 30}}, []int64{1, 2, 4, 5}},
		{"runs before and after", 10, []indexfile.Run{{0, 5}, {16, 18}}, []int64{0, 1, 2, 3, 4, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := ids(6)
			defer rec.Release()
			var got []int64
			for _, r := range format.Undeleted(rec, tt.start, tt.deleted) {
				got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
				r.Release()
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("kept %v, want %v", got, tt.want)
			}
		})
	}
}

// Iceberg's promotions widen, nulls kept; anything else is refused.
func TestWiden(t *testing.T) {
	i32 := array.NewInt32Builder(memory.DefaultAllocator)
	i32.AppendValues([]int32{1, -2}, nil)
	i32.AppendNull()
	ints := i32.NewArray()
	f32 := array.NewFloat32Builder(memory.DefaultAllocator)
	f32.AppendValues([]float32{0.5}, nil)
	floats := f32.NewArray()
	tests := []struct {
		name    string
		col     arrow.Array
		to      arrow.DataType
		want    string
		wantErr bool
	}{
		{"int to long", ints, arrow.PrimitiveTypes.Int64, "[1 -2 (null)]", false},
		{"float to double", floats, arrow.PrimitiveTypes.Float64, "[0.5]", false},
		{"same type", ints, arrow.PrimitiveTypes.Int32, "[1 -2 (null)]", false},
		{"int to string", ints, arrow.BinaryTypes.String, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := widen(tt.col, tt.to)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("widen to %s = %v, want an error", tt.to, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if !arrow.TypeEqual(got.DataType(), tt.to) || got.String() != tt.want {
				t.Errorf("widen = %s %s, want %s %s", got.DataType(), got, tt.to, tt.want)
			}
		})
	}
}
