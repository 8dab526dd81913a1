package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Values are Python's as Jinja sees them: nil (None), bool, int64,
// float64, string, []any (a list), tuple, *Dict, undefined, *loopInfo.

// tuple is a Python tuple: a list printed in parentheses.
type tuple []any

// seq reads a list or a tuple.
func seq(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case tuple:
		return x, true
	}
	return nil, false
}

// Dict is a mapping with its keys in order, as a Python dict keeps them.
type Dict struct {
	Keys   []string
	Values map[string]any
	// namespace: attributes may be set ({% set ns.x = … %}).
	namespace bool
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{Values: map[string]any{}} }

// Set sets a key, keeping the first place of a key already there.
func (d *Dict) Set(k string, v any) {
	if _, ok := d.Values[k]; !ok {
		d.Keys = append(d.Keys, k)
	}
	d.Values[k] = v
}

// undefined is a name or an item that is not there: printed as "", false,
// and an error when used otherwise, as Jinja's default Undefined.
type undefined struct{ name string }

// loopInfo is a for loop's `loop`.
type loopInfo struct {
	index, length int
}

// Bounds of a render.
const (
	// MaxSteps bounds the expressions and statements a render evaluates.
	MaxSteps = 1 << 20
	// MaxOutputBytes bounds a rendered conversation.
	MaxOutputBytes = 64 << 20
)

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// env is a render's state.
type env struct {
	scopes []map[string]any
	out    strings.Builder
	steps  int
	// spans are the byte ranges of out that {% generation %} blocks wrote.
	spans [][2]int
}

func (e *env) step() error {
	e.steps++
	if e.steps > MaxSteps {
		return fmt.Errorf("the template ran more than %d steps", MaxSteps)
	}
	return nil
}

func (e *env) lookup(name string) any {
	for i := len(e.scopes) - 1; i >= 0; i-- {
		if v, ok := e.scopes[i][name]; ok {
			return v
		}
	}
	return undefined{name}
}

func (e *env) write(s string) error {
	if e.out.Len()+len(s) > MaxOutputBytes {
		return fmt.Errorf("the rendered conversation passes %d bytes", MaxOutputBytes)
	}
	e.out.WriteString(s)
	return nil
}

func execAll(e *env, body []node) error {
	for _, n := range body {
		if err := e.step(); err != nil {
			return err
		}
		if err := n.exec(e); err != nil {
			return err
		}
	}
	return nil
}

func (n textNode) exec(e *env) error { return e.write(n.text) }

func (n printNode) exec(e *env) error {
	v, err := n.e.eval(e)
	if err != nil {
		return err
	}
	return e.write(str(v))
}

func (n *ifNode) exec(e *env) error {
	for i, c := range n.conds {
		v, err := c.eval(e)
		if err != nil {
			return err
		}
		if truth(v) {
			return execAll(e, n.bodies[i])
		}
	}
	if len(n.bodies) > len(n.conds) {
		return execAll(e, n.bodies[len(n.conds)])
	}
	return nil
}

func (n *forNode) exec(e *env) error {
	it, err := n.iter.eval(e)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return fmt.Errorf("for %s in …: %w", strings.Join(n.names, ", "), err)
	}
	scope := map[string]any{}
	e.scopes = append(e.scopes, scope)
	defer func() { e.scopes = e.scopes[:len(e.scopes)-1] }()
	bind := func(item any) error {
		if len(n.names) == 1 {
			scope[n.names[0]] = item
			return nil
		}
		parts, ok := seq(item)
		if !ok || len(parts) != len(n.names) {
			return fmt.Errorf("for %s: an item of %d values", strings.Join(n.names, ", "), len(parts))
		}
		for i, name := range n.names {
			scope[name] = parts[i]
		}
		return nil
	}
	if n.cond != nil { // the loop's own filter: loop.length counts what it keeps
		var kept []any
		for _, item := range items {
			if err := bind(item); err != nil {
				return err
			}
			v, err := n.cond.eval(e)
			if err != nil {
				return err
			}
			if truth(v) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return execAll(e, n.els)
	}
	for i, item := range items {
		if err := e.step(); err != nil {
			return err
		}
		if err := bind(item); err != nil {
			return err
		}
		scope["loop"] = &loopInfo{index: i, length: len(items)}
		if err := execAll(e, n.body); err != nil {
			if errors.Is(err, errBreak) {
				break
			}
			if !errors.Is(err, errContinue) {
				return err
			}
		}
	}
	return nil
}

