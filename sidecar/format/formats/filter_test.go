package formats

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/source"
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
	sel, runs, err := reg.Select(ctx, st, index.LayoutOf(f), "(id % 4 == 0 || x >= 55) && part == 1", nil)
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
		rs, covered, err := sidefile.DecodeRuns(runs[s.Offset:s.Offset+s.Length], samples[i])
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
	if _, _, err := reg.Select(ctx, st, index.LayoutOf(f), "lang == 'en'", nil); err == nil || !strings.Contains(err.Error(), "no column lang: the columns are id, x, part") {
		t.Fatalf("an unknown column: %v", err)
	}
}

// A filter on a column the stream has in a type filters cannot read (a
// struct) says so, naming the type: it was "no column meta".
func TestAFilterOnAStructColumnSaysWhyNotNoColumn(t *testing.T) {
	ctx := context.Background()
	meta := arrow.StructOf(arrow.Field{Name: "lang", Type: arrow.BinaryTypes.String, Nullable: true})
	rb := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "meta", Type: meta, Nullable: true}}, nil))
	defer rb.Release()
	for i := range 4 {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		sb := rb.Field(1).(*array.StructBuilder)
		sb.Append(true)
		sb.FieldBuilder(0).(*array.StringBuilder).Append("en")
	}
	st := hiveTree(t, map[string][]byte{"a.parquet": writeParquet(t, rb, 10)})
	reg := Default()
	f, err := reg.Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = reg.Select(ctx, st, index.LayoutOf(f), "meta.lang == 'en'", nil)
	if err == nil || !strings.Contains(err.Error(), `column "meta" is struct<lang: utf8`) || !strings.Contains(err.Error(), "which a filter cannot read") {
		t.Fatalf("a filter on a struct column: %v", err)
	}
	if _, _, err := reg.Select(ctx, st, index.LayoutOf(f), "lang == 'en'", nil); err == nil || !strings.Contains(err.Error(), "no column lang: the columns are id") {
		t.Fatalf("an unknown column: %v", err)
	}
}

// A filtered stream, end to end without a pod: shardfeed index --filter's
// selection written beside the index; the stream opened as the operator
// and the sidecar open it plans over the matching rows only (plan version
// 2, the filter in the fingerprint); a shard decodes to exactly its
// matching rows; a selection that does not fit its shard is a decode
// error; and without a selection the stream is refused naming the command.
func TestAFilteredStreamPlansAndDecodesOnlyItsMatchingRows(t *testing.T) {
	ctx := context.Background()
	st := hiveTree(t, map[string][]byte{"a.parquet": parquetFile(t, 0, 30, "x"), "b.parquet": parquetFile(t, 30, 30, "x")})
	reg := Default()
	f, err := reg.Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	const filter = "x % 3 == 0 && id >= 20"
	spec := datav1alpha1.Stream{Name: "s", Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: st.URI()}, Filter: filter}
	if _, err := streams.Open(ctx, 0, spec, nil, streams.Source(spec), 0); err == nil ||
		!strings.Contains(err.Error(), "has no selection for its filter") || !strings.Contains(err.Error(), "--filter 'x % 3 == 0 && id >= 20'") {
		t.Fatalf("a filtered stream without its selection: %v", err)
	}
	st.ranges = nil
	sel, runs, err := reg.Select(ctx, st, index.LayoutOf(f), filter, nil)
	if err != nil {
		t.Fatal(err)
	}
	// id >= 20 rules out the row groups of ids 0–19 by their statistics:
	// their bytes are never read; the footer once per file.
	if sel.Pruned != 2 {
		t.Errorf("%d row groups pruned, want 2", sel.Pruned)
	}
	reads := map[string]int{}
	for _, r := range st.ranges {
		reads[r]++
	}
	for i, e := range f.Shards {
		own := fmt.Sprint(e.Object, " ", e.Offset, " ", e.Length)
		if want := map[bool]int{true: 0, false: 1}[i < 2]; reads[own] != want {
			t.Errorf("shard %d's bytes read %d times, want %d (reads %v)", i, reads[own], want, st.ranges)
		}
		if footer := fmt.Sprint(e.Object, " ", e.FooterOffset, " ", e.FooterLength); reads[footer] != 1 {
			t.Errorf("%s's footer read %d times, want once", e.Object, reads[footer])
		}
	}
	if err := sidefile.WriteFilter(ctx, st, sel, runs); err != nil {
		t.Fatal(err)
	}
	opened, err := streams.Open(ctx, 0, spec, nil, streams.Source(spec), 0)
	if err != nil {
		t.Fatal(err)
	}
	// Row groups of 10 ids: 0–19 match nothing, then the multiples of 3.
	var counts []int64
	for _, sh := range opened.Index.Shards {
		counts = append(counts, sh.Samples)
	}
	if fmt.Sprint(counts) != "[0 0 3 4 3 3]" || opened.Layout.Index.Shards[0].Samples != 10 {
		t.Fatalf("the planner's counts %v (the layout's first shard %d rows)", counts, opened.Layout.Index.Shards[0].Samples)
	}
	params, err := planspec.Params(&datav1alpha1.TrainingDatasetSpec{Streams: []datav1alpha1.Stream{spec}, NumSplits: 2, GlobalBatchSize: 2}, streams.Indexes([]*streams.Stream{opened}))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(params)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Version() != 2 || pl.Total() != 13 || pl.Fingerprint().Inputs["spec.streams[0].filter"] != sidefile.FilterHash(filter) || !strings.HasPrefix(pl.Fingerprint().Sum, "v2-") {
		t.Fatalf("plan version %d, %d samples, fingerprint %+v", pl.Version(), pl.Total(), pl.Fingerprint())
	}

	read := func(ctx context.Context, p cache.Shard) ([]byte, error) {
		if !p.Range {
			return format.ReadRange(ctx, st, p.Key, 0, -1)
		}
		return format.ReadRange(ctx, st, p.Key, p.Offset, p.Size)
	}
	srcs, err := source.OpenAll(ctx, []*streams.Stream{opened}, reg, read, "")
	if err != nil {
		t.Fatal(err)
	}
	s := srcs[0]
	partsOf := func(i int) [][]byte {
		var out [][]byte
		for _, p := range s.Parts(i) {
			b, err := read(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	var ids []int64
	for i := range s.Shards() {
		if s.Rows(i) == 0 {
			continue
		}
		rec, err := s.Decode(ctx, i, partsOf(i))
		if err != nil {
			t.Fatal(err)
		}
		col := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		ids = append(ids, col.Int64Values()...)
		if rec.NumRows() != s.Rows(i) {
			t.Errorf("shard %d decoded to %d rows, %d match", i, rec.NumRows(), s.Rows(i))
		}
		rec.Release()
	}
	if want := "[21 24 27 30 33 36 39 42 45 48 51 54 57]"; fmt.Sprint(ids) != want {
		t.Fatalf("served ids %v, want %s", ids, want)
	}
	// Shard 3's rows with shard 2's runs: their counts differ.
	parts := partsOf(3)
	parts[len(parts)-1] = partsOf(2)[len(parts)-1]
	var de *source.DecodeError
	if _, err := s.Decode(ctx, 3, parts); !errors.As(err, &de) || !strings.Contains(err.Error(), "its filter's selection") {
		t.Fatalf("another shard's runs: %v", err)
	}
}

// floatParquet writes a Parquet file of id and score, rowGroup rows a
// group (arrow-go's writer, as pyarrow's, leaves NaN out of min and max).
func floatParquet(t *testing.T, scores []float64, rowGroup int64) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "score", Type: arrow.PrimitiveTypes.Float64}}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for i, v := range scores {
		rb.Field(0).(*array.Int64Builder).Append(int64(i))
		rb.Field(1).(*array.Float64Builder).Append(v)
	}
	return writeParquet(t, rb, rowGroup)
}

