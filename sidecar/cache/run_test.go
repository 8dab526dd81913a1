package cache

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// Row groups of one Parquet file that a reader needs together come in one
// ranged GET, each still cached, checked and held on its own.
func TestNeighbouringRangesComeInOneGet(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 200_000)
	for i := range data {
		data[i] = byte(i * 13 % 251)
	}
	type rng struct{ off, size int64 }
	for _, tc := range []struct {
		name    string
		ranges  []rng
		cached  []int // indexes of ranges cached before
		corrupt int   // index of a range whose hash is wrong (-1: none)
		gets    int64
		fetched int64
	}{
		{name: "four adjacent row groups", ranges: []rng{{0, 1000}, {1000, 1000}, {2000, 500}, {2500, 1500}}, corrupt: -1, gets: 1, fetched: 4000},
		{name: "out of order", ranges: []rng{{2000, 500}, {0, 1000}, {1000, 1000}}, corrupt: -1, gets: 1, fetched: 2500},
		{name: "a gap is not read through (another pod's egress)", ranges: []rng{{0, 1000}, {1100, 900}}, corrupt: -1, gets: 2, fetched: 1900},
		{name: "a cached one splits the run", ranges: []rng{{0, 1000}, {1000, 1000}, {2000, 1000}}, cached: []int{1}, corrupt: -1, gets: 3, fetched: 3000},
		{name: "far apart: a GET each", ranges: []rng{{0, 1000}, {100_000, 1000}}, corrupt: -1, gets: 2, fetched: 2000},
		{name: "no more than PartBytes a GET", ranges: []rng{{0, 3000}, {3000, 3000}, {6000, 3000}}, corrupt: -1, gets: 2, fetched: 9000},
		{name: "a corrupt one is fetched again, on its own", ranges: []rng{{0, 1000}, {1000, 1000}, {2000, 1000}}, corrupt: 1, gets: 1 + 2, fetched: 3000 + 2*1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := stores.Open(ctx, store.Source{URI: "file://" + t.TempDir() + "/"})
			if err != nil {
				t.Fatal(err)
			}
			if err := root.Put(ctx, "part-0.parquet", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			var counts store.Counts
			c := newCache(t, t.TempDir(), store.Counted(root, &counts), Options{PartBytes: 6500, CorruptAttempts: 2})
			shards := make([]Shard, len(tc.ranges))
			for i, r := range tc.ranges {
				sum, _ := checksum.Of("xxh64", data[r.off:r.off+r.size])
				if i == tc.corrupt {
					sum, _ = checksum.Of("xxh64", []byte("not this"))
				}
				shards[i] = Shard{Stream: "web", Key: "part-0.parquet", Size: r.size, Hash: sum.String(), Range: true, Offset: r.off}
			}
			for _, i := range tc.cached {
				if _, err := c.Acquire(ctx, shards[i]); err != nil {
					t.Fatal(err)
				}
				c.Release(shards[i])
			}
			held, err := c.AcquireRun(ctx, shards)
			if (err != nil) != (tc.corrupt >= 0) {
				t.Fatalf("AcquireRun: %v", err)
			}
			if len(held) != len(shards)-min(tc.corrupt+1, 1) {
				t.Fatalf("holds %d of %d shards", len(held), len(shards))
			}
			for i, s := range shards {
				if i == tc.corrupt {
					if c.Present(s) {
						t.Fatalf("the corrupt range %d is cached", i)
					}
					continue
				}
				got, err := os.ReadFile(c.path(s))
				if err != nil || !bytes.Equal(got, data[s.Offset:s.Offset+s.Size]) {
					t.Fatalf("range %d: cached %d bytes (%v), not its own", i, len(got), err)
				}
			}
			if g, f := counts.Gets.Load(), c.Stats().FetchedBytes; g != tc.gets || f != tc.fetched {
				t.Errorf("%d GETs, %d bytes fetched; want %d and %d", g, f, tc.gets, tc.fetched)
			}
			// Held: a full cache cannot evict them until they are released.
			if st := c.Stats(); st.HeldBytes == 0 {
				t.Errorf("nothing held: %+v", st)
			}
			for _, s := range held {
				c.Release(s)
			}
			if st := c.Stats(); st.HeldBytes != 0 {
				t.Errorf("%d bytes still held after releasing every shard", st.HeldBytes)
			}
		})
	}
}
