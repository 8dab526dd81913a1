package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/planner"
)

// Packed sequences (spec.packing, docs/planner.md): a packed stream serves
// packs, not documents. The sidecar packs each shard's decoded documents
// as shardfeed index counted them, so the decoded shard the cache holds
// and the batches read is already packed: the hand-off copies packed rows
// as it copies any row, and no Python code packs.

// The columns of a packed batch besides the tokens (which keep their
// column's name).
const (
	// ColumnPositionIDs restart at 0 at each document's piece.
	ColumnPositionIDs = "position_ids"
	// ColumnLossMask is 1 at a document's token and 0 at padding.
	ColumnLossMask = "loss_mask"
	// ColumnCuSeqlens are the pieces' boundaries in the sequence, 0 first
	// and the tokens last (flash-attention's cu_seqlens of one row).
	ColumnCuSeqlens = "cu_seqlens"
	// ColumnDocIDs are the global ids of the documents of the pieces.
	ColumnDocIDs = "doc_ids"
)

// PackedColumns are the names a packed batch adds to its tokens column.
var PackedColumns = []string{ColumnPositionIDs, ColumnLossMask, ColumnCuSeqlens, ColumnDocIDs}

// packedSchema is the schema of a packed stream whose documents are
// column f, a list of integers (token ids), in sequences of seqLen.
func packedSchema(f arrow.Field, seqLen uint32) (*arrow.Schema, error) {
	var elem arrow.DataType
	switch t := f.Type.(type) {
	case *arrow.ListType:
		elem = t.Elem()
	case *arrow.LargeListType:
		elem = t.Elem()
	case *arrow.FixedSizeListType:
		elem = t.Elem()
	}
	if elem == nil || !arrow.IsInteger(elem.ID()) {
		return nil, fmt.Errorf("spec.packing.column %q is %s: packing takes a list of integer token ids", f.Name, f.Type)
	}
	if slices.Contains(PackedColumns, f.Name) {
		return nil, fmt.Errorf("spec.packing.column %q has the name of a column packing adds (%v): rename it", f.Name, PackedColumns)
	}
	n := int32(seqLen) //nolint:gosec // at most 2^20
	return arrow.NewSchema([]arrow.Field{
		{Name: f.Name, Type: arrow.FixedSizeListOfNonNullable(n, elem)},
		{Name: ColumnPositionIDs, Type: arrow.FixedSizeListOfNonNullable(n, arrow.PrimitiveTypes.Int32)},
		{Name: ColumnLossMask, Type: arrow.FixedSizeListOfNonNullable(n, arrow.PrimitiveTypes.Uint8)},
		{Name: ColumnCuSeqlens, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32)},
		{Name: ColumnDocIDs, Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int64)},
	}, nil), nil
}

