package chat

import (
	"fmt"
	"strconv"
	"strings"
)

// node is a statement of a template's body.
type node interface{ exec(*env) error }

// expr is an expression.
type expr interface{ eval(*env) (any, error) }

type (
	textNode  struct{ text string }
	printNode struct{ e expr }
	ifNode    struct {
		conds  []expr
		bodies [][]node // one per cond, then the else body if any
	}
	forNode struct {
		names      []string
		iter, cond expr
		body, els  []node
	}
	setNode struct {
		name, attr string // attr: ns.attr = …
		value      expr
	}
	generationNode struct{ body []node }
	loopControl    struct{ brk bool }
)

// parser reads a template's parts into statements.
type parser struct {
	parts []part
	i     int
	// generation: a {% generation %} block was read.
	generation bool
}

// Template is a parsed chat template.
type Template struct {
	body []node
	// hasGeneration: a {% generation %} block marks the assistant's text.
	hasGeneration bool
}

// Parse reads a chat template, refusing any construct it does not run,
// named with its line.
func Parse(src string) (*Template, error) {
	parts, err := split(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	p := &parser{parts: parts}
	body, end, err := p.block()
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	if end != "" {
		return nil, fmt.Errorf("chat template: line %d: {%% %s %%} without its opening statement", p.parts[p.i-1].line, end)
	}
	return &Template{body: body, hasGeneration: p.generation}, nil
}

// block reads statements up to an end, elif or else tag, returning the
// tag's text ("" at the template's end).
func (p *parser) block(ends ...string) ([]node, string, error) {
	var body []node
	for p.i < len(p.parts) {
		pt := p.parts[p.i]
		p.i++
		switch pt.kind {
		case 't':
			body = append(body, textNode{pt.src})
		case 'v':
			e, err := parseExpr(pt.src)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: {{%s}}: %w", pt.line, pt.src, err)
			}
			body = append(body, printNode{e})
		case 's':
			toks, err := lex(pt.src)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: {%%%s%%}: %w", pt.line, pt.src, err)
			}
			if len(toks) == 0 || toks[0].kind != 'n' {
				return nil, "", fmt.Errorf("line %d: {%%%s%%} is not a statement", pt.line, pt.src)
			}
			kw := toks[0].text
			for _, e := range ends {
				if kw == e {
					return body, strings.TrimSpace(pt.src), nil
				}
			}
			n, err := p.statement(kw, toks[1:])
			if err != nil {
				return nil, "", fmt.Errorf("line %d: {%%%s%%}: %w", pt.line, pt.src, err)
			}
			body = append(body, n)
		}
	}
	if len(ends) > 0 {
		return nil, "", fmt.Errorf("{%% %s %%} is missing", ends[len(ends)-1])
	}
	return body, "", nil
}

// statement reads a statement after its keyword.
func (p *parser) statement(kw string, toks []token) (node, error) {
	switch kw {
	case "if":
		n := &ifNode{}
		cond, err := exprOf(toks)
		if err != nil {
			return nil, err
		}
		for {
			body, end, err := p.block("elif", "else", "endif")
			if err != nil {
				return nil, err
			}
			n.conds = append(n.conds, cond)
			n.bodies = append(n.bodies, body)
			switch end {
			case "endif":
				return n, nil
			case "else":
				els, _, err := p.block("endif")
				if err != nil {
					return nil, err
				}
				n.bodies = append(n.bodies, els)
				return n, nil
			}
			et, err := lex(end)
			if err != nil {
				return nil, err
			}
			if cond, err = exprOf(et[1:]); err != nil {
				return nil, fmt.Errorf("elif: %w", err)
			}
		}
	case "for":
		return p.forStatement(toks)
	case "set":
		eq := topLevel(toks, "=")
		if eq < 0 {
			return nil, fmt.Errorf("{%% set %%} blocks are not supported: set a name to an expression (set x = …)")
		}
		n := &setNode{}
		switch {
		case eq == 1 && toks[0].kind == 'n':
			n.name = toks[0].text
		case eq == 3 && toks[0].kind == 'n' && toks[1].text == "." && toks[2].kind == 'n':
			n.name, n.attr = toks[0].text, toks[2].text
		default:
			return nil, fmt.Errorf("set assigns a name or a namespace's attribute")
		}
		var err error
		n.value, err = exprOf(toks[eq+1:])
		return n, err
	case "generation":
		p.generation = true
		body, _, err := p.block("endgeneration")
		return generationNode{body}, err
	case "break", "continue":
		return loopControl{brk: kw == "break"}, nil
	}
	if strings.HasPrefix(kw, "end") || kw == "elif" || kw == "else" {
		return nil, fmt.Errorf("{%% %s %%} without its opening statement", kw)
	}
	return nil, fmt.Errorf("{%% %s %%} is not supported (chat templates here run if, for, set, generation, break and continue)", kw)
}

