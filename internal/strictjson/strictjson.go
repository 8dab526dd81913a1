package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"
)

// Decode decodes data into v and refuses a key v has no field for,
// as a Decoder with DisallowUnknownFields would, but without a second copy
// of data: json.Unmarshal decodes from data itself, and the key check
// walks data in place (a Decoder over the whole document would first
// buffer all of it, and its tokens cost ten times the walk: most of the
// time to read an index of a million shards). An index is the largest
// document the operator and each sidecar read.
func Decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	c := keyChecker{data: data}
	return c.value(reflect.TypeOf(v))
}

var anyType = reflect.TypeFor[any]()

// keyChecker walks JSON that json.Unmarshal has read without error (so
// valid), and names the first object key whose Go type has no field for
// it. path is where it is, formatted only for the error.
type keyChecker struct {
	data []byte
	i    int
	path []step
}

// step is an object's key, or an array's index (key "", index ≥ 0).
type step struct {
	key   string
	index int
}

var errTruncated = errors.New("unexpected end of JSON input")

func (c *keyChecker) peek() byte {
	for c.i < len(c.data) {
		switch b := c.data[c.i]; b {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return b
		}
	}
	return 0
}

// maxDepth bounds the nesting the walk follows, as encoding/json bounds
// its own: a document of a million '[' must not exhaust the stack.
const maxDepth = 10000

// value checks the value at c.i, whose Go type is t.
func (c *keyChecker) value(t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(c.path) >= maxDepth {
		return fmt.Errorf("the document nests deeper than %d levels", maxDepth)
	}
	switch c.peek() {
	case 0:
		return errTruncated
	case '{':
		c.i++
		for {
			switch c.peek() {
			case '}':
				c.i++
				return nil
			case ',':
				c.i++
				c.peek()
			}
			key, err := c.key()
			if err != nil {
				return err
			}
			if c.peek() != ':' {
				return errTruncated
			}
			c.i++
			elem := anyType
			switch t.Kind() {
			case reflect.Struct:
				f, ok := jsonFields(t)[key]
				if !ok {
					return fmt.Errorf("unknown field %q%s", key, c.at())
				}
				elem = f
			case reflect.Map:
				elem = t.Elem()
			}
			c.path = append(c.path, step{key: key, index: -1})
			if err := c.value(elem); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
		}
	case '[':
		c.i++
		elem := anyType
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for n := 0; ; n++ {
			switch c.peek() {
			case ']':
				c.i++
				return nil
			case ',':
				c.i++
			}
			c.path = append(c.path, step{index: n})
			if err := c.value(elem); err != nil {
				return err
			}
			c.path = c.path[:len(c.path)-1]
		}
	case '"':
		_, err := c.str()
		return err
	default: // a number, true, false or null
		start := c.i
		for ; c.i < len(c.data); c.i++ {
			switch c.data[c.i] {
			case ',', ']', '}', ':', ' ', '\t', '\n', '\r':
				if c.i == start { // not a value: the walk must move on
					return fmt.Errorf("invalid character %q looking for a value", c.data[c.i])
				}
				return nil
			}
		}
		return nil
	}
}

// TopKeys returns the keys of the top-level object whose value is not
// null, walking past their values; an error if data is not an object or
// not valid where walked.
func TopKeys(data []byte) (map[string]bool, error) {
	c := keyChecker{data: data}
	if c.peek() != '{' {
		return nil, errors.New("not an object")
	}
	c.i++
	keys := map[string]bool{}
	for {
		switch c.peek() {
		case '}':
			return keys, nil
		case ',':
			c.i++
		}
		key, err := c.key()
		if err != nil {
			return nil, err
		}
		if c.peek() != ':' {
			return nil, errTruncated
		}
		c.i++
		if c.peek() != 'n' { // null; the last of a repeated key counts, as in encoding/json
			keys[key] = true
		} else {
			delete(keys, key)
		}
		if err := c.value(anyType); err != nil {
			return nil, err
		}
	}
}

// str skips the string at c.i and returns its raw contents.
func (c *keyChecker) str() ([]byte, error) {
	start := c.i + 1
	for j := start; j < len(c.data); j++ {
		switch c.data[j] {
		case '\\':
			j++
		case '"':
			c.i = j + 1
			return c.data[start:j], nil
		}
	}
	return nil, errTruncated
}

// key reads the object key at c.i.
func (c *keyChecker) key() (string, error) {
	if c.peek() != '"' {
		return "", errTruncated
	}
	from := c.i
	raw, err := c.str()
	if err != nil || !needsDecoding(raw) {
		return string(raw), err
	}
	var key string // escaped, or not ASCII: as json reads it
	err = json.Unmarshal(c.data[from:c.i], &key)
	return key, err
}

// needsDecoding says whether a raw key differs from its value: an escape,
// or a byte that may be invalid UTF-8 (json reads it as U+FFFD).
func needsDecoding(raw []byte) bool {
	for _, b := range raw {
		if b == '\\' || b >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// at says where the walk is, as " at shards[3].name".
func (c *keyChecker) at() string {
	var b strings.Builder
	for _, p := range c.path {
		if p.index >= 0 {
			fmt.Fprintf(&b, "[%d]", p.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p.key)
	}
	return at(b.String())
}

func at(path string) string {
	if path == "" {
		return ""
	}
	return " at " + strings.TrimPrefix(path, ".")
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns a struct's fields by their JSON names (embedded
// structs' fields included).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported() && !f.Anonymous:
			continue
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for k, v := range jsonFields(f.Type) {
				m[k] = v
			}
			continue
		case name == "":
			name = f.Name
		}
		m[name] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}
