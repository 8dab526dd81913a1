//go:build integration

package sidecar_test

import (
	"context"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// TestIntegrationServeRidesOutAnObjectStoreOutage kills MinIO (SIGKILL, as
// a crash or a network cut) in the middle of an epoch and brings it back
// 10 s later: the stream waits (the store's retries) instead of failing,
// and the epoch arrives whole, every batch the plan's, exactly once.
func TestIntegrationServeRidesOutAnObjectStoreOutage(t *testing.T) {
	// In order and without prefetch, so the shards after the first batches
	// are fetched during and after the outage.
	ds := newDataset(t, 3000, 0, "  numSplits: 2\n  globalBatchSize: 64\n  shuffle: {enabled: false}\n")
	srv := serve(t, ds, t.TempDir(), "--prefetch", "0")
	plan := planIDs(t, ds, 0, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	restarted := make(chan error, 1)
	var back time.Time
	after := 0
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1, Epoch: ptr(int64(0))}, func(b batch) bool {
		switch {
		case b.step == 5:
			minioServer.Kill()
			go func() {
				time.Sleep(10 * time.Second)
				restarted <- minioServer.Restart(context.Background())
			}()
		case !back.IsZero():
			after++
		case b.step > 5:
			select {
			case err := <-restarted:
				if err != nil {
					t.Errorf("restarting MinIO: %v", err)
				}
				back = time.Now()
				after++
			default:
			}
		}
		return true
	})
	if back.IsZero() {
		if err := <-restarted; err != nil {
			t.Fatalf("restarting MinIO: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("the stream failed during the outage: %v\n%s", err, srv.logs())
	}
	if after == 0 {
		t.Fatalf("every batch arrived before MinIO came back: the test did not make the sidecar wait for the store")
	}
	seen := map[int64]int{}
	if err := tallyPlanned(plan, 0, got, seen); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(plan) {
		t.Fatalf("%d batches, the plan has %d", len(got), len(plan))
	}
	if err := checkExactlyOnce(plan, seen); err != nil {
		t.Fatal(err)
	}
}
