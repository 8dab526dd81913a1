package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a segment's text before it is pre-tokenized. lead
// says whether the text's first character is still where the original
// text starts (tokenizers' alignments): a normalizer that removes leading
// characters makes it false, and Metaspace's prepend_scheme "first" then
// prepends nothing.
type normalizer interface {
	normalize(s string, lead bool) (string, bool)
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

func (s sequenceNorm) normalize(t string, lead bool) (string, bool) {
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

func (f form) normalize(s string, lead bool) (string, bool) {
	if isASCII(s) {
		return s, lead // every form leaves ASCII alone
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
	return b.String(), lead
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

func (lowercase) normalize(s string, lead bool) (string, bool) {
	return lower(s), lead
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

func (stripAccents) normalize(s string, lead bool) (string, bool) {
	if isASCII(s) {
		return s, lead
	}
	return dropLeading(s, lead, func(r rune) bool { return unicode.Is(combiningMark, r) })
}

// dropLeading drops the characters drop says, and says whether the first
// character left is the first of s.
func dropLeading(s string, lead bool, drop func(rune) bool) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		if drop(r) {
			if b.Len() == 0 && i == 0 {
				lead = false
			}
			continue
		}
		b.WriteRune(r)
	}
	return b.String(), lead
}

// nmt is tokenizers' Nmt: SentencePiece's nmt_nfkc control characters
// dropped and its other spaces made a space (its NFKC is a separate
// normalizer).
type nmt struct{}

func (nmt) normalize(s string, lead bool) (string, bool) {
	s, lead = dropLeading(s, lead, func(r rune) bool {
		return r >= 0x1 && r <= 0x8 || r == 0xB || r >= 0xE && r <= 0x1F || r == 0x7F || r == 0x8F || r == 0x9F
	})
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t', r == '\n', r == '\f', r == '\r', r == 0x1680, r >= 0x200B && r <= 0x200F, r == 0x2028, r == 0x2029,
			r == 0x2581, r == 0xFEFF, r == 0xFFFD:
			return ' '
		}
		return r
	}, s), lead
}

// strip is tokenizers' Strip: Rust's whitespace off either end.
type strip struct{ left, right bool }

func (t strip) normalize(s string, lead bool) (string, bool) {
	isWS := func(r rune) bool { return unicode.Is(whitespaceRust, r) }
	if t.left {
		trimmed := strings.TrimLeftFunc(s, isWS)
		if len(trimmed) < len(s) {
			lead = false
		}
		s = trimmed
	}
	if t.right {
		s = strings.TrimRightFunc(s, isWS)
	}
	return s, lead
}

type prepend string

func (p prepend) normalize(s string, lead bool) (string, bool) {
	if s == "" {
		return s, lead
	}
	return string(p) + s, lead
}

// replace replaces a string's or a regex's every match (an empty match
// too, as tokenizers does: the content is inserted there).
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
	return &replace{re: p, content: j.Content}, nil
}

func (r *replace) normalize(s string, lead bool) (string, bool) {
	if s == "" {
		return s, lead
	}
	ms := r.re.matches(s)
	if len(ms) == 0 {
		return s, lead
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		b.WriteString(r.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	// tokenizers aligns the content with the match's last character, and
	// what follows an emptied match with itself.
	if first := ms[0]; first[0] == 0 && first[1] > 0 {
		_, size := utf8.DecodeRuneInString(s)
		lead = lead && r.content != "" && first[1] == size
	}
	return b.String(), lead
}
