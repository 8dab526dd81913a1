package mds

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"

	"github.com/shardfeed/shardfeed/sidecar/format"
)

// MetaEncoding is the field metadata key that keeps a column's MDS encoding.
const MetaEncoding = "shardfeed.encoding"

// MetaShape is format.MetaShape: the shape of a fixed-shape ndarray column.
const MetaShape = format.MetaShape

// column decodes one MDS column into an Arrow builder.
type column struct {
	name     string
	encoding string
	// size is the encoded size of every value, or -1 when it varies (and
	// each sample says it in its header).
	size   int
	field  arrow.Field
	decode func(b array.Builder, data []byte) error
	// raw says how a value's stored bytes serve as Arrow's, if they do.
	raw rawKind
	// refused says why the column may not be read (pkl), if it may not.
	refused error
}

// rawKind is how a column's stored values read in place (see RawColumns).
type rawKind int

const (
	// notRaw values must be decoded.
	notRaw rawKind = iota
	// rawBytes are Arrow's bytes as they are: fixed-width little-endian
	// values, or binary values.
	rawBytes
	// rawUTF8 are a string column's values, once checked to be UTF-8.
	rawUTF8
)

// dtype is an ndarray element type: its MDS code, width and Arrow type.
type dtype struct {
	name  string
	code  byte
	width int
	arrow arrow.DataType
}

// dtypes are the ndarray element types of MDS, by name.
var dtypes = map[string]dtype{
	"uint8":   {"uint8", 8, 1, arrow.PrimitiveTypes.Uint8},
	"int8":    {"int8", 9, 1, arrow.PrimitiveTypes.Int8},
	"uint16":  {"uint16", 16, 2, arrow.PrimitiveTypes.Uint16},
	"int16":   {"int16", 17, 2, arrow.PrimitiveTypes.Int16},
	"float16": {"float16", 18, 2, arrow.FixedWidthTypes.Float16},
	"uint32":  {"uint32", 32, 4, arrow.PrimitiveTypes.Uint32},
	"int32":   {"int32", 33, 4, arrow.PrimitiveTypes.Int32},
	"float32": {"float32", 34, 4, arrow.PrimitiveTypes.Float32},
	"uint64":  {"uint64", 64, 8, arrow.PrimitiveTypes.Uint64},
	"int64":   {"int64", 65, 8, arrow.PrimitiveTypes.Int64},
	"float64": {"float64", 66, 8, arrow.PrimitiveTypes.Float64},
}

func dtypeByCode(code byte) (dtype, bool) {
	for _, d := range dtypes {
		if d.code == code {
			return d, true
		}
	}
	return dtype{}, false
}

// appendValues appends n little-endian values of d from data to a builder
// of d's Arrow type.
func appendValues(b array.Builder, d dtype, data []byte) {
	n := len(data) / d.width
	switch bb := b.(type) {
	case *array.Uint8Builder:
		bb.AppendValues(data[:n], nil)
	case *array.Int8Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(int8(data[i]))
		}
	case *array.Uint16Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case *array.Int16Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(int16(binary.LittleEndian.Uint16(data[2*i:])))
		}
	case *array.Float16Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(float16.FromBits(binary.LittleEndian.Uint16(data[2*i:])))
		}
	case *array.Uint32Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case *array.Int32Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
	case *array.Float32Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
		}
	case *array.Uint64Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case *array.Int64Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(int64(binary.LittleEndian.Uint64(data[8*i:])))
		}
	case *array.Float64Builder:
		bb.Reserve(n)
		for i := range n {
			bb.UnsafeAppend(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:])))
		}
	}
}

// scalar returns the column of a fixed-width scalar encoding.
func scalar(d dtype) (int, arrow.DataType, func(array.Builder, []byte) error) {
	return d.width, d.arrow, func(b array.Builder, data []byte) error {
		appendValues(b, d, data)
		return nil
	}
}

