//go:build integration

package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

const mixedSpec = `  numSplits: 12
  globalBatchSize: 24
  shuffle: {seed: 11, blockSize: 200}
  dropLast: false
`

func TestIntegrationServeDeliversEveryBatchOfThePlanExactlyOnce(t *testing.T) {
	ds := newDataset(t, 1500, 700, mixedSpec)
	srv := serve(t, ds, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, c := range []struct {
		epoch          int64
		world, workers int
	}{{0, 1, 1}, {0, 2, 2}, {0, 4, 3}, {1, 12, 2}, {1, 3, 1}} {
		t.Run(fmt.Sprintf("epoch=%d world=%d workers=%d", c.epoch, c.world, c.workers), func(t *testing.T) {
			plan := planIDs(t, ds, c.epoch, c.world, c.workers)
			seen := map[int64]int{}
			steps := 0
			for rank := range c.world {
				for worker := range c.workers {
					got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: c.world, Worker: worker, Workers: c.workers, Epoch: ptr(c.epoch)}, nil)
					if err != nil {
						t.Fatalf("rank %d worker %d: %v\n%s", rank, worker, err, srv.logs())
					}
					for i, b := range got {
						if want := int64(worker + i*c.workers); b.step != want {
							t.Fatalf("rank %d worker %d: batch %d is step %d, want %d", rank, worker, i, b.step, want)
						}
						line, ok := plan[[2]int64{b.step, int64(rank)}]
						if !ok {
							t.Fatalf("rank %d: step %d is not in the plan", rank, b.step)
						}
						if err := sameBatch(b, line); err != nil {
							t.Fatalf("rank %d: %v", rank, err)
						}
						for j, id := range b.ids {
							if !b.pads[j] {
								seen[id]++
							}
						}
						steps++
					}
				}
			}
			if steps != len(plan) {
				t.Fatalf("received %d (step, rank) batches, the plan has %d", steps, len(plan))
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("id %d delivered %d times", id, n)
				}
			}
			// 2200 samples in 12 splits: the 2200 mod 12 = 4 extra samples
			// are dropped (design §3 step 3); the tails are padded.
			if len(seen) != 2196 {
				t.Fatalf("%d distinct ids, want 2196", len(seen))
			}
		})
	}
}

func TestIntegrationServeResumesFromItsStateFileAfterKill9(t *testing.T) {
	ds := newDataset(t, 1200, 0, "  numSplits: 4\n  globalBatchSize: 16\n  shuffle: {seed: 5, blockSize: 100}\n")
	dir := t.TempDir()
	plan := planIDs(t, ds, 0, 2, 1)
	steps := int64(len(plan) / 2)
	rng := rand.New(rand.NewPCG(42, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// lineage[k] are the ids trained at step k by the attempt whose commit
	// made it part of the committed lineage (design §4).
	lineage := map[int64][2][]int64{}
	committed := int64(0)
	for kills := 0; committed < steps; kills++ {
		srv := serve(t, ds, dir)
		st, err := srv.client.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Step != committed {
			t.Fatalf("after kill %d the state says step %d, the last commit was %d", kills, st.Step, committed)
		}
		// Train up to a random step, commit some steps, then kill -9.
		stop := min(steps, committed+1+rng.Int64N(steps/3))
		if kills >= 3 {
			stop = steps
		}
		trained := map[int64][2][]int64{}
		for rank := range 2 {
			got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: 2}, func(b batch) bool { return b.step+1 < stop })
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || got[0].step != committed {
				t.Fatalf("after kill %d rank %d started at %v, want the committed step %d", kills, rank, got, committed)
			}
			for _, b := range got {
				e := trained[b.step]
				e[rank] = b.ids
				trained[b.step] = e
			}
		}
		commitAt := committed + 1 + rng.Int64N(stop-committed)
		if kills >= 3 {
			commitAt = steps
		}
		if _, err := srv.client.Commit(ctx, 0, commitAt, false); err != nil {
			t.Fatal(err)
		}
		for k := committed; k < commitAt; k++ {
			lineage[k] = trained[k]
		}
		committed = commitAt
		srv.kill()
	}
	for k := range steps {
		for rank := range 2 {
			line := plan[[2]int64{k, int64(rank)}]
			got := lineage[k][rank]
			if fmt.Sprint(got) != fmt.Sprint(line.IDs) {
				t.Fatalf("step %d rank %d: the lineage trained %v, the plan says %v", k, rank, got, line.IDs)
			}
		}
	}
}

