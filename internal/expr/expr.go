// Package expr is shardfeed's one expression language: CEL
// (github.com/google/cel-go), the language of Kubernetes' validation rules,
// over the columns of a stream. A stream's partition selection is an
// expression over its partition columns; the plan's row filters use the
// same package over its data columns.
//
// An expression is checked in two steps: its syntax when a dataset is
// applied (Check), where the columns are not known yet, and its columns and
// types when shardfeed index reads the stream (Compile). Evaluation is
// bounded in cost, so a hostile expression ends in an error, not a hang.
package expr

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// MaxLength bounds an expression's source, as the API does.
const MaxLength = 4096

// maxCost bounds one evaluation (CEL's cost units: about one per
// operation and per byte a string function reads).
const maxCost = 1_000_000

// Types are the column types an expression reads, by shardfeed's type
// names (those of indexfile.Field): integers are CEL ints, floats doubles,
// utf8 strings, binary bytes.
var Types = []string{"bool", "int32", "int64", "float64", "utf8", "binary"}

// Column is a column an expression may name.
type Column struct {
	Name string
	Type string
}

// Expr is a compiled expression over a set of columns.
type Expr struct {
	src string
	env *cel.Env
	ast *cel.Ast
	prg cel.Program // partial evaluation, for Decide
	// tracked is prg with each subexpression's value kept, for Decide's
	// three-valued logic over an unknown outcome.
	tracked cel.Program
	// rowsPrg evaluates rows, for Rows: built once, on first use.
	rowsOnce sync.Once
	rowsPrg  cel.Program
	rowsErr  error
	columns  []Column
}

// options are the limits of every environment.
func options() []cel.EnvOption {
	return []cel.EnvOption{cel.ParserExpressionSizeLimit(MaxLength), cel.ParserRecursionLimit(100), cel.CrossTypeNumericComparisons(true)}
}

// Check parses src: what can be checked before the columns are known.
func Check(src string) error {
	if strings.TrimSpace(src) == "" {
		return errors.New("the expression is empty")
	}
	env, err := cel.NewEnv(options()...)
	if err != nil {
		return err
	}
	if _, iss := env.Parse(src); iss.Err() != nil {
		return fmt.Errorf("not a CEL expression: %w", iss.Err())
	}
	return nil
}

var undeclared = regexp.MustCompile(`undeclared reference to '([^']+)'`)

// Compile checks src against columns: every name it uses is a column, and
// its value is a bool. Each column may be null (CEL's null_type), as a
// null partition is.
func Compile(src string, columns []Column) (*Expr, error) {
	return compile(src, columns, nil)
}

// CompilePartial compiles src where only some columns are known yet: every
// other name it uses is a column of any type whose value stays unknown, so
// that Decide says what the known columns decide. A partitioned tree is
// walked so, its deeper columns found on the way; Compile checks the
// names once all are known.
func CompilePartial(src string, known []Column) (*Expr, error) {
	env, err := cel.NewEnv(options()...)
	if err != nil {
		return nil, err
	}
	parsed, iss := env.Parse(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("not a CEL expression: %w", iss.Err())
	}
	var others, bound []string
	celast.PreOrderVisit(parsed.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.ComprehensionKind: // its variables are no columns
			c := e.AsComprehension()
			bound = append(bound, c.IterVar(), c.IterVar2(), c.AccuVar())
		case celast.IdentKind:
			if name := e.AsIdent(); !slices.ContainsFunc(known, func(c Column) bool { return c.Name == name }) && !slices.Contains(others, name) {
				others = append(others, name)
			}
		}
	}))
	others = slices.DeleteFunc(others, func(name string) bool { return slices.Contains(bound, name) })
	return compile(src, known, others)
}

// UnknownColumnsError is an expression naming columns it was not given.
type UnknownColumnsError struct {
	Unknown, Columns []string
}

func (e *UnknownColumnsError) Error() string {
	return fmt.Sprintf("no column %s: the columns are %s", strings.Join(e.Unknown, ", "), strings.Join(e.Columns, ", "))
}

