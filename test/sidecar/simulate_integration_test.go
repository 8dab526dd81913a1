//go:build integration

package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// `shardfeed simulate` predicts bytes and cache; a real sidecar of the same
// pod, run with the predicted cache as its limit, fetches exactly the
// predicted bytes and never holds more than the predicted cache.
func TestIntegrationSimulatePredictsAPodsBytesAndCache(t *testing.T) {
	// MDS shards are whole objects; a Parquet row group also needs its
	// file's footer, which the indexes do not count yet (see docs/planner.md).
	ds := newDataset(t, 2400, 0, "  numSplits: 8\n  globalBatchSize: 16\n  shuffle: {blockSize: 96, seed: 4}\n")
	out, err := exec.Command(binary, "simulate", "-f", ds.manifest, "--credentials-dir", ds.credentials, "--pods", "2",
		"--procs-per-pod", "2", "--bandwidth", "100MB/s", "--step-time", "5ms", "-o", "json").Output()
	if err != nil {
		t.Fatalf("simulate: %v", err)
	}
	var sim struct {
		Steps int64
		Pods  []struct {
			Pod           int
			Bytes         int64
			Shards        int
			MinCacheBytes int64
			Requests      int64
		}
	}
	if err := json.Unmarshal(out, &sim); err != nil {
		t.Fatal(err)
	}
	if len(sim.Pods) != 2 {
		t.Fatalf("simulate printed %d pods", len(sim.Pods))
	}
	for _, pod := range sim.Pods {
		t.Run(fmt.Sprintf("pod %d", pod.Pod), func(t *testing.T) {
			dir := t.TempDir()
			srv := startEnv(t, dir, credentialsEnv(t, ds), "sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
				"--cache-dir", filepath.Join(dir, "cache"), "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "",
				"--cache-limit", fmt.Sprint(pod.MinCacheBytes), "--prefetch", "2",
				"--rank-mode", "pod", "--pods", "2", "--pod-rank", fmt.Sprint(pod.Pod), "--procs-per-pod", "2", "--job", "sim", "--attempt", "a1")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// The pod's two ranks read side by side, as its trainers do.
			errs := make(chan error, 2)
			for _, rank := range []int{2 * pod.Pod, 2*pod.Pod + 1} {
				go func() {
					got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: 4}, nil)
					if err == nil && int64(len(got)) != sim.Steps {
						err = fmt.Errorf("rank %d read %d batches of %d", rank, len(got), sim.Steps)
					}
					errs <- err
				}()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatalf("with the predicted minimum cache as its limit: %v", err)
				}
			}
			var status struct {
				Pipeline struct {
					Cache struct{ Downloads, FetchedBytes, PeakBytes, LimitBytes, AheadDownloads, AheadBytes int64 } `json:"cache"`
				} `json:"pipeline"`
				Store struct{ Gets, AheadGets int64 } `json:"store"`
			}
			if err := srv.client.Status(ctx, &status); err != nil {
				t.Fatal(err)
			}
			c := status.Pipeline.Cache
			// Beside the next epoch's first shards, fetched ahead.
			if c.FetchedBytes-c.AheadBytes != pod.Bytes || c.Downloads-c.AheadDownloads != int64(pod.Shards) {
				t.Errorf("fetched %d bytes in %d downloads; simulate predicted %d bytes in %d shards", c.FetchedBytes-c.AheadBytes, c.Downloads-c.AheadDownloads, pod.Bytes, pod.Shards)
			}
			// The shards' GETs, and the stream's index.
			if gets := status.Store.Gets - status.Store.AheadGets; gets != pod.Requests+1 {
				t.Errorf("%d GETs to the store; simulate predicted %d for the shards, and the index makes one more", gets, pod.Requests)
			}
			if c.PeakBytes > pod.MinCacheBytes || c.PeakBytes == 0 {
				t.Errorf("the cache held %d bytes at its peak; simulate's minimum cache is %d", c.PeakBytes, pod.MinCacheBytes)
			}
			t.Logf("pod %d: %d bytes fetched as predicted; cache peak %d of the predicted %d", pod.Pod, c.FetchedBytes, c.PeakBytes, pod.MinCacheBytes)
		})
	}
}
