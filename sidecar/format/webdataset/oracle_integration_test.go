//go:build integration

package webdataset_test

// WebDataset tars written by webdataset's own TarWriter (bin/venv-oracle,
// test/oracle/webdataset_oracle.py), indexed by shardfeed index from their
// headers alone and read shard by shard as a pod reads them (its byte
// range only): every sample equals webdataset.WebDataset's, value for
// value, in order.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", args...)
}

type written struct {
	Tars    []string `json:"tars"`
	Bytes   int64    `json:"bytes"`
	Members [][]any  `json:"members"`
}

// member returns the header offset, data offset and size of the first
// tar's member k, as tarfile lists them.
func (w written) member(k int) (start, data, size int) {
	m := w.Members[k]
	return int(m[1].(float64)), int(m[2].(float64)), int(m[3].(float64))
}

func write(t *testing.T, dir string, args ...string) written {
	t.Helper()
	var w written
	if err := json.Unmarshal(oracle(t, append([]string{"write", dir}, args...)...), &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// served indexes the stream and reads every shard from its range alone:
// each sample as the oracle prints it (no null columns, JSON parsed).
func served(t *testing.T, st store.Store, opts format.IndexOptions) (*index.File, []string) {
	t.Helper()
	f := formattest.Index(t, st, datav1alpha1.FormatWebDataset, opts)
	return f, formattest.Rows(t, st, f, func(row map[string]any) {
		for k, v := range row {
			switch {
			case v == nil:
				delete(row, k) // webdataset has no key for a missing member
			case strings.HasSuffix(k, "json"):
				var parsed any
				if err := json.Unmarshal([]byte(v.(string)), &parsed); err != nil {
					t.Fatalf("%s is not JSON: %v", k, err)
				}
				row[k] = parsed
			}
		}
	})
}

func compare(t *testing.T, what string, got, want []string) {
	t.Helper()
	formattest.Compare(t, what, "webdataset", got, want)
}

func TestWebDatasetServesWebDatasetSamples(t *testing.T) {
	for _, kase := range []string{"basic", "ustar", "pax", "gnu", "gz", "mixed"} {
		t.Run(kase, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			w := write(t, dir, "--tars", "3", "--samples", "25", "--case", kase)
			var urls []string
			for _, tar := range w.Tars {
				urls = append(urls, filepath.Join(dir, tar))
			}
			want := formattest.Lines(t, oracle(t, append([]string{"read"}, urls...)...))
			// Small shards: each plain tar is cut into several.
			f, got := served(t, formattest.OpenDir(t, dir), format.IndexOptions{ShardBytes: 16 << 10})
			if kase != "gz" && len(f.Shards) < 2*len(w.Tars) {
				t.Fatalf("%d shards of %d tars: each should be cut into several", len(f.Shards), len(w.Tars))
			}
			compare(t, kase, got, want)
		})
	}
}

// The index names the stream's schema by webdataset's conventions, each
// type overridable; a brace pattern keeps the shards it names.
func TestWebDatasetSchemaAndPatterns(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "--tars", "4", "--samples", "3", "--case", "mixed")
	st := formattest.OpenDir(t, dir)
	ctx := context.Background()
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatWebDataset, format.IndexOptions{
		Schema: []index.Field{{Name: "json", Type: "binary"}}, Shards: "shards-{000001..000002}.tar"})
	if err != nil {
		t.Fatal(err)
	}
	want := []index.Field{{Name: "__key__", Type: "utf8"}, {Name: "cls", Type: "int64"}, {Name: "jpg", Type: "binary"},
		{Name: "json", Type: "binary"}, {Name: "seg.png", Type: "binary"}, {Name: "txt", Type: "utf8"}}
	if got, _ := json.Marshal(f.Schema); string(got) != string(must(json.Marshal(want))) {
		t.Fatalf("schema %s, want %s", got, must(json.Marshal(want)))
	}
	var objects []string
	for _, e := range f.Shards {
		if len(objects) == 0 || objects[len(objects)-1] != e.Object {
			objects = append(objects, e.Object)
		}
	}
	if strings.Join(objects, ",") != "shards-000001.tar,shards-000002.tar" {
		t.Fatalf("the pattern indexed %v", objects)
	}
	for _, c := range []struct{ pattern, want string }{
		{"shards-{000003..000004}.tar", "shards-000004.tar, named by"},
		{"shards-{000001..000002.tar", "without its '}'"},
		{"shards-{{1,2}}.tar", "nested braces"},
		{"shards-{9..1}.tar", "not a range of integers from low to high"},
	} {
		_, err := formats.Default().Index(ctx, st, datav1alpha1.FormatWebDataset, format.IndexOptions{Shards: c.pattern})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pattern %q: got %v, want %q", c.pattern, err, c.want)
		}
	}
	_, err = formats.Default().Index(ctx, st, datav1alpha1.FormatWebDataset, format.IndexOptions{Schema: []index.Field{{Name: "jpg", Type: "float64"}}})
	if err == nil || !strings.Contains(err.Error(), `"float64"`) {
		t.Fatalf("a type webdataset columns do not take: got %v", err)
	}
}

