package orcfile

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// TailSize is how many bytes at the end of a file ReadTail wants first:
// most tails fit, and a larger one says how much more it needs.
const TailSize = 16 << 10

// maxTail bounds the postscript, footer and metadata together.
const maxTail = 64 << 20

// File is what an ORC file's tail says: its stripes, schema and codec.
type File struct {
	Size        int64
	Rows        uint64
	Compression Compression
	BlockSize   uint64
	Stripes     []StripeInfo
	Schema      *arrow.Schema
	types       []typeDesc
}

// TailLength returns how many bytes at the end of a file of size bytes hold
// its tail, from the last TailSize (or fewer) of them.
func TailLength(size int64, last []byte) (int64, error) {
	if len(last) == 0 || int64(len(last)) > size {
		return 0, errCorrupt("file tail", nil)
	}
	psLen := int64(last[len(last)-1])
	if psLen+1 > int64(len(last)) {
		return 0, errCorrupt("postscript length", nil)
	}
	ps, err := parsePostScript(last[len(last)-1-int(psLen) : len(last)-1])
	if err != nil {
		return 0, err
	}
	if ps.magic != "ORC" {
		return 0, fmt.Errorf("%w: no ORC magic in the postscript (not an ORC file, or cut short)", ErrCorrupt)
	}
	n := 1 + psLen + int64(ps.footerLength) + int64(ps.metadataLength) //nolint:gosec // bounded below
	if ps.footerLength > maxTail || ps.metadataLength > maxTail || n > size || n > maxTail {
		return 0, errCorrupt(fmt.Sprintf("a tail of %d+%d bytes in a file of %d", ps.footerLength, ps.metadataLength, size), nil)
	}
	return n, nil
}

// ParseTail reads a file's tail: tail is its last TailLength bytes.
func ParseTail(size int64, tail []byte) (*File, error) {
	n, err := TailLength(size, tail)
	if err != nil {
		return nil, err
	}
	if int64(len(tail)) < n {
		return nil, errCorrupt(fmt.Sprintf("tail of %d bytes, the postscript says %d", len(tail), n), nil)
	}
	tail = tail[int64(len(tail))-n:]
	psLen := int(tail[len(tail)-1])
	ps, _ := parsePostScript(tail[len(tail)-1-psLen : len(tail)-1])
	d, err := newDecompressor(ps.compression, ps.blockSize)
	if err != nil {
		return nil, err
	}
	defer d.close()
	footerStart := len(tail) - 1 - psLen - int(ps.footerLength) //nolint:gosec // bounded by TailLength
	raw, err := d.decompress(tail[footerStart:len(tail)-1-psLen], maxTail)
	if err != nil {
		return nil, fmt.Errorf("footer: %w", err)
	}
	ft, err := parseFooter(raw)
	if err != nil {
		return nil, err
	}
	f := &File{Size: size, Rows: ft.rows, Compression: ps.compression, BlockSize: ps.blockSize, Stripes: ft.stripes, types: ft.types}
	if err := checkStripes(ft, size); err != nil {
		return nil, err
	}
	if f.Schema, err = schemaOf(f.types); err != nil {
		return nil, err
	}
	return f, nil
}

// schemaOf maps the type tree to Arrow: its root is a struct of columns.
func schemaOf(types []typeDesc) (*arrow.Schema, error) {
	if len(types) == 0 || types[0].kind != KindStruct {
		return nil, errCorrupt("the root type is not a struct", nil)
	}
	// A tree: every type but the root is the child of one earlier type.
	parents := make([]int, len(types))
	for id, t := range types {
		for _, sub := range t.subtypes {
			if sub <= uint64(id) || sub >= uint64(len(types)) || parents[sub] != 0 {
				return nil, errCorrupt(fmt.Sprintf("type %d names type %d", id, sub), nil)
			}
			parents[sub] = id + 1
		}
	}
	root, err := arrowType(types, 0, 0, "")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(root.(*arrow.StructType).Fields(), nil), nil
}

// arrowType is the Arrow type of column id, as pyarrow reads it; path
// names the column in errors ("meta.tags[]"; "" for the root).
func arrowType(types []typeDesc, id uint64, depth int, path string) (arrow.DataType, error) {
	if id >= uint64(len(types)) || depth > 64 {
		return nil, errCorrupt(fmt.Sprintf("type %d of %d", id, len(types)), nil)
	}
	t := types[id]
	switch t.kind {
	case KindBoolean:
		return arrow.FixedWidthTypes.Boolean, nil
	case KindByte:
		return arrow.PrimitiveTypes.Int8, nil
	case KindShort:
		return arrow.PrimitiveTypes.Int16, nil
	case KindInt:
		return arrow.PrimitiveTypes.Int32, nil
	case KindLong:
		return arrow.PrimitiveTypes.Int64, nil
	case KindFloat:
		return arrow.PrimitiveTypes.Float32, nil
	case KindDouble:
		return arrow.PrimitiveTypes.Float64, nil
	case KindString, KindVarchar, KindChar:
		return arrow.BinaryTypes.String, nil
	case KindBinary:
		return arrow.BinaryTypes.Binary, nil
	case KindDate:
		return arrow.FixedWidthTypes.Date32, nil
	case KindList:
		if len(t.subtypes) != 1 || t.subtypes[0] <= id {
			return nil, errCorrupt(fmt.Sprintf("list type %d", id), nil)
		}
		elem, err := arrowType(types, t.subtypes[0], depth+1, path+"[]")
		if err != nil {
			return nil, err
		}
		return arrow.ListOf(elem), nil
	case KindStruct:
		if len(t.subtypes) != len(t.fieldNames) {
			return nil, errCorrupt(fmt.Sprintf("struct type %d: %d fields, %d names", id, len(t.subtypes), len(t.fieldNames)), nil)
		}
		fields := make([]arrow.Field, len(t.subtypes))
		for i, sub := range t.subtypes {
			if sub <= id {
				return nil, errCorrupt(fmt.Sprintf("struct type %d names type %d", id, sub), nil)
			}
			name := t.fieldNames[i]
			if path != "" {
				name = path + "." + name
			}
			ft, err := arrowType(types, sub, depth+1, name)
			if err != nil {
				return nil, err
			}
			fields[i] = arrow.Field{Name: t.fieldNames[i], Type: ft, Nullable: true}
		}
		return arrow.StructOf(fields...), nil
	}
	return nil, fmt.Errorf("column %q is ORC type %s, which is not supported yet: convert it to a supported type (boolean, integers, float, double, string, binary, date, array, struct), or leave it out of the stream's columns", path, t.kind)
}

// checkStripes checks that every stripe lies inside a file of size bytes
// and that together they hold the footer's rows.
func checkStripes(ft footer, size int64) error {
	u := uint64(size) //nolint:gosec // size > 0
	var rows uint64
	for i, s := range ft.stripes {
		if s.IndexLength > u || s.DataLength > u || s.FooterLength > u || s.Offset > u || s.Length() > u-s.Offset {
			return errCorrupt(fmt.Sprintf("stripe %d at %d+%d in a file of %d bytes", i, s.Offset, s.Length(), size), nil)
		}
		rows += s.Rows
	}
	if rows != ft.rows {
		return errCorrupt(fmt.Sprintf("the stripes hold %d rows, the footer says %d", rows, ft.rows), nil)
	}
	return nil
}
