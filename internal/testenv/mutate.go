package testenv

import "math/rand"

// Mutate returns a copy of b with 1 to maxEdits random edits, as a parser's
// fixed series of mutations applies them (a seeded rng gives the same
// series each run): a byte overwritten, a run of up to 8 bytes cut, a run
// of up to 8 zero bytes inserted (when insert), a bit flipped. It stops
// early if b is emptied.
func Mutate(rng *rand.Rand, b []byte, maxEdits int, insert bool) []byte {
	b = append([]byte(nil), b...)
	kinds := 3
	if insert {
		kinds = 4
	}
	for range 1 + rng.Intn(maxEdits) {
		if len(b) == 0 {
			break
		}
		i := rng.Intn(len(b))
		switch k := rng.Intn(kinds); {
		case k == 0:
			b[i] = byte(rng.Intn(256))
		case k == 1:
			b = append(b[:i], b[min(len(b), i+1+rng.Intn(8)):]...)
		case k == 2 && insert:
			b = append(b[:i], append(make([]byte, 1+rng.Intn(8)), b[i:]...)...)
		default:
			b[i] ^= 1 << rng.Intn(8)
		}
	}
	return b
}
