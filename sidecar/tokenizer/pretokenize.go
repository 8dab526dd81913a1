package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// preTokenizer cuts a segment's normalized text into the pieces the model
// tokenizes one by one.
type preTokenizer interface {
	preTokenize(pieces []piece) []piece
}

// piece is a piece of a text: its string, and how many of its first
// bytes tokenizers aligns where the original text starts (Metaspace's
// prepend_scheme "first" prepends to a piece with some).
type piece struct {
	s    string
	lead int
}

func newPreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	kind, err := typeOf(raw)
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer: %w", err)
	}
	switch kind {
	case "ByteLevel":
		return newByteLevel(raw)
	case "Split":
		return newSplit(raw)
	case "Sequence":
		seq, err := components(raw, "pre-tokenizer", "pretokenizers", newPreTokenizer)
		return sequencePre(seq), err
	case "Whitespace":
		return whitespace{}, onlyType(raw, "pre-tokenizer Whitespace")
	case "WhitespaceSplit":
		return whitespaceSplit{}, onlyType(raw, "pre-tokenizer WhitespaceSplit")
	case "BertPreTokenizer":
		return bertPre{}, onlyType(raw, "pre-tokenizer BertPreTokenizer")
	case "Punctuation":
		var j struct {
			Type     string `json:"type"`
			Behavior string `json:"behavior"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("pre-tokenizer Punctuation: %w", err)
		}
		b, ok := behaviors[j.Behavior]
		if !ok {
			return nil, fmt.Errorf("pre-tokenizer Punctuation: behavior %q", j.Behavior)
		}
		return punctuation{behavior: b}, nil
	case "Metaspace":
		return newMetaspace(raw)
	case "Digits":
		var j struct {
			Type             string `json:"type"`
			IndividualDigits bool   `json:"individual_digits"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("pre-tokenizer Digits: %w", err)
		}
		return digits{individual: j.IndividualDigits}, nil
	}
	return nil, fmt.Errorf("pre-tokenizer %q is not supported (shardfeed reads %s)", kind, supportedPreTokenizers)
}

const supportedPreTokenizers = "ByteLevel, Split, Whitespace, WhitespaceSplit, Digits, Punctuation, BertPreTokenizer, Metaspace and Sequence"

type sequencePre []preTokenizer

func (s sequencePre) preTokenize(pieces []piece) []piece {
	for _, p := range s {
		pieces = p.preTokenize(pieces)
	}
	return pieces
}

// behavior is what a split does with the pattern's matches (tokenizers'
// SplitDelimiterBehavior).
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]behavior{"Removed": removed, "Isolated": isolated, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous}

// split is the Split pre-tokenizer: a regex or a string, its matches
// treated as behavior says (or, inverted, the text between them).
type split struct {
	pattern  *pattern
	behavior behavior
	invert   bool
}