func (n *setNode) exec(e *env) error {
	v, err := n.value.eval(e)
	if err != nil {
		return err
	}
	if n.attr == "" {
		e.scopes[len(e.scopes)-1][n.name] = v
		return nil
	}
	ns, ok := e.lookup(n.name).(*Dict)
	if !ok || !ns.namespace {
		return fmt.Errorf("set %s.%s: %s is not a namespace()", n.name, n.attr, n.name)
	}
	ns.Set(n.attr, v)
	return nil
}

func (n generationNode) exec(e *env) error {
	start := e.out.Len()
	if err := execAll(e, n.body); err != nil {
		return err
	}
	if end := e.out.Len(); end > start {
		e.spans = append(e.spans, [2]int{start, end})
	}
	return nil
}

func (n loopControl) exec(*env) error {
	if n.brk {
		return errBreak
	}
	return errContinue
}

// Expressions.
type (
	literal  struct{ v any }
	nameExpr struct{ name string }
	listExpr struct {
		items []expr
		tuple bool
	}
	dictExpr struct{ keys, values []expr }
	condExpr struct{ cond, then, els expr }
	notExpr  struct{ e expr }
	negExpr  struct{ e expr }
	andExpr  struct{ l, r expr }
	orExpr   struct{ l, r expr }
	binExpr  struct {
		op   string
		l, r expr
	}
	attrExpr struct {
		e    expr
		name string
	}
	itemExpr  struct{ e, key expr }
	sliceExpr struct {
		e     expr
		parts [3]expr
	}
	callExpr struct {
		fn           expr
		args, kwargs []expr
		kwnames      []string
	}
	filterExpr struct {
		name         string
		value        expr
		args, kwargs []expr
		kwnames      []string
	}
	testExpr struct {
		name  string
		value expr
		args  []expr
		neg   bool
	}
)

func (l literal) eval(*env) (any, error) { return l.v, nil }

func (n nameExpr) eval(e *env) (any, error) {
	if err := e.step(); err != nil {
		return nil, err
	}
	return e.lookup(n.name), nil
}

func (l listExpr) eval(e *env) (any, error) {
	out := make([]any, 0, len(l.items))
	for _, it := range l.items {
		v, err := it.eval(e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if l.tuple {
		return tuple(out), nil
	}
	return out, nil
}

func (d dictExpr) eval(e *env) (any, error) {
	out := NewDict()
	for i := range d.keys {
		k, err := d.keys[i].eval(e)
		if err != nil {
			return nil, err
		}
		ks, ok := k.(string)
		if !ok {
			return nil, fmt.Errorf("a dict's key %s is not a string", repr(k))
		}
		v, err := d.values[i].eval(e)
		if err != nil {
			return nil, err
		}
		out.Set(ks, v)
	}
	return out, nil
}

func (c condExpr) eval(e *env) (any, error) {
	v, err := c.cond.eval(e)
	if err != nil {
		return nil, err
	}
	if truth(v) {
		return c.then.eval(e)
	}
	if c.els == nil {
		return undefined{"the else of a conditional"}, nil
	}
	return c.els.eval(e)
}

func (n notExpr) eval(e *env) (any, error) {
	v, err := n.e.eval(e)
	return !truth(v), err
}

func (n negExpr) eval(e *env) (any, error) {
	v, err := n.e.eval(e)
	if err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case int64:
		return -x, nil
	case float64:
		return -x, nil
	case bool:
		return -boolInt(x), nil
	}
	return nil, fmt.Errorf("-%s: not a number", typeName(v))
}

func (a andExpr) eval(e *env) (any, error) {
	l, err := a.l.eval(e)
	if err != nil || !truth(l) {
		return l, err
	}
	return a.r.eval(e)
}

func (o orExpr) eval(e *env) (any, error) {
	l, err := o.l.eval(e)
	if err != nil || truth(l) {
		return l, err
	}
	return o.r.eval(e)
}

func (b binExpr) eval(e *env) (any, error) {
	if err := e.step(); err != nil {
		return nil, err
	}
	l, err := b.l.eval(e)
	if err != nil {
		return nil, err
	}
	r, err := b.r.eval(e)
	if err != nil {
		return nil, err
	}
	return binary(b.op, l, r)
}

func (a attrExpr) eval(e *env) (any, error) {
	v, err := a.e.eval(e)
	if err != nil {
		return nil, err
	}
	return getAttr(v, a.name)
}

func (it itemExpr) eval(e *env) (any, error) {
	v, err := it.e.eval(e)
	if err != nil {
		return nil, err
	}
	k, err := it.key.eval(e)
	if err != nil {
		return nil, err
	}
	return getItem(v, k)
}

func (s sliceExpr) eval(e *env) (any, error) {
	v, err := s.e.eval(e)
	if err != nil {
		return nil, err
	}
	var idx [3]*int64
	for i, p := range s.parts {
		if p == nil {
			continue
		}
		x, err := p.eval(e)
		if err != nil {
			return nil, err
		}
		if x == nil {
			continue
		}
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("a slice's bound %s is not an integer", repr(x))
		}
		idx[i] = &n
	}
	return slice(v, idx)
}

