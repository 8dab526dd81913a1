package lancefile

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardfeed/shardfeed/internal/protowalk"
)

// Lance file format 2.0 (footer version 0.3): each page's encoding is a
// tree of ArrayEncoding messages over the page's buffers (the format's
// encodings_v2_0.proto); every field has a column, struct and list parents
// included, and a list's items are the rows of its child's column.

// Kind20 names an ArrayEncoding: its field number in the message's oneof.
type Kind20 protowire.Number

// The ArrayEncodings this reader decodes. Others (bitpacking, packed
// structs, the 2.1 mini-block encodings that share the message) are
// refused by name.
const (
	Flat20            Kind20 = 1
	Nullable20        Kind20 = 2
	FixedSizeList20   Kind20 = 3
	List20            Kind20 = 4
	Struct20          Kind20 = 5
	Binary20          Kind20 = 6
	Dictionary20      Kind20 = 7
	Fsst20            Kind20 = 8
	FixedSizeBinary20 Kind20 = 11
	Constant20        Kind20 = 13
)

var kind20Names = map[Kind20]string{
	1: "flat", 2: "nullable", 3: "fixed_size_list", 4: "list", 5: "struct", 6: "binary", 7: "dictionary",
	8: "fsst", 9: "packed_struct", 10: "bitpacked", 11: "fixed_size_binary", 12: "bitpacked_for_non_neg",
	13: "constant", 14: "inline_bitpacking", 15: "out_of_line_bitpacking", 16: "variable",
	17: "packed_struct_fixed_width_mini_block", 18: "block", 19: "rle", 20: "general_mini_block", 21: "byte_stream_split",
}

func (k Kind20) String() string {
	if s, ok := kind20Names[k]; ok {
		return s
	}
	return fmt.Sprintf("encoding %d", int(k))
}

// Nullability of a 2.0 Nullable encoding.
const (
	noNulls   = 1
	someNulls = 2
	allNulls  = 3
)

// Encoding20 is one node of a 2.0 page's encoding tree.
type Encoding20 struct {
	Kind Kind20
	// Flat: bits per value, the page buffer, and the buffer's compression
	// scheme ("" or "none": none).
	Bits        uint64
	Buffer      uint32
	Compression string
	// Nullable: which of noNulls, someNulls, allNulls, with the validity
	// bitmap's encoding for someNulls.
	Nulls    int
	Validity *Encoding20
	// Values: Nullable's values, Binary's and Fsst's and
	// FixedSizeBinary's bytes, FixedSizeList's and Dictionary's items.
	Values *Encoding20
	// Indices: Binary's end offsets, List's offsets, Dictionary's indices.
	Indices *Encoding20
	// NullAdjustment: added to a Binary's or List's end offset to mark a
	// null row.
	NullAdjustment uint64
	// Items: a List page's item count, a Dictionary's item count.
	Items uint64
	// Dim: a FixedSizeList's dimension, a FixedSizeBinary's width.
	Dim         uint32
	HasValidity bool
	// Symbols: an Fsst page's symbol table; Value: a Constant's value.
	Symbols, Value []byte
}

// maxDepth20 bounds how deep a page's encoding tree may nest.
const maxDepth20 = 16

// parseEncoding20 reads an ArrayEncoding message.
func parseEncoding20(msg []byte, depth int) (*Encoding20, error) {
	if depth > maxDepth20 {
		return nil, corrupt("a 2.0 page encoding nests more than %d deep", maxDepth20)
	}
	var e *Encoding20
	err := protowalk.Fields(msg, func(num protowire.Number, typ protowire.Type, _ uint64, b []byte) error {
		if typ != protowire.BytesType {
			return corrupt("a 2.0 page encoding's field %d is not a message", num)
		}
		if e != nil {
			return corrupt("a 2.0 page encoding sets two encodings (%s and %s)", e.Kind, Kind20(num))
		}
		var err error
		e, err = parseKind20(Kind20(num), b, depth)
		return err
	})
	if err != nil {
		if isCorrupt(err) || errorsIs(err, ErrUnsupported) {
			return nil, err
		}
		return nil, corrupt("a 2.0 page encoding: %v", err)
	}
	if e == nil {
		return nil, corrupt("a 2.0 page encoding is empty")
	}
	return e, nil
}

// slot20 is where one field of an encoding's message goes: a child
// encoding, a number or bytes.
type slot20 struct {
	child  func(*Encoding20) **Encoding20
	number func(*Encoding20, uint64)
	bytes  func(*Encoding20, []byte)
}

func valuesOf20(e *Encoding20) **Encoding20 { return &e.Values }
func indices20(e *Encoding20) **Encoding20  { return &e.Indices }
func dim20(e *Encoding20, v uint64)         { e.Dim = uint32(min(v, 1<<20)) } //nolint:gosec // clamped
func nullAdj20(e *Encoding20, v uint64)     { e.NullAdjustment = v }
func items20(e *Encoding20, v uint64)       { e.Items = v }

