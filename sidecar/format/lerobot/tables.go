package lerobot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// MaxMetaBytes bounds a metadata Parquet file (meta/episodes/…,
// meta/tasks.parquet) shardfeed reads whole.
const MaxMetaBytes = 256 << 20

// table is some columns of a metadata Parquet file, each in one array.
type table struct {
	name string
	rows int
	cols map[string]arrow.Array
}

func (t *table) release() {
	for _, c := range t.cols {
		c.Release()
	}
}

// readTable reads the named top-level columns of the Parquet file data
// (those it has: want lists the ones it must have).
func readTable(ctx context.Context, name string, data []byte, columns, want []string) (t *table, err error) {
	defer func() {
		if p := recover(); p != nil { // the Parquet decoder can panic on hostile input
			t, err = nil, fmt.Errorf("%s: corrupt Parquet: %v", name, p)
		}
	}()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer func() { _ = pf.Close() }()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	schema, err := fr.Schema()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	sc := pf.MetaData().Schema
	var leaves []int
	var names []string
	for _, c := range columns {
		if len(schema.FieldIndices(c)) == 0 {
			if slices.Contains(want, c) {
				return nil, fmt.Errorf("%s has no column %q: not a LeRobot %s dataset's file", name, c, CodebaseV3)
			}
			continue
		}
		for i := range sc.NumColumns() {
			if p := sc.Column(i).ColumnPath(); len(p) > 0 && p[0] == c {
				leaves = append(leaves, i)
			}
		}
		names = append(names, c)
	}
	t = &table{name: name, cols: map[string]arrow.Array{}, rows: int(pf.NumRows())}
	if len(names) == 0 {
		return t, nil
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rr.Release()
	chunks := map[string][]arrow.Array{}
	defer func() {
		for _, cs := range chunks {
			for _, c := range cs {
				c.Release()
			}
		}
	}()
	got := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		for _, c := range names {
			col := rec.Column(rec.Schema().FieldIndices(c)[0])
			col.Retain()
			chunks[c] = append(chunks[c], col)
		}
		got += int(rec.NumRows())
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if got != t.rows {
		return nil, fmt.Errorf("%s: corrupt Parquet: %d rows decoded, its footer says %d", name, got, t.rows)
	}
	for _, c := range names {
		if len(chunks[c]) == 0 {
			continue
		}
		a, err := array.Concatenate(chunks[c], memory.DefaultAllocator)
		if err != nil {
			t.release()
			return nil, fmt.Errorf("%s: column %q: %w", name, c, err)
		}
		t.cols[c] = a
	}
	return t, nil
}

// ints returns column c as int64s; ok is false when the table lacks it.
func (t *table) ints(c string) (out []int64, ok bool, err error) {
	a, ok := t.cols[c]
	if !ok {
		return nil, false, nil
	}
	out = make([]int64, a.Len())
	for i := range out {
		if a.IsNull(i) {
			return nil, true, fmt.Errorf("%s: column %q is null in row %d", t.name, c, i)
		}
		switch v := a.(type) {
		case *array.Int64:
			out[i] = v.Value(i)
		case *array.Int32:
			out[i] = int64(v.Value(i))
		case *array.Int16:
			out[i] = int64(v.Value(i))
		case *array.Int8:
			out[i] = int64(v.Value(i))
		case *array.Uint32:
			out[i] = int64(v.Value(i))
		case *array.Uint16:
			out[i] = int64(v.Value(i))
		case *array.Uint8:
			out[i] = int64(v.Value(i))
		default:
			return nil, true, fmt.Errorf("%s: column %q is %s, not an integer", t.name, c, a.DataType())
		}
	}
	return out, true, nil
}

// floats returns column c as float64s; ok is false when the table lacks it.
func (t *table) floats(c string) (out []float64, ok bool, err error) {
	a, ok := t.cols[c]
	if !ok {
		return nil, false, nil
	}
	out = make([]float64, a.Len())
	for i := range out {
		if a.IsNull(i) {
			return nil, true, fmt.Errorf("%s: column %q is null in row %d", t.name, c, i)
		}
		switch v := a.(type) {
		case *array.Float64:
			out[i] = v.Value(i)
		case *array.Float32:
			out[i] = float64(v.Value(i))
		default:
			return nil, true, fmt.Errorf("%s: column %q is %s, not a float", t.name, c, a.DataType())
		}
		if math.IsNaN(out[i]) || math.IsInf(out[i], 0) {
			return nil, true, fmt.Errorf("%s: column %q is %v in row %d", t.name, c, out[i], i)
		}
	}
	return out, true, nil
}

// strs returns column c as strings; ok is false when the table lacks it.
func (t *table) strs(c string) (out []string, ok bool, err error) {
	a, ok := t.cols[c]
	if !ok {
		return nil, false, nil
	}
	out = make([]string, a.Len())
	for i := range out {
		if a.IsNull(i) {
			return nil, true, fmt.Errorf("%s: column %q is null in row %d", t.name, c, i)
		}
		switch v := a.(type) {
		case *array.String:
			out[i] = v.Value(i)
		case *array.LargeString:
			out[i] = v.Value(i)
		case *array.StringView:
			out[i] = v.Value(i)
		default:
			return nil, true, fmt.Errorf("%s: column %q is %s, not a string", t.name, c, a.DataType())
		}
	}
	return out, true, nil
}

// Selection is a set of episode indexes: "0-9,15" (ranges inclusive).
type Selection [][2]int64

// MaxSelectionRanges bounds the ranges of an episode selection.
const MaxSelectionRanges = 4096

// ParseSelection parses an episode selection; "" selects every episode.
func ParseSelection(s string) (Selection, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out Selection
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("episodes %q: %q is not an episode index or a range of them (0-9)", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("episodes %q: %q is not a range from a lower index to a higher one (0-9)", s, part)
			}
		}
		out = append(out, [2]int64{a, b})
		if len(out) > MaxSelectionRanges {
			return nil, fmt.Errorf("episodes %q has more than %d ranges", s, MaxSelectionRanges)
		}
	}
	return out, nil
}

// Has says the selection holds episode e (every one, for none).
func (s Selection) Has(e int64) bool {
	if s == nil {
		return true
	}
	for _, r := range s {
		if e >= r[0] && e <= r[1] {
			return true
		}
	}
	return false
}
