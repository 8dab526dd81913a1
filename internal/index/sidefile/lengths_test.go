package sidefile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// Lengths written beside an index read back checked and decode to what was
// written; lengths of another column, measure, filter or index, without
// their values, or with a shard that does not add up, are refused saying
// how to write the right ones.
func TestWriteAndReadLengths(t *testing.T) {
	ctx := context.Background()
	st, dir := localStore(t)
	shards := [][]Length{{{3}, {0}, {1 << 20}, {127}, {128}}, nil, {{MaxLength}}}
	x := &LengthsIndex{Shardfeed: indexfile.Version, Column: "tokens", Measure: Elements, Filter: "lang == 'en'", Index: "abc"}
	var values []byte
	for _, s := range shards {
		values = x.AppendShard(values, s)
	}
	if err := WriteLengths(ctx, st, x, values); err != nil {
		t.Fatal(err)
	}
	samples := []int64{5, 0, 1}
	got, err := ReadLengths(ctx, st, "tokens", Elements, "lang == 'en'", "", "abc", samples, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, sum, most := got.Totals(); n != 6 || sum != 3+1<<20+127+128+MaxLength || most != MaxLength {
		t.Fatalf("totals %d samples, sum %d, max %d", n, sum, most)
	}
	for i, want := range shards {
		s := got.Shards[i]
		ls, err := got.ShardLengths(i, values[s.Offset:s.Offset+s.Length])
		if err != nil || fmt.Sprint(ls) != fmt.Sprint(append([]Length{}, want...)) {
			t.Fatalf("shard %d: %v, %v; want %v", i, ls, err, want)
		}
	}
	if _, err := got.ShardLengths(2, values[got.Shards[0].Offset:got.Shards[0].Length]); err == nil {
		t.Fatal("shard 0's lengths accepted as shard 2's")
	}
	indexKey, valuesKey := LengthsObjects("tokens", Elements, "lang == 'en'", "")
	for _, tc := range []struct {
		name         string
		column       string
		m            Measure
		filter, hash string
		samples      []int64
		prepare      func()
		want         string
	}{
		{"another column", "ids", Elements, "lang == 'en'", "abc", samples, func() {}, "has no lengths for its column"},
		{"another measure", "tokens", ImageSize, "lang == 'en'", "abc", samples, func() {}, "has no lengths"},
		{"no filter", "tokens", Elements, "", "abc", samples, func() {}, "has no lengths"},
		{"another index", "tokens", Elements, "lang == 'en'", "def", samples, func() {}, "measured over another index"},
		{"other samples", "tokens", Elements, "lang == 'en'", "abc", []int64{4, 1, 1}, func() {}, "lengths of shard 0"},
		{"other shards", "tokens", Elements, "lang == 'en'", "abc", []int64{5, 0}, func() {}, "3 shards, the index 2"},
		{"lengths of another column under its name", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			other := *x
			other.Column = "ids"
			data, _ := json.Marshal(&other)
			_ = os.WriteFile(filepath.Join(dir, indexKey), data, 0o600)
		}, `holds the lengths of column "ids"`},
		{"a sum that does not add up", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			bad := *x
			bad.Shards = append([]LengthsShard{}, x.Shards...)
			bad.Shards[0].Sum = bad.Shards[0].Max - 1
			data, _ := json.Marshal(&bad)
			_ = os.WriteFile(filepath.Join(dir, indexKey), data, 0o600)
		}, "are corrupt"},
		{"an unknown measure", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			data, _ := json.Marshal(x)
			data = []byte(strings.Replace(string(data), `"measure":"elements"`, `"measure":"elements2"`, 1))
			_ = os.WriteFile(filepath.Join(dir, indexKey), data, 0o600)
		}, `not of "tokens"`},
		{"no values", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			_ = WriteLengths(ctx, st, x, values)
			_ = os.Remove(filepath.Join(dir, valuesKey))
		}, ".lengths is missing"},
		{"values cut short", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			_ = WriteLengths(ctx, st, x, values)
			_ = os.WriteFile(filepath.Join(dir, valuesKey), values[:len(values)-1], 0o600)
		}, "bytes [8, +5) of 12) are corrupt"},
		{"not JSON", "tokens", Elements, "lang == 'en'", "abc", samples, func() {
			_ = os.WriteFile(filepath.Join(dir, indexKey), []byte(`{"shardfeed":1,"x":2}`), 0o600)
		}, "not a shardfeed lengths index"},
	} {
		tc.prepare()
		if _, err := ReadLengths(ctx, st, tc.column, tc.m, tc.filter, "", tc.hash, tc.samples, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// An image's length is its pixels: sums and maxima are of height × width,
// and a side above MaxSide is refused.
func TestImageLengthsCountPixels(t *testing.T) {
	x := &LengthsIndex{Shardfeed: indexfile.Version, Column: "image", Measure: ImageSize, Index: "abc"}
	values := x.AppendShard(nil, []Length{{480, 640}, {1, 1}, {MaxSide, MaxSide}})
	s := x.Shards[0]
	if s.Sum != 480*640+1+MaxSide*MaxSide || s.Max != MaxSide*MaxSide || s.Samples != 3 {
		t.Fatalf("shard %+v", s)
	}
	if err := x.Check("abc", []int64{3}, int64(len(values))); err != nil {
		t.Fatal(err)
	}
	if ls, err := x.ShardLengths(0, values); err != nil || ls[0] != (Length{480, 640}) {
		t.Fatalf("%v, %v", ls, err)
	}
	big := &LengthsIndex{Shardfeed: indexfile.Version, Column: "image", Measure: ImageSize, Index: "abc"}
	values = big.AppendShard(nil, []Length{{MaxSide + 1, 1}})
	if _, err := big.ShardLengths(0, values); err == nil || !strings.Contains(err.Error(), "past") {
		t.Fatalf("a side of %d: %v", MaxSide+1, err)
	}
}

// ShardLengths decodes exactly what AppendShard writes: a value in more
// bytes than it needs, one past the bound, bytes left over or missing, and
// values that do not add up to the index's sum and maximum are corrupt.
func TestShardLengthsRefusesWhatAppendShardNeverWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		b        []byte
		samples  int64
		sum, max int64
	}{
		{"a value in two bytes that needs one", []byte{0x83, 0x00}, 1, 3, 3},
		{"a value past MaxLength", uvarints(MaxLength + 1), 1, MaxLength + 1, MaxLength + 1},
		{"cut short", uvarints(3, 4)[:1], 2, 7, 4},
		{"a byte left over", uvarints(3, 4), 1, 3, 3},
		{"another sum", uvarints(3, 4), 2, 8, 4},
		{"another max", uvarints(3, 4), 2, 7, 3},
		{"a varint that never ends", []byte{0x80, 0x80, 0x80}, 1, 0, 0},
	} {
		x := &LengthsIndex{Measure: Elements, Shards: []LengthsShard{{Samples: tc.samples, Sum: tc.sum, Max: tc.max, Length: int64(len(tc.b))}}}
		if ls, err := x.ShardLengths(0, tc.b); err == nil {
			t.Errorf("%s: decoded %v", tc.name, ls)
		}
	}
}