func (c callExpr) eval(e *env) (any, error) {
	if err := e.step(); err != nil {
		return nil, err
	}
	args, kw, err := evalArgs(e, c.args, c.kwargs, c.kwnames)
	if err != nil {
		return nil, err
	}
	switch f := c.fn.(type) {
	case nameExpr:
		if v, ok := e.lookup(f.name).(undefined); !ok {
			return nil, fmt.Errorf("%s is not a function", f.name)
		} else if fn, ok := functions[v.name]; ok {
			return fn(e, args, kw)
		}
	case attrExpr:
		recv, err := f.e.eval(e)
		if err != nil {
			return nil, err
		}
		return callMethod(recv, f.name, args, kw)
	}
	return nil, fmt.Errorf("only functions and methods are called")
}

func evalArgs(e *env, args, kwargs []expr, names []string) ([]any, map[string]any, error) {
	out := make([]any, 0, len(args))
	for _, a := range args {
		v, err := a.eval(e)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, v)
	}
	kw := map[string]any{}
	for i, a := range kwargs {
		v, err := a.eval(e)
		if err != nil {
			return nil, nil, err
		}
		kw[names[i]] = v
	}
	return out, kw, nil
}

func (f filterExpr) eval(e *env) (any, error) {
	if err := e.step(); err != nil {
		return nil, err
	}
	v, err := f.value.eval(e)
	if err != nil {
		return nil, err
	}
	args, kw, err := evalArgs(e, f.args, f.kwargs, f.kwnames)
	if err != nil {
		return nil, err
	}
	out, err := filters[f.name](v, args, kw)
	if err != nil {
		return nil, fmt.Errorf("|%s: %w", f.name, err)
	}
	return out, nil
}

func (t testExpr) eval(e *env) (any, error) {
	v, err := t.value.eval(e)
	if err != nil {
		return nil, err
	}
	args, _, err := evalArgs(e, t.args, nil, nil)
	if err != nil {
		return nil, err
	}
	ok, err := tests[t.name](v, args)
	if err != nil {
		return nil, fmt.Errorf("is %s: %w", t.name, err)
	}
	return ok != t.neg, nil
}

