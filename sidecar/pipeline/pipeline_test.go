package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

func openFeed(t *testing.T, manifest string, cacheLimit int64) *daemon.Feed {
	t.Helper()
	return openFeedIn(t, manifest, cacheLimit, t.TempDir())
}

func openFeedIn(t *testing.T, manifest string, cacheLimit int64, cacheDir string) *daemon.Feed {
	t.Helper()
	feed, err := openFeedErrIn(t, manifest, cacheLimit, cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	return feed
}

func openFeedErr(t *testing.T, manifest string) (*daemon.Feed, error) {
	t.Helper()
	return openFeedErrIn(t, manifest, 0, t.TempDir())
}

func openFeedErrIn(t *testing.T, manifest string, cacheLimit int64, cacheDir string) (*daemon.Feed, error) {
	t.Helper()
	// The file:// fixtures stand in for a remote store: copied into the
	// cache, whose downloads these tests check (in place: inplace_test.go).
	return openWith(t, manifest, daemon.Config{CacheDir: cacheDir, CacheLimitBytes: cacheLimit, Prefetch: -1, CopyLocalShards: true})
}

// openWith opens the manifest's feed with cfg (its dataset and spec set
// from the manifest), closed when the test ends.
func openWith(t *testing.T, manifest string, cfg daemon.Config) (*daemon.Feed, error) {
	t.Helper()
	var ds datav1alpha1.TrainingDataset
	if err := yaml.UnmarshalStrict([]byte(manifest), &ds); err != nil {
		t.Fatal(err)
	}
	cfg.Dataset, cfg.Spec = ds.Name, ds.Spec
	feed, err := daemon.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(feed.Pipeline.Close)
	return feed, nil
}

// checkRows checks that every data column of rec says which sample the
// row is (testdata's values) and returns the row ids and pad flags.
func checkRows(t *testing.T, pl *planner.Plan, rec arrow.RecordBatch, step int64) ([]int64, []bool) {
	t.Helper()
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("batch has no column %q: %s", name, rec.Schema())
		}
		return rec.Column(idx[0])
	}
	ids := col(pipeline.ColumnIndex).(*array.Int64).Int64Values()
	streams := col(pipeline.ColumnStream).(*array.Int16).Int16Values()
	steps := col(pipeline.ColumnStep).(*array.Int64).Int64Values()
	pads := col(pipeline.ColumnPad).(*array.Boolean)
	own := col("id").(*array.Int64).Int64Values()
	text := col("text").(*array.String)
	var tokens arrow.Array
	if len(rec.Schema().FieldIndices("tokens")) > 0 {
		tokens = col("tokens")
	}
	names := pl.Params().Streams
	out, padOut := append([]int64(nil), ids...), make([]bool, len(ids))
	for i := range ids {
		s := int(streams[i])
		if own[i]+pl.StreamOffset(s) != ids[i] {
			t.Fatalf("row %d: id column %d in stream %d is not sample %d", i, own[i], s, ids[i])
		}
		if got, want := text.Value(i), sampledata.Text(names[s].Name, own[i]); got != want {
			t.Fatalf("row %d: text %q, want %q", i, got, want)
		}
		if steps[i] != step {
			t.Fatalf("row %d: step %d, want %d", i, steps[i], step)
		}
		if tokens != nil {
			var vals []int32
			switch a := tokens.(type) {
			case *array.List:
				lo, hi := a.ValueOffsets(i)
				vals = a.ListValues().(*array.Int32).Int32Values()[lo:hi]
			case *array.FixedSizeList:
				vals = a.ListValues().(*array.Int32).Int32Values()[(a.Offset()+i)*4 : (a.Offset()+i+1)*4]
			default:
				t.Fatalf("tokens column is %s", tokens.DataType())
			}
			for j, v := range vals {
				if v != sampledata.Token(own[i], j) {
					t.Fatalf("row %d: tokens %v, want sample %d's", i, vals, own[i])
				}
			}
		}
		padOut[i] = pads.Value(i)
	}
	return out, padOut
}

