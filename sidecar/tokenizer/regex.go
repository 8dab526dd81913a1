package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pattern is a tokenizer.json regex (Oniguruma's syntax, as Hugging Face
// tokenizers runs it) compiled for Go's RE2 engine, which runs in time
// linear in the text: the Unicode meaning of \s, \w and \d is spelled
// out, and the one lookahead real tokenizers use, the alternative
// `\s+(?!\S)` (GPT-2's, cl100k's, Llama 3's and o200k's "whitespace not
// before a word"), is matched as `\s+` and given back its last character
// when a non-space follows. Any other construct RE2 lacks is refused,
// naming it.
type pattern struct {
	re *regexp.Regexp
	// trim: the pattern had `\s+(?!\S)`; a match of whitespace alone
	// followed by a non-space character, of that alternative, gives back
	// its last character.
	trim bool
	// before matches, anchored, the alternatives before the lookahead's:
	// where one of them matches, the match is theirs, never trimmed.
	before *regexp.Regexp
}

// lookaheadSpaces is the alternative emulated; the alternation it sits
// in must hold `\s+` after it (as every pattern with it does), so that a
// single space before a word still matches there.
const lookaheadSpaces = `\s+(?!\S)`

// unicodeSpace is Oniguruma's \s in Unicode mode: the White_Space
// property.
const unicodeSpace = `\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

// Oniguruma's \w and \d in Unicode mode.
const (
	unicodeWord  = `\p{L}\p{M}\p{Nd}\p{Pc}`
	unicodeDigit = `\p{Nd}`
)

func compilePattern(src string) (*pattern, error) {
	p := &pattern{}
	alts := alternatives(src)
	var before []string
	for k, alt := range alts {
		if alt != lookaheadSpaces {
			continue
		}
		if k+1 >= len(alts) || alts[k+1] != `\s+` {
			return nil, fmt.Errorf("regex %q: a lookahead other than GPT-2's %s|\\s+ is not supported", src, lookaheadSpaces)
		}
		before = alts[:k]
		alts[k] = `\s+`
		src = strings.Join(alts, "|")
		p.trim = true
		break
	}
	for _, bad := range []string{"(?=", "(?!", "(?<=", "(?<!", "(?>", `\G`, `\K`, `\R`, `\X`} {
		if strings.Contains(src, bad) {
			return nil, fmt.Errorf("regex %q: %s is not supported (shardfeed runs tokenizer patterns in linear time)", src, bad)
		}
	}
	compile := func(src string) (*regexp.Regexp, error) {
		translated, err := translateClasses(src)
		if err != nil {
			return nil, err
		}
		return regexp.Compile(translated)
	}
	var err error
	if p.re, err = compile(src); err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	if len(before) > 0 {
		if p.before, err = compile(`^(?:` + strings.Join(before, "|") + `)`); err != nil {
			return nil, fmt.Errorf("regex %q: %w", src, err)
		}
	}
	return p, nil
}

// alternatives splits a regex at its top-level |.
func alternatives(src string) []string {
	var out []string
	depth, inClass, start := 0, false, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			if i+1 < len(src) && src[i+1] == '^' {
				i++
			}
			if i+1 < len(src) && src[i+1] == ']' {
				i++
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '|' && depth == 0:
			out = append(out, src[start:i])
			start = i + 1
		}
	}
	return append(out, src[start:])
}

// translateClasses rewrites \s, \S, \w, \W, \d and \D to their Unicode
// classes, inside brackets and out.
func translateClasses(src string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\' && i+1 < len(src):
			esc := src[i+1]
			i++
			set, neg := "", false
			switch esc {
			case 's', 'S':
				set, neg = unicodeSpace, esc == 'S'
			case 'w', 'W':
				set, neg = unicodeWord, esc == 'W'
			case 'd', 'D':
				set, neg = unicodeDigit, esc == 'D'
			default:
				b.WriteByte('\\')
				b.WriteByte(esc)
				continue
			}
			switch {
			case !neg && inClass:
				b.WriteString(set)
			case !neg:
				b.WriteString("[" + set + "]")
			case inClass:
				return "", fmt.Errorf(`\%c inside brackets is not supported`, esc)
			default:
				b.WriteString("[^" + set + "]")
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			if i+1 < len(src) && src[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(src) && src[i+1] == ']' { // a literal ] first
				b.WriteString(`\]`)
				i++
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// isSpace is unicodeSpace as a predicate.
func isSpace(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// matches returns the [start, end) byte ranges of the pattern's matches
// in s, leftmost first, as Oniguruma finds them: one at a time, each
// searched from the end of the last, so a trimmed match's last character
// is matched again.
func (p *pattern) matches(s string) [][2]int {
	var out [][2]int
	for pos := 0; pos < len(s); {
		loc := p.re.FindStringIndex(s[pos:])
		if loc == nil {
			break
		}
		start, end := pos+loc[0], pos+loc[1]
		if end == start { // an empty match: none is a piece
			_, size := utf8.DecodeRuneInString(s[end:])
			pos = end + max(size, 1)
			continue
		}
		if p.trim && end < len(s) && allSpace(s[start:end]) {
			next, _ := utf8.DecodeRuneInString(s[end:])
			_, last := utf8.DecodeLastRuneInString(s[start:end])
			if !isSpace(next) && end-last > start && (p.before == nil || !p.before.MatchString(s[start:])) {
				end -= last // `\s+(?!\S)`: the run but its last character, which goes with the word
			}
		}
		out = append(out, [2]int{start, end})
		pos = end
	}
	return out
}

func allSpace(s string) bool {
	for _, r := range s {
		if !isSpace(r) {
			return false
		}
	}
	return s != ""
}

// patternJSON is a component's pattern as tokenizer.json writes it: a
// literal String or a Regex.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// source returns the pattern as a regex (a String quoted).
func (p patternJSON) source() (string, error) {
	switch {
	case p.Regex != nil:
		return *p.Regex, nil
	case p.String != nil && *p.String != "":
		return regexp.QuoteMeta(*p.String), nil
	}
	return "", fmt.Errorf("a pattern is a String (not empty) or a Regex")
}
