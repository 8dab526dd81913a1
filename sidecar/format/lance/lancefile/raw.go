package lancefile

import (
	"github.com/apache/arrow-go/v18/arrow"
)

// RawRun is rows of a column whose values sit in the file one after
// another from Offset, each as Arrow stores it: what a reader can serve in
// place, without a decoded copy.
type RawRun struct {
	FirstRow, Rows uint64
	Offset         uint64
}

// RawValues returns where rows [from, to) of leaf field n lie in the file,
// and their width, when every page that holds them stores them in place:
// fixed-width values of n's Arrow width, without nulls or compression (a
// 2.0 flat page, a 2.1/2.2 full-zip page without levels). ok is false
// otherwise, and the rows must be decoded.
func (t *Tail) RawValues(n *Node, cols Columns, from, to uint64) (runs []RawRun, width uint64, ok bool) {
	width = arrowWidth(n.Type)
	c, found := cols[n.ID]
	if width == 0 || !found || c < 0 || c >= len(t.Columns) || t.Columns[c].Err != nil || len(n.Children) > 0 {
		return nil, 0, false
	}
	for i := range t.Columns[c].Pages {
		p := &t.Columns[c].Pages[i]
		lo, hi := max(from, p.FirstRow), min(to, p.FirstRow+p.Rows)
		if lo >= hi {
			continue
		}
		buf, w, ok := p.rawBuffer()
		if !ok || w != width || buf >= len(p.Offsets) || hi-p.FirstRow > p.Sizes[buf]/w {
			return nil, 0, false
		}
		runs = append(runs, RawRun{FirstRow: lo, Rows: hi - lo, Offset: p.Offsets[buf] + (lo-p.FirstRow)*w})
	}
	var rows uint64
	for _, r := range runs {
		rows += r.Rows
	}
	return runs, width, rows == to-from
}

// rawBuffer is the page buffer that holds a page's values in place, and
// their width; ok is false when the page's values are not stored so.
func (p *Page) rawBuffer() (buf int, width uint64, ok bool) {
	if e := p.Enc20; e != nil {
		if e.Kind == Nullable20 && e.Nulls == noNulls {
			e = e.Values
		}
		dim := uint64(1)
		if (e.Kind == FixedSizeList20 && !e.HasValidity) || e.Kind == FixedSizeBinary20 {
			dim, e = uint64(e.Dim), e.Values
			if e.Kind == Nullable20 && e.Nulls == noNulls {
				e = e.Values
			}
		}
		if e.Kind != Flat20 || (e.Compression != "" && e.Compression != "none") || e.Bits%8 != 0 {
			return 0, 0, false
		}
		return int(e.Buffer), dim * e.Bits / 8, true
	}
	l := p.Layout
	if l == nil || l.Kind != FullZip || l.BitsRep > 0 || l.BitsDef > 0 || l.BitsPerValue == 0 || l.BitsPerValue%8 != 0 {
		return 0, 0, false
	}
	e := l.Values
	if e != nil && e.Kind == FixedSizeList && !e.HasValidity {
		e = e.Child
	}
	if e == nil || e.Kind != Flat || e.Scheme != 0 {
		return 0, 0, false
	}
	return 0, uint64(l.BitsPerValue / 8), true
}

// arrowWidth is the bytes of one value of t as Arrow stores it, for the
// types whose values are one fixed-width buffer (0: not so).
func arrowWidth(t arrow.DataType) uint64 {
	switch t := t.(type) {
	case *arrow.BooleanType:
		return 0 // bit-packed
	case *arrow.FixedSizeListType:
		w := arrowWidth(t.Elem())
		if _, bits := t.Elem().(*arrow.BooleanType); bits || w == 0 {
			return 0
		}
		return uint64(t.Len()) * w //nolint:gosec // a positive length
	case arrow.FixedWidthDataType:
		if t.BitWidth()%8 != 0 {
			return 0
		}
		return uint64(t.BitWidth() / 8) //nolint:gosec // positive
	}
	return 0
}