// forStatement reads a for loop after its keyword: its names, what it
// walks, its filter, its body and its else.
func (p *parser) forStatement(toks []token) (node, error) {
	n := &forNode{}
	i := 0
	for ; i < len(toks); i++ {
		if toks[i].kind == 'n' && toks[i].text == "in" {
			break
		}
		if toks[i].kind == 'n' {
			n.names = append(n.names, toks[i].text)
		} else if toks[i].text != "," && toks[i].text != "(" && toks[i].text != ")" {
			return nil, fmt.Errorf("a for loop's target %q is not a name", toks[i].text)
		}
	}
	if i == len(toks) || len(n.names) == 0 {
		return nil, fmt.Errorf("a for loop without `in`")
	}
	rest := toks[i+1:]
	// `for x in xs if cond`: the condition after a top-level `if`.
	if j := topLevel(rest, "if"); j >= 0 {
		c, err := exprOf(rest[j+1:])
		if err != nil {
			return nil, err
		}
		n.cond, rest = c, rest[:j]
	}
	if j := topLevel(rest, "recursive"); j >= 0 {
		return nil, fmt.Errorf("recursive loops are not supported")
	}
	var err error
	if n.iter, err = exprOf(rest); err != nil {
		return nil, err
	}
	body, end, err := p.block("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.els, _, err = p.block("endfor"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// topLevel is the index of the name or operator s outside brackets, or -1.
func topLevel(toks []token, s string) int {
	depth := 0
	for i, t := range toks {
		switch {
		case t.kind == 'o' && (t.text == "(" || t.text == "[" || t.text == "{"):
			depth++
		case t.kind == 'o' && (t.text == ")" || t.text == "]" || t.text == "}"):
			depth--
		case depth == 0 && t.text == s && (t.kind == 'n' || t.kind == 'o'):
			return i
		}
	}
	return -1
}

func isComparison(op string) bool {
	return op == "==" || op == "!=" || op == "<" || op == ">" || op == "<=" || op == ">="
}

func parseExpr(src string) (expr, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return exprOf(toks)
}

func exprOf(toks []token) (expr, error) {
	if len(toks) == 0 {
		return nil, fmt.Errorf("an expression is missing")
	}
	x := &exprParser{toks: toks}
	e, err := x.condExpr()
	if err != nil {
		return nil, err
	}
	if x.i < len(toks) {
		return nil, fmt.Errorf("unexpected %q", toks[x.i].text)
	}
	return e, nil
}

// exprParser reads an expression by Jinja's precedence: conditional, or,
// and, not, comparisons, + and -, ~, * / // %, **, unary, postfix
// (attributes, items, calls) with filters and tests.
type exprParser struct {
	toks []token
	i    int
}

func (x *exprParser) peek() token {
	if x.i < len(x.toks) {
		return x.toks[x.i]
	}
	return token{}
}

func (x *exprParser) is(text string) bool {
	t := x.peek()
	return t.kind != 's' && t.kind != 0 && t.text == text
}

func (x *exprParser) expect(text string) error {
	if !x.is(text) {
		if t := x.peek(); t.kind != 0 {
			return fmt.Errorf("expected %q, found %q", text, t.text)
		}
		return fmt.Errorf("expected %q at the end", text)
	}
	x.i++
	return nil
}

func (x *exprParser) condExpr() (expr, error) {
	e, err := x.orExpr()
	if err != nil {
		return nil, err
	}
	for x.is("if") {
		x.i++
		cond, err := x.orExpr()
		if err != nil {
			return nil, err
		}
		var els expr
		if x.is("else") {
			x.i++
			if els, err = x.condExpr(); err != nil {
				return nil, err
			}
		}
		e = condExpr{cond, e, els}
	}
	return e, nil
}

func (x *exprParser) orExpr() (expr, error) {
	return x.binary([]string{"or"}, x.andExpr)
}

func (x *exprParser) andExpr() (expr, error) {
	return x.binary([]string{"and"}, x.notExpr)
}

func (x *exprParser) notExpr() (expr, error) {
	if x.is("not") {
		x.i++
		e, err := x.notExpr()
		return notExpr{e}, err
	}
	return x.compare()
}

func (x *exprParser) compare() (expr, error) {
	e, err := x.math1()
	if err != nil {
		return nil, err
	}
	for {
		op := x.peek().text
		switch {
		case x.peek().kind == 'o' && isComparison(op):
		case x.is("in"):
		case x.is("not") && x.i+1 < len(x.toks) && x.toks[x.i+1].text == "in":
			x.i++
			op = "not in"
		default:
			return e, nil
		}
		x.i++
		r, err := x.math1()
		if err != nil {
			return nil, err
		}
		e = binExpr{op, e, r}
	}
}

func (x *exprParser) math1() (expr, error)  { return x.binary([]string{"+", "-"}, x.concat) }
func (x *exprParser) concat() (expr, error) { return x.binary([]string{"~"}, x.math2) }
func (x *exprParser) math2() (expr, error) {
	return x.binary([]string{"*", "/", "//", "%"}, x.pow)
}
func (x *exprParser) pow() (expr, error) { return x.binary([]string{"**"}, x.unary) }

func (x *exprParser) binary(ops []string, next func() (expr, error)) (expr, error) {
	e, err := next()
	if err != nil {
		return nil, err
	}
	for {
		t := x.peek()
		found := false
		for _, op := range ops {
			if t.kind != 's' && t.kind != 0 && t.text == op {
				found = true
			}
		}
		if !found {
			return e, nil
		}
		x.i++
		r, err := next()
		if err != nil {
			return nil, err
		}
		switch t.text {
		case "and":
			e = andExpr{e, r}
		case "or":
			e = orExpr{e, r}
		default:
			e = binExpr{t.text, e, r}
		}
	}
}

func (x *exprParser) unary() (expr, error) {
	e, err := x.unaryOperand()
	if err != nil {
		return nil, err
	}
	return x.filters(e)
}

// unaryOperand is a unary expression before its filters: `-3 | abs` is
// abs(-3), as Jinja reads it.
func (x *exprParser) unaryOperand() (expr, error) {
	if x.is("-") || x.is("+") {
		op := x.peek().text
		x.i++
		e, err := x.unaryOperand()
		if err != nil || op == "+" {
			return e, err
		}
		return negExpr{e}, nil
	}
	e, err := x.primary()
	if err != nil {
		return nil, err
	}
	return x.postfix(e)
}

func (x *exprParser) primary() (expr, error) {
	t := x.peek()
	x.i++
	switch t.kind {
	case 's':
		s := t.text
		for x.peek().kind == 's' { // adjacent literals concatenate
			s += x.peek().text
			x.i++
		}
		return literal{s}, nil
	case 'i':
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %s: %w", t.text, err)
		}
		return literal{v}, nil
	case 'f':
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t.text, err)
		}
		return literal{v}, nil
	case 'n':
		switch t.text {
		case "true", "True":
			return literal{true}, nil
		case "false", "False":
			return literal{false}, nil
		case "none", "None":
			return literal{nil}, nil
		}
		return nameExpr{t.text}, nil
	case 'o':
		switch t.text {
		case "(":
			items, tuple, err := x.items(")")
			if err != nil {
				return nil, err
			}
			if len(items) == 1 && !tuple {
				return items[0], nil
			}
			return listExpr{items: items, tuple: true}, nil
		case "[":
			items, _, err := x.items("]")
			return listExpr{items: items}, err
		case "{":
			d := dictExpr{}
			for !x.is("}") {
				k, err := x.condExpr()
				if err != nil {
					return nil, err
				}
				if err := x.expect(":"); err != nil {
					return nil, err
				}
				v, err := x.condExpr()
				if err != nil {
					return nil, err
				}
				d.keys, d.values = append(d.keys, k), append(d.values, v)
				if !x.is(",") {
					break
				}
				x.i++
			}
			return d, x.expect("}")
		}
	case 0:
		return nil, fmt.Errorf("an expression is cut short")
	}
	return nil, fmt.Errorf("unexpected %q", t.text)
}

