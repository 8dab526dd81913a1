package lancefile

import (
	"fmt"
)

// Decoding rows of a 2.0 page. Every 2.0 buffer is transparent (unless a
// field asked for general compression), so a row range maps to byte
// ranges directly: flat values by arithmetic, binary values through their
// end offsets, and only those bytes are read.

// values20 is rows of a 2.0 page decoded: their values and validity
// bitmap (nil: all valid).
type values20 struct {
	vals  block
	valid []byte
}

// compressionScheme maps a 2.0 Compression message's scheme to the
// General schemes decompressBuffer undoes.
func compressionScheme(s string) int {
	switch s {
	case "zstd":
		return Zstd
	case "lz4":
		return LZ4
	}
	return 0
}

// flatBytes reads the bytes of values [from, to) of a flat encoding's
// buffer; for 1-bit values, a bitmap of to-from bits from bit 0.
func (p *Page) flatBytes(src Source, e *Encoding20, from, to uint64) ([]byte, error) {
	i := int(e.Buffer)
	if i >= len(p.Offsets) {
		return nil, corrupt("a 2.0 page has %d buffers, not %d", len(p.Offsets), i+1)
	}
	size := p.Sizes[i]
	var lo, hi uint64
	if e.Bits == 1 {
		lo, hi = from/8, (to+7)/8
	} else {
		w := e.Bits / 8
		if to > (MaxPageBytes+w-1)/w {
			return nil, corrupt("%d values of %d bits exceed what a page may hold", to, e.Bits)
		}
		lo, hi = from*w, to*w
	}
	var b []byte
	if scheme := compressionScheme(e.Compression); scheme != 0 {
		whole, err := p.buffer(src, i)
		if err != nil {
			return nil, err
		}
		if whole, err = decompressBuffer(scheme, whole); err != nil {
			return nil, err
		}
		if hi > uint64(len(whole)) {
			return nil, corrupt("values [%d, %d) of a 2.0 buffer of %d bytes", from, to, len(whole))
		}
		b = whole[lo:hi]
	} else {
		if hi > size {
			return nil, corrupt("values [%d, %d) of %d bits lie past a 2.0 buffer of %d bytes", from, to, e.Bits, size)
		}
		var err error
		if b, err = src.ReadAt(p.Offsets[i]+lo, hi-lo); err != nil {
			return nil, err
		}
	}
	if e.Bits == 1 && from%8 != 0 {
		out := make([]byte, fixedBytes(int(to-from), 1)) //nolint:gosec // bounded above
		for k := range to - from {
			bit := from%8 + k
			if b[bit/8]>>(bit%8)&1 == 1 {
				out[k/8] |= 1 << (k % 8)
			}
		}
		return out, nil
	}
	return b, nil
}

// decode20 decodes rows [from, to) of the page (counted from its first)
// under encoding e, checked to hold them.
func (p *Page) decode20(src Source, e *Encoding20, from, to uint64) (values20, error) {
	v, err := p.decode20Values(src, e, from, to)
	if err == nil {
		err = v.vals.check()
	}
	if err == nil && v.valid != nil && len(v.valid) < fixedBytes(v.vals.n, 1) {
		err = corrupt("%d values' validity in %d bytes", v.vals.n, len(v.valid))
	}
	return v, err
}

func (p *Page) decode20Values(src Source, e *Encoding20, from, to uint64) (values20, error) {
	if from > to {
		return values20{}, corrupt("rows [%d, %d) of a 2.0 page", from, to)
	}
	n := int(to - from) //nolint:gosec // bounded by a page's rows
	if err := checkCount(n, 1); err != nil {
		return values20{}, err
	}
	switch e.Kind {
	case Flat20:
		b, err := p.flatBytes(src, e, from, to)
		return values20{vals: block{n: n, bits: int(e.Bits), fixed: b}}, err //nolint:gosec // checked
	case Constant20:
		b, err := constant(e.Value, n)
		return values20{vals: b}, err
	case Nullable20:
		return p.nullable20(src, e, from, to)
	case FixedSizeList20, FixedSizeBinary20:
		dim := uint64(e.Dim)
		if to > MaxPageBytes/dim {
			return values20{}, corrupt("%d values of dimension %d", to, dim)
		}
		in, err := p.decode20(src, e.Values, from*dim, to*dim)
		if err != nil {
			return values20{}, err
		}
		if in.vals.variable() || in.vals.allNull || (e.Kind == FixedSizeBinary20 && in.vals.bits != 8) {
			return values20{}, fmt.Errorf("%w: a 2.0 %s over %s items", ErrUnsupported, e.Kind, e.Values.Kind)
		}
		out := block{n: n, bits: in.vals.bits * int(dim), fixed: in.vals.fixed}
		if e.Kind == FixedSizeList20 {
			out.dim, out.itemValid = int(dim), in.valid
		}
		return values20{vals: out}, nil
	case Binary20:
		return p.binary20(src, e, from, to)
	case Dictionary20:
		return p.dictionary20(src, e, from, to)
	case Fsst20:
		in, err := p.decode20(src, e.Values, from, to)
		if err != nil {
			return values20{}, err
		}
		out, err := fsstDecode(e.Symbols, in.vals)
		return values20{vals: out, valid: in.valid}, err
	}
	return values20{}, corrupt("a 2.0 %s encoding where a column's values were expected", e.Kind)
}

