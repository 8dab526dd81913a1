package main

import (
	"context"
	"fmt"
	"io"

	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
)

// packDocs finds the documents of a packed dataset's packs, for plan --ids:
// it packs a shard's documents from their lengths beside the index, as
// shardfeed index counted them and a sidecar packs them, once per shard.
type packDocs struct {
	ctx     context.Context
	opened  []*streams.Stream
	offsets []int64   // each stream's first sample (pack) id
	first   [][]int64 // each shard's first pack in its stream
	docBase [][]int64 // each shard's first document id
	lengths []*sidefile.LengthsIndex
	packs   map[[2]int][][]int64
	units   [][]int // each stream's packing units (sidefile.PacksIndex.Units)
}

func newPackDocs(ctx context.Context, opened []*streams.Stream) *packDocs {
	d := &packDocs{ctx: ctx, opened: opened, offsets: make([]int64, len(opened)), first: make([][]int64, len(opened)),
		docBase: make([][]int64, len(opened)), lengths: make([]*sidefile.LengthsIndex, len(opened)), packs: map[[2]int][][]int64{}}
	var packs, docs int64
	for s, st := range opened {
		d.units = append(d.units, st.Packs.Index.Units())
		d.offsets[s] = packs
		var inStream int64
		for _, sh := range st.Packs.Index.Shards {
			d.first[s] = append(d.first[s], inStream)
			d.docBase[s] = append(d.docBase[s], docs)
			inStream += sh.Packs
			docs += sh.Docs
		}
		packs += inStream
	}
	return d
}

// of returns the global ids of the documents of sample smp's pack, one per
// piece (a document cut across packs is in each).
func (d *packDocs) of(smp planner.Sample) ([]int64, error) {
	key := [2]int{smp.Stream, smp.Shard}
	packs, ok := d.packs[key]
	if !ok {
		var err error
		if packs, err = d.shard(smp.Stream, smp.Shard); err != nil {
			return nil, err
		}
		d.packs[key] = packs
	}
	at := smp.ID - d.offsets[smp.Stream] - d.first[smp.Stream][smp.Shard]
	if at < 0 || at >= int64(len(packs)) {
		return nil, fmt.Errorf("stream %q shard %d: pack %d of %d", d.opened[smp.Stream].Spec.Name, smp.Shard, at, len(packs))
	}
	return packs[at], nil
}

// shard packs shard h of stream s from the lengths beside its index.
func (d *packDocs) shard(s, h int) ([][]int64, error) {
	st := d.opened[s]
	if d.lengths[s] == nil {
		docs := make([]int64, len(st.Packs.Index.Shards))
		for i, sh := range st.Packs.Index.Shards {
			docs[i] = sh.Docs
		}
		x, err := sidefile.ReadLengths(d.ctx, st.IndexStore, st.Packs.Column, sidefile.Elements, st.Spec.Filter, planspec.TokenizeKey(st.Tokenize), st.Layout.Index.ContentHash(), docs, 0)
		if err != nil {
			return nil, fmt.Errorf("stream %q: --ids shows each pack's documents from their lengths: %w", st.Spec.Name, err)
		}
		d.lengths[s] = x
	}
	x := d.lengths[s]
	var n []uint32 // the documents of h's packing unit
	for j := h; j < h+max(d.units[s][h], 1); j++ {
		ls, err := d.shardLengths(st, x, j)
		if err != nil {
			return nil, err
		}
		n = append(n, ls...)
	}
	packs, _ := planner.PackShard(n, st.Packs.Packing)
	if int64(len(packs)) != st.Packs.Index.Shards[h].Packs {
		return nil, fmt.Errorf("stream %q shard %d: its lengths pack into %d sequences, the packs index counted %d: re-run shardfeed index --lengths --pack-length",
			st.Spec.Name, h, len(packs), st.Packs.Index.Shards[h].Packs)
	}
	out := make([][]int64, len(packs))
	for k, pack := range packs {
		for _, pc := range pack {
			out[k] = append(out[k], d.docBase[s][h]+int64(pc.Doc))
		}
	}
	return out, nil
}

// ofBatch lists the documents of each pack of a batch: none unpacked (a
// nil packDocs).
func (d *packDocs) ofBatch(batch []planner.Sample) ([][]int64, error) {
	if d == nil {
		return nil, nil
	}
	out := make([][]int64, len(batch))
	for i, smp := range batch {
		var err error
		if out[i], err = d.of(smp); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shardLengths reads shard h's documents' lengths from beside its index.
func (d *packDocs) shardLengths(st *streams.Stream, x *sidefile.LengthsIndex, h int) ([]uint32, error) {
	sh := x.Shards[h]
	r, err := st.IndexStore.Get(d.ctx, x.ValuesKey, sh.Offset, sh.Length)
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(io.LimitReader(r, sh.Length+1))
	if err != nil {
		return nil, err
	}
	ls, err := x.ShardLengths(h, b)
	if err != nil {
		return nil, fmt.Errorf("stream %q shard %d: %w: re-run shardfeed index --lengths", st.Spec.Name, h, err)
	}
	n := make([]uint32, len(ls))
	for i, l := range ls {
		n[i] = l[0]
	}
	return n, nil
}
