package planner

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// randomOrder cuts the streams together into the splits (design §3 steps
// 1–4): whole shards in a seeded order, the pieces of each split shuffled,
// and every block of positions permuted; batches take the same positions
// of every split.
type randomOrder struct{ steady }

// randomKind selects the random order where no other order does.
type randomKind struct{}

func (randomKind) selects(*Params) bool        { return true }
func (randomKind) cut(pl *Plan) (order, error) { return &randomOrder{steady{pl}}, nil }

// piece is the part of one shard's unit (all copies of the shard in the
// epoch, adjacent) that falls in one split.
type piece struct {
	shard  int32 // global shard index
	stream int32
	from   int64 // offset of the piece in its unit
}

// randomEpoch is one epoch of a randomOrder: for every split, its pieces in
// order, from which the sample at any position is computed in O(log
// pieces).
type randomEpoch struct {
	steady
	epoch int64
	// pieces of split j are pieces[pieceOff[j]:pieceOff[j+1]]; pieceEnd is
	// each piece's end position in its split (exclusive).
	pieces   []piece
	pieceEnd []int64
	pieceOff []int64
	long     permutation // split j is one sample longer when long.Apply(j) < m
	blockKey uint64
}

func (o *randomOrder) epoch(e int64) (epochOrder, error) {
	return o.epochOf(e, 0, o.pl.params.NumSplits)
}

// epochOf builds epoch e with the pieces of splits [lo, hi) alone: every
// shard is still walked in the epoch's order (the splits before lo end
// where their samples do), but only those splits' pieces are kept.
func (o *randomOrder) epochOf(e int64, lo, hi int) (epochOrder, error) {
	pl := o.pl
	p := &pl.params
	seed := p.Seed
	ep := &randomEpoch{
		steady:   steady{pl},
		epoch:    e,
		pieceOff: make([]int64, p.NumSplits+1),
		long:     newPermutation(uint64(p.NumSplits), derive(derive(derive(seed, purposeLongSplits), uint64(e)), 0)),
		blockKey: derive(derive(seed, purposeBlock), uint64(e)),
	}

	// Step 1: full passes, and whole shards in a seeded per-epoch order for
	// the rest, the last one cut.
	full := make([]int64, len(p.Streams))
	extra := make([][]int64, len(p.Streams))
	for s := range p.Streams {
		size := pl.streamSamples(s)
		full[s] = pl.counts[s] / size
		rem := pl.counts[s] % size
		if rem == 0 {
			continue
		}
		x := &p.Streams[s].Index
		extra[s] = make([]int64, x.Len())
		order := newPermutation(uint64(x.Len()), derive(derive(derive(seed, purposeShardPick), uint64(e)), uint64(s)))
		for i := uint64(0); rem > 0; i++ {
			h := order.Apply(i)
			take := min(rem, x.shardSamples(int64(h)))
			extra[s][h] = take
			rem -= take
		}
	}

	// Steps 2–3: units (all copies of a shard, adjacent) in seed-only order
	// with shuffle, in (stream, shard) order without; cut into S splits.
	numShards := pl.shardBase[len(p.Streams)]
	unitOrder := newPermutation(uint64(numShards), derive(seed, purposeUnitOrder))
	if lo == 0 && hi == p.NumSplits {
		ep.pieces = make([]piece, 0, numShards+int64(p.NumSplits))
		ep.pieceEnd = make([]int64, 0, numShards+int64(p.NumSplits))
	}
	split, pos := 0, int64(0)
	splitLen := ep.orderedLen(0)
	stream := 0
	for i := int64(0); i < numShards; i++ {
		g := i
		if p.Shuffle {
			g = int64(unitOrder.Apply(uint64(i)))
			stream = sort.Search(len(p.Streams), func(s int) bool { return pl.shardBase[s+1] > g })
		} else {
			for pl.shardBase[stream+1] <= g {
				stream++
			}
		}
		h := g - pl.shardBase[stream]
		n := p.Streams[stream].Index.shardSamples(h)
		length := full[stream] * n
		if extra[stream] != nil {
			length += extra[stream][h]
		}
		for from := int64(0); from < length; {
			take := min(length-from, splitLen-pos)
			if split >= lo && split < hi {
				ep.pieces = append(ep.pieces, piece{shard: int32(g), stream: int32(stream), from: from})
				ep.pieceEnd = append(ep.pieceEnd, pos+take)
			}
			pos += take
			from += take
			if pos == splitLen {
				split++
				ep.pieceOff[split] = int64(len(ep.pieces))
				pos = 0
				if split < p.NumSplits {
					splitLen = ep.orderedLen(split)
				}
			}
		}
		if split >= hi && hi < p.NumSplits {
			break // the splits asked for are cut
		}
	}
	for j := split + 1; j <= p.NumSplits && hi < p.NumSplits; j++ {
		ep.pieceOff[j] = int64(len(ep.pieces)) // the splits after hi: none kept
	}
	if hi == p.NumSplits && (split != p.NumSplits || pos != 0) {
		return nil, fmt.Errorf("planner: internal error: epoch %d cut into %d splits (+%d samples), want %d", e, split, pos, p.NumSplits)
	}

	// Step 4: the pieces of each split in a per-epoch order.
	if p.Shuffle {
		ep.shufflePieces()
	}
	return ep, nil
}

