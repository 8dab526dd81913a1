package lancefile

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/shardfeed/shardfeed/internal/protowalk"
)

// The page layouts and compressive encodings of Lance 2.1 and 2.2
// (encodings_v2_1.proto), decoded from their protobuf field by field.

// LayoutKind is a page's structural layout.
type LayoutKind int

// The structural layouts.
const (
	MiniBlock LayoutKind = iota + 1
	Constant
	FullZip
	BlobLayout
	SparseLayout
)

// RepDefLayer is the meaning of one level of repetition and definition,
// innermost first.
type RepDefLayer int

// The layers.
const (
	AllValidItem RepDefLayer = iota + 1
	AllValidList
	NullableItem
	NullableList
	EmptyableList
	NullAndEmptyList
)

func (l RepDefLayer) isList() bool {
	return l == AllValidList || l == NullableList || l == EmptyableList || l == NullAndEmptyList
}

// Layout is a page's PageLayout.
type Layout struct {
	Kind   LayoutKind
	Layers []RepDefLayer
	// Rep, Def and Values compress the repetition levels, definition
	// levels and values (nil: none).
	Rep, Def, Values *Encoding
	// Dictionary compresses a mini-block page's dictionary of
	// DictionaryItems values (page buffer 2); nil: none.
	Dictionary      *Encoding
	DictionaryItems uint64
	// Buffers is the number of value buffers in each mini-block chunk.
	Buffers uint64
	// RepIndexDepth is the depth of a mini-block page's repetition index.
	RepIndexDepth uint32
	// Items is a page's count of levels (rows, unless it has lists).
	Items uint64
	// LargeChunks: the mini-block chunk table and value sizes are u32
	// (2.2), not u16.
	LargeChunks bool
	// BitsRep, BitsDef, BitsPerValue and BitsPerOffset describe a
	// full-zip page's control words and values.
	BitsRep, BitsDef            uint32
	BitsPerValue, BitsPerOffset uint32
	VisibleItems                uint32
	// InlineValue is a constant page's value (nil: all null).
	InlineValue []byte
	// RepValues and DefValues are a constant page's level counts.
	RepValues, DefValues uint64
	// Inner is a blob page's layout of its descriptors (blob v1: each a
	// position and a size in the data file).
	Inner *Layout
}

// EncodingKind is a compressive encoding.
type EncodingKind int

// The compressive encodings, by their field numbers in
// CompressiveEncoding.
const (
	Flat EncodingKind = iota + 1
	Variable
	ConstantValue
	OutOfLineBitpacking
	InlineBitpacking
	Fsst
	Dictionary
	Rle
	ByteStreamSplit
	General
	FixedSizeList
	PackedStruct
	VariablePackedStruct
	Range
	Delta
)

var encodingNames = map[EncodingKind]string{
	Flat: "Flat", Variable: "Variable", ConstantValue: "Constant", OutOfLineBitpacking: "OutOfLineBitpacking",
	InlineBitpacking: "InlineBitpacking", Fsst: "Fsst", Dictionary: "Dictionary", Rle: "Rle",
	ByteStreamSplit: "ByteStreamSplit", General: "General", FixedSizeList: "FixedSizeList",
	PackedStruct: "PackedStruct", VariablePackedStruct: "VariablePackedStruct", Range: "Range", Delta: "Delta",
}

func (k EncodingKind) String() string {
	if n, ok := encodingNames[k]; ok {
		return n
	}
	return fmt.Sprintf("encoding %d", int(k))
}

// Compression schemes of General and of a buffer.
const (
	LZ4  = 1
	Zstd = 2
)

// Encoding is a node of a compressive encoding tree.
type Encoding struct {
	Kind EncodingKind
	// Bits: Flat's bits per value; the bitpackings', Range's and Delta's
	// uncompressed bits per value; FixedSizeList's items per value.
	Bits uint64
	// Scheme is General's compression, or a Flat, Variable or
	// InlineBitpacking buffer's (0: none).
	Scheme int
	// Child is the encoding of the values, offsets, indices or deltas;
	// Child2 of the run lengths (Rle) or dictionary items (Dictionary).
	Child, Child2 *Encoding
	// Symbols is Fsst's symbol table; Value Constant's value.
	Symbols, Value []byte
	// Items is a Dictionary's item count.
	Items uint64
	// HasValidity: a FixedSizeList's values carry a validity bitmap.
	HasValidity bool
	// Widths are a PackedStruct's bits per field.
	Widths []uint64
	// Start and Step of a Range; Start is a Delta's base.
	Start, Step uint64
	// Fields are a VariablePackedStruct's fields, in struct order.
	Fields []PackedField
}

// PackedField is one field of a VariablePackedStruct: its values' encoding
// and either their width or the width of their length prefix, in bits.
type PackedField struct {
	Value            *Encoding
	Bits, LengthBits uint64
}

