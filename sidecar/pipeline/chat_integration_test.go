//go:build integration

package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// chatRow is a conversation as transformers' apply_chat_template gives it.
type chatRow struct {
	IDs  []int32 `json:"ids"`
	Mask []uint8 `json:"mask"`
}

// chatStream writes conversations of the tokenizer tests' Unicode texts
// as a JSON Lines stream of {id, messages}, a ChatML template, and a
// GPT-2-like tokenizer.json with ChatML's tokens that tokenizers trains,
// and returns the stream, the tokenizer's path and sha256, the template,
// and each conversation's ids and assistant mask as transformers gives
// them.
func chatStream(t *testing.T) (sampledata.Stream, string, string, string, []chatRow) {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	for _, d := range []string{data, filepath.Join(dir, "tok")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	convs := filepath.Join(data, "part-0.jsonl")
	testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "conversations", convs, "--rows", "300")
	corpus := filepath.Join(dir, "corpus.jsonl")
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "600")
	tok := filepath.Join(dir, "tok", "tokenizer.json")
	testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", "gpt2", corpus, tok, "--special", "<|im_start|>,<|im_end|>")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tplPath := filepath.Join(root, "test", "oracle", "chat_templates", "chatml.jinja")
	template, err := os.ReadFile(tplPath)
	if err != nil {
		t.Fatal(err)
	}
	var want []chatRow
	for line := range bytes.Lines(testenv.PythonScript(t, "venv-tok", "test/oracle/chat_oracle.py", "render", tok, tplPath, convs, "--eos", "<|endoftext|>")) {
		var row chatRow
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatal(err)
		}
		want = append(want, row)
	}
	return sampledata.Stream{Name: "chat", Format: "jsonl", URI: "file://" + data + "/"}, tok, indexJSONL(t, data, tok), string(template), want
}

func chatSpec(tok, sum, template string) string {
	quoted, _ := json.Marshal(template)
	return fmt.Sprintf(`  numSplits: 2
  globalBatchSize: 20
  tokenize:
    tokenizer: {uri: %q, sha256: "%s"}
    column: messages
    endOfDocument: "<|endoftext|>"
    chat:
      template: %s
      eosToken: "<|endoftext|>"
`, "file://"+tok, sum, quoted)
}

// A conversation column is served as transformers' apply_chat_template
// ids and assistant mask (then the end-of-document token, masked out),
// every row once.
func TestIntegrationAChatIsServedWithItsAssistantMask(t *testing.T) {
	stream, tok, sum, template, want := chatStream(t)
	if _, assistant := serveChats(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, chatSpec(tok, sum, template)), "", want); assistant < len(want)/2 {
		t.Fatalf("%d of %d conversations with assistant tokens", assistant, len(want))
	}
}

// serveChats serves manifest's epoch through one feed on cacheDir (a new
// one when empty) and checks every row's input_ids and assistant_masks
// against transformers' (then the end-of-document token, masked out); it
// returns the pipeline's statistics and the rows with assistant tokens.
func serveChats(t *testing.T, manifest, cacheDir string, want []chatRow) (pipeline.Stats, int) {
	t.Helper()
	ctx := context.Background()
	if cacheDir == "" {
		cacheDir = t.TempDir()
	}
	feed := openFeedIn(t, manifest, 0, cacheDir)
	defer feed.Pipeline.Close()
	b := openBatches(ctx, t, feed)
	seen, assistant := map[int64]bool{}, 0
	for range feed.Plan.Steps() {
		batch, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec := batch.Record
		col := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		ids := rec.Column(col("id")).(*array.Int64)
		tokens, masks := rec.Column(col("input_ids")).(*array.List), rec.Column(col("assistant_masks")).(*array.List)
		tv, mv := tokens.ListValues().(*array.Int32).Int32Values(), masks.ListValues().(*array.Uint8).Uint8Values()
		for r := range int(rec.NumRows()) {
			id := ids.Value(r)
			got, mask := tv[tokens.Offsets()[r]:tokens.Offsets()[r+1]], mv[masks.Offsets()[r]:masks.Offsets()[r+1]]
			n := len(want[id].IDs)
			if len(got) != n+1 || !slices.Equal(got[:n], want[id].IDs) || !slices.Equal(mask[:n], want[id].Mask) || mask[n] != 0 {
				t.Fatalf("conversation %d: ids %v mask %v; transformers gives %v and %v, then <|endoftext|> masked out", id, got, mask, want[id].IDs, want[id].Mask)
			}
			if slices.Contains(mask, 1) {
				assistant++
			}
			seen[id] = true
		}
		batch.Release()
	}
	b.Close()
	if len(seen) != len(want) {
		t.Fatalf("%d conversations served of %d", len(seen), len(want))
	}
	return feed.Pipeline.Stats(), assistant
}

