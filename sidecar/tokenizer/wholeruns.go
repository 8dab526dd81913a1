package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// wholeRuns normalizes s to f by UAX #15's algorithm itself: each
// character decomposed, every run of combining marks put in canonical
// order however long, then (for NFC and NFKC) composed. Go's norm cuts
// runs of more than 30 marks with U+034F; tokenizers does not, and this
// slower path, taken only for such runs, gives its result.
func wholeRuns(f norm.Form, s string) string {
	decompose, compose := norm.NFD, false
	switch f {
	case norm.NFKD:
		decompose = norm.NFKD
	case norm.NFC:
		compose = true
	case norm.NFKC:
		decompose, compose = norm.NFKD, true
	}
	var runes []rune
	for _, r := range s {
		runes = append(runes, []rune(decompose.String(string(r)))...)
	}
	// Canonical order: each run of non-starters sorted, stably, by class.
	for i := 0; i < len(runes); {
		if ccc(runes[i]) == 0 {
			i++
			continue
		}
		j := i
		for j < len(runes) && ccc(runes[j]) != 0 {
			j++
		}
		slices.SortStableFunc(runes[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
		i = j
	}
	if !compose {
		return string(runes)
	}
	out := make([]rune, 0, len(runes))
	starter := -1    // index in out of the last starter
	between := false // a character stands between it and the next
	last := uint8(0) // that character's class
	for _, c := range runes {
		cc := ccc(c)
		if starter >= 0 && (!between || cc != 0 && last < cc) {
			if p, ok := primary(out[starter], c); ok {
				out[starter] = p
				continue
			}
		}
		out = append(out, c)
		if cc == 0 {
			starter, between = len(out)-1, false
			continue
		}
		between, last = true, cc
	}
	return string(out)
}

func ccc(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }

// primary is the primary composite of a and b, if there is one.
func primary(a, b rune) (rune, bool) {
	var pair strings.Builder
	pair.WriteRune(a)
	pair.WriteRune(b)
	c := norm.NFC.String(pair.String())
	r, size := utf8.DecodeRuneInString(c)
	return r, size == len(c) && c != pair.String()
}