// newColumn returns the decoder of a column with an MDS encoding.
func newColumn(name, encoding string) (column, error) {
	c := column{name: name, encoding: encoding, size: -1}
	meta := arrow.NewMetadata([]string{MetaEncoding}, []string{encoding})
	base, arg, hasArg := strings.Cut(encoding, ":")
	if hasArg && base != "ndarray" {
		return c, fmt.Errorf("column %q: encoding %q takes no argument", name, encoding)
	}
	var typ arrow.DataType
	switch base {
	case "bytes", "pil", "jpeg", "png":
		// Images stay encoded: decoding them is the trainer's job.
		typ = arrow.BinaryTypes.Binary
		c.raw = rawBytes
		c.decode = func(b array.Builder, data []byte) error {
			b.(*array.BinaryBuilder).Append(data)
			return nil
		}
	case "str", "str_decimal", "json":
		// A decimal keeps its exact text; JSON its text.
		typ = arrow.BinaryTypes.String
		c.raw = rawUTF8
		c.decode = func(b array.Builder, data []byte) error {
			if !utf8.Valid(data) {
				return fmt.Errorf("column %q: %s value is not UTF-8", name, base)
			}
			b.(*array.StringBuilder).BinaryBuilder.Append(data)
			return nil
		}
	case "int":
		c.size, typ, c.decode = scalar(dtypes["int64"])
		c.raw = rawBytes
	case "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32", "float64":
		c.size, typ, c.decode = scalar(dtypes[base])
		c.raw = rawBytes
	case "str_int":
		typ = arrow.PrimitiveTypes.Int64
		c.decode = func(b array.Builder, data []byte) error {
			v, err := strconv.ParseInt(string(data), 10, 64)
			if err != nil {
				return fmt.Errorf("column %q: str_int value %.40q is not a 64-bit integer", name, data)
			}
			b.(*array.Int64Builder).Append(v)
			return nil
		}
	case "str_float":
		typ = arrow.PrimitiveTypes.Float64
		c.decode = func(b array.Builder, data []byte) error {
			v, err := strconv.ParseFloat(string(data), 64)
			if err != nil && !isRangeErr(err) {
				return fmt.Errorf("column %q: str_float value %.40q is not a number", name, data)
			}
			b.(*array.Float64Builder).Append(v)
			return nil
		}
	case "list[pil]", "list[jpeg]", "list[png]":
		typ = arrow.ListOf(arrow.BinaryTypes.Binary)
		c.decode = func(b array.Builder, data []byte) error {
			if len(data) < 4 {
				return fmt.Errorf("column %q: %s value of %d bytes has no header", name, base, len(data))
			}
			return appendBlobList(b, name, data[4:]) // 4 bytes reserved by MDS
		}
	case "jpeg_array", "jpegarray":
		typ = arrow.ListOf(arrow.BinaryTypes.Binary)
		c.decode = func(b array.Builder, data []byte) error { return appendBlobList(b, name, data) }
	case "ndarray":
		return newNDArrayColumn(c, arg, hasArg, meta)
	case "pkl":
		// Its bytes can be skipped; reading them is refused (see refused).
		typ = arrow.BinaryTypes.Binary
		c.refused = fmt.Errorf("column %q uses the pkl encoding (Python pickle), which shardfeed refuses to read: unpickling can run arbitrary code; re-encode the column as json, bytes or ndarray, or leave it out with the stream's columns", name)
		c.decode = func(array.Builder, []byte) error { return c.refused }
	default:
		return c, fmt.Errorf("column %q: unknown MDS encoding %q", name, encoding)
	}
	c.field = arrow.Field{Name: name, Type: typ, Nullable: false, Metadata: meta}
	return c, nil
}

func isRangeErr(err error) bool { return errors.Is(err, strconv.ErrRange) }

// appendBlobList reads [count uint32][count sizes uint32][blobs].
func appendBlobList(b array.Builder, name string, data []byte) error {
	lb := b.(*array.ListBuilder)
	if len(data) < 4 {
		return fmt.Errorf("column %q: image list of %d bytes has no count", name, len(data))
	}
	n := uint64(binary.LittleEndian.Uint32(data))
	if 4+4*n > uint64(len(data)) {
		return fmt.Errorf("column %q: image list says %d images but has %d bytes", name, n, len(data))
	}
	pos := 4 + 4*n
	sizes := data[4:pos]
	total := pos
	for i := range n {
		total += uint64(binary.LittleEndian.Uint32(sizes[4*i:]))
	}
	if total != uint64(len(data)) {
		return fmt.Errorf("column %q: image list sizes add up to %d bytes, value has %d", name, total, len(data))
	}
	lb.Append(true)
	vb := lb.ValueBuilder().(*array.BinaryBuilder)
	for i := range n {
		sz := uint64(binary.LittleEndian.Uint32(sizes[4*i:]))
		vb.Append(data[pos : pos+sz])
		pos += sz
	}
	return nil
}

