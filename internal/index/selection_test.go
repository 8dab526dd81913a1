package index

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

func TestRunsRoundTripAndComplement(t *testing.T) {
	for _, tc := range []struct {
		runs       []Run
		rows       int64
		complement string
	}{
		{nil, 10, "[[0 10]]"},
		{[]Run{{0, 10}}, 10, "[]"},
		{[]Run{{2, 3}, {5, 9}}, 10, "[[0 2] [3 5] [9 10]]"},
		{[]Run{{0, 1}, {1 << 40, 1<<40 + 7}}, 1 << 41, fmt.Sprint([]Run{{1, 1 << 40}, {1<<40 + 7, 1 << 41}})},
		{nil, 0, "[]"},
	} {
		b := EncodeRuns(nil, tc.runs)
		got, covered, err := DecodeRuns(b, tc.rows)
		var want int64
		for _, r := range tc.runs {
			want += r.Count()
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(append([]Run{}, tc.runs...)) || covered != want {
			t.Fatalf("%v: decoded %v (%d rows), %v", tc.runs, got, covered, err)
		}
		if c := Complement(tc.runs, tc.rows); fmt.Sprint(append([]Run{}, c...)) != tc.complement {
			t.Fatalf("Complement(%v) = %v, want %s", tc.runs, c, tc.complement)
		}
	}
}

func TestDecodeRunsRefusesWhatEncodeRunsNeverWrites(t *testing.T) {
	enc := func(vals ...uint64) []byte {
		var b []byte
		for _, v := range vals {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		rows int64
	}{
		{"empty", nil, 10},
		{"cut short", enc(2, 0, 3), 10},
		{"a run past the rows", enc(1, 8, 3), 10},
		{"an empty run", enc(1, 2, 0), 10},
		{"touching runs", enc(2, 0, 2, 0, 2), 10},
		{"bytes after the runs", append(enc(1, 0, 2), 0), 10},
		{"more runs than bytes", enc(1 << 30), 1 << 40},
		{"negative rows", enc(0), -1},
	} {
		if _, _, err := DecodeRuns(tc.b, tc.rows); err == nil || !strings.Contains(err.Error(), "corrupt selection runs") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestFilterIndexCheck(t *testing.T) {
	ok := func() *FilterIndex {
		return &FilterIndex{Shardfeed: Version, Filter: "lang == 'en'", Index: "abc", Shards: []FilterShard{{Matching: 3, Offset: 0, Length: 5}, {Matching: 0, Offset: 5, Length: 1}}}
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
