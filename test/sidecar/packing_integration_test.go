//go:build integration

package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

const packedSpec = `  numSplits: 4
  globalBatchSize: 8
  shuffle: {seed: 3, blockSize: 16}
  packing: {column: tokens, sequenceLength: 64, window: 120, acrossShards: true}
  schedule:
    phases:
    - {startStep: 5, globalBatchSize: 16}
    - startStep: 12
      proportions: [{stream: p, proportion: "1"}, {stream: q, proportion: "3"}, {stream: m, proportion: "2"}]
`

// writeParquet writes what b holds to path as Parquet, in row groups of
// 50 rows.
func writeParquet(t *testing.T, path string, b *array.RecordBuilder) {
	t.Helper()
	rec := b.NewRecordBatch()
	defer rec.Release()
	b.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(50)), pqarrow.DefaultWriterProps())
	if err == nil {
		err = w.Write(rec)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = os.WriteFile(path, buf.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// packedDocs writes n documents of 1 to 90 token ids to Parquet files of
// 150 rows (row groups of 50): document i's token j is base + 1000·i + j,
// so that a token names its document and its place in it.
func packedDocs(t *testing.T, dir string, n int, base int32, seed uint64) []int {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 54))
	schema := arrow.NewSchema([]arrow.Field{{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	lengths := make([]int, n)
	for f := 0; f*150 < n; f++ {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		lb := b.Field(0).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for i := f * 150; i < min(n, (f+1)*150); i++ {
			lengths[i] = 1 + r.IntN(90)
			lb.Append(true)
			for j := range lengths[i] {
				vb.Append(base + int32(1000*i+j))
			}
		}
		writeParquet(t, filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)), b)
	}
	return lengths
}

// packedBatch is a received packed batch: its step, pack ids, pads, and
// each pack's documents, checked against the tokens it holds.
type packedBatch struct {
	step int64
	ids  []int64
	pads []bool
	docs [][]int64
}

// readPacked reads a worker's packed stream to its end, checking every
// row: each piece's tokens are a run of its document's, its position ids
// restart, the loss mask covers the tokens; tokenOf names a document's
// first token and its length at most.
func readPacked(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, tokenOf func(doc int64) (first, most int32), each func(packedBatch) bool) ([]packedBatch, error) {
	return readStream(ctx, c, req, func(rec arrow.RecordBatch) (packedBatch, error) {
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		b := packedBatch{step: col(pipeline.ColumnStep).(*array.Int64).Value(0),
			ids: slices.Clone(col(pipeline.ColumnIndex).(*array.Int64).Int64Values())}
		// The Go client's reading of the packed columns.
		p, err := shardfeed.ReadPacked(rec, "tokens")
		if err != nil {
			return b, err
		}
		tokens, positions, mask := p.Tokens.(*array.Int32).Int32Values(), p.PositionIDs, p.LossMask
		pads := col(pipeline.ColumnPad).(*array.Boolean)
		for r := range p.Rows {
			b.pads = append(b.pads, pads.Value(r))
			bounds, docs := p.Row(r)
			ids := slices.Clone(docs)
			b.docs = append(b.docs, ids)
			row := r * p.SeqLen
			if p.SeqLen != 64 || len(bounds) != len(ids)+1 || bounds[0] != 0 {
				return b, fmt.Errorf("step %d row %d: boundaries %v for documents %v in %d tokens", b.step, r, bounds, ids, p.SeqLen)
			}
			for k, d := range ids {
				first, most := tokenOf(d)
				for j := bounds[k]; j < bounds[k+1]; j++ {
					want := tokens[row+int(bounds[k])] + (j - bounds[k])
					if tokens[row+int(j)] != want || positions[row+int(j)] != j-bounds[k] || mask[row+int(j)] != 1 {
						return b, fmt.Errorf("step %d row %d: piece %d of document %d is not a run of its tokens", b.step, r, k, d)
					}
				}
				if off := tokens[row+int(bounds[k])] - first; off < 0 || off+bounds[k+1]-bounds[k] > most {
					return b, fmt.Errorf("step %d row %d: piece %d's tokens are not document %d's", b.step, r, k, d)
				}
			}
			for j := int(bounds[len(bounds)-1]); j < p.SeqLen; j++ {
				if mask[row+j] != 0 || tokens[row+j] != 0 {
					return b, fmt.Errorf("step %d row %d: padding at %d is not masked", b.step, r, j)
				}
			}
		}
		if flat, _ := p.FlatCuSeqlens(); flat[len(flat)-1] != int32(p.Rows*p.SeqLen) {
			return b, fmt.Errorf("step %d: the flattened boundaries end at %d, not at the batch's %d tokens", b.step, flat[len(flat)-1], p.Rows*p.SeqLen)
		}
		return b, nil
	}, each)
}

// TestIntegrationAPackedMixedScheduledDatasetThroughAKillAndARescale:
// real sidecars serve three streams of documents (two Parquet, of lists
// of 1 to 90 tokens, and one MDS, of fixed-size lists of 4) packed into
// sequences of 64 tokens across shards (windows of 120: the Parquet
// streams' row groups of 50 documents in units of five or more, some
// across files; the MDS shards in units of those that hold two windows),
// mixed and scheduled (a batch-size ramp-up, a curriculum),
// through a kill and a 4 → 2 pod rescale (trainThroughARescale, which
// bounds what each resumed pod fetches): every batch of the committed
// lineage is `plan --ids`'s, packs and documents, each row's pieces are
// runs of their documents' tokens, and a pack is drawn at most once a pass
// of its stream.
func TestIntegrationAPackedMixedScheduledDatasetThroughAKillAndARescale(t *testing.T) {
	bucket, dir := minioServer.Bucket(t), t.TempDir()
	nP := len(packedDocs(t, filepath.Join(dir, "p"), 500, 0, 1))
	// And an empty file (one row group of no row) between two of p's, in
	// a packing unit: neither fetched nor decoded.
	empty := arrow.NewSchema([]arrow.Field{{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	writeParquet(t, filepath.Join(dir, "p", "part-0e.parquet"), array.NewRecordBuilder(memory.DefaultAllocator, empty))
	nQ := len(packedDocs(t, filepath.Join(dir, "q"), 400, 1_000_000_000, 2))
	upload(t, bucket, "p", filepath.Join(dir, "p"))
	upload(t, bucket, "q", filepath.Join(dir, "q"))
	// And MDS: documents of 4 tokens (ndarray:int32:4, a fixed-size list).
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", 3000, 8000, "zstd"); err != nil {
		t.Fatal(err)
	}
	upload(t, bucket, "m", filepath.Join(dir, "m"))
	streams := []sampledata.Stream{{Name: "p", Format: "parquet", URI: "s3://" + bucket + "/p/", Endpoint: minioServer.URL()},
		{Name: "q", Format: "parquet", URI: "s3://" + bucket + "/q/", Endpoint: minioServer.URL()},
		{Name: "m", Format: "mds", URI: "s3://" + bucket + "/m/", Endpoint: minioServer.URL()}}
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("packed", streams, packedSpec)), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(t)}
	for _, s := range []string{"p", "q", "m"} {
		cmd := exec.Command(binary, "index", "-f", manifest, "--stream", s, "--credentials-dir", ds.credentials)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("index %s: %v\n%s", s, err, out)
		}
	}
	tokenOf := func(doc int64) (int32, int32) { // a document's first token, and its most tokens
		switch {
		case doc < int64(nP):
			return int32(1000 * doc), 90
		case doc < int64(nP+nQ):
			return 1_000_000_000 + int32(1000*(doc-int64(nP))), 90
		}
		return sampledata.Token(doc-int64(nP+nQ), 0), 4
	}

	read := func(ctx context.Context, c *shardfeed.Client, req shardfeed.Request, each func(packedBatch) bool) ([]packedBatch, error) {
		return readPacked(ctx, c, req, tokenOf, each)
	}
	r := trainThroughARescale(t, ds, "packed", read, func(b packedBatch) int64 { return b.step })
	if r.steps < 20 {
		t.Fatalf("the plan has %d steps", r.steps)
	}
	// The lineage is plan --ids's, packs and documents; within a pass of
	// its stream, no document's token twice.
	seen := map[int64]int{}
	spanning := 0 // packs of stream p holding documents of two row groups (shards of 50)
	for _, b := range r.lineage {
		for _, docs := range b.docs {
			if len(docs) > 0 && docs[len(docs)-1] < int64(nP) && docs[0]/50 != docs[len(docs)-1]/50 {
				spanning++
			}
		}
	}
	if spanning == 0 {
		t.Fatal("no pack holds documents of two shards: acrossShards packed shard by shard")
	}
	for k := range r.steps {
		world, plan := r.planAt(k)
		for rank := range world {
			got, want := r.lineage[[2]int64{k, int64(rank)}], plan[[2]int64{k, int64(rank)}]
			if fmt.Sprint(got.ids) != fmt.Sprint(want.IDs) || fmt.Sprint(got.docs) != fmt.Sprint(want.Docs) {
				t.Fatalf("step %d rank %d of %d: the lineage trained packs %v of documents %v, plan --ids says %v of %v", k, rank, world, got.ids, got.docs, want.IDs, want.Docs)
			}
			for i, id := range got.ids {
				if !got.pads[i] && !want.Repeated {
					seen[id]++
				}
			}
		}
	}
	// Each stream's packs are drawn pass after pass: a pack at most once a
	// pass, so at most once more than the passes its draws make.
	out, err := exec.Command(binary, "plan", "-f", manifest, "--credentials-dir", ds.credentials, "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Streams []struct {
			Samples int64 `json:"samples"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	var first []int64 // each stream's first pack id
	var n int64
	for _, st := range sum.Streams {
		first = append(first, n)
		n += st.Samples
	}
	streamOf := func(id int64) int { return sort.Search(len(first), func(i int) bool { return first[i] > id }) - 1 }
	draws := make([]int64, len(first))
	for id, k := range seen {
		draws[streamOf(id)] += int64(k)
	}
	for id, k := range seen {
		st := streamOf(id)
		if passes := (draws[st] + sum.Streams[st].Samples - 1) / sum.Streams[st].Samples; int64(k) > passes+1 {
			t.Fatalf("pack %d of stream %d delivered %d times, its stream's %d draws make %d passes", id, st, k, draws[st], passes)
		}
	}
}
