package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// FakeGCS is a running fake-gcs-server (bin/fake-gcs-server): Google Cloud
// Storage's JSON and XML APIs over plain HTTP, in memory, no credentials.
type FakeGCS struct {
	// URL is http://127.0.0.1:port, a stream's source.endpoint.
	URL     string
	proc    *serverProcess
	buckets atomic.Int64
}

// StartFakeGCS starts the server on a free port of 127.0.0.1 and waits
// until it answers. It dies with the test binary.
func StartFakeGCS(ctx context.Context) (*FakeGCS, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	f := &FakeGCS{URL: "http://" + host}
	f.proc, err = startServer(ctx, "fake-gcs-server", 30*time.Second, f.URL+"/storage/v1/b",
		"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port), "-backend", "memory",
		"-public-host", host, "-external-url", f.URL, "-log-level", "warn")
	if err != nil {
		return nil, err
	}
	return f, nil
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
func (f *FakeGCS) Stop() error { return f.proc.stop() }
