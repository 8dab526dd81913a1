//go:build integration

package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/chat"
)

// jinjaCases are templates that exercise each construct this package
// runs, with the conversation they render: whitespace control, values
// printed as Python prints them, filters, tests, methods, loops and
// scopes, and templates' errors.
var jinjaCases = []struct{ name, template, messages, vars string }{
	{"text", "hello", `[]`, `{}`},
	{"final newline dropped", "a\n", `[]`, `{}`},
	{"trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", `[]`, `{}`},
	{"lstrip_blocks", "a\n    {% if true %}\n    b\n    {% endif %}\nc", `[]`, `{}`},
	{"lstrip after a tag on the line", "a {% if true %}  {% if true %}x{% endif %}{% endif %}", `[]`, `{}`},
	{"minus strips", "a   \n  {{- 'b' -}}  \n  c {%- if true -%}  d  {%- endif %} e", `[]`, `{}`},
	{"plus keeps", "a\n    {%+ if true %}b{% endif +%}\nc", `[]`, `{}`},
	{"comment", "a {# note #}\n  {#- trimmed -#}  b", `[]`, `{}`},
	{"variable keeps its newline", "{{ 'x' }}\ny", `[]`, `{}`},
	{"python values", "{{ none }} {{ true }} {{ 1.0 }} {{ 2.5e-5 }} {{ 1e16 }} {{ 10 // 3 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", `[]`, `{}`},
	{"lists and dicts printed", `{{ [1, 'a', "it's", none, [true]] }} {{ {'k': 'v', 'n': 1} }} {{ ('t',) }}`, `[]`, `{}`},
	{"undefined prints nothing", "[{{ nothing }}]{{ messages[5] }}", `[]`, `{}`},
	{"messages", "{% for m in messages %}{{ loop.index }}/{{ loop.length }} {{ m.role }}: {{ m['content'] }}{% if not loop.last %}|{% endif %}{% endfor %}", `[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]`, `{}`},
	{"loop filter and else", "{% for m in messages if m.role == 'tool' %}{{ m }}{% else %}none{% endfor %}", `[{"role":"user","content":"hi"}]`, `{}`},
	{"loop vars", "{% for x in [5,6,7] %}{{ loop.index0 }}{{ loop.first }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}", `[]`, `{}`},
	{"break and continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", `[]`, `{}`},
	{"scopes", "{% set a = 1 %}{% for x in [1] %}{% set a = 2 %}{{ a }}{% endfor %}{{ a }}", `[]`, `{}`},
	{"namespace", "{% set ns = namespace(n=0, s='') %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", `[]`, `{}`},
	{"tuple unpacking", "{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}{% for k in {'x': 1} %}{{ k }}{% endfor %}", `[]`, `{}`},
	{"slices", "{{ messages[1:] | length }} {{ 'abcdef'[1:4] }} {{ 'héllo'[::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3][-1] }} {{ 'ab'[-5:] }}", `[{"role":"a"},{"role":"b"},{"role":"c"}]`, `{}`},
	{"conditional expression", "{{ 'y' if messages else 'n' }}{{ 'a' if false }}|{{ 1 if 0 else 2 if 1 else 3 }}", `[]`, `{}`},
	{"precedence", "{{ 1 + 2 * 3 }} {{ 'a' ~ 1 ~ 2 }} {{ not 1 == 2 }} {{ -2 ** 2 }} {{ ' x ' | trim + 'y' }} {{ 1 < 2 and 'q' or 'r' }}", `[]`, `{}`},
	{"comparisons and in", "{{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 'ell' in 'hello' }} {{ 3 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ none == none }} {{ [1, [2]] == [1, [2]] }}", `[]`, `{}`},
	{"string methods", `{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a '.rstrip() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(none, 1) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ '-'.join(['x', 'y']) }}|{{ 'héllo'.find('l') }}`, `[]`, `{}`},
	{"dict methods", "{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b', 'd') }} {{ {'a': 1}.get('b') }} {{ {'a': 1, 'b': 2}.keys() | list }} {{ {'a': 1}.values() | list }}", `[]`, `{}`},
	{"filters", `{{ 'héllo' | length }} {{ [1,2] | count }} {{ 'ab' | upper }} {{ 'AB' | lower }} {{ 'ab cd' | title }} {{ 'aB' | capitalize }} {{ nothing | default('d') }} {{ '' | default('e', true) }} {{ [3,4] | first }} {{ [3,4] | last }} {{ [1,2] | join(', ') }} {{ 'ab' | list }} {{ 5 | string }} {{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ -3 | abs }} {{ 'aa' | replace('a', 'b') }} {{ [1,2] | reverse | list }} {{ 'ab' | reverse }} {{ {'a': 1} | items | list }}`, `[]`, `{}`},
	{"tojson", `{{ messages | tojson }}|{{ {'a': [1, 2.5, none, true], 'é': "q\"\n"} | tojson }}|{{ {'b': 1, 'a': {'c': []}} | tojson(indent=2) }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1] | tojson(separators=[',', ':']) }}`, `[{"role":"user","content":"<b>é</b>\u0001"}]`, `{}`},
	{"selectattr and map", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ messages | rejectattr('role', 'eq', 'user') | list | length }}|{{ messages | selectattr('tool') | list }}|{{ ['a', 'b'] | map('upper') | list }}", `[{"role":"user","content":"1"},{"role":"assistant","content":"2","tool":"t"},{"role":"user","content":"3"}]`, `{}`},
	{"tests", "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1 is integer }}{{ 1.5 is float }}{{ {} is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is eq 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 1 is ne 2 }}{{ 1 is in [1] }}{{ x is not none }}{{ true is true }}{{ 0 is false }}", `[]`, `{"x": 1}`},
	{"vars", "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}", `[]`, `{"bos_token": "<s>", "eos_token": "</s>"}`},
	{"generation spans", "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}!{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}", `[{"role":"user","content":"héllo"},{"role":"assistant","content":"wörld"},{"role":"assistant","content":"é"}]`, `{}`},
	{"raise_exception", "{% if messages | length < 2 %}{{ raise_exception('needs two messages') }}{% endif %}ok", `[{"role":"user","content":"a"}]`, `{}`},
	{"string escapes", `{{ 'a\nb\t\'c\'' }}{{ "\u00e9\x41" }}{{ 'con' 'cat' }}`, `[]`, `{}`},
	{"elif chain", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}a{% elif x == 2 %}b{% elif x == 3 %}c{% else %}d{% endif %}{% endfor %}", `[]`, `{}`},
	{"an error", "{{ 'a' ~ 1 + 2 }}", `[]`, `{}`},
	{"dict attribute or method", "{{ messages[0].items() | list | length }}|{{ messages[0]['items'] }}|{{ messages[0].get('role') }}", `[{"role":"user","items":"x"}]`, `{}`},
}