// sent returns the record a client reads when the batch is written as the
// socket writer writes it: its IPC messages collected by a MessageWriter,
// zero-copy placeholders replaced by their rows. The hand-off's copy of the
// same messages (CopyTo) must be the same bytes.
func sent(t *testing.T, batch *pipeline.Batch) arrow.RecordBatch {
	t.Helper()
	written := func() *pipeline.MessageWriter {
		mw := &pipeline.MessageWriter{Batch: batch}
		w := ipc.NewWriter(mw, ipc.WithSchema(batch.Record.Schema()))
		if err := w.Write(batch.Record); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return mw
	}
	var buf bytes.Buffer
	bufs := written().Take(nil)
	if _, err := bufs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	mw := written()
	copied := make([]byte, mw.Len()+1)
	if n := mw.CopyTo(copied); n != buf.Len() || !bytes.Equal(copied[:n], buf.Bytes()) {
		t.Fatalf("CopyTo copied %d bytes, not the %d the socket sends", n, buf.Len())
	}
	r, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("no record: %v", r.Err())
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec
}

func TestBatchesMatchThePlanForEveryFormatWorldAndWorkers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", 700, 900, "zstd"); err != nil {
		t.Fatal(err)
	}
	// Stored plain, its columns are served in place from the mapped shards.
	if err := sampledata.MDS(filepath.Join(dir, "mp"), "mp", 700, 900, ""); err != nil {
		t.Fatal(err)
	}
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", 500, 200, 64); err != nil {
		t.Fatal(err)
	}
	if err := sampledata.JSONL(ctx, filepath.Join(dir, "j"), "j", 300, 1500); err != nil {
		t.Fatal(err)
	}
	stream := func(name, format, extra string) sampledata.Stream {
		return sampledata.Stream{Name: name, Format: format, URI: "file://" + filepath.Join(dir, name) + "/", Extra: extra}
	}
	tests := []struct {
		name    string
		streams []sampledata.Stream
		spec    string
		// inPlace: every column is served from the mapped shards, none
		// decoded to the heap.
		inPlace bool
	}{
		{"mds shuffled", []sampledata.Stream{stream("m", "mds", "")}, "  numSplits: 12\n  globalBatchSize: 24\n  shuffle: {blockSize: 100, seed: 7}\n", false},
		{"plain mds served in place", []sampledata.Stream{stream("mp", "mds", "")}, "  numSplits: 12\n  globalBatchSize: 24\n  shuffle: {blockSize: 100, seed: 7}\n", true},
		{"plain mds shuffled in runs", []sampledata.Stream{stream("mp", "mds", "")}, "  numSplits: 12\n  globalBatchSize: 24\n  shuffle: {blockSize: 100, runLength: 8, seed: 7}\n", true},
		{"plain mds and parquet mixed, tokens promoted (decoded), the rest in place", []sampledata.Stream{stream("mp", "mds", `proportion: "2"`), stream("p", "parquet", `proportion: "1"`)},
			"  numSplits: 6\n  globalBatchSize: 36\n  epochSize: 900\n", false},
		{"parquet in order with pad", []sampledata.Stream{stream("p", "parquet", "")}, "  numSplits: 4\n  globalBatchSize: 16\n  shuffle: {enabled: false}\n  dropLast: false\n", false},
		{"mds and parquet mixed, tokens promoted", []sampledata.Stream{stream("m", "mds", `proportion: "2"`), stream("p", "parquet", `proportion: "1"`)},
			"  numSplits: 6\n  globalBatchSize: 36\n  epochSize: 900\n", false},
		{"three formats, common columns", []sampledata.Stream{
			stream("mp", "mds", "columns: [id, text]"), stream("p", "parquet", "columns: [text, id]"), stream("j", "jsonl", "columns: [id, text]")},
			"  numSplits: 6\n  globalBatchSize: 12\n  shuffle: {blockSize: 64}\n  dropLast: false\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			feed := openFeed(t, sampledata.Manifest("ds", tt.streams, tt.spec), 0)
			pl := feed.Plan
			for _, epoch := range []int64{0, 1} {
				ep, err := pl.Epoch(epoch)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range []struct{ world, workers int }{{1, 1}, {2, 3}, {pl.NumSplits(), 2}} {
					seen := map[int64]int{}
					for rank := range w.world {
						for worker := range w.workers {
							// Every other stream is zero-copy, read back as the
							// socket writer sends it.
							zeroCopy := (rank+worker)%2 == 0
							b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Epoch: epoch, Rank: rank, World: w.world, Worker: worker, Workers: w.workers, Start: int64(worker), ZeroCopy: zeroCopy})
							if err != nil {
								t.Fatal(err)
							}
							want := int64(worker)
							for {
								batch, err := b.Next(ctx)
								if errors.Is(err, io.EOF) {
									break
								}
								if err != nil {
									t.Fatal(err)
								}
								if batch.Step != want {
									t.Fatalf("rank %d worker %d: step %d, want %d", rank, worker, batch.Step, want)
								}
								rec := batch.Record
								if zeroCopy {
									rec = sent(t, &batch)
								}
								ids, pads := checkRows(t, pl, rec, batch.Step)
								plan, _ := ep.LocalBatch(nil, batch.Step, rank, w.world)
								if len(plan) != len(ids) {
									t.Fatalf("step %d rank %d: %d rows, plan has %d", batch.Step, rank, len(ids), len(plan))
								}
								for i, s := range plan {
									if s.ID != ids[i] || s.Pad != pads[i] {
										t.Fatalf("step %d rank %d row %d: got (%d, pad %v), plan (%d, pad %v)", batch.Step, rank, i, ids[i], pads[i], s.ID, s.Pad)
									}
									if !s.Pad {
										seen[s.ID]++
									}
								}
								if zeroCopy {
									rec.Release()
								}
								batch.Release()
								want += int64(w.workers)
							}
							b.Close()
							if want < pl.Steps() {
								t.Fatalf("rank %d worker %d ended at step %d of %d", rank, worker, want, pl.Steps())
							}
						}
					}
					delivered := pl.Total() - pl.DroppedPerEpoch()
					if int64(len(seen)) != delivered {
						t.Fatalf("epoch %d world %d: %d distinct ids, want %d", epoch, w.world, len(seen), delivered)
					}
					for id, n := range seen {
						if n != 1 {
							t.Fatalf("epoch %d world %d: id %d delivered %d times", epoch, w.world, id, n)
						}
					}
				}
			}
			st := feed.Pipeline.Stats()
			if st.MappedBytes == 0 || (tt.inPlace && (st.DecodedBytes != 0 || st.DecodedShards == 0)) {
				t.Fatalf("%d decoded shards hold %d bytes decoded and %d mapped; want them mapped, and nothing decoded when every column is in place: %v",
					st.DecodedShards, st.DecodedBytes, st.MappedBytes, tt.inPlace)
			}
		})
	}
}

