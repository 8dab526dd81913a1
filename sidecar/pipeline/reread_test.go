package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// A reader that comes back to an epoch already read (a trainer restarted
// at its committed step while its sidecar lives on, a second pass) has
// the prefetcher decode ahead of it again, from its step: after an epoch
// read to its end, and after a reader that stopped half-way. Without it
// every batch waited for its shards' decodes (a video stream's second
// pass ran at a sixteenth of the first's).
func TestAReaderOfAnEpochAgainIsPrefetchedFor(t *testing.T) {
	ctx := context.Background()
	manifest := sampledata.Manifest("ds", []sampledata.Stream{plainMDS(t, 3000, 4000)}, "  numSplits: 2\n  globalBatchSize: 10\n  shuffle: {blockSize: 200, seed: 7}\n")
	// Decoded shards are let go at once: a second pass finds none left.
	// The prefetcher may run 64 shards ahead (the epoch's 34 in all), and
	// the reader below takes its time: every shard is the prefetcher's to
	// decode, none the reader's, but the first ones.
	feed, err := openWith(t, manifest, daemon.Config{CacheDir: t.TempDir(), Prefetch: 64, CopyLocalShards: true, DecodedLimitBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	shardsOf := func(epoch, from, to int64) map[planner.Sample]bool {
		t.Helper()
		ep, err := feed.Pipeline.Epoch(epoch)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[planner.Sample]bool{}
		for k := from; k < to; k++ {
			batch, err := ep.SplitsBatch(nil, k, 0, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range batch {
				seen[planner.Sample{Stream: s.Stream, Shard: s.Shard}] = true
			}
		}
		return seen
	}
	steps := feed.Plan.Steps()
	for _, tc := range []struct {
		name        string
		epoch, half int64 // the first pass's steps (-1: to the end)
	}{
		{"an epoch read to its end", 0, -1},
		{"an epoch left half-way", 1, steps / 2},
	} {
		readSplits(ctx, t, feed, tc.epoch, tc.half, time.Millisecond)
		before := feed.Pipeline.Stats().Prefetched
		readSplits(ctx, t, feed, tc.epoch, -1, time.Millisecond)
		got := feed.Pipeline.Stats().Prefetched - before
		// Every shard the epoch reads is prefetched again, but a few the
		// readers reach first (the first batch's, before the prefetcher).
		// The shards the first pass's prefetcher let go (all of them
		// after an epoch read to its end; those no step after the
		// half-way reader's last reads) are prefetched again, but those
		// the reader's first batches ask before the prefetcher has them.
		// Without it none were: that prefetcher had passed them.
		want := 0
		later, first := shardsOf(tc.epoch, max(tc.half, 0), steps), shardsOf(tc.epoch, 0, 4)
		if tc.half < 0 {
			later = nil
		}
		for sh := range shardsOf(tc.epoch, 0, steps) {
			if !later[sh] && !first[sh] {
				want++
			}
		}
		if want < 8 || got < int64(want) {
			t.Errorf("%s, read again: the prefetcher held %d shards, want at least %d", tc.name, got, want)
		}
	}
}
