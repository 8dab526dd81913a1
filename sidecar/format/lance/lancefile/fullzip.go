package lancefile

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Full-zip pages: large values one after another, each behind its control
// word (repetition and definition levels, when the page has any) and, when
// variable, its length. Fixed-width values without levels sit at row ×
// width; otherwise buffer 1, the repetition index, holds rows+1 offsets
// into buffer 0 (its width is its size over rows+1).

// fullZip decodes rows [from, to) of a full-zip page, reading only their
// bytes.
func (p *Page) fullZip(src Source, from, to uint64) (leaf, error) {
	l := p.Layout
	if l.BitsRep > 0 {
		return leaf{}, fmt.Errorf("%w: a full-zip page of lists (values of 256 bytes or more in a list)", ErrUnsupported)
	}
	if l.BitsDef > 16 {
		return leaf{}, corrupt("full-zip control words of %d bits", l.BitsDef)
	}
	if len(p.Offsets) < 1 {
		return leaf{}, corrupt("a full-zip page without values")
	}
	ctrl := int(l.BitsDef+7) / 8
	n := int(to - from) //nolint:gosec // within the page
	if l.BitsPerValue > 0 && ctrl == 0 {
		if l.BitsPerValue%8 != 0 {
			return leaf{}, corrupt("full-zip values of %d bits", l.BitsPerValue)
		}
		w := uint64(l.BitsPerValue / 8)
		if to*w > p.Sizes[0] {
			return leaf{}, corrupt("full-zip rows [%d, %d) of %d bytes lie past the page's %d", from, to, w, p.Sizes[0])
		}
		raw, err := src.ReadAt(p.Offsets[0]+from*w, (to-from)*w)
		if err != nil {
			return leaf{}, err
		}
		vals, err := fixedValues(l.Values, raw, n)
		return leaf{vals: vals}, err
	}
	lo, hi, err := p.repIndex(src, from, to)
	if err != nil {
		return leaf{}, err
	}
	raw, err := src.ReadAt(p.Offsets[0]+lo, hi-lo)
	if err != nil {
		return leaf{}, err
	}
	return zipped(l, raw, n, ctrl)
}

// repIndex returns the byte range of rows [from, to) in buffer 0, from the
// repetition index's entries from and to.
func (p *Page) repIndex(src Source, from, to uint64) (uint64, uint64, error) {
	if len(p.Offsets) < 2 {
		return 0, 0, corrupt("a full-zip page without its repetition index")
	}
	w := p.Sizes[1] / (p.Rows + 1)
	if w != 1 && w != 2 && w != 4 && w != 8 || w*(p.Rows+1) != p.Sizes[1] {
		return 0, 0, corrupt("a repetition index of %d bytes for %d rows", p.Sizes[1], p.Rows)
	}
	entry := func(row uint64) (uint64, error) {
		b, err := src.ReadAt(p.Offsets[1]+row*w, w)
		if err != nil {
			return 0, err
		}
		var v [8]byte
		copy(v[:], b)
		return binary.LittleEndian.Uint64(v[:]), nil
	}
	lo, err := entry(from)
	if err != nil {
		return 0, 0, err
	}
	hi, err := entry(to)
	if err != nil {
		return 0, 0, err
	}
	if lo > hi || hi > p.Sizes[0] {
		return 0, 0, corrupt("the repetition index puts rows [%d, %d) at [%d, %d) of %d bytes", from, to, lo, hi, p.Sizes[0])
	}
	return lo, hi, nil
}

// fixedValues decodes n fixed-width values of a full-zip page.
func fixedValues(e *Encoding, raw []byte, n int) (block, error) {
	if e == nil {
		return block{}, corrupt("a full-zip page has no value encoding")
	}
	switch e.Kind {
	case Flat:
		return flat(e, raw, n)
	case FixedSizeList:
		if e.HasValidity {
			return block{}, fmt.Errorf("%w: full-zip fixed-size lists with null items", ErrUnsupported)
		}
		inner, err := fixedValues(e.Child, raw, n*int(e.Bits)) //nolint:gosec // bounded by the bytes
		if err != nil {
			return block{}, err
		}
		return block{n: n, bits: inner.bits * int(e.Bits), fixed: inner.fixed}, nil //nolint:gosec // as above
	}
	return block{}, fmt.Errorf("%w: full-zip values encoded %s", ErrUnsupported, e)
}