// packAll gives the streams of a packed dataset their packed schema and
// their documents' global ids: every stream's documents are a list column
// (list, large list or fixed-size list) of one integer type, so that
// every stream's packs are of one schema.
func packAll(streams []*Stream) error {
	var docs int64 // the documents of the streams before
	var diffs []string
	for _, s := range streams {
		var err error
		if s.packed, err = packedSchema(s.docsField(), s.packs.Packing.SeqLength); err != nil {
			return fmt.Errorf("stream %q: %w", s.Name, err)
		}
		if first := streams[0]; !s.packed.Equal(first.packed) {
			diffs = append(diffs, fmt.Sprintf("stream %q's are %s, stream %q's %s", s.Name, s.docsField().Type, first.Name, first.docsField().Type))
		}
		s.docBase = make([]int64, len(s.packs.Index.Shards))
		for h, sh := range s.packs.Index.Shards {
			s.docBase[h] = docs
			docs += sh.Docs
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("spec.packing.column %q: the streams' token ids are not of one integer type (%s): rewrite a stream with shardfeed convert",
			streams[0].packs.Column, strings.Join(diffs, "; "))
	}
	return nil
}

// docsField is the column of a packed stream's documents: the one it
// decodes, or (tokenized) the ids it makes of its text.
func (s *Stream) docsField() arrow.Field {
	if k := s.native.FieldIndices(s.packs.Column); len(k) > 0 {
		return s.native.Field(k[0])
	}
	return s.native.Field(0)
}

// documents returns where each row's tokens start in values and how many
// there are, for col, a column of documents: a null document has no
// token, as shardfeed index measured it.
func documents(col arrow.Array) (starts []int64, lengths []uint32, values arrow.Array, err error) {
	n := col.Len()
	starts = make([]int64, n)
	lengths = make([]uint32, n)
	var base, end int64
	var bounds func(r int) (int64, int64)
	var child arrow.Array
	switch c := col.(type) {
	case *array.List:
		child, bounds = c.ListValues(), c.ValueOffsets
	case *array.LargeList:
		child, bounds = c.ListValues(), c.ValueOffsets
	case *array.FixedSizeList:
		k := int64(c.DataType().(*arrow.FixedSizeListType).Len())
		child = c.ListValues()
		bounds = func(r int) (int64, int64) { return int64(c.Offset()+r) * k, int64(c.Offset()+r+1) * k }
	default:
		return nil, nil, nil, fmt.Errorf("column of %s, not a list", col.DataType())
	}
	if n > 0 {
		base, _ = bounds(0)
		_, end = bounds(n - 1)
	}
	for r := range n {
		s, e := bounds(r)
		if e-s > 1<<31-1 {
			return nil, nil, nil, fmt.Errorf("document %d has %d tokens, past 2^31-1", r, e-s)
		}
		starts[r] = s - base
		if col.IsValid(r) {
			lengths[r] = uint32(e - s) //nolint:gosec // bounded above
		}
	}
	values = array.NewSlice(child, base, end)
	if nulls := values.NullN(); nulls > 0 {
		values.Release()
		return nil, nil, nil, fmt.Errorf("%d null token ids: a token id is never null (filter out the documents that hold one, or rewrite them)", nulls)
	}
	return starts, lengths, values, nil
}

// packShard packs the documents of column 0 of rec (shard i's, decoded) as
// the stream's packing says, and checks that they make the packs the
// index counted: a record of the packed schema, a pack a row.
func (s *Stream) packShard(i int, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	docs := rec.Column(0)
	if k := rec.Schema().FieldIndices(s.packs.Column); len(k) > 0 {
		docs = rec.Column(k[0])
	}
	starts, lengths, values, err := documents(docs)
	if err != nil {
		return nil, fmt.Errorf("spec.packing.column %q: %w", s.packs.Column, err)
	}
	defer values.Release()
	packs, st := planner.PackShard(lengths, s.packs.Packing)
	want := s.packs.Index.Shards[i]
	if int64(len(packs)) != want.Packs || int64(st.Tokens) != want.Tokens { //nolint:gosec // tokens of one shard
		return nil, fmt.Errorf("its documents pack into %d sequences of %d tokens, the packs index counted %d of %d: re-run shardfeed index --lengths --pack-length",
			len(packs), st.Tokens, want.Packs, want.Tokens)
	}
	// A chat's loss mask, a list of the same lengths as its ids: the
	// packed loss_mask keeps the assistant's tokens only.
	var chatMask []uint8
	if s.tok != nil && s.tok.chat != nil {
		_, mlen, mvalues, err := documents(rec.Column(rec.Schema().FieldIndices(s.tok.mask)[0]))
		if err != nil {
			return nil, fmt.Errorf("tokenize.chat.lossMask: %w", err)
		}
		defer mvalues.Release()
		if !slices.Equal(mlen, lengths) {
			return nil, errors.New("a chat's loss mask is not as long as its ids")
		}
		chatMask = mvalues.(*array.Uint8).Uint8Values()
	}
	return s.packedRecord(packs, starts, values, chatMask, s.docBase[i]), nil
}

// packedRecord builds the packed rows: tokens padded to the sequence
// length, position ids, loss mask (chatMask's where a chat gives one, else
// 1 at every token), boundaries and document ids.
func (s *Stream) packedRecord(packs [][]planner.Piece, starts []int64, values arrow.Array, chatMask []uint8, docBase int64) arrow.RecordBatch {
	seqLen := int(s.packs.Packing.SeqLength)
	n := len(packs)
	elem := s.packed.Field(0).Type.(*arrow.FixedSizeListType).Elem()
	width := elem.(arrow.FixedWidthDataType).Bytes()
	src := values.Data().Buffers()[1].Bytes()[values.Data().Offset()*width:]
	tokens := make([]byte, n*seqLen*width)
	var pad [8]byte
	binary.LittleEndian.PutUint64(pad[:], uint64(s.packs.PadToken)) //nolint:gosec // the pad id's bits, in the column's width
	positions := make([]int32, n*seqLen)
	mask := make([]uint8, n*seqLen)
	cuOffsets := make([]int32, 1, n+1)
	var cu []int32
	docOffsets := make([]int32, 1, n+1)
	var docs []int64
	for k, pack := range packs {
		row := k * seqLen
		at := 0
		cu = append(cu, 0)
		for _, pc := range pack {
			from := (int(starts[pc.Doc]) + int(pc.Offset)) * width
			copy(tokens[(row+at)*width:], src[from:from+int(pc.Len)*width])
			for j := range int(pc.Len) {
				positions[row+at+j] = int32(j) //nolint:gosec // below the sequence length
				mask[row+at+j] = 1
			}
			if chatMask != nil {
				from := int(starts[pc.Doc]) + int(pc.Offset)
				copy(mask[row+at:row+at+int(pc.Len)], chatMask[from:from+int(pc.Len)])
			}
			at += int(pc.Len)
			cu = append(cu, int32(at)) //nolint:gosec // as above
			docs = append(docs, docBase+int64(pc.Doc))
		}
		for j := at; j < seqLen; j++ {
			copy(tokens[(row+j)*width:(row+j+1)*width], pad[:width])
		}
		cuOffsets = append(cuOffsets, int32(len(cu)))     //nolint:gosec // a shard's pieces
		docOffsets = append(docOffsets, int32(len(docs))) //nolint:gosec // as above
	}
	fixed := func(t arrow.DataType, buf []byte, elemType arrow.DataType) arrow.Array {
		child := array.NewData(elemType, n*seqLen, []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
		defer child.Release()
		data := array.NewData(t, n, []*memory.Buffer{nil}, []arrow.ArrayData{child}, 0, 0)
		defer data.Release()
		return array.MakeFromData(data)
	}
	list := func(t arrow.DataType, offs []int32, buf []byte, elemType arrow.DataType, count int) arrow.Array {
		child := array.NewData(elemType, count, []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
		defer child.Release()
		data := array.NewData(t, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offs))}, []arrow.ArrayData{child}, 0, 0)
		defer data.Release()
		return array.MakeFromData(data)
	}
	f := s.packed.Fields()
	cols := []arrow.Array{
		fixed(f[0].Type, tokens, elem),
		fixed(f[1].Type, arrow.Int32Traits.CastToBytes(positions), arrow.PrimitiveTypes.Int32),
		fixed(f[2].Type, mask, arrow.PrimitiveTypes.Uint8),
		list(f[3].Type, cuOffsets, arrow.Int32Traits.CastToBytes(cu), arrow.PrimitiveTypes.Int32, len(cu)),
		list(f[4].Type, docOffsets, arrow.Int64Traits.CastToBytes(docs), arrow.PrimitiveTypes.Int64, len(docs)),
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return array.NewRecordBatch(s.packed, cols, int64(n))
}
