package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/bufpool"
)

// rowRef is one row of a batch: row Row of source column Src.
type rowRef struct {
	Src int
	Row int
}

// column is one shard's column: an Arrow array, or (raw) the stored bytes
// of its values, found in place in the mapped cached shard, whose bytes
// for each row of the batch the gather is given (rawValues).
type column struct {
	arr arrow.Array
	raw bool
}

// errChanged is a raw value the mapped shard no longer holds.
var errChanged = errors.New("a cached shard changed after it was checked: nothing but the sidecar may write its cache")

// gather builds the array of rows picked from srcs, all of type dt. Types
// of fixed width (and fixed-size lists of them) and binary/string columns
// are copied row by row into fresh buffers; any other type is cut into runs
// of consecutive rows and concatenated.
//
// With z, the values of fixed-width and binary columns are not copied: the
// array gets a placeholder buffer (see zerocopy.go).
//
// raw[i] is the value of row i when its source column is raw.
func gather(dt arrow.DataType, srcs []column, rows []rowRef, raw [][]byte, z *zeroCopy) (arrow.Array, error) {
	if w, ok := byteWidth(dt); ok {
		return gatherFixed(dt, w, srcs, rows, raw, z)
	}
	switch dt.ID() {
	case arrow.BINARY, arrow.STRING:
		return gatherBinary(dt, srcs, rows, raw, z)
	}
	return gatherRuns(srcs, rows)
}

// byteWidth returns the bytes per row of a type stored as one flat buffer
// of values (a primitive, or a fixed-size list of primitives without
// nulls inside).
func byteWidth(dt arrow.DataType) (int, bool) {
	switch t := dt.(type) {
	case arrow.FixedWidthDataType:
		if t.ID() == arrow.BOOL || t.BitWidth()%8 != 0 || t.ID() == arrow.DICTIONARY {
			return 0, false
		}
		switch t.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
			arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP,
			arrow.TIME32, arrow.TIME64, arrow.DURATION, arrow.FIXED_SIZE_BINARY, arrow.DECIMAL128, arrow.DECIMAL256:
			return t.BitWidth() / 8, true
		}
	case *arrow.FixedSizeListType:
		if w, ok := byteWidth(t.Elem()); ok {
			return w * int(t.Len()), true
		}
	}
	return 0, false
}

// flatValues returns the value bytes of a flat array (from byteWidth's
// types) from its first row, and false when values inside a fixed-size
// list have nulls (the flat copy would lose them).
func flatValues(a arrow.Array, w int) ([]byte, bool) {
	d := a.Data()
	if l, ok := a.(*array.FixedSizeList); ok {
		child := l.ListValues()
		if child.NullN() > 0 {
			return nil, false
		}
		inner, ok := flatValues(child, w/int(l.DataType().(*arrow.FixedSizeListType).Len()))
		if !ok {
			return nil, false
		}
		return inner[d.Offset()*w:], true
	}
	buf := d.Buffers()[1]
	if buf == nil {
		return nil, true
	}
	return buf.Bytes()[d.Offset()*w:], true
}

