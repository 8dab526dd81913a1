package format

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shardfeed/shardfeed/internal/expr"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
)

// partitioned reads a hive-partitioned stream: its files' columns, then
// its partition columns, each a constant of the shard's directory.
type partitioned struct {
	Reader
	file *indexfile.File
}

// withPartitions wraps the reader of a partitioned stream's index.
func withPartitions(r Reader, l *index.Layout) Reader {
	f := l.File
	if f == nil || f.Partitions == nil {
		return r
	}
	return partitioned{Reader: r, file: f}
}

// ArrowType is the Arrow type of a type name of shardfeed's indexes: a
// text stream's schema (indexfile.ColumnType) or a partition column's
// (indexfile.PartitionTypes, which adds int32).
func ArrowType(name string) (arrow.DataType, error) {
	if name == "int32" {
		return arrow.PrimitiveTypes.Int32, nil
	}
	t, err := indexfile.ParseColumnType(name)
	if err != nil {
		return nil, err
	}
	return ArrowOf(t), nil
}

// ArrowOf is the Arrow type of a column type; every struct field is
// nullable, as every column is.
func ArrowOf(t *indexfile.ColumnType) arrow.DataType {
	switch t.Kind {
	case "bool":
		return arrow.FixedWidthTypes.Boolean
	case "int64":
		return arrow.PrimitiveTypes.Int64
	case "float64":
		return arrow.PrimitiveTypes.Float64
	case "binary":
		return arrow.BinaryTypes.Binary
	case "list":
		return arrow.ListOf(ArrowOf(t.Elem))
	case "struct":
		fields := make([]arrow.Field, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = arrow.Field{Name: f.Name, Type: ArrowOf(f.Type), Nullable: true}
		}
		return arrow.StructOf(fields...)
	}
	return arrow.BinaryTypes.String
}

func (p partitioned) Schema(ctx context.Context, read ReadFunc) (*arrow.Schema, error) {
	s, err := p.Reader.Schema(ctx, read)
	if err != nil {
		return nil, err
	}
	fields := s.Fields()
	for _, c := range p.file.Partitions.Columns {
		if len(s.FieldIndices(c.Name)) > 0 {
			return nil, fmt.Errorf("%q is both a column of the files and a partition column: rename the directories or the column", c.Name)
		}
		t, err := ArrowType(c.Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: c.Name, Type: t, Nullable: true})
	}
	return arrow.NewSchema(fields, nil), nil
}

// Stats adds the shard's partition values, each its columns' one value,
// to what the files' reader knows.
func (p partitioned) Stats(ctx context.Context, i int, read ReadFunc) (map[string]expr.Stats, error) {
	out := map[string]expr.Stats{}
	if pr, ok := p.Reader.(Pruner); ok {
		st, err := pr.Stats(ctx, i, read)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, st)
	}
	for k, c := range p.file.Partitions.Columns {
		v := p.file.Shard(i).Partition[k]
		if v == nil {
			continue // a null partition: all its rows null, said nowhere
		}
		x, err := indexfile.ParsePartitionValue(*v, c.Type)
		if err != nil {
			return nil, err
		}
		x = expr.Value(x)
		out[c.Name] = expr.Stats{Min: x, Max: x, NullsKnown: true}
	}
	return out, nil
}

func (p partitioned) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	cols := p.file.Partitions.Columns
	isPartition := func(name string) bool {
		return slices.ContainsFunc(cols, func(f indexfile.Field) bool { return f.Name == name })
	}
	var data []string // the files' columns asked for (nil: all)
	if columns != nil {
		data = []string{}
		for _, c := range columns {
			if !isPartition(c) {
				data = append(data, c)
			}
		}
	}
	rr, err := p.Reader.Records(ctx, i, parts, data)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for rr.Next() {
		rec, err := p.appendPartitions(rr.RecordBatch(), p.file.Shard(i).Partition, columns)
		if err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	if err := rr.Err(); err != nil {
		return nil, err
	}
	out, err := RecordsOf(recs)
	recs = nil // RecordsOf released them
	return out, err
}

// appendPartitions returns rec with the partition columns: after its own
// (columns nil), or in the order columns names them.
func (p partitioned) appendPartitions(rec arrow.RecordBatch, values []*string, columns []string) (arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	var fields []arrow.Field
	var arrays []arrow.Array
	defer func() {
		for _, a := range arrays {
			a.Release()
		}
	}()
	add := func(f arrow.Field, a arrow.Array) {
		fields = append(fields, f)
		arrays = append(arrays, a)
	}
	partition := func(name string) error {
		j := slices.IndexFunc(p.file.Partitions.Columns, func(f indexfile.Field) bool { return f.Name == name })
		c := p.file.Partitions.Columns[j]
		a, err := constant(c.Type, values[j], n)
		if err != nil {
			return fmt.Errorf("partition %s: %w", c.Name, err)
		}
		add(arrow.Field{Name: c.Name, Type: a.DataType(), Nullable: true}, a)
		return nil
	}
	own := func(k int) {
		rec.Column(k).Retain()
		add(rec.Schema().Field(k), rec.Column(k))
	}
	if columns == nil {
		for k := range int(rec.NumCols()) {
			own(k)
		}
		for _, c := range p.file.Partitions.Columns {
			if err := partition(c.Name); err != nil {
				return nil, err
			}
		}
	} else {
		for _, name := range columns {
			if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
				own(idx[0])
				continue
			}
			if err := partition(name); err != nil {
				return nil, err
			}
		}
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrays, int64(n)), nil
}

// constant is n rows of one partition value (nil: null) of type typ.
func constant(typ string, v *string, n int) (arrow.Array, error) {
	t, err := ArrowType(typ)
	if err != nil {
		return nil, err
	}
	b := array.NewBuilder(memory.DefaultAllocator, t)
	defer b.Release()
	if v == nil {
		b.AppendNulls(n)
		return b.NewArray(), nil
	}
	val, err := indexfile.ParsePartitionValue(*v, typ)
	if err != nil {
		return nil, err
	}
	b.Reserve(n)
	for range n {
		switch b := b.(type) {
		case *array.StringBuilder:
			b.Append(val.(string))
		case *array.Int32Builder:
			b.Append(val.(int32))
		case *array.Int64Builder:
			b.Append(val.(int64))
		case *array.Float64Builder:
			b.Append(val.(float64))
		case *array.BooleanBuilder:
			b.Append(val.(bool))
		}
	}
	return b.NewArray(), nil
}
