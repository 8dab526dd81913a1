// Package mds reads and writes MosaicML Streaming's MDS shards, version 2:
// decoding a shard to Arrow, writing shards from Arrow records. The index
// they are listed in is read by internal/index/mdsindex.
//
// A raw shard (the bytes after decompression), every integer a
// little-endian uint32, N samples:
//
//	N
//	N+1 offsets, each from the shard's first byte: sample i is
//	        [offset i, offset i+1)
//	sample 0, sample 1, …
//
// A sample: the size of each variable-size column's value, in column order
// (the index's column_sizes is null for them), then every column's value
// end to end, in column order. Fixed-size values (int: int64, float32,
// uint8, …, ndarray with a shape) have no size. worked_test.go builds a
// shard byte by byte.
package mds

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ColumnsFor chooses the MDS encoding of every field of an Arrow schema,
// the inverse of the reader's mapping where there is one: integers and
// floats keep their width, utf8 is str, binary is bytes, a list or
// fixed-size list of numbers is an ndarray, bool is uint8, and anything else
// is json (its JSON text).
func ColumnsFor(schema *arrow.Schema) []Column {
	cols := make([]Column, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = Column{Name: f.Name, Encoding: encodingFor(f.Type)}
	}
	return cols
}

func encodingFor(t arrow.DataType) string {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "str"
	case arrow.BINARY, arrow.LARGE_BINARY:
		return "bytes"
	case arrow.BOOL:
		return "uint8"
	case arrow.LIST, arrow.LARGE_LIST:
		if d, ok := numericDtype(t.(arrow.ListLikeType).Elem()); ok {
			return "ndarray:" + d
		}
	case arrow.FIXED_SIZE_LIST:
		fl := t.(*arrow.FixedSizeListType)
		if d, ok := numericDtype(fl.Elem()); ok && fl.Len() > 0 {
			return fmt.Sprintf("ndarray:%s:%d", d, fl.Len())
		}
	}
	if d, ok := numericDtype(t); ok {
		return d
	}
	return "json"
}

func numericDtype(t arrow.DataType) (string, bool) {
	names := map[arrow.Type]string{
		arrow.UINT8: "uint8", arrow.INT8: "int8", arrow.UINT16: "uint16", arrow.INT16: "int16",
		arrow.UINT32: "uint32", arrow.INT32: "int32", arrow.UINT64: "uint64", arrow.INT64: "int64",
		arrow.FLOAT16: "float16", arrow.FLOAT32: "float32", arrow.FLOAT64: "float64",
	}
	n, ok := names[t.ID()]
	return n, ok
}

// RowValues returns row of rec as Writer values for ColumnsFor's encodings.
// A null is refused: MDS has no nulls.
func RowValues(rec arrow.RecordBatch, row int) (map[string]any, error) {
	out := make(map[string]any, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		col := rec.Column(i)
		if col.IsNull(row) {
			return nil, fmt.Errorf("column %q is null in row %d: MDS has no nulls; fill or drop the value first", f.Name, row)
		}
		v, err := valueOf(col, row, encodingFor(f.Type))
		if err != nil {
			return nil, fmt.Errorf("column %q row %d: %w", f.Name, row, err)
		}
		out[f.Name] = v
	}
	return out, nil
}

func valueOf(col arrow.Array, row int, enc string) (any, error) {
	switch a := col.(type) {
	case *array.String:
		return a.Value(row), nil
	case *array.LargeString:
		return a.Value(row), nil
	case *array.Binary:
		return a.Value(row), nil
	case *array.LargeBinary:
		return a.Value(row), nil
	case *array.Boolean:
		if a.Value(row) {
			return uint8(1), nil
		}
		return uint8(0), nil
	case *array.Float16:
		return a.Value(row).Uint16(), nil
	case *array.List, *array.LargeList, *array.FixedSizeList:
		if enc == "json" {
			break
		}
		ll := col.(array.ListLike)
		lo, hi := ll.ValueOffsets(row)
		_, rest, _ := strings.Cut(enc, ":")
		dname, _, _ := strings.Cut(rest, ":")
		d := dtypes[dname]
		data := make([]byte, 0, int(hi-lo)*d.width)
		for k := lo; k < hi; k++ {
			var err error
			if data, err = appendScalar(data, d, scalarAt(ll.ListValues(), int(k))); err != nil {
				return nil, err
			}
		}
		if hi == lo {
			return nil, fmt.Errorf("an empty list cannot be an MDS ndarray")
		}
		return NDArray{DType: d.name, Shape: []int64{hi - lo}, Data: data}, nil
	}
	if enc != "json" {
		return scalarAt(col, row), nil
	}
	b, err := json.Marshal(col.GetOneForMarshal(row))
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// scalarAt returns a numeric value as the Go type appendScalar takes.
func scalarAt(a arrow.Array, i int) any {
	switch v := a.(type) {
	case *array.Uint8:
		return v.Value(i)
	case *array.Int8:
		return v.Value(i)
	case *array.Uint16:
		return v.Value(i)
	case *array.Int16:
		return v.Value(i)
	case *array.Uint32:
		return v.Value(i)
	case *array.Int32:
		return v.Value(i)
	case *array.Uint64:
		return v.Value(i)
	case *array.Int64:
		return v.Value(i)
	case *array.Float16:
		return v.Value(i).Uint16()
	case *array.Float32:
		return v.Value(i)
	case *array.Float64:
		return v.Value(i)
	}
	return math.NaN()
}
