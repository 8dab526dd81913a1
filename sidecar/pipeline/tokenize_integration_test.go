//go:build integration

package pipeline_test

import (
	"bytes"
	"compress/gzip"
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
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/sidefile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/format/formattest"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
	"github.com/shardfeed/shardfeed/sidecar/source"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// textStream writes the tokenizer tests' Unicode corpus as a JSON Lines
// stream of {id, text} and a GPT-2-like tokenizer.json that tokenizers
// trains on it, and returns the stream, the tokenizer's path and sha256,
// and each text's ids as tokenizers gives them (with an end-of-document
// token appended).
func textStream(t *testing.T) (sampledata.Stream, string, string, [][]int32) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(data, "part-0.jsonl") // {id, text} rows: the stream
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "600", "--ids")
	tok := filepath.Join(dir, "tok", "tokenizer.json")
	if err := os.MkdirAll(filepath.Dir(tok), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", "gpt2", corpus, tok)
	var want [][]int32
	for line := range bytes.Lines(testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "encode", tok, corpus)) {
		var ids []int32
		if err := json.Unmarshal(line, &ids); err != nil {
			t.Fatal(err)
		}
		want = append(want, ids)
	}
	return sampledata.Stream{Name: "text", Format: "jsonl", URI: "file://" + data + "/"}, tok, indexJSONL(t, data, tok), want
}

// indexJSONL indexes the JSON Lines stream in data, in shards of 16 KiB,
// and returns the sha256 of the tokenizer.json tok.
func indexJSONL(t *testing.T, data, tok string) string {
	t.Helper()
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
	return hex.EncodeToString(sum[:])
}

func tokenizeSpec(tok, sum string) string {
	return fmt.Sprintf("  numSplits: 2\n  globalBatchSize: 20\n  tokenize:\n    tokenizer: {uri: %q, sha256: \"%s\"}\n    column: text\n    endOfDocument: \"<|endoftext|>\"\n",
		"file://"+tok, sum)
}

// A text column is served tokenized: each row's input_ids are what
// tokenizers gives its text, then the end-of-document token; every row
// once.
func TestIntegrationATextColumnIsServedTokenized(t *testing.T) {
	ctx := context.Background()
	stream, tok, sum, want := textStream(t)
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, tokenizeSpec(tok, sum)), 0)
	b := openBatches(ctx, t, feed)
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
			_, err := openFeedErr(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, c.spec))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Raw text packed: the tokens' counts are measured at index time by the
// sidecar's own tokenizer (format.Registry.TokenLengths, as shardfeed
// index -f does for a tokenized stream), the packs counted from them, and
// the sidecar tokenizes and packs each shard: every document's tokens
// (tokenizers' ids and the end token) are served once, each piece of a
// pack a run of its document's ids.
func TestIntegrationRawTextIsPackedAfterTokenization(t *testing.T) {
	ctx := context.Background()
	stream, tok, sum, want := textStream(t)
	// One split and every batch served (dropLast: false): every pack is
	// in the epoch.
	spec := strings.Replace(tokenizeSpec(tok, sum), "  numSplits: 2\n  globalBatchSize: 20\n", "  numSplits: 1\n  globalBatchSize: 8\n  dropLast: false\n", 1) +
		"  packing: {column: input_ids, sequenceLength: 64, method: concatenate}\n"
	tk := indexTokenPacks(t, stream, spec)
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, spec), 0)
	b := openBatches(ctx, t, feed)
	defer b.Close()
	eod, ok := tk.TokenID("<|endoftext|>")
	if !ok {
		t.Fatal("the tokenizer has no <|endoftext|>")
	}
	served := make([]int, len(want)) // tokens served of each document
	eachPiece(t, feed, b, "input_ids", func(doc int64, tokens []int32, _ []uint8) {
		full := append(slices.Clone(want[doc]), eod)
		if !containsRun(full, tokens) {
			t.Fatalf("document %d: a piece %v is not a run of its ids and end token %v", doc, tokens, full)
		}
		served[doc] += len(tokens)
	})
	for doc, n := range served {
		if n != len(want[doc])+1 {
			t.Fatalf("document %d: %d tokens served, it has %d and the end token", doc, n, len(want[doc]))
		}
	}
}

