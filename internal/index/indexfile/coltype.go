package indexfile

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The bounds of a column type: how deep lists and structs nest, how many
// types one column's type holds in all, and how long its name may be. A
// JSON value past them is kept as its JSON text (utf8); a type name past
// them is refused.
const (
	MaxTypeDepth = 16
	MaxTypeNodes = 1024
	MaxTypeBytes = 64 << 10
)

// ColumnType is a parsed type of a File's schema. Its grammar:
//
//	type   = "bool" | "int64" | "float64" | "utf8" | "binary"
//	       | "list<" type ">"
//	       | "struct<" [ field { "," field } ] ">"
//	field  = name ":" type
//	name   = a JSON string ("a b", "x\"y") or an identifier ([A-Za-z_][A-Za-z0-9_]*)
//
// String spells it one way (names always quoted, no spaces); that is the
// spelling an index holds. Kind "null" (only nulls seen) exists while a
// schema is inferred and is never written.
type ColumnType struct {
	Kind   string // bool, int64, float64, utf8, binary, list, struct (or null while inferring)
	Elem   *ColumnType
	Fields []StructField
}

// StructField is one named field of a struct type.
type StructField struct {
	Name string
	Type *ColumnType
}

// The scalar types, shared: a ColumnType is never changed once made.
var (
	BoolType    = &ColumnType{Kind: "bool"}
	Int64Type   = &ColumnType{Kind: "int64"}
	Float64Type = &ColumnType{Kind: "float64"}
	UTF8Type    = &ColumnType{Kind: "utf8"}
	BinaryType  = &ColumnType{Kind: "binary"}
	NullType    = &ColumnType{Kind: "null"}
)

// ListOf is list<elem>.
func ListOf(elem *ColumnType) *ColumnType { return &ColumnType{Kind: "list", Elem: elem} }

// StructOf is struct<fields>.
func StructOf(fields ...StructField) *ColumnType {
	return &ColumnType{Kind: "struct", Fields: fields}
}

func (t *ColumnType) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t *ColumnType) write(b *strings.Builder) {
	switch t.Kind {
	case "list":
		b.WriteString("list<")
		t.Elem.write(b)
		b.WriteByte('>')
	case "struct":
		b.WriteString("struct<")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(',')
			}
			q, _ := json.Marshal(f.Name)
			b.Write(q)
			b.WriteByte(':')
			f.Type.write(b)
		}
		b.WriteByte('>')
	default:
		b.WriteString(t.Kind)
	}
}

// Nodes is how many types t holds, itself included.
func (t *ColumnType) Nodes() int {
	n := 1
	switch t.Kind {
	case "list":
		n += t.Elem.Nodes()
	case "struct":
		for _, f := range t.Fields {
			n += f.Type.Nodes()
		}
	}
	return n
}

// Depth is how deeply lists and structs nest in t (a scalar is 0).
func (t *ColumnType) Depth() int {
	d := 0
	switch t.Kind {
	case "list":
		d = t.Elem.Depth()
	case "struct":
		for _, f := range t.Fields {
			d = max(d, f.Type.Depth())
		}
	default:
		return 0
	}
	return d + 1
}

// Field returns the type of a struct's field name, or nil.
func (t *ColumnType) Field(name string) *ColumnType {
	for _, f := range t.Fields {
		if f.Name == name {
			return f.Type
		}
	}
	return nil
}

// ParseColumnType parses a type name of a File's schema (see ColumnType),
// within MaxTypeBytes, MaxTypeDepth and MaxTypeNodes.
func ParseColumnType(s string) (*ColumnType, error) {
	if len(s) > MaxTypeBytes {
		return nil, fmt.Errorf("type is %d bytes, more than %d", len(s), MaxTypeBytes)
	}
	p := typeParser{s: s}
	t, err := p.parse(0)
	p.skipSpace()
	if err == nil && p.pos != len(s) {
		err = p.fail("unexpected %q after the type", p.rest())
	}
	if err != nil {
		return nil, fmt.Errorf("type %q: %w (types are bool, int64, float64, utf8, binary, list<T> and struct<\"name\":T,...>)", clip(s), err)
	}
	return t, nil
}

