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
		m      index.Measure
		filter string
		want   []oracleRow
	}{
		{"tokens", index.Elements, filter, english},
		{"image", index.ImageSize, filter, english},
		{"tokens", index.Elements, "", rows},
		{"image", index.ImageSize, "", rows},
	} {
		got := readLengths(t, src, c.column, c.m, c.filter)
		if len(got) != len(c.want) {
			t.Fatalf("%s (filter %q): %d lengths, want %d", c.column, c.filter, len(got), len(c.want))
		}
		for i, l := range got {
			want := index.Length{c.want[i].Tokens}
			if c.m == index.ImageSize {
				want = index.Length{c.want[i].Height, c.want[i].Width}
			}
			if l != want {
				t.Fatalf("%s (filter %q): sample %d measures %v, pyarrow and Pillow %v", c.column, c.filter, i, l, want)
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
func readLengths(t *testing.T, uri, column string, m index.Measure, filter string) []index.Length {
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
	if filter != "" {
		sel, err := index.ReadFilter(ctx, st, filter, l.Index.ContentHash(), samples, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range sel.Shards {
			samples[i] = s.Matching
		}
	}
	x, err := index.ReadLengths(ctx, st, column, m, filter, l.Index.ContentHash(), samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(strings.TrimPrefix(uri, "file://"), x.ValuesKey))
	if err != nil {
		t.Fatal(err)
	}
	var out []index.Length
	for i, s := range x.Shards {
		ls, err := x.ShardLengths(i, values[s.Offset:s.Offset+s.Length])
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
		out = append(out, ls...)
	}
	return out
}
