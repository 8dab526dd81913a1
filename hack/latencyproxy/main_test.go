package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv/latencyproxy"
)

func TestTheCommandPrintsItsAddressThenItsCounts(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("bytes")) }))
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--upstream", store.Listener.Addr().String(), "--delay", "5ms", "--rate", "1000"}, w)
		_ = w.Close()
	}()
	lines := bufio.NewScanner(r)
	if !lines.Scan() {
		t.Fatalf("no address line: %v", <-done)
	}
	var addr struct{ Addr, URL string }
	if err := json.Unmarshal(lines.Bytes(), &addr); err != nil || !strings.HasPrefix(addr.URL, "http://127.0.0.1:") {
		t.Fatalf("address line %q: %v", lines.Text(), err)
	}
	for _, rng := range []string{"", "bytes=0-1"} {
		req, _ := http.NewRequest(http.MethodGet, addr.URL+"/bucket/key", nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	cancel()
	if !lines.Scan() {
		t.Fatalf("no counts line: %v", <-done)
	}
	var c latencyproxy.Counts
	if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
		t.Fatalf("counts line %q: %v", lines.Text(), err)
	}
	if c.Get != 1 || c.GetRanged != 1 || c.Requests() != 2 || c.BytesOut != 10 {
		t.Errorf("counts %s, want a whole GET and a ranged one of 5 bytes each", c)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestTheCommandNeedsAnUpstream(t *testing.T) {
	if err := run(context.Background(), []string{"--delay", "30ms"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--upstream") {
		t.Errorf("without --upstream: %v", err)
	}
}
