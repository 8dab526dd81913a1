package tokenizer

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedToken is a token matched in the text before the model sees it.
type addedToken struct {
	content        string
	id             int32
	singleWord     bool
	lstrip, rstrip bool
}

// addedTokens finds added tokens in a text, leftmost first and the longest
// at a place, as tokenizers' Aho-Corasick automaton does.
type addedTokens struct {
	// byFirst lists the tokens by their first byte, longest first.
	byFirst map[byte][]addedToken
}

func (a *addedTokens) add(t addedToken) {
	if a.byFirst == nil {
		a.byFirst = map[byte][]addedToken{}
	}
	first := t.content[0]
	a.byFirst[first] = append(a.byFirst[first], t)
	slices.SortStableFunc(a.byFirst[first], func(x, y addedToken) int { return len(y.content) - len(x.content) })
}

// segment is a piece of text (at its byte offset), or (id 0 or more) an
// added token.
type segment struct {
	text string
	at   int
	id   int32
}

// split cuts s at its added tokens as tokenizers' AddedVocabulary does:
// the automaton finds the tokens leftmost-longest in the text as it is;
// then each found token that must be a single word and is not is
// skipped, and lstrip and rstrip widen the others over the spaces beside
// them (a widened token may overlap the next one found: the text between
// is then nothing).
func (a *addedTokens) split(s string) []segment {
	if len(a.byFirst) == 0 {
		return []segment{{text: s, id: -1}}
	}
	var out []segment
	from := 0 // the end of the last token: text before it is out
	// runFrom, runEnd: the last run of spaces rstrip measured, so that
	// tokens inside one run do not measure it again (linear in the text).
	runFrom, runEnd := -1, -1
	for i := 0; i < len(s); {
		tok, ok := a.at(s, i)
		if !ok {
			i++
			continue
		}
		start, stop := i, i+len(tok.content)
		i = stop // the automaton goes on after the match, whatever is done with it
		if tok.singleWord && (wordBefore(s[:start]) || wordAfter(s[stop:])) {
			continue
		}
		if tok.lstrip {
			// No further back than the last token's end.
			start = max(from+len(strings.TrimRightFunc(s[min(from, start):start], isWordSpace)), from)
		}
		if tok.rstrip {
			if stop < runFrom || stop > runEnd {
				runFrom, runEnd = stop, len(s)-len(strings.TrimLeftFunc(s[stop:], isWordSpace))
			}
			stop = runEnd
		}
		if stop < start {
			continue // a span turned inside out (tokenizers panics here)
		}
		if start > from {
			out = append(out, segment{text: s[from:start], at: from, id: -1})
		}
		if stop > start { // tokenizers drops a token whose span a widened one took
			out = append(out, segment{id: tok.id})
		}
		from = stop
	}
	if from < len(s) {
		out = append(out, segment{text: s[from:], at: from, id: -1})
	}
	return out
}

// at returns the longest token at byte i of s.
func (a *addedTokens) at(s string, i int) (addedToken, bool) {
	for _, t := range a.byFirst[s[i]] {
		if strings.HasPrefix(s[i:], t.content) {
			return t, true
		}
	}
	return addedToken{}, false
}

// isWordChar and isWordSpace are the regex crate's \w and \s, which
// tokenizers' single_word, lstrip and rstrip use.
func isWordChar(r rune) bool  { return unicode.Is(wordChar, r) }
func isWordSpace(r rune) bool { return unicode.Is(spaceChar, r) }

func wordBefore(s string) bool {
	r, size := utf8.DecodeLastRuneInString(s)
	return size > 0 && isWordChar(r)
}

func wordAfter(s string) bool {
	r, size := utf8.DecodeRuneInString(s)
	return size > 0 && isWordChar(r)
}
