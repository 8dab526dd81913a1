package lancefile

// Concatenating and slicing decoded levels and values.

// appendBlock appends values [from, to) of src to dst.
func appendBlock(dst *block, src block, from, to int) error {
	if from < 0 || to > src.n || from > to {
		return corrupt("values [%d, %d) of %d", from, to, src.n)
	}
	if err := src.check(); err != nil {
		return err
	}
	if dst.n == 0 && dst.bits == 0 && dst.offsets == nil {
		dst.bits = src.bits
		if src.variable() {
			dst.offsets = []uint64{0}
		}
	}
	if src.variable() != dst.variable() || src.bits != dst.bits {
		return corrupt("chunks of one page decode to different kinds of values")
	}
	switch {
	case src.variable():
		for i := from; i < to; i++ {
			dst.data = append(dst.data, src.value(i)...)
			dst.offsets = append(dst.offsets, uint64(len(dst.data)))
		}
	case src.bits == 1:
		for i := from; i < to; i++ {
			setBit(&dst.fixed, dst.n+i-from, src.fixed[i/8]>>(i%8)&1 == 1)
		}
	default:
		w := src.bits / 8
		dst.fixed = append(dst.fixed, src.fixed[from*w:to*w]...)
	}
	if src.itemValid != nil || dst.itemValid != nil {
		dim := max(src.dim, dst.dim, 1)
		dst.dim = dim
		if dst.itemValid == nil { // the earlier values' items were all valid
			for i := range dst.n * dim {
				setBit(&dst.itemValid, i, true)
			}
		}
		for i := from * dim; i < to*dim; i++ {
			setBit(&dst.itemValid, dst.n*dim+i-from*dim, src.itemValid == nil || src.itemValid[i/8]>>(i%8)&1 == 1)
		}
	}
	dst.n += to - from
	return nil
}

func setBit(b *[]byte, i int, v bool) {
	for len(*b) <= i/8 {
		*b = append(*b, 0)
	}
	if v {
		(*b)[i/8] |= 1 << (i % 8)
	}
}

// append adds a chunk's levels and values to l.
func (l *leaf) append(rep, def []uint16, vals block) error {
	l.rep = append(l.rep, rep...)
	l.def = append(l.def, def...)
	return appendBlock(&l.vals, vals, 0, vals.n)
}

// sliceItems keeps items [from, to) of a leaf without lists (an item is a
// row and a value).
func (l leaf) sliceItems(from, to int) (leaf, error) {
	var out leaf
	if l.def != nil {
		if to > len(l.def) {
			return leaf{}, corrupt("%d definition levels for %d items", len(l.def), to)
		}
		out.def = l.def[from:to]
	}
	if err := appendBlock(&out.vals, l.vals, from, to); err != nil {
		return leaf{}, err
	}
	return out, nil
}

// dropContinuation drops the levels (and their values) before the first
// that begins a row: a row begun in a chunk not read.
func (l leaf) dropContinuation() (leaf, error) {
	n, vals := 0, 0
	for n < len(l.rep) && l.rep[n] == 0 {
		if l.def == nil || l.def[n] <= defNullItem {
			vals++
		}
		n++
	}
	if n == 0 {
		return l, nil
	}
	if l.def != nil && len(l.def) != len(l.rep) {
		return leaf{}, corrupt("%d repetition and %d definition levels", len(l.rep), len(l.def))
	}
	out := leaf{rep: l.rep[n:]}
	if l.def != nil {
		out.def = l.def[n:]
	}
	if err := appendBlock(&out.vals, l.vals, vals, l.vals.n); err != nil {
		return leaf{}, err
	}
	return out, nil
}

// sliceRows keeps rows [from, to) of a leaf with one list: a row begins at
// each repetition level above 0.
func (l leaf) sliceRows(from, to uint64) (leaf, error) {
	if len(l.rep) == 0 && to > from {
		return leaf{}, corrupt("a list page has no repetition levels")
	}
	if l.def != nil && len(l.def) != len(l.rep) {
		return leaf{}, corrupt("%d repetition and %d definition levels", len(l.rep), len(l.def))
	}
	var (
		out              leaf
		row              = ^uint64(0)
		val, start, stop int
		inRange          bool
	)
	start = -1
	for i, r := range l.rep {
		if r > 0 {
			row++
		}
		if row == ^uint64(0) {
			return leaf{}, corrupt("a list page's first level does not begin a row")
		}
		inRange = row >= from && row < to
		visible := l.def == nil || l.def[i] <= defNullItem
		if inRange {
			if start < 0 {
				start = val
			}
			out.rep = append(out.rep, r)
			if l.def != nil {
				out.def = append(out.def, l.def[i])
			}
			if visible {
				stop = val + 1
			}
		}
		if visible {
			val++
		}
		if row >= to {
			break
		}
	}
	if val > l.vals.n {
		return leaf{}, corrupt("levels name %d values, the page has %d", val, l.vals.n)
	}
	if start < 0 {
		start, stop = 0, 0
	}
	stop = max(stop, start)
	if err := appendBlock(&out.vals, l.vals, start, stop); err != nil {
		return leaf{}, err
	}
	return out, nil
}
