package lancefile

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
	for _, c := range chunks {
		lo, hi := item, item+c.values
		item = hi
		if !lists && (hi <= from || lo >= to) {
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
	return out.sliceRows(from, to)
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
