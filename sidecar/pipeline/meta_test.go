package pipeline

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/planner"
)

// The _shardfeed_ columns are written into pooled memory that is not
// zeroed: a batch must not inherit a released batch's pad bits, ids or
// streams, whatever its size.
func TestMetaColumnsOwnEveryByteOfPooledMemory(t *testing.T) {
	shards := []*decodedShard{{}, {skipped: true}}
	for _, tc := range []struct {
		name    string
		n       int
		pad     func(i int) bool
		skipped func(i int) bool
	}{
		{"every row padded", 512, func(int) bool { return true }, func(int) bool { return false }},
		{"none padded after all were", 512, func(int) bool { return false }, func(int) bool { return false }},
		{"rows of a skipped shard", 300, func(int) bool { return false }, func(i int) bool { return i%3 == 0 }},
		{"one row", 1, func(int) bool { return false }, func(int) bool { return false }},
		{"rows not a multiple of 8", 13, func(i int) bool { return i == 12 }, func(int) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samples := make([]planner.Sample, tc.n)
			rows := make([]rowRef, tc.n)
			for i := range samples {
				samples[i] = planner.Sample{ID: int64(1000 + i), Stream: i % 2, Pad: tc.pad(i)}
				if tc.skipped(i) {
					rows[i].Src = 1
				}
			}
			cols := metaColumns(samples, rows, shards, 42)
			defer func() {
				for _, c := range cols {
					c.Release()
				}
			}()
			ids, streams, steps, pads := cols[0].(*array.Int64), cols[1].(*array.Int16), cols[2].(*array.Int64), cols[3].(*array.Boolean)
			for i, s := range samples {
				wantPad := s.Pad || tc.skipped(i)
				if ids.Value(i) != s.ID || int(streams.Value(i)) != s.Stream || steps.Value(i) != 42 || pads.Value(i) != wantPad {
					t.Fatalf("row %d: id %d stream %d step %d pad %v, want %d %d 42 %v",
						i, ids.Value(i), streams.Value(i), steps.Value(i), pads.Value(i), s.ID, s.Stream, wantPad)
				}
			}
			for i, c := range cols {
				if c.Len() != tc.n || c.NullN() != 0 {
					t.Fatalf("column %d: %d rows, %d nulls; want %d rows, none null", i, c.Len(), c.NullN(), tc.n)
				}
			}
		})
	}
}
