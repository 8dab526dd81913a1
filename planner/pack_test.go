package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// firstFit is the reference packer best-fit decreasing is held against:
// each document, in draw order, into the first pack with room for it.
func firstFit(lengths []uint32, seqLen uint32) int {
	var room []uint32
	for _, n := range lengths {
		if n == 0 || n > seqLen {
			continue
		}
		placed := false
		for i := range room {
			if room[i] >= n {
				room[i] -= n
				placed = true
				break
			}
		}
		if !placed {
			room = append(room, seqLen-n)
		}
	}
	return len(room)
}

// checkPacks checks that packs deliver every token of every document once
// (those dropped aside), each pack within seqLen, pieces in draw order.
func checkPacks(t *testing.T, lengths []uint32, seqLen uint32, packs [][]Piece, st PackStats) {
	t.Helper()
	next := make([]uint32, len(lengths)) // each document's next token
	var tokens, padding uint64
	for i, pack := range packs {
		var used uint32
		for j, pc := range pack {
			if j > 0 && (pack[j-1].Doc > pc.Doc || pack[j-1].Doc == pc.Doc && pack[j-1].Offset >= pc.Offset) {
				t.Fatalf("pack %d: pieces out of draw order: %v", i, pack)
			}
			if pc.Len == 0 || pc.Offset+pc.Len > lengths[pc.Doc] {
				t.Fatalf("pack %d: piece %+v of a document of %d tokens", i, pc, lengths[pc.Doc])
			}
			used += pc.Len
			tokens += uint64(pc.Len)
		}
		if used > seqLen {
			t.Fatalf("pack %d holds %d tokens, above %d", i, used, seqLen)
		}
		padding += uint64(seqLen - used)
	}
	// Pieces of one document, over all packs, cover it exactly once.
	covered := make([][]bool, len(lengths))
	for _, pack := range packs {
		for _, pc := range pack {
			if covered[pc.Doc] == nil {
				covered[pc.Doc] = make([]bool, lengths[pc.Doc])
			}
			for k := pc.Offset; k < pc.Offset+pc.Len; k++ {
				if covered[pc.Doc][k] {
					t.Fatalf("document %d token %d delivered twice", pc.Doc, k)
				}
				covered[pc.Doc][k] = true
				next[pc.Doc]++
			}
		}
	}
	var missing uint64
	for d, n := range lengths {
		if next[d] != n {
			missing += uint64(n - next[d])
		}
	}
	if missing != st.DroppedTokens || tokens != st.Tokens || padding != st.Padding {
		t.Fatalf("%d tokens missing, %d delivered, %d padding; stats say %+v", missing, tokens, padding, st)
	}
}

// Over random length distributions and windows, best-fit decreasing
// delivers every token once within the sequence length, never uses more
// packs than first-fit in draw order nor fewer than the tokens need; with a
// fixed number of packs that holds the tokens, all are delivered (cutting
// documents only where they do not fit whole) and, given at least the
// packs best-fit wants, none is cut.
func TestPackWindowProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	dists := map[string]func(seqLen uint32) uint32{
		"short":    func(l uint32) uint32 { return 1 + rng.Uint32N(l/8) },
		"uniform":  func(l uint32) uint32 { return rng.Uint32N(l + 1) },
		"long":     func(l uint32) uint32 { return l/2 + rng.Uint32N(l/2+1) },
		"overlong": func(l uint32) uint32 { return rng.Uint32N(3 * l) },
		"mixed": func(l uint32) uint32 {
			if rng.IntN(10) == 0 {
				return l/2 + rng.Uint32N(l)
			}
			return 1 + rng.Uint32N(l/16)
		},
	}
	for name, dist := range dists {
		for trial := range 60 {
			seqLen := uint32(64 + rng.IntN(4096))
			lengths := make([]uint32, rng.IntN(300))
			var total uint64
			for i := range lengths {
				lengths[i] = dist(seqLen)
				total += uint64(lengths[i])
			}
			for _, ov := range []Overlong{CutOverlong, DropOverlong} {
				packs, st := PackWindow(lengths, seqLen, 0, ov)
				checkPacks(t, lengths, seqLen, packs, st)
				need := int((st.Tokens + uint64(seqLen) - 1) / uint64(seqLen))
				if len(packs) < need {
					t.Fatalf("%s %d: %d packs for %d tokens of %d", name, trial, len(packs), st.Tokens, seqLen)
				}
				if ov == DropOverlong {
					if ff := firstFit(lengths, seqLen); len(packs) > ff || st.CutDocs != 0 {
						t.Fatalf("%s %d: best-fit decreasing %d packs (%d cut), first-fit %d", name, trial, len(packs), st.CutDocs, ff)
					}
				} else if st.DroppedTokens != 0 || st.Tokens != total {
					t.Fatalf("%s %d: %d of %d tokens delivered cutting overlong documents", name, trial, st.Tokens, total)
				}
				// Fixed packs: as many as best-fit wants (nothing cut
				// but the overlong), and as few as the tokens need.
				for _, bins := range []int{len(packs), need} {
					if bins == 0 {
						continue
					}
					fixed, fst := PackWindow(lengths, seqLen, bins, ov)
					checkPacks(t, lengths, seqLen, fixed, fst)
					if len(fixed) != bins || fst.Tokens != st.Tokens || fst.DroppedTokens != st.DroppedTokens {
						t.Fatalf("%s %d: %d fixed packs deliver %d tokens (%d dropped), want %d packs, %d tokens", name, trial, len(fixed), fst.Tokens, fst.DroppedTokens, bins, st.Tokens)
					}
					if bins == len(packs) && fst.CutDocs != st.CutDocs {
						t.Fatalf("%s %d: %d documents cut with the packs best-fit wants, %d without", name, trial, fst.CutDocs, st.CutDocs)
					}
				}
			}
		}
	}
}

