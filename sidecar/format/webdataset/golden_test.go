package webdataset_test

// WebDataset tars written by webdataset's own TarWriter, and what
// webdataset.WebDataset reads of them, recorded in testdata/golden
// (test/oracle/webdataset_oracle.py record; make golden), indexed by
// shardfeed index from their headers alone and read shard by shard as a
// pod reads them (its byte range only): every sample equals webdataset's,
// value for value, in order.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
)

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

// recorded returns what TarWriter wrote of a recorded stream, and what
// webdataset reads of it.
func recorded(t *testing.T, golden, name string) (written, []string) {
	t.Helper()
	var w written
	if err := json.Unmarshal(testenv.GoldenFile(t, golden, name+".written.json"), &w); err != nil {
		t.Fatal(err)
	}
	return w, formattest.Lines(t, testenv.GoldenFile(t, golden, name+".jsonl"))
}

// served indexes the stream and reads every shard from its range alone:
// each sample as the oracle prints it (no null columns, JSON parsed).
func served(t *testing.T, st store.Store, opts format.IndexOptions) (*indexfile.File, []string) {
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
	golden := testenv.Golden(t)
	for _, kase := range []string{"basic", "ustar", "pax", "gnu", "gz", "mixed"} {
		t.Run(kase, func(t *testing.T) {
			t.Parallel()
			w, want := recorded(t, golden, kase)
			// Small shards: each plain tar is cut into several.
			f, got := served(t, formattest.OpenDir(t, filepath.Join(golden, kase)), format.IndexOptions{ShardBytes: 16 << 10})
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
	st := formattest.OpenDir(t, filepath.Join(testenv.Golden(t), "mixed"))
	ctx := context.Background()
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatWebDataset, format.IndexOptions{
		Schema: []indexfile.Field{{Name: "json", Type: "binary"}}, Shards: "shards-{000001..000002}.tar"})
	if err != nil {
		t.Fatal(err)
	}
	want := []indexfile.Field{{Name: "__key__", Type: "utf8"}, {Name: "cls", Type: "int64"}, {Name: "jpg", Type: "binary"},
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
	_, err = formats.Default().Index(ctx, st, datav1alpha1.FormatWebDataset, format.IndexOptions{Schema: []indexfile.Field{{Name: "jpg", Type: "float64"}}})
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
	golden := testenv.Golden(t)
	w, _ := recorded(t, golden, "damaged")
	_, jpgData, jpgSize := w.member(1)
	txtStart, _, _ := w.member(3)
	good := testenv.GoldenFile(t, golden, "damaged/shards-000000.tar")
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
	golden := testenv.Golden(t)
	w, want := recorded(t, golden, "basic")
	ctx := context.Background()
	dir := testenv.GoldenCopy(t, golden, "basic")
	fromHeaders, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, format.IndexOptions{ShardBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	dir = testenv.GoldenCopy(t, golden, "basic", "energon") // energon prepare's index beside the tars
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
	_, got := served(t, rk, format.IndexOptions{ShardBytes: 16 << 10})
	compare(t, "energon", got, want)

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

// With wids' shard index beside the tars (widsindex create), index reads
// the first tar's headers alone: every other tar is one shard of the
// samples wids counts, read whole, and every sample is served as wids'
// ShardListDataset reads it. An index that does not describe the tars as
// they are is set aside (the tars' headers read, a note says why); one
// that is not wids' is refused, naming it.
func TestWebDatasetReusesWidsIndex(t *testing.T) {
	golden := testenv.Golden(t)
	w, _ := recorded(t, golden, "basic")
	dir := testenv.GoldenCopy(t, golden, "basic", "wids")                                    // widsindex create's shardindex.json beside the tars
	n := len(formattest.Lines(t, testenv.GoldenFile(t, golden, "wids.jsonl"))) / len(w.Tars) // samples a tar
	ctx := context.Background()
	rk := &readKeys{Store: formattest.OpenDir(t, dir), keys: map[string]int64{}}
	var notes []string
	opts := format.IndexOptions{ShardBytes: 16 << 10, Note: func(msg string) { notes = append(notes, msg) }}
	f, got := served(t, rk, opts)
	if len(notes) != 1 || !strings.Contains(notes[0], "reused wids' shard index (shardindex.json): a shard per tar") {
		t.Fatalf("notes %q", notes)
	}
	// Only the first tar was read at indexing (then every shard by served).
	rk.keys = map[string]int64{}
	if _, err := formats.Default().Index(ctx, rk, datav1alpha1.FormatWebDataset, opts); err != nil {
		t.Fatal(err)
	}
	for key := range rk.keys {
		if strings.HasSuffix(key, ".tar") && key != w.Tars[0] {
			t.Fatalf("indexing with wids' index read %s (reads: %v)", key, rk.keys)
		}
	}
	for _, e := range f.Shards {
		if e.Object == w.Tars[0] {
			continue
		}
		size := must(os.Stat(filepath.Join(dir, e.Object))).Size()
		if e.Offset != 0 || e.Length != size || e.Samples != int64(n) {
			t.Fatalf("shard %s: %d bytes at %d, %d samples; want the whole tar (%d bytes), %d samples", e.Name, e.Length, e.Offset, e.Samples, size, n)
		}
	}
	compare(t, "wids", got, formattest.Lines(t, testenv.GoldenFile(t, golden, "wids.jsonl")))

	index := filepath.Join(dir, "shardindex.json")
	pristine := must(os.ReadFile(index))
	edit := func(fn func(doc map[string]any)) {
		var doc map[string]any
		if err := json.Unmarshal(pristine, &doc); err != nil {
			t.Fatal(err)
		}
		fn(doc)
		if err := os.WriteFile(index, must(json.Marshal(doc)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	shard := func(doc map[string]any, k int) map[string]any {
		return doc["shardlist"].([]any)[k].(map[string]any)
	}
	for _, tc := range []struct {
		name, note string
		edit       func(doc map[string]any)
	}{
		{"a tar it does not list", "does not list " + w.Tars[2], func(doc map[string]any) {
			doc["shardlist"] = doc["shardlist"].([]any)[:2]
		}},
		{"a tar of another size", "re-run widsindex create", func(doc map[string]any) { shard(doc, 1)["filesize"] = 12345.0 }},
		{"a miscount of the first tar", fmt.Sprintf("counts %d samples in %s, and its headers %d", n-1, w.Tars[0], n), func(doc map[string]any) {
			shard(doc, 0)["nsamples"] = float64(n - 1)
		}},
		{"a tar elsewhere", "which is not under", func(doc map[string]any) { shard(doc, 1)["url"] = "s3://elsewhere/x.tar" }},
		{"sub-datasets", "names sub-datasets", func(doc map[string]any) { doc["datasets"] = []any{map[string]any{"source_url": "x.json"}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edit(tc.edit)
			notes = nil
			f, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], tc.note) || !strings.Contains(notes[0], "reading the tars' headers instead") {
				t.Fatalf("notes %q, want one saying %q", notes, tc.note)
			}
			for _, e := range f.Shards {
				if e.Offset == 0 && e.Length == e.ObjectSize {
					t.Fatalf("shard %s is a whole tar, not cut by its headers", e.Name)
				}
			}
		})
	}
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", "{", "is not wids' shard index"},
		{"another version", `{"wids_version": 2, "shardlist": []}`, "not a wids shard index of version 1"},
		{"another kind", `{"__kind__": "x", "wids_version": 1, "shardlist": []}`, `is a "x"`},
		{"a count missing", `{"wids_version": 1, "shardlist": [{"url": "a.tar"}]}`, "a.tar has no count of samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(index, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := formats.Default().Index(ctx, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, opts)
			if err == nil || !strings.Contains(err.Error(), "shardindex.json") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "widsindex create") {
				t.Fatalf("got %v, want an error naming shardindex.json and saying %q", err, tc.want)
			}
		})
	}
	// A later tar wids miscounts is a corrupt shard when it is read.
	edit(func(doc map[string]any) { shard(doc, 2)["nsamples"] = float64(n - 1) })
	f = formattest.Index(t, formattest.OpenDir(t, dir), datav1alpha1.FormatWebDataset, opts)
	r := formattest.Open(t, f)
	last := len(f.Shards) - 1
	data := must(os.ReadFile(filepath.Join(dir, f.Shards[last].Object)))
	if _, err := r.Records(ctx, last, [][]byte{data}, nil); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d samples, the index says %d", n, n-1)) {
		t.Fatalf("a miscounted tar: %v", err)
	}
}