func TestIntegrationServeRefusesBadRequestsWithClearErrors(t *testing.T) {
	ds := newDataset(t, 600, 0, "  numSplits: 6\n  globalBatchSize: 12\n")
	srv := serve(t, ds, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.client.Commit(ctx, 1, 3, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		req    shardfeed.Request
		status int
		field  string
		says   []string
	}{
		{"world does not divide numSplits", shardfeed.Request{Rank: 0, World: 4}, 400, "world", []string{"4 ranks do not divide spec.numSplits (6)", "[1 2 3 6]"}},
		{"rank outside the world", shardfeed.Request{Rank: 3, World: 3}, 400, "rank", []string{"rank 3 is outside a world of 3 ranks"}},
		{"worker outside the workers", shardfeed.Request{Rank: 0, World: 1, Worker: 2, Workers: 2}, 400, "worker", []string{"worker 2 is outside 2 workers"}},
		{"epoch before the committed one", shardfeed.Request{Rank: 0, World: 1, Epoch: ptr(int64(0))}, 400, "epoch", []string{"before the committed epoch 1"}},
		{"step past the epoch", shardfeed.Request{Rank: 0, World: 1, Step: ptr(int64(999))}, 400, "step", []string{"past the epoch's"}},
		{"another plan's checkpoint", shardfeed.Request{Rank: 0, World: 1, Fingerprint: "v1-0000"}, 400, "fingerprint", []string{"plan v1-0000", "new TrainingDataset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := srv.client.Batches(ctx, tt.req)
			var apiErr *shardfeed.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v, want an API error", err)
			}
			if apiErr.Status != tt.status || apiErr.Field != tt.field {
				t.Errorf("got %d %q, want %d %q: %s", apiErr.Status, apiErr.Field, tt.status, tt.field, apiErr.Message)
			}
			mustContain(t, apiErr.Message, tt.says...)
		})
	}
	commits := []struct {
		name   string
		body   string
		status int
		says   []string
	}{
		{"backwards without resumed", `{"epoch":1,"step":2}`, 409, []string{"behind the stored (epoch 1, step 3)", `"resumed": true`}},
		{"step past the epoch", `{"epoch":1,"step":100000}`, 409, []string{"between 0 and"}},
		{"unknown field", `{"epoch":1,"step":4,"stp":5}`, 400, []string{"stp"}},
		{"not JSON", `epoch=1`, 400, []string{`{"epoch": E, "step": K`}},
		// Finding 6 of the hardening issue: each was accepted (or
		// recorded as epoch 0) before commit bodies were parsed strictly.
		{"empty object", `{}`, 400, []string{`field "epoch" is required`}},
		{"null", `null`, 400, []string{"one JSON object"}},
		{"no epoch", `{"step":4}`, 400, []string{`field "epoch" is required`}},
		{"duplicate key", `{"epoch":1,"step":2,"step":4}`, 400, []string{`field "step" appears twice`}},
		{"key in another case", `{"Epoch":1,"Step":4}`, 400, []string{`unknown field "Epoch"`, "case-sensitive"}},
	}
	for _, tt := range commits {
		t.Run("commit "+tt.name, func(t *testing.T) {
			status, body := post(t, srv.socket, "/v1/commit", tt.body)
			if status != tt.status {
				t.Errorf("status %d, want %d: %s", status, tt.status, body)
			}
			mustContain(t, body, tt.says...)
		})
	}
	for _, path := range []string{"/v1/batches?rank=0&rank=1&world=2", "/v1/batches?rank=0&world=1&world=1", "/v1/sample?index=0&index=1"} {
		status, body := getStatus(t, srv.socket, path)
		if status != 400 {
			t.Errorf("GET %s: status %d, want 400: %.200q", path, status, body)
		}
		if status == 400 {
			mustContain(t, body, "times: give")
		}
	}
	// A client of another protocol version, and a wrong method: refused,
	// saying what this sidecar serves.
	status, body := getStatus(t, srv.socket, "/v2/batches?rank=0&world=1")
	if status != http.StatusNotFound {
		t.Errorf("GET /v2/batches: status %d, want 404", status)
	}
	mustContain(t, body, "no endpoint GET /v2/batches", "speaks protocol v1", "GET /v1/batches", "POST /v1/commit", "client of the operator's release")
	status, body = getStatus(t, srv.socket, "/v1/commit")
	if status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/commit: status %d, want 405", status)
	}
	mustContain(t, body, "/v1/commit takes POST, not GET")
	resp, err := socketClient(srv.socket).Get("http://shardfeed/v1/state")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if v := resp.Header.Get("Shardfeed-Protocol"); v != "1" {
		t.Errorf("Shardfeed-Protocol header %q, want 1", v)
	}

	st, err := srv.client.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != 1 || st.Step != 3 {
		t.Fatalf("refused commits moved the state to (%d, %d)", st.Epoch, st.Step)
	}
	if _, err := srv.client.Commit(ctx, 1, 2, true); err != nil {
		t.Fatalf("a resumed client's backwards commit was refused: %v", err)
	}
}

