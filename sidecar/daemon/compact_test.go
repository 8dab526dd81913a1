package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/daemon/daemontest"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// A stream whose index is compact (_shardfeed/index.sfi, no index.json)
// is served by a real sidecar as its JSON index is: the same rows, in the
// same steps, to every rank.
func TestACompactIndexIsServedAsItsJSONIndexIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var sizes []int
	for i := range 12 {
		sizes = append(sizes, 3+i%4)
	}
	data, reg, st, f := toyStream(ctx, t, dir, sizes)
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: "toy", Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 2, GlobalBatchSize: 4, Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To[int64](4)},
	}
	served := map[index.Form][][]daemontest.Row{}
	for _, form := range []index.Form{index.FormJSON, index.FormCompact} {
		key, err := index.WriteForm(ctx, st, f, form)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(data, filepath.FromSlash(key))); err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, string(form))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		c := daemontest.Serve(sctx, t, spec, reg, sub)
		for rank := range 2 {
			rows := daemontest.Rows(sctx, t, c, rank, 2)
			for _, r := range rows {
				if r.Value != 1000+r.Index {
					t.Fatalf("%s: sample %d has value %d", form, r.Index, r.Value)
				}
			}
			served[form] = append(served[form], rows)
		}
		stop()
	}
	if _, err := os.Stat(filepath.Join(data, filepath.FromSlash(indexfile.Key))); err == nil {
		t.Fatal("index.json is left beside the compact index")
	}
	for rank := range 2 {
		j, c := served[index.FormJSON][rank], served[index.FormCompact][rank]
		if len(j) == 0 || !slices.Equal(j, c) {
			t.Fatalf("rank %d: served %d rows from the compact index, %d from the JSON one, or other rows", rank, len(c), len(j))
		}
	}
}

// A pod's sidecar reads a compact index in parts: its header and counts,
// and the entries of the shards its pod's ranks read, not every shard's.
// It serves each of its ranks what a sidecar of the JSON index serves,
// and refuses a rank of another pod.
func TestAPodsSidecarReadsACompactIndexInParts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var sizes []int
	for i := range 96 {
		sizes = append(sizes, 2+i%5)
	}
	data, reg, st, f := toyStream(ctx, t, dir, sizes)
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: "toy", Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 8, GlobalBatchSize: 16, Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To[int64](4)},
	}
	const pods, procs = 4, 2
	served := map[index.Form][][]daemontest.Row{}
	for _, form := range []index.Form{index.FormJSON, index.FormCompact} {
		if _, err := index.WriteForm(ctx, st, f, form); err != nil {
			t.Fatal(err)
		}
		for pod := range pods {
			cfg := daemon.Config{Dataset: "test", Spec: spec, Formats: reg, CacheDir: filepath.Join(dir, string(form), fmt.Sprint(pod)), Prefetch: -1,
				Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pod: pod, Pods: pods, ProcsPerPod: procs}}
			feed, err := daemon.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("%s, pod %d: %v", form, pod, err)
			}
			shards := map[int64]bool{}
			for rank := pod * procs; rank < (pod+1)*procs; rank++ {
				rows := pipelineRows(ctx, t, feed.Pipeline, rank, pods*procs)
				for _, r := range rows {
					if r.Value != 1000+r.Index {
						t.Fatalf("%s: sample %d has value %d", form, r.Index, r.Value)
					}
					shards[shardOf(sizes, r.Index)] = true
				}
				served[form] = append(served[form], rows)
			}
			read, entries := feed.IndexBytes()
			switch form {
			case index.FormJSON:
				if read != 0 || entries != 0 {
					t.Fatalf("a JSON index read in parts: %d bytes, %d entries", read, entries)
				}
			case index.FormCompact:
				// Its shards', and the first (the schema's).
				if held := int64(len(shards) + 1); entries == 0 || entries > held || entries >= int64(len(sizes)) {
					t.Fatalf("pod %d resolved %d entries of %d shards; its ranks read %d", pod, entries, len(sizes), len(shards))
				}
				t.Logf("pod %d: %d bytes of the index read, %d entries of %d", pod, read, entries, len(sizes))
				other := (pod + 1) % pods * procs
				if _, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: other, World: pods * procs, Workers: 1}); err == nil || !strings.Contains(err.Error(), "ask the sidecar of the rank's pod") {
					t.Fatalf("pod %d served rank %d: %v", pod, other, err)
				}
			}
			feed.Pipeline.Close()
		}
	}
	if j, c := served[index.FormJSON], served[index.FormCompact]; len(j) != pods*procs || !slices.EqualFunc(j, c, slices.Equal) {
		t.Fatal("the ranks were served other rows from the compact index read in parts than from the JSON one")
	}
}

// shardOf is the shard of sizes that sample id is in.
func shardOf(sizes []int, id int64) int64 {
	for h, n := range sizes {
		if id < int64(n) {
			return int64(h)
		}
		id -= int64(n)
	}
	return -1
}

// pipelineRows reads the epoch a rank of world is served by p.
func pipelineRows(ctx context.Context, t *testing.T, p *pipeline.Pipeline, rank, world int) []daemontest.Row {
	t.Helper()
	return pipelineRowsFrom(ctx, t, p, rank, world, 0)
}

