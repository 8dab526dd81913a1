package lancefile

import (
	"encoding/binary"
	"fmt"
)

// Source reads bytes [off, off+n) of a file.
type Source interface {
	ReadAt(off, n uint64) ([]byte, error)
}

// leaf is a column's decoded rows: their repetition and definition levels
// (nil: the layout has none) and their visible values.
type leaf struct {
	rep, def []uint16
	vals     block
}

// buffer reads page buffer i, whole.
func (p *Page) buffer(src Source, i int) ([]byte, error) {
	if i >= len(p.Offsets) {
		return nil, corrupt("a page has %d buffers, not %d", len(p.Offsets), i+1)
	}
	if p.Sizes[i] > MaxPageBytes {
		return nil, corrupt("a page buffer of %d bytes", p.Sizes[i])
	}
	return src.ReadAt(p.Offsets[i], p.Sizes[i])
}

// decode decodes rows [from, to) of the page (rows counted from the
// page's first).
func (p *Page) decode(src Source, from, to uint64) (leaf, error) {
	if from > to || to > p.Rows {
		return leaf{}, corrupt("rows [%d, %d) of a page of %d", from, to, p.Rows)
	}
	l := p.Layout
	if err := checkLayers(l); err != nil {
		return leaf{}, err
	}
	var (
		lf  leaf
		err error
	)
	switch l.Kind {
	case MiniBlock:
		lf, err = p.miniBlock(src, from, to)
	case FullZip:
		lf, err = p.fullZip(src, from, to)
	case Constant:
		lf, err = p.constant(src, from, to)
	case BlobLayout:
		if l.Inner == nil || l.Inner.Values == nil {
			return leaf{}, corrupt("a blob page without its descriptors' layout")
		}
		if err := blobDescriptors(l.Inner.Values); err != nil {
			return leaf{}, err
		}
		inner := *p
		inner.Layout = l.Inner
		return inner.decode(src, from, to)
	default:
		return leaf{}, fmt.Errorf("%w: page layout %d", ErrUnsupported, l.Kind)
	}
	if err != nil || l.Kind == MiniBlock {
		return lf, err // a mini-block page's levels are canonical already
	}
	return lf, canonicalize(lf.def, l.Layers)
}

// canonicalize rewrites a page's definition levels as the canonical ones.
func canonicalize(def []uint16, layers []RepDefLayer) error {
	if def == nil {
		return nil
	}
	canon, err := canonicalLevels(layers)
	if err != nil {
		return err
	}
	for i, d := range def {
		if int(d) >= len(canon) {
			return corrupt("definition level %d of layers %v", d, layers)
		}
		def[i] = canon[d]
	}
	return nil
}

// The definition levels leaves carry, whatever their page's layers: a
// page numbers only the levels its layers have, innermost first.
const (
	defValid      = 0
	defNullItem   = 1
	defNullParent = 2
	defEmptyList  = 3
)

// canonicalLevels maps a page's definition levels to the canonical ones.
func canonicalLevels(layers []RepDefLayer) ([]uint16, error) {
	canon := []uint16{defValid}
	if len(layers) > 2 {
		return nil, fmt.Errorf("%w: a column nested %d levels deep", ErrUnsupported, len(layers)-1)
	}
	for i, layer := range layers {
		switch {
		case i == 0 && layer == NullableItem:
			canon = append(canon, defNullItem)
		case i == 0 && layer != AllValidItem:
			return nil, corrupt("a leaf's layer is a list")
		case layer == NullableItem, layer == NullableList:
			canon = append(canon, defNullParent)
		case layer == EmptyableList:
			canon = append(canon, defEmptyList)
		case layer == NullAndEmptyList:
			canon = append(canon, defNullParent, defEmptyList)
		}
	}
	return canon, nil
}

// checkLayers refuses nesting deeper than one list level.
func checkLayers(l *Layout) error {
	lists := 0
	for _, layer := range l.Layers {
		if layer.isList() {
			lists++
		}
	}
	if lists > 1 {
		return fmt.Errorf("%w: a column nested in %d lists: shardfeed reads one level of list", ErrUnsupported, lists)
	}
	return nil
}

// chunk is one mini-block chunk: where it is and how many values it holds.
type chunk struct {
	off, size uint64
	values    uint64
}

