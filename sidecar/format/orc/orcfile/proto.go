package orcfile

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardfeed/shardfeed/internal/protowalk"
)

// The ORC tail's protobuf messages, decoded field by field (orc_proto.proto
// of Apache ORC): only the fields the reader needs, unknown ones skipped.

// fields calls fn for each field of msg (protowalk.Fields), a malformed
// message being a corrupt file.
func fields(msg []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	err := protowalk.Fields(msg, fn)
	if errors.Is(err, protowalk.ErrMalformed) {
		return errCorrupt("protobuf", err)
	}
	return err
}

// varints decodes a message whose fields the reader needs are all varints
// into the places into names by field number.
func varints(msg []byte, into map[protowire.Number]*uint64) error {
	return fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		if p, ok := into[num]; ok {
			*p = v
		}
		return nil
	})
}

// uints appends the values of a repeated uint field, packed or not.
func uints(dst []uint64, typ protowire.Type, v uint64, b []byte) ([]uint64, error) {
	out, err := protowalk.Uints(dst, typ, v, b)
	if err != nil {
		return nil, errCorrupt("packed varints", err)
	}
	return out, nil
}

// errCorrupt names what could not be read.
func errCorrupt(what string, err error) error {
	if err == nil {
		return fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
}

// ErrCorrupt is the error of a file that is not valid ORC.
var ErrCorrupt = errors.New("corrupt ORC file")

// postScript is the uncompressed end of the file.
type postScript struct {
	footerLength, metadataLength uint64
	compression                  Compression
	blockSize                    uint64
	magic                        string
}

func parsePostScript(b []byte) (ps postScript, err error) {
	err = fields(b, func(num protowire.Number, _ protowire.Type, v uint64, s []byte) error {
		switch num {
		case 1:
			ps.footerLength = v
		case 2:
			ps.compression = Compression(v)
		case 3:
			ps.blockSize = v
		case 5:
			ps.metadataLength = v
		case 8000:
			ps.magic = string(s)
		}
		return nil
	})
	return ps, err
}

// StripeInfo is where a stripe is and how many rows it holds.
type StripeInfo struct {
	Offset, IndexLength, DataLength, FooterLength, Rows uint64
}

// Length is the stripe's size in bytes: index, data and footer.
func (s StripeInfo) Length() uint64 { return s.IndexLength + s.DataLength + s.FooterLength }

// typeDesc is one node of the file's type tree, in pre-order.
type typeDesc struct {
	kind       Kind
	subtypes   []uint64
	fieldNames []string
	precision  uint64
	scale      uint64
}

type footer struct {
	stripes []StripeInfo
	types   []typeDesc
	rows    uint64
}

func parseFooter(b []byte) (f footer, err error) {
	err = fields(b, func(num protowire.Number, _ protowire.Type, v uint64, s []byte) error {
		switch num {
		case 3:
			var si StripeInfo
			err := varints(s, map[protowire.Number]*uint64{1: &si.Offset, 2: &si.IndexLength, 3: &si.DataLength, 4: &si.FooterLength, 5: &si.Rows})
			f.stripes = append(f.stripes, si)
			return err
		case 4:
			var t typeDesc
			err := fields(s, func(num protowire.Number, typ protowire.Type, v uint64, s []byte) error {
				var err error
				switch num {
				case 1:
					t.kind = Kind(v)
				case 2:
					t.subtypes, err = uints(t.subtypes, typ, v, s)
				case 3:
					t.fieldNames = append(t.fieldNames, string(s))
				case 5:
					t.precision = v
				case 6:
					t.scale = v
				}
				return err
			})
			f.types = append(f.types, t)
			return err
		case 6:
			f.rows = v
		}
		return nil
	})
	return f, err
}

// stream is one stream of a stripe: its kind, column and length.
type stream struct {
	kind   streamKind
	column uint64
	length uint64
}

type encoding struct {
	kind           encodingKind
	dictionarySize uint64
}

type stripeFooter struct {
	streams   []stream
	encodings []encoding
}

func parseStripeFooter(b []byte) (sf stripeFooter, err error) {
	err = fields(b, func(num protowire.Number, _ protowire.Type, _ uint64, s []byte) error {
		switch num {
		case 1:
			var st stream
			var kind uint64
			err := varints(s, map[protowire.Number]*uint64{1: &kind, 2: &st.column, 3: &st.length})
			st.kind = streamKind(kind)
			sf.streams = append(sf.streams, st)
			return err
		case 2:
			var e encoding
			var kind uint64
			err := varints(s, map[protowire.Number]*uint64{1: &kind, 2: &e.dictionarySize})
			e.kind = encodingKind(kind)
			sf.encodings = append(sf.encodings, e)
			return err
		}
		return nil
	})
	return sf, err
}

// Compression is a file's compression codec.
type Compression uint64

// The codecs of the specification.
const (
	CompressionNone Compression = iota
	CompressionZlib
	CompressionSnappy
	CompressionLZO
	CompressionLZ4
	CompressionZstd
)

func (c Compression) String() string {
	if int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("compression %d", uint64(c))
}

var compressionNames = []string{"none", "zlib", "snappy", "lzo", "lz4", "zstd"}

// Kind is the kind of a type of the file.
type Kind uint64

// The type kinds of the specification.
const (
	KindBoolean Kind = iota
	KindByte
	KindShort
	KindInt
	KindLong
	KindFloat
	KindDouble
	KindString
	KindBinary
	KindTimestamp
	KindList
	KindMap
	KindStruct
	KindUnion
	KindDecimal
	KindDate
	KindVarchar
	KindChar
	KindTimestampInstant
)

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("type kind %d", uint64(k))
}

var kindNames = []string{"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "string", "binary",
	"timestamp", "array", "map", "struct", "uniontype", "decimal", "date", "varchar", "char", "timestamp with local time zone"}

type streamKind uint64

const (
	streamPresent streamKind = iota
	streamData
	streamLength
	streamDictionaryData
	streamDictionaryCount
	streamSecondary
	streamRowIndex
)

type encodingKind uint64

const (
	encodingDirect encodingKind = iota
	encodingDictionary
	encodingDirectV2
	encodingDictionaryV2
)
