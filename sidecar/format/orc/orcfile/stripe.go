package orcfile

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultMaxStripeBytes bounds what one stripe's streams decompress to.
const DefaultMaxStripeBytes = 1 << 30

// stripeReader decodes the columns of one stripe.
type stripeReader struct {
	f         *File
	d         *decompressor
	streams   map[[2]uint64][]byte // (column, kind) → its bytes, as stored
	encodings []encoding
	limit     int
	maxValues int // of a list column's elements
	mem       memory.Allocator
}

// ReadStripe decodes stripe i from its bytes (data is the file's bytes
// [Offset, Offset+Length) of the stripe) into one record batch of the
// file's schema, or of only the named top-level columns, in that order
// (nil: all). maxBytes bounds the decompressed streams (0: the default).
func (f *File) ReadStripe(data []byte, i int, columns []string, maxBytes int, mem memory.Allocator) (arrow.RecordBatch, error) {
	if i < 0 || i >= len(f.Stripes) {
		return nil, fmt.Errorf("stripe %d of %d", i, len(f.Stripes))
	}
	root, schema, err := f.project(columns)
	if err != nil {
		return nil, err
	}
	si := f.Stripes[i]
	if uint64(len(data)) != si.Length() {
		return nil, fmt.Errorf("stripe %d is %d bytes, %d given", i, si.Length(), len(data))
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxStripeBytes
	}
	d, err := newDecompressor(f.Compression, f.BlockSize)
	if err != nil {
		return nil, err
	}
	defer d.close()
	raw, err := d.decompress(data[si.IndexLength+si.DataLength:], maxTail)
	if err != nil {
		return nil, fmt.Errorf("stripe %d footer: %w", i, err)
	}
	sf, err := parseStripeFooter(raw)
	if err != nil {
		return nil, fmt.Errorf("stripe %d footer: %w", i, err)
	}
	if len(sf.encodings) != len(f.types) {
		return nil, errCorrupt(fmt.Sprintf("stripe %d has %d column encodings for %d columns", i, len(sf.encodings), len(f.types)), nil)
	}
	r := &stripeReader{f: f, d: d, streams: map[[2]uint64][]byte{}, encodings: sf.encodings, limit: maxBytes, maxValues: maxBytes / 8, mem: mem}
	var off uint64
	end := si.IndexLength + si.DataLength
	for _, s := range sf.streams {
		if s.length > end-off {
			return nil, errCorrupt(fmt.Sprintf("stripe %d: stream of column %d runs past the stripe's data", i, s.column), nil)
		}
		r.streams[[2]uint64{s.column, uint64(s.kind)}] = data[off : off+s.length]
		off += s.length
	}
	// Runs encode many values in few bytes: the values a stripe may
	// decode to are bounded by maxBytes as its streams are.
	if si.Rows > math.MaxInt32 || si.Rows > uint64(maxBytes/8) { //nolint:gosec // maxBytes > 0
		return nil, fmt.Errorf("%w: stripe %d of %d rows decodes to more than the bound of %d bytes", ErrCorrupt, i, si.Rows, maxBytes)
	}
	rows := int(si.Rows)
	cols, err := r.fields(root, rows, nil)
	if err != nil {
		return nil, fmt.Errorf("stripe %d: %w", i, err)
	}
	defer release(cols)
	return array.NewRecordBatch(schema, cols, int64(rows)), nil
}

// project returns the root struct and the schema of the named columns
// (nil: all of them): a struct of fewer fields, whose other columns'
// streams are never decompressed.
func (f *File) project(columns []string) (typeDesc, *arrow.Schema, error) {
	root := f.types[0]
	if columns == nil {
		return root, f.Schema, nil
	}
	sub := typeDesc{kind: root.kind}
	fields := make([]arrow.Field, 0, len(columns))
	for _, name := range columns {
		c := slices.Index(root.fieldNames, name)
		if c < 0 {
			return typeDesc{}, nil, fmt.Errorf("no column %q: the file's columns are %s", name, strings.Join(root.fieldNames, ", "))
		}
		sub.subtypes = append(sub.subtypes, root.subtypes[c])
		sub.fieldNames = append(sub.fieldNames, name)
		fields = append(fields, f.Schema.Field(c))
	}
	return sub, arrow.NewSchema(fields, nil), nil
}

// stream returns the decompressed bytes of a stream of a column (nil when
// the stripe has none), counting them against the stripe's limit.
func (r *stripeReader) stream(id uint64, kind streamKind) ([]byte, error) {
	b, ok := r.streams[[2]uint64{id, uint64(kind)}]
	if !ok {
		return nil, nil
	}
	out, err := r.d.decompress(b, r.limit)
	if err != nil {
		return nil, err
	}
	r.limit -= len(out)
	return out, nil
}

