package daemon_test

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
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/daemon/daemontest"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// A stream whose index is compact (_shardfeed/index.sfi, no index.json)
// is served by a real sidecar as its JSON index is: the same rows, in the
// same steps, to every rank.
func TestACompactIndexIsServedAsItsJSONIndexIs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for i := range 12 {
		var b bytes.Buffer
		for range 3 + i%4 {
			fmt.Fprintf(&b, "%d\n", 1000+next)
			next++
		}
		if err := os.WriteFile(filepath.Join(data, fmt.Sprintf("part-%02d.toy", i)), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reg := formats.Default()
	reg.Register(toy{})
	st, err := stores.Open(ctx, store.Source{URI: "file://" + data + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := reg.Index(ctx, st, "toy", format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
