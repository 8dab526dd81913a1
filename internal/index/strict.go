package index

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// decodeStrict decodes data into v and refuses a key v has no field for,
// as a Decoder with DisallowUnknownFields would, but without a second copy
// of data: json.Unmarshal decodes from data itself, and the key check
// streams its tokens (a Decoder over the whole document would first buffer
// all of it). An index is the largest document the operator reads.
func decodeStrict(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	return checkKeys(dec, reflect.TypeOf(v), "")
}

var anyType = reflect.TypeFor[any]()

// checkKeys reads one JSON value from dec, whose Go type is t, and returns
// an error naming the first object key t's struct has no field for. The
// value has already decoded into t, so types match.
func checkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := k.(string)
			elem := anyType
			switch t.Kind() {
			case reflect.Struct:
				f, ok := jsonFields(t)[key]
				if !ok {
					return fmt.Errorf("unknown field %q%s", key, at(path))
				}
				elem = f
			case reflect.Map:
				elem = t.Elem()
			}
			if err := checkKeys(dec, elem, path+"."+key); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case json.Delim('['):
		elem := anyType
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := checkKeys(dec, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	return err
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