func TestIntegrationServeEndsTheStreamWithAnErrorWhenAShardIsDeleted(t *testing.T) {
	ds := newDataset(t, 800, 0, "  numSplits: 1\n  globalBatchSize: 8\n  shuffle: {enabled: false}\n")
	srv := serve(t, ds, t.TempDir(), "--prefetch", "0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Every shard but the first is deleted before the stream starts: step
	// 0 is served, a later step finds its shard gone. (Deleting during the
	// stream would race with the sidecar, which may have written the whole
	// small epoch into the socket's buffer already.)
	for obj := range minioServer.Client.ListObjects(ctx, ds.bucket, minio.ListObjectsOptions{Prefix: "m/shard.", Recursive: true}) {
		if strings.HasPrefix(obj.Key, "m/shard.00000.") {
			continue
		}
		if err := minioServer.Client.RemoveObject(ctx, ds.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	st := openAfterFirst(ctx, t, srv.client)
	if err := endOf(st); !errors.Is(err, shardfeed.ErrCut) {
		t.Fatalf("the stream ended with %v, want it cut", err)
	}
	var status struct {
		LastErrors []struct{ Error string } `json:"lastErrors"`
	}
	if err := srv.client.Status(ctx, &status); err != nil {
		t.Fatal(err)
	}
	if len(status.LastErrors) == 0 {
		t.Fatal("/v1/status shows no error")
	}
	mustContain(t, status.LastErrors[0].Error, "shard.", "not found")
}

// TestIntegrationACommitWaitsForARestartingSidecar: a commit sent while the
// sidecar is down (its container killed, about to be restarted) is retried
// by the client until the sidecar is back, and recorded once.
func TestIntegrationACommitWaitsForARestartingSidecar(t *testing.T) {
	ds := newDataset(t, 600, 0, "  numSplits: 2\n  globalBatchSize: 8\n")
	dir := t.TempDir()
	srv := serve(t, ds, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.client.Commit(ctx, 0, 10, false); err != nil {
		t.Fatal(err)
	}
	srv.kill()
	type result struct {
		st  *shardfeed.State
		err error
	}
	done := make(chan result, 1)
	began := time.Now()
	go func() {
		st, err := srv.client.Commit(ctx, 0, 20, false)
		done <- result{st, err}
	}()
	time.Sleep(1500 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the commit returned while no sidecar was there: %+v, %v", r.st, r.err)
	default:
	}
	back := serve(t, ds, dir)
	r := <-done
	if r.err != nil {
		t.Fatalf("the commit failed although the sidecar came back: %v", r.err)
	}
	if r.st.Step != 20 || time.Since(began) < 1500*time.Millisecond {
		t.Fatalf("commit returned step %d after %s", r.st.Step, time.Since(began))
	}
	if _, err := back.client.Commit(ctx, 0, 20, false); err != nil {
		t.Fatal(err)
	}
	st, err := back.client.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range st.History {
		if c.Step == 20 {
			n++
		}
	}
	if st.Step != 20 || n != 1 {
		t.Fatalf("state step %d with %d history entries of step 20; want 20 and one (a repeated commit is recorded once)", st.Step, n)
	}
}
