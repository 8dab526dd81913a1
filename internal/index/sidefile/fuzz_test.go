package sidefile

import (
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// FuzzDecodeRuns: a shard's selection runs from a store decode to valid
// runs that encode back to the same bytes, or to an error; never a panic
// or an allocation beyond the input's size.
func FuzzDecodeRuns(f *testing.F) {
	f.Add(EncodeRuns(nil, []indexfile.Run{{2, 3}, {5, 9}}), int64(10))
	f.Add(EncodeRuns(nil, nil), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, int64(1<<40))
	f.Fuzz(func(t *testing.T, b []byte, rows int64) {
		runs, covered, err := DecodeRuns(b, rows)
		if err != nil {
			return
		}
		if string(EncodeRuns(nil, runs)) != string(b) {
			t.Fatalf("%x decodes to %v, which encodes to %x", b, runs, EncodeRuns(nil, runs))
		}
		rest := covered
		for _, r := range Complement(runs, rows) {
			rest += r.Count()
		}
		if rest != rows {
			t.Fatalf("%v and its complement do not cover %d rows", runs, rows)
		}
	})
}
