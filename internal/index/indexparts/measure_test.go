package indexparts

import (
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
)

// measuredOf is a measured part over shards 2 to 5 of run, with a
// selection and lengths of m's.
func measuredOf(run string, m Measure) (Measured, []byte, []byte) {
	f := &sidefile.FilterIndex{Shardfeed: indexfile.Version, Filter: m.Filter, Index: m.Index}
	x := &sidefile.LengthsIndex{Shardfeed: indexfile.Version, Column: m.Column, Measure: sidefile.Elements, Filter: m.Filter, Index: m.Index}
	var runs, values []byte
	for i := range 3 {
		runs = f.AppendShard(runs, []indexfile.Run{{0, int64(i + 1)}})
		values = x.AppendShard(values, make([]sidefile.Length, i+1))
	}
	return Measured{Run: run, Part: 1, From: 2, To: 5, Filter: f, RunsSHA256: Digest(runs), Lengths: x, LengthsSHA256: Digest(values)}, runs, values
}

// A measured part's record is read back only as the part of its run, its
// range and what the run measures; joined parts are one run's.
func TestMeasuredPartsReadBackAndJoin(t *testing.T) {
	m := Measure{Index: "xxh64:0123456789abcdef", Filter: "lang == 'en'", Column: "tokens", Parts: 3}
	run := MeasureRun(m)
	if CheckRun(run) != nil || MeasureRun(Measure{Index: m.Index, Filter: m.Filter, Column: "other", Parts: 3}) == run {
		t.Fatalf("run %q: not a run, or the same for another column", run)
	}
	span := Span{First: 2, Objects: 3}
	rec, runs, values := measuredOf(run, m)
	data, _ := jsonOf(rec)
	if _, err := ParseMeasured(data, run, 1, span, m); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(r *Measured, m *Measure, s *Span, k *int)
		want string
	}{
		{"another part", func(_ *Measured, _ *Measure, _ *Span, k *int) { *k = 2 }, "not part 2"},
		{"another range", func(_ *Measured, _ *Measure, s *Span, _ *int) { s.First = 3 }, "part 1 is shards 3 to 6"},
		{"another filter", func(_ *Measured, m *Measure, _ *Span, _ *int) { m.Filter = "x" }, "not \"x\""},
		{"no lengths", func(r *Measured, _ *Measure, _ *Span, _ *int) { r.Lengths = nil }, "another filter or column"},
		{"a short selection", func(r *Measured, _ *Measure, _ *Span, _ *int) { r.Filter.Shards = r.Filter.Shards[:2] }, "selection has 2 shards"},
		{"a bad digest", func(r *Measured, _ *Measure, _ *Span, _ *int) { r.LengthsSHA256 = "x" }, "not 64 hex digits"},
	} {
		r, _, _ := measuredOf(run, m)
		mm, s, k := m, span, 1
		c.edit(&r, &mm, &s, &k)
		data, _ := jsonOf(r)
		if _, err := ParseMeasured(data, run, k, s, mm); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}

	// Two parts joined are the selection and lengths of their shards,
	// offsets running on; a part's bytes changed are refused.
	f, joined, err := sidefile.JoinFilters([]*sidefile.FilterIndex{rec.Filter, rec.Filter}, [][]byte{runs, runs})
	if err != nil || len(f.Shards) != 6 || f.Shards[3].Offset != int64(len(runs)) || string(joined) != string(runs)+string(runs) {
		t.Fatalf("joined selection: %v, %+v", err, f)
	}
	x, _, err := sidefile.JoinLengths([]*sidefile.LengthsIndex{rec.Lengths, rec.Lengths}, [][]byte{values, values})
	if err != nil || len(x.Shards) != 6 || x.Shards[5].Offset+x.Shards[5].Length != 2*int64(len(values)) {
		t.Fatalf("joined lengths: %v, %+v", err, x)
	}
	bad := append([]byte(nil), values...)
	bad[len(bad)-1] ^= 1
	if _, _, err := sidefile.JoinLengths([]*sidefile.LengthsIndex{rec.Lengths, rec.Lengths}, [][]byte{values, bad}); err == nil || !strings.Contains(err.Error(), "part 1's lengths: shard 2's bytes hash") {
		t.Errorf("a changed part joined: %v", err)
	}
	if _, _, err := sidefile.JoinFilters([]*sidefile.FilterIndex{rec.Filter}, [][]byte{append(runs, 0)}); err == nil || !strings.Contains(err.Error(), "its shards cover") {
		t.Errorf("a part with bytes past its shards joined: %v", err)
	}
	other := *rec.Lengths
	other.Tokenize = "t"
	if _, _, err := sidefile.JoinLengths([]*sidefile.LengthsIndex{rec.Lengths, &other}, [][]byte{values, values}); err == nil {
		t.Error("lengths of another tokenization joined")
	}
}

// FuzzParseMeasured reads arbitrary bytes as a measured part's record: no
// panic, and what reads back is of the part, its range and the run.
func FuzzParseMeasured(f *testing.F) {
	m := Measure{Index: "xxh64:0123456789abcdef", Filter: "lang == 'en'", Column: "tokens", Parts: 3}
	run := MeasureRun(m)
	rec, _, _ := measuredOf(run, m)
	data, _ := jsonOf(rec)
	f.Add(data)
	f.Add([]byte(`{"run":"` + run + `","part":1,"from":2,"to":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseMeasured(data, run, 1, Span{First: 2, Objects: 3}, m)
		if err != nil {
			return
		}
		if r.From != 2 || r.To != 5 || r.Filter == nil || len(r.Filter.Shards) != 3 || r.Lengths == nil || len(r.Lengths.Shards) != 3 {
			t.Fatalf("read back %+v", r)
		}
	})
}