// chunks reads a mini-block page's chunk table.
func (p *Page) chunks(src Source) ([]chunk, error) {
	table, err := p.buffer(src, 0)
	if err != nil {
		return nil, err
	}
	w := 2
	if p.Layout.LargeChunks {
		w = 4
	}
	if len(table)%w != 0 {
		return nil, corrupt("a chunk table of %d bytes", len(table))
	}
	if len(p.Offsets) < 2 {
		return nil, corrupt("a mini-block page without chunks")
	}
	out := make([]chunk, len(table)/w)
	off, end := p.Offsets[1], p.Offsets[1]+p.Sizes[1]
	var items uint64
	for i := range out {
		var e uint64
		if w == 2 {
			e = uint64(binary.LittleEndian.Uint16(table[2*i:]))
		} else {
			e = uint64(binary.LittleEndian.Uint32(table[4*i:]))
		}
		size := 8 * (e>>4 + 1)
		vals := uint64(1) << (e & 0xf)
		if i == len(out)-1 {
			if items > p.Layout.Items {
				return nil, corrupt("chunks hold more than the page's %d items", p.Layout.Items)
			}
			vals = p.Layout.Items - items
		}
		if off+size > end {
			return nil, corrupt("mini-block chunk %d at [%d, +%d) lies past its buffer's end %d", i, off, size, end)
		}
		out[i] = chunk{off: off, size: size, values: vals}
		off += size
		items += vals
	}
	return out, nil
}

// miniChunk is a decoded mini-block chunk.
type miniChunk struct {
	rep, def []uint16
	vals     block
}

// decodeChunk decodes one chunk's bytes.
func (p *Page) decodeChunk(b []byte, c chunk) (miniChunk, error) {
	l := p.Layout
	le := binary.LittleEndian
	at := 0
	u16 := func() (int, error) {
		if at+2 > len(b) {
			return 0, corrupt("a mini-block chunk header ends early")
		}
		v := int(le.Uint16(b[at:]))
		at += 2
		return v, nil
	}
	levels, err := u16()
	if err != nil {
		return miniChunk{}, err
	}
	var repSize, defSize int
	if l.Rep != nil {
		if repSize, err = u16(); err != nil {
			return miniChunk{}, err
		}
	}
	if l.Def != nil {
		if defSize, err = u16(); err != nil {
			return miniChunk{}, err
		}
	}
	if l.Buffers > 64 {
		return miniChunk{}, corrupt("%d buffers in a mini-block chunk", l.Buffers)
	}
	sizes := make([]int, l.Buffers)
	for i := range sizes {
		if l.LargeChunks {
			if at+4 > len(b) {
				return miniChunk{}, corrupt("a mini-block chunk header ends early")
			}
			sizes[i] = int(le.Uint32(b[at:]))
			at += 4
		} else if sizes[i], err = u16(); err != nil {
			return miniChunk{}, err
		}
	}
	take := func(n int) ([]byte, error) {
		at = (at + 7) &^ 7
		if n < 0 || at+n > len(b) || at+n < at {
			return nil, corrupt("a mini-block chunk's buffers overrun its %d bytes", len(b))
		}
		out := b[at : at+n]
		at += n
		return out, nil
	}
	var out miniChunk
	if l.Rep != nil {
		raw, err := take(repSize)
		if err != nil {
			return out, err
		}
		if out.rep, err = decodeLevels(l.Rep, raw, levels); err != nil {
			return out, err
		}
	}
	if l.Def != nil {
		raw, err := take(defSize)
		if err != nil {
			return out, err
		}
		if out.def, err = decodeLevels(l.Def, raw, levels); err != nil {
			return out, err
		}
	}
	bufs := make([][]byte, len(sizes))
	for i, n := range sizes {
		if bufs[i], err = take(n); err != nil {
			return out, err
		}
	}
	out.vals, err = decodeMini(l.Values, bufs, int(c.values)) //nolint:gosec // bounded by the chunk table
	return out, err
}

// decodeLevels decodes n u16 repetition or definition levels.
func decodeLevels(e *Encoding, raw []byte, n int) ([]uint16, error) {
	bufs := [][]byte{raw}
	if e.Kind == Rle { // one buffer: [u64 size of the values][values][run lengths]
		if len(raw) < 8 || binary.LittleEndian.Uint64(raw) > uint64(len(raw)-8) {
			return nil, corrupt("run-length levels of %d bytes", len(raw))
		}
		size := binary.LittleEndian.Uint64(raw)
		bufs = [][]byte{raw[8 : 8+size], raw[8+size:]}
	}
	b, err := decodeMini(e, bufs, n)
	if err != nil {
		return nil, err
	}
	if b.variable() || b.bits != 16 {
		return nil, corrupt("levels of %d bits", b.bits)
	}
	out := make([]uint16, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(b.fixed[2*i:])
	}
	return out, nil
}
