package daemon_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// indexLeRobot indexes the LeRobot dataset at dir (writing its index) and
// returns the index.
func indexLeRobot(ctx context.Context, t *testing.T, dir string) *indexfile.File {
	t.Helper()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatLeRobot, format.IndexOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// A LeRobot dataset whose video LeRobot wrote and something later damaged
// (an episode's frames of one camera scrambled, the index made after, so
// every byte is as indexed): the shard fails with an error naming the
// file and the frame, and onCorruptShard: skip serves that episode's
// frames as pad rows and every other frame once. A build without FFmpeg
// refuses the cameras when the sidecar starts, and serves the data
// columns alone.
func TestADamagedVideoIsACorruptShard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	golden := testenv.GoldenAt(t, filepath.Join("..", "format", "lerobot", "testdata", "golden"))
	dir := testenv.GoldenCopy(t, golden, "multicam")
	f := indexLeRobot(ctx, t, dir)
	var damaged *indexfile.Entry
	for i := range f.Shards {
		if e := &f.Shards[i]; e.Episode.Index == 2 {
			damaged = e
		}
	}
	if damaged == nil || len(damaged.Episode.Clips) == 0 {
		t.Fatal("the multicam dataset has no episode 2 with cameras")
	}
	clip := damaged.Episode.Clips[0].Samples
	path := filepath.Join(dir, filepath.FromSlash(clip.Object))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := clip.Offset; i < clip.Offset+min(clip.Length, 4096); i++ {
		raw[i] ^= 0x5a
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	indexLeRobot(ctx, t, dir) // the damage is the dataset now

	open := func(policy datav1alpha1.CorruptShardPolicy, columns []string) (*daemon.Feed, error) {
		spec := datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{{Name: "robot", Format: datav1alpha1.FormatLeRobot, Columns: columns,
				Source: datav1alpha1.Source{URI: "file://" + dir + "/"}}},
			NumSplits: 1, GlobalBatchSize: 10, OnCorruptShard: policy,
		}
		return openOnePod(ctx, t, spec)
	}
	if !video.Available {
		if _, err := open(datav1alpha1.CorruptShardSkip, nil); !errors.Is(err, video.ErrNoDecoder) || !strings.Contains(err.Error(), `camera "observation.images.`) {
			t.Fatalf("a build without FFmpeg opened a stream of cameras: %v", err)
		}
		feed, err := open(datav1alpha1.CorruptShardSkip, []string{"index", "episode_index", "observation.state"})
		if err != nil {
			t.Fatalf("the data columns alone: %v", err)
		}
		defer feed.Pipeline.Close()
		if rows, pads := epoch(ctx, t, feed.Pipeline); len(rows) != 150 || len(pads) != 0 {
			t.Fatalf("the data columns alone: %d rows, %d pad rows, want 150 and none", len(rows), len(pads))
		}
		return
	}

	feed, err := open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 0, World: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		var batch pipeline.Batch
		if batch, err = b.Next(ctx); err == nil {
			batch.Release()
		}
	}
	b.Close()
	feed.Pipeline.Close()
	if !strings.Contains(err.Error(), clip.Object) || !strings.Contains(err.Error(), "shard "+damaged.Name) {
		t.Fatalf("the damaged shard without the policy: %v, want an error naming %s and shard %s", err, clip.Object, damaged.Name)
	}

	feed, err = open(datav1alpha1.CorruptShardSkip, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Pipeline.Close()
	rows, pads := epoch(ctx, t, feed.Pipeline)
	ep := damaged.Episode
	for id := range int64(150) {
		inDamaged := id >= ep.From+ep.Start && id < ep.From+ep.Start+damaged.Samples
		switch {
		case inDamaged && (rows[id] != 0 || pads[id] != 1):
			t.Errorf("frame %d of the damaged episode: %d rows, %d pad rows, want its pad row", id, rows[id], pads[id])
		case !inDamaged && (rows[id] != 1 || pads[id] != 0):
			t.Errorf("frame %d: %d rows, %d pad rows, want it once", id, rows[id], pads[id])
		}
	}
	if st := feed.Pipeline.Stats(); st.SkippedShards != 1 {
		t.Errorf("%d shards skipped, want the damaged one", st.SkippedShards)
	}
}

// epoch reads epoch 0 of world 1 and counts each id's rows and pad rows.
func epoch(ctx context.Context, t *testing.T, p *pipeline.Pipeline) (rows, pads map[int64]int) {
	t.Helper()
	rows, pads = map[int64]int{}, map[int64]int{}
	eachBatch(ctx, t, p, func(rec arrow.RecordBatch) {
		idx := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnIndex)[0]).(*array.Int64)
		pad := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnPad)[0]).(*array.Boolean)
		for j := range int(rec.NumRows()) {
			if pad.Value(j) {
				pads[idx.Value(j)]++
			} else {
				rows[idx.Value(j)]++
			}
		}
	})
	return rows, pads
}

