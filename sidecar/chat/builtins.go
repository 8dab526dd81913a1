package chat

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// str is Python's str() of a value, as {{ }} prints it.
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case undefined:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return pyFloat(x)
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = repr(it)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case tuple:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = repr(it)
		}
		if len(x) == 1 {
			return "(" + parts[0] + ",)"
		}
		return "(" + strings.Join(parts, ", ") + ")"
	case *Dict:
		parts := make([]string, len(x.Keys))
		for i, k := range x.Keys {
			parts[i] = repr(k) + ": " + repr(x.Values[k])
		}
		if x.namespace {
			return "<Namespace {" + strings.Join(parts, ", ") + "}>"
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *loopInfo:
		return fmt.Sprintf("<LoopContext %d/%d>", x.index+1, x.length)
	case boundMethod:
		return "<built-in method " + x.name + ">"
	}
	return fmt.Sprint(v)
}

// repr is Python's repr(): a string quoted as Python quotes it.
func repr(v any) string {
	s, ok := v.(string)
	if !ok {
		return str(v)
	}
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r != ' ':
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// pyFloat is Python's repr of a float: the shortest digits that read back,
// in exponent form below 1e-4 and from 1e16.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		if !strings.Contains(mant, ".") {
			mant = strings.TrimSuffix(mant, ".")
		}
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, x)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// toJSON is Python's json.dumps(v, ensure_ascii=False, …), as
// transformers' tojson filter calls it.
func toJSON(b *strings.Builder, v any, indent int, itemSep, keySep string, sortKeys bool, depth int) error {
	if depth > 100 {
		return errors.New("nested more than 100 deep")
	}
	newline := func(d int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[x])
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		jsonString(b, x)
	case tuple:
		return toJSON(b, []any(x), indent, itemSep, keySep, sortKeys, depth)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			if err := toJSON(b, it, indent, itemSep, keySep, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte(']')
	case *Dict:
		if len(x.Keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := x.Keys
		if sortKeys {
			keys = slices.Clone(keys)
			sort.Strings(keys)
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(depth + 1)
			jsonString(b, k)
			b.WriteString(keySep)
			if err := toJSON(b, x.Values[k], indent, itemSep, keySep, sortKeys, depth+1); err != nil {
				return err
			}
		}
		newline(depth)
		b.WriteByte('}')
	case undefined:
		return fmt.Errorf("%s is undefined", x.name)
	default:
		return fmt.Errorf("a %s is not JSON", typeName(v))
	}
	return nil
}

// jsonString writes s as json.dumps does with ensure_ascii=False.
func jsonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyStrip is str.strip(chars): whitespace when chars is None.
func pyStrip(s string, args []any, left, right bool) (string, error) {
	cut := isPySpace
	if len(args) > 0 && args[0] != nil {
		chars, ok := args[0].(string)
		if !ok {
			return "", fmt.Errorf("strip's characters %s are not a string", repr(args[0]))
		}
		cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, cut)
	}
	if right {
		s = strings.TrimRightFunc(s, cut)
	}
	return s, nil
}

func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsLetter(r)
	}
	return b.String()
}

func pyCapitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[n:])
}

