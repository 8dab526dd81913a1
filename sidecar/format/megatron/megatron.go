package megatron

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Columns of a megatron stream: a sample's tokens, and a multimodal
// sequence's mode.
const (
	ColumnTokens = "tokens"
	ColumnMode   = "mode"
)

// Format is Megatron-LM's indexed dataset format.
type Format struct{}

var (
	_ format.Format  = Format{}
	_ format.Indexer = Format{}
)

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatMegatron }

// Suffixes implements format.Indexer: each .idx names its pair.
func (Format) Suffixes() []string { return []string{".idx"} }

// unitOption is the option that says what a sample is.
const unitOption = "unit"

// Options lists the format's own index option (format.Option): what a
// sample is, a document or a sequence.
func (Format) Options() []format.Option {
	return []format.Option{{Flag: unitOption, Field: "spec.streams[].megatron.unit",
		Help: "what a sample is, a document (default) or a sequence",
		Spec: func(s *datav1alpha1.Stream) string {
			if s.Megatron == nil {
				return ""
			}
			return s.Megatron.Unit
		}}}
}

// IndexHelp is shardfeed index's help of a megatron stream.
func (Format) IndexHelp() string {
	return `URI holds Megatron-LM's indexed datasets: each .idx with its .bin. A
sample is a document (--unit document, the default: the tokens of its
sequences) or a sequence (--unit sequence, which a multimodal dataset's
modes need); a shard is a run of them of about --shard-size of tokens.
Each .idx is checked whole (its pointers against its lengths, its
document index against its sequences) and each .bin read once to hash
the shards' tokens.`
}

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if f.Megatron == nil {
		return nil, fmt.Errorf(`the shardfeed index of a megatron stream has no "megatron": re-run shardfeed index --format megatron`)
	}
	schema, err := Schema(f.Megatron)
	if err != nil {
		return nil, err
	}
	return &reader{f: f, schema: schema}, nil
}

// Schema is a megatron stream's Arrow schema: its samples' tokens, as a
// list of the .idx's token type, and a multimodal sequence's mode.
func Schema(m *indexfile.Megatron) (*arrow.Schema, error) {
	t, _, err := ArrowType(m.DType)
	if err != nil {
		return nil, err
	}
	fields := []arrow.Field{{Name: ColumnTokens, Type: arrow.ListOf(t)}}
	if m.Modes {
		fields = append(fields, arrow.Field{Name: ColumnMode, Type: arrow.PrimitiveTypes.Int8})
	}
	return arrow.NewSchema(fields, nil), nil
}

type reader struct {
	f      *indexfile.File
	schema *arrow.Schema
}

// Parts are the shard's tokens (a range of the .bin), then its ranges of
// the .idx.
func (r *reader) Parts(i int) []format.Part {
	e := r.f.Shard(i)
	parts := format.FileParts(r.f, i, false)
	for _, g := range e.Ranges {
		parts = append(parts, format.Part{Key: g.Object, Size: g.Length, Hash: g.Hash, Range: true, Offset: g.Offset})
	}
	return parts
}

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

func (r *reader) Records(_ context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.f.Shard(i)
	rec, err := Decode(r.f.Megatron, *e, parts, columns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	return format.RecordsOf([]arrow.RecordBatch{rec})
}

// Decode builds shard e's samples from its parts (Parts' order), keeping
// only columns (nil: all). The tokens are not copied: the record's value
// buffer is the .bin range's bytes.
func Decode(m *indexfile.Megatron, e indexfile.Entry, parts [][]byte, columns []string) (arrow.RecordBatch, error) {
	schema, err := Schema(m)
	if err != nil {
		return nil, err
	}
	for _, c := range columns {
		if schema.FieldIndices(c) == nil {
			return nil, fmt.Errorf("no column %q: a megatron stream's columns are %s", c, columnNames(schema))
		}
	}
	if len(parts) != 1+m.MegatronRanges() || len(e.Ranges) != m.MegatronRanges() {
		return nil, fmt.Errorf("a shard of %ss has %d parts, not %d", m.Unit, len(parts), 1+m.MegatronRanges())
	}
	t, itemSize, _ := ArrowType(m.DType)
	tokens := parts[0]
	if int64(len(tokens)) != e.Length {
		return nil, fmt.Errorf("a part of %d bytes: the shard's tokens are %d bytes", len(tokens), e.Length)
	}
	offsets, err := sampleOffsets(m, e, parts[1:], int64(len(tokens))/itemSize)
	if err != nil {
		return nil, err
	}
	total := int64(offsets[len(offsets)-1])
	if total*itemSize != int64(len(tokens)) {
		return nil, fmt.Errorf("the sequences hold %d bytes of tokens, the shard's range %d: corrupt", total*itemSize, len(tokens))
	}
	var modes []byte
	if m.Modes {
		if modes = parts[2]; len(modes) != len(offsets)-1 {
			return nil, fmt.Errorf("the modes range is %d bytes for %d sequences", len(modes), len(offsets)-1)
		}
	}
	rows := len(offsets) - 1
	values := array.NewData(t, int(total), []*memory.Buffer{nil, memory.NewBufferBytes(tokens)}, nil, 0, 0)
	defer values.Release()
	list := array.NewData(arrow.ListOf(t), rows, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))}, []arrow.ArrayData{values}, 0, 0)
	defer list.Release()
	all := map[string]arrow.Array{ColumnTokens: array.MakeFromData(list)}
	if modes != nil {
		md := array.NewData(arrow.PrimitiveTypes.Int8, rows, []*memory.Buffer{nil, memory.NewBufferBytes(modes)}, nil, 0, 0)
		all[ColumnMode] = array.MakeFromData(md)
		md.Release()
	}
	defer func() {
		for _, a := range all {
			a.Release()
		}
	}()
	if columns == nil {
		for _, f := range schema.Fields() {
			columns = append(columns, f.Name)
		}
	}
	var fields []arrow.Field
	var cols []arrow.Array
	for _, c := range columns {
		k := schema.FieldIndices(c)[0]
		fields = append(fields, schema.Field(k))
		cols = append(cols, all[c])
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(rows)), nil
}

