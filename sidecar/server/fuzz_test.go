package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
	"github.com/shardfeed/shardfeed/sidecar/server"
)

// fuzzServer is the API of a sidecar in pod mode (pod 0 of 2, 2 procs per
// pod) over a small MDS dataset on local files: 64 samples, 4 splits,
// global batches of 8.
func fuzzServer(f *testing.F) http.Handler {
	f.Helper()
	return testServer(f, nil)
}

// testServer is fuzzServer's sidecar with its metrics in reg (if not nil),
// its configuration changed by each of opts.
func testServer(f testing.TB, reg prometheus.Registerer, opts ...func(*server.Config)) http.Handler {
	f.Helper()
	dir := f.TempDir()
	if err := sampledata.MDS(filepath.Join(dir, "m"), "m", 64, 1<<10, ""); err != nil {
		f.Fatal(err)
	}
	var ds datav1alpha1.TrainingDataset
	manifest := sampledata.Manifest("ds", []sampledata.Stream{{Name: "m", Format: "mds", URI: "file://" + filepath.Join(dir, "m") + "/"}},
		"  numSplits: 4\n  globalBatchSize: 8\n  shuffle: {blockSize: 16}\n")
	if err := yaml.UnmarshalStrict([]byte(manifest), &ds); err != nil {
		f.Fatal(err)
	}
	feed, err := daemon.Open(context.Background(), daemon.Config{Dataset: ds.Name, Spec: ds.Spec, CacheDir: filepath.Join(dir, "cache"), Prefetch: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(feed.Pipeline.Close)
	st, err := progress.NewFileStore(filepath.Join(dir, "state.json"))
	if err != nil {
		f.Fatal(err)
	}
	job := progress.Job{Dataset: "ds", Job: "fuzz", Attempt: "a1", Fingerprint: feed.Plan.Fingerprint(), Steps: feed.Plan.Steps()}
	if _, err := progress.Register(context.Background(), st, job); err != nil {
		f.Fatal(err)
	}
	cfg := server.Config{Pipeline: feed.Pipeline, Progress: progress.Local{Store: st}, Job: job,
		Placement: sidecarconfig.Placement{RankMode: server.RankModePod, Pod: 0, Pods: 2, ProcsPerPod: 2}, Log: slog.New(slog.DiscardHandler), Registry: reg}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	srv.SetReady()
	return srv.Handler()
}

// FuzzAPI sends the sidecar's API arbitrary requests: any path, query and
// body. Whatever comes, the answer is a status the protocol defines, and an
// error is JSON that says what is wrong; nothing panics.
func FuzzAPI(f *testing.F) {
	h := fuzzServer(f)
	for _, seed := range []struct {
		post        bool
		path, query string
		body        string
	}{
		{false, "/v1/batches", "rank=0&world=4", ""},
		{false, "/v1/batches", "rank=1&world=4&worker=1&workers=2&epoch=1&step=3", ""},
		{false, "/v1/batches", "rank=2&world=4", ""},
		{false, "/v1/batches", "rank=0&world=4&step=99999999999", ""},
		{false, "/v1/batches", "rank=0&world=4&fingerprint=sha256:00", ""},
		{false, "/v1/batches", "rank=0&world=3&epoch=-1", ""},
		{false, "/v1/batches", "rank=0&world=4&bogus=1", ""},
		{true, "/v1/commit", "", `{"epoch": 0, "step": 2}`},
		{true, "/v1/commit", "", `{"epoch": 0, "step": 1, "resumed": true}`},
		{true, "/v1/commit", "", `{"epoch": 0, "step": 1}{"epoch": 0}`},
		{true, "/v1/commit", "", `{"epoch": -1, "step": 1e30}`},
		{true, "/v1/waits", "", `{"rank": 1, "seconds": [0.01, 0.5]}`},
		{true, "/v1/waits", "", `{"rank": 3, "seconds": [-1]}`},
		{false, "/v1/state", "", ""},
		{false, "/v1/status", "", ""},
		{false, "/v1/sample", "index=3", ""},
		{false, "/v1/sample", "index=999999", ""},
		{false, "/v1/steps", "epoch=0&from=3", ""},
		{false, "/v1/steps", "epoch=-1&from=x", ""},
		{false, "/readyz", "", ""},
	} {
		f.Add(seed.post, seed.path, seed.query, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, post bool, path, query string, body []byte) {
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		u := &url.URL{Path: path, RawQuery: query}
		if !strings.HasPrefix(path, "/") {
			u.Path = "/" + path
		}
		req := (&http.Request{Method: method, URL: u, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Host: "sidecar",
			RequestURI: u.RequestURI()}).WithContext(context.Background())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusNoContent, http.StatusNotFound, http.StatusMethodNotAllowed,
			http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect: // the mux cleaning a path
		case http.StatusBadRequest, http.StatusConflict, http.StatusServiceUnavailable:
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("%s %s: %d with a body that is not a JSON error: %q", method, u, rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("%s %s: status %d is not one the protocol defines: %q", method, u, rec.Code, rec.Body.String())
		}
	})
}

// FuzzCommit posts arbitrary bodies to /v1/commit: each is refused with a
// JSON error (400 malformed, 409 against the lineage) or recorded, and a
// recorded commit is what /v1/state then says.
func FuzzCommit(f *testing.F) {
	h := fuzzServer(f)
	for _, body := range []string{`{"epoch": 0, "step": 2}`, `{"epoch": 1, "step": 0, "resumed": true}`, `{"epoch": 0, "step": 99}`,
		`{"epoch": 0, "step": 1, "extra": 1}`, `{"epoch": 0,`, `[]`, `{"epoch": 0, "step": 3} trailing`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/commit", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			var sent, stored struct{ Epoch, Step int64 }
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatalf("commit %q accepted, but it is not JSON: %v", body, err)
			}
			state := httptest.NewRecorder()
			h.ServeHTTP(state, httptest.NewRequest(http.MethodGet, "/v1/state", nil))
			if err := json.Unmarshal(state.Body.Bytes(), &stored); err != nil || stored != sent {
				t.Fatalf("commit %q accepted, but the state says %s", body, state.Body.String())
			}
		case http.StatusBadRequest, http.StatusConflict:
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("commit %q: %d with a body that is not a JSON error: %q", body, rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("commit %q: status %d: %q", body, rec.Code, rec.Body.String())
		}
	})
}
