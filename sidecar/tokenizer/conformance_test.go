package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The conformance matrix (test/oracle/tokenizer_matrix.py records it with
// the pinned tokenizers; `make golden` re-records it): tokenizer.json
// files of every family (transformers' conversions of locally trained
// sentencepiece models and vocabularies, and pipelines mirroring named
// model families, with added tokens of every flag) and texts of every
// kind, each text's ids as tokenizers gave them. Every text encodes to
// the same ids, with and without the special tokens.

const conformanceDir = "testdata/conformance"

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

type conformanceText struct {
	Class string `json:"class"`
	Text  string `json:"text"`
}

func conformanceTexts(t *testing.T) []conformanceText {
	t.Helper()
	var out []conformanceText
	for line := range bytes.Lines(gunzip(t, filepath.Join(conformanceDir, "texts.jsonl.gz"))) {
		var c conformanceText
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

var charsmapRef = regexp.MustCompile(`"sha256:([0-9a-f]{16})"`)

// conformanceFile reads a recorded tokenizer.json, its charsmap put back.
func conformanceFile(t *testing.T, name string) []byte {
	t.Helper()
	data := gunzip(t, filepath.Join(conformanceDir, name+".json.gz"))
	return charsmapRef.ReplaceAllFunc(data, func(ref []byte) []byte {
		sha := charsmapRef.FindSubmatch(ref)[1]
		return []byte(strconv.Quote(string(gunzip(t, filepath.Join(conformanceDir, "charsmaps", string(sha)+".b64.gz")))))
	})
}

// idsHash is the recorded hash of a text's ids: Python's json.dumps of
// [with special tokens, without].
func idsHash(with, without []int32) string {
	var b strings.Builder
	list := func(ids []int32) {
		b.WriteByte('[')
		for i, id := range ids {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(int(id)))
		}
		b.WriteByte(']')
	}
	b.WriteByte('[')
	list(with)
	b.WriteString(", ")
	list(without)
	b.WriteByte(']')
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])[:8]
}

func TestConformanceMatrix(t *testing.T) {
	texts := conformanceTexts(t)
	files, err := filepath.Glob(filepath.Join(conformanceDir, "*.ids.gz"))
	if err != nil || len(files) < 50 {
		t.Fatalf("the matrix has %d files (%v): re-record it with make golden", len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ids.gz")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tk, err := Load(conformanceFile(t, name))
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(bytes.NewReader(gunzip(t, f)))
			sc.Buffer(nil, 1<<24)
			i, bad := 0, map[string]int{}
			for ; sc.Scan(); i++ {
				if i >= len(texts) {
					t.Fatalf("more recorded lines than the %d texts", len(texts))
				}
				want, full, _ := strings.Cut(sc.Text(), " ")
				with, without := tk.Encode(texts[i].Text, true), tk.Encode(texts[i].Text, false)
				if idsHash(with, without) == want {
					continue
				}
				bad[texts[i].Class]++
				if len(bad) <= 3 && bad[texts[i].Class] == 1 {
					t.Errorf("text %d (%s) %q:\n got %v / %v\nwant %s", i, texts[i].Class, texts[i].Text, with, without, or(full, "(see its hash "+want+")"))
				}
			}
			if i != len(texts) {
				t.Fatalf("%d recorded lines for %d texts", i, len(texts))
			}
			if len(bad) > 0 {
				t.Fatalf("texts that differ from tokenizers' ids, by class: %v", bad)
			}
		})
	}
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// The sampled texts' full ids agree with their hashes (a check of the
// recording itself).
func TestConformanceSamplesMatchTheirHashes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(conformanceDir, "*.ids.gz"))
	for _, f := range files {
		n := 0
		for line := range bytes.Lines(gunzip(t, f)) {
			hash, full, ok := strings.Cut(strings.TrimSpace(string(line)), " ")
			if !ok {
				continue
			}
			var ids [2][]int32
			if err := json.Unmarshal([]byte(full), &ids); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if got := idsHash(ids[0], ids[1]); got != hash {
				t.Fatalf("%s: %s hashes to %s, recorded %s", f, full, got, hash)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("%s holds no sampled ids", f)
		}
	}
}

// The defects an outside matrix found in whole pipelines, each a text of
// the recorded matrix with the file it showed in: each now encodes to
// tokenizers' ids.
func TestTheMatrixHoldsEachDefect(t *testing.T) {
	texts := conformanceTexts(t)
	index := map[string]int{}
	for i, c := range texts {
		if _, seen := index[c.Text]; !seen {
			index[c.Text] = i
		}
	}
	for _, c := range []struct{ defect, file, text string }{
		{"Metaspace's first is where the original text starts (after a Strip)", "metaspace-first", " hello"},
		{"Metaspace's first after a stripped ideographic space", "metaspace-first", "\u3000hello"},
		{"an empty text is no ids (Metaspace, no template)", "metaspace-first", ""},
		{"a text normalized to nothing is no ids", "metaspace-first", "   \n\n  "},
		{"single_word: a mark after the word makes it no single word", "bert-cased", "tokens\u0301"},
		{"single_word: a joiner after the word makes it no single word", "gpt2", "tokens\u200d"},
		{"a widened added token overlaps the next one found", "gpt2", "<special>  x"},
		{"\\A in a Replace matches once (two leading spaces)", "metaspace-first", "  hello"},
		{"Precompiled (nmt_nfkc) with full-width forms and ligatures", "conv-t5", "Ⅻ ① ﬁ ㎏ full-width ＡＢＣ１２３"},
		{"Strip and Replace of DeBERTa-v2's conversion", "conv-deberta-v2", "   two  spaces  "},
	} {
		t.Run(c.defect, func(t *testing.T) {
			i, ok := index[c.text]
			if !ok {
				t.Fatalf("the matrix has no text %q: re-record it", c.text)
			}
			tk, err := Load(conformanceFile(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			var want string
			k := 0
			for line := range bytes.Lines(gunzip(t, filepath.Join(conformanceDir, c.file+".ids.gz"))) {
				if k == i {
					want, _, _ = strings.Cut(strings.TrimSpace(string(line)), " ")
					break
				}
				k++
			}
			with, without := tk.Encode(c.text, true), tk.Encode(c.text, false)
			if got := idsHash(with, without); got != want {
				t.Fatalf("%q: %v / %v, not tokenizers' ids (hash %s, recorded %s)", c.text, with, without, got, want)
			}
		})
	}
}

// One tokenizer serves a sidecar's workers at once: from several
// goroutines it gives each text the ids it gives it alone (the race pass
// runs this; the matrix above runs one goroutine a tokenizer and is
// skipped there).
func TestOneTokenizerEncodesFromManyGoroutines(t *testing.T) {
	texts := conformanceTexts(t)[:300]
	for _, name := range []string{"conv-gpt2", "conv-llama", "bert-uncased", "conv-albert", "bloom"} {
		t.Run(name, func(t *testing.T) {
			tk, err := Load(conformanceFile(t, name))
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(texts))
			for i, x := range texts {
				want[i] = idsHash(tk.Encode(x.Text, true), tk.Encode(x.Text, false))
			}
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for g := range 4 {
				wg.Go(func() {
					for k := range texts {
						i := (k + g*len(texts)/4) % len(texts) // each goroutine from another text
						if got := idsHash(tk.Encode(texts[i].Text, true), tk.Encode(texts[i].Text, false)); got != want[i] {
							errs <- fmt.Sprintf("text %d %q: ids %s from goroutine %d, %s alone", i, texts[i].Text, got, g, want[i])
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}
