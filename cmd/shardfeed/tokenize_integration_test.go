//go:build integration

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "300", "--ids")
	tok, sum := trainedTokenizer(t, dir, corpus)
	manifest := func(hash string, packing ...string) string {
		pack := "  packing: {column: input_ids, sequenceLength: 128, method: bestFit}\n"
		if len(packing) > 0 {
			pack = packing[0]
		}
		path := filepath.Join(dir, hash[:8]+fmt.Sprint(len(packing))+".yaml")
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
%s  numSplits: 2
  globalBatchSize: 4
`, data, tok, hash, pack), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := manifest(sum)
	if out, err := runCLI(t, "index", "file://"+data+"/", "--format", "jsonl"); err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	// plan --summary of an unpacked tokenized stream before index -f
	// says that its tokens are not counted yet.
	plain := manifest(sum, "")
	if out, err := runCLI(t, "plan", "-f", plain, "--summary"); err != nil || !strings.Contains(out, "web: not counted yet: shardfeed index -f") {
		t.Fatalf("plan of an uncounted tokenized stream: %v\n%s", err, out)
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
	// Unpacked, the tokens are counted too, and plan --summary reports
	// them.
	if out, err := runCLI(t, "index", "-f", plain); err != nil || !strings.Contains(out, "lengths of input_ids") {
		t.Fatalf("index -f of a tokenized stream: %v\n%s", err, out)
	}
	out, err = runCLI(t, "plan", "-f", plain, "--summary")
	if err != nil || !regexp.MustCompile(`web: \d+ tokens in 300 documents \(`).MatchString(out) {
		t.Fatalf("plan of a counted tokenized stream: %v\n%s", err, out)
	}
}

// trainedTokenizer trains a llama3-like tokenizer on corpus with the
// tokenizers library, under dir/tok/: its path and its SHA-256 in hex.
func trainedTokenizer(t *testing.T, dir, corpus string) (path, sum string) {
	t.Helper()
	path = filepath.Join(dir, "tok", "tokenizer.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", "llama3", corpus, path)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(file)
	return path, hex.EncodeToString(h[:])
}

// index -f of a chat stream renders every conversation as the sidecar
// will: one the template refuses (its raise_exception) fails the index
// before any job starts, naming the row and the template's words.
func TestIntegrationIndexRefusesAConversationTheTemplateRefuses(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	convs := filepath.Join(data, "part-0.jsonl")
	testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "conversations", convs, "--rows", "30")
	corpus := filepath.Join(dir, "corpus.jsonl")
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "300")
	tok := filepath.Join(dir, "tokenizer.json")
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", "llama2", corpus, tok)
	file, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(root, "test", "oracle", "chat_templates", "mistral.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(string(template))
	manifest := filepath.Join(dir, "chat.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: chat}
spec:
  streams:
  - name: chats
    format: jsonl
    source: {uri: "file://%s/"}
  tokenize:
    tokenizer: {uri: "file://%s", sha256: "%s"}
    column: messages
    chat: {template: %s, bosToken: "<s>", eosToken: "</s>"}
  numSplits: 1
  globalBatchSize: 2
`, data, tok, hex.EncodeToString(sum[:]), quoted), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "index", "-f", manifest)
	// The first conversation out of the order the template asks is row 2
	// (chat_oracle.py: every 5th from 2 has tool turns, which break the
	// user/assistant alternation; every 23rd from 5 two user turns).
	if err == nil || !regexp.MustCompile(`row 2, column "messages": the chat template refused the conversation: Conversation roles must alternate`).MatchString(out+err.Error()) {
		t.Fatalf("index -f of a chat with a conversation the template refuses: %v\n%s", err, out)
	}
}
