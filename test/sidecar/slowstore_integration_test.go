//go:build integration

package sidecar_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// TestIntegrationServeOnASlowObjectStoreDeliversTheSameBatches reads an
// epoch through a proxy that delays every chunk MinIO sends by 20 ms, with
// two ranks at once: slower, and the very batches of the plan, exactly once.
func TestIntegrationServeOnASlowObjectStoreDeliversTheSameBatches(t *testing.T) {
	ds := newDataset(t, 1500, 700, "  numSplits: 4\n  globalBatchSize: 32\n  shuffle: {seed: 5, blockSize: 256}\n")
	proxy := testenv.StartSlowProxy(t, minioServer.Endpoint, 20*time.Millisecond)
	manifest, err := os.ReadFile(ds.manifest)
	if err != nil {
		t.Fatal(err)
	}
	slow := strings.ReplaceAll(string(manifest), minioServer.URL(), "http://"+proxy.Addr)
	if slow == string(manifest) {
		t.Fatal("the manifest does not name MinIO's endpoint")
	}
	ds.manifest = filepath.Join(t.TempDir(), "slow.yaml")
	if err := os.WriteFile(ds.manifest, []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, ds, t.TempDir())
	plan := planIDs(t, ds, 0, 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type result struct {
		got []batch
		err error
	}
	results := make([]chan result, 2)
	for rank := range 2 {
		results[rank] = make(chan result, 1)
		go func() {
			got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: 2, Epoch: ptr(int64(0))}, nil)
			results[rank] <- result{got, err}
		}()
	}
	seen, steps := map[int64]int{}, 0
	for rank := range 2 {
		r := <-results[rank]
		if r.err != nil {
			t.Fatalf("rank %d: %v\n%s", rank, r.err, srv.logs())
		}
		if err := tallyPlanned(plan, rank, r.got, seen); err != nil {
			t.Fatal(err)
		}
		steps += len(r.got)
	}
	if proxy.Sent() < 100<<10 {
		t.Fatalf("the proxy passed %d bytes: the sidecar did not read the shards through it", proxy.Sent())
	}
	if steps != len(plan) {
		t.Fatalf("%d batches, the plan has %d", steps, len(plan))
	}
	if err := checkExactlyOnce(plan, seen); err != nil {
		t.Fatal(err)
	}
}
