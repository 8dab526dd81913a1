//go:build integration

package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// corruptObject flips bytes in the middle of the second shard of the MDS
// stream "m" at the source, keeping its size: only its hash tells. It
// returns the shard's name.
func corruptObject(t *testing.T, ds dataset) string {
	t.Helper()
	ctx := context.Background()
	var shards []string
	for o := range minioServer.Client.ListObjects(ctx, ds.bucket, minio.ListObjectsOptions{Prefix: "m/"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if strings.HasSuffix(o.Key, ".mds") || strings.HasSuffix(o.Key, ".mds.zstd") {
			shards = append(shards, o.Key)
		}
	}
	if len(shards) < 3 {
		t.Fatalf("the stream has %d shards, the test needs 3", len(shards))
	}
	key := shards[1]
	obj, err := minioServer.Client.GetObject(ctx, ds.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 2; i < len(data)/2+16 && i < len(data); i++ {
		data[i] ^= 0xff
	}
	if _, err := minioServer.Client.PutObject(ctx, ds.bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(key, "m/")
}

// TestIntegrationCorruptShardIsSkippedAsPadRowsUnderThePolicy: with
// onCorruptShard: skip, a shard whose every download differs from its
// index is delivered as zeroed rows marked _shardfeed_pad, in the planned
// places with the planned ids; every other sample arrives once with its
// values; the job's state and the metrics count the skip.
func TestIntegrationCorruptShardIsSkippedAsPadRowsUnderThePolicy(t *testing.T) {
	ds := newDataset(t, 3000, 0, "  numSplits: 2\n  globalBatchSize: 64\n  shuffle: {seed: 3, blockSize: 512}\n  onCorruptShard: skip\n")
	shard := corruptObject(t, ds)
	metricsAddr := freeAddr(t)
	srv := serve(t, ds, t.TempDir(), "--prefetch", "0", "--metrics-addr", metricsAddr)
	plan := planIDs(t, ds, 0, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	st, err := srv.client.Batches(ctx, shardfeed.Request{Rank: 0, World: 1, Epoch: ptr(int64(0))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	delivered, skipped := map[int64]int{}, map[int64]int{}
	steps := 0
	for {
		rec, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the stream failed: %v\n%s", err, srv.logs())
		}
		steps++
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		step := col(pipeline.ColumnStep).(*array.Int64).Value(0)
		ids := col(pipeline.ColumnIndex).(*array.Int64)
		pads := col(pipeline.ColumnPad).(*array.Boolean)
		line := plan[[2]int64{step, 0}]
		planPad := map[int]bool{}
		for _, p := range line.Pad {
			planPad[p] = true
		}
		values := col("id").(*array.Int64)
		text := col("text").(*array.String)
		for i := range ids.Len() {
			if ids.Value(i) != line.IDs[i] {
				t.Fatalf("step %d row %d: id %d, the plan has %d", step, i, ids.Value(i), line.IDs[i])
			}
			switch {
			case planPad[i]:
			case pads.Value(i):
				if values.Value(i) != 0 || text.Value(i) != "" {
					t.Fatalf("step %d row %d: a skipped row (id %d) has values (%d, %q), want zeroed", step, i, ids.Value(i), values.Value(i), text.Value(i))
				}
				skipped[ids.Value(i)]++
			default:
				delivered[ids.Value(i)]++
			}
		}
		if err := checkDelivered(rec, pads); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if steps != len(plan) {
		t.Fatalf("%d steps, the plan has %d", steps, len(plan))
	}
	if len(skipped) == 0 {
		t.Fatal("no row was skipped: the corrupt shard was not noticed")
	}
	var samplesSkipped int64
	for id, n := range skipped {
		if n != 1 || delivered[id] != 0 {
			t.Errorf("sample %d: skipped %d times, delivered %d times", id, n, delivered[id])
		}
		samplesSkipped++
	}
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("sample %d delivered %d times", id, n)
		}
	}
	want := 0
	for _, l := range plan {
		want += len(l.IDs) - len(l.Pad)
	}
	if got := len(delivered) + len(skipped); got != want {
		t.Errorf("%d delivered + %d skipped samples, the plan has %d", len(delivered), len(skipped), want)
	}

	var state configmaps.State
	if err := json.Unmarshal([]byte(get(t, srv.socket, "/v1/state")), &state); err != nil {
		t.Fatal(err)
	}
	if state.SkippedShards != 1 || state.SkippedSamples != samplesSkipped || len(state.Skipped) != 1 ||
		state.Skipped[0].Shard != shard || state.Skipped[0].Stream != "m" || !strings.Contains(state.Skipped[0].Reason, "mismatch") {
		t.Errorf("the state records %d skipped shards, %d samples: %+v; want 1 shard %s of %d samples, reason a hash mismatch",
			state.SkippedShards, state.SkippedSamples, state.Skipped, shard, samplesSkipped)
	}
	mustContain(t, srv.logs(), "Corrupt shard skipped", shard)
	metrics := metricsOf(t, metricsAddr)
	mustContain(t, metrics, "shardfeed_sidecar_skipped_shards_total 1\n")
	mustContain(t, metrics, fmt.Sprintf("shardfeed_sidecar_skipped_samples_total %d\n", samplesSkipped))
}

// TestIntegrationCorruptShardFailsClearlyByDefault: without the policy,
// the batch that needs the corrupt shard is not delivered; the stream ends
// in an error and the sidecar names the shard and what to do.
func TestIntegrationCorruptShardFailsClearlyByDefault(t *testing.T) {
	ds := newDataset(t, 3000, 0, "  numSplits: 2\n  globalBatchSize: 64\n  shuffle: {enabled: false}\n")
	shard := corruptObject(t, ds)
	srv := serve(t, ds, t.TempDir(), "--prefetch", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1, Epoch: ptr(int64(0))}, nil)
	if err == nil {
		t.Fatalf("the whole epoch (%d batches) arrived from a corrupt shard", len(got))
	}
	status := get(t, srv.socket, "/v1/status")
	mustContain(t, status, shard, "mismatch", "restore the object")
	mustContain(t, srv.logs(), shard)
	if strings.Contains(srv.logs(), "Corrupt shard skipped") {
		t.Error("a shard was skipped without the policy")
	}
}

// freeAddr returns a free TCP address on the loopback.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// metricsOf returns the Prometheus text served on addr.
func metricsOf(t testing.TB, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkDelivered checks the values of the rows not marked pad.
func checkDelivered(rec arrow.RecordBatch, pads *array.Boolean) error {
	var keep []int64
	for i := range pads.Len() {
		if !pads.Value(i) {
			keep = append(keep, int64(i))
		}
	}
	for _, i := range keep {
		row := rec.NewSlice(i, i+1)
		err := checkValues(row)
		row.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
