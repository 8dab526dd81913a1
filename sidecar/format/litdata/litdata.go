// Package litdata reads LitData's optimized datasets natively: what
// litdata.optimize writes, an index.json listing chunk-*.bin files, each
// chunk a header (its item count and offsets) and its items, each item a
// header of its leaves' sizes and the leaves, serialized by their LitData
// data formats; or, for chunks of dicts of plain values, the rows as an
// Arrow IPC file appended to the chunk. A shard is a chunk.
//
// A chunk (as litdata.optimize writes it with the default PyTreeLoader,
// uncompressed), every integer a little-endian uint32, N items of L leaves
// (index.json's data_format lists each leaf's format, in order):
//
//	N
//	N+1 offsets, each from the chunk's first byte: item i is
//	        [offset i, offset i+1)
//	item 0, item 1, …
//	optional: an Arrow IPC file of the same rows, its length (uint32)
//	        and "LDARW01\x00"
//
// An item: L sizes, then the L leaves' bytes end to end, each serialized
// by its format (int: int64, str: UTF-8, numpy: a dtype-and-shape header
// and the values, …). A TokensLoader chunk is N and N+1 offsets, then the
// items' tokens end to end with no per-item header. worked_test.go builds
// a chunk byte by byte.
package litdata

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
)

// Format is LitData's optimized format.
type Format struct{}

var (
	_ format.Format  = Format{}
	_ format.Indexer = Format{}
)

// Kind implements format.Format.
func (Format) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatLitData }

// Suffixes implements format.Indexer: the chunks (index.json lists them).
func (Format) Suffixes() []string { return []string{".bin"} }

// blockSizeOption is the option of a TokensLoader dataset's block size.
const blockSizeOption = "block-size"

// Options lists the format's own index option (format.Option): the
// block size of a dataset written with LitData's TokensLoader.
func (Format) Options() []format.Option {
	return []format.Option{{Flag: blockSizeOption, Field: "spec.streams[].litdata.blockSize",
		Help:  "the tokens of a sample of a dataset written with LitData's TokensLoader (its block_size)",
		For:   "a dataset written with LitData's TokensLoader",
		Count: "tokens",
		Spec: func(s *datav1alpha1.Stream) string {
			if s.LitData == nil {
				return ""
			}
			return strconv.FormatInt(s.LitData.BlockSize, 10)
		}}}
}

// IndexHelp is shardfeed index's help of a litdata stream.
func (Format) IndexHelp() string {
	return `URI is what litdata.optimize wrote: its index.json names the chunks,
each read and decoded once and hashed; a shard is a chunk. A dataset
written with LitData's TokensLoader needs --block-size (TokensLoader's
block_size): a sample is a block of that many tokens of a chunk, as
LitData reads it.`
}

// Open implements format.Format.
func (Format) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if f.LitData == nil {
		return nil, fmt.Errorf(`the shardfeed index of a litdata stream has no "litdata": re-run shardfeed index --format litdata`)
	}
	schema, err := Schema(f.LitData)
	if err != nil {
		return nil, err
	}
	return &reader{f: f, schema: schema}, nil
}

type reader struct {
	f      *indexfile.File
	schema *arrow.Schema
}

func (r *reader) Parts(i int) []format.Part { return format.FileParts(r.f, i, false) }

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

func (r *reader) Records(_ context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.f.Shard(i)
	rec, err := Decode(r.f.LitData, parts[0], e.Samples, columns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name, err)
	}
	return format.RecordsOf([]arrow.RecordBatch{rec})
}

// leaf is how one data format's values are read.
type leaf struct {
	typ arrow.DataType
	// elem is an array's element type (a list column); nil for a
	// scalar.
	elem arrow.DataType
	size int // an element's (or a fixed scalar's) bytes; 0: variable
	// array, for LitData's multi-dimensional arrays ("numpy", "tensor"),
	// is each value's header and shape: the column is a fixed-size list
	// of its elements (a scalar of its dtype for a 0-d one).
	array *arrayLeaf
}

// arrayLeaf is a column of "numpy" or "tensor" values: each a header (the
// dtype's code, the rank, each dimension: little-endian uint32s for
// numpy, big-endian for torch) and the elements, little-endian, in C order.
type arrayLeaf struct {
	bigEndian bool
	code      int
	shape     []int
	elems     int
}

