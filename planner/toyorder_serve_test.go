package planner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon/daemontest"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
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

	c := daemontest.Serve(ctx, t, spec, reg, dir)
	for rank := range 2 {
		var got []int64
		for _, r := range daemontest.Rows(ctx, t, c, rank, 2) {
			if r.Value != 1000+r.Index {
				t.Fatalf("sample %d has value %d, want %d", r.Index, r.Value, 1000+r.Index)
			}
			got = append(got, r.Index)
		}
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
}