func newSplit(raw json.RawMessage) (*split, error) {
	var j struct {
		Type     string      `json:"type"`
		Pattern  patternJSON `json:"pattern"`
		Behavior string      `json:"behavior"`
		Invert   bool        `json:"invert"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("pre-tokenizer Split: %w", err)
	}
	b, ok := behaviors[j.Behavior]
	if !ok {
		return nil, fmt.Errorf("pre-tokenizer Split: behavior %q (tokenizers has Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)", j.Behavior)
	}
	p, err := j.Pattern.compile()
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer Split: %w", err)
	}
	return &split{pattern: p, behavior: b, invert: j.Invert}, nil
}

func (s *split) preTokenize(pieces []piece) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		out = splitBy(out, p, s.pattern.matches(p.s), s.behavior, s.invert)
	}
	return out
}

// span is a piece of a string: a match of the pattern (perhaps empty), or
// the text between two.
type span struct {
	start, end int
	match      bool
}

// splitBy appends to out the pieces of s that the matches and behavior
// give, as tokenizers' NormalizedString::split cuts them, step for step
// (its handling of empty matches included), empty pieces dropped.
func splitBy(out []piece, p piece, matches [][2]int, b behavior, invert bool) []piece {
	s := p.s
	spans := make([]span, 0, 2*len(matches)+1)
	last := 0
	for _, m := range matches {
		if m[0] != last {
			spans = append(spans, span{last, m[0], invert})
		}
		spans = append(spans, span{m[0], m[1], !invert})
		last = m[1]
	}
	if last != len(s) || len(spans) == 0 {
		spans = append(spans, span{last, len(s), invert})
	}
	// kept: the spans that become pieces (match now means "remove").
	var kept []span
	switch b {
	case removed:
		kept = spans
	case isolated:
		kept = spans
		for i := range kept {
			kept[i].match = false
		}
	case contiguous:
		prev := false
		for _, sp := range spans {
			if n := len(kept); sp.match == prev && n > 0 {
				kept[n-1].end = sp.end
			} else {
				kept = append(kept, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
	case mergedWithPrevious:
		prev := false
		for _, sp := range spans {
			if n := len(kept); sp.match && !prev && n > 0 {
				kept[n-1].end = sp.end
			} else {
				kept = append(kept, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
	case mergedWithNext:
		prev := false
		for k := len(spans) - 1; k >= 0; k-- {
			sp := spans[k]
			if n := len(kept); sp.match && !prev && n > 0 {
				kept[n-1].start = sp.start
			} else {
				kept = append(kept, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
		for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
			kept[i], kept[j] = kept[j], kept[i]
		}
	}
	for _, sp := range kept {
		if !sp.match && sp.end > sp.start {
			out = append(out, piece{s: s[sp.start:sp.end], lead: max(0, min(p.lead, sp.end)-sp.start)})
		}
	}
	return out
}

// whitespace is tokenizers' Whitespace: runs of word characters and runs
// of other non-space characters (its regex \w+|[^\w\s]+, the regex
// crate's classes), the spaces between them dropped.
type whitespace struct{}

var wordRuns = regexp.MustCompile(`[` + ranges(wordChar) + `]+|[^` + ranges(wordChar) + ranges(spaceChar) + `]+`)

func (whitespace) preTokenize(pieces []piece) []piece {
	var out []piece
	for _, p := range pieces {
		var runs [][2]int
		for _, m := range wordRuns.FindAllStringIndex(p.s, -1) {
			runs = append(runs, [2]int{m[0], m[1]})
		}
		out = splitBy(out, p, runs, removed, true)
	}
	return out
}

// whitespaceSplit cuts at whitespace, dropping it.
type whitespaceSplit struct{}

func (whitespaceSplit) preTokenize(pieces []piece) []piece {
	var out []piece
	for _, p := range pieces {
		out = splitBy(out, p, runsOf(p.s, isRustSpace, false), removed, false)
	}
	return out
}

// runsOf returns where in s the characters are that is says: each alone,
// or (together) each run of them.
func runsOf(s string, is func(rune) bool, together bool) [][2]int {
	var out [][2]int
	for i, r := range s {
		if !is(r) {
			continue
		}
		end := i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size := utf8.DecodeRuneInString(s[i:])
			end = i + size
		}
		if n := len(out); together && n > 0 && out[n-1][1] == i {
			out[n-1][1] = end
			continue
		}
		out = append(out, [2]int{i, end})
	}
	return out
}

// isRustSpace is Rust's char::is_whitespace, as tokenizers has it.
func isRustSpace(r rune) bool { return unicode.Is(whitespaceRust, r) }

// isNumeric is Rust's char::is_numeric, as tokenizers has it.
func isNumeric(r rune) bool { return unicode.Is(numericChar, r) }

// digits isolates numbers (Rust's char::is_numeric): each digit alone, or
// each run.
type digits struct{ individual bool }

func (d digits) preTokenize(pieces []piece) []piece {
	var out []piece
	for _, p := range pieces {
		out = splitBy(out, p, runsOf(p.s, isNumeric, !d.individual), isolated, false)
	}
	return out
}