// numpyTypes and torchTypes are LitData's dtype codes (its
// _NUMPY_DTYPES_MAPPING and _TORCH_DTYPES_MAPPING): the element types of
// 1-D arrays (no_header_numpy:N, no_header_tensor:N). The others (complex,
// object, bytes, str, void, bfloat16) are refused.
var (
	numpyTypes = map[int]arrow.DataType{0: arrow.PrimitiveTypes.Int8, 1: arrow.PrimitiveTypes.Int16, 2: arrow.PrimitiveTypes.Int32,
		3: arrow.PrimitiveTypes.Int64, 4: arrow.PrimitiveTypes.Uint8, 5: arrow.PrimitiveTypes.Uint16, 6: arrow.PrimitiveTypes.Uint32,
		7: arrow.PrimitiveTypes.Uint64, 8: arrow.FixedWidthTypes.Float16, 9: arrow.PrimitiveTypes.Float32, 10: arrow.PrimitiveTypes.Float64,
		13: arrow.FixedWidthTypes.Boolean}
	torchTypes = map[int]arrow.DataType{0: arrow.PrimitiveTypes.Float32, 1: arrow.PrimitiveTypes.Float32, 2: arrow.PrimitiveTypes.Float64,
		3: arrow.PrimitiveTypes.Float64, 8: arrow.FixedWidthTypes.Float16, 9: arrow.FixedWidthTypes.Float16, 11: arrow.PrimitiveTypes.Uint8,
		12: arrow.PrimitiveTypes.Int8, 13: arrow.PrimitiveTypes.Int16, 14: arrow.PrimitiveTypes.Int16, 15: arrow.PrimitiveTypes.Int32,
		16: arrow.PrimitiveTypes.Int32, 17: arrow.PrimitiveTypes.Int64, 18: arrow.PrimitiveTypes.Int64, 19: arrow.FixedWidthTypes.Boolean,
		20: arrow.PrimitiveTypes.Uint16}
)

// Supported lists the data formats read, for messages.
const Supported = "int, float, bool, str, text, bytes, jpeg, 1-D arrays (no_header_numpy, no_header_tensor) and arrays of one shape " +
	"a column (numpy, tensor) of integers, floats and booleans"

// maxArrayBytes bounds one array value's bytes.
const maxArrayBytes = 1 << 30

// elemType is the element type of LitData's dtype code for a numpy or a
// torch data format.
func elemType(torch bool, code int) (arrow.DataType, int, bool) {
	types := numpyTypes
	if torch {
		types = torchTypes
	}
	t, ok := types[code]
	if !ok {
		return nil, 0, false
	}
	size := 1
	if fw, ok := t.(arrow.FixedWidthDataType); ok && t.ID() != arrow.BOOL {
		size = fw.BitWidth() / 8
	}
	return t, size, true
}

// leafFor returns how the values of column i of l are read.
func leafFor(l *indexfile.LitData, i int) (leaf, error) {
	df := l.DataFormats[i]
	if df != "numpy" && df != "tensor" {
		return leafOf(df)
	}
	a, ok := l.Arrays[l.Columns[i]]
	if !ok {
		return leaf{}, fmt.Errorf("LitData data format %q without its dtype and shape: re-run shardfeed index", df)
	}
	t, size, ok := elemType(df == "tensor", a.DType)
	if !ok {
		return leaf{}, fmt.Errorf("LitData data format %q: its element type (code %d) is not one shardfeed serves; it reads %s", df, a.DType, Supported)
	}
	n := 1
	for _, d := range a.Shape {
		if d < 0 || d > 0 && n > maxArrayBytes/size/d {
			return leaf{}, fmt.Errorf("LitData %s of shape %v: over %d bytes a value", df, a.Shape, maxArrayBytes)
		}
		n *= d
	}
	if n == 0 && len(a.Shape) > 0 {
		return leaf{}, fmt.Errorf("LitData %s of shape %v holds no element: shardfeed serves arrays of one element or more", df, a.Shape)
	}
	arr := &arrayLeaf{bigEndian: df == "tensor", code: a.DType, shape: a.Shape, elems: n}
	if len(a.Shape) == 0 {
		return leaf{typ: t, elem: t, size: size, array: arr}, nil
	}
	return leaf{typ: arrow.FixedSizeListOf(int32(n), t), elem: t, size: size, array: arr}, nil //nolint:gosec // bounded above
}

