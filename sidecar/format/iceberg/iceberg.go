// Package iceberg reads the shards of an Apache Iceberg table's stream:
// row groups of its Parquet data files, as `shardfeed index --format
// iceberg` listed them (icebergindex). Each row group is decoded
// with the Parquet format's reader, its columns mapped to the table's
// schema by field id (a column renamed since the file was written comes
// out under its new name, one added comes out null, one dropped not at
// all, an int or float promoted to long or double is widened), and the
// rows the table's delete files delete are never served.
package iceberg

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/parquet"
)

// fieldIDKey is the Arrow field metadata key of a Parquet field id.
const fieldIDKey = "PARQUET:field_id"

// Format is the iceberg format.
var Format format.Format = icebergFormat{}

type icebergFormat struct{}

func (icebergFormat) Kind() datav1alpha1.ShardFormat { return datav1alpha1.FormatIceberg }

// IndexHelp is shardfeed index's help of an iceberg stream.
func (icebergFormat) IndexHelp() string {
	return `index resolves an Apache Iceberg table through its catalog
(--catalog-type rest, sql or glue) at one snapshot (--snapshot-id, --ref,
or the current one): one shard per row group of its Parquet data files,
the rows of its position and equality delete files never served, and its
schema by field id. URI is where _shardfeed/index.json goes, outside the
table's location, in the bucket that holds the table's files. The
catalog's credentials come from the environment: SHARDFEED_CATALOG_TOKEN
(a REST bearer token) or SHARDFEED_CATALOG_CREDENTIAL (REST OAuth2,
client-id:client-secret), SHARDFEED_CATALOG_USER and
SHARDFEED_CATALOG_PASSWORD (a sql catalog's database), the AWS chain
(glue).`
}

// Open implements format.Format: the table's schema comes from the index.
func (icebergFormat) Open(l *index.Layout) (format.Reader, error) {
	f, err := format.FileOf(l)
	if err != nil {
		return nil, err
	}
	if f.Table == nil {
		return nil, fmt.Errorf("an iceberg index names its table: re-run shardfeed index --format iceberg")
	}
	sc, ids, err := DecodeSchema(f.Table.ArrowSchema)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", f.Table.Name, err)
	}
	return &reader{file: f, schema: sc, ids: ids}, nil
}

// DecodeSchema reads an index's table schema: the schema served (with no
// field metadata) and each column's field id.
func DecodeSchema(b64 string) (*arrow.Schema, []int, error) {
	in, err := format.DecodeSchema(b64)
	if err != nil {
		return nil, nil, err
	}
	fields := make([]arrow.Field, in.NumFields())
	ids := make([]int, in.NumFields())
	for i, f := range in.Fields() {
		id, ok := fieldID(f)
		if !ok {
			return nil, nil, fmt.Errorf("column %q of the index's schema has no field id", f.Name)
		}
		ids[i] = id
		fields[i] = arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable}
	}
	return arrow.NewSchema(fields, nil), ids, nil
}

func fieldID(f arrow.Field) (int, bool) {
	v, ok := f.Metadata.GetValue(fieldIDKey)
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(v)
	return id, err == nil
}

type reader struct {
	file   *indexfile.File
	schema *arrow.Schema
	ids    []int
}

func (r *reader) Parts(i int) []format.Part { return format.FileParts(r.file, i, true) }

func (r *reader) Schema(context.Context, format.ReadFunc) (*arrow.Schema, error) {
	return r.schema, nil
}

