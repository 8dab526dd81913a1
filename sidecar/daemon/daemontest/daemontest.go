// Package daemontest runs a sidecar in a test's own process and reads what
// it serves: how the tests of a new format or a new order of samples take
// it through a real sidecar.
package daemontest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Serve runs a sidecar of spec (its streams read with reg) in rank mode
// client, its socket, cache and state under dir, until ctx ends; it
// returns a client of it once it is ready. The test fails if the sidecar
// ends with an error.
func Serve(ctx context.Context, t *testing.T, spec datav1alpha1.TrainingDatasetSpec, reg format.Registry, dir string) *shardfeed.Client {
	t.Helper()
	state, err := progress.NewFileStore(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "feed.sock")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Dataset: "test", Spec: spec, Formats: reg, Socket: socket, CacheDir: filepath.Join(dir, "cache"),
			Prefetch: -1, Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModeClient}, Job: "j", Attempt: "a",
			Progress: progress.Local{Store: state}, Log: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the sidecar: %v", err)
		}
	})
	c := shardfeed.New(socket)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Row is one sample served: its step, its global index, and its column
// "value" (the test's data says which value each index holds).
type Row struct {
	Step, Index, Value int64
}

// Rows reads the whole epoch a rank of world is served, in order.
func Rows(ctx context.Context, t *testing.T, c *shardfeed.Client, rank, world int) []Row {
	t.Helper()
	s, err := c.Batches(ctx, shardfeed.Request{Rank: rank, World: world, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	var out []Row
	for {
		rec, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) *array.Int64 {
			ix := rec.Schema().FieldIndices(name)
			if len(ix) == 0 {
				t.Fatalf("no column %q in %v", name, rec.Schema())
			}
			return rec.Column(ix[0]).(*array.Int64)
		}
		value, index, step := col("value"), col("_shardfeed_index"), col("_shardfeed_step")
		for j := range int(rec.NumRows()) {
			out = append(out, Row{Step: step.Value(j), Index: index.Value(j), Value: value.Value(j)})
		}
	}
}