// pySplit is str.split(sep=None, maxsplit=-1).
func pySplit(s string, args []any, kw map[string]any) ([]any, error) {
	var sep any
	maxsplit := int64(-1)
	if len(args) > 0 {
		sep = args[0]
	} else if v, ok := kw["sep"]; ok {
		sep = v
	}
	if len(args) > 1 {
		if n, ok := args[1].(int64); ok {
			maxsplit = n
		}
	} else if v, ok := kw["maxsplit"].(int64); ok {
		maxsplit = v
	}
	var parts []string
	if sep == nil {
		fields := strings.FieldsFunc(s, isPySpace)
		if maxsplit >= 0 && int64(len(fields)) > maxsplit+1 {
			// The rest after maxsplit splits, its leading space stripped.
			rest := s
			parts = nil
			for range maxsplit {
				rest = strings.TrimLeftFunc(rest, isPySpace)
				i := strings.IndexFunc(rest, isPySpace)
				parts = append(parts, rest[:i])
				rest = rest[i:]
			}
			parts = append(parts, strings.TrimLeftFunc(rest, isPySpace))
		} else {
			parts = fields
		}
	} else {
		sp, ok := sep.(string)
		if !ok || sp == "" {
			return nil, errors.New("split's separator is an empty or not a string")
		}
		parts = strings.SplitN(s, sp, int(max(maxsplit+1, -1)))
		if maxsplit < 0 {
			parts = strings.Split(s, sp)
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func argString(args []any, i int, what string) (string, error) {
	if len(args) <= i {
		return "", fmt.Errorf("%s is missing", what)
	}
	s, ok := args[i].(string)
	if !ok {
		return "", fmt.Errorf("%s %s is not a string", what, repr(args[i]))
	}
	return s, nil
}

// dictMethods are the methods of a dict (the rest are a string's).
var dictMethods = map[string]bool{"items": true, "keys": true, "values": true, "get": true}

// methods are the methods of strings and dicts templates call.
var methods = map[string]func(recv any, args []any, kw map[string]any) (any, error){
	"strip":  func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 's') },
	"lstrip": func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 'l') },
	"rstrip": func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 'r') },
	"upper":  func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 'U') },
	"lower":  func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 'L') },
	"title":  func(r any, a []any, _ map[string]any) (any, error) { return strMethod(r, a, 'T') },
	"capitalize": func(r any, a []any, _ map[string]any) (any, error) {
		return strMethod(r, a, 'C')
	},
	"startswith": func(r any, a []any, _ map[string]any) (any, error) { return affix(r, a, strings.HasPrefix) },
	"endswith":   func(r any, a []any, _ map[string]any) (any, error) { return affix(r, a, strings.HasSuffix) },
	"split": func(r any, a []any, kw map[string]any) (any, error) {
		s, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("%s.split()", typeName(r))
		}
		return pySplit(s, a, kw)
	},
	"replace": func(r any, a []any, _ map[string]any) (any, error) { return replace(r, a) },
	"join": func(r any, a []any, _ map[string]any) (any, error) {
		s, ok := r.(string)
		if !ok || len(a) != 1 {
			return nil, fmt.Errorf("%s.join() takes one list", typeName(r))
		}
		return join(a[0], s)
	},
	"find": func(r any, a []any, _ map[string]any) (any, error) {
		s, ok := r.(string)
		if !ok {
			return nil, fmt.Errorf("a %s has no find()", typeName(r))
		}
		sub, err := argString(a, 0, "find's substring")
		if err != nil {
			return nil, err
		}
		i := strings.Index(s, sub)
		if i < 0 {
			return int64(-1), nil
		}
		return int64(utf8.RuneCountInString(s[:i])), nil
	},
	"items": func(r any, _ []any, _ map[string]any) (any, error) {
		d, ok := r.(*Dict)
		if !ok {
			return nil, fmt.Errorf("%s.items()", typeName(r))
		}
		out := make([]any, len(d.Keys))
		for i, k := range d.Keys {
			out[i] = tuple{k, d.Values[k]}
		}
		return out, nil
	},
	"keys": func(r any, _ []any, _ map[string]any) (any, error) {
		d, ok := r.(*Dict)
		if !ok {
			return nil, fmt.Errorf("%s.keys()", typeName(r))
		}
		return iterate(d)
	},
	"values": func(r any, _ []any, _ map[string]any) (any, error) {
		d, ok := r.(*Dict)
		if !ok {
			return nil, fmt.Errorf("%s.values()", typeName(r))
		}
		out := make([]any, len(d.Keys))
		for i, k := range d.Keys {
			out[i] = d.Values[k]
		}
		return out, nil
	},
	"get": func(r any, a []any, _ map[string]any) (any, error) {
		d, ok := r.(*Dict)
		if !ok {
			return nil, fmt.Errorf("a %s has no get()", typeName(r))
		}
		k, err := argString(a, 0, "get's key")
		if err != nil {
			return nil, err
		}
		if v, ok := d.Values[k]; ok {
			return v, nil
		}
		if len(a) > 1 {
			return a[1], nil
		}
		return nil, nil
	},
}

func strMethod(r any, args []any, op byte) (any, error) {
	s, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("a %s has no string methods", typeName(r))
	}
	switch op {
	case 's':
		return pyStrip(s, args, true, true)
	case 'l':
		return pyStrip(s, args, true, false)
	case 'r':
		return pyStrip(s, args, false, true)
	case 'U':
		return strings.ToUpper(s), nil
	case 'L':
		return strings.ToLower(s), nil
	case 'T':
		return pyTitle(s), nil
	}
	return pyCapitalize(s), nil
}

func affix(r any, args []any, has func(string, string) bool) (any, error) {
	s, ok := r.(string)
	if !ok || len(args) == 0 {
		return nil, fmt.Errorf("%s.startswith/endswith()", typeName(r))
	}
	switch p := args[0].(type) {
	case string:
		return has(s, p), nil
	case tuple: // prefixes
		for _, x := range p {
			if xs, ok := x.(string); ok && has(s, xs) {
				return true, nil
			}
		}
		return false, nil
	}
	return nil, fmt.Errorf("startswith/endswith of %s", typeName(args[0]))
}

