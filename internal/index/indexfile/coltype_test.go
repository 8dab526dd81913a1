package indexfile

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseColumnType(t *testing.T) {
	deep := strings.Repeat("list<", MaxTypeDepth) + "int64" + strings.Repeat(">", MaxTypeDepth)
	for _, tt := range []struct {
		in, want, err string
	}{
		{in: "int64", want: "int64"},
		{in: "list<utf8>", want: "list<utf8>"},
		{in: `struct<"a":int64,"b c":list<bool>>`, want: `struct<"a":int64,"b c":list<bool>>`},
		{in: `struct< a : int64 , _b2 : struct<"q\"":utf8> >`, want: `struct<"a":int64,"_b2":struct<"q\"":utf8>>`},
		{in: `struct<>`, want: `struct<>`},
		{in: `struct<"":float64>`, want: `struct<"":float64>`},
		{in: deep, want: deep},
		{in: "list<" + deep + ">", err: "nest more than 16 deep"},
		{in: "int32", err: `unknown type "int32"`},
		{in: "null", err: `unknown type "null"`},
		{in: "list<int64", err: "want > to close list<"},
		{in: "list int64", err: "want < after list"},
		{in: `struct<"a":int64,"a":utf8>`, err: `struct field "a" appears twice`},
		{in: `struct<"a" int64>`, err: `want : after struct field "a"`},
		{in: `struct<"a:int64>`, err: "unterminated field name"},
		{in: `struct<1:int64>`, err: "want a field name"},
		{in: `struct<"a":int64;"b":int64>`, err: "want , or > in struct<"},
		{in: "utf8 x", err: `unexpected "x" after the type`},
		{in: "", err: "want a type"},
		{in: "struct<" + manyFields(MaxTypeNodes) + ">", err: "more than 1024 types"},
		{in: "struct<" + manyFields(MaxTypeNodes-1) + ">", want: "struct<" + manyFields(MaxTypeNodes-1) + ">"},
		{in: strings.Repeat(" ", MaxTypeBytes+1), err: "more than 65536"},
	} {
		got, err := ParseColumnType(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%.50q: %v, want an error saying %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if got.String() != tt.want {
			t.Errorf("%q parsed as %s, want %s", tt.in, got, tt.want)
		}
	}
}

func manyFields(n int) string {
	f := make([]string, n)
	for i := range f {
		f[i] = fmt.Sprintf(`"f%d":int64`, i)
	}
	return strings.Join(f, ",")
}

// An index holds one spelling of each type; a schema file may write others.
func TestAnIndexHoldsTypesAsStringSpellsThem(t *testing.T) {
	if _, err := CheckColumnType(`struct<"a":int64>`); err != nil {
		t.Fatal(err)
	}
	_, err := CheckColumnType(`struct<a:int64>`)
	if err == nil || !strings.Contains(err.Error(), `is spelled "struct<\"a\":int64>" in an index`) {
		t.Fatalf("another spelling: %v", err)
	}
}

// FuzzParseColumnType: any text is a type or an error, never a panic; a
// type's own spelling parses back to itself, within the bounds.
func FuzzParseColumnType(f *testing.F) {
	f.Add(`struct<"a":list<struct<b:float64>>,"c d":utf8>`)
	f.Add("list<list<bool>>")
	f.Add(`struct<"\u00e9\"":int64>`)
	f.Fuzz(func(t *testing.T, s string) {
		typ, err := ParseColumnType(s)
		if err != nil {
			return
		}
		if typ.Depth() > MaxTypeDepth || typ.Nodes() > MaxTypeNodes {
			t.Fatalf("%q parsed past the bounds: depth %d, %d types", s, typ.Depth(), typ.Nodes())
		}
		again, err := CheckColumnType(typ.String())
		if err != nil || again.String() != typ.String() {
			t.Fatalf("%q spelled %q does not parse back: %v", s, typ.String(), err)
		}
	})
}