func TestStreamsWithDifferentColumnsFailAtStartListingTheDifferences(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", 50, 900, ""); err != nil {
		t.Fatal(err)
	}
	if err := sampledata.JSONL(ctx, filepath.Join(dir, "j"), "j", 50, 1500); err != nil {
		t.Fatal(err)
	}
	manifest := sampledata.Manifest("ds", []sampledata.Stream{
		{Name: "m", Format: "mds", URI: "file://" + filepath.Join(dir, "m") + "/"},
		{Name: "j", Format: "jsonl", URI: "file://" + filepath.Join(dir, "j") + "/"},
	}, "  numSplits: 2\n  globalBatchSize: 4\n")
	var ds datav1alpha1.TrainingDataset
	if err := yaml.UnmarshalStrict([]byte(manifest), &ds); err != nil {
		t.Fatal(err)
	}
	_, err := daemon.Open(ctx, daemon.Config{Dataset: ds.Name, Spec: ds.Spec, CacheDir: t.TempDir(), Prefetch: -1})
	if err == nil {
		t.Fatal("streams with different columns were accepted")
	}
	for _, want := range []string{`stream "j" has columns [id, text], stream "m" has [id, text, tokens]`, "spec.streams[].columns"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestAShardThatDoesNotDecodeIsSkippedAsPadRowsUnderThePolicy: an MDS
// stream indexed without hashes, one zstd shard's bytes flipped: the cache
// cannot tell, the decoder can. Under onCorruptShard: skip its rows are
// zeroed pad rows with their planned ids, the others are the samples';
// under fail the batch that needs it is an error naming it.
func TestAShardThatDoesNotDecodeIsSkippedAsPadRowsUnderThePolicy(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "m")
	if err := sampledata.MDS(m, "m", 400, 900, "zstd"); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(m, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(index, &doc); err != nil {
		t.Fatal(err)
	}
	var victim string
	for i, sh := range doc["shards"].([]any) {
		sh := sh.(map[string]any)
		sh["hashes"] = []any{}
		for _, f := range []string{"raw_data", "zip_data"} {
			if fi, ok := sh[f].(map[string]any); ok {
				fi["hashes"] = map[string]any{}
				if f == "zip_data" && i == 1 {
					victim = fi["basename"].(string)
				}
			}
		}
	}
	if index, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m, "index.json"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(m, victim))
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 2; i < len(data)/2+8; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(filepath.Join(m, victim), data, 0o644); err != nil {
		t.Fatal(err)
	}
	stream := sampledata.Stream{Name: "m", Format: "mds", URI: "file://" + m + "/"}
	for _, policy := range []string{"skip", "fail"} {
		t.Run(policy, func(t *testing.T) {
			feed := openFeed(t, sampledata.Manifest("web", []sampledata.Stream{stream}, "  numSplits: 1\n  globalBatchSize: 20\n  shuffle: {enabled: false}\n  onCorruptShard: "+policy+"\n"), 0)
			pl := feed.Plan
			ep, err := pl.Epoch(0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := feed.Pipeline.Batches(context.Background(), pipeline.Request{Rank: 0, World: 1, Worker: 0, Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			skipped := 0
			for k := range pl.Steps() {
				batch, err := b.Next(context.Background())
				if policy == "fail" {
					if err != nil {
						if !strings.Contains(err.Error(), victim) {
							t.Fatalf("the error does not name the shard %s: %v", victim, err)
						}
						return
					}
					batch.Release()
					continue
				}
				if err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				planned, _ := ep.LocalBatch(nil, k, 0, 1)
				rec := batch.Record
				ids := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnIndex)[0]).(*array.Int64)
				pads := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnPad)[0]).(*array.Boolean)
				own := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
				for i, s := range planned {
					if ids.Value(i) != s.ID {
						t.Fatalf("step %d row %d: id %d, the plan has %d", k, i, ids.Value(i), s.ID)
					}
					switch {
					case pads.Value(i) && own.Value(i) != 0:
						t.Fatalf("step %d row %d: a pad row with the value %d", k, i, own.Value(i))
					case pads.Value(i):
						skipped++
					case own.Value(i) != s.ID:
						t.Fatalf("step %d row %d: sample %d holds %d", k, i, s.ID, own.Value(i))
					}
				}
				batch.Release()
			}
			if policy == "fail" {
				t.Fatal("every batch was served from a shard that does not decode")
			}
			want := pl.Params().Streams[0].Index.Shards[1].Samples
			if st := feed.Pipeline.Stats(); int64(skipped) != want || st.SkippedShards != 1 || st.SkippedRows != want {
				t.Fatalf("%d rows skipped, stats %d shards %d rows; want the shard's %d", skipped, st.SkippedShards, st.SkippedRows, want)
			}
		})
	}
}