// A worked example: the longest first, each into the pack with the least
// room that holds it; a document longer than the sequence is cut into a
// whole sequence and a rest, or dropped.
func TestPackWindowExample(t *testing.T) {
	for _, tc := range []struct {
		ov      Overlong
		want    string
		padding uint64
		cut     int
		dropped uint64
	}{
		{CutOverlong, "[[{3 0 8}] [{0 0 3} {1 0 5}] [{2 0 2} {3 8 1} {5 0 4}]]", 1, 1, 0},
		{DropOverlong, "[[{0 0 3} {1 0 5}] [{2 0 2} {5 0 4}]]", 2, 0, 9},
	} {
		packs, st := PackWindow([]uint32{3, 5, 2, 9, 0, 4}, 8, 0, tc.ov)
		if got := fmt.Sprint(packs); got != tc.want || st.Padding != tc.padding || st.CutDocs != tc.cut || st.DroppedTokens != tc.dropped {
			t.Errorf("overlong %d: %s %+v, want %s", tc.ov, got, st, tc.want)
		}
	}
}

// Over random shards, every method delivers every token once (the dropped
// aside) within the sequence length, the same packs every time: best-fit
// in no more packs than first-fit; concatenation in exactly the packs the
// tokens need, padding only its last.
func TestPackShardProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for trial := range 200 {
		seqLen := uint32(16 + rng.IntN(2048))
		lengths := make([]uint32, rng.IntN(700))
		var total uint64
		for i := range lengths {
			switch rng.IntN(4) {
			case 0:
				lengths[i] = rng.Uint32N(3 * seqLen)
			case 1:
				lengths[i] = 0
			default:
				lengths[i] = 1 + rng.Uint32N(seqLen/4+1)
			}
			total += uint64(lengths[i])
		}
		window := 1 + rng.IntN(300)
		counts := map[PackMethod]int{}
		for _, m := range []PackMethod{BestFit, FirstFit, Concatenate} {
			for _, ov := range []Overlong{CutOverlong, DropOverlong} {
				p := Packing{SeqLength: seqLen, Method: m, Window: window, Overlong: ov}
				packs, st := PackShard(lengths, p)
				checkPacks(t, lengths, seqLen, packs, st)
				if ov == CutOverlong || m == Concatenate {
					if st.Tokens != total || st.DroppedTokens != 0 {
						t.Fatalf("trial %d %s: %d of %d tokens", trial, p, st.Tokens, total)
					}
				}
				if m == Concatenate {
					if need := int((total + uint64(seqLen) - 1) / uint64(seqLen)); len(packs) != need {
						t.Fatalf("trial %d %s: %d packs, the tokens need %d", trial, p, len(packs), need)
					}
					if st.Padding != uint64(len(packs))*uint64(seqLen)-total {
						t.Fatalf("trial %d %s: padding %d", trial, p, st.Padding)
					}
				}
				if ov == DropOverlong {
					counts[m] = len(packs)
				}
				again, _ := PackShard(lengths, p)
				if fmt.Sprint(again) != fmt.Sprint(packs) {
					t.Fatalf("trial %d %s: two packings differ", trial, p)
				}
			}
		}
		if counts[BestFit] > counts[FirstFit] {
			t.Fatalf("trial %d: best-fit %d packs, first-fit %d", trial, counts[BestFit], counts[FirstFit])
		}
	}
}

