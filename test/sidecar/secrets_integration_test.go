//go:build integration

package sidecar_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// TestIntegrationServeNeverShowsTheCredentials runs `shardfeed serve` with
// wrong credentials (it must fail, saying the store refused them) and with
// right ones (through a read and a commit), and looks for the credentials'
// values in everything it printed and in /v1/status and /v1/state.
func TestIntegrationServeNeverShowsTheCredentials(t *testing.T) {
	ds := newDataset(t, 200, 0, "  numSplits: 2\n  globalBatchSize: 4\n")
	wrong := t.TempDir()
	wrongKey, wrongSecret := "AKIAWRONGKEY0123456789", "wrong/secret+key0123456789abcdefghijkl"
	for name, v := range map[string]string{"AWS_ACCESS_KEY_ID": wrongKey, "AWS_SECRET_ACCESS_KEY": wrongSecret} {
		if err := os.WriteFile(filepath.Join(wrong, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out, err := runShardfeed("serve", "-f", ds.manifest, "--socket", filepath.Join(dir, "feed.sock"), "--cache-dir", filepath.Join(dir, "cache"),
		"--state", filepath.Join(dir, "state.json"), "--credentials-dir", wrong, "--metrics-addr", "")
	if err == nil {
		t.Fatalf("serve started with wrong credentials:\n%s", out)
	}
	t.Logf("serve with wrong credentials: %s", strings.TrimSpace(out))
	if !strings.Contains(out, "403") && !strings.Contains(strings.ToLower(out), "access key") {
		t.Fatalf("serve's error does not say the store refused the credentials:\n%s", out)
	}
	if strings.Contains(out, "shardfeed index") {
		t.Fatalf("serve's error suggests writing an index, but the index is there and the credentials are wrong:\n%s", out)
	}

	srv := serve(t, ds, t.TempDir())
	ctx := context.Background()
	if _, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1}, func(batch) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, srv.socket, "/v1/commit", `{"epoch": 0, "step": 3}`); code != 200 {
		t.Fatalf("commit: %d %s", code, body)
	}
	seen := out + srv.logs() + get(t, srv.socket, "/v1/status") + get(t, srv.socket, "/v1/state")
	right := credentialsEnv(t, ds)
	for _, v := range append([]string{wrongKey, wrongSecret}, right...) {
		v = v[strings.Index(v, "=")+1:]
		if strings.Contains(seen, v) {
			t.Errorf("a credential (%.4s…) is in serve's output, /v1/status or /v1/state", v)
		}
	}
}
