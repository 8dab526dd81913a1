package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// wordPiece is the WordPiece model (BERT's): a word's longest vocabulary
// prefix, then the longest continuation (with the subword prefix) of the
// rest, and so on; a word with a piece no token covers, or longer than
// the bound, is the unk token.
type wordPiece struct {
	vocab    map[string]int32
	unk      int32
	prefix   string
	maxChars int
	// longest is the bytes of the longest token: no longer piece is
	// looked up, which keeps a word's cost linear in it whatever
	// max_input_chars_per_word says.
	longest int
}

func newWordPiece(raw json.RawMessage) (*wordPiece, error) {
	var j struct {
		Type                    string         `json:"type"`
		UnkToken                string         `json:"unk_token"`
		ContinuingSubwordPrefix string         `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    int            `json:"max_input_chars_per_word"`
		Vocab                   map[string]int `json:"vocab"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("model WordPiece: %w", err)
	}
	m := &wordPiece{vocab: make(map[string]int32, len(j.Vocab)), prefix: j.ContinuingSubwordPrefix, maxChars: j.MaxInputCharsPerWord}
	for tok, id := range j.Vocab {
		if id < 0 || id > maxID {
			return nil, fmt.Errorf("model WordPiece: token %q has id %d, outside [0, %d]", tok, id, maxID)
		}
		m.vocab[tok] = int32(id) //nolint:gosec // bounded above
		m.longest = max(m.longest, len(tok))
	}
	unk, ok := m.vocab[j.UnkToken]
	if !ok {
		return nil, fmt.Errorf("model WordPiece: its unk_token %q is not in its vocab", j.UnkToken)
	}
	m.unk = unk
	return m, nil
}

func (m *wordPiece) tokenize(ids []int32, word string) []int32 {
	if word == "" {
		return ids
	}
	if utf8.RuneCountInString(word) > m.maxChars {
		return append(ids, m.unk)
	}
	first := len(ids)
	for start := 0; start < len(word); {
		end := len(word)
		if limit := start + m.longest; limit < end {
			// No token is longer (a continuation's prefix only makes the
			// piece it can match shorter): back to a character boundary.
			for end = limit; end > start && !utf8.RuneStart(word[end]); end-- {
			}
		}
		found := int32(-1)
		for start < end {
			sub := word[start:end]
			if start > 0 {
				sub = m.prefix + sub
			}
			if id, ok := m.vocab[sub]; ok {
				found = id
				break
			}
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if found < 0 {
			return append(ids[:first], m.unk)
		}
		ids = append(ids, found)
		start = end
	}
	return ids
}

func (m *wordPiece) id(token string) (int32, bool) {
	id, ok := m.vocab[token]
	return id, ok
}

func (m *wordPiece) size() int { return len(m.vocab) }
