//go:build integration

package sidecar_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// TestIntegrationSixtyFourClientsReadAWholeEpochFromOneSidecar connects 64
// clients at once to one `shardfeed serve`, ranks 0–63 of a world of 64,
// each reading its whole epoch with its batches handed over in shared
// memory: every batch is the plan's, every sample is delivered exactly
// once, and the sidecar's peak memory stays within the bound
// docs/sidecar.md gives (decoded working set + --memory-limit + 2 queued
// batches per stream, plus the Go runtime's own, plus the hand-off slots).
func TestIntegrationSixtyFourClientsReadAWholeEpochFromOneSidecar(t *testing.T) {
	const (
		clients = 64
		samples = 8192 // of 8 KiB: 64 MiB
		batch   = 512  // global: 8 samples (64 KiB) per client
	)
	ds := newTokenDataset(t, samples, fmt.Sprintf("  numSplits: %d\n  globalBatchSize: %d\n  shuffle: {seed: 3, blockSize: 1024}\n", clients, batch))
	srv := serve(t, ds, t.TempDir(), "--memory-limit", "64Mi")
	plan := planIDs(t, ds, 0, clients, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var mu sync.Mutex
	seen := map[int64]int{}
	steps := 0
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for rank := range clients {
		wg.Go(func() {
			got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: clients, Epoch: ptr(int64(0)), Handoff: true}, nil)
			if err != nil {
				errs <- fmt.Errorf("rank %d: %w", rank, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err := tallyPlanned(plan, rank, got, seen); err != nil {
				errs <- err
			}
			steps += len(got)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%v\n%s", err, srv.logs())
	}
	if steps != len(plan) {
		t.Fatalf("received %d (step, rank) batches, the plan has %d", steps, len(plan))
	}
	if err := checkExactlyOnce(plan, seen); err != nil || len(seen) != samples {
		t.Fatalf("%v (%d distinct samples of %d)", err, len(seen), samples)
	}

	var st struct {
		Handoff struct{ Batches, InlineBatches, Segments int64 }
	}
	if err := srv.client.Status(ctx, &st); err != nil {
		t.Fatal(err)
	}
	if st.Handoff.Batches+st.Handoff.InlineBatches != int64(steps) || st.Handoff.Batches < int64(steps)/2 || st.Handoff.Segments != 0 {
		t.Fatalf("of %d batches, %d were handed over in memory and %d in the stream, %d segments left: want most in memory and none left",
			steps, st.Handoff.Batches, st.Handoff.InlineBatches, st.Handoff.Segments)
	}

	// The bound: every shard of the epoch may be decoded and in use at once
	// (64 splits of 128 samples, each reading its own part of the shards:
	// the working set is the data set, 64 MiB), 64 MiB of --memory-limit,
	// 2 queued batches of 64 KiB per stream, and 64 MiB for the runtime;
	// Go's collector lets the heap grow to twice what is live (GOGC=100).
	// The hand-off slots are shared memory, not heap: 4 per stream of a
	// batch (64 KiB and the IPC framing, in 128 KiB segments).
	const mib = 1 << 20
	bound := 2*(64*mib+64*mib+clients*2*64<<10) + 64*mib + clients*4*128<<10
	peak := vmHWM(t, srv.cmd.Process.Pid)
	t.Logf("sidecar peak RSS with %d clients: %.0f MiB (bound %.0f MiB)", clients, float64(peak)/mib, float64(bound)/mib)
	if peak > int64(bound) {
		t.Fatalf("sidecar peak RSS %d MiB is above the documented bound %d MiB", peak/mib, bound/mib)
	}
}

// vmHWM is a process's peak resident memory in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}
