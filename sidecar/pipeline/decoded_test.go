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

// A reader waiting on a decode another reader started does not inherit
// that reader's leaving: a decode aborted by its own reader's context is
// tried again for the waiter (here the retry finds the shard no longer
// needed, so errNotNeeded rather than the other's error), while a decode
// that failed on its own fails every waiter (a stream once ended when
// another stream's client closed its connection).
func TestAWaiterRetriesADecodeItsStarterAbandoned(t *testing.T) {
	k := shardKey{0, 3}
	gone := errors.New("step 34: context canceled (the client closed the connection)")
	for _, tc := range []struct {
		name    string
		aborted bool
		want    error
	}{
		{"aborted by its starter's context", true, errNotNeeded},
		{"failed on its own", false, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newDecodedTable(nil, nil, 1<<20, 1, &counters{})
			tab.needed = func(shardKey) bool { return false }
			d := &decodedShard{key: k, done: make(chan struct{}), refs: 1}
			tab.shards[k] = d
			got := make(chan error, 1)
			go func() {
				_, err := tab.acquire(context.Background(), k, keep)
				got <- err
			}()
			for waiting := false; !waiting; {
				tab.mu.Lock()
				waiting = d.refs == 2
				tab.mu.Unlock()
			}
			// What acquireOnce does when the decode it started fails.
			tab.mu.Lock()
			d.err, d.aborted = gone, tc.aborted
			delete(tab.shards, k)
			tab.mu.Unlock()
			close(d.done)
			if err := <-got; !errors.Is(err, tc.want) {
				t.Fatalf("the waiter got %v, want %v", err, tc.want)
			}
		})
	}
}
