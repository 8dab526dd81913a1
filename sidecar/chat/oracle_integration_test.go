//go:build integration

package chat_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/chat"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// oracle is one conversation as transformers gives it.
type oracle struct {
	Text  string  `json:"text"`
	IDs   []int32 `json:"ids"`
	Mask  []uint8 `json:"mask"`
	Error string  `json:"error"`
}

// Every conversation of the tests' Unicode corpus, rendered with each
// template and tokenized by a tokenizer that tokenizers trains, gives
// transformers' apply_chat_template text, ids and assistant mask exactly;
// a conversation the template refuses (raise_exception) is refused with
// its message.
func TestTemplatesEqualTransformers(t *testing.T) {
	dir := t.TempDir()
	corpus, convs := filepath.Join(dir, "corpus.jsonl"), filepath.Join(dir, "conversations.jsonl")
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "1000")
	testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "conversations", convs, "--rows", "300")
	var messages [][]any
	for line := range bytes.Lines(must(os.ReadFile(convs))) {
		v, err := chat.FromJSON(line)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := v.(*chat.Dict).Values["messages"].([]any)
		messages = append(messages, m)
	}
	root := must(testenv.RepoRoot())
	for _, c := range []struct {
		name, kind, template, special, bos, eos string
		// stops: the tokenizer's normalizer drops characters (t5's
		// collapses runs of spaces), and transformers stops marking at
		// a span whose first character has no token, leaving that turn
		// and every later one unmasked; shardfeed marks them.
		stops bool
		// plain, when set, is the template rendered here: template
		// without its generation blocks, the assistant's text marked by
		// start and end.
		plain, start, end string
	}{
		{"chatml", "gpt2", "chatml.jinja", "<|im_start|>,<|im_end|>", "<s>", "<|endoftext|>", false, "", "", ""},
		{"llama3", "llama3", "llama3.jinja", "<|start_header_id|>,<|end_header_id|>,<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>", false, "", "", ""},
		{"mistral", "llama2", "mistral.jinja", "", "<s>", "</s>", false, "", "", ""},
		{"tools", "gpt2", "tools.jinja", "<|system|>,<|user|>,<|assistant|>", "<s>", "<|endoftext|>", false, "", "", ""},
		{"gemma", "gpt2", "gemma.jinja", "<bos>,<eos>,<start_of_turn>,<end_of_turn>", "<bos>", "<eos>", false, "", "", ""},
		{"qwen2.5 tool calls", "gpt2", "qwen-tools.jinja", "<|im_start|>,<|im_end|>,<tool_call>,</tool_call>,<tool_response>,</tool_response>", "<s>", "<|im_end|>", false, "", "", ""},
		{"t5 chatml", "t5", "chatml.jinja", "<|im_start|>,<|im_end|>", "<s>", "</s>", true, "", "", ""},
		{"chatml marked", "gpt2", "chatml.jinja", "<|im_start|>,<|im_end|>", "<s>", "<|endoftext|>", false, "chatml-plain.jinja", "<|im_start|>assistant\n", "<|im_end|>"},
		{"llama3 marked", "llama3", "llama3.jinja", "<|start_header_id|>,<|end_header_id|>,<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>", false,
			"llama3-plain.jinja", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := filepath.Join(t.TempDir(), "tokenizer.json")
			testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", c.kind, corpus, tok, "--special", c.special)
			tplPath := filepath.Join(root, "test", "oracle", "chat_templates", c.template)
			out := testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "render", tok, tplPath, convs, "--bos", c.bos, "--eos", c.eos)
			tk, err := tokenizer.Load(must(os.ReadFile(tok)))
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := chat.Parse(string(must(os.ReadFile(tplPath))))
			if err != nil {
				t.Fatal(err)
			}
			if c.plain != "" {
				// The template without its generation blocks, as a
				// model ships it, marked by its assistant's header
				// and end of turn instead.
				if tpl, err = chat.Parse(string(must(os.ReadFile(filepath.Join(root, "test", "oracle", "chat_templates", c.plain))))); err != nil {
					t.Fatal(err)
				}
				if tpl.MarksAssistant() {
					t.Fatalf("%s has a generation block", c.plain)
				}
			}
			vars := map[string]any{"bos_token": c.bos, "eos_token": c.eos}
			row, refused, masked, stopped := 0, 0, 0, 0
			for line := range bytes.Lines(out) {
				var want oracle
				if err := json.Unmarshal(line, &want); err != nil {
					t.Fatal(err)
				}
				text, spans, err := tpl.Render(messages[row], vars)
				if c.plain != "" && err == nil {
					spans = chat.MarkerSpans(text, c.start, c.end)
				}
				var te *chat.TemplateError
				switch {
				case want.Error != "":
					if !errors.As(err, &te) || te.Message != want.Error {
						t.Fatalf("conversation %d: transformers refuses it (%s), shardfeed says %v", row, want.Error, err)
					}
					refused++
				case err != nil:
					t.Fatalf("conversation %d: %v", row, err)
				case text != want.Text:
					t.Fatalf("conversation %d: rendered\n%q\ntransformers renders\n%q", row, text, want.Text)
				default:
					ids, mask, err := chat.Tokenize(tk, text, spans)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ids, want.IDs) {
						t.Fatalf("conversation %d: ids\n%v\ntransformers\n%v", row, ids, want.IDs)
					}
					if c.stops && !slices.Equal(mask, want.Mask) && stoppedEarly(mask, want.Mask) {
						stopped++
					} else if !slices.Equal(mask, want.Mask) {
						t.Fatalf("conversation %d: mask\n%v\ntransformers\n%v\nids %v", row, mask, want.Mask, ids)
					}
					if slices.Contains(mask, 1) {
						masked++
					}
				}
				row++
			}
			if row != len(messages) || masked < len(messages)/2 {
				t.Fatalf("%d conversations checked of %d, %d with assistant tokens", row, len(messages), masked)
			}
			t.Logf("%d conversations equal transformers', %d refused by the template as by transformers, %d whose mask transformers stops early", row, refused, stopped)
		})
	}
}

// stoppedEarly says whether want is mask up to a token where transformers
// stopped marking: equal before it, nothing marked from it on.
func stoppedEarly(mask, want []uint8) bool {
	i := 0
	for i < len(mask) && i < len(want) && mask[i] == want[i] {
		i++
	}
	return len(mask) == len(want) && mask[i] == 1 && !slices.Contains(want[i:], 1)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
