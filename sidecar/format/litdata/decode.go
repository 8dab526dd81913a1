package litdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format/arrowipc"
)

var errCorrupt = errors.New("corrupt LitData chunk")

// footerMagic ends a chunk whose rows are also an Arrow IPC file appended
// to it, with the file's length before the magic.
var footerMagic = []byte("LDARW01\x00")

// arrowRows returns the Arrow IPC file a chunk ends with, or nil.
func arrowRows(chunk []byte) ([]byte, error) {
	n := len(chunk)
	if n < 12 || !bytes.Equal(chunk[n-8:], footerMagic) {
		return nil, nil
	}
	size := int(binary.LittleEndian.Uint32(chunk[n-12:]))
	if size > n-12 {
		return nil, fmt.Errorf("%w: an Arrow footer of %d bytes in a chunk of %d", errCorrupt, size, n)
	}
	return chunk[n-12-size : n-12], nil
}

// Decode reads a chunk's items (which must be exactly samples) into the
// stream's schema, keeping only columns (nil: all): the chunk as stored,
// inflated first if it is compressed.
func Decode(l *indexfile.LitData, chunk []byte, samples int64, columns []string) (arrow.RecordBatch, error) {
	plain, err := Inflate(l, chunk)
	if err != nil {
		return nil, err
	}
	return decodePlain(l, plain, samples, columns)
}

// decodePlain is Decode of an uncompressed chunk.
func decodePlain(l *indexfile.LitData, chunk []byte, samples int64, columns []string) (arrow.RecordBatch, error) {
	schema, err := Schema(l)
	if err != nil {
		return nil, err
	}
	keep, err := projection(schema, columns)
	if err != nil {
		return nil, err
	}
	if l.BlockSize > 0 {
		return decodeTokens(schema.Field(0), l, chunk, samples, keep)
	}
	n, err := u32(chunk, 0)
	if err != nil {
		return nil, err
	}
	if int64(n) != samples {
		return nil, fmt.Errorf("%w: %d items, the index says %d", errCorrupt, n, samples)
	}
	rows, err := arrowRows(chunk)
	if err != nil {
		return nil, err
	}
	if rows != nil {
		return decodeArrow(schema, rows, int64(n), keep)
	}
	return decodeItems(l, schema, chunk, n, keep)
}

func projection(schema *arrow.Schema, columns []string) ([]int, error) {
	if columns == nil {
		out := make([]int, schema.NumFields())
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	out := make([]int, len(columns))
	for k, c := range columns {
		idx := schema.FieldIndices(c)
		if len(idx) == 0 {
			var names []string
			for _, f := range schema.Fields() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("no column %q: the stream's columns are %v", c, names)
		}
		out[k] = idx[0]
	}
	return out, nil
}

// decodeArrow reads the rows of a chunk's Arrow footer, whose columns must
// be the stream's, of its types.
func decodeArrow(schema *arrow.Schema, rows []byte, n int64, keep []int) (arrow.RecordBatch, error) {
	batches, err := arrowipc.Batches(rows)
	if err != nil {
		return nil, fmt.Errorf("its Arrow rows: %w", err)
	}
	names := make([]string, len(keep))
	fields := make([]arrow.Field, len(keep))
	for k, f := range keep {
		names[k], fields[k] = schema.Field(f).Name, schema.Field(f)
	}
	cols := make([][]arrow.Array, len(keep))
	var got int64
	defer func() {
		for _, cs := range cols {
			for _, c := range cs {
				c.Release()
			}
		}
	}()
	for i := range batches {
		b, err := arrowipc.ReadBatch(rows, i, names)
		if err != nil {
			return nil, fmt.Errorf("its Arrow rows: %w", err)
		}
		for k := range keep {
			c := b.Column(k)
			if !arrow.TypeEqual(c.DataType(), fields[k].Type) && c.DataType().ID() != arrow.NULL {
				b.Release()
				return nil, fmt.Errorf("%w: its Arrow rows' %s is %s, its data format says %s", errCorrupt, names[k], c.DataType(), fields[k].Type)
			}
			if c.DataType().ID() == arrow.NULL {
				c = array.MakeArrayOfNull(memory.DefaultAllocator, fields[k].Type, c.Len())
			} else {
				c.Retain()
			}
			cols[k] = append(cols[k], c)
		}
		got += b.NumRows()
		b.Release()
	}
	if got != n {
		return nil, fmt.Errorf("%w: %d Arrow rows for %d items", errCorrupt, got, n)
	}
	out := make([]arrow.Array, len(keep))
	for k, cs := range cols {
		if len(cs) == 0 {
			out[k] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[k].Type, 0)
			continue
		}
		if out[k], err = array.Concatenate(cs, memory.DefaultAllocator); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, c := range out {
			c.Release()
		}
	}()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), out, n), nil
}

