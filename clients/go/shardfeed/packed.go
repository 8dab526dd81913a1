package shardfeed

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The columns of a packed batch (spec.packing; docs/planner.md, packing)
// besides the tokens, which keep their column's name.
const (
	// ColumnPositionIDs (int32, L a row) restart at 0 at each piece.
	ColumnPositionIDs = "position_ids"
	// ColumnLossMask (uint8, L a row) is 1 at a token, 0 at padding.
	ColumnLossMask = "loss_mask"
	// ColumnCuSeqlens (a list of int32 a row) are the pieces' boundaries
	// in the row: 0, then each piece's end.
	ColumnCuSeqlens = "cu_seqlens"
	// ColumnDocIDs (a list of int64 a row) are the global ids of the
	// pieces' documents.
	ColumnDocIDs = "doc_ids"
)

// Packed is a packed batch's columns, read in place from its record.
type Packed struct {
	// Rows packs of SeqLen tokens each.
	Rows, SeqLen int
	// Tokens are the rows' token ids, row after row (Rows·SeqLen), of the
	// column's integer type.
	Tokens arrow.Array
	// PositionIDs and LossMask, row after row (Rows·SeqLen).
	PositionIDs []int32
	LossMask    []uint8
	cu, docs    *array.List
}

// ReadPacked reads the packed columns of rec, whose tokens are column
// tokens; a record that is not a packed batch is an error naming what it
// lacks.
func ReadPacked(rec arrow.RecordBatch, tokens string) (*Packed, error) {
	col := func(name string) (arrow.Array, error) {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("the batch has no column %q: not a packed batch (spec.packing), or another tokens column", name)
		}
		return rec.Column(idx[0]), nil
	}
	p := &Packed{Rows: int(rec.NumRows())}
	var fixed [3]*array.FixedSizeList
	for i, name := range []string{tokens, ColumnPositionIDs, ColumnLossMask} {
		c, err := col(name)
		if err != nil {
			return nil, err
		}
		if fixed[i], _ = c.(*array.FixedSizeList); fixed[i] == nil {
			return nil, fmt.Errorf("column %q is %s, not a fixed-size list: not a packed batch", name, c.DataType())
		}
	}
	p.SeqLen = int(fixed[0].DataType().(*arrow.FixedSizeListType).Len())
	n := int64(p.Rows * p.SeqLen)
	at := func(f *array.FixedSizeList) arrow.Array {
		start := int64(f.Offset() * p.SeqLen)
		return array.NewSlice(f.ListValues(), start, start+n)
	}
	p.Tokens = at(fixed[0])
	pos, ok1 := at(fixed[1]).(*array.Int32)
	mask, ok2 := at(fixed[2]).(*array.Uint8)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("position_ids or loss_mask is not of int32 or uint8: not a packed batch")
	}
	p.PositionIDs, p.LossMask = pos.Int32Values(), mask.Uint8Values()
	for _, c := range []struct {
		name string
		dst  **array.List
	}{{ColumnCuSeqlens, &p.cu}, {ColumnDocIDs, &p.docs}} {
		a, err := col(c.name)
		if err != nil {
			return nil, err
		}
		if *c.dst, _ = a.(*array.List); *c.dst == nil {
			return nil, fmt.Errorf("column %q is %s, not a list: not a packed batch", c.name, a.DataType())
		}
	}
	return p, nil
}

// Row returns row r's pieces: their boundaries (0, then each one's end)
// and their documents.
func (p *Packed) Row(r int) (cuSeqlens []int32, docIDs []int64) {
	s, e := p.cu.ValueOffsets(r)
	cuSeqlens = p.cu.ListValues().(*array.Int32).Int32Values()[s:e]
	s, e = p.docs.ValueOffsets(r)
	return cuSeqlens, p.docs.ListValues().(*array.Int64).Int64Values()[s:e]
}

// FlatCuSeqlens returns the boundaries of every piece of the batch
// flattened to one sequence of Rows·SeqLen tokens, each row's padding a
// segment of its own (what flash-attention's variable-length kernels
// take), and the longest segment.
func (p *Packed) FlatCuSeqlens() (bounds []int32, longest int) {
	bounds = []int32{0}
	for r := range p.Rows {
		cu, _ := p.Row(r)
		base := int32(r * p.SeqLen) //nolint:gosec // a batch's tokens
		prev := int32(0)
		for _, end := range cu[1:] {
			bounds = append(bounds, base+end)
			longest = max(longest, int(end-prev))
			prev = end
		}
		if prev < int32(p.SeqLen) { //nolint:gosec // at most 2^20
			bounds = append(bounds, base+int32(p.SeqLen)) //nolint:gosec // as above
			longest = max(longest, p.SeqLen-int(prev))
		}
	}
	return bounds, longest
}
