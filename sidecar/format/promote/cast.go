package promote

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Cast converts arr to the type Types chose for it. arrow-go's cast kernels
// cover the scalar promotions; lists, fixed-size lists and structs are cast
// here, element by element, since its kernels do not take fixed-size lists.
// The result is a new reference the caller releases.
func Cast(ctx context.Context, arr arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), to) {
		arr.Retain()
		return arr, nil
	}
	switch tt := to.(type) {
	case *arrow.ListType:
		return castToList(ctx, arr, tt)
	case *arrow.FixedSizeListType:
		src, ok := arr.(*array.FixedSizeList)
		if !ok {
			break
		}
		n := int64(tt.Len())
		off := int64(src.Data().Offset())
		child := array.NewSlice(src.ListValues(), off*n, (off+int64(src.Len()))*n)
		defer child.Release()
		elems, err := Cast(ctx, child, tt.Elem())
		if err != nil {
			return nil, err
		}
		defer elems.Release()
		data := array.NewData(tt, src.Len(), []*memory.Buffer{validity(src)}, []arrow.ArrayData{elems.Data()}, src.NullN(), 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	case *arrow.StructType:
		src, ok := arr.(*array.Struct)
		if !ok {
			break
		}
		st := src.DataType().(*arrow.StructType)
		if st.NumFields() != tt.NumFields() {
			break
		}
		children := make([]arrow.ArrayData, tt.NumFields())
		for i := range children {
			c, err := Cast(ctx, src.Field(i), tt.Field(i).Type) // Field is sliced to the struct already
			if err != nil {
				return nil, err
			}
			defer c.Release()
			children[i] = c.Data()
		}
		data := array.NewData(tt, src.Len(), []*memory.Buffer{validity(src)}, children, src.NullN(), 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	}
	out, err := compute.CastArray(ctx, arr, compute.SafeCastOptions(to))
	if err != nil {
		return nil, fmt.Errorf("cast %s to %s: %w", arr.DataType(), to, err)
	}
	return out, nil
}

// castToList casts a list-like array (list, large list, fixed-size list)
// to a list of the target element type.
func castToList(ctx context.Context, arr arrow.Array, to *arrow.ListType) (arrow.Array, error) {
	n := arr.Len()
	offsets := make([]int32, n+1)
	var child arrow.Array
	switch src := arr.(type) {
	case *array.FixedSizeList:
		k := int64(src.DataType().(*arrow.FixedSizeListType).Len())
		off := int64(src.Data().Offset())
		child = array.NewSlice(src.ListValues(), off*k, (off+int64(n))*k)
		for i := range offsets {
			offsets[i] = int32(int64(i) * k) //nolint:gosec // bounded by the child's length
		}
	case array.ListLike:
		lo, _ := src.ValueOffsets(0)
		_, hi := src.ValueOffsets(max(n-1, 0))
		if n == 0 {
			hi = lo
		}
		child = array.NewSlice(src.ListValues(), lo, hi)
		for i := range n {
			s, _ := src.ValueOffsets(i)
			offsets[i] = int32(s - lo) //nolint:gosec // a served batch stays far below 2 GiB of elements
		}
		offsets[n] = int32(hi - lo) //nolint:gosec // as above
	default:
		return nil, fmt.Errorf("cast %s to %s: not a list", arr.DataType(), to)
	}
	defer child.Release()
	elems, err := Cast(ctx, child, to.Elem())
	if err != nil {
		return nil, err
	}
	defer elems.Release()
	data := array.NewData(to, n, []*memory.Buffer{validity(arr), memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{elems.Data()}, arr.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// validity returns arr's validity bitmap re-based to offset 0, or nil when
// it has no nulls.
func validity(arr arrow.Array) *memory.Buffer {
	if arr.NullN() == 0 {
		return nil
	}
	bits := make([]byte, (arr.Len()+7)/8)
	for i := range arr.Len() {
		if arr.IsValid(i) {
			bits[i/8] |= 1 << (i % 8)
		}
	}
	return memory.NewBufferBytes(bits)
}
