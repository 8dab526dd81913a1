// Package server serves a pipeline's batches over HTTP/1.1 on a Unix socket
// (design §5): GET /v1/batches streams a DataLoader worker's batches as
// Arrow IPC, POST /v1/commit records progress, and /v1/state, /v1/status,
// /v1/sample, /healthz and /readyz tell what the sidecar is doing.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/version"
	"github.com/shardfeed/shardfeed/sidecar/handoff"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// Rank modes (design §5).
const (
	// RankModePod serves only the ranks of this pod.
	RankModePod = sidecarconfig.RankModePod
	// RankModeClient serves any rank a client names.
	RankModeClient = sidecarconfig.RankModeClient
)

// Config configures a Server.
type Config struct {
	Pipeline *pipeline.Pipeline
	Progress progress.Ledger
	Job      progress.Job
	// Placement is the ranks this sidecar serves; with a declared
	// data-parallel size, requests name their data-parallel rank, and
	// batches are those of that rank.
	sidecarconfig.Placement
	// Handoff bounds the shared memory batches are handed over in (nil or
	// a zero limit: batches go in the stream), HandoffSlots segments per
	// stream at most.
	Handoff      *handoff.Pool
	HandoffSlots int
	Log          *slog.Logger
	// Registry receives the metrics; nil: none.
	Registry prometheus.Registerer
	// StoreCounts are the requests the streams' stores made; nil: not
	// counted.
	StoreCounts *store.Counts
}

// Server is the sidecar's HTTP API.
type Server struct {
	cfg     Config
	metrics *metrics
	started time.Time

	mu      sync.Mutex
	streams map[string]*streamStatus
	// streamRows counts the rows served per dataset stream.
	streamRows map[string]int64
	errs       []errorRecord
	draining   chan struct{}
	drain      sync.Once
	// active counts the batch streams being written: their connections
	// are hijacked, so http.Server.Shutdown does not wait for them.
	active sync.WaitGroup
	ready  bool
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.HandoffSlots == 0 {
		cfg.HandoffSlots = handoff.DefaultSlots
	}
	if cfg.ProcsPerPod < 1 {
		cfg.ProcsPerPod = 1
	}
	if err := cfg.Check(cfg.Pipeline.Plan()); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, streams: map[string]*streamStatus{}, streamRows: map[string]int64{}, draining: make(chan struct{}), started: time.Now()}
	s.metrics = newMetrics(s, cfg.Registry)
	return s, nil
}

// ProtocolVersion is the version of the socket API: the /v1/ prefix of
// its paths, and the ProtocolHeader of every response. A new version gets
// new paths beside the old ones, which a sidecar keeps serving for one
// release, so a client and a sidecar one release apart work together; a
// client farther apart gets a 404 that says what this sidecar serves.
const ProtocolVersion = 1

// ProtocolHeader carries ProtocolVersion on every response.
const ProtocolHeader = "Shardfeed-Protocol"

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	endpoints := []struct {
		method, path string
		handle       http.HandlerFunc
	}{
		{http.MethodGet, "/v1/batches", s.batches},
		{http.MethodPost, "/v1/commit", s.commit},
		{http.MethodPost, "/v1/waits", s.waits},
		{http.MethodGet, "/v1/state", s.state},
		{http.MethodGet, "/v1/status", s.status},
		{http.MethodGet, "/v1/sample", s.sample},
		{http.MethodGet, "/v1/steps", s.steps},
		{http.MethodGet, "/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }},
		{http.MethodGet, "/readyz", s.readyz},
	}
	methods := map[string]string{}
	var served []string
	for _, e := range endpoints {
		mux.HandleFunc(e.method+" "+e.path, e.handle)
		methods[e.path] = e.method
		served = append(served, e.method+" "+e.path)
	}
	// Anything else: a wrong method, or a client of another protocol.
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		if m, ok := methods[req.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: fmt.Sprintf("%s takes %s, not %s", req.URL.Path, m, req.Method)})
			return
		}
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf(
			"no endpoint %s %s: this sidecar (shardfeed %s) speaks protocol v%d (%s); a client more than one release away from the sidecar does not work with it: use the client of the operator's release",
			req.Method, req.URL.Path, version.Get().Version, ProtocolVersion, strings.Join(served, ", "))})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set(ProtocolHeader, strconv.Itoa(ProtocolVersion))
		mux.ServeHTTP(w, req)
	})
}

// SetReady marks the sidecar ready (its first batches are prepared).
func (s *Server) SetReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = true
}

// Drain makes every stream end after the batch it is writing.
func (s *Server) Drain() { s.drain.Do(func() { close(s.draining) }) }

// Listen opens the Unix socket at path: its directory is created, a stale
// socket left by a killed process is removed, a live one is an error, and
// the socket is made mode 0666 so any user of the pod's containers connects.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it or choose another --socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("%s is served by another process: stop it or choose another --socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil { //nolint:gosec // any container user of the pod connects (design §5)
		_ = l.Close()
		return nil, err
	}
	return bufferedListener{l}, nil
}

// socketBuffer is the send buffer asked for each connection: a batch of a
// few MiB then crosses in a few wake-ups instead of dozens (the kernel caps
// it at net.core.wmem_max).
const socketBuffer = 4 << 20

type bufferedListener struct{ net.Listener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.SetWriteBuffer(socketBuffer)
	}
	return c, err
}

// Serve serves the API on l until ctx ends, then shuts down gracefully:
// it stops accepting, lets every stream finish the batch in flight, and
// closes the listener (which removes the socket).
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Drain()
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdown)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	done := make(chan struct{})
	go func() { s.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-shutdown.Done():
	}
	return err
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	// Field names the request parameter to fix, if one.
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func badRequest(w http.ResponseWriter, field, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf(format, args...), Field: field})
}