type typeParser struct {
	s     string
	pos   int
	nodes int
}

func (p *typeParser) fail(format string, args ...any) error {
	return fmt.Errorf("at byte %d: "+format, append([]any{p.pos}, args...)...)
}

func (p *typeParser) rest() string { return clip(p.s[p.pos:]) }

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func (p *typeParser) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n') {
		p.pos++
	}
}

func (p *typeParser) eat(tok string) bool {
	p.skipSpace()
	if strings.HasPrefix(p.s[p.pos:], tok) {
		p.pos += len(tok)
		return true
	}
	return false
}

func (p *typeParser) parse(depth int) (*ColumnType, error) {
	if p.nodes++; p.nodes > MaxTypeNodes {
		return nil, p.fail("more than %d types nested in one column", MaxTypeNodes)
	}
	p.skipSpace()
	word := p.ident()
	switch word {
	case "bool":
		return BoolType, nil
	case "int64":
		return Int64Type, nil
	case "float64":
		return Float64Type, nil
	case "utf8":
		return UTF8Type, nil
	case "binary":
		return BinaryType, nil
	case "list", "struct":
	case "":
		return nil, p.fail("want a type, got %q", p.rest())
	default:
		return nil, fmt.Errorf("unknown type %q", word)
	}
	if depth >= MaxTypeDepth {
		return nil, p.fail("lists and structs nest more than %d deep", MaxTypeDepth)
	}
	if !p.eat("<") {
		return nil, p.fail("want < after %s", word)
	}
	if word == "list" {
		elem, err := p.parse(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.eat(">") {
			return nil, p.fail("want > to close list<, got %q", p.rest())
		}
		return ListOf(elem), nil
	}
	t := StructOf()
	if p.eat(">") {
		return t, nil
	}
	seen := map[string]bool{}
	for {
		name, err := p.fieldName()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, p.fail("struct field %q appears twice", name)
		}
		seen[name] = true
		if !p.eat(":") {
			return nil, p.fail("want : after struct field %q", name)
		}
		ft, err := p.parse(depth + 1)
		if err != nil {
			return nil, err
		}
		t.Fields = append(t.Fields, StructField{Name: name, Type: ft})
		if p.eat(">") {
			return t, nil
		}
		if !p.eat(",") {
			return nil, p.fail("want , or > in struct<, got %q", p.rest())
		}
	}
}

func (p *typeParser) ident() string {
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || p.pos > start && '0' <= c && c <= '9' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

// fieldName reads a JSON string, or a bare identifier.
func (p *typeParser) fieldName() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.s) || p.s[p.pos] != '"' {
		if name := p.ident(); name != "" {
			return name, nil
		}
		return "", p.fail("want a field name (a JSON string such as \"a b\", or an identifier), got %q", p.rest())
	}
	end := p.pos + 1
	for end < len(p.s) && p.s[end] != '"' {
		if p.s[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.s) {
		return "", p.fail("unterminated field name")
	}
	var name string
	if err := json.Unmarshal([]byte(p.s[p.pos:end+1]), &name); err != nil {
		return "", p.fail("field name %s is not a JSON string: %v", clip(p.s[p.pos:end+1]), err)
	}
	p.pos = end + 1
	return name, nil
}

// CheckColumnType parses a type name and requires the one spelling String
// gives it, as an index holds it.
func CheckColumnType(s string) (*ColumnType, error) {
	t, err := ParseColumnType(s)
	if err != nil {
		return nil, err
	}
	if c := t.String(); c != s {
		return nil, fmt.Errorf("type %q is spelled %q in an index", clip(s), clip(c))
	}
	return t, nil
}

// WithinBounds says whether t nests at most MaxTypeDepth deep and holds at
// most MaxTypeNodes types.
func (t *ColumnType) WithinBounds() bool {
	return t.Depth() <= MaxTypeDepth && t.Nodes() <= MaxTypeNodes
}
