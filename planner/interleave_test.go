package planner

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// The interleaving is the merge of the sequences by exact keys, and every
// prefix holds each sequence in proportion, give or take one.
func TestInterleaveMergesByKeyAndKeepsProportions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n := make([]int64, 1+r.IntN(4))
		for s := range n {
			n[s] = int64(r.IntN(40))
		}
		n[r.IntN(len(n))]++ // at least one item
		v := newInterleave(n)
		type item struct {
			key *big.Rat
			s   int
			i   int64
		}
		var want []item
		for s, ns := range n {
			for i := range ns {
				want = append(want, item{big.NewRat(2*i+1, 2*ns), s, i})
			}
		}
		slices.SortStableFunc(want, func(a, b item) int {
			if c := a.key.Cmp(b.key); c != 0 {
				return c
			}
			return a.s - b.s
		})
		seen := make([]int64, len(n))
		for p, it := range want {
			if s, i := v.at(int64(p)); s != it.s || i != it.i {
				t.Fatalf("%v: at(%d) = (%d, %d), want (%d, %d)", n, p, s, i, it.s, it.i)
			}
			if got := v.pos(it.s, it.i); got != int64(p) {
				t.Fatalf("%v: pos(%d, %d) = %d, want %d", n, it.s, it.i, got, p)
			}
			seen[it.s]++
			for s := range n {
				quota := float64(p+1) * float64(n[s]) / float64(v.total)
				if d := float64(seen[s]) - quota; d > 1 || d < -1 {
					t.Fatalf("%v: the first %d items hold %d of sequence %d, its quota is %.2f", n, p+1, seen[s], s, quota)
				}
				if got := v.before(s, int64(p+1)); got != seen[s] {
					t.Fatalf("%v: before(%d, %d) = %d, want %d", n, s, p+1, got, seen[s])
				}
			}
		}
	}
	// Counts near 2^60 do not overflow.
	v := newInterleave([]int64{1 << 60, 3, 1<<60 - 1})
	for _, p := range []int64{0, 1, 1 << 59, v.total - 1} {
		s, i := v.at(p)
		if v.pos(s, i) != p {
			t.Fatalf("at(%d) = (%d, %d), at position %d", p, s, i, v.pos(s, i))
		}
	}
}
