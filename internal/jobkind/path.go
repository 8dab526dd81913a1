package jobkind

import (
	"fmt"
	"regexp"
	"strings"
)

// Path is where something is in a job's object: fields joined by dots,
// "name[]" for each item of a list, "*" for each value of a map (a
// PyTorchJob's spec.pytorchReplicaSpecs.*.template).
type Path string

// maxSegments bounds a declared path (and the CEL made of it).
const maxSegments = 16

// fieldName is a field a path may name: up to 63 characters, so that the
// match condition made of a path stays within the API server's CEL limits.
var fieldName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// celReserved are CEL's reserved words, which Kubernetes escapes in field
// names (__namespace__): a path holding one would need the escape in the
// webhook's match condition, so declared paths may not.
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true,
}

// segment is one step of a path.
type segment struct {
	field string
	each  bool // field[]: each item of the list; field "" and each: each value of the map ("*")
}

// Check says what is wrong with the path, if anything. plain refuses "[]"
// and "*" (a count is one field).
func (p Path) Check(plain bool) error {
	_, err := p.segments(plain)
	return err
}

func (p Path) segments(plain bool) ([]segment, error) {
	if p == "" {
		return nil, fmt.Errorf("a path is empty: give fields joined by dots, e.g. spec.template")
	}
	parts := strings.Split(string(p), ".")
	if len(parts) > maxSegments {
		return nil, fmt.Errorf("path %q has %d fields, more than %d", p, len(parts), maxSegments)
	}
	segs := make([]segment, 0, len(parts))
	for i, part := range parts {
		s := segment{field: part}
		switch {
		case part == "*" && !plain && i > 0:
			s = segment{each: true}
		case strings.HasSuffix(part, "[]") && part != "[]" && !plain:
			s = segment{field: strings.TrimSuffix(part, "[]"), each: true}
		}
		if s.field != "" || !s.each {
			if !fieldName.MatchString(s.field) {
				hint := "fields are names of up to 63 characters ([A-Za-z_][A-Za-z0-9_]*)"
				if !plain {
					hint += `, "name[]" for each item of a list, "*" for each value of a map (not first)`
				}
				return nil, fmt.Errorf("path %q: %q is not a field: %s", p, part, hint)
			}
			if celReserved[s.field] || strings.Contains(s.field, "__") {
				return nil, fmt.Errorf("path %q: field %q is a CEL reserved word or holds \"__\", which the webhook's match condition cannot name unescaped", p, s.field)
			}
		}
		segs = append(segs, s)
	}
	return segs, nil
}

// mustSegments is segments of a path the package wrote or checked.
func (p Path) mustSegments() []segment {
	segs, err := p.segments(false)
	if err != nil {
		panic(fmt.Sprintf("jobkind: %v", err))
	}
	return segs
}

// parent is the path without its last field, and that field.
func (p Path) parent() (Path, string) {
	i := strings.LastIndexByte(string(p), '.')
	if i < 0 {
		return "", string(p)
	}
	return p[:i], string(p[i+1:])
}

// lookup is the map at a plain path ("" is obj itself).
func (p Path) lookup(obj map[string]any) (map[string]any, bool) {
	if p == "" {
		return obj, true
	}
	m := obj
	for _, s := range p.mustSegments() {
		next, ok := m[s.field].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

// templates are the maps at the path that have a spec (pod templates).
func (p Path) templates(obj map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(v any, segs []segment)
	walk = func(v any, segs []segment) {
		if len(segs) == 0 {
			if m, ok := v.(map[string]any); ok {
				if _, ok := m["spec"].(map[string]any); ok {
					out = append(out, m)
				}
			}
			return
		}
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		s := segs[0]
		switch {
		case s.field == "": // each value of the map
			for _, k := range sortedKeys(m) {
				walk(m[k], segs[1:])
			}
		case s.each:
			items, _ := m[s.field].([]any)
			for _, item := range items {
				walk(item, segs[1:])
			}
		default:
			walk(m[s.field], segs[1:])
		}
	}
	walk(obj, p.mustSegments())
	return out
}

// LabelledCEL is a CEL expression, over the admission request's object,
// true when one of the kind's pod templates has label among its labels:
// the queued-jobs webhook's match condition.
func (k *Kind) LabelledCEL(label string) string {
	exprs := make([]string, 0, len(k.Templates))
	for _, p := range k.Templates {
		exprs = append(exprs, labelledCEL("object", p.mustSegments(), label, 0))
	}
	if len(exprs) == 1 {
		return exprs[0]
	}
	return "(" + strings.Join(exprs, ") || (") + ")"
}

func labelledCEL(expr string, segs []segment, label string, depth int) string {
	var conds []string
	for i, s := range segs {
		switch {
		case s.field == "": // each value of the map at expr
			v := fmt.Sprintf("k%d", depth)
			conds = append(conds, fmt.Sprintf("%s.exists(%s, %s)", expr, v, labelledCEL(expr+"["+v+"]", segs[i+1:], label, depth+1)))
			return strings.Join(conds, " && ")
		case s.each:
			v := fmt.Sprintf("x%d", depth)
			expr += "." + s.field
			conds = append(conds, "has("+expr+")", fmt.Sprintf("%s.exists(%s, %s)", expr, v, labelledCEL(v, segs[i+1:], label, depth+1)))
			return strings.Join(conds, " && ")
		default:
			expr += "." + s.field
			conds = append(conds, "has("+expr+")")
		}
	}
	conds = append(conds, "has("+expr+".metadata)", "has("+expr+".metadata.labels)",
		fmt.Sprintf("'%s' in %s.metadata.labels", label, expr))
	return strings.Join(conds, " && ")
}