func replace(r any, args []any) (any, error) {
	s, ok := r.(string)
	if !ok {
		return nil, fmt.Errorf("%s.replace()", typeName(r))
	}
	old, err := argString(args, 0, "replace's old string")
	if err != nil {
		return nil, err
	}
	repl, err := argString(args, 1, "replace's new string")
	if err != nil {
		return nil, err
	}
	n := -1
	if len(args) > 2 {
		if c, ok := args[2].(int64); ok {
			n = int(c)
		}
	}
	if old != "" && repl != "" && int64(strings.Count(s, old))*int64(len(repl)) > MaxOutputBytes {
		return nil, fmt.Errorf("a string passes %d bytes", MaxOutputBytes)
	}
	return strings.Replace(s, old, repl, n), nil
}

func join(v any, sep string) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = str(it)
	}
	return strings.Join(parts, sep), nil
}

func callMethod(recv any, name string, args []any, kw map[string]any) (any, error) {
	if u, ok := recv.(undefined); ok {
		return nil, fmt.Errorf("%s is undefined (calling its %s())", u.name, name)
	}
	if _, ok := recv.(*Dict); ok && !dictMethods[name] {
		return nil, fmt.Errorf("a dict has no method %s()", name)
	}
	m, ok := methods[name]
	if !ok {
		return nil, fmt.Errorf("method %s() is not supported", name)
	}
	out, err := m(recv, args, kw)
	if err != nil {
		return nil, fmt.Errorf("%s(): %w", name, err)
	}
	return out, nil
}

// functions are the globals templates call: transformers' raise_exception,
// and Jinja's range and namespace.
var functions = map[string]func(e *env, args []any, kw map[string]any) (any, error){
	"raise_exception": func(_ *env, args []any, _ map[string]any) (any, error) {
		msg := "raise_exception()"
		if len(args) > 0 {
			msg = str(args[0])
		}
		return nil, &TemplateError{Message: msg}
	},
	"range": func(e *env, args []any, _ map[string]any) (any, error) {
		var b [3]int64
		b[2] = 1
		for i, a := range args {
			n, ok := a.(int64)
			if !ok || i > 2 {
				return nil, errors.New("range() takes up to three integers")
			}
			b[i] = n
		}
		switch len(args) {
		case 0:
			return nil, errors.New("range() takes an integer")
		case 1:
			b[0], b[1] = 0, b[0]
		}
		if b[2] == 0 {
			return nil, errors.New("range()'s step is 0")
		}
		var out []any
		for i := b[0]; (b[2] > 0 && i < b[1]) || (b[2] < 0 && i > b[1]); i += b[2] {
			if err := e.step(); err != nil { // each item is a step
				return nil, err
			}
			out = append(out, i)
		}
		return out, nil
	},
	"namespace": func(_ *env, args []any, kw map[string]any) (any, error) {
		d := NewDict()
		d.namespace = true
		if len(args) > 0 {
			return nil, errors.New("namespace() takes keyword arguments")
		}
		keys := make([]string, 0, len(kw))
		for k := range kw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.Set(k, kw[k])
		}
		return d, nil
	},
}

// TemplateError is a template's own raise_exception: the conversation is
// not one the template takes (roles out of order, a role it lacks).
type TemplateError struct{ Message string }

func (e *TemplateError) Error() string {
	return "the chat template refused the conversation: " + e.Message
}