// slots20 maps each kind's message fields (Flat's and Nullable's nested
// messages are read by their own functions).
var slots20 = map[Kind20]map[protowire.Number]slot20{
	FixedSizeList20:   {1: {number: dim20}, 2: {child: valuesOf20}, 3: {number: func(e *Encoding20, v uint64) { e.HasValidity = v != 0 }}},
	List20:            {1: {child: indices20}, 2: {number: nullAdj20}, 3: {number: items20}},
	Struct20:          {},
	Binary20:          {1: {child: indices20}, 2: {child: valuesOf20}, 3: {number: nullAdj20}},
	Dictionary20:      {1: {child: indices20}, 2: {child: valuesOf20}, 3: {number: items20}},
	Fsst20:            {1: {child: valuesOf20}, 2: {bytes: func(e *Encoding20, b []byte) { e.Symbols = b }}},
	FixedSizeBinary20: {1: {child: valuesOf20}, 2: {number: dim20}},
	Constant20:        {1: {bytes: func(e *Encoding20, b []byte) { e.Value = b }}},
}

func parseKind20(k Kind20, b []byte, depth int) (*Encoding20, error) {
	e := &Encoding20{Kind: k}
	var err error
	switch slots, ok := slots20[k]; {
	case k == Flat20:
		err = e.flat(b)
	case k == Nullable20:
		err = e.nullable(b, depth)
	case ok:
		err = protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, v uint64, b []byte) error {
			switch s := slots[num]; {
			case s.child != nil:
				var err error
				*s.child(e), err = parseEncoding20(b, depth+1)
				return err
			case s.number != nil:
				s.number(e, v)
			case s.bytes != nil:
				s.bytes(e, b)
			}
			return nil
		})
	default:
		return nil, fmt.Errorf("%w: a 2.0 page in the %s encoding, which this reader does not decode yet; rewrite the table in file version 2.2 (lance.write_dataset(lance.dataset(URI).to_batches(), NEW_URI, data_storage_version=\"2.2\"))", ErrUnsupported, k)
	}
	if err != nil {
		if isCorrupt(err) || errorsIs(err, ErrUnsupported) {
			return nil, err
		}
		return nil, corrupt("a 2.0 %s encoding: %v", k, err)
	}
	return e, e.check()
}

// flat reads a Flat message: bits per value, its buffer and compression.
func (e *Encoding20) flat(b []byte) error {
	return protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, v uint64, b []byte) error {
		switch num {
		case 1:
			e.Bits = v
		case 2:
			return e.buffer(b)
		case 3:
			return protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
				if num == 1 {
					e.Compression = string(b)
				}
				return nil
			})
		}
		return nil
	})
}

// nullable reads a Nullable message: one of no nulls (values), some
// (validity and values) or all.
func (e *Encoding20) nullable(b []byte, depth int) error {
	return protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		e.Nulls = int(num)
		if num < noNulls || num > allNulls {
			return corrupt("a nullable encoding of kind %d", num)
		}
		return protowalk.Fields(b, func(f protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
			var err error
			switch {
			case f == 1 && num == noNulls, f == 2 && num == someNulls:
				e.Values, err = parseEncoding20(b, depth+1)
			case f == 1 && num == someNulls:
				e.Validity, err = parseEncoding20(b, depth+1)
			}
			return err
		})
	})
}

// buffer reads a Buffer message: only page buffers hold 2.0 values.
func (e *Encoding20) buffer(b []byte) error {
	return protowalk.Fields(b, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		switch num {
		case 1:
			if v > 1<<16 {
				return corrupt("page buffer %d", v)
			}
			e.Buffer = uint32(v)
		case 2:
			if v != 0 {
				return fmt.Errorf("%w: a 2.0 value stored in a %s buffer, not the page's", ErrUnsupported, map[uint64]string{1: "column", 2: "file"}[v])
			}
		}
		return nil
	})
}

// check refuses a node that lacks what its kind needs.
func (e *Encoding20) check() error {
	need := func(c *Encoding20, what string) error {
		if c == nil {
			return corrupt("a 2.0 %s encoding without its %s", e.Kind, what)
		}
		return nil
	}
	switch e.Kind {
	case Flat20:
		if e.Bits == 0 || (e.Bits != 1 && e.Bits%8 != 0) || e.Bits > 8<<20 {
			return corrupt("a 2.0 flat encoding of %d bits per value", e.Bits)
		}
		switch e.Compression {
		case "", "none", "zstd", "lz4":
		default:
			return fmt.Errorf("%w: a 2.0 buffer compressed with %q", ErrUnsupported, e.Compression)
		}
	case Nullable20:
		if e.Nulls != allNulls {
			if err := need(e.Values, "values"); err != nil {
				return err
			}
		}
		if e.Nulls == someNulls {
			return need(e.Validity, "validity")
		}
		if e.Nulls == 0 {
			return corrupt("a 2.0 nullable encoding without its kind")
		}
	case FixedSizeList20:
		if e.Dim == 0 {
			return corrupt("a 2.0 fixed-size list of dimension 0")
		}
		return need(e.Values, "items")
	case List20:
		return need(e.Indices, "offsets")
	case Binary20:
		if err := need(e.Indices, "offsets"); err != nil {
			return err
		}
		return need(e.Values, "bytes")
	case Dictionary20:
		if err := need(e.Indices, "indices"); err != nil {
			return err
		}
		if e.Items > 256 {
			return corrupt("a 2.0 dictionary of %d items for u8 indices", e.Items)
		}
		return need(e.Values, "items")
	case Fsst20:
		return need(e.Values, "compressed bytes")
	case FixedSizeBinary20:
		if e.Dim == 0 {
			return corrupt("a 2.0 fixed-size binary of width 0")
		}
		return need(e.Values, "bytes")
	case Constant20:
		if len(e.Value) == 0 || len(e.Value) > 32 {
			return corrupt("a 2.0 constant of %d bytes", len(e.Value))
		}
	}
	return nil
}