// Records implements format.Reader.
func (r *reader) Records(ctx context.Context, i int, parts [][]byte, columns []string) (array.RecordReader, error) {
	e := r.file.Shard(i)
	fileSchema, err := parquet.Schema(e.ObjectSize, parts[1])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Object, err)
	}
	want, err := r.wanted(columns)
	if err != nil {
		return nil, err
	}
	// Each wanted column's name in the file, by field id ("": not there).
	byID := map[int]string{}
	for _, f := range fileSchema.Fields() {
		if id, ok := fieldID(f); ok {
			byID[id] = f.Name
		}
	}
	var read []string
	for _, j := range want {
		if name := byID[r.ids[j]]; name != "" {
			read = append(read, name)
		}
	}
	if len(read) == 0 && fileSchema.NumFields() > 0 {
		read = []string{fileSchema.Field(0).Name} // for the row count alone
	}
	recs, err := parquet.ReadRowGroupRange(ctx, format.FootedPart{Size: e.ObjectSize, Tail: parts[1], Offset: e.Offset, Data: parts[0], Index: e.Part}, read)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	if got := parquet.Rows(recs); e.Rows > 0 && got != e.Rows {
		return nil, fmt.Errorf("row group decoded to %d rows, the index says %d: re-run shardfeed index", got, e.Rows)
	}
	out := make([]arrow.RecordBatch, 0, len(recs))
	var start int64
	for _, rec := range recs {
		conformed, err := r.conform(rec, want, byID)
		if err != nil {
			for _, o := range out {
				o.Release()
			}
			return nil, fmt.Errorf("%s: %w", e.Object, err)
		}
		out = append(out, format.Undeleted(conformed, start, e.Deleted)...)
		conformed.Release()
		start += rec.NumRows()
	}
	return format.RecordsOf(out)
}

// wanted returns the indices of the table's columns to serve.
func (r *reader) wanted(columns []string) ([]int, error) {
	if columns == nil {
		out := make([]int, r.schema.NumFields())
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	out := make([]int, 0, len(columns))
	for _, c := range columns {
		idx := r.schema.FieldIndices(c)
		if len(idx) == 0 {
			return nil, fmt.Errorf("the table has no column %q", c)
		}
		out = append(out, idx[0])
	}
	return out, nil
}

// conform maps a decoded record of the file's columns to the table's
// wanted columns.
func (r *reader) conform(rec arrow.RecordBatch, want []int, byID map[int]string) (arrow.RecordBatch, error) {
	fields := make([]arrow.Field, len(want))
	cols := make([]arrow.Array, len(want))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	n := int(rec.NumRows())
	for k, j := range want {
		target := r.schema.Field(j)
		fields[k] = target
		name := byID[r.ids[j]]
		if name == "" {
			if !target.Nullable {
				return nil, fmt.Errorf("column %q (field id %d) is required, and the data file has no such column", target.Name, r.ids[j])
			}
			cols[k] = array.MakeArrayOfNull(memory.DefaultAllocator, target.Type, n)
			continue
		}
		idx := rec.Schema().FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("column %q was not decoded", name)
		}
		c, err := widen(rec.Column(idx[0]), target.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q (field id %d, %q in the data file): %w", target.Name, r.ids[j], name, err)
		}
		cols[k] = c
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n)), nil
}

// widen returns col as type to: itself when it is of that type, widened
// for Iceberg's promotions int to long and float to double.
func widen(col arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(col.DataType(), to) {
		col.Retain()
		return col, nil
	}
	switch c := col.(type) {
	case *array.Int32:
		if to.ID() == arrow.INT64 {
			return widenWith[int32, int64](c, array.NewInt64Builder(memory.DefaultAllocator)), nil
		}
	case *array.Float32:
		if to.ID() == arrow.FLOAT64 {
			return widenWith[float32, float64](c, array.NewFloat64Builder(memory.DefaultAllocator)), nil
		}
	}
	return nil, fmt.Errorf("the data file has it as %s, the table as %s", col.DataType(), to)
}

type valued[V any] interface {
	Len() int
	IsNull(i int) bool
	Value(i int) V
}

type appender[V any] interface {
	Reserve(n int)
	AppendNull()
	Append(v V)
	NewArray() arrow.Array
	Release()
}

// widenWith copies c into b, each value converted.
func widenWith[F int32 | float32, T int64 | float64](c valued[F], b appender[T]) arrow.Array {
	defer b.Release()
	b.Reserve(c.Len())
	for i := range c.Len() {
		if c.IsNull(i) {
			b.AppendNull()
		} else {
			b.Append(T(c.Value(i)))
		}
	}
	return b.NewArray()
}
