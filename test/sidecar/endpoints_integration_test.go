//go:build integration

package sidecar_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// The sidecar checks every request and every address it connects to
// against the platform's endpoint policy, as the webhook passes it
// (SHARDFEED_ALLOWED_ENDPOINTS, SHARDFEED_ALLOW_CLOUD_ENDPOINTS): with "*"
// alone, a store on loopback is refused before any request (an author's
// name may point at the node's metadata service or the pod's own
// loopback); listed by its address, the same store is read.
func TestIntegrationTheSidecarChecksThePlatformsEndpoints(t *testing.T) {
	ds := newDataset(t, 200, 0, "  numSplits: 2\n  globalBatchSize: 4\n")
	dir := t.TempDir()
	args := []string{"sidecar", "-f", ds.manifest, "--state", filepath.Join(dir, "state.json"), "--socket", filepath.Join(dir, "run", "feed.sock"),
		"--cache-dir", filepath.Join(dir, "cache"), "--metrics-addr", "", "--job", "train-1", "--attempt", "a1"}
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), append(credentialsEnv(t, ds), "SHARDFEED_ALLOWED_ENDPOINTS=*", "SHARDFEED_ALLOW_CLOUD_ENDPOINTS=true")...)
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the sidecar read a store on loopback allowed only by *:\n%s", b)
	}
	mustContain(t, string(b), "a loopback address", "datasets.allowedEndpoints")

	u, err := url.Parse(minioServer.URL())
	if err != nil {
		t.Fatal(err)
	}
	srv := startEnv(t, dir, append(credentialsEnv(t, ds), "SHARDFEED_ALLOWED_ENDPOINTS="+u.Hostname(), "SHARDFEED_ALLOW_CLOUD_ENDPOINTS=true"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1}, nil)
	if err != nil || len(got) != 50 {
		t.Fatalf("%d batches, %v; want the epoch's 50 from the listed store", len(got), err)
	}
}
