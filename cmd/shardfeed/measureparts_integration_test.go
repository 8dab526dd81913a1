//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// besideIndex reads the files index writes beside a stream's index under
// dir's _shardfeed/ (selections, lengths, packs), but the index itself
// and the runs' folders; with remove, it deletes them too.
func besideIndex(t *testing.T, dir string, remove bool) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	root := filepath.Join(dir, indexfile.Dir)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		name := filepath.Base(rel)
		if strings.HasPrefix(rel, "parts"+string(filepath.Separator)) || strings.HasPrefix(rel, "kept"+string(filepath.Separator)) ||
			strings.HasPrefix(name, "index") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[rel] = data
		if remove {
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// measureInParts runs index --measure-parts n: each part, then the join.
func measureInParts(t *testing.T, n int, args ...string) string {
	t.Helper()
	for k := range n {
		a := append(slices.Clone(args), "--measure-parts", strconv.Itoa(n), "--part", strconv.Itoa(k))
		if out, err := runCLI(t, a...); err != nil {
			t.Fatalf("%v: %v\n%s", a, err, out)
		}
	}
	a := append(slices.Clone(args), "--measure-parts", strconv.Itoa(n), "--merge-parts")
	out, err := runCLI(t, a...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", a, err, out)
	}
	return out
}

// sameFiles fails where got and want differ in names or bytes.
func sameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the single run wrote nothing beside the index", what)
	}
	gk, wk := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))
	if !slices.Equal(gk, wk) {
		t.Fatalf("%s: measured in parts, wrote %v; one run wrote %v", what, gk, wk)
	}
	for _, k := range wk {
		if string(got[k]) != string(want[k]) {
			t.Errorf("%s: %s differs from one run's (%d bytes, one run's %d)", what, k, len(got[k]), len(want[k]))
		}
	}
}

