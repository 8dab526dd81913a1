package pipeline

import (
	"testing"

	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
)

func roomy(int64) bool { return true }
func full(int64) bool  { return false }

// TestFetchSlotsCountSmallShardsInBytes: the fixed fetchers take shards of
// any size; past them, small shards take slots while their bytes in
// flight stay under cache.SmallInFlightBytes, up to cache.MaxDownloads.
func TestFetchSlotsCountSmallShardsInBytes(t *testing.T) {
	const fetchers = 4
	tests := []struct {
		name  string
		bytes int64
		want  int // slots taken before one is refused
	}{
		{"shards of 64 KiB: latency-bound, up to cache.MaxDownloads", 64 << 10, cache.MaxDownloads},
		{"shards of 1 MiB: up to the bytes' bound", 1 << 20, cache.SmallInFlightBytes / (1 << 20)},
		{"shards of 16 MiB: the fixed fetchers", 16 << 20, fetchers},
		{"shards of 1 GiB: the fixed fetchers still", 1 << 30, fetchers},
		{"shards of unknown size: the fixed fetchers", 0, fetchers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &inFlight{}
			n := slotBytes(planner.ShardNeed{Bytes: tt.bytes})
			got := 0
			for f.take(fetchers, n, roomy) {
				got++
				if got > 10*cache.MaxDownloads {
					t.Fatal("take never refused")
				}
			}
			if got != tt.want {
				t.Fatalf("took %d slots, want %d", got, tt.want)
			}
			if got > fetchers && f.take(fetchers, n, full) {
				t.Fatal("a slot past the fixed fetchers was taken where the cache has no room")
			}
			f.give(n)
			if !f.take(fetchers, n, roomy) {
				t.Fatal("a slot given back is not taken again")
			}
			for range got {
				f.give(n)
			}
			if f.fetches != 0 || f.bytes != 0 {
				t.Fatalf("all given back, %d fetches of %d bytes are counted", f.fetches, f.bytes)
			}
		})
	}
}

// TestFetchSlotsGrowWithAGroup: a group's neighbours count in the bytes,
// so a group of small shards does not exceed the bound.
func TestFetchSlotsGrowWithAGroup(t *testing.T) {
	f := &inFlight{}
	for range 4 {
		if !f.take(4, 1<<20, roomy) {
			t.Fatal("a fixed fetcher's slot was refused")
		}
		f.grow(7 << 20) // a group of 8 MiB
	}
	if f.take(4, 64<<10, roomy) {
		t.Fatalf("a fifth slot was taken with %d bytes in flight, over %d", f.bytes, cache.SmallInFlightBytes)
	}
}
