package chat_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/sidecar/chat"
)

// What the package does not run is refused when the template is parsed,
// named, with what it runs instead.
func TestParseRefusesWhatItDoesNotRun(t *testing.T) {
	for _, c := range []struct{ name, template, want string }{
		{"macro", "{% macro f() %}x{% endmacro %}", "{% macro %} is not supported"},
		{"include", "{% include 'x' %}", "{% include %} is not supported"},
		{"raw", "{% raw %}x{% endraw %}", "{% raw %} is not supported"},
		{"set block", "{% set x %}a{% endset %}", "{% set %} blocks are not supported"},
		{"unknown filter", "{{ x | wordwrap(3) }}", "filter wordwrap is not supported"},
		{"unknown test", "{{ x is callable }}", "test callable is not supported"},
		{"unknown function", "{{ strftime_now('%Y') }}", "function strftime_now() is not supported"},
		{"unknown method", "{{ x.format(1) }}", "method format() is not supported"},
		{"recursive loop", "{% for x in y recursive %}{% endfor %}", "recursive loops are not supported"},
		{"unclosed tag", "{{ x", "{{ is not closed by }}"},
		{"unclosed block", "{% if x %}a", "{% endif %} is missing"},
		{"stray end", "a{% endfor %}", "{% endfor %} without its opening statement"},
		{"bad character", "{{ x ; y }}", `unexpected character ';'`},
		{"cut short", "{{ (x }}", `expected ")" at the end`},
		{"unclosed string", "{{ 'abc }}", "{{ is not closed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := chat.Parse(c.template)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// A render is bounded: a loop of loops stops at the step bound, a string
// that doubles stops at the output bound, and an error names what went
// wrong rather than panicking.
func TestRenderIsBounded(t *testing.T) {
	for _, c := range []struct{ name, template, want string }{
		{"steps", "{% for x in range(100000) %}{% for y in range(100000) %}{% endfor %}{% endfor %}", "more than 1048576 steps"},
		{"output", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}", "passes 67108864 bytes"},
		{"repeat", "{{ 'ab' * 100000000 }}", "passes 67108864 bytes"},
		{"undefined attribute", "{{ nothing.role }}", "nothing is undefined (reading its .role)"},
		{"not a namespace", "{% set d = {} %}{% set d.x = 1 %}", "d is not a namespace()"},
		{"division by zero", "{{ 1 // 0 }}", "division by zero"},
		{"template's own error", "{{ raise_exception('roles must alternate') }}", "the chat template refused the conversation: roles must alternate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tpl, err := chat.Parse(c.template)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tpl.Render(nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// byteEncoder encodes each byte as its own token: every edge falls
// between tokens.
type byteEncoder struct{}

func (byteEncoder) Encode(text string, _ bool) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}

// pairEncoder encodes pairs of bytes: an edge at an odd byte falls inside
// a token, and the mask takes the token holding the span's edge bytes.
type pairEncoder struct{}

func (pairEncoder) Encode(text string, _ bool) []int32 {
	var ids []int32
	for i := 0; i < len(text); i += 2 {
		id := int32(text[i]) << 8
		if i+1 < len(text) {
			id |= int32(text[i+1])
		}
		ids = append(ids, id)
	}
	return ids
}

func TestTokenizeMasksTheSpans(t *testing.T) {
	for _, c := range []struct {
		name  string
		enc   chat.Encoder
		text  string
		spans [][2]int
		want  string
	}{
		{"aligned", byteEncoder{}, "ab<cd>ef<g>", [][2]int{{3, 5}, {9, 10}}, "00011000010"},
		{"no spans", byteEncoder{}, "abc", nil, "000"},
		{"edges inside tokens", pairEncoder{}, "abcdefgh", [][2]int{{1, 4}}, "1100"},
		{"an edge inside, one between", pairEncoder{}, "abcdefgh", [][2]int{{2, 5}}, "0110"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, mask, err := chat.Tokenize(c.enc, c.text, c.spans)
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, m := range mask {
				got.WriteByte('0' + m)
			}
			if got.String() != c.want {
				t.Fatalf("mask %s, want %s", got.String(), c.want)
			}
		})
	}
	if _, _, err := chat.Tokenize(byteEncoder{}, "abc", [][2]int{{2, 9}}); err == nil {
		t.Fatal("a span outside the text was taken")
	}
}

func TestMarkerSpans(t *testing.T) {
	for _, c := range []struct {
		text, start, end string
		want             [][2]int
	}{
		{"<u>hi<e><a>yo<e><u>q<e><a>ok<e>", "<a>", "<e>", [][2]int{{11, 16}, {26, 31}}},
		{"<a>cut short", "<a>", "<e>", [][2]int{{3, 12}}},
		{"<u>no reply<e>", "<a>", "<e>", nil},
		{"<a><e>", "<a>", "<e>", [][2]int{{3, 6}}},
		{"<a>", "<a>", "<e>", nil},
	} {
		if got := chat.MarkerSpans(c.text, c.start, c.end); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("MarkerSpans(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

// FuzzRender: any template and conversation parse and render without a
// panic, within the bounds.
func FuzzRender(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.role }}{% generation %}{{ m.content | trim }}{% endgeneration %}{% endfor %}", `[{"role":"user","content":" hi "}]`)
	f.Add("{%- if x is defined -%}{{ x[1:] ~ (y | tojson) }}{% else %}{{ [1,2][-1] }}{% endif %}", `[]`)
	f.Add("{% set ns = namespace(a=1) %}{% for k, v in {'a': 1}.items() %}{% set ns.a = ns.a * 2 %}{% endfor %}{{ ns.a }}", `[{}]`)
	f.Fuzz(func(t *testing.T, template, messages string) {
		tpl, err := chat.Parse(template)
		if err != nil {
			return
		}
		v, err := chat.FromJSON([]byte(messages))
		if err != nil {
			return
		}
		msgs, _ := v.([]any)
		text, spans, err := tpl.Render(msgs, map[string]any{"bos_token": "<s>"})
		if err != nil {
			return
		}
		for _, s := range spans {
			if s[0] < 0 || s[1] > len(text) || s[0] >= s[1] {
				t.Fatalf("span %v of a %d-byte text", s, len(text))
			}
		}
		if _, _, err := chat.Tokenize(byteEncoder{}, text, spans); err != nil {
			t.Fatal(err)
		}
	})
}
