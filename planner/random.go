package planner

import "math/bits"

// The planner's randomness is its own code, so that no Go or library upgrade
// can change a plan: a 64-bit mixing function (the finaliser of SplitMix64)
// to derive keys, and a keyed Feistel permutation with cycle walking to map
// positions to positions in O(1) without tables. Both are pinned by golden
// vectors in random_test.go under PlanVersion.

// mix64 is SplitMix64's finaliser: a bijection on uint64 with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// derive returns a key for one purpose from a parent key and a value: keys
// for (seed, purpose, epoch, split, block) are built by chaining derive.
func derive(key, v uint64) uint64 {
	return mix64(key ^ mix64(v+0x9e3779b97f4a7c15))
}

// Purposes separate the random streams of the plan: the same seed never
// drives two decisions with the same numbers.
const (
	purposeUnitOrder   uint64 = 1 // order of shards before the splits are cut (seed only)
	purposeShardPick   uint64 = 2 // which shards give a stream's partial pass (seed, epoch, stream)
	purposeLongSplits  uint64 = 3 // which splits get one sample more (seed, epoch)
	purposePieceOrder  uint64 = 4 // order of the pieces inside a split (seed, epoch, split)
	purposeBlock       uint64 = 5 // order of the samples inside a block (seed, epoch, split, block)
	purposeLane        uint64 = 6 // the seed of a stream cut on its own (seed, stream)
	purposePass        uint64 = 7 // the seed of a stream's passes under a schedule (seed, stream)
	purposeBucket      uint64 = 8 // the seed of every bucket's plan (seed)
	purposeBucketOrder uint64 = 9 // the buckets' order in a window of batches (seed, epoch, window)
)

// feistelRounds is the number of rounds of the permutation. Four rounds of a
// pseudo-random function give a pseudo-random permutation (Luby-Rackoff);
// six leave a margin for the small domains of short blocks.
const feistelRounds = 6

// permutation is a keyed bijection of [0, n). Apply and Invert cost O(1)
// expected (at most a few cycle walks) and allocate nothing.
type permutation struct {
	n    uint64
	key  uint64
	half uint   // bits of each Feistel half: the domain is 2^(2·half) >= n
	mask uint64 // (1 << half) - 1
}

// newPermutation returns the permutation of [0, n) selected by key.
func newPermutation(n, key uint64) permutation {
	half := uint(0)
	if n > 1 {
		// Smallest h with 4^h >= n: the domain is at most 4n, so a cycle
		// walk takes fewer than 4 steps on average.
		half = uint(bits.Len64(n-1)+1) / 2
	}
	return permutation{n: n, key: key, half: half, mask: 1<<half - 1}
}

// round is the Feistel round function: a keyed hash of one half.
func (p permutation) round(r int, x uint64) uint64 {
	return mix64(x^p.key^uint64(r)*0xd6e8feb86659fd93) & p.mask
}

func (p permutation) encrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := range feistelRounds {
		l, r = r, l^p.round(i, r)
	}
	return l<<p.half | r
}

func (p permutation) decrypt(x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = r^p.round(i, l), l
	}
	return l<<p.half | r
}

// Apply returns the position x moves to; x outside [0, n) is returned as is.
func (p permutation) Apply(x uint64) uint64 {
	if x >= p.n { // outside the domain the cycle walk might not end
		return x
	}
	// Cycle walking: the Feistel network permutes [0, 4^half); following the
	// cycle of x until it re-enters [0, n) restricts it to a permutation of
	// [0, n).
	for {
		x = p.encrypt(x)
		if x < p.n {
			return x
		}
	}
}

// Invert returns the x with Apply(x) == y, for y in [0, n).
func (p permutation) Invert(y uint64) uint64 {
	if y >= p.n {
		return y
	}
	for {
		y = p.decrypt(y)
		if y < p.n {
			return y
		}
	}
}
