//go:build integration

package sidecar_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// tokenBatch is a received batch of packed token ids: its step, pack ids,
// pads, each pack's documents and the tokens of each of its pieces.
type tokenBatch struct {
	step   int64
	ids    []int64
	pads   []bool
	docs   [][]int64
	pieces [][]int
}

// TestIntegrationATokenizedPackedDatasetThroughAKillAndARescale: two
// streams of raw text (JSON Lines of the tokenizer tests' Unicode corpus,
// each of other texts) are tokenized by real sidecars with a tokenizer.json
// that tokenizers trains, read from the streams' bucket, and packed into
// sequences of 48 tokens (best fit, long documents cut), through a kill
// and a 4 → 2 pod rescale: the committed lineage is `plan --ids`'s, packs
// and documents; every piece of a pack is a run of its document's ids as
// tokenizers gives them (then the end-of-document token); and over the
// epoch each document's tokens are served exactly once.
func TestIntegrationATokenizedPackedDatasetThroughAKillAndARescale(t *testing.T) {
	bucket, dir := minioServer.Bucket(t), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tok"), 0o755); err != nil {
		t.Fatal(err)
	}
	var refs [][]int32 // each document's ids, stream a's then b's
	for i, s := range []string{"a", "b"} {
		data := filepath.Join(dir, s)
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		corpus := filepath.Join(data, "part-0.jsonl")
		testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "corpus", corpus, "--rows", "300", "--ids", "--seed", fmt.Sprint(11+i))
		if i == 0 {
			testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "train", "gpt2", corpus, filepath.Join(dir, "tok", "tokenizer.json"))
		}
		for line := range bytes.Lines(testenv.PythonScript(t, "venv-tok", "test/oracle/tokenizers_oracle.py", "encode", filepath.Join(dir, "tok", "tokenizer.json"), corpus)) {
			var ids []int32
			if err := json.Unmarshal(line, &ids); err != nil {
				t.Fatal(err)
			}
			refs = append(refs, ids)
		}
		upload(t, bucket, s, data)
	}
	upload(t, bucket, "tok", filepath.Join(dir, "tok"))
	file, err := os.ReadFile(filepath.Join(dir, "tok", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	eod, ok := tk.TokenID("<|endoftext|>")
	if !ok {
		t.Fatal("the trained tokenizer has no <|endoftext|>")
	}
	for i := range refs {
		refs[i] = append(refs[i], eod)
	}
	sum := sha256.Sum256(file)
	spec := fmt.Sprintf(`  numSplits: 4
  globalBatchSize: 8
  dropLast: false
  shuffle: {seed: 5, blockSize: 16}
  tokenize:
    tokenizer: {uri: "s3://%s/tok/tokenizer.json", sha256: "%s"}
    column: text
    endOfDocument: "<|endoftext|>"
  packing: {column: input_ids, sequenceLength: 48, window: 32}
`, bucket, hex.EncodeToString(sum[:]))
	streams := []sampledata.Stream{{Name: "a", Format: "jsonl", URI: "s3://" + bucket + "/a/", Endpoint: minioServer.URL()},
		{Name: "b", Format: "jsonl", URI: "s3://" + bucket + "/b/", Endpoint: minioServer.URL()}}
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("raw", streams, spec)), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(t)}
	for _, s := range []string{"a", "b"} {
		// Shards of about 4 KiB: several a stream, so that pods share them.
		cmd := exec.Command(binary, "index", "-f", manifest, "--stream", s, "--credentials-dir", ds.credentials, "--shard-size", "4096")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("index %s: %v\n%s", s, err, out)
		}
	}

	read := func(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, each func(tokenBatch) bool) ([]tokenBatch, error) {
		return readStream(ctx, c, req, func(rec arrow.RecordBatch) (tokenBatch, error) {
			return checkTokenBatch(rec, refs)
		}, each)
	}
	r := trainThroughARescale(t, ds, "raw", read, func(b tokenBatch) int64 { return b.step })
	served := make([]int, len(refs)) // each document's tokens served in the epoch
	whole := make([]bool, len(refs)) // served in one piece
	packs := map[int64]bool{}
	for k := range r.steps {
		world, plan := r.planAt(k)
		for rank := range world {
			got, want := r.lineage[[2]int64{k, int64(rank)}], plan[[2]int64{k, int64(rank)}]
			if fmt.Sprint(got.ids) != fmt.Sprint(want.IDs) || fmt.Sprint(got.docs) != fmt.Sprint(want.Docs) {
				t.Fatalf("step %d rank %d of %d: the lineage trained packs %v of documents %v, plan --ids says %v of %v", k, rank, world, got.ids, got.docs, want.IDs, want.Docs)
			}
			for row, docs := range got.docs {
				if got.pads[row] {
					continue
				}
				if packs[got.ids[row]] {
					t.Fatalf("step %d rank %d: pack %d served twice in the epoch", k, rank, got.ids[row])
				}
				packs[got.ids[row]] = true
				for i, d := range docs {
					whole[d] = served[d] == 0 && got.pieces[row][i] == len(refs[d])
					served[d] += got.pieces[row][i]
				}
			}
		}
	}
	// Every pack of the epoch once (those the plan drops to even its
	// splits aside), a document's tokens at most once, and a document
	// served whole in one piece exactly its ids.
	ps := planSummary(t, ds, 4)
	if int64(len(packs)) != ps.samples-ps.dropped {
		t.Fatalf("%d packs served in the epoch, the plan has %d and drops %d", len(packs), ps.samples, ps.dropped)
	}
	cut := 0
	for d, n := range served {
		if n > len(refs[d]) {
			t.Fatalf("document %d: %d tokens served, it has %d", d, n, len(refs[d]))
		}
		if n > 0 && !whole[d] {
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("no document was cut across packs: the test checks no cut")
	}
}

