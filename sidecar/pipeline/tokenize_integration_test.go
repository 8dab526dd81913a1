//go:build integration

package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// textStream writes the tokenizer tests' Unicode corpus as a JSON Lines
// stream of {id, text} and a GPT-2-like tokenizer.json that tokenizers
// trains on it, and returns the stream, the tokenizer's path and sha256,
// and each text's ids as tokenizers gives them (with an end-of-document
// token appended).
func textStream(t *testing.T) (sampledata.Stream, string, string, [][]int32) {
	t.Helper()
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.jsonl")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "600")
	tok := filepath.Join(dir, "tok", "tokenizer.json")
	if err := os.MkdirAll(filepath.Dir(tok), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", "train", "gpt2", corpus, tok)
	var want [][]int32
	for line := range bytes.Lines(testenv.PythonScript(t, "venv-oracle", "test/oracle/tokenizers_oracle.py", "encode", tok, corpus)) {
		var ids []int32
		if err := json.Unmarshal(line, &ids); err != nil {
			t.Fatal(err)
		}
		want = append(want, ids)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	var rows bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		var row struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]any{"id": i, "text": row.Text})
		rows.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(data, "part-0.jsonl"), rows.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	st := formattest.OpenDir(t, data)
	f, err := formats.Default().Index(context.Background(), st, datav1alpha1.FormatJSONL, format.IndexOptions{ShardBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(context.Background(), st, f); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(file)
	return sampledata.Stream{Name: "text", Format: "jsonl", URI: "file://" + data + "/"}, tok, hex.EncodeToString(sum[:]), want
}

func tokenizeSpec(tok, sum string) string {
	return fmt.Sprintf("  numSplits: 2\n  globalBatchSize: 20\n  tokenize:\n    tokenizer: {uri: %q, sha256: %s}\n    column: text\n    endOfDocument: \"<|endoftext|>\"\n",
		"file://"+tok, sum)
}

// A text column is served tokenized: each row's input_ids are what
// tokenizers gives its text, then the end-of-document token; every row
// once.
func TestIntegrationATextColumnIsServedTokenized(t *testing.T) {
	ctx := context.Background()
	stream, tok, sum, want := textStream(t)
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, tokenizeSpec(tok, sum)), 0)
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 0, World: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	seen := map[int64]bool{}
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		tokens := rec.Column(rec.Schema().FieldIndices("input_ids")[0]).(*array.List)
		values := tokens.ListValues().(*array.Int32).Int32Values()
		offsets := tokens.Offsets()
		for r := range int(rec.NumRows()) {
			id := ids.Value(r)
			got := values[offsets[r]:offsets[r+1]]
			if n := len(got); n == 0 || !slices.Equal(got[:n-1], want[id]) {
				t.Fatalf("row %d: input_ids %v, tokenizers gives %v then <|endoftext|>", id, got, want[id])
			}
			seen[id] = true
		}
		batch.Release()
	}
	if len(seen) != len(want) {
		t.Fatalf("%d rows served of %d", len(seen), len(want))
	}
}

// A tokenizer of another content than the spec pins, a column the stream
// lacks, and an end-of-document token the tokenizer lacks are refused,
// saying what to do.
func TestIntegrationTokenizationRefusals(t *testing.T) {
	stream, tok, sum, _ := textStream(t)
	for _, c := range []struct{ name, spec, want string }{
		{"another file", tokenizeSpec(tok, strings.Repeat("0", 64)), "the file changed; a new tokenizer is a new plan"},
		{"no such column", strings.Replace(tokenizeSpec(tok, sum), "column: text", "column: body", 1), `tokenize.column "body" is not one of its columns`},
		{"no such token", strings.Replace(tokenizeSpec(tok, sum), "<|endoftext|>", "<eos>", 1), `tokenize.endOfDocument "<eos>" is not a token`},
		{"a number column", strings.Replace(tokenizeSpec(tok, sum), "column: text", "column: id", 1), "text is tokenized from a string column"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := openFeedErr(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, c.spec), 0)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
