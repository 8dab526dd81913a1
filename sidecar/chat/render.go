package chat

import (
	"fmt"
	"slices"
	"strings"
)

// Render renders a conversation (messages, a list of *Dict with role and
// content) with vars (bos_token, eos_token, add_generation_prompt, …) as
// the template's globals, and returns the text and the byte ranges of it
// that {% generation %} blocks wrote.
func (t *Template) Render(messages []any, vars map[string]any) (string, [][2]int, error) {
	globals := map[string]any{"messages": messages, "add_generation_prompt": false}
	for k, v := range vars {
		globals[k] = v
	}
	e := &env{scopes: []map[string]any{globals}}
	if err := execAll(e, t.body); err != nil {
		return "", nil, err
	}
	return e.out.String(), e.spans, nil
}

// MarksAssistant says whether the template marks what the assistant says
// with {% generation %}, which the loss mask needs.
func (t *Template) MarksAssistant() bool { return t.hasGeneration }

// MarkerSpans are the spans of text that a role's markers bound, for a
// template without {% generation %}: from the end of each start (the
// assistant's header, e.g. "<|im_start|>assistant\n") through the end
// that follows it (its end-of-turn, e.g. "<|im_end|>"), or to the text's
// end when none follows, as TRL's completion-only collator marks the
// response after its template.
func MarkerSpans(text, start, end string) [][2]int {
	var spans [][2]int
	for at := 0; start != "" && at < len(text); {
		i := strings.Index(text[at:], start)
		if i < 0 {
			break
		}
		from := at + i + len(start)
		to := len(text)
		if j := strings.Index(text[from:], end); end != "" && j >= 0 {
			to = from + j + len(end)
		}
		if to > from {
			spans = append(spans, [2]int{from, to})
		}
		at = to
	}
	return spans
}

// Encoder tokenizes text (sidecar/tokenizer's Tokenizer).
type Encoder interface {
	Encode(text string, addSpecial bool) []int32
}

// Tokenize encodes a rendered conversation as transformers'
// apply_chat_template(tokenize=True, return_assistant_tokens_mask=True)
// does: the ids of the whole text with no special tokens added (the
// template writes its own), and a mask of 1 from the token holding a
// span's first byte to the token holding its last. When each span's
// edges fall between tokens (the common case: a role's header ends with
// a special token or a newline), the ids of the text cut at the edges
// are the whole text's, and the mask is read from the pieces; otherwise
// each edge's token is found from the ids of the text before it.
func Tokenize(enc Encoder, text string, spans [][2]int) ([]int32, []uint8, error) {
	ids := enc.Encode(text, false)
	mask := make([]uint8, len(ids))
	if len(spans) == 0 {
		return ids, mask, nil
	}
	var edges []int
	for _, s := range spans {
		if s[0] < 0 || s[1] > len(text) || s[0] >= s[1] {
			return nil, nil, fmt.Errorf("a generation span %v outside the text's %d bytes", s, len(text))
		}
		edges = append(edges, s[0], s[1])
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	// The pieces between edges, each encoded alone.
	var pieces []int32
	tokenAt := map[int]int{0: 0} // an edge's byte → the index of its first token
	prev := 0
	for _, b := range append(edges, len(text)) {
		if b > prev {
			pieces = append(pieces, enc.Encode(text[prev:b], false)...)
		}
		tokenAt[b] = len(pieces)
		prev = b
	}
	aligned := slices.Equal(pieces, ids)
	for _, s := range spans {
		var first, last int // tokens holding the span's first and last byte
		if aligned {
			first, last = tokenAt[s[0]], tokenAt[s[1]]-1
		} else {
			first = holding(enc, text, ids, s[0], false)
			last = holding(enc, text, ids, s[1], true)
		}
		for i := first; i <= last && i < len(mask); i++ {
			mask[i] = 1
		}
	}
	return ids, mask, nil
}

// holding finds, from the ids of text[:b], the token of ids that holds
// byte b (or, with before, byte b-1).
func holding(enc Encoder, text string, ids []int32, b int, before bool) int {
	prefix := enc.Encode(text[:b], false)
	c := 0
	for c < len(prefix) && c < len(ids) && prefix[c] == ids[c] {
		c++
	}
	if c == len(prefix) && before {
		return c - 1 // the prefix's tokens end at b: b-1 is in its last
	}
	return c // the first token that differs holds b (and b-1)
}