// present returns which of n values are not null (nil: all) and how many
// are. A column's present stream covers only the rows its parent struct
// has (parent: nil for all): under a null struct, a field is null too.
func (r *stripeReader) present(id uint64, n int, parent []bool) ([]bool, int, error) {
	b, err := r.stream(id, streamPresent)
	if err != nil {
		return nil, 0, err
	}
	if b == nil {
		return parent, count(parent, n), nil
	}
	own, err := booleans(b, count(parent, n))
	if err != nil {
		return nil, 0, err
	}
	if parent == nil {
		return own, count(own, n), nil
	}
	valid := make([]bool, n)
	k := 0
	for i, p := range parent {
		if p {
			valid[i] = own[k]
			k++
		}
	}
	return valid, count(valid, n), nil
}

// count is how many of valid's n values are true (nil: all).
func count(valid []bool, n int) int {
	if valid == nil {
		return n
	}
	m := 0
	for _, v := range valid {
		if v {
			m++
		}
	}
	return m
}

// ints decodes m integers of a column's stream in its encoding.
func (r *stripeReader) ints(id uint64, kind streamKind, m int, signed bool) ([]int64, error) {
	b, err := r.stream(id, kind)
	if err != nil {
		return nil, err
	}
	if b == nil && m > 0 {
		return nil, errCorrupt(fmt.Sprintf("no stream %d of column %d", kind, id), nil)
	}
	e := r.encodings[id].kind
	ir := &intReader{b: b, signed: signed, v2: e == encodingDirectV2 || e == encodingDictionaryV2}
	return ir.read(make([]int64, 0, m), m)
}

// column decodes n values of column id: n rows of a struct's field (parent
// says which of them the struct has), or the n elements of a list's lists.
func (r *stripeReader) column(id uint64, n int, parent []bool) (arrow.Array, error) {
	valid, m, err := r.present(id, n, parent)
	if err != nil {
		return nil, err
	}
	t := r.f.types[id]
	dt, err := arrowType(r.f.types, id, 0, "") // checked with its name when the schema was read
	if err != nil {
		return nil, err
	}
	b := array.NewBuilder(r.mem, dt)
	defer b.Release()
	// appendAll appends the m values through put, nulls where not valid.
	appendAll := func(put func(j int)) {
		b.Reserve(n)
		j := 0
		for i := range n {
			if valid != nil && !valid[i] {
				b.AppendNull()
				continue
			}
			put(j)
			j++
		}
	}
	switch t.kind {
	case KindBoolean:
		data, err := r.stream(id, streamData)
		if err != nil {
			return nil, err
		}
		vs, err := booleans(data, m)
		if err != nil {
			return nil, err
		}
		bb := b.(*array.BooleanBuilder)
		appendAll(func(j int) { bb.Append(vs[j]) })
	case KindByte:
		data, err := r.stream(id, streamData)
		if err != nil {
			return nil, err
		}
		vs, err := byteRLE(make([]byte, 0, m), data, m)
		if err != nil {
			return nil, err
		}
		bb := b.(*array.Int8Builder)
		appendAll(func(j int) { bb.Append(int8(vs[j])) }) //nolint:gosec // a signed byte
	case KindShort, KindInt, KindLong, KindDate:
		vs, err := r.ints(id, streamData, m, true)
		if err != nil {
			return nil, err
		}
		switch bb := b.(type) {
		case *array.Int16Builder:
			appendAll(func(j int) { bb.Append(int16(vs[j])) }) //nolint:gosec // ORC's smallint
		case *array.Int32Builder:
			appendAll(func(j int) { bb.Append(int32(vs[j])) }) //nolint:gosec // ORC's int
		case *array.Int64Builder:
			appendAll(func(j int) { bb.Append(vs[j]) })
		case *array.Date32Builder:
			appendAll(func(j int) { bb.Append(arrow.Date32(vs[j])) }) //nolint:gosec // days
		}
	case KindFloat, KindDouble:
		data, err := r.stream(id, streamData)
		if err != nil {
			return nil, err
		}
		width := 8
		if t.kind == KindFloat {
			width = 4
		}
		if len(data) < m*width {
			return nil, errCorrupt(fmt.Sprintf("%d values in %d bytes", m, len(data)), nil)
		}
		switch bb := b.(type) {
		case *array.Float32Builder:
			appendAll(func(j int) { bb.Append(math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))) })
		case *array.Float64Builder:
			appendAll(func(j int) { bb.Append(math.Float64frombits(binary.LittleEndian.Uint64(data[8*j:]))) })
		}
	case KindString, KindVarchar, KindChar, KindBinary:
		vals, err := r.strings(id, m)
		if err != nil {
			return nil, err
		}
		switch bb := b.(type) {
		case *array.StringBuilder:
			appendAll(func(j int) { bb.BinaryBuilder.Append(vals[j]) })
		case *array.BinaryBuilder:
			appendAll(func(j int) { bb.Append(vals[j]) })
		}
	case KindList:
		lengths, err := r.ints(id, streamLength, m, false)
		if err != nil {
			return nil, err
		}
		total := 0
		for _, l := range lengths {
			if l < 0 || int64(total)+l > int64(min(math.MaxInt32, r.maxValues)) {
				return nil, errCorrupt(fmt.Sprintf("lists of more than %d elements in one stripe", min(math.MaxInt32, r.maxValues)), nil)
			}
			total += int(l)
		}
		child, err := r.column(t.subtypes[0], total, nil)
		if err != nil {
			return nil, err
		}
		defer child.Release()
		offsets := make([]int32, 0, n+1)
		offsets = append(offsets, 0)
		j := 0
		for i := range n {
			if valid == nil || valid[i] {
				offsets = append(offsets, offsets[len(offsets)-1]+int32(lengths[j])) //nolint:gosec // summed above
				j++
			} else {
				offsets = append(offsets, offsets[len(offsets)-1])
			}
		}
		return listArray(dt.(*arrow.ListType), offsets, valid, child), nil
	case KindStruct:
		children, err := r.fields(t, n, valid)
		if err != nil {
			return nil, err
		}
		defer release(children)
		return structArray(dt.(*arrow.StructType), n, valid, children), nil
	default:
		return nil, fmt.Errorf("ORC type %s is not supported yet", t.kind)
	}
	return b.NewArray(), nil
}

