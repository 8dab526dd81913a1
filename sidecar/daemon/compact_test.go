package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/sidecar/daemon/daemontest"
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
	if _, err := os.Stat(filepath.Join(data, filepath.FromSlash(index.Key))); err == nil {
		t.Fatal("index.json is left beside the compact index")
	}
	for rank := range 2 {
		j, c := served[index.FormJSON][rank], served[index.FormCompact][rank]
		if len(j) == 0 || !slices.Equal(j, c) {
			t.Fatalf("rank %d: served %d rows from the compact index, %d from the JSON one, or other rows", rank, len(c), len(j))
		}
	}
}
