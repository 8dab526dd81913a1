package shardfeed

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// packedRecord is two packed rows of 4 tokens as the sidecar serves them:
// [1 2 | 3 _] and [4 5 6 7].
func packedRecord(t *testing.T) arrow.RecordBatch {
	t.Helper()
	fixed := func(typ arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(memory.DefaultAllocator, arrow.FixedSizeListOf(4, typ), strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	list := func(typ arrow.DataType, js string) arrow.Array {
		a, _, err := array.FromJSON(memory.DefaultAllocator, arrow.ListOf(typ), strings.NewReader(js))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	cols := []arrow.Array{
		fixed(arrow.PrimitiveTypes.Int32, `[[1,2,3,0],[4,5,6,7]]`),
		fixed(arrow.PrimitiveTypes.Int32, `[[0,1,0,0],[0,1,2,3]]`),
		fixed(arrow.PrimitiveTypes.Uint8, `[[1,1,1,0],[1,1,1,1]]`),
		list(arrow.PrimitiveTypes.Int32, `[[0,2,3],[0,4]]`),
		list(arrow.PrimitiveTypes.Int64, `[[10,11],[12]]`),
	}
	var fields []arrow.Field
	for i, name := range []string{"tokens", ColumnPositionIDs, ColumnLossMask, ColumnCuSeqlens, ColumnDocIDs} {
		fields = append(fields, arrow.Field{Name: name, Type: cols[i].DataType()})
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, 2)
}

// A packed batch reads in place: each row's pieces and documents, and the
// batch's boundaries flattened with each row's padding a segment; a batch
// that is not packed is refused naming what it lacks.
func TestReadPacked(t *testing.T) {
	rec := packedRecord(t)
	p, err := ReadPacked(rec, "tokens")
	if err != nil {
		t.Fatal(err)
	}
	cu, docs := p.Row(0)
	flat, longest := p.FlatCuSeqlens()
	if got := fmt.Sprint(p.Rows, p.SeqLen, cu, docs, p.PositionIDs[:4], flat, longest, p.Tokens.Len()); got != "2 4 [0 2 3] [10 11] [0 1 0 0] [0 2 3 4 8] 4 8" {
		t.Fatalf("read %s", got)
	}
	if !slices.Equal(p.LossMask, []uint8{1, 1, 1, 0, 1, 1, 1, 1}) {
		t.Fatalf("loss mask %v", p.LossMask)
	}
	if _, err := ReadPacked(rec, "input_ids"); err == nil || !strings.Contains(err.Error(), `no column "input_ids"`) {
		t.Fatalf("another tokens column: %v", err)
	}
	second, err := ReadPacked(rec.NewSlice(1, 2), "tokens")
	if err != nil {
		t.Fatalf("a slice: %v", err)
	}
	cu, docs = second.Row(0)
	if got := fmt.Sprint(cu, docs, second.PositionIDs, second.Tokens); got != "[0 4] [12] [0 1 2 3] [4 5 6 7]" {
		t.Fatalf("the second row alone: %s", got)
	}
}
