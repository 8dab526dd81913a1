package expr

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// ColumnsOf returns the columns of a schema an expression can read:
// booleans, integers (as int64), floats (as float64), strings and binary.
// Others (lists, structs) are left out, so an expression that names one is
// refused by Compile as naming no column.
func ColumnsOf(s *arrow.Schema) []Column {
	var out []Column
	for _, f := range s.Fields() {
		if t := typeName(f.Type); t != "" {
			out = append(out, Column{Name: f.Name, Type: t})
		}
	}
	return out
}

func typeName(t arrow.DataType) string {
	switch t.ID() {
	case arrow.BOOL:
		return "bool"
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return "int64"
	case arrow.FLOAT32, arrow.FLOAT64:
		return "float64"
	case arrow.STRING, arrow.LARGE_STRING:
		return "utf8"
	case arrow.BINARY, arrow.LARGE_BINARY:
		return "binary"
	}
	return ""
}

// Runs are sorted, disjoint row ranges [start, end).
type Runs [][2]int64

// Count is the number of rows in the runs.
func (r Runs) Count() int64 {
	var n int64
	for _, x := range r {
		n += x[1] - x[0]
	}
	return n
}

// Rows evaluates the expression for each row of rec (its columns found by
// name) and returns the rows it is true for (not those where it is null,
// Nulls). An evaluation error (a NaN compared with <, a cost over the
// bound) is an error naming the row.
func (e *Expr) Rows(rec arrow.RecordBatch) (Runs, error) {
	e.rowsOnce.Do(func() {
		e.rowsPrg, e.rowsErr = e.env.Program(e.ast, cel.CostLimit(maxCost), cel.InterruptCheckFrequency(100))
	})
	prg, err := e.rowsPrg, e.rowsErr
	if err != nil {
		return nil, err
	}
	act := &rowActivation{cols: map[string]arrow.Array{}}
	for _, c := range e.columns {
		idx := rec.Schema().FieldIndices(c.Name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("%s: no column %q in the records", e.src, c.Name)
		}
		act.cols[c.Name] = rec.Column(idx[0])
	}
	var out Runs
	for row := range rec.NumRows() {
		act.row = int(row)
		v, _, err := prg.Eval(act)
		if isNull(v) { // unknown: not kept
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s, at row %d: %w (%s)", e.src, row, err, Advice(err))
		}
		b, ok := v.(types.Bool)
		if !ok {
			return nil, fmt.Errorf("%s is %v at row %d, not a bool", e.src, v, row)
		}
		if !b {
			continue
		}
		if n := len(out); n > 0 && out[n-1][1] == row {
			out[n-1][1]++
		} else {
			out = append(out, [2]int64{row, row + 1})
		}
	}
	return out, nil
}

// rowActivation resolves each column's name to its value at one row.
type rowActivation struct {
	cols map[string]arrow.Array
	row  int
}

func (a *rowActivation) Parent() interpreter.Activation { return nil }

func (a *rowActivation) ResolveName(name string) (any, bool) {
	col, ok := a.cols[name]
	if !ok {
		return nil, false
	}
	if col.IsNull(a.row) {
		return nullValue(), true
	}
	switch c := col.(type) {
	case *array.Boolean:
		return c.Value(a.row), true
	case *array.Int8:
		return int64(c.Value(a.row)), true
	case *array.Int16:
		return int64(c.Value(a.row)), true
	case *array.Int32:
		return int64(c.Value(a.row)), true
	case *array.Int64:
		return c.Value(a.row), true
	case *array.Uint8:
		return int64(c.Value(a.row)), true
	case *array.Uint16:
		return int64(c.Value(a.row)), true
	case *array.Uint32:
		return int64(c.Value(a.row)), true
	case *array.Float32:
		return float64(c.Value(a.row)), true
	case *array.Float64:
		return c.Value(a.row), true
	case *array.String:
		return c.Value(a.row), true
	case *array.LargeString:
		return c.Value(a.row), true
	case *array.Binary:
		return c.Value(a.row), true
	case *array.LargeBinary:
		return c.Value(a.row), true
	}
	return nil, false
}
