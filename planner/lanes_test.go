package planner

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Stratified: every global batch holds each stream in its proportion of
// the epoch, fewer than two off per split (a split's window of a step is
// the difference of two prefixes of the interleaving, each within one). Per stream:
// every global batch comes from one stream, the streams' batches
// interleaved in proportion. Both over random plans, which the other
// property tests (same global batches for every world size, resume,
// needs, egress) also draw with every batching method.
func TestBatchingMethodsComposeBatchesAsDocumented(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	tried := map[Batching]int{}
	for tried[BatchingStratified] < 100 || tried[BatchingPerStream] < 100 {
		p := randomParams(r)
		if !p.lanes() {
			continue
		}
		tried[p.Batching]++
		pl, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 2, true: 3}[p.runs()]; pl.Version() != want || pl.Fingerprint().Inputs["spec.batching"] != string(p.Batching) {
			t.Fatalf("%s: version %d, fingerprint inputs %v", p.Batching, pl.Version(), pl.Fingerprint().Inputs)
		}
		ep, err := pl.Epoch(int64(r.IntN(3)))
		if err != nil {
			t.Fatal(err)
		}
		S := int64(pl.NumSplits())
		lanes := lanesOf(pl)
		batches := make([]int64, len(p.Streams))
		for k := range pl.Steps() {
			batch, _ := ep.GlobalBatch(nil, k)
			count := make([]int64, len(p.Streams))
			for _, x := range batch {
				count[x.Stream]++
			}
			switch p.Batching {
			case BatchingStratified:
				for s, n := range count {
					quota := float64(pl.GlobalBatchSize()) * float64(lanes.length[s]) / float64(pl.SplitLen())
					if d := float64(n) - quota; d >= 2*float64(S) || d <= -2*float64(S) {
						t.Fatalf("%+v\nbatch %d holds %d of stream %d, its quota is %.1f", p, k, n, s, quota)
					}
				}
			case BatchingPerStream:
				from := -1
				for s, n := range count {
					if n > 0 && from >= 0 {
						t.Fatalf("%+v\nbatch %d holds streams %d and %d", p, k, from, s)
					}
					if n > 0 {
						from = s
					}
				}
				batches[from]++
				for s := range batches { // the first k+1 batches, in proportion
					quota := float64(k+1) * float64(lanes.steps[s]) / float64(pl.Steps())
					if d := float64(batches[s]) - quota; d > 1 || d < -1 {
						t.Fatalf("%+v\nthe first %d batches hold %d of stream %d, its quota is %.1f", p, k+1, batches[s], s, quota)
					}
				}
			}
		}
	}
}

// Stratified and per_stream batching need each stream cut into the splits:
// a stream of fewer samples than splits, or (per_stream, dropLast) than
// one batch's share of a split, is refused saying so.
func TestBatchingMethodsRefuseStreamsTooSmallToCut(t *testing.T) {
	for _, tc := range []struct {
		batching Batching
		dropLast bool
		sizes    []int64
		want     string
	}{
		{BatchingStratified, false, []int64{100, 3}, `stream "s1" gives 3 samples per epoch`},
		{BatchingPerStream, true, []int64{100, 12}, `stream "s1" has 3 samples per split, fewer than the 4`},
		{"sorted", false, []int64{100}, `"sorted" is not a batching method`},
	} {
		p := Params{NumSplits: 4, GlobalBatchSize: 16, DropLast: tc.dropLast, Batching: tc.batching}
		for i, n := range tc.sizes {
			p.Streams = append(p.Streams, Stream{Name: []string{"s0", "s1"}[i], Index: index(n)})
		}
		if _, err := New(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want %q", tc.batching, tc.sizes, err, tc.want)
		}
	}
}
