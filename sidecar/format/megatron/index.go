package megatron

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// IndexObject implements format.Indexer for an .idx object: its header is
// checked against its size, its sections are read once each, in step, with
// every pointer checked against the lengths before it and the document
// index against the sequences, and the .bin beside it is read once to hash
// each shard's tokens. Memory does not grow with the dataset.
func (Format) IndexObject(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	if err := indexPair(ctx, st, o, f, opts); err != nil {
		return fmt.Errorf("%s%s: %w", st.URI(), o.Key, err)
	}
	return nil
}

func indexPair(ctx context.Context, st store.Store, o store.Object, f *indexfile.File, opts format.IndexOptions) error {
	unit := opts.Own[unitOption]
	if unit == "" {
		unit = indexfile.MegatronDocument
	}
	if unit != indexfile.MegatronDocument && unit != indexfile.MegatronSequence {
		return fmt.Errorf("a megatron sample is a %q or a %q, not %q", indexfile.MegatronDocument, indexfile.MegatronSequence, unit)
	}
	head, err := format.ReadRange(ctx, st, o.Key, 0, min(int64(HeaderSize), o.Size))
	if err != nil {
		return err
	}
	h, err := ParseHeader(head, o.Size)
	if err != nil {
		return err
	}
	m := &indexfile.Megatron{DType: h.DType, Unit: unit, Modes: h.Modes}
	if unit == indexfile.MegatronDocument && h.Modes {
		return errors.New("the .idx records a mode per sequence (a multimodal dataset), whose samples are sequences: index it with --unit sequence")
	}
	if f.Megatron == nil {
		f.Megatron = m
	} else if *f.Megatron != *m {
		return fmt.Errorf("its %s tokens (modes: %t) differ from the stream's first .idx's %s (modes: %t): one stream has one token type",
			h.DType, h.Modes, f.Megatron.DType, f.Megatron.Modes)
	}
	binKey := strings.TrimSuffix(o.Key, ".idx") + ".bin"
	bin, err := st.Stat(ctx, binKey)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no %s beside it: an indexed dataset is a .bin and its .idx", binKey)
		}
		return err
	}
	x := &indexer{ctx: ctx, st: st, h: h, idx: o.Key, bin: bin, opts: opts, f: f}
	defer x.close()
	return x.run(unit)
}

// indexer walks one .idx's sections in step and cuts its samples into
// shards of about opts.ShardBytes of tokens.
type indexer struct {
	ctx  context.Context
	st   store.Store
	h    Header
	idx  string
	bin  store.Object
	opts format.IndexOptions
	f    *indexfile.File

	closers                 []io.Closer
	lens, ptrs, docs, modes *section
	binBody                 io.Reader
	cum                     int64 // the bytes of the tokens read so far
	seq                     int64 // the sequences read so far
	part                    int
	startByte, startSeq     int64 // the current shard's
	startDoc                int64
	samples                 int64
	lenHash, extraHash      hash.Hash
}

func (x *indexer) open(name string, key string, off, n int64) (*section, error) {
	r, err := x.get(key, off, n)
	if err != nil {
		return nil, err
	}
	return newSection(r, name), nil
}

func (x *indexer) get(key string, off, n int64) (io.Reader, error) {
	if n == 0 {
		return strings.NewReader(""), nil
	}
	r, err := x.st.Get(x.ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	x.closers = append(x.closers, r)
	return io.LimitReader(r, n), nil
}

func (x *indexer) close() {
	for _, c := range x.closers {
		_ = c.Close()
	}
}

func (x *indexer) run(unit string) error {
	h := x.h
	var err error
	if x.lens, err = x.open("sequence lengths", x.idx, h.lengthsAt(), 4*h.Sequences); err != nil {
		return err
	}
	if x.ptrs, err = x.open("sequence pointers", x.idx, h.pointersAt(), 8*h.Sequences); err != nil {
		return err
	}
	if x.docs, err = x.open("document index", x.idx, h.docsAt(), 8*(h.Documents+1)); err != nil {
		return err
	}
	if h.Modes {
		if x.modes, err = x.open("sequence modes", x.idx, h.modesAt(), h.Sequences); err != nil {
			return err
		}
	}
	if x.binBody, err = x.get(x.bin.Key, 0, x.bin.Size); err != nil {
		return err
	}
	first, err := x.docs.int64()
	if err != nil {
		return err
	}
	if first != 0 {
		return fmt.Errorf("the document index starts at sequence %d, not 0: corrupt", first)
	}
	x.begin(first)
	if unit == indexfile.MegatronDocument {
		err = x.documents()
	} else {
		err = x.sequences()
	}
	if err != nil {
		return err
	}
	if x.cum != x.bin.Size {
		return fmt.Errorf("its sequences hold %d bytes of tokens, and %s is %d bytes: the pair does not match", x.cum, x.bin.Key, x.bin.Size)
	}
	return nil
}

// begin starts a shard at the current sequence (and, for documents, at the
// document whose first sequence is docStart).
func (x *indexer) begin(docStart int64) {
	x.startByte, x.startSeq, x.samples = x.cum, x.seq, 0
	x.lenHash = checksum.Sum{Algo: x.opts.Hash}.New()
	x.lens.w = x.lenHash
	x.extraHash = checksum.Sum{Algo: x.opts.Hash}.New()
	if x.modes != nil {
		x.modes.w = x.extraHash
	}
	if x.f.Megatron.Unit == indexfile.MegatronDocument {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(docStart)) //nolint:gosec // checked non-negative
		_, _ = x.extraHash.Write(b[:])
	}
}

