//go:build integration

package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/planner"
)

// TestIntegrationReplicationGroupsOnRealSidecars runs every pod of a 2-D and
// a 3-D job as a real sidecar in rank mode pod with a declared data-parallel
// size: every rank receives its data-parallel rank's batches, those of
// `plan --ids --mesh`, identical across its replication group; each pod
// fetches what `simulate --mesh` predicts, within the restated egress bound;
// and requests without (or with other) coordinates are refused.
func TestIntegrationReplicationGroupsOnRealSidecars(t *testing.T) {
	ds := newDataset(t, 1000, 0, "  numSplits: 8\n  globalBatchSize: 16\n  shuffle: {blockSize: 64}\n")
	for _, tc := range []struct {
		mesh  string
		procs int
	}{
		{"dp=4,tp=2", 2},      // tensor parallel inside each of 4 pods: a pod fetches as a 4-pod job
		{"pp=2,dp=2,tp=2", 4}, // a pipeline stage per pod: both pods fetch every shard
	} {
		t.Run(tc.mesh, func(t *testing.T) {
			m, err := planner.ParseMesh(tc.mesh)
			if err != nil {
				t.Fatal(err)
			}
			W, D, pods := m.Size(), m.DataParallelSize(), m.Size()/tc.procs
			plan := planIDs(t, ds, 0, 0, 1, "--mesh", tc.mesh, "--procs-per-pod", fmt.Sprint(tc.procs))
			predicted := simulateMesh(t, ds, tc.mesh, tc.procs)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			seen, counted := map[int64]int{}, map[[2]int64]bool{}
			var fetched, distinct int64
			for pod := range pods {
				dir := t.TempDir()
				srv := startEnv(t, dir, credentialsEnv(t, ds), "sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
					"--cache-dir", filepath.Join(dir, "cache"), "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "",
					"--rank-mode", "pod", "--pods", fmt.Sprint(pods), "--pod-rank", fmt.Sprint(pod), "--procs-per-pod", fmt.Sprint(tc.procs),
					"--data-parallel-size", fmt.Sprint(D), "--job", "train", "--attempt", "a1")
				first := pod * tc.procs
				if pod == 0 {
					refusals(ctx, t, srv.client, W, D)
				}
				for r := first; r < first+tc.procs; r++ {
					dp := m.DataParallelRank(r)
					got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: r, World: W, DataParallel: &shardfeed.DataParallel{Rank: dp, Size: D}}, nil)
					if err != nil {
						t.Fatalf("pod %d rank %d: %v\n%s", pod, r, err, srv.logs())
					}
					if int64(len(got)) != int64(len(plan))/int64(W) {
						t.Fatalf("rank %d got %d batches, the plan has %d", r, len(got), len(plan)/W)
					}
					for _, b := range got {
						l := plan[[2]int64{b.step, int64(r)}]
						if l.DPRank == nil || *l.DPRank != dp {
							t.Fatalf("plan --ids --mesh gives rank %d data-parallel rank %v, want %d", r, l.DPRank, dp)
						}
						if err := sameBatch(b, l); err != nil {
							t.Fatalf("rank %d (dp %d): %v", r, dp, err)
						}
						if key := [2]int64{b.step, int64(dp)}; !counted[key] { // one rank of each group counts
							counted[key] = true
							for i, id := range b.ids {
								if !b.pads[i] {
									seen[id]++
								}
							}
						}
					}
				}
				var status struct {
					DataParallel int `json:"dataParallelSize"`
					Pipeline     struct {
						Cache struct{ FetchedBytes, AheadBytes int64 } `json:"cache"`
					} `json:"pipeline"`
				}
				if err := srv.client.Status(ctx, &status); err != nil {
					t.Fatal(err)
				}
				// Beside the next epoch's first shards, fetched ahead.
				got := status.Pipeline.Cache.FetchedBytes - status.Pipeline.Cache.AheadBytes
				if status.DataParallel != D || got != predicted.pods[pod] {
					t.Fatalf("pod %d: status says data-parallel size %d and %d bytes fetched; want %d and simulate's %d",
						pod, status.DataParallel, got, D, predicted.pods[pod])
				}
				fetched += got
				srv.kill()
			}
			planned := map[int64]bool{}
			for _, l := range plan {
				pad := map[int]bool{}
				for _, i := range l.Pad {
					pad[i] = true
				}
				for i, id := range l.IDs {
					planned[id] = planned[id] || !pad[i]
				}
			}
			for id := range planned {
				if seen[id] != 1 {
					t.Fatalf("id %d trained %d times by the data-parallel ranks, want once", id, seen[id])
				}
			}
			if len(seen) != len(planned) {
				t.Fatalf("%d ids trained, the plan has %d", len(seen), len(planned))
			}
			distinct = predicted.distinct
			bound := int64(planner.Spread(m.PodRanks(tc.procs))) * (distinct + int64(D-1)*(predicted.largest))
			if fetched > bound {
				t.Fatalf("the pods fetched %d bytes, above spread x (distinct %d + (D-1) x largest %d) = %d", fetched, distinct, predicted.largest, bound)
			}
			t.Logf("%s: %d pods fetched %d bytes (distinct %d, bound %d)", tc.mesh, pods, fetched, distinct, bound)
		})
	}
}

