package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// gpt2Pattern is the split of GPT-2's byte-level pre-tokenizer.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteChars maps each byte to the printable character GPT-2's byte-level
// alphabet gives it: the printable Latin-1 bytes are themselves, the
// others 256 onwards in order.
var byteChars = func() [256]string {
	var out [256]string
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			out[b] = string(rune(b))
		} else {
			out[b] = string(rune(256 + n))
			n++
		}
	}
	return out
}()

// toByteLevel is s's bytes in the byte-level alphabet.
func toByteLevel(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := range len(s) {
		b.WriteString(byteChars[s[i]])
	}
	return b.String()
}

// byteLevel is the ByteLevel pre-tokenizer: a space prepended where
// asked, GPT-2's split where asked, then each piece's bytes in the
// byte-level alphabet.
type byteLevel struct {
	addPrefixSpace bool
	split          *pattern
}

var gpt2Split = func() *pattern {
	p, err := compilePattern(gpt2Pattern)
	if err != nil {
		panic(err)
	}
	return p
}()

func newByteLevel(raw json.RawMessage) (*byteLevel, error) {
	var j struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		TrimOffsets    bool   `json:"trim_offsets"`
		UseRegex       *bool  `json:"use_regex"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("pre-tokenizer ByteLevel: %w", err)
	}
	b := &byteLevel{addPrefixSpace: j.AddPrefixSpace}
	if j.UseRegex == nil || *j.UseRegex {
		b.split = gpt2Split
	}
	return b, nil
}

func (b *byteLevel) preTokenize(pieces []piece) []piece {
	out := make([]piece, 0, len(pieces))
	for _, p := range pieces {
		if b.addPrefixSpace && p.s != "" && !strings.HasPrefix(p.s, " ") {
			p.s = " " + p.s
		}
		if b.split == nil {
			out = append(out, piece{s: toByteLevel(p.s), lead: prefixLead(toByteLevel, p.s, p.lead)})
			continue
		}
		k := len(out)
		out = splitBy(out, p, b.split.matches(p.s), isolated, false)
		for i := k; i < len(out); i++ {
			out[i].s, out[i].lead = toByteLevel(out[i].s), prefixLead(toByteLevel, out[i].s, out[i].lead)
		}
	}
	return out
}
