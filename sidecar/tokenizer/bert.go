package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// bertNormalizer is BERT's normalizer: control characters dropped and
// whitespace made a space, CJK ideographs set apart by spaces, accents
// stripped and text lowercased where asked.
type bertNormalizer struct {
	cleanText, chinese, strip, lower bool
}

func newBertNormalizer(raw json.RawMessage) (*bertNormalizer, error) {
	var j struct {
		Type               string `json:"type"`
		CleanText          bool   `json:"clean_text"`
		HandleChineseChars bool   `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          bool   `json:"lowercase"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("normalizer BertNormalizer: %w", err)
	}
	strip := j.Lowercase // tokenizers' default: strip accents when lowercasing
	if j.StripAccents != nil {
		strip = *j.StripAccents
	}
	return &bertNormalizer{cleanText: j.CleanText, chinese: j.HandleChineseChars, strip: strip, lower: j.Lowercase}, nil
}

func (b *bertNormalizer) normalize(s string, lead int) (string, int) {
	return b.apply(s), prefixLead(b.apply, s, lead)
}

// apply is BertNormalizer's steps in its order; each maps or drops
// characters one by one (a CJK ideograph's spaces are aligned with it).
func (b *bertNormalizer) apply(s string) string {
	if b.cleanText {
		s = strings.Map(func(r rune) rune {
			switch {
			case unicode.Is(bertDropped, r):
				return -1
			case unicode.Is(bertSpace, r):
				return ' '
			}
			return r
		}, s)
	}
	if b.chinese {
		var out strings.Builder
		for _, r := range s {
			if isCJK(r) {
				out.WriteByte(' ')
				out.WriteRune(r)
				out.WriteByte(' ')
			} else {
				out.WriteRune(r)
			}
		}
		s = out.String()
	}
	if b.strip && !isASCII(s) {
		s = strings.Map(func(r rune) rune {
			if unicode.Is(bertAccent, r) {
				return -1
			}
			return r
		}, form{norm.NFD}.apply(s))
	}
	if b.lower {
		s = lower(s)
	}
	return s
}

// isCJK is BERT's "Chinese character": the CJK Unified Ideographs blocks
// and their extensions and compatibility forms.
func isCJK(r rune) bool {
	return r >= 0x4E00 && r <= 0x9FFF || r >= 0x3400 && r <= 0x4DBF || r >= 0x20000 && r <= 0x2A6DF || r >= 0x2A700 && r <= 0x2B73F ||
		r >= 0x2B740 && r <= 0x2B81F || r >= 0x2B920 && r <= 0x2CEAF || r >= 0xF900 && r <= 0xFAFF || r >= 0x2F800 && r <= 0x2FA1F
}

// isBertPunct is BERT's punctuation: ASCII punctuation (symbols
// included) and what tokenizers takes for Unicode's category P.
func isBertPunct(r rune) bool { return unicode.Is(punctuationChar, r) }

// bertPre is BERT's pre-tokenizer: split at whitespace (dropped), then
// each punctuation character alone.
type bertPre struct{}

func (bertPre) preTokenize(pieces []piece) []piece {
	pieces = whitespaceSplit{}.preTokenize(pieces)
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		out = splitBy(out, p, runsOf(p.s, isBertPunct, false), isolated, false)
	}
	return out
}

// punctuation splits at each punctuation character (BERT's), as behavior
// says.
type punctuation struct{ behavior behavior }

func (u punctuation) preTokenize(pieces []piece) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		out = splitBy(out, p, runsOf(p.s, isBertPunct, false), u.behavior, false)
	}
	return out
}

// metaspace is SentencePiece's pre-tokenizer: spaces become the
// replacement character (▁), one is prepended as prepend_scheme says, and
// the text is split before each.
type metaspace struct {
	replacement string
	prepend     string // always, first, never
	split       bool
}

func newMetaspace(raw json.RawMessage) (*metaspace, error) {
	var j struct {
		Type           string `json:"type"`
		Replacement    string `json:"replacement"`
		PrependScheme  string `json:"prepend_scheme"`
		Split          *bool  `json:"split"`
		AddPrefixSpace *bool  `json:"add_prefix_space"`
		StrRep         string `json:"str_rep"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("pre-tokenizer Metaspace: %w", err)
	}
	m := &metaspace{replacement: j.Replacement, prepend: j.PrependScheme, split: j.Split == nil || *j.Split}
	if m.prepend == "" { // files before the prepend scheme
		m.prepend = "always"
		if j.AddPrefixSpace != nil && !*j.AddPrefixSpace {
			m.prepend = "never"
		}
	}
	switch {
	case len([]rune(m.replacement)) != 1:
		return nil, fmt.Errorf("pre-tokenizer Metaspace: the replacement %q is not one character", m.replacement)
	case m.prepend != "always" && m.prepend != "first" && m.prepend != "never":
		return nil, fmt.Errorf("pre-tokenizer Metaspace: prepend_scheme %q (tokenizers has always, first, never)", m.prepend)
	}
	return m, nil
}

func (m *metaspace) preTokenize(pieces []piece) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		if p.s == "" {
			continue // tokenizers prepends nothing to an empty piece
		}
		s := strings.ReplaceAll(p.s, " ", m.replacement)
		lead := 0
		if p.lead > 0 {
			lead = len(strings.ReplaceAll(p.s[:min(p.lead, len(p.s))], " ", m.replacement))
		}
		if !strings.HasPrefix(s, m.replacement) && (m.prepend == "always" || m.prepend == "first" && p.lead > 0) {
			s = m.replacement + s
			if lead > 0 {
				lead += len(m.replacement)
			}
		}
		q := piece{s: s, lead: lead}
		if !m.split {
			out = append(out, q)
			continue
		}
		var at [][2]int
		for i := 0; ; {
			k := strings.Index(s[i:], m.replacement)
			if k < 0 {
				break
			}
			at = append(at, [2]int{i + k, i + k + len(m.replacement)})
			i += k + len(m.replacement)
		}
		out = splitBy(out, q, at, mergedWithNext, false)
	}
	return out
}
