package expr

import (
	"math"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Stats describe a column's values over a set of rows (a Parquet row
// group's statistics, a partition's constant value): the least and the
// greatest non-null value, when known, and how many rows are null.
type Stats struct {
	// Min and Max are int64, float64, string or bool, by column type;
	// nil when not known.
	Min, Max any
	// Nulls is the number of null rows; NullsKnown says whether it is.
	Nulls      int64
	NullsKnown bool
}

// Excludes reports whether the expression is false for every row whose
// columns lie within stats (by column name; a column without stats may
// hold anything): then the rows need not be read. It is conservative: it
// understands conjunctions and disjunctions of comparisons of a column
// with a constant (==, <, <=, >, >=, and in a list of constants), and
// says false for anything else.
func (e *Expr) Excludes(stats map[string]Stats) bool {
	return never(e.ast.NativeRep().Expr(), stats, nil)
}

// mirrored is the comparison with its operands swapped: 3 < x is x > 3.
var mirrored = map[string]string{"_==_": "_==_", "_<_": "_>_", "_<=_": "_>=_", "_>_": "_<_", "_>=_": "_<=_"}

// never reports whether e is true for no row within stats: false or null
// (Nulls), or an error impossible to reach without a false. numbers are the columns a
// conjunction around e tests with x == x: false for NaN, so a NaN row's
// ordering error is absorbed there (CEL's && is false if either side is).
func never(e celast.Expr, stats map[string]Stats, numbers map[string]bool) bool {
	if e.Kind() != celast.CallKind {
		return false
	}
	call := e.AsCall()
	args := call.Args()
	fn := call.FunctionName()
	switch {
	case fn == "_&&_" && len(args) == 2:
		numbers = guarded(e, numbers)
		return never(args[0], stats, numbers) || never(args[1], stats, numbers)
	case fn == "_||_" && len(args) == 2:
		return never(args[0], stats, numbers) && never(args[1], stats, numbers)
	case fn == "@in" && len(args) == 2 && args[0].Kind() == celast.IdentKind && args[1].Kind() == celast.ListKind:
		s, ok := stats[args[0].AsIdent()]
		if !ok {
			return false
		}
		for _, el := range args[1].AsList().Elements() {
			if el.Kind() != celast.LiteralKind || !compareNever("_==_", s, el.AsLiteral(), false) {
				return false
			}
		}
		return true
	case fn == isNullFunction && len(args) == 1 && args[0].Kind() == celast.IdentKind:
		s, ok := stats[args[0].AsIdent()]
		return ok && s.NullsKnown && s.Nulls == 0
	case mirrored[fn] != "" && len(args) == 2:
		col, lit, op := args[0], args[1], fn
		if col.Kind() == celast.LiteralKind {
			col, lit, op = lit, col, mirrored[fn]
		}
		if col.Kind() != celast.IdentKind || lit.Kind() != celast.LiteralKind {
			return false
		}
		s, ok := stats[col.AsIdent()]
		return ok && compareNever(op, s, lit.AsLiteral(), !numbers[col.AsIdent()])
	}
	return false
}

// selfEqual returns x for the expression x == x (false only for NaN).
func selfEqual(e celast.Expr) (string, bool) {
	if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "_==_" || len(e.AsCall().Args()) != 2 {
		return "", false
	}
	a, b := e.AsCall().Args()[0], e.AsCall().Args()[1]
	if a.Kind() != celast.IdentKind || b.Kind() != celast.IdentKind || a.AsIdent() != b.AsIdent() {
		return "", false
	}
	return a.AsIdent(), true
}

// guarded returns numbers with the columns a conjunction tests with
// x == x anywhere among its conjuncts (however CEL nested them), leaving
// numbers as it is.
func guarded(e celast.Expr, numbers map[string]bool) map[string]bool {
	var found []string
	var walk func(e celast.Expr)
	walk = func(e celast.Expr) {
		if x, ok := selfEqual(e); ok {
			found = append(found, x)
			return
		}
		if e.Kind() == celast.CallKind && e.AsCall().FunctionName() == "_&&_" {
			for _, a := range e.AsCall().Args() {
				walk(a)
			}
		}
	}
	walk(e)
	if len(found) == 0 {
		return numbers
	}
	out := map[string]bool{}
	for k := range numbers {
		out[k] = true
	}
	for _, x := range found {
		out[x] = true
	}
	return out
}

// compareNever reports whether "column op v" is true for no row within s.
// A null row is null under any comparison (Nulls), never true. A NaN
// fails an ordering with an evaluation error, which must be read to be
// reported, and Parquet's writers leave NaN out of a float column's min
// and max and count it nowhere: an ordering of a float column (mayBeNaN)
// is decided on its statistics only where a guard (x == x) makes a NaN
// row false.
func compareNever(op string, s Stats, v ref.Val, mayBeNaN bool) bool {
	if op != "_==_" && mayBeNaN && (isFloat(s.Min) || isFloat(s.Max)) {
		return false
	}
	if s.Min == nil || s.Max == nil {
		return false
	}
	lo, okLo := order(s.Min, v)
	hi, okHi := order(s.Max, v)
	if !okLo || !okHi {
		return false
	}
	switch op { // lo: min vs v, hi: max vs v
	case "_==_":
		return lo > 0 || hi < 0
	case "_<_":
		return lo >= 0
	case "_<=_":
		return lo > 0
	case "_>_":
		return hi <= 0
	case "_>=_":
		return hi < 0
	}
	return false
}

func isFloat(v any) bool {
	_, ok := v.(float64)
	return ok
}

// exactFloat bounds the integers a float64 holds exactly.
const exactFloat = 1 << 53

// order compares a column's statistic a with the constant v: -1, 0 or 1,
// and false when they do not compare exactly (other types, a NaN, an
// integer too large for a float).
func order(a any, v ref.Val) (int, bool) {
	switch x := a.(type) {
	case int64:
		switch y := v.(type) {
		case types.Int:
			return cmp3(x, int64(y)), true
		case types.Uint:
			if y > math.MaxInt64 {
				return -1, true
			}
			return cmp3(x, int64(y)), true //nolint:gosec // checked above
		case types.Double:
			if x > -exactFloat && x < exactFloat && !math.IsNaN(float64(y)) {
				return cmp3(float64(x), float64(y)), true
			}
		}
	case float64:
		if math.IsNaN(x) {
			return 0, false
		}
		switch y := v.(type) {
		case types.Double:
			if !math.IsNaN(float64(y)) {
				return cmp3(x, float64(y)), true
			}
		case types.Int:
			if y > -exactFloat && y < exactFloat {
				return cmp3(x, float64(y)), true
			}
		}
	case string:
		if y, ok := v.(types.String); ok {
			return cmp3(x, string(y)), true
		}
	case bool:
		if y, ok := v.(types.Bool); ok {
			return cmp3(b2i(x), b2i(bool(y))), true
		}
	}
	return 0, false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func cmp3[T int | int64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
