//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// oracleRow is a row of lengths_oracle.py's Parquet, as pyarrow and Pillow
// measure it.
type oracleRow struct {
	Lang   string `json:"lang"`
	Tokens uint32 `json:"tokens"`
	Height uint32 `json:"height"`
	Width  uint32 `json:"width"`
}

// index --lengths measures what pyarrow and Pillow measure: a list
// column's elements (null lists as 0) and the height and width of JPEGs
// (baseline, progressive, greyscale, CMYK) and PNGs in the images'
// headers, of every row or of a filter's matching rows only, each shard's
// lengths decoded from the object as a sidecar reads them. A column that
// cannot be measured, and an image cut short, are refused naming them.
func TestIntegrationLengthsAreThoseOfPyarrowAndPillow(t *testing.T) {
	dir := t.TempDir()
	var rows []oracleRow
	sc := bufio.NewScanner(bytes.NewReader(testenv.PythonScript(t, "venv-oracle", "test/oracle/lengths_oracle.py", dir)))
	for sc.Scan() {
		var r oracleRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 400 {
		t.Fatalf("the oracle wrote %d rows, want 400", len(rows))
	}
	src := "file://" + filepath.Join(dir, "good") + "/"
	const filter = "lang == 'en'"
	if out, err := runCLI(t, "index", src, "--format", "parquet", "--filter", filter, "--lengths", "tokens"); err != nil || !strings.Contains(out, "lengths of tokens (elements)") {
		t.Fatalf("index --lengths tokens: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--lengths", "image", "--filter", filter}, {"--lengths", "tokens"}, {"--lengths", "image"}} {
		if out, err := runCLI(t, append([]string{"index", src, "--format", "parquet", "--selection-only"}, args...)...); err != nil {
			t.Fatalf("index --selection-only %v: %v\n%s", args, err, out)
		}
	}
	var english []oracleRow
	for _, r := range rows {
		if r.Lang == "en" {
			english = append(english, r)
		}
	}
	for _, c := range []struct {
		column string
		m      sidefile.Measure
		filter string
		want   []oracleRow
	}{
		{"tokens", sidefile.Elements, filter, english},
		{"image", sidefile.ImageSize, filter, english},
		{"tokens", sidefile.Elements, "", rows},
		{"image", sidefile.ImageSize, "", rows},
	} {
		got := readLengths(t, src, c.column, c.m, c.filter)
		if len(got) != len(c.want) {
			t.Fatalf("%s (filter %q): %d lengths, want %d", c.column, c.filter, len(got), len(c.want))
		}
		for i, l := range got {
			want := sidefile.Length{c.want[i].Tokens}
			if c.m == sidefile.ImageSize {
				want = sidefile.Length{c.want[i].Height, c.want[i].Width}
			}
			if l != want {
				t.Fatalf("%s (filter %q): sample %d measures %v, pyarrow and Pillow %v", c.column, c.filter, i, l, want)
			}
		}
	}

	// Buckets: by length over the filter's rows, by aspect ratio over all;
	// each row in the bucket its oracle measure says, rows the filter
	// leaves out in none.
	if out, err := runCLI(t, "index", src, "--format", "parquet", "--selection-only", "--filter", filter, "--lengths", "tokens", "--buckets", "8,16"); err != nil ||
		!strings.Contains(out, "bucket 2, shardfeed.bucket(tokens: length at 8,16)[2] && (lang == 'en')") {
		t.Fatalf("index --buckets: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "index", src, "--format", "parquet", "--selection-only", "--lengths", "image", "--aspect-ratios", "3/4,4/3"); err != nil {
		t.Fatalf("index --aspect-ratios: %v\n%s", err, out)
	}
	ratios, _ := sidefile.ParseRatios([]string{"3/4", "4/3"})
	for _, c := range []struct {
		b      sidefile.Buckets
		filter string
		want   func(r oracleRow) int
	}{
		{sidefile.Buckets{Column: "tokens", Measure: sidefile.Elements, Bounds: []int64{8, 16}}, filter, func(r oracleRow) int {
			switch {
			case r.Lang != "en":
				return -1
			case r.Tokens < 8:
				return 0
			case r.Tokens < 16:
				return 1
			}
			return 2
		}},
		{sidefile.Buckets{Column: "image", Measure: sidefile.ImageSize, Ratios: ratios}, "", func(r oracleRow) int {
			switch { // width/height against 3/4 and 4/3, in integers
			case 4*r.Width < 3*r.Height:
				return 0
			case 3*r.Width < 4*r.Height:
				return 1
			}
			return 2
		}},
	} {
		got := readBuckets(t, src, c.b, c.filter)
		counts := map[int]int{}
		for i, r := range rows {
			if want := c.want(r); got[i] != want {
				t.Fatalf("%s: row %d (%+v) in bucket %d, pyarrow and Pillow measure bucket %d", c.b.Column, i, r, got[i], want)
			}
			counts[got[i]]++
		}
		for k := range c.b.Count() {
			if counts[k] == 0 {
				t.Errorf("%s: the oracle's rows fill buckets %v, none bucket %d: the test checks too little", c.b.Column, counts, k)
			}
		}
	}

	bad := "file://" + filepath.Join(dir, "bad") + "/"
	for _, c := range []struct{ args, want []string }{
		{[]string{"--lengths", "text"}, []string{`column "text" is text`, "tokenizer"}},
		{[]string{"--lengths", "id"}, []string{`column "id" is int64`, "list column"}},
		{[]string{"--lengths", "nope"}, []string{`no column "nope"`, "id, lang, tokens, image, text"}},
		{[]string{"--lengths", "image"}, []string{"part-0.parquet", `row 5, column "image"`}},
	} {
		out, err := runCLI(t, append([]string{"index", bad, "--format", "parquet"}, c.args...)...)
		if err == nil {
			t.Fatalf("index %v succeeded:\n%s", c.args, out)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("index %v: %v, want it to say %q", c.args, err, w)
			}
		}
	}
}

// readLengths reads a stream's lengths of column as a sidecar does: the
// lengths' index checked against the stream's index (and its filter's
// selection), each shard's lengths decoded from their byte range.
func readLengths(t *testing.T, uri, column string, m sidefile.Measure, filter string) []sidefile.Length {
	t.Helper()
	ctx := context.Background()
	st, l, samples := openIndexed(t, uri)
	if filter != "" {
		sel, err := sidefile.ReadFilter(ctx, st, filter, l.Index.ContentHash(), samples, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range sel.Shards {
			samples[i] = s.Matching
		}
	}
	x, err := sidefile.ReadLengths(ctx, st, column, m, filter, "", l.Index.ContentHash(), samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(strings.TrimPrefix(uri, "file://"), x.ValuesKey))
	if err != nil {
		t.Fatal(err)
	}
	var out []sidefile.Length
	for i, s := range x.Shards {
		ls, err := x.ShardLengths(i, values[s.Offset:s.Offset+s.Length])
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		out = append(out, ls...)
	}
	return out
}

// readBuckets reads each bucket's selection as a sidecar reads a filter's
// and returns each row's bucket, in the stream's order (-1: in none).
func readBuckets(t *testing.T, uri string, b sidefile.Buckets, filter string) []int {
	t.Helper()
	ctx := context.Background()
	st, l, samples := openIndexed(t, uri)
	var first []int64 // each shard's first row in the stream
	var rows int64
	for _, s := range l.Index.Shards {
		first = append(first, rows)
		rows += s.Samples
	}
	out := make([]int, rows)
	for i := range out {
		out[i] = -1
	}
	for k := range b.Count() {
		sel, err := sidefile.ReadFilter(ctx, st, b.Filter(k, filter), l.Index.ContentHash(), samples, 0)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := os.ReadFile(filepath.Join(strings.TrimPrefix(uri, "file://"), sel.RunsKey))
		if err != nil {
			t.Fatal(err)
		}
		for i, sh := range sel.Shards {
			rs, err := sel.ShardRuns(i, runs[sh.Offset:sh.Offset+sh.Length], samples[i])
			if err != nil {
				t.Fatalf("bucket %d shard %d: %v", k, i, err)
			}
			for _, r := range rs {
				for row := r[0]; row < r[1]; row++ {
					if out[first[i]+row] != -1 {
						t.Fatalf("row %d in buckets %d and %d", first[i]+row, out[first[i]+row], k)
					}
					out[first[i]+row] = k
				}
			}
		}
	}
	return out
}

// openIndexed opens the store of an indexed stream and reads its layout
// and each shard's samples.
func openIndexed(t *testing.T, uri string) (store.Store, *index.Layout, []int64) {
	t.Helper()
	ctx := context.Background()
	st, err := stores.Open(ctx, store.Source{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	l, err := index.ReadStoreLayout(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]int64, len(l.Index.Shards))
	for i, s := range l.Index.Shards {
		samples[i] = s.Samples
	}
	return st, l, samples
}
