package planner

import (
	"slices"
	"sort"
	"testing"
)

// sequentialOrder is an order written for the tests alone, to show that an
// order is one file plus its row in orders: an evaluation order, every
// sample of the streams once, in id order, split j taking ids [j·L,
// (j+1)·L). It serves the streams named toySequential.
type sequentialOrder struct{ steady }

// toySequential names the streams the toy order serves.
const toySequential = "toy-sequential"

type sequentialKind struct{}

func (sequentialKind) selects(p *Params) bool { return p.Streams[0].Name == toySequential }
func (sequentialKind) cut(pl *Plan) (order, error) {
	for s, c := range pl.counts {
		if c != pl.params.Streams[s].Index.Samples() {
			return nil, fieldErr("spec.streams", "the sequential order reads each stream once")
		}
	}
	return &sequentialOrder{steady{pl}}, nil
}

func init() { orders = append([]orderKind{sequentialKind{}}, orders...) }

type sequentialEpoch struct{ steady }

func (o *sequentialOrder) epoch(int64) (epochOrder, error) { return &sequentialEpoch{o.steady}, nil }

// dropped and padded: the splits are cut as the random order's are.
func (o *sequentialOrder) dropped() int64 { return (&randomOrder{o.steady}).dropped() }
func (o *sequentialOrder) padded() int64  { return (&randomOrder{o.steady}).padded() }

func (ep *sequentialEpoch) at(j int, t int64) Sample {
	pl := ep.pl
	pad := t >= pl.splitLen
	if pad {
		t -= pl.splitLen
	}
	id := int64(j)*pl.splitLen + t
	s := sort.Search(len(pl.streamOffset), func(s int) bool { return pl.streamOffset[s] > id }) - 1
	first := pl.shardFirst[s]
	h := sort.Search(len(first), func(h int) bool { return first[h] > id-pl.streamOffset[s] }) - 1
	return Sample{ID: id, Stream: s, Shard: h, Pad: pad}
}

func (ep *sequentialEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	return positionMajor(dst, ep.at, k, ep.pl.perSplit, first, n)
}

func (ep *sequentialEpoch) needs(first, n int, sized bool) []ShardNeed {
	pl := ep.pl
	set := newNeedSet(pl, sized)
	for j := first; j < first+n; j++ {
		lo, hi := int64(j)*pl.splitLen, int64(j+1)*pl.splitLen
		for s := range pl.params.Streams {
			for h := range len(pl.shardFirst[s]) - 1 {
				a, b := pl.streamOffset[s]+pl.shardFirst[s][h], pl.streamOffset[s]+pl.shardFirst[s][h+1]
				a, b = max(a, lo)-lo, min(b, hi)-lo
				if a >= b || a/pl.perSplit >= pl.steps {
					continue
				}
				f, l := a/pl.perSplit, min((b-1)/pl.perSplit, pl.steps-1)
				if pad := pl.padRows(); pad > 0 && a < pad {
					l = pl.steps - 1
				}
				set.add(s, h, f, l)
			}
		}
	}
	return set.needs()
}

func (ep *sequentialEpoch) cacheBytes(first, n int) int64 { return peakBytes(ep.needs(first, n, true)) }

// TestAnOrderFromOneFile: the toy order serves a plan with nothing else
// changed: every sample at most once (dropLast drops each split's tail),
// the needs within the epoch.
func TestAnOrderFromOneFile(t *testing.T) {
	pl, err := New(Params{Streams: []Stream{{Name: toySequential, Index: index(10, 7, 5)}}, Seed: 1, NumSplits: 2,
		Shuffle: true, BlockSize: 4, GlobalBatchSize: 4, DropLast: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pl.order.(*sequentialOrder); !ok {
		t.Fatalf("the plan's order is %T, want the toy's", pl.order)
	}
	ep, err := pl.Epoch(3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for k := range pl.Steps() {
		batch, err := ep.GlobalBatch(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range batch {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id < 0 || id >= 22 || i > 0 && id == ids[i-1] {
			t.Fatalf("the epoch delivers %v, want ids of 0 to 21, each once", ids)
		}
	}
	if len(ids)+int(pl.DroppedPerEpoch()) != 22 {
		t.Fatalf("%d delivered and %d dropped of 22", len(ids), pl.DroppedPerEpoch())
	}
	for _, nd := range ep.ShardsNeeded(0, 2) {
		if nd.FirstStep < 0 || nd.LastStep >= pl.Steps() || nd.FirstStep > nd.LastStep {
			t.Fatalf("need %+v outside the %d steps", nd, pl.Steps())
		}
	}
}
