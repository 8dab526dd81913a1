// Package tokenizer runs Hugging Face tokenizer.json files: the
// normalizers, pre-tokenizers, models, post-processors and added tokens
// real models use, each checked against the tokenizers library itself
// (oracle_integration_test.go), in Go, in time linear in the text. A
// component it does not run is refused when the file is loaded, named.
// It gives ids only (no offsets): what a training batch needs.
package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxID bounds a token id (ids are int32 in a batch).
const maxID = 1<<31 - 1

// MaxFileBytes bounds a tokenizer.json (the largest real ones, with a
// vocabulary of 256 k tokens and their merges, are about 35 MB).
const MaxFileBytes = 256 << 20

// model turns a pre-token into ids.
type model interface {
	tokenize(ids []int32, word string) []int32
	// id is a token's id in the model's vocabulary.
	id(token string) (int32, bool)
	// size is the vocabulary's size as tokenizers counts it (its
	// entries), where added tokens it lacks are numbered from.
	size() int
}

// Tokenizer is a loaded tokenizer.json. Its methods may be called from
// several goroutines at once.
type Tokenizer struct {
	normalizer normalizer
	pre        preTokenizer
	model      model
	post       postProcessor
	// raw and normalized are the added tokens matched in the text as it
	// is, and in its normalized pieces; added maps each to its id.
	raw, normalized addedTokens
	added           map[string]int32
}

