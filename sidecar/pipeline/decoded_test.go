package pipeline

import (
	"context"
	"errors"
	"testing"
)

// A prefetcher decides what to fetch from the readers' steps as it last saw
// them; by the time it asks, the readers may have read the shard and the
// table let it go. It must not fetch it again (the flake of
// TestARankAheadOfItsPodMateFetchesEachShardOnceInThePredictedCache: one
// shard downloaded twice in about one run of a hundred).
func TestAPrefetcherDoesNotFetchAShardNoReaderNeedsAnyMore(t *testing.T) {
	k := shardKey{0, 7}
	for _, tc := range []struct {
		name             string
		inMemory, needed bool
		wantErr          error
		wantRefs         int
	}{
		{name: "gone and read by every reader", wantErr: errNotNeeded},
		{name: "still in memory, read by every reader", inMemory: true, wantRefs: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No streams and no cache: a fetch would panic, so the test fails
			// loudly if the table tries one.
			tab := newDecodedTable(nil, nil, 1<<20, 1, &counters{})
			tab.needed = func(shardKey) bool { return tc.needed }
			if tc.inMemory {
				d := &decodedShard{key: k, done: make(chan struct{})}
				close(d.done)
				tab.shards[k] = d
			}
			d, err := tab.acquire(context.Background(), k, keep)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("acquire: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if _, ok := tab.shards[k]; ok || d != nil {
					t.Fatalf("the table has an entry for a shard it refused")
				}
				return
			}
			if d.refs != tc.wantRefs || d.pins != 0 {
				t.Fatalf("refs %d, pins %d: want %d kept, not pinned", d.refs, d.pins, tc.wantRefs)
			}
		})
	}
}
