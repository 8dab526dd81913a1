package lancefile

import "encoding/binary"

// Mini-block pages: small values compressed in chunks of up to a few
// thousand, each chunk holding its levels and values; a chunk table
// (buffer 0) says where each begins, buffer 1 holds them, buffer 2 the
// dictionary if any.

// miniBlock decodes rows [from, to) of a mini-block page. Without lists a
// row is an item, and only the chunks that hold the rows are read; with a
// list, the page's chunks are read and the rows found by their levels.
func (p *Page) miniBlock(src Source, from, to uint64) (leaf, error) {
	l := p.Layout
	chunks, err := p.chunks(src)
	if err != nil {
		return leaf{}, err
	}
	var dict *block
	if l.Dictionary != nil {
		raw, err := p.buffer(src, 2)
		if err != nil {
			return leaf{}, err
		}
		if err := checkCount(int(l.DictionaryItems), 8); err != nil { //nolint:gosec // checked there
			return leaf{}, err
		}
		d, err := decodeWhole(l.Dictionary, raw, int(l.DictionaryItems)) //nolint:gosec // checked
		if err == nil {
			err = d.check()
		}
		if err != nil {
			return leaf{}, err
		}
		dict = &d
	}
	lists := l.Rep != nil
	if !lists && l.Items != p.Rows {
		return leaf{}, corrupt("a mini-block page of %d rows holds %d items", p.Rows, l.Items)
	}
	var out leaf
	var first uint64 // the first item of the first chunk read
	var item uint64
	started := false
	// With lists, the repetition index says which chunks hold the rows:
	// only those are read (all of them when the page has none).
	k0, k1, rowsBefore := 0, len(chunks)-1, uint64(0)
	if lists {
		if k0, k1, rowsBefore, err = p.listChunks(src, len(chunks), from, to); err != nil {
			return leaf{}, err
		}
	}
	for k, c := range chunks {
		lo, hi := item, item+c.values
		item = hi
		if !lists && (hi <= from || lo >= to) || lists && (k < k0 || k > k1) {
			continue
		}
		if !started {
			first, started = lo, true
		}
		raw, err := src.ReadAt(c.off, c.size)
		if err != nil {
			return leaf{}, err
		}
		mc, err := p.decodeChunk(raw, c)
		if err != nil {
			return leaf{}, err
		}
		if dict != nil {
			if mc.vals, err = lookup(*dict, mc.vals); err != nil {
				return leaf{}, err
			}
		}
		if err := out.append(mc.rep, mc.def, mc.vals); err != nil {
			return leaf{}, err
		}
	}
	if err := canonicalize(out.def, l.Layers); err != nil {
		return leaf{}, err
	}
	if !lists {
		return out.sliceItems(int(from-first), int(to-first)) //nolint:gosec // within the page
	}
	if rowsBefore > 0 || k0 > 0 {
		if out, err = out.dropContinuation(); err != nil {
			return leaf{}, err
		}
	}
	return out.sliceRows(from-rowsBefore, to-rowsBefore)
}

// listChunks returns the chunks [k0, k1] that hold rows [from, to) of a
// mini-block page of lists, and the rows that begin before chunk k0, from
// the page's repetition index: for each chunk, the rows that end in it and
// the items at its end of a row that goes on into the next. A page
// without one (or with a deeper one) is read whole.
func (p *Page) listChunks(src Source, chunks int, from, to uint64) (k0, k1 int, before uint64, err error) {
	l := p.Layout
	at := 2
	if l.Dictionary != nil {
		at = 3
	}
	if l.RepIndexDepth != 1 || at >= len(p.Offsets) || from >= to {
		return 0, chunks - 1, 0, nil
	}
	if p.Sizes[at] != 16*uint64(chunks) {
		return 0, 0, 0, corrupt("a repetition index of %d bytes for %d chunks", p.Sizes[at], chunks)
	}
	idx, err := p.buffer(src, at)
	if err != nil {
		return 0, 0, 0, err
	}
	le := binary.LittleEndian
	var ends uint64 // rows ended by the chunks so far
	k0, k1 = -1, -1
	for k := range chunks {
		ended, partial := le.Uint64(idx[16*k:]), le.Uint64(idx[16*k+8:])
		if ended > p.Rows-ends {
			return 0, 0, 0, corrupt("a repetition index ends more than the page's %d rows", p.Rows)
		}
		// Row from begins in the chunk where row from-1 ends, unless it
		// ends at the chunk's end.
		if k0 < 0 && (from == 0 || ends+ended > from || ends+ended == from && partial > 0) {
			k0, before = k, ends
			if k > 0 && le.Uint64(idx[16*(k-1)+8:]) > 0 {
				before++ // a row that began earlier goes on in chunk k
			}
		}
		ends += ended
		if ends >= to {
			k1 = k
			break
		}
	}
	if k0 < 0 || k1 < 0 {
		return 0, 0, 0, corrupt("a repetition index of %d rows does not hold rows [%d, %d)", ends, from, to)
	}
	return k0, k1, before, nil
}

// lookup replaces dictionary indices by the dictionary's values.
func lookup(dict, idx block) (block, error) {
	if idx.variable() || idx.bits%8 != 0 || idx.bits == 0 || idx.bits > 64 {
		return block{}, corrupt("dictionary indices of %d bits", idx.bits)
	}
	out := block{n: idx.n, bits: dict.bits}
	if dict.variable() {
		out.offsets = make([]uint64, idx.n+1)
	}
	for i := range idx.n {
		k := idx.get(i)
		if k >= uint64(dict.n) {
			return block{}, corrupt("dictionary index %d of %d items", k, dict.n)
		}
		if dict.variable() {
			out.data = append(out.data, dict.value(int(k))...)
			out.offsets[i+1] = uint64(len(out.data))
		} else {
			w := dict.bits / 8
			out.fixed = append(out.fixed, dict.fixed[int(k)*w:(int(k)+1)*w]...)
		}
	}
	return out, nil
}
