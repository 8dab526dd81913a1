package tokenizer

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// precompiled is tokenizers' Precompiled normalizer: SentencePiece's
// normalization rules compiled into its charsmap (what transformers'
// converters write for every SentencePiece model: nmt_nfkc for T5, XLM-R,
// ALBERT and most others). The charsmap is a double-array trie over the
// UTF-8 bytes of the strings it rewrites, and the text of their
// replacements, each ended by NUL:
//
//	u32 LE: the trie's size in bytes, n
//	n/4 u32 LE units: the trie (a unit's bits: 0-7 label, 8 has a leaf,
//	                  9 offset shift, 10-30 offset; a leaf's bits 0-30
//	                  are a byte offset into the text)
//	the replacements' text
//
// As tokenizers (and SentencePiece) apply it, the text goes grapheme
// cluster by cluster: a cluster of under 6 bytes is looked up whole, and
// if any of its prefixes is a rule, the shortest one's replacement stands
// for the whole cluster (the rest of it is dropped); otherwise each
// character is looked up alone and kept where no rule has it.
type precompiled struct {
	trie []uint32
	text string
}

// maxCharsmapBytes bounds a charsmap (SentencePiece's nmt_nfkc is about
// 240 KB).
const maxCharsmapBytes = 16 << 20

func newPrecompiled(raw json.RawMessage) (*precompiled, error) {
	var j struct {
		Type                string  `json:"type"`
		PrecompiledCharsmap *string `json:"precompiled_charsmap"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("normalizer Precompiled: %w", err)
	}
	if j.PrecompiledCharsmap == nil {
		return nil, errors.New("normalizer Precompiled: precompiled_charsmap is null (tokenizers cannot load it either); take the normalizer out or give its charsmap")
	}
	if len(*j.PrecompiledCharsmap) > maxCharsmapBytes*4/3+4 {
		return nil, fmt.Errorf("normalizer Precompiled: a charsmap of more than %d bytes", maxCharsmapBytes)
	}
	data, err := base64.StdEncoding.DecodeString(*j.PrecompiledCharsmap)
	if err != nil {
		return nil, fmt.Errorf("normalizer Precompiled: precompiled_charsmap is not base64: %w", err)
	}
	return parseCharsmap(data)
}

func parseCharsmap(data []byte) (*precompiled, error) {
	if len(data) < 4 {
		return nil, errors.New("normalizer Precompiled: the charsmap is shorter than its header")
	}
	size := binary.LittleEndian.Uint32(data)
	if uint64(size) > uint64(len(data)-4) {
		return nil, fmt.Errorf("normalizer Precompiled: the charsmap's trie of %d bytes is longer than the charsmap's %d", size, len(data)-4)
	}
	trie := make([]uint32, size/4)
	for i := range trie {
		trie[i] = binary.LittleEndian.Uint32(data[4+4*i:])
	}
	text := data[4+size/4*4:]
	if !utf8.Valid(text) {
		return nil, errors.New("normalizer Precompiled: the charsmap's replacements are not UTF-8")
	}
	if len(trie) == 0 {
		return nil, errors.New("normalizer Precompiled: the charsmap's trie is empty")
	}
	return &precompiled{trie: trie, text: string(text)}, nil
}

func unitOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func unitLabel(u uint32) uint32  { return u & (1<<31 | 0xFF) }
func unitHasLeaf(u uint32) bool  { return u>>8&1 == 1 }
func unitValue(u uint32) uint32  { return u & (1<<31 - 1) }

// lookup returns the replacement of key's shortest prefix the trie holds
// (a NUL in key ends it). A trie that points outside itself, or a value
// outside the text, is no match (tokenizers would panic there).
func (p *precompiled) lookup(key string) (string, bool) {
	node := unitOffset(p.trie[0])
	for i := range len(key) {
		c := key[i]
		if c == 0 {
			break
		}
		node ^= uint32(c)
		if node >= uint32(len(p.trie)) {
			return "", false
		}
		u := p.trie[node]
		if unitLabel(u) != uint32(c) {
			return "", false
		}
		node ^= unitOffset(u)
		if !unitHasLeaf(u) {
			continue
		}
		if node >= uint32(len(p.trie)) {
			return "", false
		}
		at := unitValue(p.trie[node])
		if at >= uint32(len(p.text)) || !utf8.RuneStart(p.text[at]) {
			return "", false
		}
		end := strings.IndexByte(p.text[at:], 0)
		if end < 0 {
			end = len(p.text) - int(at)
		}
		return p.text[at : int(at)+end], true
	}
	return "", false
}

func (p *precompiled) normalize(s string, lead int) (string, int) {
	out := p.apply(s)
	newLead := prefixLead(p.apply, s, lead)
	if lead > 0 && newLead == 0 && out != "" {
		// tokenizers aligns the first character written with the text's
		// first, even when the rules removed that one.
		_, newLead = utf8.DecodeRuneInString(out)
	}
	return out, newLead
}

func (p *precompiled) apply(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		n := clusterLen(s[i:])
		g := s[i : i+n]
		i += n
		if n < 6 {
			if rep, ok := p.lookup(g); ok {
				b.WriteString(rep)
				continue
			}
		}
		for k := 0; k < len(g); {
			_, size := utf8.DecodeRuneInString(g[k:])
			c := g[k : k+size]
			k += size
			if rep, ok := p.lookup(c); ok {
				c = rep
			}
			b.WriteString(c)
		}
	}
	return b.String()
}

// clusterLen is the length in bytes of the extended grapheme cluster s
// starts with (UAX #29's rules, with the properties tokenizers' segmenter
// has: tables.go).
func clusterLen(s string) int {
	prev, n := utf8.DecodeRuneInString(s)
	var st clusterState
	st.see(prev)
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if !st.joins(prev, r) {
			break
		}
		st.see(r)
		prev = r
		n += size
	}
	return n
}

// clusterState is what the rules that look further back than one
// character need: an emoji then extending characters (GB11), a run of
// regional indicators (GB12, GB13), an Indic consonant then extending
// characters and linkers (GB9c).
type clusterState struct {
	pict      bool // ExtPict Extend*: a ZWJ then an emoji joins
	regional  int  // regional indicators in a row
	consonant bool // InCB Consonant [Extend Linker]*
	linked    bool // … with a Linker among them
}

func (st *clusterState) see(r rune) {
	switch {
	case unicode.Is(pictographic, r):
		st.pict = true
	case r != '\u200D' && !unicode.Is(graphemeExtend, r):
		st.pict = false
	}
	if unicode.Is(regionalIndicator, r) {
		st.regional++
	} else {
		st.regional = 0
	}
	switch {
	case unicode.Is(incbConsonant, r):
		st.consonant, st.linked = true, false
	case unicode.Is(incbLinker, r):
		st.linked = st.consonant
	case !unicode.Is(incbExtend, r):
		st.consonant, st.linked = false, false
	}
}

// joins says whether no cluster break falls between prev and r.
func (st *clusterState) joins(prev, r rune) bool {
	switch {
	case prev == '\r' && r == '\n':
		return true // GB3
	case unicode.Is(graphemeControl, prev) || unicode.Is(graphemeControl, r):
		return false // GB4, GB5
	case unicode.Is(hangulL, prev) && (unicode.Is(hangulL, r) || unicode.Is(hangulV, r) || unicode.Is(hangulLV, r) || unicode.Is(hangulLVT, r)):
		return true // GB6
	case (unicode.Is(hangulLV, prev) || unicode.Is(hangulV, prev)) && (unicode.Is(hangulV, r) || unicode.Is(hangulT, r)):
		return true // GB7
	case (unicode.Is(hangulLVT, prev) || unicode.Is(hangulT, prev)) && unicode.Is(hangulT, r):
		return true // GB8
	case unicode.Is(graphemeExtend, r):
		return true // GB9, GB9a
	case unicode.Is(graphemePrepend, prev):
		return true // GB9b
	case st.linked && unicode.Is(incbConsonant, r):
		return true // GB9c
	case prev == '\u200D' && st.pict && unicode.Is(pictographic, r):
		return true // GB11
	case st.regional%2 == 1 && unicode.Is(regionalIndicator, r):
		return true // GB12, GB13
	}
	return false
}