// refusals checks what a sidecar with a declared data-parallel size
// refuses, each with the field at fault.
func refusals(ctx context.Context, t *testing.T, c *shardfeed.Client, world, dp int) {
	t.Helper()
	for _, tc := range []struct {
		req   shardfeed.Request
		field string
		says  string
	}{
		{shardfeed.Request{Rank: 0, World: world}, "dp_rank", "give each rank's data-parallel coordinates"},
		{shardfeed.Request{Rank: 0, World: world, DataParallel: &shardfeed.DataParallel{Rank: 0, Size: 1}}, "dp_size",
			fmt.Sprintf("dp_size=1, but this job declares a data-parallel size of %d", dp)},
		{shardfeed.Request{Rank: 0, World: world, DataParallel: &shardfeed.DataParallel{Rank: dp, Size: dp}}, "dp_rank", "is outside"},
		{shardfeed.Request{Rank: world - 1, World: world, DataParallel: &shardfeed.DataParallel{Rank: 0, Size: dp}}, "rank", "belongs to pod"},
	} {
		_, err := c.Batches(ctx, tc.req)
		var apiErr *shardfeed.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Field != tc.field {
			t.Fatalf("%+v: %v, want a 400 on %s", tc.req, err, tc.field)
		}
		mustContain(t, apiErr.Message, tc.says)
	}
}

type meshPrediction struct {
	pods              []int64
	distinct, largest int64
}

// simulateMesh runs `simulate --mesh` for each pod's bytes, and
// `plan --summary` for the distinct bytes and largest shard.
func simulateMesh(t *testing.T, ds dataset, mesh string, procs int) meshPrediction {
	t.Helper()
	out, err := runShardfeed("simulate", "-f", ds.manifest, "--credentials-dir", ds.credentials, "--mesh", mesh, "--procs-per-pod", fmt.Sprint(procs), "-o", "json")
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	var sim struct {
		Pods []struct{ Bytes int64 } `json:"pods"`
	}
	if err := json.Unmarshal([]byte(out), &sim); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var p meshPrediction
	for _, ps := range sim.Pods {
		p.pods = append(p.pods, ps.Bytes)
	}
	out, err = runShardfeed("plan", "-f", ds.manifest, "--credentials-dir", ds.credentials, "-o", "json", "--pods", "1")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var s struct {
		Streams []struct {
			Bytes         int64 `json:"bytes"`
			MaxShardBytes int64 `json:"maxShardBytes"`
		} `json:"streams"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	for _, st := range s.Streams {
		p.distinct += st.Bytes
		p.largest = max(p.largest, st.MaxShardBytes)
	}
	return p
}