// zipped decodes n rows of zipped values: [control word][length][bytes],
// or [control word][value] when fixed; a null has its control word only.
func zipped(l *Layout, raw []byte, n, ctrl int) (leaf, error) {
	var out leaf
	fixed := l.BitsPerValue > 0
	lenBytes := int(l.BitsPerOffset / 8)
	if !fixed && lenBytes != 4 && lenBytes != 8 {
		return leaf{}, corrupt("full-zip lengths of %d bits", l.BitsPerOffset)
	}
	w := int(l.BitsPerValue / 8)
	vals := block{n: 0}
	if fixed {
		vals.bits = int(l.BitsPerValue)
	} else {
		vals.offsets = []uint64{0}
	}
	nullDef := uint16(0)
	for i := 0; i < n; i++ {
		if len(raw) < ctrl {
			return leaf{}, corrupt("full-zip values end early")
		}
		if ctrl > 0 {
			var v [8]byte
			copy(v[:], raw[:ctrl])
			d := uint16(binary.LittleEndian.Uint64(v[:]) & (1<<l.BitsDef - 1)) //nolint:gosec // at most 16 bits
			out.def = append(out.def, d)
			raw = raw[ctrl:]
			nullDef = max(nullDef, d)
			if d > 0 { // a null: no value follows
				if fixed {
					vals.fixed = append(vals.fixed, make([]byte, w)...)
				} else {
					vals.offsets = append(vals.offsets, uint64(len(vals.data)))
				}
				vals.n++
				continue
			}
		}
		if fixed {
			if len(raw) < w {
				return leaf{}, corrupt("full-zip values end early")
			}
			vals.fixed = append(vals.fixed, raw[:w]...)
			raw = raw[w:]
		} else {
			if len(raw) < lenBytes {
				return leaf{}, corrupt("full-zip values end early")
			}
			var v [8]byte
			copy(v[:], raw[:lenBytes])
			size := binary.LittleEndian.Uint64(v[:])
			raw = raw[lenBytes:]
			if size > uint64(len(raw)) {
				return leaf{}, corrupt("a full-zip value of %d bytes in %d", size, len(raw))
			}
			vals.data = append(vals.data, raw[:size]...)
			vals.offsets = append(vals.offsets, uint64(len(vals.data)))
			raw = raw[size:]
		}
		vals.n++
	}
	if len(raw) != 0 {
		return leaf{}, corrupt("%d bytes follow a full-zip page's %d rows", len(raw), n)
	}
	var err error
	out.vals, err = perValue(l.Values, vals)
	return out, err
}

// perValue undoes a full-zip page's compression of each value.
func perValue(e *Encoding, b block) (block, error) {
	if e == nil {
		return block{}, corrupt("a full-zip page has no value encoding")
	}
	switch e.Kind {
	case Flat, FixedSizeList:
		return b, nil
	case Variable:
		if e.Scheme != 0 {
			return each(b, func(v []byte) ([]byte, error) { return decompressBuffer(e.Scheme, v) })
		}
		return b, nil
	case Fsst:
		inner, err := perValue(e.Child, b)
		if err != nil {
			return block{}, err
		}
		return fsstDecode(e.Symbols, inner)
	case General:
		inner, err := each(b, func(v []byte) ([]byte, error) {
			if len(v) == 0 {
				return v, nil
			}
			return decompressBuffer(e.Scheme, v)
		})
		if err != nil {
			return block{}, err
		}
		return perValue(e.Child, inner)
	case VariablePackedStruct: // blob v2's descriptors, read by blobRef
		if err := blobDescriptors(e); err != nil {
			return block{}, err
		}
		return b, nil
	}
	return block{}, fmt.Errorf("%w: full-zip values encoded %s", ErrUnsupported, e)
}

// each maps every variable value through fn.
func each(b block, fn func([]byte) ([]byte, error)) (block, error) {
	if !b.variable() {
		return block{}, corrupt("per-value compression of fixed-width values")
	}
	out := block{n: b.n, offsets: make([]uint64, b.n+1)}
	for i := range b.n {
		v, err := fn(b.value(i))
		if err != nil {
			return block{}, err
		}
		out.data = append(out.data, v...)
		if len(out.data) > MaxPageBytes {
			return block{}, corrupt("values expand past %d bytes", MaxPageBytes)
		}
		out.offsets[i+1] = uint64(len(out.data))
	}
	return out, nil
}