// truth is Python's truth of a value.
func truth(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *Dict:
		return len(x.Keys) > 0
	}
	return true
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// number reads a value as a number, saying whether it is a float.
func number(v any) (int64, float64, bool, bool) {
	switch x := v.(type) {
	case bool:
		return boolInt(x), float64(boolInt(x)), false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

func binary(op string, l, r any) (any, error) {
	switch op {
	case "~":
		return str(l) + str(r), nil
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in", "not in":
		in, err := contains(r, l)
		return in == (op == "in"), err
	}
	if u, ok := l.(undefined); ok {
		return nil, fmt.Errorf("%s is undefined", u.name)
	}
	if u, ok := r.(undefined); ok {
		return nil, fmt.Errorf("%s is undefined", u.name)
	}
	if v, ok, err := arith(op, l, r); ok {
		return v, err
	}
	ls, lstr := l.(string)
	rs, rstr := r.(string)
	if lstr && rstr {
		switch op {
		case "+":
			if len(ls)+len(rs) > MaxOutputBytes {
				return nil, fmt.Errorf("a string passes %d bytes", MaxOutputBytes)
			}
			return ls + rs, nil
		case "<":
			return ls < rs, nil
		case ">":
			return ls > rs, nil
		case "<=":
			return ls <= rs, nil
		case ">=":
			return ls >= rs, nil
		}
	}
	if ll, ok := l.([]any); ok && op == "+" {
		if rl, ok := r.([]any); ok {
			return append(append([]any{}, ll...), rl...), nil
		}
	}
	if ll, ok := l.(tuple); ok && op == "+" {
		if rl, ok := r.(tuple); ok {
			return append(append(tuple{}, ll...), rl...), nil
		}
	}
	if op == "*" {
		if n, ok := r.(int64); ok && lstr {
			if n <= 0 {
				return "", nil
			}
			if int64(len(ls))*n > MaxOutputBytes {
				return nil, fmt.Errorf("a string passes %d bytes", MaxOutputBytes)
			}
			return strings.Repeat(ls, int(n)), nil
		}
	}
	return nil, fmt.Errorf("%s %s %s is not defined", typeName(l), op, typeName(r))
}

// arith is op of two numbers (bools count as 0 and 1); ok is false when
// either is not a number.
func arith(op string, l, r any) (any, bool, error) {
	li, lf, lfl, lok := number(l)
	ri, rf, rfl, rok := number(r)
	if !lok || !rok {
		return nil, false, nil
	}
	isFloat := lfl || rfl
	switch op {
	case "+", "-", "*":
		if !isFloat {
			switch op {
			case "+":
				return li + ri, true, nil
			case "-":
				return li - ri, true, nil
			}
			return li * ri, true, nil
		}
		switch op {
		case "+":
			return lf + rf, true, nil
		case "-":
			return lf - rf, true, nil
		}
		return lf * rf, true, nil
	case "/":
		if rf == 0 {
			return nil, true, errors.New("division by zero")
		}
		return lf / rf, true, nil
	case "//", "%":
		if rf == 0 {
			return nil, true, errors.New("division by zero")
		}
		if !isFloat {
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			if op == "//" {
				return q, true, nil
			}
			return li - q*ri, true, nil
		}
		q := math.Floor(lf / rf)
		if op == "//" {
			return q, true, nil
		}
		return lf - q*rf, true, nil
	case "**":
		if !isFloat && ri >= 0 && ri < 64 {
			p := int64(1)
			for range ri {
				p *= li
			}
			return p, true, nil
		}
		return math.Pow(lf, rf), true, nil
	case "<":
		return lf < rf, true, nil
	case ">":
		return lf > rf, true, nil
	case "<=":
		return lf <= rf, true, nil
	case ">=":
		return lf >= rf, true, nil
	}
	return nil, false, nil
}

func equal(l, r any) bool {
	if _, lf, _, lok := number(l); lok {
		if _, rf, _, rok := number(r); rok {
			return lf == rf
		}
		return false
	}
	switch x := l.(type) {
	case nil:
		return r == nil
	case undefined:
		_, ok := r.(undefined)
		return ok
	case string:
		y, ok := r.(string)
		return ok && x == y
	case tuple:
		y, ok := r.(tuple)
		return ok && equal([]any(x), []any(y))
	case []any:
		y, ok := r.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := r.(*Dict)
		if !ok || len(x.Keys) != len(y.Keys) {
			return false
		}
		for _, k := range x.Keys {
			yv, ok := y.Values[k]
			if !ok || !equal(x.Values[k], yv) {
				return false
			}
		}
		return true
	}
	return l == r
}

func contains(container, v any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := v.(string)
		if !ok {
			return false, fmt.Errorf("%s in a string", typeName(v))
		}
		return strings.Contains(c, s), nil
	case []any, tuple:
		items, _ := seq(c)
		for _, x := range items {
			if equal(x, v) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		_, in := c.Values[s]
		return in, nil
	case undefined:
		return false, fmt.Errorf("%s is undefined", c.name)
	}
	return false, fmt.Errorf("in %s", typeName(container))
}

func getAttr(v any, name string) (any, error) {
	switch x := v.(type) {
	case *Dict:
		if dictMethods[name] && !x.namespace { // Python's attribute before the item
			return boundMethod{x, name}, nil
		}
		if y, ok := x.Values[name]; ok {
			return y, nil
		}
		return undefined{name}, nil
	case *loopInfo:
		switch name {
		case "index":
			return int64(x.index + 1), nil
		case "index0":
			return int64(x.index), nil
		case "first":
			return x.index == 0, nil
		case "last":
			return x.index == x.length-1, nil
		case "length":
			return int64(x.length), nil
		case "revindex":
			return int64(x.length - x.index), nil
		case "revindex0":
			return int64(x.length - x.index - 1), nil
		}
		return nil, fmt.Errorf("loop.%s is not supported (loop.index, index0, first, last, length, revindex, revindex0)", name)
	case undefined:
		return nil, fmt.Errorf("%s is undefined (reading its .%s)", x.name, name)
	}
	if _, ok := methods[name]; ok {
		return boundMethod{v, name}, nil
	}
	return undefined{name}, nil
}

// boundMethod is a method read without a call (printed, it is an error).
type boundMethod struct {
	recv any
	name string
}

func getItem(v, key any) (any, error) {
	switch x := v.(type) {
	case *Dict:
		if k, ok := key.(string); ok {
			if y, ok := x.Values[k]; ok {
				return y, nil
			}
			return undefined{k}, nil
		}
		return undefined{str(key)}, nil
	case []any, tuple:
		items, _ := seq(v)
		i, ok := key.(int64)
		if !ok {
			return nil, fmt.Errorf("a list's index %s is not an integer", repr(key))
		}
		if i < 0 {
			i += int64(len(items))
		}
		if i < 0 || i >= int64(len(items)) {
			return undefined{fmt.Sprintf("item %d", i)}, nil
		}
		return items[i], nil
	case string:
		i, ok := key.(int64)
		if !ok {
			return nil, fmt.Errorf("a string's index %s is not an integer", repr(key))
		}
		r := []rune(x)
		if i < 0 {
			i += int64(len(r))
		}
		if i < 0 || i >= int64(len(r)) {
			return undefined{fmt.Sprintf("character %d", i)}, nil
		}
		return string(r[i]), nil
	case undefined:
		return nil, fmt.Errorf("%s is undefined (reading its [%s])", x.name, repr(key))
	case *loopInfo:
		if k, ok := key.(string); ok {
			return getAttr(x, k)
		}
	}
	return nil, fmt.Errorf("%s[%s]: not a list, string or mapping", typeName(v), repr(key))
}

// slice is Python's v[a:b:c] of a list or a string (by characters).
func slice(v any, idx [3]*int64) (any, error) {
	var n int
	var runes []rune
	if t, ok := v.(tuple); ok {
		out, err := slice([]any(t), idx)
		if err != nil {
			return nil, err
		}
		return tuple(out.([]any)), nil
	}
	switch x := v.(type) {
	case []any:
		n = len(x)
	case string:
		runes = []rune(x)
		n = len(runes)
	default:
		return nil, fmt.Errorf("%s[…:…]: not a list or a string", typeName(v))
	}
	step := int64(1)
	if idx[2] != nil {
		step = *idx[2]
	}
	if step == 0 {
		return nil, errors.New("a slice's step is 0")
	}
	bound := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		i := *p
		if i < 0 {
			i += int64(n)
		}
		lo, hi := int64(0), int64(n)
		if step < 0 {
			lo, hi = -1, int64(n)-1
		}
		return max(lo, min(hi, i))
	}
	var start, stop int64
	if step > 0 {
		start, stop = bound(idx[0], 0), bound(idx[1], int64(n))
	} else {
		start, stop = bound(idx[0], int64(n)-1), bound(idx[1], -1)
	}
	var picked []int
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		picked = append(picked, int(i))
	}
	if l, ok := v.([]any); ok {
		out := make([]any, len(picked))
		for k, i := range picked {
			out[k] = l[i]
		}
		return out, nil
	}
	out := make([]rune, len(picked))
	for k, i := range picked {
		out[k] = runes[i]
	}
	return string(out), nil
}

// iterate is what a for loop walks: a list's items, a dict's keys, a
// string's characters.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case tuple:
		return x, nil
	case *Dict:
		out := make([]any, len(x.Keys))
		for i, k := range x.Keys {
			out[i] = k
		}
		return out, nil
	case string:
		var out []any
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case undefined:
		return nil, fmt.Errorf("%s is undefined", x.name)
	}
	return nil, fmt.Errorf("%s is not iterable", typeName(v))
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case undefined:
		return "undefined"
	}
	return fmt.Sprintf("%T", v)
}