// leafOf returns how values of data format df are read.
func leafOf(df string) (leaf, error) {
	switch df {
	case "int":
		return leaf{typ: arrow.PrimitiveTypes.Int64, size: 8}, nil
	case "float":
		return leaf{typ: arrow.PrimitiveTypes.Float64, size: 8}, nil
	case "bool":
		return leaf{typ: arrow.FixedWidthTypes.Boolean, size: 1}, nil
	case "str", "text":
		return leaf{typ: arrow.BinaryTypes.String}, nil
	case "bytes", "jpeg":
		return leaf{typ: arrow.BinaryTypes.Binary}, nil
	}
	name, code, ok := strings.Cut(df, ":")
	if ok && (name == "no_header_numpy" || name == "no_header_tensor") {
		n, err := strconv.Atoi(code)
		if t, size, known := elemType(name == "no_header_tensor", n); err == nil && known {
			return leaf{typ: arrow.ListOf(t), elem: t, size: size}, nil
		}
		return leaf{}, fmt.Errorf("LitData data format %q: its element type (code %s) is not one shardfeed serves; it reads %s", df, code, Supported)
	}
	return leaf{}, fmt.Errorf("LitData data format %q is not read by shardfeed (it reads %s): store the leaf as one of those", df, Supported)
}

// Schema is a litdata stream's Arrow schema: a column per leaf.
func Schema(l *indexfile.LitData) (*arrow.Schema, error) {
	if l.BlockSize > 0 {
		lf, err := leafOf(l.DataFormats[0])
		if err != nil || lf.elem == nil || len(l.Columns) != 1 || l.BlockSize > math.MaxInt32 {
			return nil, fmt.Errorf("a TokensLoader dataset of %v and a block size of %d: re-run shardfeed index", l.DataFormats, l.BlockSize)
		}
		return arrow.NewSchema([]arrow.Field{{Name: l.Columns[0], Type: arrow.FixedSizeListOf(int32(l.BlockSize), lf.elem), Nullable: true}}, nil), nil
	}
	fields := make([]arrow.Field, len(l.Columns))
	for i, c := range l.Columns {
		lf, err := leafFor(l, i)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c, err)
		}
		fields[i] = arrow.Field{Name: c, Type: lf.typ, Nullable: true}
		if lf.array != nil && len(lf.array.shape) > 1 {
			// The Python client hands the column over as (rows, *shape).
			dims := make([]string, len(lf.array.shape))
			for k, d := range lf.array.shape {
				dims[k] = strconv.Itoa(d)
			}
			fields[i].Metadata = arrow.NewMetadata([]string{format.MetaShape}, []string{strings.Join(dims, ",")})
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// treeSpec is a node of LitData's data_spec (torch's pytree spec, as JSON).
type treeSpec struct {
	Type     *string    `json:"type"`
	Context  *string    `json:"context"`
	Children []treeSpec `json:"children_spec"`
}

// Columns reads the leaves' names from a data_spec: a dict's keys, or one
// leaf named "value". Other trees (tuples, lists, nested dicts) are
// refused.
func Columns(dataSpec string) ([]string, error) {
	var top []json.RawMessage
	if err := json.Unmarshal([]byte(dataSpec), &top); err != nil || len(top) != 2 {
		return nil, fmt.Errorf("index.json's data_spec is not a pytree spec [version, tree]: %.80q", dataSpec)
	}
	var spec treeSpec
	if err := json.Unmarshal(top[1], &spec); err != nil {
		return nil, fmt.Errorf("index.json's data_spec: %w", err)
	}
	if spec.Type == nil {
		return []string{"value"}, nil
	}
	if *spec.Type != "builtins.dict" || spec.Context == nil {
		return nil, fmt.Errorf("samples are %s, and shardfeed reads LitData samples that are a dict of values (or one value)", *spec.Type)
	}
	var keys []any
	if err := json.Unmarshal([]byte(*spec.Context), &keys); err != nil || len(keys) != len(spec.Children) {
		return nil, fmt.Errorf("index.json's data_spec: the dict's keys %.80q do not match its %d values", *spec.Context, len(spec.Children))
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		s, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("a sample's key %v is not a string: shardfeed names columns by string keys", k)
		}
		if spec.Children[i].Type != nil {
			return nil, fmt.Errorf("a sample's %q is a %s: shardfeed reads a dict of plain values (nested values are refused)", s, *spec.Children[i].Type)
		}
		if slices.Contains(out[:i], s) {
			return nil, fmt.Errorf("a sample's key %q is twice", s)
		}
		out[i] = s
	}
	return out, nil
}

// u32 reads a little-endian uint32 at off of b, checked.
func u32(b []byte, off int) (int, error) {
	if off < 0 || off+4 > len(b) {
		return 0, fmt.Errorf("%w: 4 bytes at %d past its %d", errCorrupt, off, len(b))
	}
	return int(binary.LittleEndian.Uint32(b[off:])), nil
}
