package tokenizer

import (
	"fmt"
	"regexp/syntax"
)

// scansFar refuses a pattern that makes finding every match quadratic in
// the text. Go's regexp finds each match with a fresh search; while an
// alternative of higher priority may still match, the search goes on.
// An alternative before the last that repeats a class without bound and
// then needs more ([^\n]*\n in [^\n]*\n|\S+) scans to the end of every
// run of that class, and when it then fails and a later alternative
// matches a little, the next search scans the run again. It is refused
// unless the next alternative takes the whole run itself (Llama 3's
// \s*[\r\n]+ before \s+, o200k's uppercase run before its next
// alternative): then each run is scanned a bounded number of times.
func scansFar(translated string) error {
	re, err := syntax.Parse(translated, syntax.Perl)
	if err != nil {
		return nil // compile reports it
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpAlternate {
		return nil
	}
	alts := re.Sub
	for i := 0; i+1 < len(alts); i++ {
		class, ok := farClass(alts[i])
		if !ok {
			return fmt.Errorf("alternative %d (%s) repeats without bound before more it needs, and is not the last: finding every match would be quadratic in the text", i+1, alts[i])
		}
		if class == nil {
			continue
		}
		if !takesRun(alts[i+1], class) {
			return fmt.Errorf("alternative %d (%s) repeats %s without bound before more it needs, and the next alternative does not take such a run: finding every match would be quadratic in the text", i+1, alts[i], class)
		}
	}
	return nil
}

// farClass finds, in an alternative, a repetition without bound followed
// by something it needs: the repeated class (nil: none), or false where
// the repetition is of more than a class.
func farClass(re *syntax.Regexp) (*syntax.Regexp, bool) {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	items := []*syntax.Regexp{re}
	switch re.Op {
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			if c, ok := farClass(sub); !ok || c != nil {
				return c, ok
			}
		}
		return nil, true
	case syntax.OpConcat:
		items = re.Sub
	}
	for k, it := range items {
		for it.Op == syntax.OpCapture {
			it = it.Sub[0]
		}
		if !unbounded(it) {
			if it.Op == syntax.OpAlternate || it.Op == syntax.OpConcat {
				if c, ok := farClass(it); !ok || c != nil {
					return c, ok
				}
			}
			continue
		}
		needed := false
		for _, rest := range items[k+1:] {
			if !nullable(rest) {
				needed = true
			}
		}
		if !needed {
			continue
		}
		sub := it.Sub[0]
		if !isClass(sub) {
			return nil, false
		}
		return sub, true
	}
	return nil, true
}

func unbounded(re *syntax.Regexp) bool {
	return re.Op == syntax.OpStar || re.Op == syntax.OpPlus || re.Op == syntax.OpRepeat && re.Max == -1
}

func isClass(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpCharClass, syntax.OpLiteral, syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return re.Op != syntax.OpLiteral || len(re.Rune) == 1
	}
	return false
}

// nullable says whether re can match the empty string.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !nullable(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullable(s) {
				return true
			}
		}
	}
	return false
}

// takesRun says whether next, after what it may skip, repeats a class
// holding every character of class: it takes a whole run of class.
func takesRun(next, class *syntax.Regexp) bool {
	for next.Op == syntax.OpCapture {
		next = next.Sub[0]
	}
	items := []*syntax.Regexp{next}
	if next.Op == syntax.OpConcat {
		items = next.Sub
	}
	for _, it := range items {
		if (it.Op == syntax.OpPlus || it.Op == syntax.OpRepeat && it.Max == -1 && it.Min >= 1 || it.Op == syntax.OpStar) && isClass(it.Sub[0]) &&
			covers(it.Sub[0], class) {
			return true
		}
		if !nullable(it) {
			return false
		}
	}
	return false
}

// covers says whether every character class matches, outer matches too
// (their ranges compared, surrogates aside).
func covers(outer, class *syntax.Regexp) bool {
	out, in := runeRanges(outer), runeRanges(class)
	for k := 0; k+1 < len(in); k += 2 {
		lo, hi := in[k], in[k+1]
		for lo <= hi {
			if lo >= 0xD800 && lo <= 0xDFFF { // no text holds them
				lo = 0xE000
				continue
			}
			j := 0
			for j+1 < len(out) && (lo < out[j] || lo > out[j+1]) {
				j += 2
			}
			if j+1 >= len(out) {
				return false
			}
			lo = out[j+1] + 1
		}
	}
	return true
}

// runeRanges is a class's characters as sorted [lo, hi] pairs.
func runeRanges(re *syntax.Regexp) []rune {
	switch re.Op {
	case syntax.OpAnyChar:
		return []rune{0, 0x10FFFF}
	case syntax.OpAnyCharNotNL:
		return []rune{0, '\n' - 1, '\n' + 1, 0x10FFFF}
	case syntax.OpLiteral:
		r := re.Rune[0]
		if re.Flags&syntax.FoldCase != 0 {
			return nil // a folded letter: no class is taken to cover it
		}
		return []rune{r, r}
	}
	return re.Rune
}