// openOnePod opens the sidecar's feed of spec for one pod of one process,
// quietly.
func openOnePod(ctx context.Context, t *testing.T, spec datav1alpha1.TrainingDatasetSpec) (*daemon.Feed, error) {
	return daemon.Open(ctx, daemon.Config{Dataset: "robots", Spec: spec, CacheDir: filepath.Join(t.TempDir(), "cache"), Prefetch: -1,
		Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pods: 1, ProcsPerPod: 1},
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// eachBatch reads an epoch of rank 0 of 1, handing each batch to fn.
func eachBatch(ctx context.Context, t *testing.T, p *pipeline.Pipeline, fn func(arrow.RecordBatch)) {
	t.Helper()
	b, err := p.Batches(ctx, pipeline.Request{Rank: 0, World: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for {
		batch, err := b.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(batch.Record)
		batch.Release()
	}
}

// A lerobot stream's frames resized (spec.streams[].lerobot.frames) reach
// the batches at that size, windows of them too, every frame once (the
// API refuses the setting on a stream of another format). A build without
// FFmpeg serves the data columns of such a stream.
func TestLeRobotFramesResizedThroughTheSidecar(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	golden := testenv.GoldenAt(t, filepath.Join("..", "format", "lerobot", "testdata", "golden"))
	dir := testenv.GoldenCopy(t, golden, "multicam")
	indexLeRobot(ctx, t, dir)
	open := func(columns []string) (*daemon.Feed, error) {
		spec := datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{{Name: "robot", Format: datav1alpha1.FormatLeRobot, Columns: columns,
				Source: datav1alpha1.Source{URI: "file://" + dir + "/"},
				LeRobot: &datav1alpha1.LeRobotStream{
					Frames:          &datav1alpha1.ImageDecode{Height: 40, Width: 56, Resize: ptr.To(int32(60))},
					DeltaTimestamps: []datav1alpha1.LeRobotWindow{{Key: "observation.images.front", Seconds: []string{"-0.1", "0"}}},
				}}},
			NumSplits: 1, GlobalBatchSize: 10,
		}
		return openOnePod(ctx, t, spec)
	}
	columns := []string{"index", "observation.images.front", "observation.images.wrist"}
	if !video.Available {
		columns = []string{"index", "observation.state"}
	}
	feed, err := open(columns)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Pipeline.Close()
	seen := map[int64]int{}
	eachBatch(ctx, t, feed.Pipeline, func(rec arrow.RecordBatch) {
		for _, tc := range []struct {
			col  string
			size int
		}{{"observation.images.front", 2 * 3 * 40 * 56}, {"observation.images.wrist", 3 * 40 * 56}} {
			k := rec.Schema().FieldIndices(tc.col)
			if !video.Available {
				if len(k) != 0 {
					t.Fatalf("%s served by a build without FFmpeg", tc.col)
				}
				continue
			}
			if len(k) != 1 {
				t.Fatalf("no column %s in %s", tc.col, rec.Schema())
			}
			if n := rec.Column(k[0]).(*array.FixedSizeList).DataType().(*arrow.FixedSizeListType).Len(); int(n) != tc.size {
				t.Fatalf("%s has %d values a row, want %d", tc.col, n, tc.size)
			}
		}
		idx := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnIndex)[0]).(*array.Int64)
		for j := range int(rec.NumRows()) {
			seen[idx.Value(j)]++
		}
	})
	if len(seen) != 150 {
		t.Fatalf("%d frames served, want the dataset's 150", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("sample %d served %d times", id, n)
		}
	}
}

// A lerobot stream of clips (cameras: Clips) needs no decoder in the
// sidecar: every build serves each camera as an MP4 a sample and its
// times, every frame once.
func TestLeRobotClipsThroughTheSidecar(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	golden := testenv.GoldenAt(t, filepath.Join("..", "format", "lerobot", "testdata", "golden"))
	dir := testenv.GoldenCopy(t, golden, "multicam")
	indexLeRobot(ctx, t, dir)
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "robot", Format: datav1alpha1.FormatLeRobot,
			Source: datav1alpha1.Source{URI: "file://" + dir + "/"},
			LeRobot: &datav1alpha1.LeRobotStream{Cameras: datav1alpha1.CamerasClips,
				DeltaTimestamps: []datav1alpha1.LeRobotWindow{{Key: "observation.images.front", Seconds: []string{"-0.1", "0"}}}}}},
		NumSplits: 1, GlobalBatchSize: 10,
	}
	feed, err := openOnePod(ctx, t, spec)
	if err != nil {
		t.Fatalf("a stream of clips in a build with FFmpeg linked in: %t: %v", video.Available, err)
	}
	defer feed.Pipeline.Close()
	seen := map[int64]int{}
	eachBatch(ctx, t, feed.Pipeline, func(rec arrow.RecordBatch) {
		for col, want := range map[string]arrow.DataType{
			"observation.images.front":      arrow.BinaryTypes.Binary,
			"observation.images.front_time": arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64),
			"observation.images.wrist_time": arrow.PrimitiveTypes.Float64,
		} {
			k := rec.Schema().FieldIndices(col)
			if len(k) != 1 || !arrow.TypeEqual(rec.Schema().Field(k[0]).Type, want) {
				t.Fatalf("%s: %v, want one column of %s", col, k, want)
			}
		}
		clips := rec.Column(rec.Schema().FieldIndices("observation.images.front")[0]).(*array.Binary)
		idx := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnIndex)[0]).(*array.Int64)
		for j := range int(rec.NumRows()) {
			if c := clips.Value(j); len(c) < 16 || string(c[4:8]) != "ftyp" {
				t.Fatalf("row %d's clip is not an MP4 (%d bytes)", j, len(c))
			}
			seen[idx.Value(j)]++
		}
	})
	if len(seen) != 150 {
		t.Fatalf("%d frames served, want the dataset's 150", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("sample %d served %d times", id, n)
		}
	}
}