// indexTokenPacks counts the tokens of stream's column as the manifest of
// spec tokenizes them (format.Registry.TokenLengths, as shardfeed index
// -f does) and writes the packs its packing makes of them beside the
// stream's index; it returns the tokenizer.
func indexTokenPacks(t *testing.T, stream sampledata.Stream, spec string) *tokenizer.Tokenizer {
	t.Helper()
	ctx := context.Background()
	data := formattest.OpenDir(t, strings.TrimSuffix(strings.TrimPrefix(stream.URI, "file://"), "/"))
	layout, _, err := index.ReadStoreIndexOf(ctx, data, 0, datav1alpha1.FormatJSONL)
	if err != nil {
		t.Fatal(err)
	}
	var ds datav1alpha1.TrainingDataset
	if err := yaml.UnmarshalStrict([]byte(sampledata.Manifest("ds", []sampledata.Stream{stream}, spec)), &ds); err != nil {
		t.Fatal(err)
	}
	tz := ds.Spec.Tokenize
	tk, err := source.LoadTokenizer(ctx, ds.Spec.Streams[0], streams.Source(ds.Spec.Streams[0]), tz)
	if err != nil {
		t.Fatal(err)
	}
	count, err := source.TokenCount(tk, tz)
	if err != nil {
		t.Fatal(err)
	}
	x, values, err := formats.Default().TokenLengths(ctx, data, layout, tz.Column, planspec.TokenizeOutput(tz), planspec.TokenizeKey(tz), count, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := planspec.Packing(ds.Spec.Packing)
	px, err := sidefile.Packs(x, values, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := sidefile.WritePacks(ctx, data, px, p); err != nil {
		t.Fatal(err)
	}
	return tk
}

// eachPiece reads an epoch of packed batches from b and calls each with
// every piece of a row that is not padding (through the Go client's
// ReadPacked): its document, tokens and loss mask. A row's padding must
// be out of the loss.
func eachPiece(t *testing.T, feed *daemon.Feed, b *pipeline.Batches, column string, each func(doc int64, tokens []int32, mask []uint8)) {
	t.Helper()
	ctx := context.Background()
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		p, err := shardfeed.ReadPacked(rec, column)
		if err != nil {
			t.Fatal(err)
		}
		tokens := p.Tokens.(*array.Int32).Int32Values()
		pad := rec.Column(rec.Schema().FieldIndices(pipeline.ColumnPad)[0]).(*array.Boolean)
		for r := range p.Rows {
			if pad.Value(r) {
				continue // the last batch's filler
			}
			bounds, docs := p.Row(r)
			for k, doc := range docs {
				from, to := r*p.SeqLen+int(bounds[k]), r*p.SeqLen+int(bounds[k+1])
				each(doc, tokens[from:to], p.LossMask[from:to])
			}
			if slices.Contains(p.LossMask[r*p.SeqLen+int(bounds[len(bounds)-1]):(r+1)*p.SeqLen], 1) {
				t.Fatalf("row %d: its padding is in the loss mask", r)
			}
		}
		batch.Release()
	}
}

// containsRun says whether piece is a run of consecutive values of full.
func containsRun(full, piece []int32) bool {
	for i := 0; i+len(piece) <= len(full); i++ {
		if slices.Equal(full[i:i+len(piece)], piece) {
			return true
		}
	}
	return false
}

// A tokenizer from a ConfigMap, gzipped (binaryData, for a file over a
// ConfigMap's 1 MiB), read where the sidecar's ConfigMaps are mounted:
// the same ids; a key that is not gzip, or without the directory, is
// refused saying so.
func TestIntegrationATokenizerFromAConfigMap(t *testing.T) {
	ctx := context.Background()
	stream, tok, sum, want := textStream(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "llama"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(tok)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tokenizer.json.gz": gz.Bytes(), "plain.gz": raw} {
		if err := os.WriteFile(filepath.Join(dir, "llama", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := func(key string) datav1alpha1.TrainingDataset {
		var ds datav1alpha1.TrainingDataset
		m := sampledata.Manifest("ds", []sampledata.Stream{stream}, fmt.Sprintf("  numSplits: 2\n  globalBatchSize: 20\n  tokenize:\n    tokenizer: {configMapRef: {name: llama, key: %s}, sha256: \"%s\"}\n    column: text\n", key, sum))
		if err := yaml.UnmarshalStrict([]byte(m), &ds); err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := spec("tokenizer.json.gz")
	feed, err := daemon.Open(ctx, daemon.Config{Dataset: ds.Name, Spec: ds.Spec, CacheDir: t.TempDir(), Prefetch: -1, ConfigMapsDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Pipeline.Close()
	b := openBatches(ctx, t, feed)
	defer b.Close()
	batch, err := b.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec := batch.Record
	ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
	tokens := rec.Column(rec.Schema().FieldIndices("input_ids")[0]).(*array.List)
	values := tokens.ListValues().(*array.Int32).Int32Values()
	for r := range int(rec.NumRows()) {
		if got := values[tokens.Offsets()[r]:tokens.Offsets()[r+1]]; !slices.Equal(got, want[ids.Value(r)]) {
			t.Fatalf("row %d: %v, tokenizers gives %v", ids.Value(r), got, want[ids.Value(r)])
		}
	}
	batch.Release()
	for _, c := range []struct {
		name, key, dir, want string
	}{
		{"not gzip", "plain.gz", dir, "not gzip"},
		{"no directory", "tokenizer.json.gz", "", "no directory of ConfigMaps here: give --configmaps-dir DIR"},
		{"no such key", "other.json", dir, "tokenize.tokenizer.configMapRef llama/other.json"},
	} {
		ds := spec(c.key)
		_, err := daemon.Open(ctx, daemon.Config{Dataset: ds.Name, Spec: ds.Spec, CacheDir: t.TempDir(), Prefetch: -1, ConfigMapsDir: c.dir})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