// plainMDS writes a plain MDS stream of n samples in shards of about
// shardBytes and returns its manifest line.
func plainMDS(t *testing.T, n int, shardBytes int64) sampledata.Stream {
	t.Helper()
	m := filepath.Join(t.TempDir(), "m")
	if err := sampledata.MDS(m, "m", n, shardBytes, ""); err != nil {
		t.Fatal(err)
	}
	return sampledata.Stream{Name: "m", Format: "mds", URI: "file://" + m + "/"}
}

func TestACachedShardTruncatedUnderItsMappingFailsTheReadNotTheSidecar(t *testing.T) {
	ctx := context.Background()
	cacheDir := t.TempDir()
	feed := openFeedIn(t, sampledata.Manifest("ds", []sampledata.Stream{plainMDS(t, 200, 4000)}, "  numSplits: 1\n  globalBatchSize: 10\n  shuffle: {enabled: false}\n"), 0, cacheDir)
	rec, err := feed.Pipeline.Sample(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	// Whoever could write the cache (nothing but the sidecar should)
	// truncates the shard while it stays decoded and mapped: reading it
	// faults (SIGBUS), which must fail the read, not kill the process.
	truncated := 0
	err = filepath.WalkDir(cacheDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(path, ".json") {
			truncated++
			return os.Truncate(path, 0)
		}
		return err
	})
	if err != nil || truncated == 0 {
		t.Fatalf("truncating the cache: %v (%d files)", err, truncated)
	}
	if _, err := feed.Pipeline.Sample(ctx, 3); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("reading a truncated mapped shard: %v, want an error saying it changed", err)
	}
}

