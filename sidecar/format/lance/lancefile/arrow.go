package lancefile

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Reading rows of a file into Arrow arrays, one per top-level field.

// Columns maps a field id to its column in a file.
type Columns map[int32]int

// ReadColumn decodes rows [from, to) of a top-level field.
func (t *Tail) ReadColumn(src Source, n *Node, cols Columns, from, to uint64) (arrow.Array, error) {
	if from > to || to > t.Rows {
		return nil, corrupt("rows [%d, %d) of a file of %d", from, to, t.Rows)
	}
	if t.Is20() {
		return t.readColumn20(src, n, cols, from, to)
	}
	rows := int(to - from) //nolint:gosec // bounded by the file's rows
	switch n.LogicalType {
	case "struct":
		children := make([]arrow.ArrayData, len(n.Children))
		var valid []byte
		nulls := 0
		for i, c := range n.Children {
			lf, err := t.readLeaf(src, c, cols, from, to)
			if err != nil {
				return nil, err
			}
			arr, err := leafArray(c.Type, lf, rows)
			if err != nil {
				return nil, err
			}
			children[i] = arr.Data()
			defer arr.Release()
			if i == 0 {
				valid, nulls = structValidity(lf.def, rows)
			}
		}
		buf := []*memory.Buffer{nil}
		if nulls > 0 {
			buf[0] = memory.NewBufferBytes(valid)
		}
		data := array.NewData(n.Type, rows, buf, children, nulls, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	case "list", "large_list":
		lf, err := t.readLeaf(src, n.Children[0], cols, from, to)
		if err != nil {
			return nil, err
		}
		return listArray(n, lf, rows)
	}
	lf, err := t.readLeaf(src, n, cols, from, to)
	if err != nil {
		return nil, err
	}
	return leafArray(n.Type, lf, rows)
}

// readLeaf decodes rows [from, to) of a leaf field's column, page by page.
func (t *Tail) readLeaf(src Source, n *Node, cols Columns, from, to uint64) (leaf, error) {
	c, ok := cols[n.ID]
	if !ok {
		return leaf{vals: block{n: int(to - from), allNull: true}, def: nullLevels(int(to - from))}, nil //nolint:gosec // bounded
	}
	if c < 0 || c >= len(t.Columns) {
		return leaf{}, corrupt("field %q is column %d of a file of %d", n.Name, c, len(t.Columns))
	}
	if err := t.Columns[c].Err; err != nil {
		return leaf{}, fmt.Errorf("field %q: %w", n.Name, err)
	}
	var out leaf
	for i := range t.Columns[c].Pages {
		p := &t.Columns[c].Pages[i]
		lo, hi := max(from, p.FirstRow), min(to, p.FirstRow+p.Rows)
		if lo >= hi {
			continue
		}
		lf, err := p.decode(src, lo-p.FirstRow, hi-p.FirstRow)
		if err != nil {
			return leaf{}, fmt.Errorf("column %q, page %d: %w", n.Name, i, err)
		}
		if lf.vals.allNull && !out.vals.allNull && out.vals.n > 0 || !lf.vals.allNull && out.vals.allNull {
			lf.vals = materialize(lf.vals, out.vals)
			out.vals = materialize(out.vals, lf.vals)
		}
		if lf.def == nil && out.def != nil {
			lf.def = make([]uint16, max(len(lf.rep), lf.vals.n))
		}
		if out.def == nil && lf.def != nil && out.vals.n > 0 {
			out.def = make([]uint16, max(len(out.rep), out.vals.n))
		}
		out.rep = append(out.rep, lf.rep...)
		out.def = append(out.def, lf.def...)
		if lf.vals.allNull && (out.vals.allNull || out.vals.n == 0) {
			out.vals = block{n: out.vals.n + lf.vals.n, allNull: true}
			continue
		}
		if err := appendBlock(&out.vals, lf.vals, 0, lf.vals.n); err != nil {
			return leaf{}, fmt.Errorf("column %q, page %d: %w", n.Name, i, err)
		}
	}
	return out, nil
}

// materialize gives all-null values the width of like's, zeroed.
func materialize(b, like block) block {
	if !b.allNull || like.allNull {
		return b
	}
	out := block{n: b.n, bits: like.bits, dim: like.dim}
	if like.variable() {
		out.offsets = make([]uint64, b.n+1)
	} else {
		out.fixed = make([]byte, fixedBytes(b.n, like.bits))
	}
	return out
}

func nullLevels(n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// structValidity reads a struct's validity from a child's levels: levels
// above the child's own are the struct's null.
func structValidity(def []uint16, rows int) ([]byte, int) {
	valid := make([]byte, bitutil.BytesForBits(int64(rows)))
	nulls := 0
	for i := range rows {
		if def == nil || def[i] <= defNullItem {
			bitutil.SetBit(valid, i)
		} else {
			nulls++
		}
	}
	return valid, nulls
}

// leafArray builds a leaf's array from its values: level 0 valid, any
// other a null.
func leafArray(t arrow.DataType, lf leaf, rows int) (arrow.Array, error) {
	if lf.vals.n != rows {
		return nil, corrupt("%d values for %d rows", lf.vals.n, rows)
	}
	valid, nulls := validity(lf.def, rows)
	data, err := leafData(t, lf.vals, valid, nulls)
	if err != nil {
		return nil, err
	}
	defer data.Release()
	return array.MakeFromData(data), nil
}

// validity is a bitmap of the levels that are 0.
func validity(def []uint16, n int) (*memory.Buffer, int) {
	if def == nil {
		return nil, 0
	}
	valid := make([]byte, bitutil.BytesForBits(int64(n)))
	nulls := 0
	for i := range n {
		if def[i] == 0 {
			bitutil.SetBit(valid, i)
		} else {
			nulls++
		}
	}
	if nulls == 0 {
		return nil, 0
	}
	return memory.NewBufferBytes(valid), nulls
}

// packBooleans packs n booleans of a byte each (0 or 1) into bits.
func packBooleans(in []byte, n int) ([]byte, error) {
	if len(in) < n {
		return nil, corrupt("%d booleans in %d bytes", n, len(in))
	}
	out := make([]byte, bitutil.BytesForBits(int64(n)))
	for i, v := range in[:n] {
		switch v {
		case 0:
		case 1:
			bitutil.SetBit(out, i)
		default:
			return nil, corrupt("a boolean of value %d", v)
		}
	}
	return out, nil
}

// leafData lays a block of values out as Arrow array data of type t.
func leafData(t arrow.DataType, b block, valid *memory.Buffer, nulls int) (arrow.ArrayData, error) {
	n := b.n
	if n == 0 && !b.variable() {
		// No values (the items of lists all empty or null): a 2.0
		// writer gives their page any width, 0 bits among them.
		empty := array.MakeArrayOfNull(memory.DefaultAllocator, t, 0)
		defer empty.Release()
		d := empty.Data()
		d.Retain()
		return d, nil
	}
	if b.allNull {
		b = materialize(b, zeroLike(t))
		if valid == nil {
			valid, nulls = memory.NewBufferBytes(make([]byte, bitutil.BytesForBits(int64(n)))), n
		}
	}
	switch t := t.(type) {
	case *arrow.BooleanType:
		if b.bits == 8 && !b.variable() {
			// A constant page's value is a byte, 0 or 1.
			packed, err := packBooleans(b.fixed, n)
			if err != nil {
				return nil, err
			}
			b = block{n: n, bits: 1, fixed: packed}
		}
		if b.bits != 1 {
			return nil, corrupt("booleans of %d bits", b.bits)
		}
		return array.NewData(t, n, []*memory.Buffer{valid, memory.NewBufferBytes(pad(b.fixed, n, 1))}, nil, nulls, 0), nil
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		if !b.variable() {
			return nil, corrupt("%s values of fixed width", t)
		}
		var offs []byte
		large := t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
		for _, o := range b.offsets {
			if large {
				offs = binary.LittleEndian.AppendUint64(offs, o)
			} else {
				if o > 1<<31-1 {
					return nil, corrupt("%s values past 2 GiB in one read", t)
				}
				offs = binary.LittleEndian.AppendUint32(offs, uint32(o))
			}
		}
		return array.NewData(t, n, []*memory.Buffer{valid, memory.NewBufferBytes(offs), memory.NewBufferBytes(b.data)}, nil, nulls, 0), nil
	case *arrow.FixedSizeListType:
		dim := int(t.Len())
		w, ok := t.Elem().(arrow.FixedWidthDataType)
		if !ok || b.variable() || b.bits != dim*w.BitWidth() {
			return nil, corrupt("%s values of %d bits", t, b.bits)
		}
		var itemValid *memory.Buffer
		itemNulls := 0
		if b.itemValid != nil {
			itemValid = memory.NewBufferBytes(b.itemValid)
			itemNulls = n*dim - bitutil.CountSetBits(b.itemValid, 0, n*dim)
		}
		child := array.NewData(t.Elem(), n*dim, []*memory.Buffer{itemValid, memory.NewBufferBytes(b.fixed)}, nil, itemNulls, 0)
		defer child.Release()
		return array.NewData(t, n, []*memory.Buffer{valid}, []arrow.ArrayData{child}, nulls, 0), nil
	case arrow.FixedWidthDataType:
		if b.variable() || b.bits != t.BitWidth() {
			return nil, corrupt("%s values of %d bits", t, b.bits)
		}
		return array.NewData(t, n, []*memory.Buffer{valid, memory.NewBufferBytes(b.fixed)}, nil, nulls, 0), nil
	}
	return nil, fmt.Errorf("%w: values of type %s", ErrUnsupported, t)
}

// zeroLike is an empty block of type t's shape.
func zeroLike(t arrow.DataType) block {
	switch t := t.(type) {
	case *arrow.StringType, *arrow.BinaryType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		return block{offsets: []uint64{0}}
	case *arrow.FixedSizeListType:
		w, _ := t.Elem().(arrow.FixedWidthDataType)
		return block{bits: int(t.Len()) * w.BitWidth()}
	case arrow.FixedWidthDataType:
		return block{bits: t.BitWidth()}
	}
	return block{bits: 8}
}

func pad(b []byte, n, bits int) []byte {
	if need := fixedBytes(n, bits); len(b) < need {
		return append(b, make([]byte, need-len(b))...)
	}
	return b
}

// listArray builds a list column: a row begins at each repetition level
// above 0; definition levels above the item's are an empty or null list,
// which has no item.
func listArray(n *Node, lf leaf, rows int) (arrow.Array, error) {
	item := n.Children[0]
	large := n.LogicalType == "large_list"
	var offs []byte
	put := func(o int) {
		if large {
			offs = binary.LittleEndian.AppendUint64(offs, uint64(o)) //nolint:gosec // non-negative
		} else {
			offs = binary.LittleEndian.AppendUint32(offs, uint32(o)) //nolint:gosec // bounded by a page
		}
	}
	valid := make([]byte, bitutil.BytesForBits(int64(rows)))
	var itemDef []uint16
	nulls, row, items := 0, -1, 0
	for i, r := range lf.rep {
		if r > 0 {
			row++
			if row >= rows {
				return nil, corrupt("list levels of more than %d rows", rows)
			}
			put(items)
			d := uint16(0)
			if lf.def != nil {
				d = lf.def[i]
			}
			if d == defNullParent {
				nulls++
			} else {
				bitutil.SetBit(valid, row)
			}
		}
		if row < 0 {
			return nil, corrupt("list levels do not begin a row")
		}
		if lf.def == nil || lf.def[i] <= defNullItem {
			items++
			if lf.def != nil {
				itemDef = append(itemDef, lf.def[i])
			}
		}
	}
	if row != rows-1 {
		return nil, corrupt("list levels of %d rows, not %d", row+1, rows)
	}
	put(items)
	if items != lf.vals.n {
		return nil, corrupt("lists of %d items hold %d values", items, lf.vals.n)
	}
	iv, inulls := validity(itemDef, items)
	child, err := leafData(item.Type, lf.vals, iv, inulls)
	if err != nil {
		return nil, err
	}
	defer child.Release()
	buf := []*memory.Buffer{nil, memory.NewBufferBytes(offs)}
	if nulls > 0 {
		buf[0] = memory.NewBufferBytes(valid)
	}
	data := array.NewData(n.Type, rows, buf, []arrow.ArrayData{child}, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// Nulls is an array of n nulls of type t (a field a file does not store).
func Nulls(t arrow.DataType, n int) (arrow.Array, error) {
	return array.MakeArrayOfNull(memory.DefaultAllocator, t, n), nil
}