// A stream's selection, lengths, buckets and packs measured in parts
// (each a range of the index's shards), then joined, are byte for byte
// what one run writes, for every number of parts (more parts than shards
// too); the run's files are gone after the join; a part measured twice is
// skipped; a join with a part missing, or a part tampered with, is
// refused naming the part.
func TestIntegrationMeasuringInPartsEqualsOneRun(t *testing.T) {
	dir := t.TempDir()
	testenv.PythonScript(t, "venv-oracle", "test/oracle/lengths_oracle.py", dir)
	good := filepath.Join(dir, "good")
	src := "file://" + good + "/"
	if out, err := runCLI(t, "index", src, "--format", "parquet"); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	const filter = "lang == 'en'"
	for _, args := range [][]string{
		{"--filter", filter, "--lengths", "tokens", "--buckets", "8,16"},
		{"--lengths", "image", "--aspect-ratios", "3/4,4/3"},
		{"--filter", filter, "--lengths", "tokens", "--pack-length", "32", "--pack-window", "16"},
		{"--filter", filter, "--lengths", "tokens", "--pack-length", "32", "--pack-window", "256", "--pack-across-shards"},
		{"--filter", "id % 3 == 0"},
	} {
		base := append([]string{"index", src, "--format", "parquet"}, args...)
		if out, err := runCLI(t, append(slices.Clone(base), "--selection-only")...); err != nil {
			t.Fatalf("%v --selection-only: %v\n%s", args, err, out)
		}
		want := besideIndex(t, good, true)
		if slices.Contains(args, "--pack-across-shards") {
			units := 0
			for name, data := range want {
				if strings.HasPrefix(filepath.Base(name), "packs-") {
					units += strings.Count(string(data), `"unit"`)
				}
			}
			if units == 0 {
				t.Fatalf("%v: no packing unit spans shards", args)
			}
		}
		for _, n := range []int{1, 3, 64} {
			what := fmt.Sprintf("%v in %d parts", args, n)
			out := measureInParts(t, n, base...)
			if !strings.Contains(out, fmt.Sprintf("joined from %d parts", n)) {
				t.Errorf("%s: the join does not say so:\n%s", what, out)
			}
			sameFiles(t, what, besideIndex(t, good, true), want)
			if runs, _ := os.ReadDir(filepath.Join(good, indexfile.Dir, "parts")); len(runs) > 0 {
				for _, r := range runs {
					if files, _ := os.ReadDir(filepath.Join(good, indexfile.Dir, "parts", r.Name())); len(files) > 0 {
						t.Errorf("%s: the join left %d files under parts/%s", what, len(files), r.Name())
					}
				}
			}
		}
	}

	args := []string{"index", src, "--format", "parquet", "--filter", filter, "--lengths", "tokens", "--measure-parts", "3"}
	if out, err := runCLI(t, append(slices.Clone(args), "--part", "0")...); err != nil {
		t.Fatal(err, out)
	}
	if out, err := runCLI(t, append(slices.Clone(args), "--part", "0")...); err != nil || !strings.Contains(out, "is done already: skipped") {
		t.Fatalf("a part measured again: %v\n%s", err, out)
	}
	if out, err := runCLI(t, append(slices.Clone(args), "--merge-parts")...); err == nil || !strings.Contains(err.Error(), "part 1 of measuring run") ||
		!strings.Contains(err.Error(), "--part 1") {
		t.Fatalf("a join with parts missing: %v\n%s", err, out)
	}
	if out, err := runCLI(t, append(slices.Clone(args), "--part", "1")...); err != nil {
		t.Fatal(err, out)
	}
	if out, err := runCLI(t, append(slices.Clone(args), "--part", "2")...); err != nil {
		t.Fatal(err, out)
	}
	lengths, _ := filepath.Glob(filepath.Join(good, indexfile.Dir, "parts", "*", "measure-00001.lengths"))
	if len(lengths) != 1 {
		t.Fatalf("part 1's lengths: %v", lengths)
	}
	data, err := os.ReadFile(lengths[0])
	if err != nil || len(data) == 0 {
		t.Fatal(err)
	}
	data[0] ^= 1
	if err := os.WriteFile(lengths[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, append(slices.Clone(args), "--merge-parts")...); err == nil || !strings.Contains(err.Error(), "measure-00001.lengths: its SHA-256") ||
		!strings.Contains(err.Error(), "--part 1") {
		t.Fatalf("a join of a tampered part: %v\n%s", err, out)
	}
	if len(besideIndex(t, good, false)) != 0 {
		t.Error("a refused join wrote files beside the index")
	}
	// A record whose counts do not hold of its bytes (a sum, a count of
	// matching rows) is refused too, naming the part, and nothing is
	// written (the selection included, which came first).
	record := strings.TrimSuffix(lengths[0], ".lengths") + ".json"
	for _, edit := range []struct {
		name string
		edit func(m map[string]any)
	}{
		{"a sum", func(m map[string]any) {
			sh := m["lengths"].(map[string]any)["shards"].([]any)[0].(map[string]any)
			sh["sum"] = sh["sum"].(float64) + 1
			sh["max"] = sh["max"].(float64) + 1
		}},
		{"the rows matching", func(m map[string]any) {
			sh := m["filter"].(map[string]any)["shards"].([]any)[0].(map[string]any)
			sh["matching"] = sh["matching"].(float64) + 1
		}},
	} {
		for _, f := range []string{record, lengths[0], strings.TrimSuffix(lengths[0], ".lengths") + ".runs"} {
			_ = os.Remove(f)
		}
		if out, err := runCLI(t, append(slices.Clone(args), "--part", "1")...); err != nil {
			t.Fatal(err, out)
		}
		data, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		edit.edit(m)
		if data, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(record, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runCLI(t, append(slices.Clone(args), "--buckets", "8,16", "--merge-parts")...)
		if err == nil || !strings.Contains(err.Error(), "part 1 of measuring run") || !strings.Contains(err.Error(), "--part 1") {
			t.Errorf("a join of a part whose record says another %s: %v\n%s", edit.name, err, out)
		}
		if got := besideIndex(t, good, false); len(got) != 0 {
			t.Errorf("a join refused for %s wrote %v beside the index", edit.name, slices.Sorted(maps.Keys(got)))
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--measure-parts", "2"}, "--measure-parts goes with --part K or --merge-parts"},
		{[]string{"--measure-parts", "2", "--part", "0"}, "--measure-parts measures a filter's selection or a column's lengths"},
		{[]string{"--measure-parts", "2", "--merge-parts", "--run", "0123456789abcdef", "--filter", filter}, "drop --run"},
		{[]string{"--measure-parts", "2", "--part", "0", "--dry-run", "--filter", filter}, "not with --dry-run"},
		{[]string{"--measure-parts", "2", "--part", "2", "--filter", filter}, "--part 2: --measure-parts 2 makes parts 0 to 1"},
		{[]string{"--index-only", "--selection-only", "--filter", filter}, "give one"},
	} {
		out, err := runCLI(t, append([]string{"index", src, "--format", "parquet"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q\n%s", c.args, err, c.want, out)
		}
	}
}

// A tokenized stream's token counts and packs (index -f, the work that
// needs many machines) measured in parts equal one run's, and --index-only
// writes the index alone.
func TestIntegrationTokensCountedInPartsEqualOneRun(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for k := range 3 {
		testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", filepath.Join(data, fmt.Sprintf("part-%d.jsonl", k)), "--rows", "120", "--ids")
	}
	tok, sum := trainedTokenizer(t, dir, filepath.Join(data, "part-0.jsonl"))
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: raw}
spec:
  streams:
  - name: web
    format: jsonl
    source: {uri: "file://%s/"}
    filter: "id %% 5 != 0"
  tokenize:
    tokenizer: {uri: "file://%s", sha256: "%s"}
    column: text
    endOfDocument: "<|end_of_text|>"
  packing: {column: input_ids, sequenceLength: 64, method: bestFit}
  numSplits: 2
  globalBatchSize: 4
`, data, tok, sum), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "index", "-f", manifest, "--index-only")
	if err != nil {
		t.Fatalf("index -f --index-only: %v\n%s", err, out)
	}
	if got := besideIndex(t, data, false); len(got) != 0 {
		t.Fatalf("--index-only wrote %v beside the index", slices.Sorted(maps.Keys(got)))
	}
	if out, err := runCLI(t, "index", "-f", manifest, "--selection-only"); err != nil || !strings.Contains(out, "lengths of input_ids") {
		t.Fatalf("index -f --selection-only: %v\n%s", err, out)
	}
	want := besideIndex(t, data, true)
	for _, n := range []int{2, 5} {
		out := measureInParts(t, n, "index", "-f", manifest)
		if !strings.Contains(out, "packs of 64 tokens") {
			t.Errorf("the join in %d parts wrote no packs:\n%s", n, out)
		}
		sameFiles(t, fmt.Sprintf("tokens in %d parts", n), besideIndex(t, data, true), want)
	}
}
