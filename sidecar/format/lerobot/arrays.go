package lerobot

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A feature of two or more axes (shape [2, 3] in info.json) is stored by
// Hugging Face's ArrayND as lists of lists, whose lengths the type does
// not say; LeRobotDataset gives it as a tensor of its shape. shardfeed
// serves it as fixed-size lists of those lengths, so its rows are a
// tensor (B, 2, 3) in the trainer and it can be windowed.

// arrayType is the fixed-size type a stored column of lists nested as
// deep as shape is served as: fixed-size lists of shape's lengths, of its
// innermost values.
func arrayType(stored arrow.DataType, shape []int) (arrow.DataType, error) {
	if len(shape) == 0 {
		if _, ok := stored.(arrow.FixedWidthDataType); !ok {
			return nil, fmt.Errorf("values of %s, not numbers or booleans", stored)
		}
		return stored, nil
	}
	var elem arrow.DataType
	switch t := stored.(type) {
	case *arrow.ListType:
		elem = t.Elem()
	case *arrow.LargeListType:
		elem = t.Elem()
	case *arrow.FixedSizeListType:
		if int(t.Len()) != shape[0] {
			return nil, fmt.Errorf("lists of %d values where its shape says %d", t.Len(), shape[0])
		}
		elem = t.Elem()
	default:
		return nil, fmt.Errorf("%s, not lists nested %d deep", stored, len(shape))
	}
	inner, err := arrayType(elem, shape[1:])
	if err != nil {
		return nil, err
	}
	return arrow.FixedSizeListOf(int32(shape[0]), inner), nil //nolint:gosec // info.json's dimensions are checked to 1<<20
}

// asArray converts a stored column of nested lists to t (arrayType's),
// checking that every list has its shape's length and none is null: the
// first that does not names its frame.
func asArray(a arrow.Array, t arrow.DataType) (arrow.Array, error) {
	data, err := arrayData(a, t, "frame")
	if err != nil {
		return nil, err
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}

// arrayData is a's data as t; row names a's rows in errors (the
// column's are its episode's frames, a nested list's are lists).
func arrayData(a arrow.Array, t arrow.DataType, row string) (arrow.ArrayData, error) {
	fixed, ok := t.(*arrow.FixedSizeListType)
	if !ok {
		if a.NullN() > 0 {
			return nil, fmt.Errorf("%s %d holds a null value", row, firstNull(a))
		}
		a.Data().Retain()
		return a.Data(), nil
	}
	if a.NullN() > 0 {
		return nil, fmt.Errorf("%s %d is null", row, firstNull(a))
	}
	n := int64(fixed.Len())
	var child arrow.Array
	switch l := a.(type) {
	case array.ListLike: // lists and large lists: their offsets must step by n
		for i := range a.Len() {
			start, end := l.ValueOffsets(i)
			if end-start != n {
				return nil, fmt.Errorf("%s %d holds %d values, and its shape says %d", row, i, end-start, n)
			}
			if first, _ := l.ValueOffsets(0); start != first+int64(i)*n {
				return nil, fmt.Errorf("%s %d's values are not where its lists' are", row, i)
			}
		}
		first := int64(0)
		if a.Len() > 0 {
			first, _ = l.ValueOffsets(0)
		}
		child = array.NewSlice(l.ListValues(), first, first+int64(a.Len())*n)
	default:
		return nil, fmt.Errorf("%s is not a list", a.DataType())
	}
	defer child.Release()
	inner, err := arrayData(child, fixed.Elem(), "inner list")
	if err != nil {
		return nil, err
	}
	defer inner.Release()
	return array.NewData(t, a.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{inner}, 0, 0), nil
}

func firstNull(a arrow.Array) int {
	for i := range a.Len() {
		if a.IsNull(i) {
			return i
		}
	}
	return -1
}

// torchType is the type LeRobotDataset gives a data column's values as:
// its hf_transform_to_torch makes a tensor of each value's Python list
// (torch.tensor), so every float is float32 (torch's default) and every
// integer int64, whatever the Parquet stored; lists of them keep their
// lengths. Other types (strings, structs) are served as stored.
func torchType(t arrow.DataType) arrow.DataType {
	switch t := t.(type) {
	case *arrow.FixedSizeListType:
		return arrow.FixedSizeListOf(t.Len(), torchType(t.Elem()))
	case *arrow.ListType:
		return arrow.ListOf(torchType(t.Elem()))
	case *arrow.LargeListType:
		return arrow.LargeListOf(torchType(t.Elem()))
	}
	switch {
	case arrow.IsFloating(t.ID()):
		return arrow.PrimitiveTypes.Float32
	case arrow.IsInteger(t.ID()):
		return arrow.PrimitiveTypes.Int64
	}
	return t
}

// castLeaves casts a's values, inside its lists, to those of t (a's
// shape with other leaves: torchType's), keeping its lists and nulls
// (Arrow's cast has no kernel for fixed-size lists).
func castLeaves(ctx context.Context, a arrow.Array, t arrow.DataType) (arrow.Array, error) {
	var child arrow.Array
	var elem arrow.DataType
	switch l := a.(type) {
	case *array.FixedSizeList:
		child, elem = l.ListValues(), t.(*arrow.FixedSizeListType).Elem()
	case *array.List:
		child, elem = l.ListValues(), t.(*arrow.ListType).Elem()
	case *array.LargeList:
		child, elem = l.ListValues(), t.(*arrow.LargeListType).Elem()
	default:
		return compute.CastArray(ctx, a, compute.SafeCastOptions(t))
	}
	inner, err := castLeaves(ctx, child, elem)
	if err != nil {
		return nil, err
	}
	defer inner.Release()
	src := a.Data()
	data := array.NewData(t, src.Len(), src.Buffers(), []arrow.ArrayData{inner.Data()}, src.NullN(), src.Offset())
	defer data.Release()
	return array.MakeFromData(data), nil
}
