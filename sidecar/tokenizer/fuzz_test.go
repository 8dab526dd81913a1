package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzTokenizer is a byte-level BPE tokenizer.json made here: the byte
// alphabet, a few merges, an added token and a template (the oracle tests
// check tokenizers that tokenizers itself trains).
func fuzzTokenizer(tb testing.TB, pre string) *Tokenizer {
	vocab := map[string]int{}
	for b := range 256 {
		vocab[byteChars[b]] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"a", "a"}, {"aa", "aa"}, {"Ġ", "Ġ"}}
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
	}
	vocab["<|end|>"] = len(vocab)
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens": []map[string]any{{"id": vocab["<|end|>"], "content": "<|end|>", "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true}},
		"normalizer":    map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFKC"}, map[string]any{"type": "Lowercase"}}},
		"pre_tokenizer": json.RawMessage(pre),
		"post_processor": map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"SpecialToken": map[string]any{"id": "<|end|>", "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}}, "pair": []any{}, "special_tokens": map[string]any{"<|end|>": map[string]any{
			"id": "<|end|>", "ids": []int{vocab["<|end|>"]}, "tokens": []string{"<|end|>"}}}},
		"decoder": nil,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges},
	}
	return loadJSON(tb, doc)
}

func loadJSON(tb testing.TB, doc map[string]any) *Tokenizer {
	data, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := Load(data)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// FuzzEncode: any text encodes, never a panic, to ids of the vocabulary,
// in time linear in the text (a generous bound a byte: a quadratic split
// or merge of a long run shows as seconds).
func FuzzEncode(f *testing.F) {
	gpt2 := fuzzTokenizer(f, `{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}`)
	llama := fuzzTokenizer(f, fmt.Sprintf(`{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": %q}, "behavior": "Isolated", "invert": false},
		{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}, {"type": "Digits", "individual_digits": false}]}`,
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`))
	wp := loadJSON(f, map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "decoder": nil,
		"normalizer":     map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"pre_tokenizer":  map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 2}, "cls": []any{"[CLS]", 1}},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
			"vocab": map[string]int{"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "the": 3, "##e": 4, "t": 5, "##h": 6, "a": 7, "##a": 8}}})
	uni := loadJSON(f, map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "decoder": nil, "post_processor": nil,
		"normalizer":    map[string]any{"type": "NFKC"},
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
		"model": map[string]any{"type": "Unigram", "unk_id": 0, "byte_fallback": false,
			"vocab": []any{[]any{"<unk>", 0.0}, []any{"▁", -1.5}, []any{"a", -2.0}, []any{"aa", -3.5}, []any{"▁the", -2.25}, []any{"t", -3.0}, []any{"h", -3.0}, []any{"e", -3.0}}}})
	for _, s := range []string{"the theatre  the", "aaaaaaaaaaaaaaaaaaaaaaaa", "   \n\n  x <|end|>y", "東京 😀 e\u0301 \xff\xfe", "İΣ ΟΣ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for k, tk := range []*Tokenizer{gpt2, llama, wp, uni} {
			start := time.Now()
			ids := tk.Encode(text, true)
			if d := time.Since(start); d > time.Second+time.Duration(len(text))*50*time.Microsecond {
				t.Fatalf("%d bytes took %v", len(text), d)
			}
			if len(ids) == 0 && k < 3 { // the Unigram one has no template: an empty text is no ids
				t.Fatal("no ids, not even the template's")
			}
			for _, id := range ids {
				if id < 0 || int(id) > 256+6 {
					t.Fatalf("id %d outside the vocabulary", id)
				}
			}
		}
	})
}

// A Unigram model whose pieces are a, aa, …, a run of 256 (the bound):
// encoding a run of a's stays linear in the text (the pieces that start
// at a place are found a byte at a time, never by hashing each prefix).
func TestUnigramIsLinearInTheText(t *testing.T) {
	vocab := []any{[]any{"<unk>", 0.0}}
	for n := 1; n <= maxUnigramPiece; n++ {
		vocab = append(vocab, []any{strings.Repeat("a", n), -float64(n)})
	}
	tk := loadJSON(t, map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "decoder": nil,
		"post_processor": nil, "normalizer": nil, "pre_tokenizer": nil, "model": map[string]any{"type": "Unigram", "unk_id": 0, "byte_fallback": false, "vocab": vocab}})
	cost := func(n int) time.Duration {
		text := strings.Repeat("a", n)
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			tk.Encode(text, false)
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(4<<10), cost(64<<10)
	t.Logf("4 KiB: %v, 64 KiB: %v", small, large)
	// 16 times the text: about 16 times the work; a quadratic encoder
	// takes 256 times.
	if large > 64*small+50*time.Millisecond {
		t.Fatalf("4 KiB took %v, 64 KiB %v: not linear", small, large)
	}
	bad := append(slices.Clone(vocab), []any{strings.Repeat("b", maxUnigramPiece+1), -1.0})
	data, _ := json.Marshal(map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "decoder": nil,
		"post_processor": nil, "normalizer": nil, "pre_tokenizer": nil, "model": map[string]any{"type": "Unigram", "unk_id": 0, "byte_fallback": false, "vocab": bad}})
	if _, err := Load(data); err == nil || !strings.Contains(err.Error(), "above the bound of 256") {
		t.Fatalf("a piece above the bound: %v", err)
	}
}

// FuzzPrecompiled: any charsmap either loads or is refused, and a loaded
// one normalizes any text without a panic (a trie that points outside
// itself is no match), in time linear in the text.
func FuzzPrecompiled(f *testing.F) {
	f.Add([]byte{8, 0, 0, 0, 0x00, 0x04, 0, 0, 0x61, 0x01, 0, 0, 'X', 0}, "a\u0301 ab")
	f.Add([]byte{4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0}, "ＡＢ")
	f.Add([]byte{0xff, 0, 0, 0}, "x")
	f.Fuzz(func(t *testing.T, charsmap []byte, text string) {
		p, err := parseCharsmap(charsmap)
		if err != nil {
			return
		}
		start := time.Now()
		out, _ := p.normalize(text, 1)
		if d := time.Since(start); d > time.Second+time.Duration(len(text))*50*time.Microsecond {
			t.Fatalf("%d bytes took %v", len(text), d)
		}
		// Each byte of the text becomes at most one replacement.
		if len(out) > len(text)*(len(p.text)+4) {
			t.Fatalf("%d bytes of text made %d", len(text), len(out))
		}
	})
}

// FuzzPattern: any regex either compiles or is refused, naming why, and
// a compiled one finds matches inside the text, in order, without a
// panic.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{gpt2Pattern, `(?i:'s|'t)|\p{L}+|\s+(?!\S)|\s+`, ` ?[^(\s|[.,!?…])]+`, `\A▁`, `^ |$`, `x*`, `[\S\p{^L}]`, `\uFFFD`, `\p{Han}+`} {
		f.Add(s, "Hello, world! 東京 ▁x\n y  ")
	}
	f.Fuzz(func(t *testing.T, src, text string) {
		p, err := compilePattern(src)
		if err != nil {
			return
		}
		last := 0
		for _, m := range p.matches(text) {
			if m[0] < last || m[1] < m[0] || m[1] > len(text) {
				t.Fatalf("%q in %q: match %v after %d", src, text, m, last)
			}
			last = m[1]
		}
	})
}

// A WordPiece model that allows words of a billion characters: a word of
// 64 KiB costs about 16 times one of 4 KiB (no piece longer than the
// longest token is looked up).
func TestWordPieceIsLinearInTheWord(t *testing.T) {
	tk := loadJSON(t, map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []any{}, "decoder": nil,
		"post_processor": nil, "normalizer": nil, "pre_tokenizer": map[string]any{"type": "WhitespaceSplit"},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 1 << 30,
			"vocab": map[string]int{"[UNK]": 0, "a": 1, "##a": 2, "##aa": 3}}})
	cost := func(n int) time.Duration {
		text := strings.Repeat("a", n)
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			if ids := tk.Encode(text, false); len(ids) != 1+(n-1+1)/2 {
				t.Fatalf("%d a's: %d ids", n, len(ids))
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	small, large := cost(4<<10), cost(64<<10)
	t.Logf("4 KiB: %v, 64 KiB: %v", small, large)
	if large > 64*small+50*time.Millisecond {
		t.Fatalf("4 KiB took %v, 64 KiB %v: not linear", small, large)
	}
}

// A pattern whose alternative before the last scans a run to its end and
// then fails ([^\n]*\n|\S+ on a text without a newline) makes finding its
// matches quadratic: refused, while the families' own patterns, whose
// next alternative takes such a run, load.
func TestAPatternThatScansFarIsRefused(t *testing.T) {
	for _, c := range []struct {
		src string
		ok  bool
	}{
		{`[^\n]*\n|\S+`, false},
		{`.*x|\S`, false},
		{`a+b|a`, false},
		{`(?:x|[^\n]*\n)|\S+`, false},
		{`\s*[\r\n]+|\s+(?!\S)|\s+`, true},
		{`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, true},
		{`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\s+`, true},
		{`[^\n]*\n`, true}, // alone it is the last alternative: one search, linear
		{gpt2Pattern, true},
	} {
		_, err := compilePattern(c.src)
		if ok := err == nil; ok != c.ok {
			t.Errorf("%q: loaded %v (%v), want %v", c.src, ok, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "quadratic") {
			t.Errorf("%q: %v does not say why", c.src, err)
		}
	}
}
