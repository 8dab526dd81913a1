package formats

import (
	"context"
	"fmt"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// A filter's selection over a hive tree of Parquet files: the rows it
// matches in each row group, partition columns included, as runs that
// decode back to them and a bounded index the stream's index checks.
func TestSelectFindsTheMatchingRowsOfEveryShard(t *testing.T) {
	ctx := context.Background()
	st := hiveTree(t, map[string][]byte{
		"part=0/a.parquet": parquetFile(t, 0, 30, "x"),
		"part=1/a.parquet": parquetFile(t, 30, 30, "x"),
	})
	reg := Default()
	f, err := reg.Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{Partitions: &format.PartitionOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	sel, runs, err := reg.Select(ctx, st, f, "(id % 4 == 0 || x >= 55) && part == 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]int64, len(f.Shards))
	for i, e := range f.Shards {
		samples[i] = e.Samples
	}
	if err := sel.Check(f.StreamIndex().ContentHash(), samples, int64(len(runs))); err != nil {
		t.Fatal(err)
	}
	var matched []int64
	var first int64
	for i, s := range sel.Shards {
		rs, covered, err := index.DecodeRuns(runs[s.Offset:s.Offset+s.Length], samples[i])
		if err != nil || covered != s.Matching {
			t.Fatalf("shard %d: %v, %d covered of %d", i, err, covered, s.Matching)
		}
		for _, r := range rs {
			for row := r[0]; row < r[1]; row++ {
				matched = append(matched, first+row)
			}
		}
		first += samples[i]
	}
	// Rows are ids in key order: part=1 holds ids 30..59.
	want := []int64{32, 36, 40, 44, 48, 52, 55, 56, 57, 58, 59}
	if fmt.Sprint(matched) != fmt.Sprint(want) {
		t.Fatalf("matched %v, want %v", matched, want)
	}
	if _, _, err := reg.Select(ctx, st, f, "lang == 'en'", nil); err == nil || !strings.Contains(err.Error(), "no column lang: the columns are id, x, part") {
		t.Fatalf("an unknown column: %v", err)
	}
}