// filters are the Jinja filters templates use.
var filters = map[string]func(v any, args []any, kw map[string]any) (any, error){
	"trim": func(v any, args []any, _ map[string]any) (any, error) {
		return pyStrip(str(v), args, true, true)
	},
	"length": length,
	"count":  length,
	"tojson": func(v any, args []any, kw map[string]any) (any, error) {
		indent := -1
		if x, ok := kw["indent"].(int64); ok {
			indent = int(min(max(x, 0), 64))
		} else if len(args) > 0 {
			if x, ok := args[0].(int64); ok {
				indent = int(min(max(x, 0), 64))
			}
		}
		itemSep, keySep := ", ", ": "
		if indent >= 0 {
			itemSep = ","
		}
		if sep, ok := seq(kw["separators"]); ok && len(sep) == 2 {
			itemSep, keySep = str(sep[0]), str(sep[1])
		}
		sortKeys, _ := kw["sort_keys"].(bool)
		var b strings.Builder
		if err := toJSON(&b, v, indent, itemSep, keySep, sortKeys, 0); err != nil {
			return nil, err
		}
		return b.String(), nil
	},
	"upper":      func(v any, _ []any, _ map[string]any) (any, error) { return strings.ToUpper(str(v)), nil },
	"lower":      func(v any, _ []any, _ map[string]any) (any, error) { return strings.ToLower(str(v)), nil },
	"title":      func(v any, _ []any, _ map[string]any) (any, error) { return pyTitle(str(v)), nil },
	"capitalize": func(v any, _ []any, _ map[string]any) (any, error) { return pyCapitalize(str(v)), nil },
	"default":    defaultFilter,
	"d":          defaultFilter,
	"first": func(v any, _ []any, _ map[string]any) (any, error) {
		items, err := iterate(v)
		if err != nil || len(items) == 0 {
			return undefined{"first of an empty sequence"}, err
		}
		return items[0], nil
	},
	"last": func(v any, _ []any, _ map[string]any) (any, error) {
		items, err := iterate(v)
		if err != nil || len(items) == 0 {
			return undefined{"last of an empty sequence"}, err
		}
		return items[len(items)-1], nil
	},
	"join": func(v any, args []any, kw map[string]any) (any, error) {
		sep := ""
		if len(args) > 0 {
			sep = str(args[0])
		} else if s, ok := kw["d"]; ok {
			sep = str(s)
		}
		if attr, ok := kw["attribute"].(string); ok {
			items, err := iterate(v)
			if err != nil {
				return nil, err
			}
			picked := make([]any, len(items))
			for i, it := range items {
				if picked[i], err = getAttr(it, attr); err != nil {
					return nil, err
				}
			}
			v = picked
		}
		return join(v, sep)
	},
	"list": func(v any, _ []any, _ map[string]any) (any, error) { return iterate(v) },
	"string": func(v any, _ []any, _ map[string]any) (any, error) {
		return str(v), nil
	},
	"safe": func(v any, _ []any, _ map[string]any) (any, error) { return v, nil },
	"int": func(v any, args []any, _ map[string]any) (any, error) {
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case bool:
			return boolInt(x), nil
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return n, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
				return int64(f), nil
			}
		}
		if len(args) > 0 {
			return args[0], nil
		}
		return int64(0), nil
	},
	"float": func(v any, args []any, _ map[string]any) (any, error) {
		if _, f, _, ok := number(v); ok {
			return f, nil
		}
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, nil
			}
		}
		if len(args) > 0 {
			return args[0], nil
		}
		return 0.0, nil
	},
	"abs": func(v any, _ []any, _ map[string]any) (any, error) {
		switch x := v.(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		}
		return nil, fmt.Errorf("abs of %s", typeName(v))
	},
	"replace": func(v any, args []any, _ map[string]any) (any, error) { return replace(str(v), args) },
	"reverse": func(v any, _ []any, _ map[string]any) (any, error) {
		if s, ok := v.(string); ok {
			r := []rune(s)
			slices.Reverse(r)
			return string(r), nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		out := slices.Clone(items)
		slices.Reverse(out)
		return out, nil
	},
	"items": func(v any, _ []any, _ map[string]any) (any, error) {
		if _, ok := v.(undefined); ok {
			return []any{}, nil
		}
		return methods["items"](v, nil, nil)
	},
	"selectattr": func(v any, args []any, _ map[string]any) (any, error) { return selectAttr(v, args, true) },
	"rejectattr": func(v any, args []any, _ map[string]any) (any, error) { return selectAttr(v, args, false) },
}

// mapFilter is map(attribute=…) or map(FILTER, …).
func mapFilter(v any, args []any, kw map[string]any) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	attr, byAttr := kw["attribute"].(string)
	for i, it := range items {
		switch {
		case byAttr:
			if out[i], err = getAttr(it, attr); err != nil {
				return nil, err
			}
			if _, missing := out[i].(undefined); missing {
				if d, ok := kw["default"]; ok {
					out[i] = d
				}
			}
		case len(args) > 0:
			name, _ := args[0].(string)
			f, ok := filters[name]
			if !ok || name == "map" {
				return nil, fmt.Errorf("map(%s): not a filter here", repr(args[0]))
			}
			if out[i], err = f(it, args[1:], nil); err != nil {
				return nil, err
			}
		default:
			return nil, errors.New("map() takes a filter or attribute=")
		}
	}
	return out, nil
}

func init() { filters["map"] = mapFilter } // map applies filters

