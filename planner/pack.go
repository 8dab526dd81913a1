package planner

import (
	"cmp"
	"fmt"
	"slices"
)

// Packing documents into sequences (issue 54; docs/planner.md, "Sample
// lengths"): the packer of one window of documents, the building block of
// packed plans. It is pure arithmetic on the documents' lengths, so a
// sidecar and the planner compute the same packs from the same lengths.

// Piece is part of a document in a pack: its tokens [Offset, Offset+Len),
// of document Doc (its index in the window).
type Piece struct {
	Doc         int
	Offset, Len uint32
}

// Overlong says what becomes of a document longer than a sequence.
type Overlong int

const (
	// CutOverlong cuts it into whole sequences and a rest, packed as a
	// document of its own: every token is delivered.
	CutOverlong Overlong = iota
	// DropOverlong leaves it out, counted in PackStats.DroppedTokens.
	DropOverlong
)

// PackStats counts what a window's packing did.
type PackStats struct {
	// Tokens delivered, and the room left in the packs (padding).
	Tokens, Padding uint64
	// DroppedDocs and DroppedTokens: documents longer than a sequence,
	// left out under DropOverlong.
	DroppedDocs   int
	DroppedTokens uint64
	// CutDocs are documents split across packs because they did not fit
	// whole (overlong ones under CutOverlong, and those cut to fill a
	// fixed number of packs).
	CutDocs int
	// EmptyDocs have no token, so no pack holds them.
	EmptyDocs int
}