// items reads expressions separated by commas up to close, saying whether
// a comma was seen (a tuple).
func (x *exprParser) items(closeTok string) ([]expr, bool, error) {
	var items []expr
	comma := false
	for !x.is(closeTok) {
		e, err := x.condExpr()
		if err != nil {
			return nil, false, err
		}
		items = append(items, e)
		if !x.is(",") {
			break
		}
		comma = true
		x.i++
	}
	return items, comma, x.expect(closeTok)
}

func (x *exprParser) postfix(e expr) (expr, error) {
	for {
		switch {
		case x.is("."):
			x.i++
			t := x.peek()
			if t.kind != 'n' && t.kind != 'i' {
				return nil, fmt.Errorf("a name after '.'")
			}
			x.i++
			if x.is("(") {
				if _, ok := methods[t.text]; !ok {
					return nil, fmt.Errorf("method %s() is not supported (chat templates here call %s)", t.text, methodNames())
				}
			}
			e = attrExpr{e, t.text}
		case x.is("["):
			x.i++
			var parts [3]expr
			slice := false
			for k := 0; k < 3; k++ {
				if !x.is(":") && !x.is("]") {
					p, err := x.condExpr()
					if err != nil {
						return nil, err
					}
					parts[k] = p
				}
				if !x.is(":") {
					break
				}
				slice = true
				x.i++
			}
			if err := x.expect("]"); err != nil {
				return nil, err
			}
			if slice {
				e = sliceExpr{e, parts}
			} else {
				if parts[0] == nil {
					return nil, fmt.Errorf("an empty subscript")
				}
				e = itemExpr{e, parts[0]}
			}
		case x.is("("):
			x.i++
			c := callExpr{fn: e}
			if err := x.args(&c.args, &c.kwargs, &c.kwnames); err != nil {
				return nil, err
			}
			if n, ok := e.(nameExpr); ok {
				if _, ok := functions[n.name]; !ok {
					return nil, fmt.Errorf("function %s() is not supported (chat templates here call %s)", n.name, functionNames())
				}
			}
			e = c
		default:
			return e, nil
		}
	}
}