// A NaN fails an ordering, and Parquet's statistics do not count it: a
// row group of low scores with a NaN among them was ruled out by its
// statistics, unread, so the same rows indexed fine in one layout and
// failed in another, with advice (x != null) that does not help. The
// outcome is now the layout's no more, and the advice is x == x.
func TestANaNFailsAFilterInEveryLayoutAndItsGuardPrunes(t *testing.T) {
	ctx := context.Background()
	nan := math.NaN()
	scores := []float64{0.1, 0.2, nan, 0.3, 0.6, 0.7, 0.8, 0.9}
	reg := Default()
	for _, rowGroup := range []int64{4, 8} {
		st := hiveTree(t, map[string][]byte{"a.parquet": floatParquet(t, scores, rowGroup)})
		f, err := reg.Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = reg.Select(ctx, st, index.LayoutOf(f), "score != null && score > 0.5", nil)
		if err == nil || !strings.Contains(err.Error(), "test x == x first") {
			t.Errorf("row groups of %d: %v, want the NaN's error with the advice x == x", rowGroup, err)
		}
		sel, _, err := reg.Select(ctx, st, index.LayoutOf(f), "score == score && score > 0.5", nil)
		if err != nil {
			t.Fatalf("row groups of %d, guarded: %v", rowGroup, err)
		}
		var matching int64
		for _, s := range sel.Shards {
			matching += s.Matching
		}
		if matching != 4 {
			t.Errorf("row groups of %d, guarded: %d rows match, want 4", rowGroup, matching)
		}
		if rowGroup == 4 && sel.Pruned != 1 {
			t.Errorf("row groups of 4, guarded: %d shards pruned by their statistics, want the low one", sel.Pruned)
		}
	}
}

// A Parquet file of an empty row group (pyarrow's write_table of no rows
// writes one; the index ranges none of its bytes) is a shard of no
// samples: a filter matches none of it and lengths measure none, reading
// nothing, beside a file of rows.
func TestAnEmptyRowGroupIsFilteredAndMeasuredAsNoRows(t *testing.T) {
	ctx := context.Background()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	empty := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer empty.Release()
	rows := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rows.Release()
	for i := range 3 {
		rows.Field(0).(*array.Int64Builder).Append(int64(i))
		lb := rows.Field(1).(*array.ListBuilder)
		lb.Append(true)
		for range i + 1 {
			lb.ValueBuilder().(*array.Int32Builder).Append(7)
		}
	}
	st := hiveTree(t, map[string][]byte{"a.parquet": writeParquet(t, empty, 10), "b.parquet": writeParquet(t, rows, 10)})
	reg := Default()
	f, err := reg.Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Shards) != 2 || f.Shards[0].Samples != 0 {
		t.Fatalf("indexed %+v: want an empty row group's shard first", f.Shards)
	}
	sel, runs, err := reg.Select(ctx, st, index.LayoutOf(f), "id >= 1", nil)
	if err != nil || sel.Shards[0].Matching != 0 || sel.Shards[1].Matching != 2 {
		t.Fatalf("selection %+v (%d bytes of runs), %v: want none of the empty row group, 2 of the other", sel, len(runs), err)
	}
	x, _, err := reg.Lengths(ctx, st, index.LayoutOf(f), "tokens", &format.Selection{Index: sel, Runs: runs}, nil)
	if err != nil || x.Shards[0].Samples != 0 || x.Shards[1].Sum != 5 {
		t.Fatalf("lengths %+v, %v: want none of the empty row group, 2+3 tokens of the other", x, err)
	}
}
