package sidefile

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/local"
)

func TestRunsRoundTripAndComplement(t *testing.T) {
	for _, tc := range []struct {
		runs       []indexfile.Run
		rows       int64
		complement string
	}{
		{nil, 10, "[[0 10]]"},
		{[]indexfile.Run{{0, 10}}, 10, "[]"},
		{[]indexfile.Run{{2, 3}, {5, 9}}, 10, "[[0 2] [3 5] [9 10]]"},
		{[]indexfile.Run{{0, 1}, {1 << 40, 1<<40 + 7}}, 1 << 41, fmt.Sprint([]indexfile.Run{{1, 1 << 40}, {1<<40 + 7, 1 << 41}})},
		{nil, 0, "[]"},
	} {
		b := EncodeRuns(nil, tc.runs)
		got, covered, err := DecodeRuns(b, tc.rows)
		var want int64
		for _, r := range tc.runs {
			want += r.Count()
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(append([]indexfile.Run{}, tc.runs...)) || covered != want {
			t.Fatalf("%v: decoded %v (%d rows), %v", tc.runs, got, covered, err)
		}
		if c := Complement(tc.runs, tc.rows); fmt.Sprint(append([]indexfile.Run{}, c...)) != tc.complement {
			t.Fatalf("Complement(%v) = %v, want %s", tc.runs, c, tc.complement)
		}
	}
}

// uvarints encodes vals as unsigned varints, one after the other.
func uvarints(vals ...uint64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

func TestDecodeRunsRefusesWhatEncodeRunsNeverWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		rows int64
	}{
		{"empty", nil, 10},
		{"cut short", uvarints(2, 0, 3), 10},
		{"a run past the rows", uvarints(1, 8, 3), 10},
		{"an empty run", uvarints(1, 2, 0), 10},
		{"touching runs", uvarints(2, 0, 2, 0, 2), 10},
		{"bytes after the runs", append(uvarints(1, 0, 2), 0), 10},
		{"more runs than bytes", uvarints(1 << 30), 1 << 40},
		{"negative rows", uvarints(0), -1},
	} {
		if _, _, err := DecodeRuns(tc.b, tc.rows); err == nil || !strings.Contains(err.Error(), "corrupt selection runs") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestFilterIndexCheck(t *testing.T) {
	ok := func() *FilterIndex {
		return &FilterIndex{Shardfeed: indexfile.Version, Filter: "lang == 'en'", Index: "abc", Shards: []FilterShard{{Matching: 3, Offset: 0, Length: 5, Hash: "xxh64:0123456789abcdef"}, {Matching: 0, Offset: 5, Length: 1, Hash: "xxh64:0123456789abcdef"}}}
	}
	samples := []int64{10, 4}
	if err := ok().Check("abc", samples, 6); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*FilterIndex)
		size   int64
		want   string
	}{
		{"another index", func(f *FilterIndex) { f.Index = "def" }, 6, "computed over another index"},
		{"another version", func(f *FilterIndex) { f.Shardfeed = 99 }, 6, "version 99"},
		{"a shard less", func(f *FilterIndex) { f.Shards = f.Shards[:1] }, 5, "1 shards, the index 2"},
		{"more matching than rows", func(f *FilterIndex) { f.Shards[1].Matching = 5 }, 6, "shard 1 (5 matching of 4 rows"},
		{"a gap in the object", func(f *FilterIndex) { f.Shards[1].Offset = 6 }, 7, "shard 1"},
		{"past the object", func(f *FilterIndex) {}, 5, "shard 1"},
		{"bytes left in the object", func(f *FilterIndex) {}, 9, "is 9 bytes, its index covers 6"},
		{"no hash", func(f *FilterIndex) { f.Shards[0].Hash = "" }, 6, `shard 0 has hash ""`},
		{"a hash of no known algorithm", func(f *FilterIndex) { f.Shards[1].Hash = "md4:00" }, 6, `shard 1 has hash "md4:00"`},
	} {
		f := ok()
		tc.change(f)
		if err := f.Check("abc", samples, tc.size); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if FilterHash("a") == FilterHash("b") || !strings.HasPrefix(FilterHash("a"), "sha256:") {
		t.Fatal("FilterHash")
	}
}

// A selection written beside an index reads back checked; one of another
// filter, without its runs, or over another index is refused, saying how
// to write the right one.
// localStore is a store over a fresh directory, and the directory.
func localStore(t *testing.T) (store.Store, string) {
	dir := t.TempDir()
	return local.OpenDir(dir), dir
}

func TestWriteAndReadFilter(t *testing.T) {
	ctx := context.Background()
	st, dir := localStore(t)
	const expr = "lang == 'en'"
	samples := []int64{10, 4}
	f := &FilterIndex{Shardfeed: indexfile.Version, Filter: expr, Index: "abc"}
	var runs []byte
	runs = f.AppendShard(runs, []indexfile.Run{{1, 3}, {7, 8}})
	runs = f.AppendShard(runs, nil)
	if err := WriteFilter(ctx, st, f, runs); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFilter(ctx, st, expr, "abc", samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Shards[0].Matching != 3 || got.Shards[1].Matching != 0 {
		t.Fatalf("read %+v", got.Shards)
	}
	b := runs[got.Shards[0].Offset : got.Shards[0].Offset+got.Shards[0].Length]
	if r, err := got.ShardRuns(0, b, 10); err != nil || fmt.Sprint(r) != "[[1 3] [7 8]]" {
		t.Fatalf("shard 0 runs %v, %v", r, err)
	}
	if _, err := got.ShardRuns(1, b, 4); err == nil {
		t.Fatal("shard 0's runs accepted as shard 1's")
	}
	for _, tc := range []struct {
		name, expr, hash string
		prepare          func()
		want             string
	}{
		{"another filter", "lang == 'de'", "abc", func() {}, "has no selection for its filter"},
		{"another index", expr, "def", func() {}, "computed over another index"},
		{"a selection of another filter under its name", expr, "abc", func() {
			other := *f
			other.Filter = "lang == 'de'"
			data, _ := json.Marshal(&other)
			key, _ := FilterObjects(expr)
			_ = os.WriteFile(filepath.Join(dir, key), data, 0o600)
		}, `is the selection of filter "lang == 'de'"`},
		{"no runs", expr, "abc", func() {
			_ = WriteFilter(ctx, st, f, runs)
			_, key := FilterObjects(expr)
			_ = os.Remove(filepath.Join(dir, key))
		}, "runs is missing"},
		{"not JSON", expr, "abc", func() {
			key, _ := FilterObjects(expr)
			_ = os.WriteFile(filepath.Join(dir, key), []byte("{\"shardfeed\":1,\"x\":2}"), 0o600)
		}, "not a shardfeed filter index"},
	} {
		tc.prepare()
		if _, err := ReadFilter(ctx, st, tc.expr, tc.hash, samples, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// What shardfeed index writes beside a stream's objects is never indexed
// as one of them.
func TestOwnObjects(t *testing.T) {
	indexKey, runsKey := FilterObjects("lang == 'en'")
	oldIndex, oldRuns := legacyFilterObjects("lang == 'en'")
	for key, want := range map[string]bool{
		indexfile.FileName: true, indexfile.Key: true, indexKey: true, runsKey: true, oldIndex: true, oldRuns: true, indexfile.Dir + "/anything": true,
		"part-0.json": false, "filter-abc.json": false, "filter-" + strings.Repeat("g", 64) + ".json": false,
		"sub/" + oldIndex: false, oldIndex + "l": false, "_shardfeedx/part-0.json": false,
	} {
		if got := Own(key); got != want {
			t.Errorf("Own(%q) = %v, want %v", key, got, want)
		}
	}
}

// An index and a selection written before _shardfeed/ (beside the data)
// are still read, and the runs are taken from where the selection is;
// what is written now goes under _shardfeed/ and is read first.
func TestIndexesWrittenBesideTheDataAreStillRead(t *testing.T) {
	ctx := context.Background()
	st, _ := localStore(t)
	const expr = "lang == 'en'"
	f := &FilterIndex{Shardfeed: indexfile.Version, Filter: expr, Index: "abc"}
	runs := f.AppendShard(nil, []indexfile.Run{{0, 2}})
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	oldIndex, oldRuns := legacyFilterObjects(expr)
	for key, b := range map[string][]byte{oldRuns: runs, oldIndex: data} {
		if err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadFilter(ctx, st, expr, "abc", []int64{5}, 0)
	if err != nil || got.RunsKey != oldRuns {
		t.Fatalf("a selection beside the data: %v, %+v, want the runs at %q", err, got, oldRuns)
	}
	if err := WriteFilter(ctx, st, f, runs); err != nil {
		t.Fatal(err)
	}
	_, newRuns := FilterObjects(expr)
	if got, err := ReadFilter(ctx, st, expr, "abc", []int64{5}, 0); err != nil || got.RunsKey != newRuns {
		t.Fatalf("after a new write: %v, runs at %q, want %q", err, got.RunsKey, newRuns)
	}
}
