package planner

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// index returns a stream index of shards with the given sample counts, each
// 100 bytes per sample.
func index(samples ...int64) StreamIndex {
	var x StreamIndex
	for i, n := range samples {
		x.Shards = append(x.Shards, Shard{Name: fmt.Sprintf("shard.%05d.mds", i), Samples: n, Bytes: 100 * n, Hash: fmt.Sprintf("h%d-%d", i, n)})
	}
	return x
}

func baseParams() Params {
	return Params{
		Streams: []Stream{
			{Name: "web", Index: index(100, 100, 100)},
			{Name: "code", Index: index(50, 50)},
		},
		Seed: 1, NumSplits: 4, Shuffle: true, BlockSize: 16, GlobalBatchSize: 8, DropLast: true,
	}
}

func TestValidateRejectsWithFieldAndRule(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*Params)
		wantField string
		wantRule  string
	}{
		{"no streams", func(p *Params) { p.Streams = nil }, "spec.streams", "at least one"},
		{"zero splits", func(p *Params) { p.NumSplits = 0 }, "spec.numSplits", "at least 1"},
		{"zero batch", func(p *Params) { p.GlobalBatchSize = 0 }, "spec.globalBatchSize", "at least 1"},
		{"batch not multiple of splits", func(p *Params) { p.GlobalBatchSize = 10 }, "spec.globalBatchSize", "multiple of spec.numSplits (4)"},
		{"zero block", func(p *Params) { p.BlockSize = 0 }, "spec.shuffle.blockSize", "at least 1"},
		{"run longer than the block", func(p *Params) { p.RunLength = 17 }, "spec.shuffle.runLength", "from 1 to spec.shuffle.blockSize (16), got 17"},
		{"negative run", func(p *Params) { p.RunLength = -1 }, "spec.shuffle.runLength", "got -1"},
		{"negative epoch size", func(p *Params) { p.EpochSize = -1 }, "spec.epochSize", "at least 1"},
		{"empty stream", func(p *Params) { p.Streams[1].Index = index() }, "spec.streams[1]", `"code" has no samples`},
		{"stream of empty shards", func(p *Params) { p.Streams[1].Index = index(0, 0) }, "spec.streams[1]", "no samples"},
		// A packed stream whose documents make no pack once said to check
		// the source URI: its documents are there.
		{"packed stream of no pack", func(p *Params) {
			p.Streams[1].Index = index(0, 0)
			p.Streams[1].Index.Packing = "tokens: best-fit 2048"
		}, "spec.packing", `"code" makes no pack of its 2 shards' documents: every document is empty, or cut or dropped`},
		{"negative shard", func(p *Params) { p.Streams[0].Index = index(5, -1) }, "spec.streams[0]", "negative"},
		{"duplicate names", func(p *Params) { p.Streams[1].Name = "web" }, "spec.streams[1].name", "unique"},
		{"missing name", func(p *Params) { p.Streams[0].Name = "" }, "spec.streams[0].name", "required"},
		{"mixed relative and none", func(p *Params) { p.Streams[0].Proportion = "1" }, "spec.streams[1]", "either every stream has a proportion"},
		{"mixed relative and repeat", func(p *Params) { p.Streams[0].Proportion = "1"; p.Streams[1].Repeat = "2" }, "spec.streams[1]", "either every stream"},
		{"two weights on one stream", func(p *Params) { p.Streams[0].Repeat = "2"; p.Streams[0].Choose = 5 }, "spec.streams[0]", "more than one of"},
		{"zero proportion", func(p *Params) { p.Streams[0].Proportion = "0"; p.Streams[1].Proportion = "1" }, "spec.streams[0].proportion", "greater than 0"},
		{"float proportion", func(p *Params) { p.Streams[0].Proportion = "1e-3"; p.Streams[1].Proportion = "1" }, "spec.streams[0].proportion", "not a decimal"},
		{"negative proportion", func(p *Params) { p.Streams[0].Proportion = "-1"; p.Streams[1].Proportion = "1" }, "spec.streams[0].proportion", "not a decimal"},
		{"zero repeat", func(p *Params) { p.Streams[0].Repeat = "0.0" }, "spec.streams[0].repeat", "greater than 0"},
		{"repeat rounding to nothing", func(p *Params) { p.Streams[1].Repeat = "0.001" }, "spec.streams[1]", "gives no sample"},
		{"negative choose", func(p *Params) { p.Streams[0].Choose = -3 }, "spec.streams[0].choose", "greater than 0"},
		{"epoch size with absolute weights", func(p *Params) { p.Streams[0].Repeat = "2"; p.EpochSize = 100 }, "spec.epochSize", "absolute weights"},
		{"no batch", func(p *Params) { p.GlobalBatchSize = 4 * 101 }, "spec.globalBatchSize", "fewer than the 101"},
		{"too many samples", func(p *Params) { p.Streams[0].Repeat = "9999999999999999999" }, "spec.streams[0].repeat", "2^60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := baseParams()
			tt.mutate(&p)
			err := p.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v, want a *FieldError", err)
			}
			if fe.Field != tt.wantField || !strings.Contains(fe.Rule, tt.wantRule) {
				t.Errorf("Validate() = %q, want field %q and a rule with %q", err, tt.wantField, tt.wantRule)
			}
			if _, err := New(p); err == nil {
				t.Errorf("New accepted what Validate rejected")
			}
		})
	}
	p := baseParams()
	if err := p.Validate(); err != nil {
		t.Fatalf("base params rejected: %v", err)
	}
}

