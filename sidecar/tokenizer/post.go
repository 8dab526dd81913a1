package tokenizer

import (
	"encoding/json"
	"fmt"
)

// postProcessor adds a model's special tokens around a text's ids.
type postProcessor interface {
	process(ids []int32) []int32
}

// around puts before and after a sequence's ids.
type around struct{ before, after []int32 }

func (a around) process(ids []int32) []int32 {
	out := make([]int32, 0, len(a.before)+len(ids)+len(a.after))
	out = append(out, a.before...)
	out = append(out, ids...)
	return append(out, a.after...)
}

type sequencePost []postProcessor

func (s sequencePost) process(ids []int32) []int32 {
	for _, p := range s {
		ids = p.process(ids)
	}
	return ids
}

// keep is a post-processor that changes no id (ByteLevel's trims offsets).
type keep struct{}

func (keep) process(ids []int32) []int32 { return ids }

func newPostProcessor(raw json.RawMessage) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	kind, err := typeOf(raw)
	if err != nil {
		return nil, fmt.Errorf("post-processor: %w", err)
	}
	switch kind {
	case "ByteLevel":
		var j struct {
			Type           string `json:"type"`
			AddPrefixSpace bool   `json:"add_prefix_space"`
			TrimOffsets    bool   `json:"trim_offsets"`
			UseRegex       bool   `json:"use_regex"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("post-processor ByteLevel: %w", err)
		}
		return keep{}, nil
	case "TemplateProcessing":
		return newTemplate(raw)
	case "BertProcessing", "RobertaProcessing":
		var j struct {
			Type           string `json:"type"`
			Sep            [2]any `json:"sep"`
			Cls            [2]any `json:"cls"`
			TrimOffsets    *bool  `json:"trim_offsets"`
			AddPrefixSpace *bool  `json:"add_prefix_space"`
		}
		if err := strictUnmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("post-processor %s: %w", kind, err)
		}
		sep, okS := j.Sep[1].(float64)
		cls, okC := j.Cls[1].(float64)
		if !okS || !okC || sep < 0 || cls < 0 || sep > maxID || cls > maxID {
			return nil, fmt.Errorf("post-processor %s: sep and cls are [token, id] pairs", kind)
		}
		return around{before: []int32{int32(cls)}, after: []int32{int32(sep)}}, nil
	case "Sequence":
		seq, err := components(raw, "post-processor", "processors", newPostProcessor)
		return sequencePost(seq), err
	}
	return nil, fmt.Errorf("post-processor %q is not supported (shardfeed reads TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and Sequence)", kind)
}

// newTemplate reads a TemplateProcessing's single-sequence template: its
// special tokens before and after the sequence $A.
func newTemplate(raw json.RawMessage) (postProcessor, error) {
	var j struct {
		Type          string            `json:"type"`
		Single        []json.RawMessage `json:"single"`
		Pair          []json.RawMessage `json:"pair"`
		SpecialTokens map[string]struct {
			ID     string   `json:"id"`
			IDs    []int64  `json:"ids"`
			Tokens []string `json:"tokens"`
		} `json:"special_tokens"`
	}
	if err := strictUnmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("post-processor TemplateProcessing: %w", err)
	}
	var a around
	seen := false
	for _, piece := range j.Single {
		var p struct {
			SpecialToken *struct {
				ID     string `json:"id"`
				TypeID int    `json:"type_id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID     string `json:"id"`
				TypeID int    `json:"type_id"`
			} `json:"Sequence"`
		}
		if err := strictUnmarshal(piece, &p); err != nil {
			return nil, fmt.Errorf("post-processor TemplateProcessing: %w", err)
		}
		switch {
		case p.Sequence != nil:
			if seen || p.Sequence.ID != "A" {
				return nil, fmt.Errorf("post-processor TemplateProcessing: the single template holds the sequence $%s twice, or not $A", p.Sequence.ID)
			}
			seen = true
		case p.SpecialToken != nil:
			st, ok := j.SpecialTokens[p.SpecialToken.ID]
			if !ok {
				return nil, fmt.Errorf("post-processor TemplateProcessing: the template names %q, which its special_tokens lack", p.SpecialToken.ID)
			}
			for _, id := range st.IDs {
				if id < 0 || id > maxID {
					return nil, fmt.Errorf("post-processor TemplateProcessing: %q has id %d", p.SpecialToken.ID, id)
				}
				if seen {
					a.after = append(a.after, int32(id))
				} else {
					a.before = append(a.before, int32(id))
				}
			}
		default:
			return nil, fmt.Errorf("post-processor TemplateProcessing: a template piece is a SpecialToken or a Sequence")
		}
	}
	if !seen {
		return nil, fmt.Errorf("post-processor TemplateProcessing: the single template has no $A")
	}
	return a, nil
}