// Each case renders to the text and the generation spans transformers'
// own Jinja environment gives (or a template error where it raises one).
func TestJinjaEqualsTransformers(t *testing.T) {
	dir := t.TempDir()
	var in bytes.Buffer
	for _, c := range jinjaCases {
		line, err := json.Marshal(map[string]any{"template": c.template, "messages": json.RawMessage(c.messages), "vars": json.RawMessage(c.vars)})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(line, '\n'))
	}
	path := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(path, in.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "jinja", path)), []byte("\n"))
	if len(lines) != len(jinjaCases) {
		t.Fatalf("%d answers for %d cases", len(lines), len(jinjaCases))
	}
	for i, c := range jinjaCases {
		t.Run(c.name, func(t *testing.T) {
			var want struct {
				Text  string   `json:"text"`
				Spans [][2]int `json:"spans"`
				Error string   `json:"error"`
			}
			if err := json.Unmarshal(lines[i], &want); err != nil {
				t.Fatal(err)
			}
			tpl, err := chat.Parse(c.template)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			msgs := must(chat.FromJSON([]byte(c.messages))).([]any)
			vars := map[string]any{}
			d := must(chat.FromJSON([]byte(c.vars))).(*chat.Dict)
			for _, k := range d.Keys {
				vars[k] = d.Values[k]
			}
			text, spans, err := tpl.Render(msgs, vars)
			if want.Error != "" {
				// A template's raise_exception gives its message; other
				// errors are said in words of our own.
				var te *chat.TemplateError
				if err == nil || (strings.HasPrefix(want.Error, "TemplateError: ") && (!errors.As(err, &te) || "TemplateError: "+te.Message != want.Error)) {
					t.Fatalf("transformers: %s; shardfeed: %v (%q)", want.Error, err, text)
				}
				return
			}
			if err != nil {
				t.Fatalf("render: %v (transformers gives %q)", err, want.Text)
			}
			if text != want.Text {
				t.Fatalf("rendered\n%q\ntransformers\n%q", text, want.Text)
			}
			if len(spans) != len(want.Spans) || (len(spans) > 0 && !equalSpans(spans, want.Spans)) {
				t.Fatalf("spans %v, transformers %v", spans, want.Spans)
			}
		})
	}
}

func equalSpans(a, b [][2]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