func columnNames(s *arrow.Schema) string {
	var names []string
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// sampleOffsets reads where each of shard e's samples ends, in tokens, from
// its .idx ranges (Parts' order, after the tokens): one offset more than
// its samples, from 0. Lengths past most tokens are corrupt.
func sampleOffsets(m *indexfile.Megatron, e indexfile.Entry, ranges [][]byte, most int64) ([]int32, error) {
	lens := ranges[0]
	if len(lens)%4 != 0 {
		return nil, fmt.Errorf("a lengths range of %d bytes: they are 4 bytes each", len(lens))
	}
	seqs := len(lens) / 4
	offsets := make([]int32, 0, e.Samples+1)
	offsets = append(offsets, 0)
	var total int64
	seqEnd := func(s int) error {
		n := int32(binary.LittleEndian.Uint32(lens[4*s:])) //nolint:gosec // the stored bits
		if n < 0 {
			return fmt.Errorf("a sequence of %d tokens: corrupt", n)
		}
		total += int64(n)
		if total > most || total > 1<<31-1 {
			return fmt.Errorf("the sequences' lengths sum past the shard's %d tokens: corrupt", most)
		}
		return nil
	}
	if m.Unit != indexfile.MegatronDocument {
		if int64(seqs) != e.Samples {
			return nil, fmt.Errorf("the shard has %d sequences, its index says %d", seqs, e.Samples)
		}
		for s := range seqs {
			if err := seqEnd(s); err != nil {
				return nil, err
			}
			offsets = append(offsets, int32(total)) //nolint:gosec // bounded above
		}
		return offsets, nil
	}
	docs := ranges[1]
	if int64(len(docs)) != 8*(e.Samples+1) {
		return nil, fmt.Errorf("the document index range is %d bytes, not 8 for each of %d documents and one more", len(docs), e.Samples)
	}
	start := (e.Ranges[0].Offset - int64(HeaderSize)) / 4
	s := 0
	for d := range e.Samples + 1 {
		at := int64(binary.LittleEndian.Uint64(docs[8*d:])) - start //nolint:gosec // the stored bits
		if at < int64(s) || at > int64(seqs) || (d == 0 && at != 0) {
			return nil, fmt.Errorf("document %d of the shard starts at its sequence %d, outside [%d, %d]: corrupt", d, at, s, seqs)
		}
		for ; int64(s) < at; s++ {
			if err := seqEnd(s); err != nil {
				return nil, err
			}
		}
		if d > 0 {
			offsets = append(offsets, int32(total)) //nolint:gosec // bounded above
		}
	}
	if s != seqs {
		return nil, fmt.Errorf("the shard's documents end at its sequence %d of %d: corrupt", s, seqs)
	}
	return offsets, nil
}

// MeasuredParts implements format.Measurer: the tokens' lengths are in
// the .idx ranges, parts 1 and on.
func (r *reader) MeasuredParts(i int, column string) []int {
	if column != ColumnTokens {
		return nil
	}
	if r.f.Megatron.Unit == indexfile.MegatronDocument {
		return []int{1, 2}
	}
	return []int{1}
}

// Lengths implements format.Measurer: each sample's tokens, from the .idx
// ranges alone (parts[0], the tokens, is not read).
func (r *reader) Lengths(i int, _ string, parts [][]byte) ([]int64, error) {
	e := r.f.Shard(i)
	_, itemSize, err := ArrowType(r.f.Megatron.DType)
	if err != nil {
		return nil, err
	}
	offsets, err := sampleOffsets(r.f.Megatron, *e, parts[1:], e.Length/itemSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	out := make([]int64, len(offsets)-1)
	for k := range out {
		out[k] = int64(offsets[k+1] - offsets[k])
	}
	return out, nil
}
