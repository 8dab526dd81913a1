package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a segment's text before it is pre-tokenized. lead
// is how many of the text's first bytes tokenizers' alignments put where
// the original text starts (the first character's, and what was inserted
// before it or made of it): Metaspace's prepend_scheme "first" prepends
// to a piece that starts among them. A normalizer that removes leading
// characters leaves none.
type normalizer interface {
	normalize(s string, lead int) (string, int)
}

// prefixLead is the lead of a normalizer that maps characters one by one
// (or drops them): the bytes it makes of the lead's.
func prefixLead(f func(string) string, s string, lead int) int {
	if lead <= 0 {
		return 0
	}
	return len(f(s[:min(lead, len(s))]))
}

func newNormalizer(raw json.RawMessage) (normalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	kind, err := typeOf(raw)
	if err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	plain := func(n normalizer) (normalizer, error) {
		return n, onlyType(raw, "normalizer "+kind)
	}
	switch kind {
	case "NFC":
		return plain(form{norm.NFC})
	case "NFD":
		return plain(form{norm.NFD})
	case "NFKC":
		return plain(form{norm.NFKC})
	case "NFKD":
		return plain(form{norm.NFKD})
	case "Lowercase":
		return plain(lowercase{})
	case "StripAccents":
		return plain(stripAccents{})
	case "Nmt":
		return plain(nmt{})
	case "Strip":
		var j struct {
			Type       string `json:"type"`
			StripLeft  bool   `json:"strip_left"`
			StripRight bool   `json:"strip_right"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("normalizer Strip: %w", err)
		}
		return strip{left: j.StripLeft, right: j.StripRight}, nil
	case "Prepend":
		var j struct {
			Type    string `json:"type"`
			Prepend string `json:"prepend"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("normalizer Prepend: %w", err)
		}
		return prepend(j.Prepend), nil
	case "Replace":
		return newReplace(raw)
	case "BertNormalizer":
		return newBertNormalizer(raw)
	case "Precompiled":
		return newPrecompiled(raw)
	case "Sequence":
		seq, err := components(raw, "normalizer", "normalizers", newNormalizer)
		return sequenceNorm(seq), err
	}
	return nil, fmt.Errorf("normalizer %q is not supported (shardfeed reads %s)", kind, supportedNormalizers)
}

const supportedNormalizers = "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Nmt, Replace, Prepend, Precompiled, BertNormalizer and Sequence"

type sequenceNorm []normalizer

func (s sequenceNorm) normalize(t string, lead int) (string, int) {
	for _, n := range s {
		t, lead = n.normalize(t, lead)
	}
	return t, lead
}

// form is a Unicode normalization form as tokenizers computes it: with
// the data of Unicode 9.0 (its unicode-normalization-alignments crate),
// so the code points Go's newer tables know and it does not
// (unknownToNorm) are left alone and cut the text into pieces normalized
// apart; and without the stream-safe U+034F that Go inserts after 30
// combining marks.
type form struct{ f norm.Form }

func (f form) normalize(s string, lead int) (string, int) {
	if isASCII(s) {
		return s, lead // every form leaves ASCII alone
	}
	return f.apply(s), prefixLead(f.apply, s, lead)
}

func (f form) apply(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	start := 0
	for i, r := range s {
		if r < 0x7FD || !unicode.Is(unknownToNorm, r) {
			continue
		}
		f.piece(&b, s[start:i])
		b.WriteRune(r)
		start = i + utf8.RuneLen(r)
	}
	f.piece(&b, s[start:])
	return b.String()
}

// piece writes s in the form, without stream-safe joiners.
func (f form) piece(b *strings.Builder, s string) {
	out := f.f.String(s)
	if strings.Count(out, cgj) == strings.Count(s, cgj) {
		b.WriteString(out)
		return
	}
	// Go cut a run of more than 30 combining marks with U+034F (UAX #15's
	// stream-safe format); tokenizers orders and composes the whole run.
	b.WriteString(wholeRuns(f.f, s))
}

const cgj = "\u034F"

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// lowercase is tokenizers' Lowercase: Rust's char::to_lowercase of each
// character, Unicode's full mapping (İ to i̇, two characters, where Go's
// unicode.ToLower gives i) with no context (a final Σ is σ), in the
// Unicode version of the pinned tokenizers (lowercaseExceptions).
type lowercase struct{}