// compile declares columns with their types, and others of any type.
func compile(src string, columns []Column, others []string) (*Expr, error) {
	if err := Check(src); err != nil {
		return nil, err
	}
	opts := options()
	names := make([]string, 0, len(columns))
	for _, c := range columns {
		t, err := celType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		opts = append(opts, cel.Variable(c.Name, cel.NullableType(t)))
		names = append(names, c.Name)
	}
	for _, name := range others {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	env, err := cel.NewEnv(append(opts, isNullDecl())...)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Parse(src)
	if iss.Err() == nil {
		rewriteNullTests(ast.NativeRep().Expr())
		ast, iss = env.Check(ast)
	}
	if iss.Err() != nil {
		var unknown []string
		for _, m := range undeclared.FindAllStringSubmatch(iss.Err().Error(), -1) {
			if !slices.Contains(unknown, m[1]) {
				unknown = append(unknown, m[1])
			}
		}
		if len(unknown) > 0 {
			return nil, &UnknownColumnsError{Unknown: unknown, Columns: names}
		}
		return nil, iss.Err()
	}
	// A bool column alone is a nullable bool: a null row is an error.
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.NullableType(cel.BoolType)) && (others == nil || !t.IsExactType(cel.DynType)) {
		return nil, fmt.Errorf("the expression is a %s, not a bool: write a condition, e.g. region == 'eu'", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptPartialEval), cel.CostLimit(maxCost), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	// The same, tracking each subexpression's value (cel-go's cost limit
	// does not hold with state tracking on): run only after prg, within the
	// limit, on the same values.
	tracked, err := env.Program(ast, cel.EvalOptions(cel.OptPartialEval, cel.OptTrackState))
	if err != nil {
		return nil, err
	}
	return &Expr{src: src, env: env, ast: ast, prg: prg, tracked: tracked, columns: columns}, nil
}

func celType(name string) (*cel.Type, error) {
	switch name {
	case "bool":
		return cel.BoolType, nil
	case "int32", "int64":
		return cel.IntType, nil
	case "float64":
		return cel.DoubleType, nil
	case "utf8":
		return cel.StringType, nil
	case "binary":
		return cel.BytesType, nil
	}
	return nil, fmt.Errorf("type %q is not one of %s", name, strings.Join(Types, ", "))
}

// String returns the expression's source.
func (e *Expr) String() string { return e.src }

// Eval evaluates the expression with every column's value (nil for null):
// bool, int64 (or int32) and float64 and string, by column type.
func (e *Expr) Eval(values map[string]any) (bool, error) {
	v, decided, err := e.Decide(values)
	if err == nil && !decided {
		err = fmt.Errorf("%s: not every column has a value", e.src)
	}
	return v, err
}

// Decide evaluates the expression with the values of some columns: decided
// is false when its value depends on the others, e.g. for a directory of a
// partitioned tree whose deeper partitions are not listed yet.
func (e *Expr) Decide(values map[string]any) (value, decided bool, err error) {
	vars := map[string]any{}
	for _, c := range e.columns {
		v, ok := values[c.Name]
		switch {
		case !ok: // unknown: PartialVars marks it
		case v == nil:
			vars[c.Name] = nullValue()
		default:
			vars[c.Name] = v
		}
	}
	act, err := e.env.PartialVars(vars)
	if err != nil {
		return false, false, err
	}
	out, _, err := e.prg.Eval(act)
	if isNull(out) { // null whatever the columns still unknown: not kept
		return false, true, nil
	}
	if types.IsUnknown(out) && slices.ContainsFunc(e.columns, func(c Column) bool { v, ok := values[c.Name]; return ok && v == nil }) {
		// CEL leaves null && unknown unknown; three-valued logic over
		// what the leaves may still be says whether it can be true.
		if _, details, _ := e.tracked.Eval(act); details != nil && outcomes(e.ast.NativeRep().Expr(), details.State())&maybeTrue == 0 {
			return false, true, nil
		}
	}
	if err != nil {
		return false, false, fmt.Errorf("%s, with %s: %w (%s)", e.src, describe(vars), err, Advice(err))
	}
	if types.IsUnknown(out) {
		return false, false, nil
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, false, fmt.Errorf("%s is %v, not a bool", e.src, out)
	}
	return bool(b), true, nil
}

func describe(vars map[string]any) string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		switch v := vars[k].(type) {
		case ref.Val:
			parts[i] = k + " = null" // the one ref.Val vars holds
		case string:
			parts[i] = fmt.Sprintf("%s = %q", k, v)
		default:
			parts[i] = fmt.Sprintf("%s = %v", k, v)
		}
	}
	return strings.Join(parts, ", ")
}

// Value converts a typed column value for Eval: int32 widens to CEL's
// int64, float32 to its double.
func Value(v any) any {
	switch v := v.(type) {
	case int32:
		return int64(v)
	case float32:
		return float64(v)
	}
	return v
}

// Advice is what to change in a filter that failed to evaluate with err.
// A null never fails (it is unknown, and the row is not kept); a NaN fails
// an ordering (<, <=, >, >=), and has its own test.
func Advice(err error) string {
	if strings.Contains(err.Error(), "NaN") {
		return "a NaN compares only with == and !=: test x == x first, which is false for NaN (x != null does not rule it out)"
	}
	return "check the types the expression compares"
}