func TestACacheFullOfMappedShardsTakesThemBackInsteadOfStalling(t *testing.T) {
	ctx := context.Background()
	stream := plainMDS(t, 2000, 4000)
	manifest := sampledata.Manifest("ds", []sampledata.Stream{stream}, "  numSplits: 1\n  globalBatchSize: 10\n  shuffle: {enabled: false}\n")
	// Room for a few shards of the stream's dozens: every decoded shard
	// keeps its file mapped and held, so the downloads after the first
	// few find the cache full of them.
	feed := openFeed(t, manifest, 6*4096)
	start := time.Now()
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 0, World: 1, Worker: 0, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	n := int64(0)
	for {
		batch, err := b.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		batch.Release()
		n++
	}
	st := feed.Pipeline.Stats()
	if n != feed.Plan.Steps() || st.Cache.Evictions == 0 || st.DecodedEvictions == 0 {
		t.Fatalf("%d of %d steps, %d cache evictions, %d decoded evictions: want every step, the cache evicting what the decoded shards gave back",
			n, feed.Plan.Steps(), st.Cache.Evictions, st.DecodedEvictions)
	}
	// Not a timing: a stall waits out the cache's minute-long full timeout.
	if d := time.Since(start); d > 50*time.Second {
		t.Fatalf("the epoch took %v: the downloads waited for the full cache", d)
	}
}

// Two ranks of a pod never read in step: one runs ahead. With the cache
// `shardfeed simulate` predicts for the pod (planner.MinCacheBytesOf) the
// shards the fast rank decoded and let go are still the slow rank's to
// read; taking them back for the cache must not fetch them twice.
func TestARankAheadOfItsPodMateFetchesEachShardOnceInThePredictedCache(t *testing.T) {
	ctx := context.Background()
	stream := plainMDS(t, 2400, 2000)
	manifest := sampledata.Manifest("ds", []sampledata.Stream{stream}, "  numSplits: 8\n  globalBatchSize: 16\n  shuffle: {blockSize: 96, seed: 4}\n")
	// -1: the slow rank connects only when the fast one is done.
	for _, ahead := range []int64{0, 1, 3, 8, -1} {
		t.Run(fmt.Sprintf("%d steps ahead", ahead), func(t *testing.T) {
			probe := openFeed(t, manifest, 0)
			ep, err := probe.Pipeline.Epoch(0)
			if err != nil {
				t.Fatal(err)
			}
			limit, err := ep.MinCacheBytesOf([]int{0, 1}, 2, probe.Prefetch)
			if err != nil {
				t.Fatal(err)
			}
			want := len(ep.NeedsOf([]int{0, 1}, 2))
			feed := openFeed(t, manifest, limit)
			steps := feed.Plan.Steps()
			if ahead < 0 {
				ahead = steps
			}
			var readers [2]*pipeline.Batches
			next := func(rank int) {
				if readers[rank] == nil {
					b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: rank, World: 2, Workers: 1, ScopeFirst: 0, ScopeSplits: 8})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(b.Close)
					readers[rank] = b
				}
				batch, err := readers[rank].Next(ctx)
				if err != nil {
					t.Fatalf("rank %d: %v", rank, err)
				}
				batch.Release()
			}
			for k := range steps + ahead {
				if k < steps {
					next(1)
				}
				if k >= ahead {
					next(0)
				}
			}
			st := feed.Pipeline.Stats()
			c := st.Cache
			// The next epoch's first shards come too (ahead), where they fit.
			if c.Downloads-c.AheadDownloads != int64(want) || c.PeakBytes > limit {
				t.Fatalf("%d downloads, cache peak %d: simulate predicts %d shards in a cache of %d", c.Downloads, c.PeakBytes, want, limit)
			}
			// Far ahead, the fast rank has let go of shards its mate has yet
			// to read, and the cache had no room to keep them mapped: they
			// moved to the heap.
			if ahead >= 8 && st.HeapCopies == 0 {
				t.Fatalf("%d steps ahead: no shard was copied onto the heap", ahead)
			}
			t.Logf("%d steps ahead: %d downloads, %d heap copies, %d decoded evictions", ahead, c.Downloads, st.HeapCopies, st.DecodedEvictions)
		})
	}
}