func must[T any](b T, err error) T {
	if err != nil {
		panic(err)
	}
	return b
}

// Damaged tars are refused when indexed, naming the tar and what is wrong.
func TestWebDatasetRefusesDamagedTars(t *testing.T) {
	dir := t.TempDir()
	w := write(t, dir, "--tars", "1", "--samples", "4", "--case", "basic")
	_, jpgData, jpgSize := w.member(1)
	txtStart, _, _ := w.member(3)
	good, err := os.ReadFile(filepath.Join(dir, "shards-000000.tar"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		tar  []byte
		want string
	}{
		{"checksum", edit(func(b []byte) []byte { b[0] ^= 1; return b }), "bad checksum"},
		{"truncated header", good[:txtStart+100], "cut short"},
		{"size past the end", good[:jpgData+jpgSize-10], "past the end of the tar"},
		{"size", edit(func(b []byte) []byte { copy(b[124:136], "99999999999x"); return b }), "bad checksum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, "a.tar"), c.tar, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := formats.Default().Index(context.Background(), formattest.OpenDir(t, d), datav1alpha1.FormatWebDataset, format.IndexOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "a.tar") {
				t.Fatalf("got %v, want an error naming a.tar and saying %q", err, c.want)
			}
		})
	}
}

// readKeys is a store that records the keys its reads touch.
type readKeys struct {
	store.Store
	keys map[string]int64
}

func (r *readKeys) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r.keys[key]++
	return r.Store.Get(ctx, key, off, n)
}

// With Megatron-Energon's index beside the tars (energon prepare), index
// reads no tar: the shards are the ones the tars' headers give, and every
// sample is served as webdataset reads it.
func TestWebDatasetReusesEnergonsIndex(t *testing.T) {
	dir := t.TempDir()
	w := write(t, dir, "--tars", "3", "--samples", "25", "--case", "basic")
	ctx := context.Background()
	fromHeaders, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, format.IndexOptions{ShardBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	oracle(t, "energon", dir)
	rk := &readKeys{Store: formattest.OpenDir(t, dir), keys: map[string]int64{}}
	var notes []string
	reused, err := formats.Default().Index(ctx, rk, datav1alpha1.FormatWebDataset, format.IndexOptions{ShardBytes: 16 << 10,
		Note: func(msg string) { notes = append(notes, msg) }})
	if err != nil {
		t.Fatal(err)
	}
	for key := range rk.keys {
		if strings.HasSuffix(key, ".tar") {
			t.Fatalf("indexing with Energon's index read %s (reads: %v)", key, rk.keys)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "reused Megatron-Energon's index") {
		t.Fatalf("notes %q", notes)
	}
	a, _ := json.Marshal(fromHeaders)
	b, _ := json.Marshal(reused)
	if string(a) != string(b) {
		t.Fatalf("Energon's index gives other shards than the tars' headers:\n%s\n%s", b, a)
	}
	var urls []string
	for _, tar := range w.Tars {
		urls = append(urls, filepath.Join(dir, tar))
	}
	_, got := served(t, rk, format.IndexOptions{ShardBytes: 16 << 10})
	compare(t, "energon", got, formattest.Lines(t, oracle(t, append([]string{"read"}, urls...)...)))

	// A tar Energon's index does not list: its headers are read.
	if err := os.WriteFile(filepath.Join(dir, "extra.tar"), must(os.ReadFile(filepath.Join(dir, w.Tars[0]))), 0o600); err != nil {
		t.Fatal(err)
	}
	notes = nil
	if _, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, format.IndexOptions{Note: func(msg string) { notes = append(notes, msg) }}); err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "does not list extra.tar: reading the tars' headers instead") {
		t.Fatalf("notes %q", notes)
	}
	// A damaged .tar.idx is refused, naming it.
	_ = os.Remove(filepath.Join(dir, "extra.tar"))
	idx := filepath.Join(dir, w.Tars[1]+".idx")
	raw := must(os.ReadFile(idx))
	copy(raw[16:24], raw[8:16])
	_ = os.WriteFile(idx, raw, 0o600)
	if _, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, format.IndexOptions{}); err == nil || !strings.Contains(err.Error(), w.Tars[1]+".idx") || !strings.Contains(err.Error(), "re-run energon prepare") {
		t.Fatalf("a damaged .tar.idx: %v", err)
	}
}
