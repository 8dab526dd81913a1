package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// packedStream draws a stream of documents in shards, packs each shard as
// p says, and returns the planner's view (each shard's packs its samples)
// with the packs themselves.
func packedStream(r *rand.Rand, p Packing) (StreamIndex, [][]uint32, [][][]Piece) {
	var x StreamIndex
	var lengths [][]uint32
	var packs [][][]Piece
	dist := r.IntN(3)
	for range 1 + r.IntN(5) {
		ls := make([]uint32, r.IntN(80))
		for d := range ls {
			switch dist {
			case 0:
				ls[d] = 1 + r.Uint32N(p.SeqLength/4+1)
			case 1:
				ls[d] = r.Uint32N(p.SeqLength + 1)
			default:
				ls[d] = r.Uint32N(3 * p.SeqLength)
			}
		}
		ps, _ := PackShard(ls, p)
		lengths = append(lengths, ls)
		packs = append(packs, ps)
		x.Shards = append(x.Shards, Shard{Name: fmt.Sprint("part-", len(x.Shards)), Samples: int64(len(ps)), Bytes: int64(100 + len(ls)), Hash: "xxh64:0"})
	}
	x.Packing = "tokens: " + p.String()
	return x, lengths, packs
}

// TestPackedPlansDeliverEveryTokenOnce: packed plans over random length
// distributions, packings and plans (random, stratified and per_stream
// batching, filtered counts, dropLast or not), at every world size
// dividing numSplits 12 and a resume onto another: the same global
// batches, G/W packs a rank a step, and each document's tokens delivered
// at most once an epoch, every one of them but those of the packs the
// epoch leaves out (fewer than numSplits a stream), every pack within its
// sequence length.
func TestPackedPlansDeliverEveryTokenOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(54, 54))
	worlds := []int{1, 2, 3, 4, 6, 12}
	planned := 0
	for trial := range 80 {
		pk := Packing{SeqLength: uint32(8 + r.IntN(200)), Method: []PackMethod{BestFit, FirstFit, Concatenate}[r.IntN(3)], Window: 1 + r.IntN(40),
			Overlong: Overlong(r.IntN(2))}
		p := Params{Seed: r.Uint64(), NumSplits: 12, GlobalBatchSize: int64(12 * (1 + r.IntN(2))), Shuffle: r.IntN(4) != 0, BlockSize: int64(1 + r.IntN(20)),
			Batching: []Batching{BatchingRandom, BatchingStratified, BatchingPerStream}[r.IntN(3)], DropLast: r.IntN(2) == 0}
		var lengths [][][]uint32
		var packs [][][][]Piece
		for s := range 1 + r.IntN(3) {
			x, ls, ps := packedStream(r, pk)
			if r.IntN(2) == 0 {
				x.Filter = "sha256:f" // the counts are the matching rows' packs
			}
			p.Streams = append(p.Streams, Stream{Name: fmt.Sprint("s", s), Index: x})
			lengths, packs = append(lengths, ls), append(packs, ps)
		}
		pl, err := New(p)
		if err != nil {
			continue // too few packs for the splits
		}
		if pl.Version() != 4 {
			t.Fatalf("trial %d: a packed plan of version %d", trial, pl.Version())
		}
		// The first pack of each shard, by stream.
		first := make([][]int64, len(p.Streams))
		for s, st := range p.Streams {
			var n int64
			for _, sh := range st.Index.Shards {
				first[s] = append(first[s], n)
				n += sh.Samples
			}
		}
		offsets := make([]int64, len(p.Streams)+1)
		for s, st := range p.Streams {
			offsets[s+1] = offsets[s] + st.Index.Samples()
		}
		W1, W2 := worlds[r.IntN(6)], worlds[r.IntN(6)]
		epoch := int64(r.IntN(3))
		ep := must(pl.Epoch(epoch))
		resume := r.Int64N(pl.Steps() + 1)
		tokensOf := map[[3]int][]int{} // (stream, shard, doc) → each token's deliveries
		seen := map[int64]bool{}
		delivered := 0
		for k := range pl.Steps() {
			W := W1
			if k >= resume {
				W = W2
			}
			var got []int64
			for rank := range W {
				local := must(ep.LocalBatch(nil, k, rank, W))
				if int64(len(local)) != ep.BatchSize(k)/int64(W) {
					t.Fatalf("trial %d step %d rank %d of %d: %d packs, want %d", trial, k, rank, W, len(local), ep.BatchSize(k)/int64(W))
				}
				for _, smp := range local {
					got = append(got, smp.ID)
					if smp.Pad {
						continue
					}
					if seen[smp.ID] {
						t.Fatalf("trial %d: pack %d delivered twice in epoch %d", trial, smp.ID, epoch)
					}
					seen[smp.ID] = true
					delivered++
					at := smp.ID - offsets[smp.Stream] - first[smp.Stream][smp.Shard]
					pack := packs[smp.Stream][smp.Shard][at]
					var used uint32
					for _, pc := range pack {
						used += pc.Len
						key := [3]int{smp.Stream, smp.Shard, pc.Doc}
						if tokensOf[key] == nil {
							tokensOf[key] = make([]int, lengths[smp.Stream][smp.Shard][pc.Doc])
						}
						for j := pc.Offset; j < pc.Offset+pc.Len; j++ {
							if tokensOf[key][j]++; tokensOf[key][j] > 1 {
								t.Fatalf("trial %d: stream %d shard %d document %d token %d delivered twice", trial, key[0], key[1], pc.Doc, j)
							}
						}
					}
					if used > pk.SeqLength || used == 0 {
						t.Fatalf("trial %d: a pack of %d tokens, sequences of %d", trial, used, pk.SeqLength)
					}
				}
			}
			slices.Sort(got)
			if want := sortedIDs(must(ep.GlobalBatch(nil, k))); !slices.Equal(got, want) {
				t.Fatalf("trial %d step %d (W %d → %d at %d): the ranks' packs are not the global batch", trial, k, W1, W2, resume)
			}
		}
		var total int64
		for _, st := range p.Streams {
			total += st.Index.Samples()
		}
		// What an epoch leaves out: each stream's (or lane's) T mod S,
		// and under dropLast each split's tail short of a batch.
		if left := total - int64(delivered); left < 0 || left >= int64(len(p.Streams))*(int64(p.NumSplits)+p.GlobalBatchSize) {
			t.Fatalf("trial %d: %d of %d packs delivered in epoch %d", trial, delivered, total, epoch)
		}
		planned++
	}
	if planned < 40 {
		t.Fatalf("only %d of 80 random packed datasets planned", planned)
	}
}

