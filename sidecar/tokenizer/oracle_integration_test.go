//go:build integration

package tokenizer_test

// Tokenizers trained by the tokenizers library itself (bin/venv-oracle,
// test/oracle/tokenizers_oracle.py) on a corpus that exercises Unicode:
// every text's ids from this package equal tokenizers' own, with and
// without the special tokens.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", args...)
}

// corpus writes the oracle's corpus and returns its path and texts.
func corpus(t *testing.T, dir string) (string, []string) {
	t.Helper()
	path := filepath.Join(dir, "corpus.jsonl")
	oracle(t, "corpus", path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		texts = append(texts, row.Text)
	}
	return path, texts
}

func idsOf(t *testing.T, out []byte) [][]int32 {
	t.Helper()
	var rows [][]int32
	for line := range bytes.Lines(out) {
		var ids []int32
		if err := json.Unmarshal(line, &ids); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		rows = append(rows, ids)
	}
	return rows
}

func TestTokenizerEqualsTokenizers(t *testing.T) {
	dir := t.TempDir()
	path, texts := corpus(t, dir)
	for _, kind := range []string{"gpt2", "llama3", "prefix", "llama2", "bert", "wordpiece", "t5", "unigram"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), kind+".json")
			oracle(t, "train", kind, path, file)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := tokenizer.Load(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, special := range []bool{true, false} {
				args := []string{"encode", file, path}
				if !special {
					args = append(args, "--no-special")
				}
				want := idsOf(t, oracle(t, args...))
				if len(want) != len(texts) {
					t.Fatalf("tokenizers encoded %d texts of %d", len(want), len(texts))
				}
				bad := 0
				for i, text := range texts {
					if got := tk.Encode(text, special); !slices.Equal(got, want[i]) {
						if bad++; bad <= 3 {
							t.Errorf("special %v, text %d %q:\n got %v\nwant %v", special, i, text, got, want[i])
						}
					}
				}
				if bad > 0 {
					t.Fatalf("special %v: %d of %d texts differ from tokenizers' ids", special, bad, len(texts))
				}
			}
		})
	}
}