func (lowercase) normalize(s string, lead int) (string, int) {
	return lower(s), prefixLead(lower, s, lead)
}

func lower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r >= 0x130 {
			if m, ok := lowercaseExceptions[r]; ok {
				b.WriteString(m)
				continue
			}
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// stripAccents drops what tokenizers' StripAccents takes for combining
// marks (a tokenizer runs it after NFD).
type stripAccents struct{}

func (stripAccents) normalize(s string, lead int) (string, int) {
	if isASCII(s) {
		return s, lead
	}
	return dropLeading(s, lead, func(r rune) bool { return unicode.Is(combiningMark, r) })
}

// dropLeading drops the characters drop says; the lead keeps what it
// kept of its own (tokenizers aligns a kept character with itself).
func dropLeading(s string, lead int, drop func(rune) bool) (string, int) {
	f := func(s string) string {
		return strings.Map(func(r rune) rune {
			if drop(r) {
				return -1
			}
			return r
		}, s)
	}
	return f(s), prefixLead(f, s, lead)
}

// nmt is tokenizers' Nmt: SentencePiece's nmt_nfkc control characters
// dropped and its other spaces made a space (its NFKC is a separate
// normalizer).
type nmt struct{}

func (nmt) normalize(s string, lead int) (string, int) {
	f := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 0x1 && r <= 0x8 || r == 0xB || r >= 0xE && r <= 0x1F || r == 0x7F || r == 0x8F || r == 0x9F:
				return -1
			case r == '\t', r == '\n', r == '\f', r == '\r', r == 0x1680, r >= 0x200B && r <= 0x200F, r == 0x2028, r == 0x2029,
				r == 0x2581, r == 0xFEFF, r == 0xFFFD:
				return ' '
			}
			return r
		}, s)
	}
	return f(s), prefixLead(f, s, lead)
}

// strip is tokenizers' Strip: Rust's whitespace off either end.
type strip struct{ left, right bool }

func (t strip) normalize(s string, lead int) (string, int) {
	isWS := func(r rune) bool { return unicode.Is(whitespaceRust, r) }
	if t.left {
		trimmed := strings.TrimLeftFunc(s, isWS)
		lead = max(0, lead-(len(s)-len(trimmed)))
		s = trimmed
	}
	if t.right {
		s = strings.TrimRightFunc(s, isWS)
	}
	return s, min(lead, len(s))
}

type prepend string

func (p prepend) normalize(s string, lead int) (string, int) {
	if s == "" {
		return s, lead
	}
	// The prepended text is aligned with the first character.
	if lead > 0 {
		lead += len(p)
	}
	return string(p) + s, lead
}

// replace replaces a string's or a regex's every match (none empty).
type replace struct {
	re      *pattern
	content string
}

func newReplace(raw json.RawMessage) (*replace, error) {
	var j struct {
		Type    string      `json:"type"`
		Pattern patternJSON `json:"pattern"`
		Content string      `json:"content"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("normalizer Replace: %w", err)
	}
	p, err := j.Pattern.compile()
	if err != nil {
		return nil, fmt.Errorf("normalizer Replace: %w", err)
	}
	if p.re.MatchString("") {
		// tokenizers inserts the content there, aligned with no character
		// of the text, and a later pre-tokenizer may then repeat it.
		return nil, errors.New("normalizer Replace: a pattern that matches an empty string (it inserts between characters) is not supported")
	}
	return &replace{re: p, content: j.Content}, nil
}

func (r *replace) normalize(s string, lead int) (string, int) {
	if s == "" {
		return s, lead
	}
	ms := r.re.matches(s)
	if len(ms) == 0 {
		return s, lead
	}
	var b strings.Builder
	last := 0
	newLead, open := 0, lead > 0 // the lead's bytes so far, and whether it goes on
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		if open {
			newLead += min(m[0], lead) - min(last, lead)
			// tokenizers aligns the content with the match's last
			// character: in the lead if that one is.
			_, size := utf8.DecodeLastRuneInString(s[m[0]:m[1]])
			open = m[0] < lead && m[1]-size < lead
			if open {
				newLead += len(r.content)
			}
		}
		b.WriteString(r.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	if open {
		newLead += max(0, lead-last)
	}
	return b.String(), newLead
}
