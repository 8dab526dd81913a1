package parquet

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
)

// A row group's statistics are given for the columns a filter compares
// as Parquet orders them (signed integers, floats, booleans, UTF-8), with
// their null counts, and left out for the others (unsigned integers,
// binary, dates, lists). A zero minimum is written -0, as the spec asks.
func TestStatsGiveWhatAFilterCanCompare(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32},
		{Name: "d", Type: arrow.PrimitiveTypes.Float64},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "bin", Type: arrow.BinaryTypes.Binary},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 20 {
		if i%5 == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int32Builder).Append(int32(i - 10))
		}
		b.Field(1).(*array.Uint32Builder).Append(uint32(i) << 28)
		b.Field(2).(*array.Float32Builder).Append(float32(i) / 4)
		b.Field(3).(*array.Float64Builder).Append(float64(i) / 2)
		b.Field(4).(*array.BooleanBuilder).Append(i >= 10)
		b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("s%02d", i))
		b.Field(6).(*array.BinaryBuilder).Append([]byte{byte(i)})
		b.Field(7).(*array.Date32Builder).Append(arrow.Date32(i))
		lb := b.Field(8).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int64Builder).Append(int64(i))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	data := fileOf(t, rec, pq.NewWriterProperties(pq.WithMaxRowGroupLength(10)))
	size := int64(len(data))
	n := int64(data[size-8]) | int64(data[size-7])<<8 | int64(data[size-6])<<16
	tail := data[size-8-n:]
	for rg, want := range []string{
		"b:{false false 0 true} d:{-0 4.5 0 true} f:{-0 2.25 0 true} i32:{-9 -1 2 true} s:{s00 s09 0 true}",
		"b:{true true 0 true} d:{5 9.5 0 true} f:{2.5 4.75 0 true} i32:{1 9 2 true} s:{s10 s19 0 true}",
	} {
		st, err := Stats(size, tail, rg)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, name := range []string{"b", "bin", "d", "day", "f", "i32", "l", "s", "u32"} {
			if s, ok := st[name]; ok {
				got += fmt.Sprintf(" %s:%v", name, s)
			}
		}
		if got[1:] != want {
			t.Errorf("row group %d: %s\nwant %s", rg, got[1:], want)
		}
	}
	if _, err := Stats(size, tail, 2); err == nil {
		t.Error("row group 2 of 2: no error")
	}
	if _, err := Stats(size, tail[:len(tail)-1], 0); err == nil {
		t.Error("a tail without PAR1: no error")
	}
}
