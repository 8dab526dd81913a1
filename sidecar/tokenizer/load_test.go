package tokenizer

import (
	"strings"
	"testing"
)

// What Load cannot run exactly as tokenizers runs it is refused, naming
// the component or field.
func TestLoadRefusesWhatItDoesNotRun(t *testing.T) {
	model := `{"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}`
	file := func(fields string) string {
		return `{"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null, "model": ` + model + fields + `}`
	}
	for _, c := range []struct{ name, json, want string }{
		{"truncation", strings.Replace(file(""), `"version"`, `"truncation": {"max_length": 512}, "version"`, 1), "truncation is set"},
		{"padding", strings.Replace(file(""), `"version"`, `"padding": {"length": 512}, "version"`, 1), "padding is set"},
		{"a field tokenizers added", strings.Replace(file(""), `"version"`, `"future": 1, "version"`, 1), `unknown field "future"`},
		{"an unknown normalizer", strings.Replace(file(""), `"normalizer": null`, `"normalizer": {"type": "ByteLevel"}`, 1), `normalizer "ByteLevel" is not supported`},
		{"a charsmap of nothing", strings.Replace(file(""), `"normalizer": null`, `"normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}`, 1), "the charsmap is shorter than its header"},
		{"a null charsmap", strings.Replace(file(""), `"normalizer": null`, `"normalizer": {"type": "Precompiled", "precompiled_charsmap": null}`, 1), "precompiled_charsmap is null"},
		{"a charsmap that is not base64", strings.Replace(file(""), `"normalizer": null`, `"normalizer": {"type": "Precompiled", "precompiled_charsmap": "!!"}`, 1), "not base64"},
		{"a trie longer than its charsmap", strings.Replace(file(""), `"normalizer": null`, `"normalizer": {"type": "Precompiled", "precompiled_charsmap": "/wAAAA=="}`, 1), "longer than the charsmap"},
		{"a word boundary", strings.Replace(file(""), `"pre_tokenizer": null`, `"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\bx"}, "behavior": "Isolated", "invert": false}`, 1), `\b (a word boundary) is not supported`},
		{"a script tokenizers' tables lack", strings.Replace(file(""), `"pre_tokenizer": null`, `"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\p{Runic}"}, "behavior": "Isolated", "invert": false}`, 1), `\p{Runic} is not supported`},
		{"a negated class in a class", strings.Replace(file(""), `"pre_tokenizer": null`, `"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[a[^b]]"}, "behavior": "Isolated", "invert": false}`, 1), "a negated class inside a class"},
		{"an unknown pre-tokenizer", strings.Replace(file(""), `"pre_tokenizer": null`, `"pre_tokenizer": {"type": "UnicodeScripts"}`, 1), `pre-tokenizer "UnicodeScripts" is not supported`},
		{"an unknown model", strings.Replace(file(""), model, `{"type": "WordLevel", "vocab": {}, "unk_token": "x"}`, 1), `model "WordLevel" is not supported`},
		{"dropout", strings.Replace(file(""), `"dropout": null`, `"dropout": 0.1`, 1), "dropout makes tokenization random"},
		{"a merge of unknown tokens", strings.Replace(file(""), `["a b"]`, `["a c"]`, 1), `merge 0 ("a" "c") names a token its vocab lacks`},
		{"a lookahead", strings.Replace(file(""), `"pre_tokenizer": null`, `"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a(?=b)"}, "behavior": "Isolated", "invert": false}`, 1), "(?= (a lookahead) is not supported"},
		{"a template without $A", strings.Replace(file(""), `"post_processor": null`, `"post_processor": {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}`, 1), "has no $A"},
		{"a Unigram without unk", strings.Replace(file(""), model, `{"type": "Unigram", "vocab": [["a", -1.0]], "byte_fallback": false}`, 1), "without an unk_id"},
		{"not JSON", "{", "tokenizer.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Load([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
	if _, err := Load([]byte(file(""))); err != nil {
		t.Fatalf("a plain BPE file: %v", err)
	}
}
