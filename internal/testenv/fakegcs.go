package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// FakeGCS is a running fake-gcs-server (bin/fake-gcs-server): Google Cloud
// Storage's JSON and XML APIs over plain HTTP, in memory, no credentials.
type FakeGCS struct {
	// URL is http://127.0.0.1:port, a stream's source.endpoint.
	URL     string
	cmd     *exec.Cmd
	dir     string
	buckets atomic.Int64
}

// StartFakeGCS starts the server on a free port of 127.0.0.1 and waits
// until it answers. It dies with the test binary.
func StartFakeGCS(ctx context.Context) (*FakeGCS, error) {
	bin, err := binary("fake-gcs-server")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "shardfeed-fakegcs-")
	if err != nil {
		return nil, err
	}
	f := &FakeGCS{URL: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	log, err := os.Create(filepath.Join(dir, "fake-gcs-server.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	f.cmd = exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-backend", "memory",
		"-public-host", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "-external-url", f.URL, "-log-level", "warn")
	f.cmd.Stdout, f.cmd.Stderr = log, log
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"/storage/v1/b", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return f, nil
			}
		}
		select {
		case <-ctx.Done():
			_ = f.Stop()
			if err == nil {
				err = ctx.Err()
			}
			out, _ := os.ReadFile(filepath.Join(dir, "fake-gcs-server.log"))
			return nil, fmt.Errorf("fake-gcs-server did not answer within 30 s: %w\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Bucket creates a fresh bucket for one test.
func (f *FakeGCS) Bucket(t testing.TB) string {
	t.Helper()
	name := bucketName(t.Name(), f.buckets.Add(1))
	body := fmt.Sprintf(`{"name": %q}`, name)
	resp, err := http.Post(f.URL+"/storage/v1/b?project=test", "application/json", strings.NewReader(body)) //nolint:noctx // a local test server
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("creating bucket %s: %s", name, resp.Status)
	}
	return name
}

// Stop kills the server and removes its directory.
func (f *FakeGCS) Stop() error {
	if f.cmd != nil && f.cmd.Process != nil {
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	}
	return os.RemoveAll(f.dir)
}
