package expr

import (
	"errors"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Nulls is the semantics of a null value, as a selection records it:
// three-valued logic, as SQL, Spark and pyarrow have it. A comparison or
// function of a null is null (unknown); false && null is false and
// true || null is true, and a row is kept only where the expression is
// true. x == null and x != null test for a null (SQL's IS NULL and IS
// NOT NULL). Selections written before had no such field: there x != 'a'
// was true for a null x.
const Nulls = "three-valued"

// errNull is the value a null column takes in an evaluation. CEL's errors
// already behave as SQL's unknown: strict functions pass them on, and
// && and || absorb them where the other side decides (false && err is
// false). The outcome of an expression that is this error is null: the row
// is not kept.
var errNull = errors.New("shardfeed: a null value")

// nullValue is a fresh null for one evaluation (CEL labels an error with
// the node that raised it, in place).
func nullValue() ref.Val { return types.WrapErr(errNull) }

// isNull reports whether v is the null of a column.
func isNull(v ref.Val) bool {
	e, ok := v.(*types.Err)
	return ok && errors.Is(e, errNull)
}

// isNullFunction is the test x == null is rewritten to. Its name cannot
// be written in an expression.
const isNullFunction = "@shardfeed_is_null"

// isNullDecl tests a value for null: non-strict, so it sees the null (and
// passes on what is unknown yet, and any other error).
func isNullDecl() cel.EnvOption {
	return cel.Function(isNullFunction, cel.Overload(isNullFunction+"_T", []*cel.Type{cel.TypeParamType("T")}, cel.BoolType,
		cel.OverloadIsNonStrict(), cel.UnaryBinding(func(v ref.Val) ref.Val {
			switch {
			case isNull(v):
				return types.True
			case types.IsUnknownOrError(v):
				return v
			}
			return types.False
		})))
}

// rewriteNullTests turns x == null into a null test, and x != null into
// its negation, in place: with a null as an error, x == null would be
// null too, where users mean IS NULL.
func rewriteNullTests(root celast.Expr) {
	next := maxID(root) + 1
	fac := celast.NewExprFactory()
	celast.PostOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind {
			return
		}
		call := e.AsCall()
		fn, args := call.FunctionName(), call.Args()
		if (fn != "_==_" && fn != "_!=_") || len(args) != 2 {
			return
		}
		operand := args[0]
		switch {
		case nullLiteral(args[1]):
		case nullLiteral(args[0]):
			operand = args[1]
		default:
			return
		}
		if fn == "_==_" {
			e.SetKindCase(fac.NewCall(e.ID(), isNullFunction, operand))
			return
		}
		test := fac.NewCall(next, isNullFunction, operand)
		next++
		e.SetKindCase(fac.NewCall(e.ID(), "!_", test))
	}))
}

func nullLiteral(e celast.Expr) bool {
	return e.Kind() == celast.LiteralKind && e.AsLiteral() == types.NullValue
}

func maxID(root celast.Expr) int64 {
	var m int64
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) { m = max(m, e.ID()) }))
	return m
}

// outcome is a set of the values a boolean expression may take: true,
// false, null.
type outcome uint8

const (
	maybeTrue outcome = 1 << iota
	maybeFalse
	maybeNull
	anything = maybeTrue | maybeFalse | maybeNull
)

// outcomes returns what e may still be, by three-valued logic over its
// &&, ||, ! and ?: and the values its other subexpressions took in a
// partial evaluation (state): a subexpression not evaluated, or unknown,
// may be anything.
func outcomes(e celast.Expr, state interpreter.EvalState) outcome {
	if e.Kind() == celast.CallKind {
		call := e.AsCall()
		args := call.Args()
		switch fn := call.FunctionName(); {
		case (fn == "_&&_" || fn == "_||_") && len(args) == 2:
			return combine(fn == "_&&_", outcomes(args[0], state), outcomes(args[1], state))
		case fn == "!_" && len(args) == 1:
			a := outcomes(args[0], state)
			out := a & maybeNull
			if a&maybeTrue != 0 {
				out |= maybeFalse
			}
			if a&maybeFalse != 0 {
				out |= maybeTrue
			}
			return out
		case fn == "_?_:_" && len(args) == 3:
			c := outcomes(args[0], state)
			out := c & maybeNull
			if c&maybeTrue != 0 {
				out |= outcomes(args[1], state)
			}
			if c&maybeFalse != 0 {
				out |= outcomes(args[2], state)
			}
			return out
		}
	}
	v, ok := state.Value(e.ID())
	switch {
	case !ok:
		return anything
	case isNull(v):
		return maybeNull
	case v == types.True:
		return maybeTrue
	case v == types.False:
		return maybeFalse
	}
	return anything
}

// combine is three-valued && (and) or || over the outcomes of each side.
func combine(and bool, a, b outcome) outcome {
	var out outcome
	for _, x := range []outcome{maybeTrue, maybeFalse, maybeNull} {
		for _, y := range []outcome{maybeTrue, maybeFalse, maybeNull} {
			if a&x != 0 && b&y != 0 {
				out |= kleene(and, x, y)
			}
		}
	}
	return out
}

func kleene(and bool, x, y outcome) outcome {
	decisive, other := maybeFalse, maybeTrue // false decides an and
	if !and {
		decisive, other = maybeTrue, maybeFalse
	}
	switch {
	case x == decisive || y == decisive:
		return decisive
	case x == maybeNull || y == maybeNull:
		return maybeNull
	}
	return other
}