// Worked examples of the three methods on one shard, a window of 3.
func TestPackShardExample(t *testing.T) {
	lengths := []uint32{3, 5, 2, 9, 0, 4}
	for _, tc := range []struct {
		m    PackMethod
		want string
	}{
		// Window 0's emptiest pack, [2], is packed again with window 1.
		{BestFit, "[[{0 0 3} {1 0 5}] [{3 0 8}] [{2 0 2} {3 8 1} {5 0 4}]]"},
		{FirstFit, "[[{0 0 3} {1 0 5}] [{2 0 2} {3 8 1} {5 0 4}] [{3 0 8}]]"},
		{Concatenate, "[[{0 0 3} {1 0 5}] [{2 0 2} {3 0 6}] [{3 6 3} {5 0 4}]]"},
	} {
		packs, st := PackShard(lengths, Packing{SeqLength: 8, Method: tc.m, Window: 3})
		if got := fmt.Sprint(packs); got != tc.want || st.EmptyDocs != 1 {
			t.Errorf("%s: %s (%+v), want %s", tc.m, got, st, tc.want)
		}
	}
}

// Packing units: each shard alone without AcrossShards; with it the
// fewest consecutive shards holding two windows of documents, the stream's
// short rest joined to the unit before it, and never more than
// MaxUnitShards shards.
func TestUnitsGroupShardsUpToAWindow(t *testing.T) {
	many := make([]int64, 600) // 600 shards of 1 document
	for i := range many {
		many[i] = 1
	}
	for _, tc := range []struct {
		name string
		p    Packing
		docs []int64
		want []int
	}{
		{"per shard", Packing{Method: BestFit, Window: 100}, []int64{10, 20, 30}, []int{1, 1, 1}},
		{"shards of two windows or more", Packing{Method: BestFit, Window: 100, AcrossShards: true}, []int64{200, 250, 1000}, []int{1, 1, 1}},
		{"250 a shard, windows of 1024", Packing{Method: BestFit, Window: 1024, AcrossShards: true}, slices.Repeat([]int64{250}, 20), []int{9, 11}},
		{"a short rest joins the unit before", Packing{Method: FirstFit, Window: 100, AcrossShards: true}, []int64{120, 120, 120, 120, 30}, []int{2, 3}},
		{"a stream short of a window", Packing{Method: BestFit, Window: 100, AcrossShards: true}, []int64{10, 0, 20}, []int{3}},
		{"empty shards inside a unit", Packing{Method: BestFit, Window: 50, AcrossShards: true}, []int64{0, 50, 0, 0, 50, 100, 0}, []int{5, 2}},
		{"concatenate: units of 2048 documents", Packing{Method: Concatenate, AcrossShards: true}, []int64{1024, 1024, 1024, 1023, 4000}, []int{2, 3}},
		{"at most MaxUnitShards", Packing{Method: BestFit, Window: 1000, AcrossShards: true}, many, []int{256, 256, 88}},
		{"no shard", Packing{Method: BestFit, Window: 10, AcrossShards: true}, nil, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.p.Units(tc.docs)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("units %v, want %v", got, tc.want)
			}
			n := 0
			for _, k := range got {
				n += k
			}
			if n != len(tc.docs) {
				t.Fatalf("units of %d shards, the stream has %d", n, len(tc.docs))
			}
		})
	}
	if a, b := (Packing{Method: BestFit, Window: 8}).String(), (Packing{Method: BestFit, Window: 8, AcrossShards: true}).String(); a == b || !strings.HasSuffix(b, " across=shards") {
		t.Fatalf("the packings %q and %q", a, b)
	}
}
