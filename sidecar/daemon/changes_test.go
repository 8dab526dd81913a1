package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// A job on one machine keeps the plan of the index it started with when
// its folder grows, and says at start what that plan does not read; a
// pod's sidecar (no CheckSource) lists nothing.
func TestAJobSaysWhatItsPlanIgnoresOfAGrownSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := t.TempDir()
	rows := func(key string, n int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "{\"id\": %d}\n", i)
		}
		if err := os.WriteFile(filepath.Join(data, key), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rows("a.jsonl", 64)
	indexJSONL(ctx, t, data)
	rows("b.jsonl", 16)
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 4, GlobalBatchSize: 8,
	}
	for _, check := range []bool{true, false} {
		var logged bytes.Buffer
		feed, err := daemon.Open(ctx, daemon.Config{Dataset: "test", Spec: spec, CacheDir: filepath.Join(t.TempDir(), "cache"), Prefetch: -1,
			Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pods: 1, ProcsPerPod: 1}, CheckSource: check,
			ReindexCommand: func(stream string) string { return "shardfeed index -f ds.yaml --stream " + stream },
			Log:            slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		samples := feed.Plan.Steps() * 8
		feed.Pipeline.Close()
		if samples != 64 {
			t.Fatalf("the plan has %d samples, the index 64", samples)
		}
		said := logged.String()
		if !check {
			if strings.Contains(said, "changed") {
				t.Fatalf("a pod's sidecar compared its source: %s", said)
			}
			continue
		}
		for _, want := range []string{`stream \"t\": its source changed since it was indexed: 1 object added (b.jsonl)`, "reads no object added since",
			"shardfeed index -f ds.yaml --stream t", "level=WARN"} {
			if !strings.Contains(said, want) {
				t.Fatalf("the log does not say %q:\n%s", want, said)
			}
		}
	}
}

// A job that committed progress (Resuming) is refused at start when an
// object its plan reads was removed since it was indexed: it could not go
// on from its commit. A new job would only be told.
func TestAResumingJobWhosePlannedObjectIsGoneIsRefusedAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := t.TempDir()
	for _, key := range []string{"a.jsonl", "b.jsonl"} {
		if err := os.WriteFile(filepath.Join(data, key), []byte("{\"id\": 1}\n{\"id\": 2}\n{\"id\": 3}\n{\"id\": 4}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	indexJSONL(ctx, t, data)
	if err := os.Remove(filepath.Join(data, "b.jsonl")); err != nil {
		t.Fatal(err)
	}
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "t", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
		NumSplits: 2, GlobalBatchSize: 2,
	}
	for _, resuming := range []bool{false, true} {
		feed, err := daemon.Open(ctx, daemon.Config{Dataset: "test", Job: "j", Spec: spec, CacheDir: filepath.Join(t.TempDir(), "cache"), Prefetch: -1,
			Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pods: 1, ProcsPerPod: 1}, CheckSource: true, Resuming: resuming,
			Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if !resuming {
			if err != nil {
				t.Fatalf("a new job: %v", err)
			}
			feed.Pipeline.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), `objects of the plan job "j" committed on changed since they were indexed: 1 object removed (b.jsonl)`) {
			t.Fatalf("a resuming job: %v", err)
		}
	}
}

// indexJSONL writes the index of the JSON Lines objects in data beside
// them.
func indexJSONL(ctx context.Context, t *testing.T, data string) {
	t.Helper()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + data + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatJSONL, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
}

// A plan without dropLast whose samples do not divide into its splits
// leaves T mod S of them out of every epoch; the sidecar says so at start,
// with how to serve them all, instead of a silently short epoch.
func TestAPlanWithoutDropLastSaysWhatNoSplitHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		rows     int
		dropLast bool
		want     string // "" when nothing is to be said
	}{
		{rows: 66, dropLast: false, want: "2 of the epoch's 66 samples are in no split"},
		{rows: 66, dropLast: true},
		{rows: 64, dropLast: false},
	} {
		data := t.TempDir()
		var b strings.Builder
		for i := range tc.rows {
			fmt.Fprintf(&b, "{\"id\": %d}\n", i)
		}
		if err := os.WriteFile(filepath.Join(data, "a.jsonl"), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		indexJSONL(ctx, t, data)
		spec := datav1alpha1.TrainingDatasetSpec{
			Streams:   []datav1alpha1.Stream{{Name: "t", Format: datav1alpha1.FormatJSONL, Source: datav1alpha1.Source{URI: "file://" + data + "/"}}},
			NumSplits: 4, GlobalBatchSize: 8, DropLast: &tc.dropLast,
		}
		var logged bytes.Buffer
		feed, err := daemon.Open(ctx, daemon.Config{Dataset: "test", Spec: spec, CacheDir: filepath.Join(t.TempDir(), "cache"), Prefetch: -1,
			Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pods: 1, ProcsPerPod: 1},
			Log:       slog.New(slog.NewTextHandler(&logged, nil))})
		if err != nil {
			t.Fatal(err)
		}
		feed.Pipeline.Close()
		said := logged.String()
		switch {
		case tc.want == "" && strings.Contains(said, "in no split"):
			t.Errorf("%d rows, dropLast %v: said %s", tc.rows, tc.dropLast, said)
		case tc.want != "" && (!strings.Contains(said, tc.want) || !strings.Contains(said, "level=WARN") || !strings.Contains(said, "numSplits that divides 66")):
			t.Errorf("%d rows, dropLast %v: the log does not say %q:\n%s", tc.rows, tc.dropLast, tc.want, said)
		}
	}
}
