package pipeline_test

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// Once a pod's prefetcher has fetched every shard of its epoch, it fetches
// the shards of the next epoch's first steps into the cache: the next
// epoch's first batches wait for no store. Shown by taking the store away
// when the epoch is read: the next epoch's first steps are still served,
// though the cache is far too small to have kept them from the epoch's
// start.
func TestTheNextEpochsFirstStepsAreFetchedBeforeItBegins(t *testing.T) {
	ctx := context.Background()
	const firstSteps = 8 // the prefetcher's urgent steps
	for _, shuffle := range []string{"{enabled: false}", "{blockSize: 200, seed: 7}"} {
		t.Run("shuffle "+shuffle, func(t *testing.T) {
			stream := plainMDS(t, 3000, 4000)
			manifest := sampledata.Manifest("ds", []sampledata.Stream{stream}, "  numSplits: 2\n  globalBatchSize: 10\n  shuffle: "+shuffle+"\n")
			probe := openFeed(t, manifest, 0)
			ep0, err := probe.Pipeline.Epoch(0)
			if err != nil {
				t.Fatal(err)
			}
			minimum, err := ep0.MinCacheBytesOf([]int{0}, 1, probe.Prefetch)
			if err != nil {
				t.Fatal(err)
			}
			ep1, err := probe.Pipeline.Epoch(1)
			if err != nil {
				t.Fatal(err)
			}
			firsts := map[planner.Sample]bool{}
			for k := range int64(firstSteps) {
				batch, err := ep1.SplitsBatch(nil, k, 0, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range batch {
					firsts[planner.Sample{Stream: s.Stream, Shard: s.Shard}] = true
				}
			}
			shards := probe.Plan.Params().Streams[0].Index.Len()
			limit := minimum + int64(len(firsts)+2)*probe.Plan.MaxShardBytes()
			if need := int64(len(firsts)) * 4; shards < need {
				t.Fatalf("%d shards: too few for the cache to forget the epoch's first ones", shards)
			}

			feed := openFeed(t, manifest, limit)
			readSplits(ctx, t, feed, 0, -1, 0)
			deadline := time.Now().Add(30 * time.Second)
			for feed.Pipeline.Stats().WarmedNext < int64(len(firsts)) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			st := feed.Pipeline.Stats()
			if st.WarmedNext != int64(len(firsts)) || st.Cache.Evictions == 0 {
				t.Fatalf("%d shards warmed for the next epoch (its first %d steps read %d), %d evictions: want them warmed in a cache that forgot the epoch's start",
					st.WarmedNext, firstSteps, len(firsts), st.Cache.Evictions)
			}
			downloads := st.Cache.Downloads
			if err := os.RemoveAll(strings.TrimPrefix(stream.URI, "file://")); err != nil {
				t.Fatal(err)
			}
			readSplits(ctx, t, feed, 1, firstSteps, 0)
			if got := feed.Pipeline.Stats().Cache.Downloads; got != downloads {
				t.Fatalf("%d downloads for the next epoch's first steps, want none", got-downloads)
			}
			t.Logf("%d shards, the next epoch's first %d steps read %d: %d warmed ahead in a cache of %d bytes", shards, firstSteps, len(firsts), st.WarmedNext, limit)
		})
	}
}

// readSplits reads steps steps (-1: to the end) of epoch as rank 0 of
// world 1 over splits [0, 2), pausing pause after each batch.
func readSplits(ctx context.Context, t *testing.T, feed *daemon.Feed, epoch, steps int64, pause time.Duration) {
	t.Helper()
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Epoch: epoch, Rank: 0, World: 1, Workers: 1, ScopeFirst: 0, ScopeSplits: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for k := int64(0); steps < 0 || k < steps; k++ {
		batch, err := b.Next(ctx)
		if errors.Is(err, io.EOF) && steps < 0 {
			return
		}
		if err != nil {
			t.Fatalf("epoch %d step %d: %v", epoch, k, err)
		}
		batch.Release()
		time.Sleep(pause)
	}
}