func gatherFixed(dt arrow.DataType, w int, srcs []column, rows []rowRef, raw [][]byte, z *zeroCopy) (arrow.Array, error) {
	vals := make([][]byte, len(srcs))
	for i, s := range srcs {
		if s.raw {
			continue
		}
		v, ok := flatValues(s.arr, w)
		if !ok {
			return gatherRuns(srcs, rows)
		}
		vals[i] = v
	}
	value := func(i int, r rowRef) ([]byte, error) {
		if srcs[r.Src].raw {
			if len(raw[i]) != w {
				return nil, errChanged
			}
			return raw[i], nil
		}
		return vals[r.Src][r.Row*w : (r.Row+1)*w], nil
	}
	var out *memory.Buffer
	if z != nil {
		segs := z.list(len(rows))
		for i, r := range rows {
			v, err := value(i, r)
			if err != nil {
				return nil, err
			}
			segs = appendSegment(segs, v)
		}
		out = z.placeholder(len(rows)*w, segs)
	}
	if out == nil {
		out = memory.NewResizableBuffer(bufpool.Shared)
		out.Resize(len(rows) * w)
		dst := out.Bytes()
		for i, r := range rows {
			v, err := value(i, r)
			if err != nil {
				out.Release()
				return nil, err
			}
			copy(dst[i*w:(i+1)*w], v)
		}
	}
	valid, nulls := gatherValidity(srcs, rows)
	var data arrow.ArrayData
	if l, ok := dt.(*arrow.FixedSizeListType); ok {
		child := flatChild(l, out, len(rows))
		data = array.NewData(dt, len(rows), []*memory.Buffer{valid}, []arrow.ArrayData{child}, nulls, 0)
		child.Release()
	} else {
		data = array.NewData(dt, len(rows), []*memory.Buffer{valid, out}, nil, nulls, 0)
	}
	out.Release()
	if valid != nil {
		valid.Release()
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}

// flatChild wraps values as the (nested) child of a fixed-size list.
func flatChild(l *arrow.FixedSizeListType, values *memory.Buffer, rows int) arrow.ArrayData {
	n := rows * int(l.Len())
	if inner, ok := l.Elem().(*arrow.FixedSizeListType); ok {
		c := flatChild(inner, values, n)
		defer c.Release()
		return array.NewData(l.Elem(), n, []*memory.Buffer{nil}, []arrow.ArrayData{c}, 0, 0)
	}
	return array.NewData(l.Elem(), n, []*memory.Buffer{nil, values}, nil, 0, 0)
}

// gatherValidity returns the validity bitmap of the picked rows, or nil
// when none is null.
func gatherValidity(srcs []column, rows []rowRef) (*memory.Buffer, int) {
	any := false
	for _, s := range srcs {
		if !s.raw && s.arr.NullN() > 0 {
			any = true
			break
		}
	}
	if !any {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(memory.DefaultAllocator)
	buf.Resize(int(bitutil.BytesForBits(int64(len(rows)))))
	bits := buf.Bytes()
	clear(bits)
	nulls := 0
	for i, r := range rows {
		if s := srcs[r.Src]; s.raw || s.arr.IsValid(r.Row) {
			bitutil.SetBit(bits, i)
		} else {
			nulls++
		}
	}
	return buf, nulls
}

func gatherBinary(dt arrow.DataType, srcs []column, rows []rowRef, raw [][]byte, z *zeroCopy) (arrow.Array, error) {
	type binaryLike interface {
		ValueBytes() []byte
		ValueOffsets() []int32
	}
	offs := make([][]int32, len(srcs))
	bytes := make([][]byte, len(srcs))
	for i, s := range srcs {
		if s.raw {
			continue
		}
		b, ok := s.arr.(binaryLike)
		if !ok {
			return nil, fmt.Errorf("column of type %s holds a %T", dt, s.arr)
		}
		offs[i], bytes[i] = b.ValueOffsets(), b.ValueBytes()
	}
	values := make([][]byte, len(rows))
	total := 0
	for i, r := range rows {
		if srcs[r.Src].raw {
			values[i] = raw[i]
		} else {
			// ValueBytes starts at the array's first value offset.
			o := offs[r.Src]
			values[i] = bytes[r.Src][o[r.Row]-o[0] : o[r.Row+1]-o[0]]
		}
		total += len(values[i])
	}
	if total > 1<<31-1 {
		return nil, fmt.Errorf("a batch's %s column holds %d bytes, more than Arrow's 2 GiB per array: use a smaller globalBatchSize or more ranks", dt, total)
	}
	offBuf := memory.NewResizableBuffer(memory.DefaultAllocator)
	offBuf.Resize((len(rows) + 1) * 4)
	dstOff := arrow.Int32Traits.CastFromBytes(offBuf.Bytes())
	var valBuf *memory.Buffer
	if z != nil {
		segs := z.list(len(rows))
		pos := int32(0)
		for i, v := range values {
			dstOff[i] = pos
			pos += int32(len(v)) //nolint:gosec // total checked above
			if len(v) > 0 {
				segs = appendSegment(segs, v)
			}
		}
		dstOff[len(rows)] = pos
		valBuf = z.placeholder(total, segs)
	}
	if valBuf == nil {
		valBuf = memory.NewResizableBuffer(bufpool.Shared)
		valBuf.Resize(total)
		dst := valBuf.Bytes()
		pos := int32(0)
		for i, v := range values {
			dstOff[i] = pos
			pos += int32(copy(dst[pos:], v)) //nolint:gosec // total checked above
		}
		dstOff[len(rows)] = pos
	}
	valid, nulls := gatherValidity(srcs, rows)
	data := array.NewData(dt, len(rows), []*memory.Buffer{valid, offBuf, valBuf}, nil, nulls, 0)
	offBuf.Release()
	valBuf.Release()
	if valid != nil {
		valid.Release()
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}

// gatherRuns handles every other type: runs of consecutive rows of one
// source become slices, concatenated once.
func gatherRuns(srcs []column, rows []rowRef) (arrow.Array, error) {
	for _, s := range srcs {
		if s.raw {
			return nil, errors.New("a raw column of a type gathered in runs") // RawReader's contract rules it out
		}
	}
	var parts []arrow.Array
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].Src == rows[i].Src && rows[j].Row == rows[j-1].Row+1 {
			j++
		}
		parts = append(parts, array.NewSlice(srcs[rows[i].Src].arr, int64(rows[i].Row), int64(rows[j-1].Row+1)))
		i = j
	}
	if len(parts) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, srcs[0].arr.DataType(), 0), nil
	}
	return array.Concatenate(parts, memory.DefaultAllocator)
}

// rawTable holds the raw values of a batch's rows, column by column
// (column c's at [c*rows, (c+1)*rows)), reused from batch to batch.
type rawTable struct{ vals [][]byte }

var rawPool = sync.Pool{New: func() any { return &rawTable{} }}

func (t *rawTable) column(c, rows int) [][]byte {
	if len(t.vals) == 0 {
		return nil
	}
	return t.vals[c*rows : (c+1)*rows]
}

// rawValues looks up the raw columns' values of the batch's rows, a row at
// a time: one look at a row's stored bytes serves all its columns. The
// table is empty when no shard has raw columns; put it back in rawPool.
func rawValues(shards []*decodedShard, rows []rowRef, columns int) (*rawTable, error) {
	t := rawPool.Get().(*rawTable)
	t.vals = t.vals[:0]
	any := false
	for _, d := range shards {
		any = any || d.sh.Raw != nil
	}
	if !any {
		return t, nil
	}
	t.vals = slices.Grow(t.vals, columns*len(rows))[:columns*len(rows)]
	var buf [64][]byte
	for i, r := range rows {
		sh := shards[r.Src].sh
		if sh.Raw == nil {
			continue
		}
		var row [][]byte
		if n := len(sh.Raw.Columns()); n > len(buf) {
			row = make([][]byte, n)
		} else {
			row = buf[:n]
		}
		if !sh.Raw.Row(r.Row, row) {
			return nil, errChanged
		}
		for c, k := range sh.RawIndex {
			if k >= 0 {
				t.vals[c*len(rows)+i] = row[k]
			}
		}
	}
	return t, nil
}
