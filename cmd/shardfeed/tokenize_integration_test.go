//go:build integration

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// index -f of a tokenized, packed stream counts its text's tokens with the
// stream's tokenizer (read as the sidecar reads it, its hash checked) and
// writes the packs; plan reads them; a tokenizer of another content is
// refused.
func TestIntegrationIndexCountsTheTokensOfATokenizedStream(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(data, "part-0.jsonl") // {id, text} rows: the stream
	testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "300", "--ids")
	tok := filepath.Join(dir, "tok", "tokenizer.json")
	if err := os.MkdirAll(filepath.Dir(tok), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", "train", "llama3", corpus, tok)
	file, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	manifest := func(hash string) string {
		path := filepath.Join(dir, hash[:8]+".yaml")
		if err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: raw}
spec:
  streams:
  - name: web
    format: jsonl
    source: {uri: "file://%s/"}
  tokenize:
    tokenizer: {uri: "file://%s", sha256: "%s"}
    column: text
    endOfDocument: "<|end_of_text|>"
  packing: {column: input_ids, sequenceLength: 128, method: bestFit}
  numSplits: 2
  globalBatchSize: 4
`, data, tok, hash), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := manifest(hex.EncodeToString(sum[:]))
	if out, err := runCLI(t, "index", "file://"+data+"/", "--format", "jsonl"); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	out, err := runCLI(t, "index", "-f", good)
	if err != nil || !strings.Contains(out, "lengths of input_ids") || !strings.Contains(out, "300 documents") || !strings.Contains(out, "packs of 128 tokens") {
		t.Fatalf("index -f of a tokenized, packed stream: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "plan", "-f", good, "--summary"); err != nil || !strings.Contains(out, "web") {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	if out, err := runCLI(t, "index", "-f", manifest(strings.Repeat("0", 64))); err == nil || !strings.Contains(out+err.Error(), "the file changed") {
		t.Fatalf("index -f with another tokenizer's hash: %v\n%s", err, out)
	}
}
