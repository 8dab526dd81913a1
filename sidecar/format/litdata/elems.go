package litdata

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
)

func float64frombits(u uint64) float64 { return math.Float64frombits(u) }

// appendElems appends a 1-D array's little-endian elements.
func appendElems(b array.Builder, t arrow.DataType, v []byte) error {
	le := binary.LittleEndian
	switch t.ID() {
	case arrow.INT8:
		for _, x := range v {
			b.(*array.Int8Builder).Append(int8(x)) //nolint:gosec // the stored bits
		}
	case arrow.UINT8:
		b.(*array.Uint8Builder).AppendValues(v, nil)
	case arrow.BOOL:
		for _, x := range v {
			b.(*array.BooleanBuilder).Append(x != 0)
		}
	case arrow.INT16:
		for i := 0; i < len(v); i += 2 {
			b.(*array.Int16Builder).Append(int16(le.Uint16(v[i:]))) //nolint:gosec // the stored bits
		}
	case arrow.UINT16:
		for i := 0; i < len(v); i += 2 {
			b.(*array.Uint16Builder).Append(le.Uint16(v[i:]))
		}
	case arrow.FLOAT16:
		for i := 0; i < len(v); i += 2 {
			b.(*array.Float16Builder).Append(float16.FromBits(le.Uint16(v[i:])))
		}
	case arrow.INT32:
		for i := 0; i < len(v); i += 4 {
			b.(*array.Int32Builder).Append(int32(le.Uint32(v[i:]))) //nolint:gosec // the stored bits
		}
	case arrow.UINT32:
		for i := 0; i < len(v); i += 4 {
			b.(*array.Uint32Builder).Append(le.Uint32(v[i:]))
		}
	case arrow.FLOAT32:
		for i := 0; i < len(v); i += 4 {
			b.(*array.Float32Builder).Append(math.Float32frombits(le.Uint32(v[i:])))
		}
	case arrow.INT64:
		for i := 0; i < len(v); i += 8 {
			b.(*array.Int64Builder).Append(int64(le.Uint64(v[i:]))) //nolint:gosec // the stored bits
		}
	case arrow.UINT64:
		for i := 0; i < len(v); i += 8 {
			b.(*array.Uint64Builder).Append(le.Uint64(v[i:]))
		}
	case arrow.FLOAT64:
		for i := 0; i < len(v); i += 8 {
			b.(*array.Float64Builder).Append(math.Float64frombits(le.Uint64(v[i:])))
		}
	default:
		return fmt.Errorf("elements of %s", t)
	}
	return nil
}
