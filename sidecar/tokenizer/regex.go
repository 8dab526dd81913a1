package tokenizer

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pattern is a tokenizer.json regex (Oniguruma's Ruby syntax, as Hugging
// Face tokenizers runs it) compiled for Go's RE2 engine, which runs in
// time linear in the text:
//   - every class (\s, \w, \d, \h, \p{..}) is spelled out as the code
//     points tokenizers' own Oniguruma matches (tables.go), not Go's;
//   - ^ and $ match at lines, as in Ruby; a class nested in a class is
//     its union (BLOOM's [^(\s|[.,!?…])]);
//   - the one lookahead real tokenizers use, the alternative `\s+(?!\S)`
//     (GPT-2's, cl100k's, Llama 3's and o200k's "whitespace not before a
//     word"), is matched as `\s+` and gives back its last character when
//     a non-space follows.
//
// Any other construct RE2 lacks, or that means another thing in Go, is
// refused, naming it.
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

func compilePattern(src string) (*pattern, error) {
	orig := src
	p := &pattern{}
	alts := alternatives(src)
	var before []string
	for k, alt := range alts {
		if alt != lookaheadSpaces {
			continue
		}
		if k+1 >= len(alts) || alts[k+1] != `\s+` {
			return nil, fmt.Errorf("regex %q: a lookahead other than GPT-2's %s|\\s+ is not supported", orig, lookaheadSpaces)
		}
		before = alts[:k]
		alts[k] = `\s+`
		src = strings.Join(alts, "|")
		p.trim = true
		break
	}
	for _, bad := range []struct{ construct, why string }{
		{"(?=", "a lookahead"}, {"(?!", "a lookahead"}, {"(?<=", "a lookbehind"}, {"(?<!", "a lookbehind"},
		{"(?>", "an atomic group"}, {`\G`, "a search-start anchor"}, {`\K`, "a match-start reset"}, {`\R`, "a line-break class"},
		{`\X`, "a grapheme cluster"}, {`\b`, "a word boundary"}, {`\B`, "a word boundary"}, {`\Z`, "an end-before-newline anchor"},
		{"[:", "a POSIX bracket"}, {"&&", "a class intersection"}, {`\1`, "a back-reference"}, {`\k<`, "a back-reference"},
		{`\Q`, "a quoted run (Ruby's syntax has none: it is the letter Q)"},
	} {
		if strings.Contains(src, bad.construct) {
			return nil, fmt.Errorf("regex %q: %s (%s) is not supported (shardfeed runs tokenizer patterns in linear time, as tokenizers' Oniguruma means them)", orig, bad.construct, bad.why)
		}
	}
	if p.trim && (anchored(src) || strings.Contains(src, `\A`)) {
		return nil, fmt.Errorf("regex %q: ^, $ or \\A beside GPT-2's %s is not supported", orig, lookaheadSpaces)
	}
	if m := fixedLazy.FindString(src); m != "" {
		return nil, fmt.Errorf("regex %q: %s is not supported (in Ruby's syntax a fixed count then ? makes it optional, in Go lazy)", orig, m)
	}
	if err := caseFolded(src); err != nil {
		return nil, fmt.Errorf("regex %q: %w", orig, err)
	}
	compile := func(src string) (*regexp.Regexp, error) {
		translated, err := translate(src)
		if err != nil {
			return nil, err
		}
		if err := scansFar(translated); err != nil {
			return nil, err
		}
		return regexp.Compile(translated)
	}
	var err error
	if p.re, err = compile(src); err != nil {
		return nil, fmt.Errorf("regex %q: %w", orig, err)
	}
	if len(before) > 0 {
		if p.before, err = compile(`\A(?:` + strings.Join(before, "|") + `)`); err != nil {
			return nil, fmt.Errorf("regex %q: %w", orig, err)
		}
	}
	return p, nil
}

// lowInterval is Ruby's {,n}.
var lowInterval = regexp.MustCompile(`^\{,[0-9]+\}`)

// fixedLazy is a fixed count then ?: Ruby's syntax makes it optional,
// Go's lazy.
var fixedLazy = regexp.MustCompile(`\{[0-9]+\}\?`)

// caseFolded refuses, where (?i) applies, what Oniguruma folds otherwise
// than Go: classes (it does not fold \p{Lu}; Go does), letters beyond
// ASCII, and the pairs some character folds to (ß to ss, ﬁ to fi).
func caseFolded(src string) error {
	for at := strings.Index(src, "(?"); at >= 0; {
		flags := src[at+2:]
		end := strings.IndexAny(flags, ":)")
		if end < 0 {
			break
		}
		if on, _, _ := strings.Cut(flags[:end], "-"); strings.Contains(on, "i") {
			scope := flags[end:]
			if flags[end] == ':' {
				scope = scope[:groupEnd(scope)]
			}
			if k := strings.IndexByte(scope, '\\'); k >= 0 && k+1 < len(scope) && isAlnum(scope[k+1]) {
				return fmt.Errorf("the escape \\%c under (?i) is not supported (Oniguruma and Go fold it differently)", scope[k+1])
			}
			if strings.Contains(scope, "[") {
				return errors.New("a class under (?i) is not supported (Oniguruma and Go fold it differently)")
			}
			// The letters as they may follow one another, groups aside.
			letters := strings.ToLower(strings.NewReplacer("(?:", "", "(", "", ")", "").Replace(scope))
			for _, bad := range []string{"ss", "st", "ff", "fi", "fl"} {
				if strings.Contains(letters, bad) {
					return fmt.Errorf("%q under (?i) is not supported (Oniguruma folds ß, ﬁ and their kin to such pairs; Go does not)", bad)
				}
			}
			if !isASCII(scope) {
				return errors.New("a letter beyond ASCII under (?i) is not supported (Oniguruma and Go fold it differently)")
			}
		}
		next := strings.Index(src[at+2:], "(?")
		if next < 0 {
			break
		}
		at += 2 + next
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// groupEnd is the index of the ) that closes the group s is inside of.
func groupEnd(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return i
			}
			depth--
		}
	}
	return len(s)
}

