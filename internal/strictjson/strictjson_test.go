package strictjson

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// strictDoc has what the key check must walk: nested structs, a slice of
// them, a map, an interface, pointers.
type strictDoc struct {
	Name   string            `json:"name"`
	Items  []strictItem      `json:"items,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Any    any               `json:"any,omitempty"`
	Ptr    *strictItem       `json:"ptr,omitempty"`
}

type strictItem struct {
	ID   int64    `json:"id"`
	Tags []string `json:"tags,omitempty"`
}

func TestDecodeStrictNamesTheFirstUnknownKey(t *testing.T) {
	tests := []struct {
		name, doc string
		says      string // "" for accepted
	}{
		{"known keys", `{"name": "a", "items": [{"id": 1, "tags": ["x", "y"]}, {"id": 2}], "labels": {"anything": "goes"}}`, ""},
		{"no whitespace", `{"name":"a","items":[{"id":1},{"id":2,"tags":[]}],"ptr":{"id":3}}`, ""},
		{"whitespace everywhere", " {\n\t\"name\" :\r \"a\" ,\n \"items\" : [ { \"id\" : 1 } , { \"id\" : -25 } ] , \"any\" : -2.5e3 } ", ""},
		{"strings with JSON in them", `{"name": "{\"bogus\": [1, ]}\\", "labels": {"k\"": "}]"}}`, ""},
		{"an escaped known key", `{"n\u0061me": "a"}`, ""},
		{"an interface holds anything", `{"any": {"deep": [{"any": 1}], "x": null}}`, ""},
		{"null, true and false", `{"name": "a", "ptr": null, "any": [true, false, null]}`, ""},
		{"an unknown key at the top", `{"name": "a", "title": "b"}`, `unknown field "title"`},
		{"an unknown key in an element", `{"items": [{"id": 1}, {"id": 2}, {"id": 3, "idd": 4}]}`, `unknown field "idd" at items[2]`},
		{"an unknown key behind a pointer", `{"ptr": {"id": 1, "tag": []}}`, `unknown field "tag" at ptr`},
		{"an escaped unknown key", `{"n\u0061mes": "a"}`, `unknown field "names"`},
		{"an unknown key after a string with quotes", `{"name": "say \"hi\", \"x\": 1", "x": 1}`, `unknown field "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v strictDoc
			err := Decode([]byte(tt.doc), &v)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err = %v, want it to say %q", err, tt.says)
			}
		})
	}
}

// FuzzDecodeStrict: the walk refuses exactly the documents a Decoder with
// DisallowUnknownFields refuses (keys matched as written: the Decoder
// also takes another case), and never panics.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		`{"name": "a", "items": [{"id": 1, "tags": ["x"]}], "labels": {"k": "v"}, "any": [1, {"z": null}], "ptr": {"id": 2}}`,
		`{"name": "a", "nope": 1}`,
		`{"items": [{"id": 1, "x": 2}]}`,
		`{"n\u0061me": "\"}"}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got strictDoc
		err := Decode(data, &got)
		var want strictDoc
		r := bytes.NewReader(data)
		dec := json.NewDecoder(r)
		dec.DisallowUnknownFields()
		werr := dec.Decode(&want)
		if rest, _ := io.ReadAll(io.MultiReader(dec.Buffered(), r)); werr == nil && len(bytes.TrimSpace(rest)) > 0 {
			return // trailing data: Unmarshal refuses it, a Decoder stops before it
		}
		if err == nil && werr != nil {
			t.Fatalf("Decode took %q, which a strict Decoder refuses: %v", data, werr)
		}
		if err != nil && werr == nil && !strings.Contains(err.Error(), "unknown field") {
			t.Fatalf("Decode refused %q, which a strict Decoder takes: %v", data, err)
		}
	})
}

// The form of an index is found from its top-level keys, walked in place
// before anything has checked the document: whatever the bytes, the walk
// ends with keys or an error.
func TestTopKeysOfAnyDocument(t *testing.T) {
	deep := `{"a": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	tests := []struct {
		name, doc string
		want      []string // nil: an error
	}{
		{"two forms' keys", `{"shardfeed": 1, "shards": [{"name": "x"}]}`, []string{"shardfeed", "shards"}},
		{"a null value is no key", `{"version": null, "shards": []}`, []string{"shards"}},
		{"an escaped key", `{"v\u0065rsion": 2}`, []string{"version"}},
		{"nested keys are not top-level", `{"a": {"version": 2}}`, []string{"a"}},
		{"an empty object", ` { } `, []string{}},
		{"not an object", `[1, 2]`, nil},
		{"truncated", `{"shardfeed": 1, "shards": [`, nil},
		{"a value missing", `{"a": }`, nil},
		{"a stray colon", `{"a": 1:2}`, nil},
		{"a brace for a value", `{"a": [}`, nil},
		{"an unterminated string", `{"a": "x`, nil},
		{"nested deeper than encoding/json allows", deep, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TopKeys([]byte(tt.doc))
			if tt.want == nil {
				if err == nil {
					t.Fatalf("took %.40q: %v", tt.doc, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("keys %v, want %v", got, tt.want)
			}
			for _, k := range tt.want {
				if !got[k] {
					t.Fatalf("keys %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// FuzzTopKeys: on any bytes the walk ends without a panic, and on a valid
// object it finds the keys encoding/json finds.
func FuzzTopKeys(f *testing.F) {
	for _, seed := range []string{`{"shardfeed": 1, "shards": []}`, `{"version": null}`, `{"a": [[{}]], "b": "\"}"}`, `{"a": 1:2}`, `[}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := TopKeys(data)
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		if err != nil {
			t.Fatalf("%q is a valid object: %v", data, err)
		}
		for k, v := range m {
			if got[k] != (string(v) != "null") {
				t.Fatalf("%q: key %q in %v", data, k, got)
			}
		}
		if len(got) > len(m) {
			t.Fatalf("%q: keys %v, encoding/json %v", data, got, m)
		}
	})
}
