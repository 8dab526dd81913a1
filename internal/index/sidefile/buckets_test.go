package sidefile

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// Samples fall in the bucket their length (or an image's aspect ratio,
// exactly) says: below the first bound in bucket 0, at a bound in the
// bucket above it.
func TestBucketsOf(t *testing.T) {
	byLength := Buckets{Column: "tokens", Measure: Elements, Bounds: []int64{10, 100}}
	for _, tc := range []struct {
		l    Length
		want int
	}{{Length{0}, 0}, {Length{9}, 0}, {Length{10}, 1}, {Length{99}, 1}, {Length{100}, 2}, {Length{MaxLength}, 2}} {
		if got := byLength.Of(tc.l); got != tc.want {
			t.Errorf("length %d: bucket %d, want %d", tc.l[0], got, tc.want)
		}
	}
	ratios, err := ParseRatios([]string{"3/4", "4/3"})
	if err != nil {
		t.Fatal(err)
	}
	byRatio := Buckets{Column: "image", Measure: ImageSize, Ratios: ratios}
	for _, tc := range []struct {
		h, w uint32
		want int
	}{{400, 299, 0}, {400, 300, 1}, {300, 300, 1}, {300, 399, 1}, {300, 400, 2}, {1, MaxSide, 2}} {
		if got := byRatio.Of(Length{tc.h, tc.w}); got != tc.want {
			t.Errorf("%d×%d (w×h %d×%d): bucket %d, want %d", tc.h, tc.w, tc.w, tc.h, got, tc.want)
		}
	}
	for _, tc := range []struct {
		b    Buckets
		want string
	}{
		{Buckets{Column: "t", Measure: Elements}, "give one of them"},
		{Buckets{Column: "t", Measure: Elements, Bounds: []int64{10, 10}}, "above the one before"},
		{Buckets{Column: "t", Measure: Elements, Bounds: []int64{0}}, "above 0"},
		{Buckets{Column: "t", Measure: Elements, Ratios: ratios}, "aspect ratios cut images"},
		{Buckets{Column: "t", Measure: ImageSize, Ratios: []*big.Rat{big.NewRat(4, 3), big.NewRat(3, 4)}}, "above the one before"},
		{Buckets{Column: "t", Measure: Elements, Bounds: make([]int64, MaxBuckets)}, "at most 64"},
	} {
		if err := tc.b.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.b, err, tc.want)
		}
	}
	if _, err := ParseRatios([]string{"wide"}); err == nil || !strings.Contains(err.Error(), "4/3") {
		t.Errorf("a ratio that is no number: %v", err)
	}
}

// Each bucket's selection holds exactly the rows whose length falls in it,
// numbered among all of a shard's rows (through a row filter's runs), and
// reads back as a filter's selection does: the buckets of a stream are
// filtered copies of it.
func TestBucketSelectionsAreFiltersOfTheRowsInEachBucket(t *testing.T) {
	ctx := context.Background()
	st, _ := localStore(t)
	// Two shards of 6 and 4 rows; the filter matches rows 0-1 and 3-5 of
	// shard 0, and rows 1-3 of shard 1: the lengths are of those.
	matching := [][]indexfile.Run{{{0, 2}, {3, 6}}, {{1, 4}}}
	shards := [][]Length{{{5}, {50}, {500}, {7}, {60}}, {{60}, {61}, {1}}}
	x := &LengthsIndex{Shardfeed: indexfile.Version, Column: "tokens", Measure: Elements, Filter: "f", Index: "abc"}
	var values []byte
	for _, s := range shards {
		values = x.AppendShard(values, s)
	}
	b := Buckets{Column: "tokens", Measure: Elements, Bounds: []int64{10, 100}}
	sels, objects, err := BucketSelections(x, values, b, "f", func(i int) ([]indexfile.Run, error) { return matching[i], nil })
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"[[0 1] [4 5]]", "[[3 4]]"}, // 5, 7 | 1
		{"[[1 2] [5 6]]", "[[1 3]]"}, // 50, 60 | 60, 61
		{"[[3 4]]", "[]"},            // 500 |
	}
	for k, sel := range sels {
		if err := WriteFilter(ctx, st, sel, objects[k]); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFilter(ctx, st, b.Filter(k, "f"), "abc", []int64{6, 4}, 0)
		if err != nil {
			t.Fatalf("bucket %d: %v", k, err)
		}
		for i := range 2 {
			sh := got.Shards[i]
			runs, err := got.ShardRuns(i, objects[k][sh.Offset:sh.Offset+sh.Length], []int64{6, 4}[i])
			if err != nil || fmt.Sprint(runs) != want[k][i] {
				t.Errorf("bucket %d shard %d: %v %v, want %s", k, i, runs, err, want[k][i])
			}
		}
	}
	if name := b.Filter(1, "f"); name != "shardfeed.bucket(tokens: length at 10,100)[1] && (f)" {
		t.Errorf("bucket 1's selection is named %q", name)
	}
	if _, _, err := BucketSelections(x, values, b, "f", func(int) ([]indexfile.Run, error) { return []indexfile.Run{{0, 2}}, nil }); err == nil ||
		!strings.Contains(err.Error(), "the lengths are of 5") {
		t.Errorf("a filter that matches fewer rows than the lengths: %v", err)
	}
	if _, _, err := BucketSelections(x, values, b, "", nil); err == nil || !strings.Contains(err.Error(), "filter") {
		t.Errorf("the lengths of a filter bucketed without it: %v", err)
	}
}
