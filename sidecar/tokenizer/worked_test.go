package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/shardfeed/shardfeed/internal/planspec"
)

// Worked examples of each component, one per defect an outside matrix
// found: the text given, and what tokenizers 0.23.3's own component made
// of it (its normalize_str and pre_tokenize_str, recorded when these
// were written).

// nmtNFKC is SentencePiece's nmt_nfkc charsmap, as the conformance
// matrix holds it.
func nmtNFKC(t *testing.T) string {
	t.Helper()
	f, err := os.Open("testdata/conformance/charsmaps/22342cc048ea558a.b64.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestNormalizersAsTokenizers(t *testing.T) {
	for _, c := range []struct{ name, json, text, want string }{
		{"BERT strips non-spacing marks only", `{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}`, "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e, \u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e Caf\u00e9", "\u0928\u092e\u0938\u0924 \u0926\u0928\u093f\u092f\u093e, \u0939\u093f\u0928\u0926\u0940 \u092d\u093e\u0937\u093e cafe"},
		{"BERT keeps characters newer than its tables", `{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":false,"strip_accents":false,"lowercase":false}`, "a\U0001fae9b\u0378c\u0000\ufffd\u200bd\u0009e", "a\U0001fae9b\u0378cd e"},
		{"NFC keeps a run of 31 marks whole", `{"type":"NFC"}`, "a\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301\u0316\u0301b", "\u00e1\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301b"},
		{"NFKD keeps a run of 40 marks whole", `{"type":"NFKD"}`, "\ufb01\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0\u0301\u0316\u0334\u05b0", "fi\u0334\u0334\u0334\u0334\u0334\u0334\u0334\u0334\u0334\u0334\u05b0\u05b0\u05b0\u05b0\u05b0\u05b0\u05b0\u05b0\u05b0\u05b0\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0316\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301\u0301"},
		{"NFC leaves alone what Unicode 9.0 lacked", `{"type":"NFC"}`, "a\u1acf\u0301 \U00011935\U00011930", "a\u1acf\u0301 \U00011935\U00011930"},
		{"Lowercase as Rust's to_lowercase", `{"type":"Lowercase"}`, "\u0130STANBUL \u03a3\u0391\u03a3 \ua7cb\u1c89", "i\u0307stanbul \u03c3\u03b1\u03c3 \u0264\u1c8a"},
		{"StripAccents as its combining marks", `{"type":"StripAccents"}`, "e\u0301\u0903\u20dd\u1ab0\u1acf", "e\u1acf"},
		{"Replace of \\A matches once", `{"type":"Replace","pattern":{"Regex":"\\A▁"},"content":"▁▁"}`, "\u2581\u2581hello\u2581world", "\u2581\u2581\u2581hello\u2581world"},
		{"Replace's ^ matches at lines", `{"type":"Replace","pattern":{"Regex":"^ "},"content":"_"}`, " a\u000a b\u000d\u000a c", "_a\u000a_b\u000d\u000a_c"},
		{"Strip both ends", `{"type":"Strip","strip_left":true,"strip_right":true}`, "\u3000\u0009 a b \u2028", "a b"},
		{"Nmt", `{"type":"Nmt"}`, "a\u0001b\u0009c\u200bd\ufeffe\u2581f\u007f", "ab c d e f"},
		{"Precompiled nmt_nfkc", `{"type":"Precompiled","precompiled_charsmap":"@"}`, "\uff21\u0301\ufb01 \uff21\uff22\uff23 e\u0301 \u00a0x\u3000y \u2460 \U0001f469\u200d\U0001f469\u200d\U0001f467 \u000d\u000a \u338f \u0000z \u00c5", "Afi ABC \u00e9  x y 1 \U0001f469\u200d\U0001f469\u200d\U0001f467   kg \u0000z \u00c5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := strings.Replace(c.json, `"@"`, `"`+nmtNFKC(t)+`"`, 1)
			n, err := newNormalizer(json.RawMessage(raw))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := n.normalize(c.text, 1); got != c.want {
				t.Fatalf("%+q\n got %+q\nwant %+q", c.text, got, c.want)
			}
		})
	}
}

func TestPreTokenizersAsTokenizers(t *testing.T) {
	for _, c := range []struct {
		name, json, text string
		want             []string
	}{
		{"DeepSeek-V3's split keeps a newer emoji with its space", `{"type":"Split","pattern":{"Regex":"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false}`, " \U0001fae9 a\u0301 \U0001fac6x", []string{" \U0001fae9", " a\u0301", " \U0001fac6", "x"}},
		{"BLOOM's nested class", `{"type":"Split","pattern":{"Regex":" ?[^(\\s|[.,!?…。，、।۔،])]+"},"behavior":"Isolated","invert":false}`, "Hello, world\u0964 (x|y) \u4f60\u597d\u3002ok", []string{"Hello", ",", " world", "\u0964 (", "x", "|", "y", ")", " \u4f60\u597d", "\u3002", "ok"}},
		{"Punctuation merged with previous, a character at a time", `{"type":"Punctuation","behavior":"MergedWithPrevious"}`, "a!!b?", []string{"a!", "!", "b?"}},
		{"Split contiguous on empty matches", `{"type":"Split","pattern":{"Regex":"x*"},"behavior":"Contiguous","invert":false}`, "axxbx", []string{"a", "xx", "b", "x"}},
		{"Whitespace as the regex crate's classes", `{"type":"Whitespace"}`, "a\u0301b \U0001fae9 x_y\u200dz \u0663", []string{"a\u0301b", "\U0001fae9", "x_y\u200dz", "\u0663"}},
		{"Digits as Rust's is_numeric", `{"type":"Digits","individual_digits":false}`, "a\u0661\u0662b\u00bdc\U0001fbf1d", []string{"a", "\u0661\u0662", "b", "\u00bd", "c", "\U0001fbf1", "d"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := newPreTokenizer(json.RawMessage(c.json))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, pc := range p.preTokenize([]piece{{s: c.text, lead: 1}}) {
				got = append(got, pc.s)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("%+q\n got %+q\nwant %+q", c.text, got, c.want)
			}
		})
	}
}

// A tokenization's key names the tokenizers whose ids these are, the one
// the tables and the matrix were recorded with.
func TestTheKeyNamesTheReference(t *testing.T) {
	if planspec.TokenizerReference != "tokenizers "+tablesTokenizers {
		t.Fatalf("planspec.TokenizerReference is %q, the tables were made with tokenizers %s", planspec.TokenizerReference, tablesTokenizers)
	}
}

// The tables were made for this Go: the normalization and lowercase
// exceptions are relative to its Unicode tables (make golden remakes
// them when Go's change).
func TestTablesWereMadeForThisGo(t *testing.T) {
	if unicode.Version != tablesGoUnicode || norm.Version != tablesGoNorm {
		t.Fatalf("tables.go was made with Go's Unicode %s and norm %s, this Go has %s and %s: run make golden",
			tablesGoUnicode, tablesGoNorm, unicode.Version, norm.Version)
	}
}
