package expr

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// records is 10 rows: id 0..9, lang "en"/"fr" alternating (null at 7),
// score id/2 as float32, flag id%3==0, blob the id's byte, and tokens, a
// list a filter cannot read.
func records(t *testing.T) arrow.RecordBatch {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int32},
		{Name: "lang", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float32},
		{Name: "flag", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := range 10 {
		b.Field(0).(*array.Int32Builder).Append(int32(i))
		if i == 7 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append([]string{"en", "fr"}[i%2])
		}
		b.Field(2).(*array.Float32Builder).Append(float32(i) / 2)
		b.Field(3).(*array.BooleanBuilder).Append(i%3 == 0)
		b.Field(4).(*array.BinaryBuilder).Append([]byte{byte(i)})
		lb := b.Field(5).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.Int32Builder).Append(int32(i))
	}
	return b.NewRecordBatch()
}

func TestRowsSelectsTheMatchingRowsAsRuns(t *testing.T) {
	rec := records(t)
	defer rec.Release()
	cols := ColumnsOf(rec.Schema())
	if got := fmt.Sprint(cols); got != "[{id int64} {lang utf8} {score float64} {flag bool} {blob binary}]" {
		t.Fatalf("ColumnsOf = %s", got)
	}
	for _, tc := range []struct {
		src, want string
	}{
		{"id < 3 || id >= 8", "[[0 3] [8 10]] 5"},
		{"lang == 'en'", "[[0 1] [2 3] [4 5] [6 7] [8 9]] 5"},
		{"lang == null", "[[7 8]] 1"},
		{"lang != null && lang.startsWith('f') && score > 1.0", "[[3 4] [5 6] [9 10]] 3"},
		{"flag", "[[0 1] [3 4] [6 7] [9 10]] 4"},
		{"blob == b'\\x02'", "[[2 3]] 1"},
		{"id > 100", "[] 0"},
	} {
		e, err := Compile(tc.src, cols)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		runs, err := e.Rows(rec)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got := fmt.Sprintf("%v %d", runs, runs.Count()); got != tc.want {
			t.Errorf("%s: %v %d, want %s", tc.src, runs, runs.Count(), tc.want)
		}
	}
	// A list column is not one a filter reads.
	if _, err := Compile("size(tokens) > 0", cols); err == nil || !strings.Contains(err.Error(), "no column tokens") {
		t.Fatalf("a list column: %v", err)
	}
	// A null compared with < is null: its row is not kept.
	e, err := Compile("lang < 'g'", cols)
	if err != nil {
		t.Fatal(err)
	}
	if runs, err := e.Rows(rec); err != nil || slices.ContainsFunc(runs, func(r [2]int64) bool { return r[0] <= 7 && 7 < r[1] }) {
		t.Fatalf("a null compared: %v, %v", runs, err)
	}
}