// FuzzShardLengths: any bytes, count, sum and maximum are either refused
// or decode to lengths that AppendShard writes back byte for byte, with
// the same sum and maximum; nothing panics, and memory stays within the
// bytes' bound.
func FuzzShardLengths(f *testing.F) {
	x := &LengthsIndex{Measure: Elements}
	f.Add(x.AppendShard(nil, []Length{{3}, {0}, {300}}), int64(3), int64(303), int64(300), false)
	y := &LengthsIndex{Measure: ImageSize}
	f.Add(y.AppendShard(nil, []Length{{480, 640}, {2, 3}}), int64(2), int64(480*640+6), int64(480*640), true)
	f.Add([]byte{0x80, 0x00}, int64(1), int64(0), int64(0), false)
	f.Fuzz(func(t *testing.T, b []byte, samples, sum, most int64, image bool) {
		m := Elements
		if image {
			m = ImageSize
		}
		x := &LengthsIndex{Shardfeed: indexfile.Version, Measure: m, Index: "h",
			Shards: []LengthsShard{{Samples: samples, Sum: sum, Max: most, Length: int64(len(b)), Hash: "xxh64:0000000000000000"}}}
		if x.Check("h", []int64{samples}, int64(len(b))) != nil {
			return // a reader never decodes a shard its index refuses
		}
		ls, err := x.ShardLengths(0, b)
		if err != nil {
			return
		}
		again := &LengthsIndex{Measure: m}
		if out := again.AppendShard(nil, ls); string(out) != string(b) || again.Shards[0].Sum != sum || again.Shards[0].Max != most {
			t.Fatalf("decoded %v, which encodes as %x (sum %d, max %d), not %x (sum %d, max %d)", ls, out, again.Shards[0].Sum, again.Shards[0].Max, b, sum, most)
		}
	})
}
