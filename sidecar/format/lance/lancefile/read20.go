package lancefile

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Reading rows of a 2.0 file: a field's column holds its own rows (a
// list's the end offsets of its items, a struct's nothing), and a list's
// items are rows of its child's column.

// Is20 reports whether the file is in format 2.0.
func (t *Tail) Is20() bool { return t.Footer.Major == 0 && t.Footer.Minor == 3 }

// column20 returns field n's column, or nil when the file does not store
// the field.
func (t *Tail) column20(n *Node, cols Columns) (*Column, error) {
	c, ok := cols[n.ID]
	if !ok {
		return nil, nil
	}
	if c < 0 || c >= len(t.Columns) {
		return nil, corrupt("field %q is column %d of a file of %d", n.Name, c, len(t.Columns))
	}
	if err := t.Columns[c].Err; err != nil {
		return nil, fmt.Errorf("field %q: %w", n.Name, err)
	}
	return &t.Columns[c], nil
}

// readColumn20 decodes rows [from, to) of field n's column.
func (t *Tail) readColumn20(src Source, n *Node, cols Columns, from, to uint64) (arrow.Array, error) {
	rows := int(to - from) //nolint:gosec // bounded by the column's rows, checked below
	col, err := t.column20(n, cols)
	if err != nil {
		return nil, err
	}
	if col == nil {
		return Nulls(n.Type, rows)
	}
	if last := col.Pages; len(last) == 0 || to > last[len(last)-1].FirstRow+last[len(last)-1].Rows {
		return nil, corrupt("rows [%d, %d) past the end of column %q", from, to, n.Name)
	}
	switch n.LogicalType {
	case "struct":
		children := make([]arrow.ArrayData, len(n.Children))
		for i, c := range n.Children {
			arr, err := t.readColumn20(src, c, cols, from, to)
			if err != nil {
				return nil, err
			}
			defer arr.Release()
			children[i] = arr.Data()
		}
		// 2.0 stores no struct validity (its writer refuses null structs).
		data := array.NewData(n.Type, rows, []*memory.Buffer{nil}, children, 0, 0)
		defer data.Release()
		return array.MakeFromData(data), nil
	case "list", "large_list":
		return t.list20(src, n, col, cols, from, to)
	}
	lf, err := t.leaf20(src, n, col, from, to)
	if err != nil {
		return nil, err
	}
	return leafArray(n.Type, lf, rows)
}

// leaf20 decodes rows [from, to) of a leaf column, page by page, into
// values and levels (0 valid, 1 null).
func (t *Tail) leaf20(src Source, n *Node, col *Column, from, to uint64) (leaf, error) {
	if strings.HasPrefix(n.LogicalType, "dict:") {
		// 2.0 stores an Arrow dictionary's own indices, whose nulls and
		// numbering are not those of the dictionaries its writer makes
		// of strings (index 0 null, k item k-1): read as those, the
		// values would be shifted.
		return leaf{}, unsupported(n, "an Arrow dictionary column in Lance file version 2.0; write the table in 2.1 or later, or cast the column to its values' type")
	}
	var out leaf
	like := zeroLike(n.Type)
	for i := range col.Pages {
		p := &col.Pages[i]
		lo, hi := max(from, p.FirstRow), min(to, p.FirstRow+p.Rows)
		if lo >= hi {
			continue
		}
		if p.Enc20 == nil {
			return leaf{}, corrupt("column %q, page %d has no 2.0 encoding", n.Name, i)
		}
		v, err := p.decode20(src, p.Enc20, lo-p.FirstRow, hi-p.FirstRow)
		if err != nil {
			return leaf{}, fmt.Errorf("column %q, page %d: %w", n.Name, i, err)
		}
		if v.vals.n != int(hi-lo) { //nolint:gosec // bounded by the page
			return leaf{}, corrupt("column %q, page %d decodes %d values for %d rows", n.Name, i, v.vals.n, hi-lo)
		}
		if v.valid != nil && out.def == nil {
			out.def = make([]uint16, out.vals.n)
		}
		if out.def != nil {
			for k := range v.vals.n {
				d := uint16(0)
				if v.valid != nil && v.valid[k/8]>>(k%8)&1 == 0 {
					d = 1
				}
				out.def = append(out.def, d)
			}
		}
		if err := appendBlock(&out.vals, materialize(v.vals, like), 0, v.vals.n); err != nil {
			return leaf{}, fmt.Errorf("column %q, page %d: %w", n.Name, i, err)
		}
	}
	if out.vals.n != int(to-from) { //nolint:gosec // bounded by the column
		return leaf{}, corrupt("column %q holds %d of rows [%d, %d)", n.Name, out.vals.n, from, to)
	}
	return out, nil
}

// list20 decodes rows [from, to) of a list column: its pages' end offsets
// (relative to each page's first item; a page's items follow the items of
// the pages before it) and then the items they span in the child's
// column.
func (t *Tail) list20(src Source, n *Node, col *Column, cols Columns, from, to uint64) (arrow.Array, error) {
	rows := int(to - from) //nolint:gosec // bounded by the caller
	offsets := make([]uint64, 1, rows+1)
	valid := make([]byte, fixedBytes(rows, 1))
	nulls := 0
	var itemsBefore, first uint64
	firstSet := false
	for i := range col.Pages {
		p := &col.Pages[i]
		lo, hi := max(from, p.FirstRow), min(to, p.FirstRow+p.Rows)
		if lo < hi {
			e := p.Enc20
			if e == nil || e.Kind != List20 {
				return nil, corrupt("list column %q, page %d is not a 2.0 list page", n.Name, i)
			}
			start, ends, v, err := p.ends20(src, e.Indices, e.NullAdjustment, lo-p.FirstRow, hi-p.FirstRow)
			if err != nil {
				return nil, fmt.Errorf("list column %q, page %d: %w", n.Name, i, err)
			}
			if len(ends) > 0 && ends[len(ends)-1] > e.Items {
				return nil, corrupt("list column %q, page %d: offsets past its %d items", n.Name, i, e.Items)
			}
			if !firstSet {
				first, firstSet = itemsBefore+start, true
			}
			for k, end := range ends {
				at := len(offsets) - 1
				if v == nil || v[k/8]>>(k%8)&1 == 1 {
					setBit(&valid, at, true)
				} else {
					nulls++
				}
				offsets = append(offsets, itemsBefore+end-first)
			}
		}
		if p.Enc20 != nil {
			itemsBefore += p.Enc20.Items
		}
	}
	if len(offsets) != rows+1 {
		return nil, corrupt("list column %q holds %d of rows [%d, %d)", n.Name, len(offsets)-1, from, to)
	}
	items, err := t.readColumn20(src, n.Children[0], cols, first, first+offsets[rows])
	if err != nil {
		return nil, err
	}
	defer items.Release()
	var offs []byte
	for _, o := range offsets {
		if n.LogicalType == "large_list" {
			offs = binary.LittleEndian.AppendUint64(offs, o)
		} else {
			if o > 1<<31-1 {
				return nil, corrupt("list column %q: more than 2^31 items in one read", n.Name)
			}
			offs = binary.LittleEndian.AppendUint32(offs, uint32(o))
		}
	}
	buf := []*memory.Buffer{nil, memory.NewBufferBytes(offs)}
	if nulls > 0 {
		buf[0] = memory.NewBufferBytes(valid)
	}
	data := array.NewData(n.Type, rows, buf, []arrow.ArrayData{items.Data()}, nulls, 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}