// anchored says whether src has ^ or $ outside brackets.
func anchored(src string) bool {
	inClass := 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case c == '[':
			inClass++
		case c == ']' && inClass > 0:
			inClass--
		case (c == '^' || c == '$') && inClass == 0:
			return true
		}
	}
	return false
}

// alternatives splits a regex at its top-level |.
func alternatives(src string) []string {
	var out []string
	depth, inClass, start := 0, 0, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\\':
			i++
		case inClass > 0:
			switch c {
			case '[':
				inClass++
			case ']':
				inClass--
			}
		case c == '[':
			inClass = 1
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

// classAliases are the long names of general categories Oniguruma takes.
var classAliases = map[string]string{
	"letter": "L", "uppercaseletter": "Lu", "lowercaseletter": "Ll", "titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo",
	"mark": "M", "nonspacingmark": "Mn", "spacingmark": "Mc", "enclosingmark": "Me", "number": "N", "decimalnumber": "Nd",
	"letternumber": "Nl", "othernumber": "No", "punctuation": "P", "connectorpunctuation": "Pc", "dashpunctuation": "Pd",
	"openpunctuation": "Ps", "closepunctuation": "Pe", "initialpunctuation": "Pi", "finalpunctuation": "Pf", "otherpunctuation": "Po",
	"symbol": "S", "mathsymbol": "Sm", "currencysymbol": "Sc", "modifiersymbol": "Sk", "othersymbol": "So", "separator": "Z",
	"spaceseparator": "Zs", "lineseparator": "Zl", "paragraphseparator": "Zp", "other": "C", "control": "Cc", "format": "Cf",
	"privateuse": "Co", "unassigned": "Cn",
}

// classTable returns the table of a \p{name} as tokenizers' Oniguruma
// matches it (names compared as Oniguruma compares them: case, spaces,
// hyphens and underscores aside).
func classTable(name string) (*unicode.RangeTable, error) {
	key := strings.Map(func(r rune) rune {
		if r == ' ' || r == '_' || r == '-' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
	if alias, ok := classAliases[key]; ok {
		return regexClasses["p{"+alias+"}"], nil
	}
	for k, t := range regexClasses {
		if strings.HasPrefix(k, "p{") && strings.EqualFold(k[2:len(k)-1], key) {
			return t, nil
		}
	}
	return nil, fmt.Errorf(`\p{%s} is not supported (shardfeed has tokenizers' general categories and the scripts Han, Hiragana, Katakana, Hangul, Latin, Greek, Cyrillic, Arabic, Hebrew, Thai and Devanagari)`, name)
}

// translate rewrites an Oniguruma pattern as Go's regexp means the same:
// each class spelled out from tokenizers' tables, line anchors, nested
// classes flattened, \uHHHH as \x{HHHH}.
func translate(src string) (string, error) {
	var b strings.Builder
	depth := 0 // brackets open
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\' && i+1 < len(src):
			table, neg, n, err := escapeClass(src[i:])
			if err != nil {
				return "", err
			}
			if table == nil {
				if src[i+1] == 'u' && i+6 <= len(src) && isHex(src[i+2:i+6]) {
					b.WriteString(`\x{` + src[i+2:i+6] + `}`)
					i += 5
					continue
				}
				b.WriteString(src[i : i+2])
				i++
				continue
			}
			i += n - 1
			if depth > 0 {
				table = insideBrackets(src[i-n+1:i+1], table)
			}
			switch {
			case depth > 0 && neg:
				b.WriteString(ranges(complement(table)))
			case depth > 0:
				b.WriteString(ranges(table))
			case neg:
				b.WriteString("[^" + ranges(table) + "]")
			default:
				b.WriteString("[" + ranges(table) + "]")
			}
		case c == '[' && depth > 0:
			// A class inside a class is its union with it.
			if i+1 < len(src) && src[i+1] == '^' {
				return "", fmt.Errorf("a negated class inside a class is not supported")
			}
			depth++
		case c == '[':
			depth = 1
			b.WriteByte(c)
			if i+1 < len(src) && src[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(src) && src[i+1] == ']' { // a literal ] first
				b.WriteString(`\]`)
				i++
			}
		case c == ']' && depth > 1:
			depth--
		case c == ']' && depth == 1:
			depth = 0
			b.WriteByte(c)
		case depth == 0 && c == '(' && strings.HasPrefix(src[i:], "(?") && i+2 < len(src) && strings.IndexByte("imx-", src[i+2]) >= 0:
			// Ruby's flags: m is Go's s (. matches a newline); x has no Go.
			end := strings.IndexAny(src[i+2:], ":)")
			if end < 0 {
				return "", fmt.Errorf("an unclosed group of flags")
			}
			flags := src[i+2 : i+2+end]
			if strings.ContainsAny(flags, "xsU") || strings.Trim(flags, "im-") != "" {
				return "", fmt.Errorf("the flags (?%s) are not supported (shardfeed reads Ruby's i and m)", flags)
			}
			b.WriteString("(?" + strings.ReplaceAll(flags, "m", "s"))
			i += 1 + end
		case depth == 0 && c == '{' && lowInterval.MatchString(src[i:]):
			b.WriteString("{0") // Ruby's {,n} is {0,n} (other braces are literal)
		case depth == 0 && c == '^':
			b.WriteString("(?m:^)")
		case depth == 0 && c == '$':
			b.WriteString("(?m:$)")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// escapeClass reads the class escape at the start of s (\s, \S, \w, \W,
// \d, \D, \h, \H, \p{..}, \P{..}, \p{^..}, \pL): its table, whether it is
// negated, and its length; a nil table for any other escape.
func escapeClass(s string) (*unicode.RangeTable, bool, int, error) {
	switch e := s[1]; e {
	case 's', 'S', 'w', 'W', 'd', 'D', 'h', 'H':
		return regexClasses[string(unicode.ToLower(rune(e)))], unicode.IsUpper(rune(e)), 2, nil
	case 'p', 'P':
		neg := e == 'P'
		if len(s) < 3 || s[2] != '{' {
			return nil, false, 0, fmt.Errorf(`\%c without braces is not supported (Ruby's syntax has no \pL: it is the letters)`, e)
		}
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return nil, false, 0, fmt.Errorf(`%s: an unclosed \%c{`, s, e)
		}
		name := s[3:end]
		if strings.HasPrefix(name, "^") {
			neg, name = !neg, name[1:]
		}
		t, err := classTable(name)
		return t, neg, end + 1, err
	}
	return nil, false, 0, nil
}

// insideBrackets is the table of a class escape written inside brackets,
// where Oniguruma's differs from outside (its [\w] lacks ², which \w
// has).
func insideBrackets(escape string, outside *unicode.RangeTable) *unicode.RangeTable {
	var key string
	switch e := escape[1]; e {
	case 's', 'S', 'w', 'W', 'd', 'D', 'h', 'H':
		key = "[" + string(unicode.ToLower(rune(e))) + "]"
	default:
		for k, t := range regexClasses {
			if t == outside && !strings.HasPrefix(k, "[") {
				key = "[" + k + "]"
				break
			}
		}
	}
	if t, ok := regexClasses[key]; ok {
		return t
	}
	return outside
}

func isHex(s string) bool {
	_, err := strconv.ParseUint(s, 16, 32)
	return err == nil
}

// ranges writes a table's code points as the inside of a bracket.
func ranges(t *unicode.RangeTable) string {
	var b strings.Builder
	add := func(lo, hi uint32) {
		fmt.Fprintf(&b, `\x{%x}`, lo)
		if hi > lo {
			fmt.Fprintf(&b, `-\x{%x}`, hi)
		}
	}
	for _, r := range t.R16 {
		add(uint32(r.Lo), uint32(r.Hi))
	}
	for _, r := range t.R32 {
		add(r.Lo, r.Hi)
	}
	return b.String()
}

// complement is every code point t lacks.
func complement(t *unicode.RangeTable) *unicode.RangeTable {
	out := &unicode.RangeTable{}
	next := uint32(0)
	add := func(lo, hi uint32) {
		if lo > hi {
			return
		}
		if hi <= 0xFFFF {
			out.R16 = append(out.R16, unicode.Range16{Lo: uint16(lo), Hi: uint16(hi), Stride: 1})
		} else {
			out.R32 = append(out.R32, unicode.Range32{Lo: lo, Hi: hi, Stride: 1})
		}
	}
	for _, r := range t.R16 {
		add(next, uint32(r.Lo)-1)
		next = uint32(r.Hi) + 1
	}
	for _, r := range t.R32 {
		add(next, r.Lo-1)
		next = r.Hi + 1
	}
	add(next, unicode.MaxRune)
	return out
}

// isSpace is Oniguruma's \s as tokenizers has it.
func isSpace(r rune) bool { return unicode.Is(regexClasses["s"], r) }

// matches returns the pattern's matches in s as tokenizers' Oniguruma
// finds them: leftmost first, each searched from the end of the last, an
// empty match kept unless it ends where the last match ended (then the
// search moves on a character). A trimmed match's last character is
// matched again.
func (p *pattern) matches(s string) [][2]int {
	if !p.trim {
		// Go's FindAll keeps and skips empty matches as Oniguruma's
		// iterator does, and sees the whole text (anchors are the text's).
		var out [][2]int
		for _, m := range p.re.FindAllStringIndex(s, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
		return out
	}
	var out [][2]int
	lastEnd := -1
	for pos := 0; pos <= len(s); {
		loc := p.re.FindStringIndex(s[pos:])
		if loc == nil {
			break
		}
		start, end := pos+loc[0], pos+loc[1]
		if end == start && start == lastEnd {
			_, size := utf8.DecodeRuneInString(s[end:])
			pos = end + max(size, 1)
			continue
		}
		if end > start && p.trim && end < len(s) && allSpace(s[start:end]) {
			next, _ := utf8.DecodeRuneInString(s[end:])
			_, last := utf8.DecodeLastRuneInString(s[start:end])
			if !isSpace(next) && end-last > start && (p.before == nil || !p.before.MatchString(s[start:])) {
				end -= last // `\s+(?!\S)`: the run but its last character, which goes with the word
			}
		}
		out = append(out, [2]int{start, end})
		lastEnd = end
		if end == start {
			_, size := utf8.DecodeRuneInString(s[end:])
			pos = end + max(size, 1)
			continue
		}
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

// compile compiles the pattern: a Regex as Oniguruma means it, a String
// as itself.
func (p patternJSON) compile() (*pattern, error) {
	switch {
	case p.Regex != nil && p.String != nil:
		return nil, fmt.Errorf("a pattern is a String or a Regex, not both")
	case p.Regex != nil:
		return compilePattern(*p.Regex)
	case p.String != nil && *p.String == "":
		// tokenizers makes a String a regex: the empty one matches
		// between every two characters.
		return &pattern{re: regexp.MustCompile(``)}, nil
	case p.String != nil:
		return &pattern{re: regexp.MustCompile(regexp.QuoteMeta(*p.String))}, nil
	}
	return nil, fmt.Errorf("a pattern is a String or a Regex")
}