// maxEncodingDepth bounds the encoding tree's nesting.
const maxEncodingDepth = 16

func parsePageLayout(msg []byte) (*Layout, error) {
	var (
		l    *Layout
		kind protowire.Number
		body []byte
	)
	if err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		kind, body = num, b
		return nil
	}); err != nil {
		return nil, corrupt("page layout: %v", err)
	}
	switch kind {
	case 1:
		l = &Layout{Kind: MiniBlock}
	case 2:
		l = &Layout{Kind: Constant}
	case 3:
		l = &Layout{Kind: FullZip}
	case 4:
		l = &Layout{Kind: BlobLayout}
	case 5:
		return nil, fmt.Errorf("%w: a sparse page layout (Lance file version 2.3, unstable)", ErrUnsupported)
	default:
		return nil, corrupt("a page layout of kind %d", kind)
	}
	err := protowalk.Fields(body, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		return l.field(num, typ, v, b)
	})
	if err != nil {
		if isCorrupt(err) {
			return nil, err
		}
		return nil, corrupt("page layout: %v", err)
	}
	for _, layer := range l.Layers {
		if layer < AllValidItem || layer > NullAndEmptyList {
			return nil, corrupt("a repetition/definition layer of kind %d", layer)
		}
	}
	return l, nil
}

func isCorrupt(err error) bool {
	return err != nil && (errorsIs(err, ErrCorrupt) || errorsIs(err, ErrUnsupported))
}

// field sets one field of a layout, by its layout's field numbers.
func (l *Layout) field(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
	enc := func() (*Encoding, error) { return parseEncoding(b, 0) }
	var err error
	switch l.Kind {
	case MiniBlock:
		switch num {
		case 1:
			l.Rep, err = enc()
		case 2:
			l.Def, err = enc()
		case 3:
			l.Values, err = enc()
		case 4:
			l.Dictionary, err = enc()
		case 5:
			l.DictionaryItems = v
		case 6:
			err = l.layers(typ, v, b)
		case 7:
			l.Buffers = v
		case 8:
			l.RepIndexDepth = uint32(v) //nolint:gosec // checked where used
		case 9:
			l.Items = v
		case 10:
			l.LargeChunks = v != 0
		}
	case FullZip:
		switch num {
		case 1:
			l.BitsRep = uint32(v) //nolint:gosec // checked where used
		case 2:
			l.BitsDef = uint32(v) //nolint:gosec // checked where used
		case 3:
			l.BitsPerValue = uint32(v) //nolint:gosec // checked where used
		case 4:
			l.BitsPerOffset = uint32(v) //nolint:gosec // checked where used
		case 5:
			l.Items = v
		case 6:
			l.VisibleItems = uint32(v) //nolint:gosec // checked where used
		case 7:
			l.Values, err = enc()
		case 8:
			err = l.layers(typ, v, b)
		}
	case BlobLayout:
		switch num {
		case 1:
			if l.Inner, err = parsePageLayout(b); err == nil && l.Inner.Kind == BlobLayout {
				err = corrupt("a blob page's descriptors in a blob layout")
			}
		case 2:
			err = l.layers(typ, v, b)
		}
	case Constant:
		switch num {
		case 5:
			err = l.layers(typ, v, b)
		case 6:
			l.InlineValue = append([]byte{}, b...)
		case 7:
			l.Rep, err = enc()
		case 8:
			l.Def, err = enc()
		case 9:
			l.RepValues = v
		case 10:
			l.DefValues = v
		}
	}
	return err
}

func (l *Layout) layers(typ protowire.Type, v uint64, b []byte) error {
	vals, err := protowalk.Uints(nil, typ, v, b)
	if err != nil {
		return err
	}
	if len(l.Layers)+len(vals) > 64 {
		return corrupt("more than 64 repetition/definition layers")
	}
	for _, x := range vals {
		l.Layers = append(l.Layers, RepDefLayer(x)) //nolint:gosec // checked after parsing
	}
	return nil
}

// parseEncoding reads a CompressiveEncoding message.
func parseEncoding(msg []byte, depth int) (*Encoding, error) {
	if depth > maxEncodingDepth {
		return nil, corrupt("an encoding nested more than %d deep", maxEncodingDepth)
	}
	var (
		e    *Encoding
		body []byte
	)
	if err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, _ uint64, b []byte) error {
		if num < 1 || num > protowire.Number(Delta) {
			return fmt.Errorf("%w: a compressive encoding of kind %d (written by a newer Lance)", ErrUnsupported, num)
		}
		e, body = &Encoding{Kind: EncodingKind(num)}, b
		return nil
	}); err != nil {
		if isCorrupt(err) {
			return nil, err
		}
		return nil, corrupt("encoding: %v", err)
	}
	if e == nil {
		return nil, corrupt("an empty compressive encoding")
	}
	err := protowalk.Fields(body, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		return e.field(num, typ, v, b, depth)
	})
	if err != nil {
		if isCorrupt(err) {
			return nil, err
		}
		return nil, corrupt("%s encoding: %v", e.Kind, err)
	}
	return e, nil
}

