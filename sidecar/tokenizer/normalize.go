package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites a segment's text before it is pre-tokenized.
type normalizer interface {
	normalize(s string) string
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
	case "Sequence":
		seq, err := components(raw, "normalizer", "normalizers", newNormalizer)
		return sequenceNorm(seq), err
	}
	return nil, fmt.Errorf("normalizer %q is not supported (shardfeed reads %s)", kind, supportedNormalizers)
}

const supportedNormalizers = "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Replace, Prepend, BertNormalizer and Sequence"

type sequenceNorm []normalizer

func (s sequenceNorm) normalize(t string) string {
	for _, n := range s {
		t = n.normalize(t)
	}
	return t
}

type form struct{ f norm.Form }

func (f form) normalize(s string) string { return f.f.String(s) }

// lowercase is tokenizers' Lowercase: Rust's char::to_lowercase of each
// character, Unicode's full mapping (İ to i̇, two characters, where Go's
// unicode.ToLower gives i) and no context (a final Σ is σ).
type lowercase struct{}

func (lowercase) normalize(s string) string {
	if !strings.ContainsRune(s, '\u0130') {
		return strings.Map(unicode.ToLower, s)
	}
	return strings.ReplaceAll(strings.Map(func(r rune) rune {
		if r == '\u0130' {
			return r
		}
		return unicode.ToLower(r)
	}, s), "\u0130", "i\u0307")
}

// stripAccents drops combining marks, Unicode's category M (tokenizers'
// StripAccents, which a tokenizer runs after NFD).
type stripAccents struct{}

func (stripAccents) normalize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.M, r) {
			return -1
		}
		return r
	}, s)
}

type prepend string

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(p) + s
}

// replace replaces a string's or a regex's every match.
type replace struct {
	literal string
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
	if j.Pattern.Regex == nil && j.Pattern.String != nil && *j.Pattern.String != "" {
		return &replace{literal: *j.Pattern.String, content: j.Content}, nil
	}
	src, err := j.Pattern.source()
	if err != nil {
		return nil, fmt.Errorf("normalizer Replace: %w", err)
	}
	p, err := compilePattern(src)
	if err != nil {
		return nil, fmt.Errorf("normalizer Replace: %w", err)
	}
	return &replace{re: p, content: j.Content}, nil
}

func (r *replace) normalize(s string) string {
	if r.re == nil {
		return strings.ReplaceAll(s, r.literal, r.content)
	}
	var b strings.Builder
	last := 0
	for _, m := range r.re.matches(s) {
		b.WriteString(s[last:m[0]])
		b.WriteString(r.content)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