// decodeItems reads a chunk's items: offsets after the count, each item
// its leaves' sizes then the leaves.
func decodeItems(l *indexfile.LitData, schema *arrow.Schema, chunk []byte, n int, keep []int) (arrow.RecordBatch, error) {
	leaves := make([]leaf, len(l.Columns))
	for i := range l.DataFormats {
		lf, err := leafFor(l, i)
		if err != nil {
			return nil, err
		}
		leaves[i] = lf
	}
	fields := make([]arrow.Field, len(keep))
	for k, f := range keep {
		fields[k] = schema.Field(f)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer b.Release()
	err := eachItem(l, chunk, n, func(item int, values [][]byte) error {
		for k, f := range keep {
			if err := appendLeaf(b.Field(k), leaves[f], values[f]); err != nil {
				return fmt.Errorf("%w: item %d's %s (%s): %w", errCorrupt, item, l.Columns[f], l.DataFormats[f], err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.NewRecordBatch(), nil
}

// eachItem calls fn with each of a chunk's n items' leaves, in order:
// offsets after the count, each item its leaves' sizes then the leaves.
func eachItem(l *indexfile.LitData, chunk []byte, n int, fn func(item int, values [][]byte) error) error {
	header := 4 + 4*(n+1)
	if n < 0 || header > len(chunk) {
		return fmt.Errorf("%w: %d items' offsets past its %d bytes", errCorrupt, n, len(chunk))
	}
	leaves := len(l.Columns)
	sizes := make([]int, leaves)
	values := make([][]byte, leaves)
	prev := header
	for item := range n {
		start, _ := u32(chunk, 4+4*item)
		end, _ := u32(chunk, 8+4*item)
		if start != prev || end < start || end > len(chunk) {
			return fmt.Errorf("%w: item %d at [%d, %d), after %d in %d bytes", errCorrupt, item, start, end, prev, len(chunk))
		}
		prev = end
		data := chunk[start:end]
		at := 4 * leaves
		if at > len(data) {
			return fmt.Errorf("%w: item %d of %d bytes holds no sizes of its %d leaves", errCorrupt, item, len(data), leaves)
		}
		for j := range leaves {
			sizes[j] = int(binary.LittleEndian.Uint32(data[4*j:]))
		}
		for j, s := range sizes {
			if s > len(data)-at {
				return fmt.Errorf("%w: item %d's %s of %d bytes runs past the item", errCorrupt, item, l.Columns[j], s)
			}
			values[j] = data[at : at+s]
			at += s
		}
		if err := fn(item, values); err != nil {
			return err
		}
	}
	return nil
}

// LearnArrays records in l.Arrays the dtype and shape of each array column
// ("numpy", "tensor") from a chunk's items, which must all agree with each
// other and with what earlier chunks gave: shardfeed serves a column of one
// shape.
func LearnArrays(l *indexfile.LitData, chunk []byte) error {
	var arrays []int
	for i, df := range l.DataFormats {
		if df == "numpy" || df == "tensor" {
			arrays = append(arrays, i)
		}
	}
	if len(arrays) == 0 {
		return nil
	}
	n, err := u32(chunk, 0)
	if err != nil {
		return err
	}
	if l.Arrays == nil {
		l.Arrays = map[string]indexfile.LitArray{}
	}
	return eachItem(l, chunk, n, func(item int, values [][]byte) error {
		for _, i := range arrays {
			c := l.Columns[i]
			code, shape, _, err := arrayHeader(values[i], l.DataFormats[i] == "tensor")
			if err != nil {
				return fmt.Errorf("%w: item %d's %s (%s): %w", errCorrupt, item, c, l.DataFormats[i], err)
			}
			a, seen := l.Arrays[c]
			switch {
			case !seen:
				l.Arrays[c] = indexfile.LitArray{DType: code, Shape: shape}
			case a.DType != code || !slices.Equal(a.Shape, shape):
				return fmt.Errorf("column %q: item %d is an array of dtype %d and shape %v, earlier ones of dtype %d and shape %v: "+
					"shardfeed serves a column of one dtype and shape (pad the arrays, or store each flattened, a 1-D no_header_numpy, with its shape beside it)",
					c, item, code, shape, a.DType, a.Shape)
			}
		}
		return nil
	})
}

// maxRank bounds an array value's dimensions.
const maxRank = 32

// arrayHeader reads a "numpy" or "tensor" value's header: its dtype code,
// its shape and its elements' bytes, which must be the shape's worth.
func arrayHeader(v []byte, torch bool) (code int, shape []int, data []byte, err error) {
	var order binary.ByteOrder = binary.LittleEndian
	if torch {
		order = binary.BigEndian
	}
	if len(v) < 8 {
		return 0, nil, nil, fmt.Errorf("%d bytes hold no array header", len(v))
	}
	code, rank := int(order.Uint32(v)), int(order.Uint32(v[4:]))
	if rank > maxRank || 8+4*rank > len(v) {
		return 0, nil, nil, fmt.Errorf("an array of %d dimensions in %d bytes", rank, len(v))
	}
	_, size, ok := elemType(torch, code)
	if !ok {
		return 0, nil, nil, fmt.Errorf("its element type (code %d) is not one shardfeed serves; it reads %s", code, Supported)
	}
	shape = make([]int, rank)
	n := 1
	for k := range shape {
		shape[k] = int(order.Uint32(v[8+4*k:]))
		if shape[k] > 0 && n > maxArrayBytes/size/shape[k] {
			return 0, nil, nil, fmt.Errorf("an array of shape %v: over %d bytes", shape, maxArrayBytes)
		}
		n *= shape[k]
	}
	data = v[8+4*rank:]
	if len(data) != n*size {
		return 0, nil, nil, fmt.Errorf("an array of shape %v in %d bytes, not %d", shape, len(data), n*size)
	}
	return code, shape, data, nil
}

// appendLeaf appends one serialized leaf.
func appendLeaf(b array.Builder, lf leaf, v []byte) error {
	if a := lf.array; a != nil {
		code, shape, data, err := arrayHeader(v, a.bigEndian)
		if err != nil {
			return err
		}
		if code != a.code || !slices.Equal(shape, a.shape) {
			return fmt.Errorf("an array of dtype %d and shape %v, the index says %d and %v", code, shape, a.code, a.shape)
		}
		if len(shape) == 0 {
			return appendElems(b, lf.elem, data)
		}
		fb := b.(*array.FixedSizeListBuilder)
		fb.Append(true)
		return appendElems(fb.ValueBuilder(), lf.elem, data)
	}
	if lf.size > 0 && lf.elem == nil && len(v) != lf.size {
		return fmt.Errorf("%d bytes, not %d", len(v), lf.size)
	}
	switch lf.typ.ID() {
	case arrow.INT64:
		b.(*array.Int64Builder).Append(int64(binary.LittleEndian.Uint64(v))) //nolint:gosec // the stored bits
	case arrow.FLOAT64:
		b.(*array.Float64Builder).Append(float64frombits(binary.LittleEndian.Uint64(v)))
	case arrow.BOOL:
		b.(*array.BooleanBuilder).Append(v[0] != 0)
	case arrow.STRING:
		if !utf8.Valid(v) {
			return errors.New("not UTF-8")
		}
		b.(*array.StringBuilder).Append(string(v))
	case arrow.BINARY:
		b.(*array.BinaryBuilder).Append(v)
	case arrow.LIST:
		if len(v)%lf.size != 0 {
			return fmt.Errorf("%d bytes of %d-byte elements", len(v), lf.size)
		}
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		return appendElems(lb.ValueBuilder(), lf.elem, v)
	default:
		return fmt.Errorf("type %s", lf.typ)
	}
	return nil
}

// tokensOf returns the tokens of a TokensLoader chunk: its items' bytes,
// after the count and the offsets, which must be items arrays of dim
// tokens of size bytes in all, laid end to end.
func tokensOf(chunk []byte, items, dim int64, size int) ([]byte, error) {
	n, err := u32(chunk, 0)
	if err != nil {
		return nil, err
	}
	if int64(n) != items {
		return nil, fmt.Errorf("%w: %d items, the index says %d", errCorrupt, n, items)
	}
	header := 4 + 4*(n+1)
	if header > len(chunk) {
		return nil, fmt.Errorf("%w: %d items' offsets past its %d bytes", errCorrupt, n, len(chunk))
	}
	prev := header
	for item := range n + 1 {
		off, _ := u32(chunk, 4+4*item)
		if off < prev || item == 0 && off != header || off > len(chunk) {
			return nil, fmt.Errorf("%w: item %d's offset %d, after %d in %d bytes", errCorrupt, item, off, prev, len(chunk))
		}
		if (off-header)%size != 0 {
			return nil, fmt.Errorf("%w: item %d's offset %d is not a whole number of %d-byte tokens", errCorrupt, item, off, size)
		}
		prev = off
	}
	data := chunk[header:prev]
	if dim < 0 || int64(len(data)) != dim*int64(size) {
		return nil, fmt.Errorf("%w: %d bytes of tokens, the index says %d tokens of %d bytes", errCorrupt, len(data), dim, size)
	}
	return data, nil
}

// decodeTokens reads a TokensLoader chunk's samples: its tokens cut every
// l.BlockSize, which must be samples blocks, each a fixed-size list.
func decodeTokens(field arrow.Field, l *indexfile.LitData, chunk []byte, samples int64, keep []int) (arrow.RecordBatch, error) {
	lf, err := leafOf(l.DataFormats[0])
	if err != nil {
		return nil, err
	}
	n, err := u32(chunk, 0)
	if err != nil {
		return nil, err
	}
	// The offsets say how many tokens there are: the index's count of
	// samples must be their blocks.
	end, err := u32(chunk, 4+4*n)
	if err != nil {
		return nil, err
	}
	dim := int64(end-(4+4*(n+1))) / int64(lf.size)
	data, err := tokensOf(chunk, int64(n), dim, lf.size)
	if err != nil {
		return nil, err
	}
	if dim/l.BlockSize != samples {
		return nil, fmt.Errorf("%w: %d tokens make %d blocks of %d, the index says %d", errCorrupt, dim, dim/l.BlockSize, l.BlockSize, samples)
	}
	b := array.NewFixedSizeListBuilder(memory.DefaultAllocator, int32(l.BlockSize), lf.elem) //nolint:gosec // checked by the index
	defer b.Release()
	width := int(l.BlockSize) * lf.size
	for k := range int(samples) {
		b.Append(true)
		if err := appendElems(b.ValueBuilder(), lf.elem, data[k*width:(k+1)*width]); err != nil {
			return nil, err
		}
	}
	col := b.NewArray()
	defer col.Release()
	fields, cols := []arrow.Field{}, []arrow.Array{}
	for range keep {
		fields, cols = append(fields, field), append(cols, col)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, samples), nil
}