func (p *Page) nullable20(src Source, e *Encoding20, from, to uint64) (values20, error) {
	n := int(to - from) //nolint:gosec // bounded by the caller
	switch e.Nulls {
	case allNulls:
		return values20{vals: block{n: n, allNull: true}, valid: make([]byte, fixedBytes(n, 1))}, nil
	case noNulls:
		return p.decode20(src, e.Values, from, to)
	}
	v, err := p.decode20(src, e.Validity, from, to)
	if err != nil {
		return values20{}, err
	}
	if v.vals.bits != 1 || v.valid != nil {
		return values20{}, corrupt("a 2.0 validity of %d bits per value", v.vals.bits)
	}
	out, err := p.decode20(src, e.Values, from, to)
	if err != nil {
		return values20{}, err
	}
	out.valid = pad(v.vals.fixed, n, 1)
	return out, nil
}

// ends20 reads the end offsets of rows [from, to) of a Binary or List
// encoding (a null row's end is stored plus adj): start is the first
// row's start, ends its rows' ends (relative to the page) and valid their
// validity (nil: all valid).
func (p *Page) ends20(src Source, e *Encoding20, adj uint64, from, to uint64) (start uint64, ends []uint64, valid []byte, err error) {
	lo := from
	if from > 0 {
		lo = from - 1 // the end of the row before is this one's start
	}
	raw, err := p.decode20(src, e, lo, to)
	if err != nil {
		return 0, nil, nil, err
	}
	if raw.vals.variable() || raw.vals.allNull || raw.vals.bits < 8 || raw.vals.bits > 64 {
		return 0, nil, nil, corrupt("2.0 offsets of %d bits", raw.vals.bits)
	}
	norm := func(v uint64) (uint64, bool) {
		if adj > 0 && v >= adj {
			return v - adj, false
		}
		return v, true
	}
	k := 0
	if from > 0 {
		start, _ = norm(raw.vals.get(0))
		k = 1
	}
	ends = make([]uint64, 0, to-from)
	prev, nulls := start, 0
	valid = make([]byte, fixedBytes(int(to-from), 1)) //nolint:gosec // bounded by the caller
	for i := k; i < raw.vals.n; i++ {
		end, ok := norm(raw.vals.get(i))
		if end < prev {
			return 0, nil, nil, corrupt("2.0 offsets descend (%d after %d)", end, prev)
		}
		if ok {
			setBit(&valid, i-k, true)
		} else {
			nulls++
		}
		ends, prev = append(ends, end), end
	}
	if nulls == 0 {
		valid = nil
	}
	return start, ends, valid, nil
}

func (p *Page) binary20(src Source, e *Encoding20, from, to uint64) (values20, error) {
	start, ends, valid, err := p.ends20(src, e.Indices, e.NullAdjustment, from, to)
	if err != nil {
		return values20{}, err
	}
	end := start
	if len(ends) > 0 {
		end = ends[len(ends)-1]
	}
	if end-start > MaxPageBytes {
		return values20{}, corrupt("2.0 values of %d bytes in one page", end-start)
	}
	data, err := p.decode20(src, e.Values, start, end)
	if err != nil {
		return values20{}, err
	}
	if data.vals.bits != 8 || data.valid != nil {
		return values20{}, fmt.Errorf("%w: 2.0 binary bytes in a %s encoding", ErrUnsupported, e.Values.Kind)
	}
	offs := make([]uint64, len(ends)+1)
	for i, x := range ends {
		offs[i+1] = x - start
	}
	return values20{vals: block{n: len(ends), offsets: offs, data: data.vals.fixed}, valid: valid}, nil
}

// dictionary20 gathers rows [from, to) from a dictionary page's items: an
// index of 0 is a null, k is item k-1.
func (p *Page) dictionary20(src Source, e *Encoding20, from, to uint64) (values20, error) {
	items, err := p.decode20(src, e.Values, 0, e.Items)
	if err != nil {
		return values20{}, err
	}
	if !items.vals.variable() {
		return values20{}, fmt.Errorf("%w: a 2.0 dictionary of fixed-width items", ErrUnsupported)
	}
	if err := items.vals.check(); err != nil {
		return values20{}, err
	}
	idx, err := p.decode20(src, e.Indices, from, to)
	if err != nil {
		return values20{}, err
	}
	if idx.vals.bits != 8 || idx.vals.variable() {
		return values20{}, corrupt("2.0 dictionary indices of %d bits", idx.vals.bits)
	}
	n := idx.vals.n
	out := block{n: n, offsets: make([]uint64, 1, n+1)}
	valid := make([]byte, fixedBytes(n, 1))
	nulls := 0
	for i := range n {
		k := int(idx.vals.fixed[i])
		switch {
		case k == 0:
			nulls++
		case k > items.vals.n:
			return values20{}, corrupt("2.0 dictionary index %d of %d items", k, items.vals.n)
		default:
			setBit(&valid, i, true)
			out.data = append(out.data, items.vals.value(k-1)...)
		}
		out.offsets = append(out.offsets, uint64(len(out.data)))
	}
	if nulls == 0 {
		valid = nil
	}
	return values20{vals: out, valid: valid}, nil
}