func TestWeightsGiveSamplesPerStream(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int64 // one shard per stream with these sizes
		set   func([]Stream, *Params)
		want  []int64
	}{
		{"no weights: every sample once", []int64{300, 100}, func([]Stream, *Params) {}, []int64{300, 100}},
		{"proportions of the default epoch", []int64{300, 100}, func(s []Stream, _ *Params) { s[0].Proportion = "1"; s[1].Proportion = "1" }, []int64{200, 200}},
		{"proportions of a given epoch", []int64{300, 100}, func(s []Stream, p *Params) {
			s[0].Proportion = "0.75"
			s[1].Proportion = "0.25"
			p.EpochSize = 1000
		}, []int64{750, 250}},
		{"largest remainder, ties to the earlier stream", []int64{10, 10, 10}, func(s []Stream, p *Params) {
			for i := range s {
				s[i].Proportion = "1"
			}
			p.EpochSize = 100
		}, []int64{34, 33, 33}},
		{"largest remainder goes to the largest fraction", []int64{10, 10, 10}, func(s []Stream, p *Params) {
			s[0].Proportion, s[1].Proportion, s[2].Proportion = "0.1", "0.45", "0.45"
			p.EpochSize = 11 // 1.1, 4.95, 4.95 -> 1, 5, 5
		}, []int64{1, 5, 5}},
		{"equivalent decimals", []int64{100, 100}, func(s []Stream, p *Params) {
			s[0].Proportion, s[1].Proportion = "0.50", "0.5"
			p.EpochSize = 10
		}, []int64{5, 5}},
		{"epoch size without weights follows sizes", []int64{300, 100}, func(_ []Stream, p *Params) { p.EpochSize = 200 }, []int64{150, 50}},
		{"repeat rounds down", []int64{3, 100}, func(s []Stream, _ *Params) { s[0].Repeat = "2.5" }, []int64{7, 100}},
		{"choose and none", []int64{3, 100}, func(s []Stream, _ *Params) { s[0].Choose = 1000 }, []int64{1000, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Params{NumSplits: 1, GlobalBatchSize: 1, DropLast: true}
			for i, n := range tt.sizes {
				p.Streams = append(p.Streams, Stream{Name: fmt.Sprint("s", i), Index: index(n)})
			}
			tt.set(p.Streams, &p)
			pl, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := pl.SamplesPerStream(); !slices.Equal(got, tt.want) {
				t.Errorf("samples per stream = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFingerprintChangesWithEveryPlanInputAndNamesIt(t *testing.T) {
	base, err := New(baseParams())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Params)
		want   string // the input Diff must name; "" for the same fingerprint
	}{
		{"same params", func(*Params) {}, ""},
		{"seed", func(p *Params) { p.Seed = 2 }, "spec.shuffle.seed: 1, now 2"},
		{"splits", func(p *Params) { p.NumSplits = 2 }, "spec.numSplits: 4, now 2"},
		{"batch", func(p *Params) { p.GlobalBatchSize = 16 }, "spec.globalBatchSize"},
		{"drop last", func(p *Params) { p.DropLast = false }, "spec.dropLast"},
		{"shuffle", func(p *Params) { p.Shuffle = false }, "spec.shuffle.enabled"},
		{"block size", func(p *Params) { p.BlockSize = 32 }, "spec.shuffle.blockSize"},
		{"run length", func(p *Params) { p.RunLength = 4 }, "spec.shuffle.runLength: absent, now 4"},
		{"run length 1", func(p *Params) { p.RunLength = 1 }, ""},
		{"index", func(p *Params) { p.Streams[1].Index.Shards[0].Hash = "changed" }, "spec.streams[1].index"},
		{"weight", func(p *Params) { p.Streams[0].Repeat = "2" }, "spec.streams[0].weight: none, now repeat=2"},
		{"epoch size", func(p *Params) { p.EpochSize = 300 }, "spec.epochSize"},
		{"stream renamed", func(p *Params) { p.Streams[0].Name = "www" }, "spec.streams[0].name"},
		{"a table's snapshot", func(p *Params) { p.Streams[1].Index.Snapshot = "7" }, "spec.streams[1].snapshot: absent, now 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := baseParams()
			p.Streams = slices.Clone(p.Streams)
			p.Streams[1].Index.Shards = slices.Clone(p.Streams[1].Index.Shards)
			tt.mutate(&p)
			other, err := New(p)
			if err != nil {
				t.Fatal(err)
			}
			diff := base.Fingerprint().Diff(other.Fingerprint())
			if tt.want == "" {
				if diff != nil || base.Fingerprint().Sum != other.Fingerprint().Sum {
					t.Fatalf("fingerprint changed: %v", diff)
				}
				return
			}
			if base.Fingerprint().Sum == other.Fingerprint().Sum {
				t.Fatalf("fingerprint did not change")
			}
			if !slices.ContainsFunc(diff, func(l string) bool { return strings.Contains(l, tt.want) }) {
				t.Errorf("Diff = %q, want a line with %q", diff, tt.want)
			}
		})
	}
}

// A table that moved on is refused naming both snapshots, even where its
// shards came out the same.
func TestFingerprintNamesBothSnapshotsOfATable(t *testing.T) {
	at := func(snapshot string) Fingerprint {
		p := baseParams()
		p.Streams = slices.Clone(p.Streams)
		p.Streams[0].Index.Snapshot = snapshot
		pl, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		return pl.Fingerprint()
	}
	diff := at("3051729675574597004").Diff(at("6133004262216453109"))
	want := "spec.streams[0].snapshot: 3051729675574597004, now 6133004262216453109"
	if !slices.Contains(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
}

// A hive tree's partitions are a plan input only where a stream has them:
// another selection or other types change the fingerprint and are named,
// and a stream without partitions keeps the fingerprint it had.
func TestFingerprintNamesAStreamsPartitions(t *testing.T) {
	at := func(partitions string) Fingerprint {
		p := baseParams()
		p.Streams = slices.Clone(p.Streams)
		p.Streams[0].Index.Partitions = partitions
		pl, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		return pl.Fingerprint()
	}
	diff := at("date:utf8,given=false;select=a").Diff(at("date:utf8,given=false;select=b"))
	want := "spec.streams[0].partitions: date:utf8,given=false;select=a, now date:utf8,given=false;select=b"
	if !slices.Contains(diff, want) {
		t.Errorf("Diff = %q, want %q", diff, want)
	}
	plain, err := New(baseParams())
	if err != nil {
		t.Fatal(err)
	}
	if at("").Sum != plain.Fingerprint().Sum || at("date:utf8,given=false;select=").Sum == plain.Fingerprint().Sum {
		t.Error("partitions change the fingerprint of a stream without them, or not of one with them")
	}
}