// fileJSON is a tokenizer.json; its decoder turns ids back into text,
// which serving never does, so any is taken.
type fileJSON struct {
	Version       string           `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

// Load reads a tokenizer.json, refusing what it cannot run exactly as
// tokenizers runs it, naming the component.
func Load(data []byte) (*Tokenizer, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("tokenizer.json: %d bytes, above the bound of %d", len(data), MaxFileBytes)
	}
	var j fileJSON
	if err := strictUnmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if !isNull(j.Truncation) {
		return nil, errors.New("tokenizer.json: truncation is set: a document's tokens are served whole (packing cuts them into sequences); set it to null")
	}
	if !isNull(j.Padding) {
		return nil, errors.New("tokenizer.json: padding is set: a document's tokens are served as they are (packing pads sequences); set it to null")
	}
	t := &Tokenizer{added: map[string]int32{}}
	var err error
	if t.normalizer, err = newNormalizer(j.Normalizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if t.pre, err = newPreTokenizer(j.PreTokenizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if firstAfterSplit(t.pre) && reorders(t.normalizer) {
		return nil, errors.New("tokenizer.json: a Metaspace with prepend_scheme first after another pre-tokenizer, behind a normalizer that decomposes, reorders or composes characters (NFC, NFD, NFKC, NFKD, BERT's accent stripping), is not supported: which piece tokenizers takes for the first then turns on its character alignments")
	}
	if t.model, err = newModel(j.Model); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if t.post, err = newPostProcessor(j.PostProcessor); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if err := t.addTokens(j.AddedTokens); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

// firstAfterSplit says whether a Metaspace with prepend_scheme first
// comes after another pre-tokenizer (which may cut the text's first
// characters apart).
func firstAfterSplit(p preTokenizer) bool {
	seq, ok := p.(sequencePre)
	if !ok {
		return false
	}
	for k, c := range seq {
		if m, ok := c.(*metaspace); ok && m.prepend == "first" && k > 0 {
			return true
		}
	}
	return false
}

// reorders says whether a normalizer decomposes, reorders or composes
// characters.
func reorders(n normalizer) bool {
	switch n := n.(type) {
	case form:
		return true
	case *bertNormalizer:
		return n.strip
	case sequenceNorm:
		return slices.ContainsFunc(n, reorders)
	}
	return false
}

// addTokens adds the file's added tokens as tokenizers does when it loads
// one: the file's ids are not used. A token the model has takes the
// model's id, another the next id after the vocabulary (in the file's
// order); an empty one is skipped, and a token named twice keeps its
// first id and its last flags. One whose normalized form is empty never
// matches.
func (t *Tokenizer) addTokens(list []addedTokenJSON) error {
	ids := map[string]int32{}
	byID := map[int32]addedTokenJSON{}
	var order []int32
	next := t.model.size()
	for _, a := range list {
		if a.Content == "" {
			continue
		}
		id, seen := ids[a.Content]
		if !seen {
			if mid, ok := t.model.id(a.Content); ok {
				id = mid
			} else {
				if next > maxID {
					return fmt.Errorf("added token %q: no id left below %d", a.Content, maxID)
				}
				id = int32(next) //nolint:gosec // bounded above
				next++
			}
			ids[a.Content] = id
			t.added[a.Content] = id
		}
		if _, had := byID[id]; !had {
			order = append(order, id)
		}
		byID[id] = a
	}
	normalizedTo := map[string]string{}
	for _, id := range order {
		a := byID[id]
		tok := addedToken{content: a.Content, id: id, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		if !a.Normalized {
			t.raw.add(tok)
			continue
		}
		// Matched in normalized text, as its own normalized form.
		if t.normalizer != nil {
			tok.content, _ = t.normalizer.normalize(tok.content, 0)
		}
		switch other, dup := normalizedTo[tok.content]; {
		case tok.content == "":
			return fmt.Errorf("added token %q normalizes to nothing (tokenizers then splits the text at every character, or hangs); make it normalized=false", a.Content)
		case dup:
			return fmt.Errorf("added tokens %q and %q normalize to the same text (tokenizers picks either, differently from run to run); make one normalized=false", other, a.Content)
		}
		normalizedTo[tok.content] = a.Content
		t.normalized.add(tok)
	}
	return nil
}

func newModel(raw json.RawMessage) (model, error) {
	if isNull(raw) {
		return nil, errors.New("no model")
	}
	kind, err := typeOf(raw)
	if err != nil {
		// tokenizers writes a BPE model without "type" in old files.
		if bytes.Contains(raw, []byte(`"merges"`)) {
			return newBPE(raw)
		}
		return nil, fmt.Errorf("model: %w", err)
	}
	switch kind {
	case "BPE":
		return newBPE(raw)
	case "WordPiece":
		return newWordPiece(raw)
	case "Unigram":
		return newUnigram(raw)
	}
	return nil, fmt.Errorf("model %q is not supported (shardfeed reads BPE, WordPiece and Unigram)", kind)
}

// TokenID returns the id of a token (an added token's content, or a
// token of the model's vocabulary).
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	if id, ok := t.added[token]; ok {
		return id, true
	}
	return t.model.id(token)
}

// Encode returns the ids of text, with the post-processor's special
// tokens (a template's begin and end tokens) where addSpecial says.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int32 {
	text = strings.ToValidUTF8(text, "\uFFFD")
	var ids []int32
	for _, seg := range t.raw.split(text) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
			continue
		}
		s, lead := seg.text, 0
		if seg.at == 0 && s != "" {
			_, lead = utf8.DecodeRuneInString(s)
		}
		if t.normalizer != nil {
			s, lead = t.normalizer.normalize(s, lead)
		}
		for _, sub := range t.normalized.split(s) {
			if sub.id >= 0 {
				ids = append(ids, sub.id)
				continue
			}
			// Metaspace's "first" is a piece where the original text
			// starts: not after a stripped space.
			pieces := []piece{{s: sub.text, lead: max(0, min(lead, sub.at+len(sub.text))-sub.at)}}
			if t.pre != nil {
				pieces = t.pre.preTokenize(pieces)
			}
			for _, p := range pieces {
				ids = t.model.tokenize(ids, p.s)
			}
		}
	}
	if addSpecial && t.post != nil {
		ids = t.post.process(ids)
	}
	return ids
}

// typeOf reads a component's "type".
func typeOf(raw json.RawMessage) (string, error) {
	var j struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return "", err
	}
	if j.Type == nil {
		return "", errors.New(`it has no "type"`)
	}
	return *j.Type, nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// strictUnmarshal decodes raw into v, refusing fields v lacks: a field
// tokenizers added since may change the ids, and is named rather than
// ignored.
func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// onlyType checks that a component without options has nothing but its
// "type".
func onlyType(raw json.RawMessage, what string) error {
	if err := strictUnmarshal(raw, &struct {
		Type string `json:"type"`
	}{}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// components reads a Sequence's components (the list in its field), each
// made by parse; null ones are left out.
func components[T comparable](raw json.RawMessage, what, field string, parse func(json.RawMessage) (T, error)) ([]T, error) {
	var j map[string]json.RawMessage
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("%s Sequence: %w", what, err)
	}
	for k := range j {
		if k != "type" && k != field {
			return nil, fmt.Errorf("%s Sequence: json: unknown field %q", what, k)
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(j[field], &list); err != nil {
		return nil, fmt.Errorf("%s Sequence: %s: %w", what, field, err)
	}
	var out []T
	var none T
	for _, r := range list {
		c, err := parse(r)
		if err != nil {
			return nil, err
		}
		if c != none {
			out = append(out, c)
		}
	}
	return out, nil
}