// args reads a call's arguments after its "(".
func (x *exprParser) args(args, kwargs *[]expr, names *[]string) error {
	for !x.is(")") {
		if x.peek().kind == 'n' && x.i+1 < len(x.toks) && x.toks[x.i+1].text == "=" && x.toks[x.i+1].kind == 'o' {
			*names = append(*names, x.peek().text)
			x.i += 2
			e, err := x.condExpr()
			if err != nil {
				return err
			}
			*kwargs = append(*kwargs, e)
		} else {
			e, err := x.condExpr()
			if err != nil {
				return err
			}
			*args = append(*args, e)
		}
		if !x.is(",") {
			break
		}
		x.i++
	}
	return x.expect(")")
}

func (x *exprParser) filters(e expr) (expr, error) {
	for {
		switch {
		case x.is("|"):
			x.i++
			t := x.peek()
			if t.kind != 'n' {
				return nil, fmt.Errorf("a filter's name after '|'")
			}
			x.i++
			if _, ok := filters[t.text]; !ok {
				return nil, fmt.Errorf("filter %s is not supported (chat templates here use %s)", t.text, filterNames())
			}
			f := filterExpr{name: t.text, value: e}
			if x.is("(") {
				x.i++
				if err := x.args(&f.args, &f.kwargs, &f.kwnames); err != nil {
					return nil, err
				}
			}
			e = f
		case x.is("is"):
			x.i++
			neg := false
			if x.is("not") {
				x.i++
				neg = true
			}
			t := x.peek()
			if t.kind != 'n' && (t.kind != 'o' || !isComparison(t.text)) {
				return nil, fmt.Errorf("a test's name after 'is'")
			}
			x.i++
			name := t.text
			if name == "none" || name == "true" || name == "false" {
				name = strings.ToLower(name)
			}
			if _, ok := tests[name]; !ok {
				return nil, fmt.Errorf("test %s is not supported (chat templates here test %s)", name, testNames())
			}
			te := testExpr{name: name, value: e, neg: neg}
			if x.is("(") {
				x.i++
				var kw []expr
				var kwn []string
				if err := x.args(&te.args, &kw, &kwn); err != nil {
					return nil, err
				}
			} else if t := x.peek(); t.kind == 's' || t.kind == 'i' || t.kind == 'f' || (t.kind == 'o' && (t.text == "[" || t.text == "{")) || (t.kind == 'n' && t.text != "and" && t.text != "or" && t.text != "else" && t.text != "if" && t.text != "is" && t.text != "in" && t.text != "not") {
				arg, err := x.primary()
				if err != nil {
					return nil, err
				}
				if arg, err = x.postfix(arg); err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			e = te
		default:
			return e, nil
		}
	}
}
