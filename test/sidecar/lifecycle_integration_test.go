//go:build integration

package sidecar_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/planner"
)

func TestIntegrationReconnectingAtStepKContinuesAtStepK(t *testing.T) {
	ds := newDataset(t, 900, 0, "  numSplits: 3\n  globalBatchSize: 9\n  shuffle: {blockSize: 50}\n")
	// A memory limit of one byte: decoded shards are dropped as soon as no
	// batch holds them, and decoded again from the cache when needed.
	srv := serve(t, ds, t.TempDir(), "--memory-limit", "1")
	plan := planIDs(t, ds, 0, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 1, World: 3}, func(b batch) bool { return b.step < 4 })
	if err != nil || len(got) != 5 {
		t.Fatalf("first connection: %d batches, %v", len(got), err)
	}
	// The client went away after step 4; it comes back for step 5.
	rest, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 1, World: 3, Step: ptr(int64(5))}, nil)
	if err != nil {
		t.Fatalf("%v\nserve's log:\n%s", err, srv.logs()) // why the server cut it
	}
	if len(rest) == 0 || rest[0].step != 5 {
		t.Fatalf("reconnecting at step 5 gave %d batches from step %v", len(rest), rest)
	}
	for _, b := range append(got, rest...) {
		if err := sameBatch(b, plan[[2]int64{b.step, 1}]); err != nil {
			t.Fatal(err)
		}
	}
	if n := int64(len(got) + len(rest)); n != int64(len(plan)/3)+0 && n != int64(len(plan)/3) {
		t.Fatalf("%d batches", n)
	}
	var status struct {
		FetchedRows int64 `json:"fetchedRows"`
		DecodedRows int64 `json:"decodedRows"`
		LastErrors  []any `json:"lastErrors"`
		Streams     []struct {
			Active   bool   `json:"active"`
			Finished bool   `json:"finished"`
			Error    string `json:"error"`
		} `json:"streams"`
	}
	// The streams have ended; the server lets go of their last batches'
	// shards a moment later.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := srv.client.Status(ctx, &status); err != nil {
			t.Fatal(err)
		}
		if status.DecodedRows == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(status.LastErrors) != 0 {
		t.Fatalf("a client going away was reported as an error: %v", status.LastErrors)
	}
	if status.DecodedRows != 0 || status.FetchedRows == 0 {
		t.Fatalf("with a 1-byte memory limit: %d rows decoded, %d fetched and not decoded", status.DecodedRows, status.FetchedRows)
	}

	// The socket: any user of the pod connects; a second server on it is
	// refused while the first one lives.
	fi, err := os.Stat(srv.socket)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v, %v", srv.socket, fi.Mode(), err)
	}
	out, err := runShardfeed("serve", "-f", ds.manifest, "--socket", srv.socket, "--cache-dir", t.TempDir(), "--state", filepath.Join(t.TempDir(), "s.json"),
		"--credentials-dir", ds.credentials, "--metrics-addr", "")
	if err == nil {
		t.Fatal("a second serve took a live socket")
	}
	mustContain(t, out, "is served by another process")

	// The injected sidecar's startup probe.
	if out, err := runShardfeed("probe", "--socket", srv.socket); err != nil || !strings.Contains(out, "ready") {
		t.Fatalf("probe on a ready sidecar: %v\n%s", err, out)
	}
	if out, err := runShardfeed("probe", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--timeout", "200ms"); err == nil || !strings.Contains(out, "not ready") {
		t.Fatalf("probe on no sidecar: %v\n%s", err, out)
	}
}

