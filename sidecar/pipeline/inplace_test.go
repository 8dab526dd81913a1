package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// openInPlace opens a feed as shardfeed serve does: file:// shards read in
// place from their own files.
func openInPlace(t *testing.T, manifest, cacheDir string) *daemon.Feed {
	t.Helper()
	feed, err := openWith(t, manifest, daemon.Config{CacheDir: cacheDir, Prefetch: -1})
	if err != nil {
		t.Fatal(err)
	}
	return feed
}

// Local shards (MDS files, Parquet row groups: ranges of a file) are read
// in place: every sample is the one the copying cache gives, nothing is
// copied into the cache, each shard is verified once; a file truncated
// under its mapping fails the read, not the sidecar.
func TestLocalShardsAreReadInPlace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", 300, 2000, ""); err != nil {
		t.Fatal(err)
	}
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", 300, 100, 25); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, format string }{{"m", "mds"}, {"p", "parquet"}} {
		t.Run(tc.format, func(t *testing.T) {
			manifest := sampledata.Manifest("ds", []sampledata.Stream{{Name: tc.name, Format: tc.format, URI: "file://" + filepath.Join(dir, tc.name) + "/"}},
				"  numSplits: 1\n  globalBatchSize: 10\n  shuffle: {enabled: false}\n")
			cacheDir := t.TempDir()
			inPlace, copied := openInPlace(t, manifest, cacheDir), openFeed(t, manifest, 0)
			for g := range inPlace.Plan.Total() {
				a, err := inPlace.Pipeline.Sample(ctx, g)
				if err != nil {
					t.Fatalf("sample %d in place: %v", g, err)
				}
				b, err := copied.Pipeline.Sample(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				if !array.RecordEqual(a, b) {
					t.Fatalf("sample %d in place differs from the copied shard's", g)
				}
				a.Release()
				b.Release()
			}
			st, want := inPlace.Pipeline.Stats().Cache, copied.Pipeline.Stats().Cache
			if st.Downloads != 0 || st.UsedBytes != 0 || st.InPlaceVerified != want.Downloads || want.Downloads == 0 {
				t.Errorf("in place: %+v; want no download, one verification per shard (%d)", st, want.Downloads)
			}
			var files []string
			_ = filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && d.Name() != ".inplace" { // the verifications' record
					files = append(files, p)
				}
				return nil
			})
			if len(files) != 0 {
				t.Errorf("the cache holds %v", files)
			}
		})
	}

	// The owner of the files truncates one while it is mapped.
	manifest := sampledata.Manifest("ds", []sampledata.Stream{{Name: "m", Format: "mds", URI: "file://" + filepath.Join(dir, "m") + "/"}},
		"  numSplits: 1\n  globalBatchSize: 10\n  shuffle: {enabled: false}\n")
	feed := openInPlace(t, manifest, t.TempDir())
	rec, err := feed.Pipeline.Sample(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	shards, _ := filepath.Glob(filepath.Join(dir, "m", "shard.*"))
	if len(shards) == 0 {
		t.Fatal("no shard files")
	}
	if err := os.Truncate(shards[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := feed.Pipeline.Sample(ctx, 3); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("reading a truncated mapped shard: %v, want an error saying it changed", err)
	}
}