// pipelineRowsFrom reads the epoch a rank of world is served by p from
// step start.
func pipelineRowsFrom(ctx context.Context, t *testing.T, p *pipeline.Pipeline, rank, world int, start int64) []daemontest.Row {
	t.Helper()
	b, err := p.Batches(ctx, pipeline.Request{Rank: rank, World: world, Workers: 1, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var out []daemontest.Row
	for {
		batch, err := b.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		col := func(name string) *array.Int64 { return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.Int64) }
		value, idx, step := col("value"), col(pipeline.ColumnIndex), col(pipeline.ColumnStep)
		for j := range int(rec.NumRows()) {
			out = append(out, daemontest.Row{Step: step.Value(j), Index: idx.Value(j), Value: value.Value(j)})
		}
		batch.Release()
	}
}

// A pod's sidecar started in the middle of an epoch (a rescale's new pod,
// a resumed job) over an index read in parts passes over the shards its
// pod read before the step, resolving none of them, and is ready.
func TestAPodStartedMidEpochReadsTheEntriesFromItsStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sizes := make([]int, 1200)
	for i := range sizes {
		sizes[i] = 1 + i%2
	}
	feed := compactPodFeed(ctx, t, sizes, 1, 2, 2)
	defer feed.Pipeline.Close()
	first, n, err := feed.Plan.PodSplits(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	step := feed.Plan.Steps() * 3 / 4
	if err := feed.Pipeline.Prefetch(0, first, n, step); err != nil {
		t.Fatal(err)
	}
	for !feed.Pipeline.Ready(0, first, n, step) {
		if ctx.Err() != nil {
			t.Fatalf("not ready at step %d of %d: %+v", step, feed.Plan.Steps(), feed.Pipeline.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ep, err := feed.Pipeline.Epoch(0)
	if err != nil {
		t.Fatal(err)
	}
	// The entries of the shards from the step on, not of those before.
	before := map[int]bool{}
	for _, nd := range ep.ShardsAhead(first, n) {
		if nd.LastStep < step {
			before[nd.Shard] = true
		}
	}
	_, entries := feed.IndexBytes()
	if left := int64(len(sizes) - len(before)); entries > left/2 {
		t.Fatalf("resolved %d entries from step %d of %d; %d shards are read from it on, %d before", entries, step, feed.Plan.Steps(), left, len(before))
	}
	t.Logf("ready at step %d of %d with %d entries resolved of %d shards", step, feed.Plan.Steps(), entries, len(sizes))
	rows := pipelineRowsFrom(ctx, t, feed.Pipeline, 2, 4, step)
	if len(rows) == 0 {
		t.Fatal("no rows from the step")
	}
	for _, r := range rows {
		if r.Value != 1000+r.Index || r.Step < step {
			t.Fatalf("row %+v from step %d", r, step)
		}
	}
}

// A reader that comes at an earlier step than the pod's prefetcher
// started at (its front moves back) is served its batches: the needs the
// prefetcher passed over are not fetched by it unresolved, and the
// reader resolves its own.
func TestAReaderBehindThePrefetchersStartIsServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sizes := make([]int, 1200)
	for i := range sizes {
		sizes[i] = 1 + i%3
	}
	feed := compactPodFeed(ctx, t, sizes, 0, 1, 4)
	defer feed.Pipeline.Close()
	late := feed.Plan.Steps() / 2
	if err := feed.Pipeline.Prefetch(0, 0, 4, late); err != nil {
		t.Fatal(err)
	}
	for !feed.Pipeline.Ready(0, 0, 4, late) {
		if ctx.Err() != nil {
			t.Fatalf("not ready at step %d", late)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for rank := range 4 {
		b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: rank, World: 4, Workers: 1, Start: late / 4, ScopeFirst: 0, ScopeSplits: 4})
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for {
			batch, err := b.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("rank %d: %v", rank, err)
			}
			rec := batch.Record
			value, idx := rec.Column(rec.Schema().FieldIndices("value")[0]).(*array.Int64), rec.Column(rec.Schema().FieldIndices(pipeline.ColumnIndex)[0]).(*array.Int64)
			for j := range int(rec.NumRows()) {
				if value.Value(j) != 1000+idx.Value(j) {
					t.Fatalf("rank %d: sample %d has value %d", rank, idx.Value(j), value.Value(j))
				}
			}
			rows += int(rec.NumRows())
			batch.Release()
		}
		b.Close()
		if want := int(feed.Plan.Steps()-late/4) * 2; rows != want {
			t.Fatalf("rank %d read %d rows from step %d, want %d", rank, rows, late/4, want)
		}
	}
}

// compactPodFeed opens the sidecar of pod of pods (of procs ranks each)
// over a toy stream of sizes whose index is compact, in 4 splits, a
// global batch of 8 and shuffle blocks of 4.
func compactPodFeed(ctx context.Context, t *testing.T, sizes []int, pod, pods, procs int) *daemon.Feed {
	t.Helper()
	dir := t.TempDir()
	data, reg, st, f := toyStream(ctx, t, dir, sizes)
	if _, err := index.WriteForm(ctx, st, f, index.FormCompact); err != nil {
		t.Fatal(err)
	}
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: "toy", Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 4, GlobalBatchSize: 8, Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To[int64](4)},
	}
	feed, err := daemon.Open(ctx, daemon.Config{Dataset: "test", Spec: spec, Formats: reg, CacheDir: filepath.Join(dir, "cache"), Prefetch: -1,
		Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pod: pod, Pods: pods, ProcsPerPod: procs}})
	if err != nil {
		t.Fatal(err)
	}
	return feed
}