// field sets one field of an encoding, by its kind's field numbers.
func (e *Encoding) field(num protowire.Number, typ protowire.Type, v uint64, b []byte, depth int) error {
	child := func(b []byte) (*Encoding, error) { return parseEncoding(b, depth+1) }
	var err error
	switch e.Kind {
	case Flat, InlineBitpacking:
		switch num {
		case 1:
			e.Bits = v
		case 2:
			e.Scheme, err = bufferScheme(b)
		}
	case Variable:
		switch num {
		case 1:
			e.Child, err = child(b)
		case 2:
			e.Scheme, err = bufferScheme(b)
		}
	case ConstantValue:
		if num == 1 {
			e.Value = append([]byte{}, b...)
		}
	case OutOfLineBitpacking:
		switch num {
		case 1:
			e.Bits = v
		case 3:
			e.Child, err = child(b)
		}
	case Fsst:
		switch num {
		case 1:
			e.Symbols = append([]byte{}, b...)
		case 2:
			e.Child, err = child(b)
		}
	case Dictionary:
		switch num {
		case 1:
			e.Child, err = child(b)
		case 2:
			e.Child2, err = child(b)
		case 3:
			e.Items = v
		}
	case Rle:
		switch num {
		case 1:
			e.Child, err = child(b)
		case 2:
			e.Child2, err = child(b)
		}
	case ByteStreamSplit:
		if num == 1 {
			e.Child, err = child(b)
		}
	case General:
		switch num {
		case 1:
			e.Scheme, err = bufferScheme(b)
		case 3:
			e.Child, err = child(b)
		}
	case FixedSizeList:
		switch num {
		case 1:
			e.Bits = v
		case 2:
			e.Child, err = child(b)
		case 3:
			e.HasValidity = v != 0
		}
	case PackedStruct:
		switch num {
		case 1:
			e.Widths, err = protowalk.Uints(e.Widths, typ, v, b)
		case 2:
			e.Child, err = child(b)
		}
	case VariablePackedStruct:
		if num == 1 {
			err = e.addPackedField(b, depth)
		}
	case Range, Delta: // a Range's third field is its step, a Delta's its deltas
		switch {
		case num == 1:
			e.Bits = v
		case num == 2:
			e.Start = v
		case num == 3 && e.Kind == Range:
			e.Step = v
		case num == 3:
			e.Child, err = child(b)
		}
	}
	return err
}

// maxPackedFields bounds a VariablePackedStruct's fields.
const maxPackedFields = 64

// addPackedField adds a VariablePackedStruct's field.
func (e *Encoding) addPackedField(b []byte, depth int) error {
	if len(e.Fields) >= maxPackedFields {
		return corrupt("a variable packed struct of more than %d fields", maxPackedFields)
	}
	f, err := parsePackedField(b, depth)
	e.Fields = append(e.Fields, f)
	return err
}

// parsePackedField reads a VariablePackedStruct.FieldEncoding.
func parsePackedField(msg []byte, depth int) (PackedField, error) {
	var f PackedField
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, b []byte) error {
		var err error
		switch num {
		case 1:
			f.Value, err = parseEncoding(b, depth+1)
		case 2:
			f.Bits = v
		case 3:
			f.LengthBits = v
		}
		return err
	})
	if err != nil {
		if isCorrupt(err) {
			return f, err
		}
		return f, corrupt("a packed field: %v", err)
	}
	return f, nil
}

// bufferScheme reads a BufferCompression's scheme.
func bufferScheme(msg []byte) (int, error) {
	var scheme uint64
	err := protowalk.Fields(msg, func(num protowire.Number, _ protowire.Type, v uint64, _ []byte) error {
		if num == 1 {
			scheme = v
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if scheme > Zstd {
		return 0, fmt.Errorf("%w: compression scheme %d", ErrUnsupported, scheme)
	}
	return int(scheme), nil //nolint:gosec // at most 2
}

// String spells an encoding tree, for errors and tests.
func (e *Encoding) String() string {
	if e == nil {
		return "-"
	}
	s := e.Kind.String()
	switch e.Kind {
	case Flat, InlineBitpacking, OutOfLineBitpacking, FixedSizeList:
		s += fmt.Sprintf("(%d)", e.Bits)
	case General:
		s += map[int]string{0: "(none)", LZ4: "(lz4)", Zstd: "(zstd)"}[e.Scheme]
	}
	if e.Scheme != 0 && e.Kind != General {
		s += map[int]string{LZ4: "+lz4", Zstd: "+zstd"}[e.Scheme]
	}
	if e.Child != nil {
		s += "[" + e.Child.String()
		if e.Child2 != nil {
			s += ", " + e.Child2.String()
		}
		s += "]"
	}
	return s
}
