package planner

import (
	"fmt"
	"testing"
)

func TestPermutationIsABijectionAndInvertUndoesIt(t *testing.T) {
	sizes := []uint64{0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 100, 255, 256, 257, 1000, 4095, 4097, 65537}
	for _, n := range sizes {
		for _, key := range []uint64{0, 1, 0xdeadbeef} {
			t.Run(fmt.Sprintf("n=%d/key=%x", n, key), func(t *testing.T) {
				p := newPermutation(n, key)
				seen := make([]bool, n)
				for x := range n {
					y := p.Apply(x)
					if y >= n {
						t.Fatalf("Apply(%d) = %d, outside [0, %d)", x, y, n)
					}
					if seen[y] {
						t.Fatalf("Apply(%d) = %d, already the image of another position", x, y)
					}
					seen[y] = true
					if back := p.Invert(y); back != x {
						t.Fatalf("Invert(Apply(%d)) = %d", x, back)
					}
				}
			})
		}
	}
}

func TestPermutationDependsOnKey(t *testing.T) {
	const n = 1000
	a, b := newPermutation(n, 1), newPermutation(n, 2)
	same := 0
	for x := range uint64(n) {
		if a.Apply(x) == b.Apply(x) {
			same++
		}
	}
	// Two random permutations agree on about one position.
	if same > 10 {
		t.Fatalf("permutations with keys 1 and 2 agree on %d of %d positions", same, n)
	}
}

func TestPermutationMovesPositionsUniformly(t *testing.T) {
	// Over many keys, position 0 of a 10-permutation lands on each slot
	// about equally often.
	const n, keys = 10, 20000
	var hits [n]int
	for k := range uint64(keys) {
		hits[newPermutation(n, derive(42, k)).Apply(0)]++
	}
	for slot, h := range hits {
		if h < keys/n*8/10 || h > keys/n*12/10 {
			t.Errorf("slot %d got %d of %d hits, want about %d", slot, h, keys, keys/n)
		}
	}
}

// The golden vectors pin the planner's randomness, which every plan version
// shares: if one of these changes, every plan changes.
func TestRandomnessGoldenVectors(t *testing.T) {
	if got := mix64(1); got != 0x5692161d100b05e5 {
		t.Errorf("mix64(1) = %#x", got)
	}
	if got := derive(7, 9); got != 0xce927a7eba55b61f {
		t.Errorf("derive(7, 9) = %#x", got)
	}
	p := newPermutation(10, 12345)
	var got [10]uint64
	for i := range got {
		got[i] = p.Apply(uint64(i))
	}
	want := [10]uint64{2, 9, 3, 5, 8, 0, 4, 6, 7, 1}
	if got != want {
		t.Errorf("permutation(10, 12345) = %v, want %v", got, want)
	}
}