// The window past a prefetcher's shards (small shards, counted in bytes)
// keeps to the settings: prefetch 0 fetches none ahead, and a budget for
// decoded shards of a byte none past the shards asked for. A prefetcher
// that ignored them held 23 decoded shards at prefetch 0 and 32 at a
// budget of a byte.
func TestPrefetchWindowKeepsToItsSettings(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		prefetch int
		decoded  int64
	}{
		{"prefetch 0", 0, 0},
		{"a byte for decoded shards", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			manifest := sampledata.Manifest("ds", []sampledata.Stream{plainMDS(t, 2000, 4000)}, "  numSplits: 1\n  globalBatchSize: 10\n  shuffle: {enabled: false}\n")
			feed, err := openWith(t, manifest, daemon.Config{CacheDir: t.TempDir(), Prefetch: tc.prefetch, DecodedLimitBytes: tc.decoded, CopyLocalShards: true})
			if err != nil {
				t.Fatal(err)
			}
			b := openBatches(ctx, t, feed)
			defer b.Close()
			batch, err := b.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			batch.Release()
			// Until the prefetcher has fetched what it will.
			last, still := int64(-1), 0
			for still < 20 {
				time.Sleep(10 * time.Millisecond)
				if n := feed.Pipeline.Stats().Cache.Downloads; n == last {
					still++
				} else {
					last, still = n, 0
				}
			}
			// The first steps' shards (the reader's queue assembles two
			// batches ahead; a step may straddle two shards) and the
			// prefetch's.
			if st := feed.Pipeline.Stats(); st.DecodedShards > 3+tc.prefetch {
				t.Fatalf("%d shards decoded after the first step, %d downloaded: want at most %d", st.DecodedShards, st.Cache.Downloads, 3+tc.prefetch)
			}
		})
	}
}

// openBatches opens the whole plan's reader: rank 0 of a world of 1.
func openBatches(ctx context.Context, t *testing.T, feed *daemon.Feed) *pipeline.Batches {
	t.Helper()
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 0, World: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// epochGets reads rank 0's epoch of a world of one and returns its rows
// and the GETs the store served meanwhile.
func epochGets(t *testing.T, feed *daemon.Feed) (rows int, gets int64) {
	t.Helper()
	ctx := context.Background()
	before := feed.StoreCounts.Gets.Load()
	b := openBatches(ctx, t, feed)
	defer b.Close()
	for {
		batch, err := b.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows += int(batch.Record.NumRows())
		batch.Release()
	}
	return rows, feed.StoreCounts.Gets.Load() - before
}

// A shard's parts that follow each other in its object come in one ranged
// GET, and the others at once: a Parquet file of one row group is its row
// group and its footer, the footer right after it. An epoch of such files
// costs a GET a file, not two one after the other.
func TestAShardsRowGroupAndFooterComeInOneRequest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n, fileRows = 400, 50
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", n, fileRows, fileRows); err != nil {
		t.Fatal(err)
	}
	streams := []sampledata.Stream{{Name: "p", Format: "parquet", URI: "file://" + filepath.Join(dir, "p") + "/"}}
	feed := openFeed(t, sampledata.Manifest("ds", streams, "  numSplits: 2\n  globalBatchSize: 20\n  shuffle: {blockSize: 100, seed: 5}\n"), 0)
	// The index's GETs and shard 0's footer (the schema) come before.
	rows, gets := epochGets(t, feed)
	st := feed.Pipeline.Stats()
	const files = n / fileRows
	// Shard 0's footer came with the schema: its row group alone later.
	if rows != n || st.Cache.Downloads != 2*files || gets != files {
		t.Fatalf("%d rows, %d parts downloaded in %d GETs: want %d rows, %d parts in %d GETs", rows, st.Cache.Downloads, gets, n, 2*files, files)
	}
}