// checkTokenBatch reads a packed batch of token ids and checks that each
// piece of each row is a run of its document's ids in refs, its positions
// restarting and its loss mask 1, and the padding masked.
func checkTokenBatch(rec arrow.RecordBatch, refs [][]int32) (tokenBatch, error) {
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	b := tokenBatch{step: col(pipeline.ColumnStep).(*array.Int64).Value(0),
		ids: slices.Clone(col(pipeline.ColumnIndex).(*array.Int64).Int64Values())}
	p, err := shardfeed.ReadPacked(rec, "input_ids")
	if err != nil {
		return b, err
	}
	tokens, positions, mask := p.Tokens.(*array.Int32).Int32Values(), p.PositionIDs, p.LossMask
	pads := col(pipeline.ColumnPad).(*array.Boolean)
	for r := range p.Rows {
		b.pads = append(b.pads, pads.Value(r))
		bounds, docs := p.Row(r)
		b.docs = append(b.docs, slices.Clone(docs))
		row := r * p.SeqLen
		var lens []int
		for k, d := range docs {
			if d < 0 || int(d) >= len(refs) {
				return b, fmt.Errorf("step %d row %d: document %d is not in the streams", b.step, r, d)
			}
			piece := tokens[row+int(bounds[k]) : row+int(bounds[k+1])]
			if !isRun(piece, refs[d]) {
				return b, fmt.Errorf("step %d row %d: piece %d, %v, is not a run of document %d's ids %v", b.step, r, k, piece, d, refs[d])
			}
			for j := bounds[k]; j < bounds[k+1]; j++ {
				if positions[row+int(j)] != j-bounds[k] || mask[row+int(j)] != 1 {
					return b, fmt.Errorf("step %d row %d: piece %d's positions or loss mask are wrong", b.step, r, k)
				}
			}
			lens = append(lens, len(piece))
		}
		b.pieces = append(b.pieces, lens)
		for j := int(bounds[len(bounds)-1]); j < p.SeqLen; j++ {
			if mask[row+j] != 0 {
				return b, fmt.Errorf("step %d row %d: padding at %d is not masked", b.step, r, j)
			}
		}
	}
	return b, nil
}

// isRun says whether piece is a contiguous run of doc.
func isRun(piece, doc []int32) bool {
	for i := 0; i+len(piece) <= len(doc); i++ {
		if slices.Equal(doc[i:i+len(piece)], piece) {
			return true
		}
	}
	return false
}
