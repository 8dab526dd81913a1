package parquet

import (
	"fmt"

	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/shardfeed/shardfeed/internal/expr"
)

// Stats returns the statistics of row group rg's top-level columns, from
// the footer range (tail) of a file of size bytes: what a row filter may
// rule the row group out by. Only statistics the writer is known to compute
// correctly, of columns whose order a filter shares (signed integers,
// floats, booleans and UTF-8 strings), are returned.
func Stats(size int64, tail []byte, rg int) (out map[string]expr.Stats, err error) {
	md, err := parseTail(size, tail)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("corrupt Parquet statistics: %v", r)
		}
	}()
	if rg < 0 || rg >= md.NumRowGroups() {
		return nil, fmt.Errorf("row group %d of %d", rg, md.NumRowGroups())
	}
	group := md.RowGroup(rg)
	out = map[string]expr.Stats{}
	for j := range group.NumColumns() {
		descr := md.Schema.Column(j)
		if len(descr.ColumnPath()) != 1 || descr.MaxRepetitionLevel() != 0 || !comparable(descr) {
			continue
		}
		chunk, err := group.ColumnChunk(j)
		if err != nil {
			return nil, err
		}
		if set, err := chunk.StatsSet(); err != nil || !set {
			continue
		}
		st, err := chunk.Statistics()
		if err != nil || st == nil {
			continue
		}
		s := expr.Stats{Nulls: st.NullCount(), NullsKnown: st.HasNullCount()}
		if st.HasMinMax() {
			s.Min, s.Max = minMax(st)
		}
		out[descr.Name()] = s
	}
	return out, nil
}

// comparable reports whether a column's values order as a filter's
// constants do.
func comparable(c *schema.Column) bool {
	lt := c.LogicalType()
	switch c.PhysicalType() {
	case pq.Types.Boolean, pq.Types.Float, pq.Types.Double:
		return lt == nil || lt.Equals(schema.NoLogicalType{})
	case pq.Types.Int32, pq.Types.Int64:
		if lt == nil || lt.Equals(schema.NoLogicalType{}) {
			return true
		}
		it, ok := lt.(schema.IntLogicalType)
		return ok && it.IsSigned()
	case pq.Types.ByteArray:
		_, ok := lt.(schema.StringLogicalType)
		return ok
	}
	return false
}

// minMax returns the statistics' bounds as a filter's values.
func minMax(st metadata.TypedStatistics) (lo, hi any) {
	switch s := st.(type) {
	case *metadata.BooleanStatistics:
		return s.Min(), s.Max()
	case *metadata.Int32Statistics:
		return int64(s.Min()), int64(s.Max())
	case *metadata.Int64Statistics:
		return s.Min(), s.Max()
	case *metadata.Float32Statistics:
		return float64(s.Min()), float64(s.Max())
	case *metadata.Float64Statistics:
		return s.Min(), s.Max()
	case *metadata.ByteArrayStatistics:
		return string(s.Min()), string(s.Max())
	}
	return nil, nil
}