// Row groups of several splits interleave in the needs (each step reads
// one of every split's), so a split's next row group is a split count of
// needs on: the read-ahead continues a run past the row groups the cache
// already has or is fetching, and waits for a run worth a GET rather than
// fetching the run's edge one row group at a time (901 GETs for 1024 row
// groups in order before; 913 shuffled, whose needs of a block come in no
// order). Measured: 137-158 in order, 156-228 shuffled.
func TestInterleavedSplitsRowGroupsComeInRuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n, groupRows = 8192, 8
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", n, n, groupRows); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		shuffle string
		maxGets int64
	}{
		{"in order", "{enabled: false}", n / groupRows / 4},
		{"shuffled", "{seed: 1}", n / groupRows * 3 / 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := []sampledata.Stream{{Name: "p", Format: "parquet", URI: "file://" + filepath.Join(dir, "p") + "/"}}
			feed := openFeed(t, sampledata.Manifest("ds", streams, "  numSplits: 8\n  globalBatchSize: 64\n  shuffle: "+tc.shuffle+"\n"), 0)
			rows, gets := epochGets(t, feed)
			st := feed.Pipeline.Stats()
			if rows != n || st.Cache.Downloads != n/groupRows+1 {
				t.Fatalf("%d rows, %d parts downloaded: want %d and %d", rows, st.Cache.Downloads, n, n/groupRows+1)
			}
			if gets > tc.maxGets {
				t.Fatalf("%d GETs for %d row groups: want at most %d", gets, n/groupRows, tc.maxGets)
			}
			t.Logf("%d GETs for %d row groups", gets, n/groupRows)
		})
	}
}

// A prefetcher fetches the neighbouring row groups it needs together with
// one ranged GET: an epoch of a Parquet stream of small row groups costs
// far fewer requests than row groups, and serves every row once.
func TestNeighbouringRowGroupsComeInOneRequest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const n, fileRows, groupRows = 2000, 1000, 50
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", n, fileRows, groupRows); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		shuffle string
		maxGets int64
	}{
		// 40 row groups, 20 to a file, read in order: a GET for a run of up
		// to 16; a reader that asks first fetches its own (10-17 GETs in
		// all, more on a loaded machine: the bound is half of 40).
		{"in order", "{enabled: false}", 20},
		// With shuffle the plan orders shards at random before it cuts
		// splits and blocks: row groups next to each other in a file are
		// needed together only by chance (this seed: 12-23 GETs).
		{"shuffled", "{blockSize: 200, seed: 3}", 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams := []sampledata.Stream{{Name: "p", Format: "parquet", URI: "file://" + filepath.Join(dir, "p") + "/"}}
			feed := openFeed(t, sampledata.Manifest("ds", streams, "  numSplits: 2\n  globalBatchSize: 20\n  shuffle: "+tc.shuffle+"\n"), 0)
			before := feed.StoreCounts.Gets.Load() // the index's
			b := openBatches(ctx, t, feed)
			defer b.Close()
			seen := map[int64]bool{}
			for {
				batch, err := b.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				ids := batch.Record.Column(batch.Record.Schema().FieldIndices("id")[0]).(*array.Int64)
				for _, id := range ids.Int64Values() {
					if seen[id] {
						t.Fatalf("row %d served twice", id)
					}
					seen[id] = true
				}
				batch.Release()
			}
			gets, st := feed.StoreCounts.Gets.Load()-before, feed.Pipeline.Stats()
			// Each row group and each file's footer is a cached part.
			if files := int64(n / fileRows); len(seen) != n || st.Cache.Downloads != n/groupRows+files {
				t.Fatalf("%d rows, %d parts downloaded: want %d and %d", len(seen), st.Cache.Downloads, n, n/groupRows+files)
			}
			// Two footers besides.
			if gets > tc.maxGets+2 {
				t.Fatalf("%d GETs for %d row groups: want at most %d", gets, n/groupRows, tc.maxGets+2)
			}
			t.Logf("%d GETs for %d row groups", gets, n/groupRows)
		})
	}
}