func TestIntegrationSIGTERMEndsStreamsAfterTheBatchInFlightAndRemovesTheSocket(t *testing.T) {
	// 24 MiB per epoch: more than the socket buffers hold, so the stream
	// is still being written when SIGTERM comes.
	ds := newTokenDataset(t, 3000, "  numSplits: 3\n  globalBatchSize: 30\n")
	dir := t.TempDir()
	srv := serve(t, ds, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := srv.client.Commit(ctx, 0, 2, false); err != nil {
		t.Fatal(err)
	}
	st := openAfterFirst(ctx, t, srv.client)
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30 s of SIGTERM\n%s", srv.logs())
	}
	if srv.err != nil {
		t.Fatalf("serve exited with %v after SIGTERM\n%s", srv.err, srv.logs())
	}
	if err := endOf(st); !errors.Is(err, shardfeed.ErrCut) {
		t.Fatalf("the open stream ended with %v, want it cut (no end-of-stream marker)", err)
	}
	if _, err := os.Stat(srv.socket); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket is still there after SIGTERM: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := configmaps.ParseState(data)
	if err != nil || s.Step != 2 {
		t.Fatalf("state after SIGTERM: %+v, %v", s, err)
	}
	// What it read, reported as it stopped: its last log line's count.
	m := regexp.MustCompile(`"Stopped".*storeBytes=(\d+)|msg=Stopped.*storeBytes=(\d+)`).FindStringSubmatch(srv.logs())
	if m == nil {
		t.Fatalf("no Stopped line with storeBytes in the log:\n%s", srv.logs())
	}
	if want := m[1] + m[2]; s.Reads == nil || fmt.Sprint(s.Reads.StoreBytes) != want || want == "0" {
		t.Fatalf("the state's reads after SIGTERM: %+v, want the %s store bytes the sidecar logged", s.Reads, want)
	}
}

func TestIntegrationSidecarInPodModeServesOnlyItsPodAndFetchesEachShardOnce(t *testing.T) {
	ds := newDataset(t, 1000, 0, "  numSplits: 8\n  globalBatchSize: 16\n  shuffle: {blockSize: 64}\n")
	dir := t.TempDir()
	metricsAddr := freeAddr(t)
	// Pod 1 of 2 with two local ranks: ranks 2 and 3 of 4.
	// In a pod, a stream without credentialsSecretRef uses the default
	// chain: here, the environment.
	srv := startEnv(t, dir, credentialsEnv(t, ds), "sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
		"--cache-dir", filepath.Join(dir, "cache"), "--state", filepath.Join(dir, "state.json"), "--metrics-addr", metricsAddr, "--metrics-tls",
		"--rank-mode", "pod", "--pods", "2", "--pod-rank", "1", "--procs-per-pod", "2", "--job", "train-1", "--attempt", "a1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := srv.client.Batches(ctx, shardfeed.Request{Rank: 1, World: 4})
	var apiErr *shardfeed.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Fatalf("rank 1 of pod 0 at pod 1's sidecar: %v", err)
	}
	mustContain(t, apiErr.Message, "rank 1 belongs to pod 0, this is pod 1 (ranks 2 to 3)")
	_, err = srv.client.Batches(ctx, shardfeed.Request{Rank: 2, World: 8})
	if !errors.As(err, &apiErr) || apiErr.Field != "world" {
		t.Fatalf("world 8 for a job of 4 ranks: %v", err)
	}
	plan := planIDs(t, ds, 0, 4, 1)
	for _, rank := range []int{2, 3} {
		got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: rank, World: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range got {
			if err := sameBatch(b, plan[[2]int64{b.step, int64(rank)}]); err != nil {
				t.Fatalf("rank %d: %v", rank, err)
			}
		}
	}
	var status struct {
		Pipeline struct {
			Cache struct{ Downloads, FetchedBytes, AheadDownloads, AheadBytes int64 } `json:"cache"`
		} `json:"pipeline"`
		Store struct {
			Requests, Gets, Stats, Lists, Retries, ReadBytes, AheadGets int64
		} `json:"store"`
		ConsumedRows int64            `json:"consumedRows"`
		StreamRows   map[string]int64 `json:"streamRows"`
	}
	if err := srv.client.Status(ctx, &status); err != nil {
		t.Fatal(err)
	}
	if want := int64(len(plan) / 2 * 4); status.ConsumedRows != want || status.StreamRows["m"] != want {
		t.Fatalf("status counts %d rows (%v per stream), the pod's ranks read %d", status.ConsumedRows, status.StreamRows, want)
	}
	summary := planSummary(t, ds, 2)
	// Beside the next epoch's first shards, fetched ahead.
	c := status.Pipeline.Cache
	if c.Downloads-c.AheadDownloads != int64(summary.shards) || c.FetchedBytes-c.AheadBytes != summary.bytes {
		t.Fatalf("the pod downloaded %d shards (%d bytes) besides %d ahead, its splits need %d distinct shards (%d bytes)",
			c.Downloads-c.AheadDownloads, c.FetchedBytes-c.AheadBytes, c.AheadDownloads, summary.shards, summary.bytes)
	}
	// Every request to the store is counted: one GET per shard, and the
	// few the index took at start (no retries here).
	st := status.Store
	if index := st.Gets - c.Downloads; index < 1 || index > 3 || st.Retries != 0 || st.AheadGets != c.AheadDownloads ||
		st.Requests != st.Gets+st.Stats+st.Lists || st.ReadBytes <= status.Pipeline.Cache.FetchedBytes {
		t.Fatalf("the store's requests: %+v for %d downloads of %d bytes", st, status.Pipeline.Cache.Downloads, status.Pipeline.Cache.FetchedBytes)
	}
	// As injected into pods: metrics over TLS only.
	if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("the sidecar serves its metrics over plain HTTP with --metrics-tls")
		}
	}
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // as Prometheus scrapes a self-signed sidecar
	resp, err := scraper.Get("https://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "shardfeed-sidecar" {
		t.Fatalf("metrics not served over the sidecar's own TLS certificate: %+v", resp.TLS)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, m := range []string{"shardfeed_sidecar_batches_served_total", "shardfeed_sidecar_batch_wait_seconds_bucket",
		"shardfeed_sidecar_fetched_bytes_total " + fmt.Sprint(summary.bytes), `shardfeed_sidecar_stream_rows_served_total{stream="m"}`,
		fmt.Sprintf(`shardfeed_sidecar_store_requests_total{op="get"} %d`, st.Gets)} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics has no %q", m)
		}
	}
}