func (o *randomOrder) dropped() int64 {
	pl := o.pl
	dropped := pl.longSplits
	if pl.params.DropLast {
		dropped += int64(pl.params.NumSplits) * (pl.splitLen - pl.steps*pl.perSplit)
	}
	return dropped
}

func (o *randomOrder) padded() int64 {
	if o.pl.params.DropLast {
		return 0
	}
	return int64(o.pl.params.NumSplits) * o.pl.padRows()
}

// orderedLen returns the length of split j before the last position of
// a longer split is dropped: L+1 for the T mod S longer splits, L otherwise.
func (ep *randomEpoch) orderedLen(j int) int64 {
	if int64(ep.long.Apply(uint64(j))) < ep.pl.longSplits {
		return ep.pl.splitLen + 1
	}
	return ep.pl.splitLen
}

func (ep *randomEpoch) shufflePieces() {
	p := &ep.pl.params
	pieceKey := derive(derive(p.Seed, purposePieceOrder), uint64(ep.epoch))
	var tmp []piece
	var lens []int64
	for j := range p.NumSplits {
		lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
		n := hi - lo
		if n < 2 {
			continue
		}
		tmp = append(tmp[:0], ep.pieces[lo:hi]...)
		lens = lens[:0]
		prev := int64(0)
		for _, end := range ep.pieceEnd[lo:hi] {
			lens = append(lens, end-prev)
			prev = end
		}
		order := newPermutation(uint64(n), derive(pieceKey, uint64(j)))
		pos := int64(0)
		for q := range n {
			old := int64(order.Apply(uint64(q)))
			ep.pieces[lo+q] = tmp[old]
			pos += lens[old]
			ep.pieceEnd[lo+q] = pos
		}
	}
}

func (ep *randomEpoch) at(j int, t int64) Sample {
	pad := false
	if t >= ep.pl.splitLen {
		t -= ep.pl.splitLen
		pad = true
	}
	s := ep.sampleAtInner(j, ep.inner(j, t))
	s.Pad = pad
	return s
}

func (ep *randomEpoch) batch(dst []Sample, k int64, first, n int) []Sample {
	return positionMajor(dst, ep.at, k, ep.pl.perSplit, first, n)
}

// inner maps position t of split j to its place in the split's piece
// sequence: the keyed permutation of t's block (design §3 step 4), of its
// samples or, with a run length r > 1, of its runs of r samples (the
// block's last n mod r samples stay last, in order).
func (ep *randomEpoch) inner(j int, t int64) int64 {
	p := &ep.pl.params
	if !p.Shuffle {
		return t
	}
	b := p.BlockSize
	base := t / b * b
	n := b
	if base+b > ep.pl.splitLen { // the last block: its length depends on the split
		n = min(b, ep.orderedLen(j)-base)
	}
	key := derive(derive(ep.blockKey, uint64(j)), uint64(base/b))
	u := t - base
	if r := p.RunLength; r > 1 {
		runs := n / r
		if u >= runs*r {
			return t
		}
		return base + int64(newPermutation(uint64(runs), key).Apply(uint64(u/r)))*r + u%r
	}
	return base + int64(newPermutation(uint64(n), key).Apply(uint64(u)))
}

// sampleAtInner maps a position of split j's piece sequence to its sample.
func (ep *randomEpoch) sampleAtInner(j int, inner int64) Sample {
	lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
	ends := ep.pieceEnd[lo:hi]
	i, n := 0, len(ends)
	for i < n { // first piece whose end > inner
		m := int(uint(i+n) >> 1)
		if ends[m] > inner {
			n = m
		} else {
			i = m + 1
		}
	}
	start := int64(0)
	if i > 0 {
		start = ends[i-1]
	}
	pc := ep.pieces[lo+int64(i)]
	pl := ep.pl
	s := int(pc.stream)
	h := int64(pc.shard) - pl.shardBase[s]
	first, size := pl.first(s, h)
	x := pc.from + inner - start
	return Sample{ID: pl.streamOffset[s] + first + x%size, Stream: s, Shard: int(h)}
}

// stepsReading returns the steps that may read the inner positions [lo, hi)
// of split j, clamped to the epoch; ok is false when no delivered position
// does. Pad rows reread the split's first positions in the last step.
func (ep *randomEpoch) stepsReading(j int, lo, hi int64) (first, last int64, ok bool) {
	pl := ep.pl
	g := pl.grain()
	lo = lo / g * g
	hi = min(ceilDiv(hi, g)*g, ep.orderedLen(j))
	hi = min(hi, pl.splitLen) // position L of a longer split is dropped
	if lo >= hi {
		return 0, 0, false
	}
	first = lo / pl.perSplit
	if first >= pl.steps {
		return 0, 0, false
	}
	last = min((hi-1)/pl.perSplit, pl.steps-1)
	if pad := pl.padRows(); pad > 0 && lo < pad {
		last = pl.steps - 1
	}
	return first, last, true
}

