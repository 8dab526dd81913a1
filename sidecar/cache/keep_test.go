package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// A shard Options.Keep keeps is evicted only when no other will do, least
// recently used first either way; FitsBesideHeld counts it as taken.
func TestKeptShardsAreEvictedLast(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		kept []int // of shards 0..3, acquired in order
		// evicted is which of them the fifth shard's download evicts.
		evicted int
	}{
		{"none kept: the least recently used", nil, 0},
		{"the least recently used kept: the next", []int{0}, 1},
		{"all but the most recent kept", []int{0, 1, 2}, 3},
		{"all kept: the least recently used of them", []int{0, 1, 2, 3}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, shards, _ := fixture(t, 100, 100, 100, 100, 100)
			kept := map[string]bool{}
			for _, i := range tt.kept {
				kept[shards[i].Key] = true
			}
			c := newCache(t, t.TempDir(), st, Options{LimitBytes: 400, Keep: func(s Shard) bool { return kept[s.Key] }})
			for _, s := range shards[:4] {
				if _, err := c.Acquire(ctx, s); err != nil {
					t.Fatal(err)
				}
				c.Release(s)
				time.Sleep(2 * time.Millisecond) // a distinct use time each
			}
			if got, want := c.FitsBesideHeld(100), len(tt.kept) < 4; got != want {
				t.Errorf("FitsBesideHeld(100) with %d of 4 kept = %v, want %v", len(tt.kept), got, want)
			}
			if _, err := c.Acquire(ctx, shards[4]); err != nil {
				t.Fatal(err)
			}
			for i, s := range shards[:4] {
				if present := c.Present(s); present == (i == tt.evicted) {
					t.Errorf("shard %d present: %v; want shard %d evicted and no other", i, present, tt.evicted)
				}
			}
		})
	}
}

// Hint names to the node the shards not on disk here that the node keeps
// (hashed or versioned), without waiting; one in flight makes the next
// wait its turn (false), and a failure is counted.
func TestHintNamesOnlyWhatTheNodeCouldGiveAndNeverWaits(t *testing.T) {
	ctx := context.Background()
	st, shards, _ := fixture(t, 100, 100, 100)
	release := make(chan struct{})
	var mu sync.Mutex
	var named [][]Shard
	fail := false
	c := newCache(t, t.TempDir(), st, Options{NodeWarm: func(_ context.Context, s []Shard) error {
		mu.Lock()
		named = append(named, s)
		f := fail
		mu.Unlock()
		<-release
		if f {
			return errors.New("the agent is gone")
		}
		return nil
	}})
	if _, err := c.Acquire(ctx, shards[0]); err != nil {
		t.Fatal(err)
	}
	c.Release(shards[0])
	unhashed := shards[2]
	unhashed.Hash = ""
	if !c.Hint([]Shard{shards[0], shards[1], unhashed}) {
		t.Fatal("the first hint was not taken")
	}
	if c.Hint([]Shard{shards[1]}) {
		t.Error("a hint was taken while the last was in flight")
	}
	close(release)
	waitFor(t, func() bool { return c.Stats().Node.Hinted == 1 })
	mu.Lock()
	if len(named) != 1 || len(named[0]) != 1 || named[0][0].Key != shards[1].Key {
		t.Errorf("named %v; want shard 1 alone (0 is here, 2 is not hashed)", named)
	}
	fail = true
	mu.Unlock()
	if !c.Hint([]Shard{shards[1]}) {
		t.Fatal("a hint after the last ended was not taken")
	}
	waitFor(t, func() bool { return c.Stats().Node.HintErrors == 1 })
	if none := newCache(t, t.TempDir(), st, Options{}); none.Hint(shards) || none.Hints() {
		t.Error("a cache without a node took a hint")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 10 s")
		}
	}
}
