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
	anon := watchAnon(t, srv.cmd.Process.Pid)
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
		Handoff  struct{ Batches, InlineBatches, Segments int64 }
		Pipeline struct{ DecodedBytes, MappedBytes int64 }
	}
	// A stream's segments go back to the pool when the sidecar sees its
	// client leave, just after the client's last read.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := srv.client.Status(ctx, &st); err != nil {
			t.Fatal(err)
		}
		if st.Handoff.Segments == 0 || time.Now().After(deadline) {
			break
		}
	}
	if st.Handoff.Batches+st.Handoff.InlineBatches != int64(steps) || st.Handoff.Batches < int64(steps)/2 || st.Handoff.Segments != 0 {
		t.Fatalf("of %d batches, %d were handed over in memory and %d in the stream, %d segments left: want most in memory and none left",
			steps, st.Handoff.Batches, st.Handoff.InlineBatches, st.Handoff.Segments)
	}

	// Plain MDS tokens are served in place: every shard is mapped (the
	// working set is the data set, 64 MiB, in the page cache), none is
	// decoded to the heap.
	if st.Pipeline.DecodedBytes != 0 || st.Pipeline.MappedBytes == 0 {
		t.Fatalf("%d bytes decoded and %d mapped: want the shards mapped and nothing decoded", st.Pipeline.DecodedBytes, st.Pipeline.MappedBytes)
	}
	// The bounds of docs/sidecar.md. The heap (RssAnon): the decoded
	// columns the open streams need (none here) and --memory-limit's worth
	// kept (none used), 2 queued batches of 64 KiB per stream, twice that
	// (Go's collector lets the heap grow to twice what is live), and 64 MiB
	// for the runtime. All of it (VmHWM): the heap, the mapped shards the
	// streams read (the data set, 64 MiB), the hand-off slots (shared
	// memory: 4 per stream of a batch, 64 KiB and the IPC framing, in
	// 128 KiB segments), and 64 MiB of the program's own mapped code.
	const mib = 1 << 20
	heapBound := 2*(clients*2*64<<10) + 64*mib
	bound := heapBound + 64*mib + clients*4*128<<10 + 64*mib
	anon.stop()
	peak := vmHWM(t, srv.cmd.Process.Pid)
	t.Logf("sidecar peak with %d clients: heap (RssAnon) %.0f MiB (bound %.0f MiB), all (VmHWM) %.0f MiB (bound %.0f MiB)",
		clients, float64(anon.peak)/mib, float64(heapBound)/mib, float64(peak)/mib, float64(bound)/mib)
	if anon.peak > int64(heapBound) || peak > int64(bound) {
		t.Fatalf("sidecar peak heap %d MiB, all %d MiB: above the documented bounds %d and %d MiB", anon.peak/mib, peak/mib, heapBound/mib, bound/mib)
	}
}

// anonPeak samples a process's anonymous resident memory (RssAnon, its
// heap: VmHWM also counts the mapped files and shared memory) until
// stopped, keeping the largest.
type anonPeak struct {
	peak int64
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func watchAnon(t *testing.T, pid int) *anonPeak {
	a := &anonPeak{done: make(chan struct{})}
	a.wg.Go(func() {
		for {
			if v := statusField(t, pid, "RssAnon:"); v > a.peak {
				a.peak = v
			}
			select {
			case <-a.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	t.Cleanup(a.stop)
	return a
}

func (a *anonPeak) stop() {
	a.once.Do(func() { close(a.done) })
	a.wg.Wait()
}

// vmHWM is a process's peak resident memory in bytes.
func vmHWM(t *testing.T, pid int) int64 { return statusField(t, pid, "VmHWM:") }

// statusField is a field of /proc/PID/status in bytes (0 once the
// process is gone).
func statusField(t *testing.T, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Error(err)
			}
			return kb << 10
		}
	}
	t.Errorf("no %s in /proc/%d/status", field, pid)
	return 0
}