func TestIntegrationSidecarRefusesAJobCommittedUnderAnotherPlan(t *testing.T) {
	ds := newDataset(t, 300, 0, "  numSplits: 2\n  globalBatchSize: 4\n")
	dir := t.TempDir()
	state := &configmaps.State{Layout: configmaps.LayoutVersion, Job: "local", Epoch: 0, Step: 3,
		Fingerprint: planner.Fingerprint{Sum: "v1-other", Inputs: map[string]string{"spec.numSplits": "4", "spec.globalBatchSize": "4"}}}
	data, _ := configmaps.StateData(state)
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(data[configmaps.KeyState]), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runShardfeed("serve", "-f", ds.manifest, "--socket", filepath.Join(dir, "feed.sock"), "--cache-dir", filepath.Join(dir, "cache"),
		"--state", filepath.Join(dir, "state.json"), "--credentials-dir", ds.credentials, "--metrics-addr", "")
	if err == nil {
		t.Fatalf("serve accepted a state of another plan:\n%s", out)
	}
	mustContain(t, out, "committed progress under plan v1-other", "spec.numSplits: 4, now 2", "new TrainingDataset")
}

func TestIntegrationSidecarReadsTheMountedPlanConfigMap(t *testing.T) {
	ds := newDataset(t, 400, 0, "  numSplits: 2\n  globalBatchSize: 4\n")
	obj, fingerprint := plannedDataset(t, ds)
	dir := t.TempDir()
	writePlanDir(t, filepath.Join(dir, "plan"), obj.Spec, fingerprint)
	env := append(credentialsEnv(t, ds), "SHARDFEED_DATASET=feed", "SHARDFEED_PLAN_DIR="+filepath.Join(dir, "plan"), "SHARDFEED_JOB=j",
		"SHARDFEED_RANK_MODE=client", "SHARDFEED_SOCKET="+filepath.Join(dir, "run", "feed.sock"), "SHARDFEED_CACHE_DIR="+filepath.Join(dir, "cache"))
	srv := startEnv(t, dir, env, "sidecar", "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 2}, nil)
	if err != nil || len(got) != 100 {
		t.Fatalf("%d batches, %v", len(got), err)
	}
	srv.kill()

	// The operator planned other indexes: the sidecar refuses to serve.
	writePlanDir(t, filepath.Join(dir, "plan"), obj.Spec, "v1-stale")
	cmd := exec.Command(binary, "sidecar", "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "")
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the sidecar served a plan whose indexes changed:\n%s", b)
	}
	mustContain(t, string(b), "the indexes changed since the operator planned", "v1-stale")
}

// TestIntegrationAReplacedAttemptStaysFencedForGood: real sidecar processes
// of one job share its state; the operator gave each attempt its
// generation (SHARDFEED_GENERATION). After many more attempts than the
// state lists (hardening issue, finding 5), the first attempt's running
// sidecar cannot commit, and restarted with its pod's generation it
// refuses to start, while the newest attempt commits.
func TestIntegrationAReplacedAttemptStaysFencedForGood(t *testing.T) {
	ds := newDataset(t, 400, 0, "  numSplits: 4\n  globalBatchSize: 8\n")
	state := filepath.Join(t.TempDir(), "state.json")
	env := func(attempt string, gen int64) []string {
		return append(credentialsEnv(t, ds), "SHARDFEED_JOB=train-1", "SHARDFEED_ATTEMPT="+attempt, fmt.Sprintf("SHARDFEED_GENERATION=%d", gen),
			"SHARDFEED_PODS=2", "SHARDFEED_POD_RANK=0")
	}
	args := func(dir string) []string {
		return []string{"sidecar", "-f", ds.manifest, "--state", state, "--socket", filepath.Join(dir, "run", "feed.sock"),
			"--cache-dir", filepath.Join(dir, "cache"), "--metrics-addr", ""}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := progress.NewFileStore(state)
	if err != nil {
		t.Fatal(err)
	}
	// The operator admits the first attempt, whose sidecar commits.
	if _, err := progress.Admit(ctx, store, "feed", "train-1", "a1", "img"); err != nil {
		t.Fatal(err)
	}
	firstDir := t.TempDir()
	first := startEnv(t, firstDir, env("a1", 1), args(firstDir)...)
	if _, err := first.client.Commit(ctx, 0, 3, false); err != nil {
		t.Fatal(err)
	}
	// The job is replaced, again and again.
	const attempts = 3 * configmaps.MaxAttempts
	for i := range attempts {
		if _, err := progress.Admit(ctx, store, "feed", "train-1", fmt.Sprintf("b%d", i), "img"); err != nil {
			t.Fatal(err)
		}
	}
	newestDir := t.TempDir()
	newest := startEnv(t, newestDir, env(fmt.Sprintf("b%d", attempts-1), attempts+1), args(newestDir)...)
	_, err = first.client.Commit(ctx, 0, 5, false)
	var apiErr *shardfeed.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Fatalf("a commit of the first attempt after %d newer ones: %v", attempts, err)
	}
	mustContain(t, apiErr.Message, `attempt "a1" (generation 1) is fenced`, fmt.Sprintf("(generation %d)", attempts+1))
	first.kill()
	restarted := exec.Command(binary, args(t.TempDir())...)
	restarted.Env = append(os.Environ(), env("a1", 1)...)
	out, err := restarted.CombinedOutput()
	if err == nil {
		t.Fatalf("the first attempt's sidecar restarted and served:\n%s", out)
	}
	mustContain(t, string(out), `attempt "a1" (generation 1) is fenced`)
	st, err := newest.client.Commit(ctx, 0, 4, false)
	if err != nil || st.Step != 4 {
		t.Fatalf("the newest attempt's commit: %+v, %v", st, err)
	}
}