func length(v any, _ []any, _ map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		return int64(utf8.RuneCountInString(x)), nil
	case []any:
		return int64(len(x)), nil
	case tuple:
		return int64(len(x)), nil
	case *Dict:
		return int64(len(x.Keys)), nil
	case undefined:
		return int64(0), nil
	}
	return nil, fmt.Errorf("a %s has no length", typeName(v))
}

func defaultFilter(v any, args []any, kw map[string]any) (any, error) {
	def := any("")
	if len(args) > 0 {
		def = args[0]
	}
	boolean := false
	if len(args) > 1 {
		boolean = truth(args[1])
	} else if b, ok := kw["boolean"]; ok {
		boolean = truth(b)
	}
	if _, ok := v.(undefined); ok || (boolean && !truth(v)) {
		return def, nil
	}
	return v, nil
}

func selectAttr(v any, args []any, keep bool) (any, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return nil, errors.New("an attribute's name is missing")
	}
	attr := str(args[0])
	var out []any
	for _, it := range items {
		a, err := getAttr(it, attr)
		if err != nil {
			return nil, err
		}
		ok := truth(a)
		if len(args) > 1 {
			name := str(args[1])
			t, found := tests[name]
			if !found {
				return nil, fmt.Errorf("test %s is not supported", name)
			}
			if ok, err = t(a, args[2:]); err != nil {
				return nil, err
			}
		}
		if ok == keep {
			out = append(out, it)
		}
	}
	return out, nil
}

func compareTest(op string) func(v any, args []any) (bool, error) {
	return func(v any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("takes one value")
		}
		r, err := binary(op, v, args[0])
		if err != nil {
			return false, err
		}
		return truth(r), nil
	}
}

// tests are the Jinja tests (`is …`) templates use.
var tests = map[string]func(v any, args []any) (bool, error){
	"defined":   func(v any, _ []any) (bool, error) { _, u := v.(undefined); return !u, nil },
	"undefined": func(v any, _ []any) (bool, error) { _, u := v.(undefined); return u, nil },
	"none":      func(v any, _ []any) (bool, error) { return v == nil, nil },
	"string":    func(v any, _ []any) (bool, error) { _, ok := v.(string); return ok, nil },
	"number": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case int64, float64, bool:
			return true, nil
		}
		return false, nil
	},
	"integer": func(v any, _ []any) (bool, error) { _, ok := v.(int64); return ok, nil },
	"float":   func(v any, _ []any) (bool, error) { _, ok := v.(float64); return ok, nil },
	"boolean": func(v any, _ []any) (bool, error) { _, ok := v.(bool); return ok, nil },
	"true":    func(v any, _ []any) (bool, error) { b, ok := v.(bool); return ok && b, nil },
	"false":   func(v any, _ []any) (bool, error) { b, ok := v.(bool); return ok && !b, nil },
	"mapping": func(v any, _ []any) (bool, error) { _, ok := v.(*Dict); return ok, nil },
	"sequence": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case string, []any, tuple, *Dict:
			return true, nil
		}
		return false, nil
	},
	"iterable": func(v any, _ []any) (bool, error) {
		switch v.(type) {
		case string, []any, tuple, *Dict:
			return true, nil
		}
		return false, nil
	},
	"odd": func(v any, _ []any) (bool, error) {
		n, ok := v.(int64)
		return ok && n%2 != 0, nil
	},
	"even": func(v any, _ []any) (bool, error) {
		n, ok := v.(int64)
		return ok && n%2 == 0, nil
	},
	"divisibleby": func(v any, args []any) (bool, error) {
		n, ok := v.(int64)
		if len(args) != 1 {
			return false, errors.New("takes one number")
		}
		d, dok := args[0].(int64)
		if !ok || !dok || d == 0 {
			return false, errors.New("divisibleby takes integers, not by 0")
		}
		return n%d == 0, nil
	},
	"eq": compareTest("=="), "equalto": compareTest("=="), "==": compareTest("=="),
	"ne": compareTest("!="), "!=": compareTest("!="),
	"lt": compareTest("<"), "lessthan": compareTest("<"), "<": compareTest("<"),
	"gt": compareTest(">"), "greaterthan": compareTest(">"), ">": compareTest(">"),
	"le": compareTest("<="), "<=": compareTest("<="),
	"ge": compareTest(">="), ">=": compareTest(">="),
	"in": func(v any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errors.New("takes one container")
		}
		return contains(args[0], v)
	},
}

func names[T any](m map[string]T) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func methodNames() string   { return names(methods) }
func functionNames() string { return names(functions) }
func filterNames() string   { return names(filters) }
func testNames() string     { return names(tests) }