// newNDArrayColumn handles "ndarray", "ndarray:dtype" and
// "ndarray:dtype:d1,d2,…":
//   - dtype and shape fixed: fixed_size_list<dtype>[prod(shape)], the shape
//     in the field's metadata;
//   - dtype fixed: struct<data: list<dtype>, shape: list<int64>>;
//   - neither: struct<dtype: string, shape: list<int64>, data: binary>, the
//     values' raw little-endian bytes.
func newNDArrayColumn(c column, arg string, hasArg bool, meta arrow.Metadata) (column, error) {
	if !hasArg {
		c.field = arrow.Field{Name: c.name, Type: arrow.StructOf(
			arrow.Field{Name: "dtype", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "shape", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
			arrow.Field{Name: "data", Type: arrow.BinaryTypes.Binary},
		), Metadata: meta}
		c.decode = func(b array.Builder, data []byte) error {
			if len(data) < 1 {
				return fmt.Errorf("column %q: empty ndarray value", c.name)
			}
			d, ok := dtypeByCode(data[0])
			if !ok {
				return fmt.Errorf("column %q: ndarray dtype code %d is not an MDS dtype", c.name, data[0])
			}
			shape, values, err := readShape(c.name, data[1:], d)
			if err != nil {
				return err
			}
			sb := b.(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(d.name)
			appendShape(sb.FieldBuilder(1), shape)
			sb.FieldBuilder(2).(*array.BinaryBuilder).Append(values)
			return nil
		}
		return c, nil
	}
	dname, shapeText, hasShape := strings.Cut(arg, ":")
	d, ok := dtypes[dname]
	if !ok {
		return c, fmt.Errorf("column %q: ndarray dtype %q is not an MDS dtype", c.name, dname)
	}
	if !hasShape {
		c.field = arrow.Field{Name: c.name, Type: arrow.StructOf(
			arrow.Field{Name: "data", Type: arrow.ListOf(d.arrow)},
			arrow.Field{Name: "shape", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
		), Metadata: meta}
		c.decode = func(b array.Builder, data []byte) error {
			shape, values, err := readShape(c.name, data, d)
			if err != nil {
				return err
			}
			sb := b.(*array.StructBuilder)
			sb.Append(true)
			lb := sb.FieldBuilder(0).(*array.ListBuilder)
			lb.Append(true)
			appendValues(lb.ValueBuilder(), d, values)
			appendShape(sb.FieldBuilder(1), shape)
			return nil
		}
		return c, nil
	}
	count := int64(1)
	for _, dim := range strings.Split(shapeText, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(dim), 10, 32)
		if err != nil || n < 1 || count*n > math.MaxInt32 {
			return c, fmt.Errorf("column %q: ndarray shape %q: dimensions are positive integers, at most 2^31 values", c.name, shapeText)
		}
		count *= n
	}
	c.size = int(count) * d.width
	meta = arrow.NewMetadata([]string{MetaEncoding, MetaShape}, []string{c.encoding, shapeText})
	c.field = arrow.Field{Name: c.name, Type: arrow.FixedSizeListOf(int32(count), d.arrow), Metadata: meta}
	c.raw = rawBytes
	c.decode = func(b array.Builder, data []byte) error {
		lb := b.(*array.FixedSizeListBuilder)
		lb.Append(true)
		appendValues(lb.ValueBuilder(), d, data)
		return nil
	}
	return c, nil
}

// readShape reads [ndim<<2 | shape width code][shape] and checks that the
// values that follow fill the shape.
func readShape(name string, data []byte, d dtype) (shape []int64, values []byte, err error) {
	if len(data) < 1 {
		return nil, nil, fmt.Errorf("column %q: ndarray value has no shape", name)
	}
	ndim := int(data[0] >> 2)
	width := 1 << (data[0] & 3)
	end := 1 + ndim*width
	if ndim == 0 || end > len(data) {
		return nil, nil, fmt.Errorf("column %q: ndarray shape of %d dimensions does not fit the value", name, ndim)
	}
	shape = make([]int64, ndim)
	count := uint64(1)
	for i := range ndim {
		p := data[1+i*width:]
		var v uint64
		switch width {
		case 1:
			v = uint64(p[0])
		case 2:
			v = uint64(binary.LittleEndian.Uint16(p))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(p))
		default:
			v = binary.LittleEndian.Uint64(p)
		}
		if v == 0 || v > uint64(len(data)) {
			return nil, nil, fmt.Errorf("column %q: ndarray dimension %d does not fit the value", name, v)
		}
		shape[i] = int64(v)
		count *= v
		if count > uint64(len(data)) {
			return nil, nil, fmt.Errorf("column %q: ndarray shape %v does not fit the value", name, shape[:i+1])
		}
	}
	values = data[end:]
	if count*uint64(d.width) != uint64(len(values)) {
		return nil, nil, fmt.Errorf("column %q: ndarray of shape %v and dtype %s needs %d bytes, value has %d", name, shape, d.name, count*uint64(d.width), len(values))
	}
	return shape, values, nil
}

func appendShape(b array.Builder, shape []int64) {
	lb := b.(*array.ListBuilder)
	lb.Append(true)
	lb.ValueBuilder().(*array.Int64Builder).AppendValues(shape, nil)
}