// constant decodes rows of a constant page: its value for every row, and
// its definition levels where it has nulls. A fixed-width value is inline
// in the layout, its page's buffers [repetition, definition]; a variable
// one (2.2: a string or binary column of one value) is page buffer 0
// (constantBytes), then [repetition, definition]. Definition levels are u16s unless the layout
// compresses them. No value and no buffers: every row null.
func (p *Page) constant(src Source, from, to uint64) (leaf, error) {
	l := p.Layout
	n := int(to - from) //nolint:gosec // within the page
	value, rep, def := -1, 0, 1
	if l.InlineValue == nil && len(p.Offsets) > 0 {
		value, rep, def = 0, 1, 2
	}
	if l.Rep != nil || rep < len(p.Offsets) && p.Sizes[rep] > 0 {
		return leaf{}, fmt.Errorf("%w: a constant page with repetition levels (in file versions 2.1 and 2.2: lists all null, all empty, or of one value), which shardfeed does not decode yet; write the table in 2.0, or leave the column out", ErrUnsupported)
	}
	var out leaf
	if l.Def != nil || def < len(p.Offsets) && p.Sizes[def] > 0 {
		levels, err := p.constantLevels(src, def)
		if err != nil {
			return leaf{}, err
		}
		out.def = levels[from:to]
	}
	var err error
	switch {
	case l.InlineValue != nil:
		out.vals, err = constant(l.InlineValue, n)
	case value == 0:
		var raw []byte
		if raw, err = p.buffer(src, 0); err == nil {
			out.vals, err = constantBytes(raw, n)
		}
	default:
		if out.def == nil {
			out.def = make([]uint16, n)
			for i := range out.def {
				out.def[i] = 1
			}
		}
		out.vals = block{n: n, allNull: true}
	}
	return out, err
}

// constantLevels reads a constant page's definition levels, one a row.
func (p *Page) constantLevels(src Source, buf int) ([]uint16, error) {
	l := p.Layout
	if p.Rows > MaxPageBytes/2 {
		return nil, corrupt("a constant page of %d rows", p.Rows)
	}
	raw, err := p.buffer(src, buf)
	if err != nil {
		return nil, err
	}
	rows := int(p.Rows) //nolint:gosec // bounded above
	if l.Def != nil {
		return decodeLevels(l.Def, raw, rows)
	}
	if len(raw) != 2*rows {
		return nil, corrupt("a constant page's %d definition bytes for %d rows", len(raw), rows)
	}
	out := make([]uint16, rows)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return out, nil
}

// constantBytes is n copies of a constant page's variable value: a block
// [u32 buffers = 2][u32 size of each][offsets [0, length], u32s or u64s
// (large types)][bytes].
func constantBytes(raw []byte, n int) (block, error) {
	le := binary.LittleEndian
	bad := func() (block, error) {
		return block{}, corrupt("a constant page's value is not one value with its offsets (%d bytes)", len(raw))
	}
	if len(raw) < 12 || le.Uint32(raw) != 2 {
		return bad()
	}
	offs, size := uint64(le.Uint32(raw[4:])), uint64(le.Uint32(raw[8:]))
	if offs != 8 && offs != 16 || uint64(len(raw)) != 12+offs+size {
		return bad()
	}
	var start, end uint64
	if offs == 8 {
		start, end = uint64(le.Uint32(raw[12:])), uint64(le.Uint32(raw[16:]))
	} else {
		start, end = le.Uint64(raw[12:]), le.Uint64(raw[20:])
	}
	if start != 0 || end != size {
		return bad()
	}
	v := raw[12+offs:]
	if len(v)*n > MaxPageBytes {
		return block{}, corrupt("%d copies of a %d-byte constant", n, len(v))
	}
	out := block{n: n, offsets: make([]uint64, n+1), data: bytes.Repeat(v, n)}
	for i := range n {
		out.offsets[i+1] = uint64((i + 1) * len(v)) //nolint:gosec // bounded above
	}
	return out, nil
}
