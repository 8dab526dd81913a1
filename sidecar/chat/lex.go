// Package chat renders a conversation (a list of {role, content}
// messages) with a chat template, the Jinja template a model's
// tokenizer_config.json carries, as transformers' apply_chat_template
// renders it (trim_blocks, lstrip_blocks, loop controls, `{% generation
// %}` marking what the assistant says), and tokenizes the text with a loss
// mask that keeps only the assistant's tokens. It runs the subset of Jinja
// that chat templates use; any other construct is refused when the
// template is parsed, named. A render is bounded in steps and output.
package chat

import (
	"fmt"
	"strings"
)

// part is a piece of template source: literal text, an expression to
// print ({{ }}) or a statement ({% %}).
type part struct {
	kind byte // 't' text, 'v' variable, 's' statement
	src  string
	line int
}

// MaxTemplateBytes bounds a template's source.
const MaxTemplateBytes = 1 << 20

// split cuts src into parts with Jinja's whitespace control as
// transformers configures it: `-` on a tag strips the whitespace beside
// it, trim_blocks drops the newline after a statement or comment,
// lstrip_blocks the spaces and tabs before one on its line (`+` keeps
// them), and the template's final newline is dropped.
func split(src string) ([]part, error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("the template is %d bytes, above the bound of %d", len(src), MaxTemplateBytes)
	}
	src = strings.TrimSuffix(src, "\n") // keep_trailing_newline is off
	var parts []part
	pos, line := 0, 1
	stripNext := false // the previous tag ended with `-`
	trimNext := false  // the previous tag was a statement or comment (trim_blocks)
	for pos <= len(src) {
		i := indexTag(src[pos:])
		text := src[pos:]
		if i >= 0 {
			text = src[pos : pos+i]
		}
		if stripNext {
			text = strings.TrimLeft(text, " \t\n\r\v\f")
		} else if trimNext {
			text = strings.TrimPrefix(text, "\n")
		}
		// Whether the text starts a line of the source (lstrip_blocks
		// strips before a tag on the text's first line only then).
		start := pos + i - len(text)
		if i < 0 {
			start = len(src) - len(text)
		}
		lineStart := start == 0 || src[start-1] == '\n'
		if i < 0 {
			if text != "" {
				parts = append(parts, part{'t', text, line})
			}
			break
		}
		open := src[pos+i : pos+i+2]
		body := pos + i + 2
		modifier := byte(0)
		if body < len(src) && (src[body] == '-' || src[body] == '+') {
			modifier = src[body]
			body++
		}
		switch {
		case modifier == '-':
			text = strings.TrimRight(text, " \t\n\r\v\f")
		case open != "{{" && modifier != '+':
			// lstrip_blocks: only spaces and tabs between the line's
			// start and the tag.
			if j := strings.LastIndexByte(text, '\n'); (j >= 0 || lineStart) && strings.Trim(text[j+1:], " \t") == "" {
				text = text[:j+1]
			}
		}
		if text != "" {
			parts = append(parts, part{'t', text, line})
		}
		line += strings.Count(src[pos:pos+i], "\n")
		closeTag := map[string]string{"{{": "}}", "{%": "%}", "{#": "#}"}[open]
		end := indexClose(src[body:], closeTag, open == "{#")
		if end < 0 {
			return nil, fmt.Errorf("line %d: %s is not closed by %s", line, open, closeTag)
		}
		inner := src[body : body+end]
		stripNext, trimNext = false, false
		switch {
		case strings.HasSuffix(inner, "-"):
			inner, stripNext = inner[:len(inner)-1], true
		case strings.HasSuffix(inner, "+"):
			inner = inner[:len(inner)-1]
		default:
			trimNext = open != "{{"
		}
		switch open {
		case "{{":
			parts = append(parts, part{'v', inner, line})
		case "{%":
			parts = append(parts, part{'s', inner, line})
		}
		line += strings.Count(src[pos+i:body+end+2], "\n")
		pos = body + end + 2
	}
	return parts, nil
}

// indexTag finds the next `{{`, `{%` or `{#`.
func indexTag(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
	}
	return -1
}

// indexClose finds a tag's closing delimiter, outside its string
// literals (a comment has none).
func indexClose(s, closeTag string, comment bool) int {
	if comment {
		return strings.Index(s, closeTag)
	}
	if i := indexCloseAt(s, closeTag, true); i >= 0 {
		return i
	}
	// Brackets left open: the first delimiter, for the parser to say so.
	return indexCloseAt(s, closeTag, false)
}

func indexCloseAt(s, closeTag string, balanced bool) int {
	var quote byte
	depth := 0 // brackets open: `}}` inside a dict literal closes it, not the tag
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case (depth == 0 || !balanced) && strings.HasPrefix(s[i:], closeTag):
			return i
		case c == '(' || c == '[' || c == '{':
			depth++
		case (c == ')' || c == ']' || c == '}') && depth > 0:
			depth--
		}
	}
	return -1
}

// token is a lexeme of an expression.
type token struct {
	kind byte // 'n' name, 's' string, 'i' integer, 'f' float, 'o' operator, 0 end
	text string
}

var operators = []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "|", ".", ",", ":", "(", ")", "[", "]", "{", "}", "<", ">", "="}

// lex cuts an expression or statement into tokens.
func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '_' || isLetter(c):
			j := i
			for j < len(s) && (s[j] == '_' || isLetter(s[j]) || isDigit(s[j])) {
				j++
			}
			out = append(out, token{'n', s[i:j]})
			i = j
		case isDigit(c):
			j, kind := i, byte('i')
			for j < len(s) && (isDigit(s[j]) || s[j] == '_') {
				j++
			}
			if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
				kind = 'f'
				j++
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
			if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
				k := j + 1
				if k < len(s) && (s[k] == '+' || s[k] == '-') {
					k++
				}
				if k < len(s) && isDigit(s[k]) {
					kind, j = 'f', k
					for j < len(s) && isDigit(s[j]) {
						j++
					}
				}
			}
			out = append(out, token{kind, strings.ReplaceAll(s[i:j], "_", "")})
			i = j
		case c == '\'' || c == '"':
			str, n, err := unquote(s[i:])
			if err != nil {
				return nil, err
			}
			out = append(out, token{'s', str})
			i += n
		default:
			found := false
			for _, op := range operators {
				if strings.HasPrefix(s[i:], op) {
					out = append(out, token{'o', op})
					i += len(op)
					found = true
					break
				}
			}
			if !found {
				return nil, fmt.Errorf("unexpected character %q", c)
			}
		}
	}
	return out, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// unquote reads a Python string literal at the start of s, returning it
// and the bytes it took.
func unquote(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'u', 'x', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n >= len(s) {
				return "", 0, fmt.Errorf("a string's \\%c escape is cut short", e)
			}
			var r rune
			for _, h := range s[i+1 : i+1+n] {
				v := strings.IndexRune("0123456789abcdef", h|0x20)
				if v < 0 {
					return "", 0, fmt.Errorf("a string's \\%c escape has %q", e, h)
				}
				r = r<<4 | rune(v)
			}
			b.WriteRune(r)
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, fmt.Errorf("a string %q is not closed", s[:min(len(s), 20)])
}
