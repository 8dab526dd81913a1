package planner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/server"
)

// TestAnOrderFromOneFileIsServed takes the toy order of toyorder_test.go
// (one file and its row in the orders) through a real sidecar: a JSON
// Lines stream named toy-sequential is indexed, planned and served to two
// ranks, and every rank's every batch is the plan's (what plan --ids
// prints), in the toy's order: ids ascending within each split.
func TestAnOrderFromOneFileIsServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i, n := range []int{10, 7, 5} {
		var b bytes.Buffer
		for range n {
			fmt.Fprintf(&b, "{\"value\": %d}\n", 1000+next) // value = 1000 + the sample's id
			next++
		}
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("part-%d.jsonl", i)), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := formats.Default()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + data + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := reg.Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "toy-sequential", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 2, GlobalBatchSize: 4, Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To[int64](4)},
	}
	x, err := index.ReadStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	params, err := planspec.Params(&spec, []planner.StreamIndex{x})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(params)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := pl.Epoch(0)
	if err != nil {
		t.Fatal(err)
	}

	state, err := progress.NewFileStore(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "feed.sock")
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Dataset: "toy", Spec: spec, Formats: reg, Socket: socket, CacheDir: filepath.Join(dir, "cache"),
			Prefetch: -1, Placement: sidecarconfig.Placement{RankMode: server.RankModeClient}, Job: "j", Attempt: "a", Progress: progress.Local{Store: state}, Log: slog.New(slog.DiscardHandler)})
	}()
	c := shardfeed.New(socket)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		var got []int64
		s, err := c.Batches(ctx, shardfeed.Request{Rank: rank, World: 2, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			value := rec.Column(rec.Schema().FieldIndices("value")[0]).(*array.Int64)
			id := rec.Column(rec.Schema().FieldIndices("_shardfeed_index")[0]).(*array.Int64)
			for j := range int(rec.NumRows()) {
				if value.Value(j) != 1000+id.Value(j) {
					t.Fatalf("sample %d has value %d, want %d", id.Value(j), value.Value(j), 1000+id.Value(j))
				}
				got = append(got, id.Value(j))
			}
		}
		_ = s.Close()
		var want []int64
		for k := range pl.Steps() {
			batch, err := ep.LocalBatch(nil, k, rank, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, smp := range batch {
				want = append(want, smp.ID)
			}
		}
		if !slices.Equal(got, want) || !slices.IsSorted(want) {
			t.Errorf("rank %d was served %v; the plan says %v, ascending", rank, got, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("daemon: %v", err)
	}
}
