package sidefile

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/strictjson"
	"github.com/shardfeed/shardfeed/planner"
)

// Packs counted from a column's lengths are each shard's packing by the
// planner's packer; written beside the index they read back checked, and
// packs of another packing, column, filter or index, or counts that do not
// hold together, are refused saying how to count the right ones.
func TestWriteAndReadPacks(t *testing.T) {
	ctx := context.Background()
	st, dir := localStore(t)
	shards := [][]Length{{{3}, {0}, {5}, {2}, {9}}, nil, {{4}, {4}, {4}}}
	x := &LengthsIndex{Shardfeed: indexfile.Version, Column: "tokens", Measure: Elements, Filter: "lang == 'en'", Index: "abc"}
	var values []byte
	for _, s := range shards {
		values = x.AppendShard(values, s)
	}
	p := planner.Packing{SeqLength: 8, Method: planner.BestFit, Window: 4}
	px, err := Packs(x, values, p)
	if err != nil {
		t.Fatal(err)
	}
	// Shard 0: window [3 0 5 2] packs as [5 3] [2], and its emptiest pack's
	// [2] goes on with window [9]: [8] [2 1].
	want := []PacksShard{
		{Docs: 5, Packs: 3, Tokens: 19, Padding: 5, CutDocs: 1, EmptyDocs: 1},
		{},
		{Docs: 3, Packs: 2, Tokens: 12, Padding: 4},
	}
	for i := range want {
		if px.Shards[i] != want[i] {
			t.Fatalf("shard %d: %+v, want %+v", i, px.Shards[i], want[i])
		}
	}
	if err := WritePacks(ctx, st, px, p); err != nil {
		t.Fatal(err)
	}
	samples := []int64{5, 0, 3}
	got, err := ReadPacks(ctx, st, "tokens", "lang == 'en'", "", p, "abc", samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	if tot := got.Totals(); tot.Packs != 5 || tot.Tokens != 31 || tot.Docs != 8 {
		t.Fatalf("totals %+v", tot)
	}
	key := PacksKey("tokens", "lang == 'en'", "", p)
	rewrite := func(f func(*PacksIndex)) func() {
		return func() {
			bad := *px
			bad.Shards = append([]PacksShard{}, px.Shards...)
			f(&bad)
			data, _ := json.Marshal(&bad)
			_ = os.WriteFile(filepath.Join(dir, key), data, 0o600)
		}
	}
	other := p
	other.Window = 5
	for _, tc := range []struct {
		name    string
		p       planner.Packing
		column  string
		filter  string
		hash    string
		samples []int64
		prepare func()
		want    string
	}{
		{"another packing", other, "tokens", "lang == 'en'", "abc", samples, func() {}, "packs were not counted"},
		{"another column", p, "ids", "lang == 'en'", "abc", samples, func() {}, "packs were not counted"},
		{"no filter", p, "tokens", "", "abc", samples, func() {}, "packs were not counted"},
		{"another index", p, "tokens", "lang == 'en'", "def", samples, func() {}, "counted over another index"},
		{"other documents", p, "tokens", "lang == 'en'", "abc", []int64{4, 1, 3}, func() {}, "packs of shard 0"},
		{"other shards", p, "tokens", "lang == 'en'", "abc", []int64{5, 0}, func() {}, "3 shards, the index 2"},
		{"another packing under its key", p, "tokens", "lang == 'en'", "abc", samples, rewrite(func(b *PacksIndex) { b.Packing = other.String() }), "holds the packs of column"},
		{"padding that does not add up", p, "tokens", "lang == 'en'", "abc", samples, rewrite(func(b *PacksIndex) { b.Shards[2].Padding++ }), "are corrupt"},
		{"a pack without a token", p, "tokens", "lang == 'en'", "abc", samples, rewrite(func(b *PacksIndex) {
			b.Shards[1] = PacksShard{Packs: 1, Padding: 8}
		}), "are corrupt"},
		{"more packs than a long bound", p, "tokens", "lang == 'en'", "abc", samples, rewrite(func(b *PacksIndex) {
			b.Shards[2].Packs, b.Shards[2].Tokens, b.Shards[2].Padding = 1<<62, 1<<62, 0
		}), "are corrupt"},
		{"an unknown field", p, "tokens", "lang == 'en'", "abc", samples, func() {
			data, _ := json.Marshal(px)
			data = []byte(strings.Replace(string(data), `"column"`, `"extra":1,"column"`, 1))
			_ = os.WriteFile(filepath.Join(dir, key), data, 0o600)
		}, "not a shardfeed packs index"},
	} {
		tc.prepare()
		_, err := ReadPacks(ctx, st, tc.column, tc.filter, "", tc.p, tc.hash, tc.samples, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "shardfeed index") && !strings.Contains(err.Error(), "missing") {
			t.Errorf("%s: %v, want %q and the command", tc.name, err, tc.want)
		}
		if err := WritePacks(ctx, st, px, p); err != nil {
			t.Fatal(err)
		}
	}
	img := *x
	img.Measure = ImageSize
	if _, err := Packs(&img, values, p); err == nil || !strings.Contains(err.Error(), "list column of token ids") {
		t.Fatalf("images packed: %v", err)
	}
}

// FuzzPacksCheck: a packs index of any bytes is decoded strictly and
// checked without a panic; one it accepts holds together.
func FuzzPacksCheck(f *testing.F) {
	good, _ := json.Marshal(&PacksIndex{Shardfeed: indexfile.Version, Column: "t", Packing: "x", SequenceLength: 8, Index: "h",
		Shards: []PacksShard{{Docs: 3, Packs: 2, Tokens: 12, Padding: 4}}})
	f.Add(good)
	f.Add([]byte(`{"shardfeed":1,"sequenceLength":1,"index":"h","shards":[{"docs":3,"packs":9223372036854775807,"tokens":1}]}`))
	f.Add([]byte(`{"shardfeed":1,"sequenceLength":8,"index":"h","shards":[{"docs":3,"packs":2,"tokens":12,"padding":4,"unit":2},{"docs":1}]}`))
	f.Add([]byte(`{"shardfeed":1,"sequenceLength":8,"index":"h","shards":[{"docs":1},{"docs":3,"packs":2,"tokens":12,"padding":4,"unit":9223372036854775807}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var x PacksIndex
		if strictjson.Decode(data, &x) != nil || len(x.Shards) == 0 {
			return
		}
		samples := make([]int64, len(x.Shards))
		for i, s := range x.Shards {
			samples[i] = s.Docs
		}
		if x.Check("h", samples) != nil {
			return
		}
		units := x.Units()
		for i, s := range x.Shards {
			if units[i] == 0 && s != (PacksShard{Docs: s.Docs}) || i+units[i] > len(x.Shards) {
				t.Fatalf("accepted shard %d %+v in units %v", i, s, units)
			}
			if s.Packs > s.Tokens || s.Padding != s.Packs*int64(x.SequenceLength)-s.Tokens || s.Padding < 0 {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}

// Packs across shards: each unit's documents, its shards' in order, are
// packed as one shard's; the unit's first shard holds its counts and the
// unit's size, the others their documents alone. A packs index whose units
// are not the packing's, or do not hold together, is refused.
func TestPacksAcrossShards(t *testing.T) {
	ctx := context.Background()
	st, dir := localStore(t)
	shards := [][]Length{{{3}, {5}}, {{2}, {2}}, {{7}, {1}, {6}}, {}, {{4}, {4}}}
	x := &LengthsIndex{Shardfeed: indexfile.Version, Column: "tokens", Measure: Elements, Index: "abc"}
	var values []byte
	var all []uint32
	samples := make([]int64, len(shards))
	for i, s := range shards {
		values = x.AppendShard(values, s)
		for _, l := range s {
			all = append(all, l[0])
		}
		samples[i] = int64(len(s))
	}
	p := planner.Packing{SeqLength: 8, Method: planner.BestFit, Window: 2, AcrossShards: true}
	if u := p.Units(samples); !slices.Equal(u, []int{2, 3}) {
		t.Fatalf("units %v", u)
	}
	px, err := Packs(x, values, p)
	if err != nil {
		t.Fatal(err)
	}
	first, st0 := planner.PackShard(all[:4], p)
	second, st1 := planner.PackShard(all[4:], p)
	head0, head1 := ShardPacks(2, st0, len(first)), ShardPacks(3, st1, len(second))
	head0.Unit, head1.Unit = 2, 3
	want := []PacksShard{head0, {Docs: 2}, head1, {}, {Docs: 2}}
	if !slices.Equal(px.Shards, want) {
		t.Fatalf("packs %+v, want %+v", px.Shards, want)
	}
	if u := px.Units(); !slices.Equal(u, []int{2, 0, 3, 0, 0}) {
		t.Fatalf("Units %v", u)
	}
	if err := WritePacks(ctx, st, px, p); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPacks(ctx, st, "tokens", "", "", p, "abc", samples, 0); err != nil {
		t.Fatal(err)
	}
	key := PacksKey("tokens", "", "", p)
	for _, tc := range []struct {
		name string
		edit func(b *PacksIndex)
		want string
	}{
		{"a shard in a unit with packs", func(b *PacksIndex) { b.Shards[1].Packs, b.Shards[1].Tokens, b.Shards[1].Padding = 1, 1, 7 }, "has packs of its own"},
		{"a unit past the shards", func(b *PacksIndex) { b.Shards[2].Unit = 4 }, "starts a packing unit of 4 shards"},
		{"a unit of one", func(b *PacksIndex) { b.Shards[0].Unit = 1 }, "starts a packing unit of 1 shards"},
		{"a unit too many", func(b *PacksIndex) { b.Shards[0].Unit = planner.MaxUnitShards + 1 }, "packing unit"},
		{"a unit past any bound, not first", func(b *PacksIndex) { b.Shards[2].Unit = math.MaxInt64 }, "packing unit"},
		{"units not the packing's", func(b *PacksIndex) {
			b.Shards[0].Unit, b.Shards[1] = 0, PacksShard{Docs: 2, Packs: 1, Tokens: 4, Padding: 4}
			b.Shards[0].Packs, b.Shards[0].Tokens, b.Shards[0].Padding = 1, 8, 0
		}, "makes one of 2"},
	} {
		bad := *px
		bad.Shards = slices.Clone(px.Shards)
		tc.edit(&bad)
		data, _ := json.Marshal(&bad)
		if err := os.WriteFile(filepath.Join(dir, key), data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadPacks(ctx, st, "tokens", "", "", p, "abc", samples, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "re-run shardfeed index") {
			t.Errorf("%s: %v, want %q and the command", tc.name, err, tc.want)
		}
	}
}
