package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Cases an outside tester built against the claim that these are
// tokenizers' ids (testdata/edges: each tokenizer.json, the texts, and the
// ids tokenizers 0.23.3 gave, or the refusal shardfeed gives where it
// does not run the file as tokenizers does): added tokens numbered by
// tokenizers at load and swallowed by a neighbour's strip, duplicate
// pieces and merges, byte fallback with a prefix and pending unknowns,
// a score of 23 digits, a Hangul cluster under a Precompiled charsmap,
// Metaspace's first after a Prepend, an empty String split, Ruby's
// regex dialect.
func TestOutsideEdges(t *testing.T) {
	raw, err := os.ReadFile("testdata/edges/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		File, Text, Refused string
		IDs                 []int32
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.File+"/"+c.Text, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "edges", c.File+".json"))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := Load(data)
			if c.Refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.Refused) {
					t.Fatalf("want a refusal saying %q, got %v", c.Refused, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDs) && (len(got) != 0 || len(c.IDs) != 0) {
				t.Fatalf("%q: %v, tokenizers gives %v", c.Text, got, c.IDs)
			}
		})
	}
}