// needs lists the shards splits [first, first+n) read, each once, in
// the order they are first needed, each from the first step that may read
// it to the last.
func (ep *randomEpoch) needs(first, n int, sized bool) []ShardNeed {
	type need struct {
		ShardNeed
		split int
		order int64
		g     int32
	}
	var all []need
	for j := first; j < first+n; j++ {
		lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
		start := int64(0)
		for i := lo; i < hi; i++ {
			pc := ep.pieces[i]
			end := ep.pieceEnd[i]
			f, l, ok := ep.stepsReading(j, start, end)
			start = end
			if !ok {
				continue
			}
			h := int64(pc.shard) - ep.pl.shardBase[pc.stream]
			var bytes int64
			if sized {
				bytes = ep.pl.shardBytes(int(pc.stream), h)
			}
			all = append(all, need{
				ShardNeed: ShardNeed{Stream: int(pc.stream), Shard: int(h), Bytes: bytes, FirstStep: f, LastStep: l},
				split:     j, order: i, g: pc.shard,
			})
		}
	}
	slices.SortFunc(all, func(a, b need) int {
		return cmp.Or(cmp.Compare(a.FirstStep, b.FirstStep), cmp.Compare(a.split, b.split), cmp.Compare(a.order, b.order))
	})
	out := make([]ShardNeed, 0, len(all))
	at := make(map[int32]int, len(all))
	for _, nd := range all {
		if i, dup := at[nd.g]; dup {
			out[i].LastStep = max(out[i].LastStep, nd.LastStep)
			continue
		}
		at[nd.g] = len(out)
		out = append(out, nd.ShardNeed)
	}
	if sized {
		ep.pl.addShared(out)
	}
	return out
}

// splitPeakBytes bounds the bytes of the distinct shards split j reads in any
// one step. A step reads the pieces its positions' blocks overlap; a window
// that overlaps two pieces holds a piece boundary x, and of the steps whose
// window touches x's block the first and the last read a superset of what
// the others read, so evaluating those two per boundary finds the maximum.
func (ep *randomEpoch) splitPeakBytes(j int) int64 {
	pl := ep.pl
	lo, hi := ep.pieceOff[j], ep.pieceOff[j+1]
	if lo == hi {
		return 0
	}
	ends := ep.pieceEnd[lo:hi]
	prefix := make([]int64, len(ends)+1) // bytes of pieces [0, i)
	var peak int64
	for i := range ends {
		pc := ep.pieces[lo+int64(i)]
		b := pl.shardBytes(int(pc.stream), int64(pc.shard)-pl.shardBase[pc.stream])
		prefix[i+1] = prefix[i] + b
		peak = max(peak, b)
	}
	// bytesOf sums the pieces overlapping inner positions [a, c).
	bytesOf := func(a, c int64) int64 {
		if a >= c {
			return 0
		}
		i1, _ := slices.BinarySearch(ends, a+1) // first piece with end > a
		i2, _ := slices.BinarySearch(ends, c)   // first piece with end >= c
		i2 = min(i2, len(ends)-1)
		return prefix[i2+1] - prefix[i1]
	}
	g := pl.grain()
	// Positions past L are never delivered, but a delivered position maps
	// anywhere in its block, up to the split's full length.
	length, innerLen := min(ep.orderedLen(j), pl.splitLen), ep.orderedLen(j)
	window := func(k int64) int64 {
		a := k * pl.perSplit / g * g
		c := min(ceilDiv(min((k+1)*pl.perSplit, length), g)*g, innerLen)
		w := bytesOf(a, c)
		if pad := pl.padRows(); pad > 0 && k == pl.steps-1 {
			w += bytesOf(0, min(ceilDiv(pad, g)*g, innerLen))
		}
		return w
	}
	for _, x := range ends[:len(ends)-1] { // x: where the next piece starts
		blockLo := x / g * g
		blockHi := min(blockLo+g, length)
		if blockLo >= length {
			break
		}
		for _, k := range [2]int64{blockLo / pl.perSplit, (blockHi - 1) / pl.perSplit} {
			if k < pl.steps {
				peak = max(peak, window(k))
			}
		}
	}
	if pl.padRows() > 0 {
		peak = max(peak, window(pl.steps-1))
	}
	return peak
}

// cacheBytes adds the splits' peaks, at most every shard they read.
func (ep *randomEpoch) cacheBytes(first, n int) int64 {
	var need, all int64
	for j := first; j < first+n; j++ {
		need += ep.splitPeakBytes(j)
	}
	// Never more than every shard the splits read; the shared parts of
	// their objects (footers) stay with their shards.
	for _, nd := range ep.needs(first, n, true) {
		all += nd.Bytes
		need += nd.Bytes - ep.pl.shardBytes(nd.Stream, int64(nd.Shard))
	}
	return min(need, all)
}