// PackWindow packs a window's documents, given by their lengths in draw
// order, into sequences of at most seqLen tokens, best-fit decreasing: the
// longest document first, each into the pack with the least room that
// holds it (the earliest such pack on a tie), a new pack when none does.
// An empty document is in no pack. With bins > 0 the window has exactly
// bins packs: a document no pack holds whole is cut into the packs with the
// most room, so every token is delivered while bins·seqLen holds them all
// (the caller's bound; tokens past it are dropped and counted). Pieces of
// a pack are in draw order.
func PackWindow(lengths []uint32, seqLen uint32, bins int, overlong Overlong) ([][]Piece, PackStats) {
	var st PackStats
	if seqLen == 0 {
		return nil, st
	}
	type item struct {
		doc         int
		offset, len uint32
	}
	items := make([]item, 0, len(lengths))
	cut := map[int]bool{}
	for d, n := range lengths {
		switch {
		case n == 0:
		case n <= seqLen:
			items = append(items, item{d, 0, n})
		case overlong == DropOverlong:
			st.DroppedDocs++
			st.DroppedTokens += uint64(n)
		default:
			cut[d] = true
			for off := uint32(0); off < n; off += seqLen {
				items = append(items, item{d, off, min(seqLen, n-off)})
			}
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(b.len, a.len) })
	var packs [][]Piece
	var room []uint32 // room[i]: what pack i can still hold
	// open lists the packs by room, then by index: the best fit of an
	// item is the first with room for it.
	var open []int
	byRoom := func(a, b int) int {
		if c := cmp.Compare(room[a], room[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	}
	place := func(p int, it item) {
		k, _ := slices.BinarySearchFunc(open, p, byRoom)
		open = slices.Delete(open, k, k+1)
		packs[p] = append(packs[p], Piece{it.doc, it.offset, it.len})
		room[p] -= it.len
		st.Tokens += uint64(it.len)
		k, _ = slices.BinarySearchFunc(open, p, byRoom)
		open = slices.Insert(open, k, p)
	}
	newPack := func() int {
		packs = append(packs, nil)
		room = append(room, seqLen)
		p := len(packs) - 1
		k, _ := slices.BinarySearchFunc(open, p, byRoom)
		open = slices.Insert(open, k, p)
		return p
	}
	for range bins {
		newPack()
	}
	var left []item // what no pack holds whole, with bins fixed
	for _, it := range items {
		k := firstHolding(open, func(p int) bool { return room[p] >= it.len })
		switch {
		case k < len(open):
			place(open[k], it)
		case bins == 0:
			place(newPack(), it)
		default:
			left = append(left, it)
		}
	}
	// Cut what is left into the packs with the most room, in draw order.
	slices.SortStableFunc(left, func(a, b item) int { return cmp.Compare(a.doc, b.doc) })
	for _, it := range left {
		cut[it.doc] = true
		for it.len > 0 && len(open) > 0 && room[open[len(open)-1]] > 0 {
			p := open[len(open)-1]
			n := min(room[p], it.len)
			place(p, item{it.doc, it.offset, n})
			it.offset += n
			it.len -= n
		}
		if it.len > 0 {
			st.DroppedTokens += uint64(it.len)
		}
	}
	st.CutDocs = len(cut)
	for i := range packs {
		slices.SortFunc(packs[i], func(a, b Piece) int {
			return cmp.Or(cmp.Compare(a.Doc, b.Doc), cmp.Compare(a.Offset, b.Offset))
		})
		st.Padding += uint64(room[i])
	}
	return packs, st
}

// firstHolding returns the first index of open whose pack f holds: open
// is in order of room, so f is false and then true.
func firstHolding(open []int, f func(int) bool) int {
	lo, hi := 0, len(open)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(open[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// PackMethod is how documents are packed into sequences (spec.packing.method).
type PackMethod string

const (
	// BestFit packs each window best-fit decreasing (PackWindow): the
	// least padding of the three.
	BestFit PackMethod = "bestFit"
	// FirstFit packs each window's documents, in order, each into the
	// first pack of the window with room for it.
	FirstFit PackMethod = "firstFit"
	// Concatenate concatenates the shard's documents in order and cuts
	// them every SeqLength tokens: no padding but the shard's last pack,
	// and a document may be cut across sequences.
	Concatenate PackMethod = "concatenate"
)

// Packing says how a stream's documents become packs: the plan's samples
// of a packed dataset (docs/planner.md, "Packing").
type Packing struct {
	SeqLength uint32
	Method    PackMethod
	// Window is how many consecutive documents of a shard are packed
	// together (BestFit, FirstFit); a window's packs are closed at its end.
	Window   int
	Overlong Overlong
	// AcrossShards packs consecutive shards of a stream together, in
	// packing units (Units): a window is no longer capped by a shard's
	// documents, and only a unit's last pack closes half-empty.
	AcrossShards bool
}

// MaxUnitShards bounds the shards of a packing unit: a sidecar fetches and
// decodes a unit's shards together to serve any of its packs.
const MaxUnitShards = 256

// unitDocs is the documents a packing unit reaches: two windows' (or for
// Concatenate, which has none, two default windows'). A unit closes its
// last pack half-empty on average, as a window of best-fit decreasing
// does: two windows a unit make half as many such packs as windows.
func (p Packing) unitDocs() int64 {
	if p.Method == Concatenate || p.Window < 1 {
		return 2 * 1024
	}
	return 2 * int64(p.Window)
}

// Units groups a stream's shards, given by their documents, into packing
// units: without AcrossShards each shard is one; with it each unit is the
// fewest consecutive shards that hold two windows of documents, at most
// MaxUnitShards (the stream's rest, short of two windows, joins the unit
// before it where that stays within the bound). It returns
// each unit's shards, in order. Units depend only on the documents a
// shard and p, so the index writers, the control plane and a sidecar find
// the same ones.
func (p Packing) Units(docs []int64) []int {
	units := make([]int, 0, len(docs))
	if !p.AcrossShards {
		for range docs {
			units = append(units, 1)
		}
		return units
	}
	want := p.unitDocs()
	for h := 0; h < len(docs); {
		n, sum := 0, int64(0)
		for h+n < len(docs) && n < MaxUnitShards && sum < want {
			sum += docs[h+n]
			n++
		}
		if k := len(units) - 1; sum < want && k >= 0 && units[k]+n <= MaxUnitShards {
			units[k] += n
		} else {
			units = append(units, n)
		}
		h += n
	}
	return units
}

// MaxPackWindow bounds a packing window: the packer's work is
// O(window · log window) a document.
const MaxPackWindow = 1 << 16

// String is the packing as a plan input and in messages.
func (p Packing) String() string {
	o := "cut"
	if p.Overlong == DropOverlong {
		o = "drop"
	}
	across := ""
	if p.AcrossShards {
		across = " across=shards"
	}
	if p.Method == Concatenate {
		return fmt.Sprintf("%s length=%d%s", p.Method, p.SeqLength, across)
	}
	return fmt.Sprintf("%s length=%d window=%d overlong=%s%s", p.Method, p.SeqLength, p.Window, o, across)
}

// PackShard packs one shard's documents, given by their lengths in the
// shard's order, as p says. Pieces name documents by their index in
// lengths. The packs, and so their number, depend only on the lengths and
// p: shardfeed index counts them once, and a sidecar packing the shard's
// decoded documents finds the same packs.
func PackShard(lengths []uint32, p Packing) ([][]Piece, PackStats) {
	if p.Method == Concatenate {
		return concatenate(lengths, p.SeqLength)
	}
	var packs [][]Piece
	var st PackStats
	var carried []int // the documents of the last window's emptiest pack
	ends := windowEnds(len(lengths), p)
	for k, end := range ends {
		start := 0
		if k > 0 {
			start = ends[k-1]
		}
		docs := make([]int, 0, len(carried)+end-start)
		docs = append(docs, carried...)
		for d := start; d < end; d++ {
			docs = append(docs, d)
		}
		ls := make([]uint32, len(docs))
		for i, d := range docs {
			ls[i] = lengths[d]
		}
		var got [][]Piece
		var s PackStats
		if p.Method == FirstFit {
			got, s = firstFitWindow(ls, p.SeqLength, p.Overlong)
		} else {
			got, s = PackWindow(ls, p.SeqLength, 0, p.Overlong)
		}
		carried = nil
		if end < len(lengths) {
			// The window's emptiest pack (the latest on a tie) is not
			// closed: its documents are packed again with the next
			// window's, so that windows cost no half-empty pack each. A
			// pack holding part of a cut document is closed.
			if k := emptiest(got, ls, p.SeqLength); k >= 0 {
				for _, pc := range got[k] {
					carried = append(carried, docs[pc.Doc])
					s.Tokens -= uint64(pc.Len)
				}
				s.Padding -= uint64(room(got[k], p.SeqLength))
				got = slices.Delete(got, k, k+1)
			}
		}
		for _, pack := range got {
			for k := range pack {
				pack[k].Doc = docs[pack[k].Doc]
			}
		}
		packs = append(packs, got...)
		st.Tokens += s.Tokens
		st.Padding += s.Padding
		st.DroppedDocs += s.DroppedDocs
		st.DroppedTokens += s.DroppedTokens
		st.CutDocs += s.CutDocs
	}
	for _, n := range lengths {
		if n == 0 {
			st.EmptyDocs++
		}
	}
	return packs, st
}

// windowEnds returns where each window of n documents ends: every Window
// documents; packing across shards, a unit's documents in the most
// windows of at least Window (each then of Window to 2·Window-1, evenly),
// so that no short window closes a unit's packs half-empty.
func windowEnds(n int, p Packing) []int {
	w := max(p.Window, 1)
	var ends []int
	if !p.AcrossShards {
		for end := w; end-w < n; end += w {
			ends = append(ends, min(end, n))
		}
		return ends
	}
	k := max(n/w, 1)
	for i := 1; i <= k; i++ {
		ends = append(ends, int(int64(i)*int64(n)/int64(k)))
	}
	return ends
}

// room is what a pack can still hold.
func room(pack []Piece, seqLen uint32) uint32 {
	used := uint32(0)
	for _, pc := range pack {
		used += pc.Len
	}
	return seqLen - used
}

// emptiest returns the pack with the most room, the latest on a tie, if
// it has room and holds only whole documents (of lengths); else -1.
func emptiest(packs [][]Piece, lengths []uint32, seqLen uint32) int {
	best, most := -1, uint32(0)
	for k, pack := range packs {
		if r := room(pack, seqLen); r > 0 && r >= most {
			best, most = k, r
		}
	}
	if best < 0 {
		return -1
	}
	for _, pc := range packs[best] {
		if pc.Offset != 0 || pc.Len != lengths[pc.Doc] {
			return -1
		}
	}
	return best
}

// concatenate cuts the documents, end to end, every seqLen tokens.
func concatenate(lengths []uint32, seqLen uint32) ([][]Piece, PackStats) {
	var st PackStats
	var packs [][]Piece
	var room uint32
	for d, n := range lengths {
		var off uint32
		pieces := 0
		for off < n {
			if room == 0 {
				packs = append(packs, nil)
				room = seqLen
			}
			k := min(room, n-off)
			packs[len(packs)-1] = append(packs[len(packs)-1], Piece{d, off, k})
			off += k
			room -= k
			pieces++
		}
		st.Tokens += uint64(n)
		if n == 0 {
			st.EmptyDocs++
		}
		if pieces > 1 {
			st.CutDocs++
		}
	}
	st.Padding = uint64(room)
	return packs, st
}

// firstFitWindow packs a window's documents in order, each into the first
// pack (in the order they were opened) with room for it. An overlong
// document is cut into whole sequences and a rest, or dropped.
func firstFitWindow(lengths []uint32, seqLen uint32, overlong Overlong) ([][]Piece, PackStats) {
	var st PackStats
	var packs [][]Piece
	var room []uint32
	place := func(d int, off, n uint32) {
		i := 0
		for i < len(room) && room[i] < n {
			i++
		}
		if i == len(room) {
			packs = append(packs, nil)
			room = append(room, seqLen)
		}
		packs[i] = append(packs[i], Piece{d, off, n})
		room[i] -= n
		st.Tokens += uint64(n)
	}
	for d, n := range lengths {
		switch {
		case n == 0:
		case n <= seqLen:
			place(d, 0, n)
		case overlong == DropOverlong:
			st.DroppedDocs++
			st.DroppedTokens += uint64(n)
		default:
			st.CutDocs++
			for off := uint32(0); off < n; off += seqLen {
				place(d, off, min(seqLen, n-off))
			}
		}
	}
	for _, r := range room {
		st.Padding += uint64(r)
	}
	return packs, st
}