// sequence reads the next sequence's length, pointer and mode.
func (x *indexer) sequence() error {
	n, err := x.lens.int32()
	if err != nil {
		return err
	}
	p, err := x.ptrs.int64()
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("sequence %d has %d tokens: corrupt", x.seq, n)
	}
	if p != x.cum {
		return fmt.Errorf("sequence %d starts at byte %d of the .bin; the lengths before it end at %d: corrupt", x.seq, p, x.cum)
	}
	if x.modes != nil {
		if _, err := x.modes.int8(); err != nil {
			return err
		}
	}
	x.cum += int64(n) * x.h.ItemSize
	if x.cum > x.bin.Size {
		return fmt.Errorf("sequence %d ends at byte %d, past the end of %s (%d bytes): the pair does not match", x.seq, x.cum, x.bin.Key, x.bin.Size)
	}
	x.seq++
	return nil
}

func (x *indexer) documents() error {
	for d := range x.h.Documents {
		end, err := x.docs.int64()
		if err != nil {
			return err
		}
		if end < x.seq || end > x.h.Sequences {
			return fmt.Errorf("document %d ends at sequence %d, outside [%d, %d]: the document index is corrupt", d, end, x.seq, x.h.Sequences)
		}
		for x.seq < end {
			if err := x.sequence(); err != nil {
				return err
			}
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(end)) //nolint:gosec // checked non-negative
		_, _ = x.extraHash.Write(b[:])
		x.samples++
		if x.cum-x.startByte >= x.opts.ShardBytes || d == x.h.Documents-1 {
			if err := x.emit(d + 1); err != nil {
				return err
			}
		}
	}
	if x.seq != x.h.Sequences {
		return fmt.Errorf("the documents end at sequence %d of %d: the document index is corrupt", x.seq, x.h.Sequences)
	}
	return nil
}

func (x *indexer) sequences() error {
	for x.seq < x.h.Sequences {
		if err := x.sequence(); err != nil {
			return err
		}
		x.samples++
		if x.cum-x.startByte >= x.opts.ShardBytes || x.seq == x.h.Sequences {
			if err := x.emit(0); err != nil {
				return err
			}
		}
	}
	// The document index is checked though sequences do not need it.
	prev := int64(0)
	for d := range x.h.Documents {
		end, err := x.docs.int64()
		if err != nil {
			return err
		}
		if end < prev || end > x.h.Sequences || (d == x.h.Documents-1 && end != x.h.Sequences) {
			return fmt.Errorf("document %d ends at sequence %d (the one before at %d, of %d): the document index is corrupt", d, end, prev, x.h.Sequences)
		}
		prev = end
	}
	return nil
}

// emit appends the current shard, hashing its tokens from the .bin, and
// begins the next at document nextDoc.
func (x *indexer) emit(nextDoc int64) error {
	length := x.cum - x.startByte
	bh := checksum.Sum{Algo: x.opts.Hash}.New()
	if _, err := io.CopyN(bh, x.binBody, length); err != nil {
		return fmt.Errorf("reading %s: %w", x.bin.Key, err)
	}
	seqs := x.seq - x.startSeq
	sum := func(h hash.Hash) string {
		return checksum.Sum{Algo: x.opts.Hash, Hex: fmt.Sprintf("%x", h.Sum(nil))}.String()
	}
	e := indexfile.Entry{
		Name: fmt.Sprintf("%s#%d", x.bin.Key, x.part), Object: x.bin.Key, Part: x.part,
		Offset: x.startByte, Length: length, Samples: x.samples, Hash: sum(bh), ObjectSize: x.bin.Size,
		Ranges: []indexfile.Range{{Object: x.idx, Offset: x.h.lengthsAt() + 4*x.startSeq, Length: 4 * seqs, Hash: sum(x.lenHash)}},
	}
	switch {
	case x.f.Megatron.Unit == indexfile.MegatronDocument:
		// The document index from the shard's first document's start to
		// its last one's end: one entry more than its documents.
		e.Ranges = append(e.Ranges, indexfile.Range{Object: x.idx, Offset: x.h.docsAt() + 8*x.startDoc, Length: 8 * (x.samples + 1), Hash: sum(x.extraHash)})
	case x.modes != nil:
		e.Ranges = append(e.Ranges, indexfile.Range{Object: x.idx, Offset: x.h.modesAt() + x.startSeq, Length: seqs, Hash: sum(x.extraHash)})
	}
	x.f.Shards = append(x.f.Shards, e)
	x.part++
	x.startDoc = nextDoc
	x.begin(x.seq)
	return nil
}