// A model's template as it ships, without {% generation %}, with the
// assistant's header and end of turn as markers: the same ids and mask as
// transformers gives with the generation block.
func TestIntegrationAChatMarkedByTheAssistantsHeader(t *testing.T) {
	stream, tok, sum, _, want := chatStream(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(filepath.Join(root, "test", "oracle", "chat_templates", "chatml-plain.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	spec := strings.Replace(chatSpec(tok, sum, string(plain)), `eosToken: "<|endoftext|>"`,
		`eosToken: "<|endoftext|>"`+"\n      assistantStart: \"<|im_start|>assistant\\n\"\n      assistantEnd: \"<|im_end|>\"", 1)
	serveChats(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, spec), "", want)
}

// Conversations packed: index counts each conversation's tokens with the
// chat template, and the packed loss_mask is the assistant mask of each
// piece's tokens.
func TestIntegrationChatsArePackedWithTheirAssistantMask(t *testing.T) {
	ctx := context.Background()
	stream, tok, sum, template, want := chatStream(t)
	spec := strings.Replace(chatSpec(tok, sum, template), "  numSplits: 2\n  globalBatchSize: 20\n", "  numSplits: 1\n  globalBatchSize: 8\n  dropLast: false\n", 1) +
		"  packing: {column: input_ids, sequenceLength: 256}\n"
	tk := indexTokenPacks(t, stream, spec)
	feed := openFeed(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, spec), 0)
	b := openBatches(ctx, t, feed)
	defer b.Close()
	eod, _ := tk.TokenID("<|endoftext|>")
	served, masked := make([]int, len(want)), 0
	eachPiece(t, feed, b, "input_ids", func(doc int64, tokens []int32, mask []uint8) {
		full, fullMask := append(slices.Clone(want[doc].IDs), eod), append(slices.Clone(want[doc].Mask), 0)
		if !runWithMask(full, fullMask, tokens, mask) {
			t.Fatalf("conversation %d: a piece %v with loss mask %v is not a run of its ids %v with their mask %v", doc, tokens, mask, full, fullMask)
		}
		if slices.Contains(mask, 1) {
			masked++
		}
		served[doc] += len(tokens)
	})
	for doc, n := range served {
		if n != len(want[doc].IDs)+1 {
			t.Fatalf("conversation %d: %d tokens served, it has %d and the end token", doc, n, len(want[doc].IDs))
		}
	}
	if masked == 0 {
		t.Fatal("no piece holds an assistant token")
	}
}

// runWithMask says whether piece, with its mask, is a run of full at some
// place, with full's mask there.
func runWithMask(full []int32, fullMask []uint8, piece []int32, mask []uint8) bool {
	for i := 0; i+len(piece) <= len(full); i++ {
		if slices.Equal(full[i:i+len(piece)], piece) && slices.Equal(fullMask[i:i+len(piece)], mask) {
			return true
		}
	}
	return false
}

// A template without a {% generation %} block, one with a construct the
// sidecar does not run, a column that is not a conversation, and a mask
// column the stream has are refused, saying what to do.
func TestIntegrationChatRefusals(t *testing.T) {
	stream, tok, sum, template, _ := chatStream(t)
	for _, c := range []struct{ name, spec, want string }{
		{"no generation block", chatSpec(tok, sum, "{% for m in messages %}{{ m.content }}{% endfor %}"), "has no {% generation %} block"},
		{"a macro", chatSpec(tok, sum, "{% macro f() %}{% endmacro %}{% generation %}{% endgeneration %}"), "{% macro %} is not supported"},
		{"generation and markers", strings.Replace(chatSpec(tok, sum, template), `eosToken: "<|endoftext|>"`, `eosToken: "<|endoftext|>"`+"\n      assistantStart: \"<|im_start|>assistant\"", 1),
			"marks what the assistant says with {% generation %}, and assistantStart marks it too"},
		{"a number column", strings.Replace(chatSpec(tok, sum, template), "column: messages", "column: id", 1), "a chat is a list of {role, content} structs"},
		{"a mask the stream has", strings.Replace(chatSpec(tok, sum, template), `eosToken: "<|endoftext|>"`, `eosToken: "<|endoftext|>"`+"\n      lossMask: id", 1), `tokenize.chat.lossMask "id" is a column the stream has`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := openFeedErr(t, sampledata.Manifest("ds", []sampledata.Stream{stream}, c.spec))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// Each shard's tokens are kept in the pod's cache beside the shards and
// counted in its bytes: a restarted sidecar on the same cache serves the
// same ids and masks without tokenizing a shard again, and a kept file
// whose bytes changed is not used: the shard is tokenized again.
func TestIntegrationTokenizedShardsAreCachedBesideTheShards(t *testing.T) {
	stream, tok, sum, template, want := chatStream(t)
	manifest := sampledata.Manifest("ds", []sampledata.Stream{stream}, chatSpec(tok, sum, template))
	dir := t.TempDir()
	serve := func() pipeline.Stats {
		st, _ := serveChats(t, manifest, dir, want)
		return st
	}
	kept := func() []string {
		files, err := filepath.Glob(filepath.Join(dir, ".derived", "chat", "*"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	first := serve()
	files := kept()
	if len(files) < 2 || first.Cache.DerivedStored != int64(len(files)) || first.Cache.DerivedHits != 0 {
		t.Fatalf("first run: %d files kept, stats %+v", len(files), first.Cache)
	}
	var derivedBytes int64
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		derivedBytes += info.Size()
	}
	if first.Cache.UsedBytes < derivedBytes {
		t.Fatalf("the cache counts %d bytes, its tokenized shards alone are %d", first.Cache.UsedBytes, derivedBytes)
	}
	second := serve()
	if second.Cache.DerivedHits < int64(len(files)) || second.Cache.DerivedStored != 0 {
		t.Fatalf("restarted: %d tokenized shards kept, stats %+v: every shard's tokens should come from the cache", len(files), second.Cache)
	}
	for _, f := range files { // another content than the one kept
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	third := serve()
	if third.Cache.DerivedHits != 0 || third.Cache.DerivedStored != int64(len(files)) {
		t.Fatalf("after the files changed: stats %+v: each shard should be tokenized and kept again", third.Cache)
	}
}
