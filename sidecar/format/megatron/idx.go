// Package megatron reads Megatron-LM's indexed datasets (the MMIDIDX format
// that Megatron-LM's preprocess_data.py, NeMo Curator and megatron-core's
// IndexedDatasetBuilder write): a .bin of token arrays and its .idx, which
// holds each sequence's length and byte offset and the sequences that end
// each document. A sample is a document (the tokens of its sequences) or a
// sequence; a shard is a run of them, a byte range of the .bin fetched with
// the ranges of the .idx that say where its samples end.
//
// An .idx file, every integer little-endian (S sequences, D documents):
//
//	offset            bytes  field
//	0                 9      magic "MMIDIDX\x00\x00"
//	9                 8      version: 1
//	17                1      dtype code: 1 uint8, 2 int8, 3 int16, 4 int32,
//	                         5 int64, 6 float64, 7 float32, 8 uint16
//	18                8      S
//	26                8      D+1 (the document index's entries)
//	34                4·S    each sequence's length in tokens (int32)
//	34+4S             8·S    each sequence's byte offset in the .bin (int64)
//	34+12S            8·(D+1) each document's first sequence, then S (int64)
//	34+12S+8(D+1)     S      multimodal only: each sequence's mode (int8)
//
// The .bin holds the sequences' tokens end to end, in the dtype, nothing
// else. worked_test.go builds a pair byte by byte.
package megatron

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// Magic opens every .idx file; version 1 follows it.
const Magic = "MMIDIDX\x00\x00"

// HeaderSize is the bytes before an .idx file's sections: the magic, the
// version, the dtype code and the sequence and document counts.
const HeaderSize = len(Magic) + 8 + 1 + 8 + 8

// maxCount bounds the counts of a header: beyond it the sections' sizes
// would overflow (and no dataset has 2^40 sequences).
const maxCount = 1 << 40

// Header is an .idx file's header, checked against the file's size.
type Header struct {
	// DType is the tokens' type (indexfile.MegatronDTypes).
	DType string
	// ItemSize is a token's bytes.
	ItemSize int64
	// Sequences is the number of sequences; Documents the number of
	// documents (the document index has one entry more: each document's
	// first sequence, then the end).
	Sequences, Documents int64
	// Modes says the file ends with a mode per sequence (multimodal).
	Modes bool
}

// Section offsets of the file.
func (h Header) lengthsAt() int64  { return int64(HeaderSize) }
func (h Header) pointersAt() int64 { return int64(HeaderSize) + 4*h.Sequences }
func (h Header) docsAt() int64     { return h.pointersAt() + 8*h.Sequences }
func (h Header) modesAt() int64    { return h.docsAt() + 8*(h.Documents+1) }

// Size is the size of the file the header describes.
func (h Header) Size() int64 {
	n := h.modesAt()
	if h.Modes {
		n += h.Sequences
	}
	return n
}

// ArrowType is the Arrow type of a token.
func ArrowType(dtype string) (arrow.DataType, int64, error) {
	switch dtype {
	case "uint8":
		return arrow.PrimitiveTypes.Uint8, 1, nil
	case "int8":
		return arrow.PrimitiveTypes.Int8, 1, nil
	case "int16":
		return arrow.PrimitiveTypes.Int16, 2, nil
	case "uint16":
		return arrow.PrimitiveTypes.Uint16, 2, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, 4, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, 8, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, 4, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, 8, nil
	}
	return nil, 0, fmt.Errorf("token type %q is not one of %v", dtype, indexfile.MegatronDTypes)
}

// ParseHeader reads the header of an .idx file of size bytes from its first
// HeaderSize bytes.
func ParseHeader(b []byte, size int64) (Header, error) {
	if len(b) < HeaderSize || size < int64(HeaderSize) {
		return Header{}, fmt.Errorf("not a Megatron .idx file: %d bytes, the header alone is %d", size, HeaderSize)
	}
	if !bytes.Equal(b[:len(Magic)], []byte(Magic)) {
		return Header{}, fmt.Errorf("not a Megatron .idx file: it does not start with %q", Magic)
	}
	b = b[len(Magic):]
	if v := binary.LittleEndian.Uint64(b); v != 1 {
		return Header{}, fmt.Errorf("version %d of the Megatron .idx format is not supported: this shardfeed reads version 1", v)
	}
	code := int(b[8])
	if code < 1 || code > len(indexfile.MegatronDTypes) {
		return Header{}, fmt.Errorf("the .idx's dtype code %d is not one of 1–%d", code, len(indexfile.MegatronDTypes))
	}
	h := Header{DType: indexfile.MegatronDTypes[code-1]}
	_, h.ItemSize, _ = ArrowType(h.DType)
	seqs, docs := binary.LittleEndian.Uint64(b[9:]), binary.LittleEndian.Uint64(b[17:])
	if seqs >= maxCount || docs >= maxCount || docs == 0 {
		return Header{}, fmt.Errorf("the .idx counts %d sequences and %d document index entries: corrupt (the document index has at least one)", seqs, docs)
	}
	h.Sequences, h.Documents = int64(seqs), int64(docs)-1
	switch size {
	case h.Size():
	case h.Size() + h.Sequences:
		h.Modes = true
	default:
		return Header{}, fmt.Errorf("the .idx of %d sequences and %d documents is %d bytes, not %d (or %d with modes): truncated or corrupt",
			h.Sequences, h.Documents, size, h.Size(), h.Size()+h.Sequences)
	}
	return h, nil
}

// section reads fixed-width little-endian values of one section of an .idx
// file in order, and hashes what it reads since its last sum.
type section struct {
	r    *bufio.Reader
	name string
	buf  [8]byte
	w    io.Writer // the hash of the current shard's values, nil: none
}

func newSection(r io.Reader, name string) *section {
	return &section{r: bufio.NewReaderSize(r, 64<<10), name: name}
}

func (s *section) read(n int) ([]byte, error) {
	if _, err := io.ReadFull(s.r, s.buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading the .idx's %s: %w", s.name, err)
	}
	if s.w != nil {
		_, _ = s.w.Write(s.buf[:n])
	}
	return s.buf[:n], nil
}

func (s *section) int32() (int32, error) {
	b, err := s.read(4)
	if err != nil {
		return 0, err
	}
	return int32(binary.LittleEndian.Uint32(b)), nil //nolint:gosec // the stored bits
}

func (s *section) int64() (int64, error) {
	b, err := s.read(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b)), nil //nolint:gosec // the stored bits
}

func (s *section) int8() (int8, error) {
	b, err := s.read(1)
	if err != nil {
		return 0, err
	}
	return int8(b[0]), nil //nolint:gosec // the stored bits
}
