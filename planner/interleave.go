package planner

import "math/bits"

// interleave merges sequences of n[s] items into one in proportion: item i
// of sequence s has the key (2i+1)/(2·n[s]), items are in key order, ties
// to the lower sequence. Every prefix of length t holds t·n[s]/Σn items of
// sequence s, give or take one: what stratified batching puts in each
// batch and per_stream batching uses to order the streams' batches.
type interleave struct {
	n     []int64
	total int64
}

func newInterleave(n []int64) interleave {
	v := interleave{n: n}
	for _, x := range n {
		v.total += x
	}
	return v
}

// count returns the items of sequence r whose key is below (2i+1)/(2·n[s]),
// or at it when orEqual.
func (v interleave) count(r, s int, i int64, orEqual bool) int64 {
	if r == s {
		return i
	}
	// Items m with (2m+1)·n[s] < (2i+1)·n[r] (<= with orEqual): odd o = 2m+1
	// up to f = floor((P-1)/n[s]) (floor(P/n[s])), P = (2i+1)·n[r].
	hi, lo := bits.Mul64(uint64(2*i+1), uint64(v.n[r])) //nolint:gosec // both are positive
	if !orEqual {
		var borrow uint64
		lo, borrow = bits.Sub64(lo, 1, 0)
		hi -= borrow
	}
	ns := uint64(v.n[s]) //nolint:gosec // positive
	if hi >= ns {        // f >= 2^64: every item of r
		return v.n[r]
	}
	f, _ := bits.Div64(hi, lo, ns)
	return min(int64((f+1)/2), v.n[r]) //nolint:gosec // (f+1)/2 < 2^63
}

// pos returns the position of item i of sequence s.
func (v interleave) pos(s int, i int64) int64 {
	var p int64
	for r := range v.n {
		p += v.count(r, s, i, r < s)
	}
	return p
}

// at returns the sequence and index of the item at position t in [0, total).
func (v interleave) at(t int64) (int, int64) {
	// Item i of s is at x·total ± len(n)/2, x its key: search near there.
	w := int64(len(v.n)) + 2
	for s, n := range v.n {
		if n == 0 {
			continue
		}
		hi, lo := bits.Mul64(uint64(2*t+1), uint64(n))       //nolint:gosec // positive
		est, _ := bits.Div64(hi, lo, uint64(2*v.total))      //nolint:gosec // < n
		a, b := max(int64(est)-w, 0), min(int64(est)+w, n-1) //nolint:gosec // < n
		if v.pos(s, a) > t || v.pos(s, b) < t {
			a, b = 0, n-1 // outside the window: search all of s
		}
		for a < b { // the first i with pos >= t
			m := a + (b-a)/2
			if v.pos(s, m) < t {
				a = m + 1
			} else {
				b = m
			}
		}
		if v.pos(s, a) == t {
			return s, a
		}
	}
	panic("planner: interleave position out of range")
}

// before returns how many items of sequence s are at positions below t.
func (v interleave) before(s int, t int64) int64 {
	a, b := int64(0), v.n[s]
	for a < b {
		m := a + (b-a)/2
		if v.pos(s, m) < t {
			a = m + 1
		} else {
			b = m
		}
	}
	return a
}