// fields decodes the n rows of a struct's fields (valid: which rows the
// struct has; nil for all).
func (r *stripeReader) fields(t typeDesc, n int, valid []bool) ([]arrow.Array, error) {
	out := make([]arrow.Array, len(t.subtypes))
	for c, id := range t.subtypes {
		var err error
		if out[c], err = r.column(id, n, valid); err != nil {
			release(out)
			return nil, fmt.Errorf("column %q: %w", t.fieldNames[c], err)
		}
	}
	return out, nil
}

// release releases the arrays made so far.
func release(arrays []arrow.Array) {
	for _, a := range arrays {
		if a != nil {
			a.Release()
		}
	}
}

// strings decodes m values of a string or binary column: direct (bytes and
// their lengths) or dictionary (indices into a dictionary of lengths and
// bytes).
func (r *stripeReader) strings(id uint64, m int) ([][]byte, error) {
	enc := r.encodings[id]
	data, err := r.stream(id, streamData)
	if err != nil {
		return nil, err
	}
	split := func(buf []byte, lengths []int64) ([][]byte, error) {
		out := make([][]byte, len(lengths))
		for i, l := range lengths {
			if l < 0 || l > int64(len(buf)) {
				return nil, errCorrupt(fmt.Sprintf("a value of %d bytes with %d left", l, len(buf)), nil)
			}
			out[i], buf = buf[:l], buf[l:]
		}
		return out, nil
	}
	switch enc.kind {
	case encodingDirect, encodingDirectV2:
		lengths, err := r.ints(id, streamLength, m, false)
		if err != nil {
			return nil, err
		}
		return split(data, lengths)
	case encodingDictionary, encodingDictionaryV2:
		if enc.dictionarySize > uint64(r.limit) {
			return nil, errCorrupt(fmt.Sprintf("a dictionary of %d entries", enc.dictionarySize), nil)
		}
		dictData, err := r.stream(id, streamDictionaryData)
		if err != nil {
			return nil, err
		}
		lengths, err := r.ints(id, streamLength, int(enc.dictionarySize), false) //nolint:gosec // bounded above
		if err != nil {
			return nil, err
		}
		dict, err := split(dictData, lengths)
		if err != nil {
			return nil, err
		}
		ir := &intReader{b: data, v2: enc.kind == encodingDictionaryV2}
		idx, err := ir.read(make([]int64, 0, m), m)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, m)
		for i, k := range idx {
			if k < 0 || k >= int64(len(dict)) {
				return nil, errCorrupt(fmt.Sprintf("dictionary index %d of %d", k, len(dict)), nil)
			}
			out[i] = dict[k]
		}
		return out, nil
	}
	return nil, errCorrupt(fmt.Sprintf("encoding %d of a string column", enc.kind), nil)
}

// listArray makes a list array of offsets (n+1) over child.
func listArray(dt *arrow.ListType, offsets []int32, valid []bool, child arrow.Array) arrow.Array {
	bitmap, nulls := validity(valid, len(offsets)-1)
	data := array.NewData(dt, len(offsets)-1, []*memory.Buffer{bitmap, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(offsets))},
		[]arrow.ArrayData{child.Data()}, nulls, 0)
	defer data.Release()
	return array.NewListData(data)
}

// structArray makes a struct array of n rows over its fields' arrays.
func structArray(dt *arrow.StructType, n int, valid []bool, children []arrow.Array) arrow.Array {
	bitmap, nulls := validity(valid, n)
	childData := make([]arrow.ArrayData, len(children))
	for c, ch := range children {
		childData[c] = ch.Data()
	}
	data := array.NewData(dt, n, []*memory.Buffer{bitmap}, childData, nulls, 0)
	defer data.Release()
	return array.NewStructData(data)
}

// validity packs valid into an Arrow bitmap (nil when every value is).
func validity(valid []bool, n int) (*memory.Buffer, int) {
	if valid == nil {
		return nil, 0
	}
	bits := make([]byte, (n+7)/8)
	nulls := 0
	for i, v := range valid[:n] {
		if v {
			bits[i/8] |= 1 << (i % 8)
		} else {
			nulls++
		}
	}
	return memory.NewBufferBytes(bits), nulls
}