// TestProportionsOfTokensWeighEachStreamByItsTokensAPack: with
// proportions of tokens, a stream of longer packs gives fewer of them, so
// that the streams' tokens are in the proportions (an epoch's and a
// curriculum phase's), and the choice is a plan input.
func TestProportionsOfTokensWeighEachStreamByItsTokensAPack(t *testing.T) {
	packs := func(n, tokensEach int64) StreamIndex {
		x := StreamIndex{Packing: "tokens: bestFit 64", Tokens: n * tokensEach}
		for h := range n / 100 {
			x.Shards = append(x.Shards, Shard{Name: fmt.Sprint("part-", h), Samples: 100, Bytes: 100})
		}
		return x
	}
	p := Params{NumSplits: 4, GlobalBatchSize: 8, DropLast: true, EpochSize: 1000, ProportionsOfTokens: true,
		Streams: []Stream{{Name: "long", Index: packs(1000, 60), Proportion: "1"}, {Name: "short", Index: packs(1000, 20), Proportion: "1"}}}
	pl := must(New(p))
	// 60·c_long = 20·c_short, c_long + c_short = 1000.
	if got := pl.SamplesPerStream(); got[0] != 250 || got[1] != 750 {
		t.Fatalf("packs per epoch %v, want [250 750]: equal tokens", got)
	}
	packsOnly := p
	packsOnly.ProportionsOfTokens = false
	if pk := must(New(packsOnly)); pk.Fingerprint().Sum == pl.Fingerprint().Sum || pk.SamplesPerStream()[0] != 500 {
		t.Fatalf("proportions of packs: %v, the same fingerprint: %v", pk.SamplesPerStream(), pk.Fingerprint().Sum == pl.Fingerprint().Sum)
	}
	// A phase of 1 token of long for 3 of short: 1/60 : 3/20 = 1 : 9 packs.
	w, err := p.phaseWeights("phase", map[string]string{"long": "1", "short": "3"})
	if err != nil || w[0]*9 != w[1] {
		t.Fatalf("phase weights %v (%v), want 1 : 9", w, err)
	}
	// Token counts whose ratio in lowest terms passes 2^40: rounded to a
	// billionth of the largest weight.
	p.Streams[0].Index.Tokens, p.Streams[1].Index.Tokens = 999_999_999_989, 999_999_999_961
	w, err = p.phaseWeights("phase", map[string]string{"long": "1", "short": "3"})
	if err != nil || w[1] != 1_000_000_000 || w[0] < 333_333_333 || w[0] > 333_333_334 {
		t.Fatalf("phase weights %v (%v), want 1 : 3 to a billionth", w, err)
	}
	p.Streams[1].Index.Tokens = 0
	if _, err := New(p); err == nil || !strings.Contains(err.Error(), `stream "short" has no token in its packs`) {
		t.Fatalf("a stream of no token: %v", err)
	}
}
