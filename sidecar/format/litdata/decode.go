package litdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/index"
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
// stream's schema, keeping only columns (nil: all).
func Decode(l *index.LitData, chunk []byte, samples int64, columns []string) (arrow.RecordBatch, error) {
	schema, err := Schema(l)
	if err != nil {
		return nil, err
	}
	keep, err := projection(schema, columns)
	if err != nil {
		return nil, err
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
func decodeItems(l *index.LitData, schema *arrow.Schema, chunk []byte, n int, keep []int) (arrow.RecordBatch, error) {
	header := 4 + 4*(n+1)
	if n < 0 || header > len(chunk) {
		return nil, fmt.Errorf("%w: %d items' offsets past its %d bytes", errCorrupt, n, len(chunk))
	}
	leaves := make([]leaf, len(l.Columns))
	for i, df := range l.DataFormats {
		lf, err := leafOf(df)
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
	sizes := make([]int, len(leaves))
	prev := header
	for item := range n {
		start, _ := u32(chunk, 4+4*item)
		end, _ := u32(chunk, 8+4*item)
		if start != prev || end < start || end > len(chunk) {
			return nil, fmt.Errorf("%w: item %d at [%d, %d), after %d in %d bytes", errCorrupt, item, start, end, prev, len(chunk))
		}
		prev = end
		data := chunk[start:end]
		at := 4 * len(leaves)
		if at > len(data) {
			return nil, fmt.Errorf("%w: item %d of %d bytes holds no sizes of its %d leaves", errCorrupt, item, len(data), len(leaves))
		}
		for j := range leaves {
			sizes[j] = int(binary.LittleEndian.Uint32(data[4*j:]))
		}
		offs := make([]int, len(leaves)+1)
		offs[0] = at
		for j, s := range sizes {
			if s > len(data)-offs[j] {
				return nil, fmt.Errorf("%w: item %d's %s of %d bytes runs past the item", errCorrupt, item, l.Columns[j], s)
			}
			offs[j+1] = offs[j] + s
		}
		for k, f := range keep {
			v := data[offs[f]:offs[f+1]]
			if err := appendLeaf(b.Field(k), leaves[f], v); err != nil {
				return nil, fmt.Errorf("%w: item %d's %s (%s): %w", errCorrupt, item, l.Columns[f], l.DataFormats[f], err)
			}
		}
	}
	return b.NewRecordBatch(), nil
}

// appendLeaf appends one serialized leaf.
func appendLeaf(b array.Builder, lf leaf, v []byte) error {
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
