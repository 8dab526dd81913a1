// Package shardfeed is the Go client of the shardfeed sidecar: it reads a
// DataLoader worker's batches from the sidecar's Unix socket as Arrow
// records, commits progress and reads the job's state (design §5, §6).
package shardfeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/shardfeed/shardfeed/clients/go/bufpool"
)

// SocketEnv names the environment variable with the socket's path.
const SocketEnv = "SHARDFEED_SOCKET"

// Client talks to one sidecar.
type Client struct {
	socket string
	http   *http.Client
}

// Where a sidecar listens unless told otherwise: in a pod, the injected
// sidecar's socket; on one machine, `shardfeed serve`'s, relative to its
// working directory (the Python client looks in the same two places).
const (
	PodSocket   = "/var/run/shardfeed/feed.sock"
	LocalSocket = ".shardfeed/feed.sock"
)

// DefaultSocket is the socket New uses for "": $SHARDFEED_SOCKET, else
// the pod's socket if it exists, else serve's in the working directory if
// it exists, else the pod's (errors then name it).
func DefaultSocket() string {
	if s := os.Getenv(SocketEnv); s != "" {
		return s
	}
	if _, err := os.Stat(podSocket); err == nil {
		return podSocket
	}
	if _, err := os.Stat(LocalSocket); err == nil {
		if abs, err := filepath.Abs(LocalSocket); err == nil {
			return abs
		}
	}
	return podSocket
}

// podSocket is PodSocket, a variable for tests on a machine that may have one.
var podSocket = PodSocket

// New returns a client of the sidecar at socket ("": DefaultSocket).
func New(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket()
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if uc, ok := c.(*net.UnixConn); ok {
				// Batches are MiBs: a large receive buffer halves the wake-ups.
				_ = uc.SetReadBuffer(4 << 20)
			}
			return c, err
		},
		DisableCompression: true,
		MaxIdleConns:       8,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket returns the socket's path.
func (c *Client) Socket() string { return c.socket }

// APIError is an error response of the sidecar.
type APIError struct {
	Status  int
	Message string `json:"error"`
	// Field is the request parameter to fix, if one.
	Field string `json:"field"`
}

func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("sidecar: %d: %s: %s", e.Status, e.Field, e.Message)
	}
	return fmt.Sprintf("sidecar: %d: %s", e.Status, e.Message)
}

// ErrCut is returned by Stream.Next when a stream ends without the Arrow
// end-of-stream marker: the sidecar failed mid-stream (its /v1/status says
// why) or went away. Reconnecting at the next step continues exactly.
var ErrCut = errors.New("the batch stream was cut before its end")

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	u := "http://shardfeed" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sidecar at %s: %w", c.socket, err)
	}
	if resp.StatusCode/100 != 2 {
		defer func() { _ = resp.Body.Close() }()
		e := &APIError{Status: resp.StatusCode}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(data))
		}
		return nil, e
	}
	return resp, nil
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	return json.NewDecoder(resp.Body).Decode(v)
}

// WaitReady polls /readyz until the sidecar is ready or ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	for {
		resp, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil)
		if err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sidecar at %s is not ready: %w (last: %w); in a pod, label it shardfeed.io/dataset=<name>; on one machine, run shardfeed serve -f dataset.yaml here, or set %s", c.socket, context.Cause(ctx), err, SocketEnv)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Request selects a DataLoader worker's batches.
type Request struct {
	Rank, World int
	// DataParallel, if set, is the rank's data-parallel coordinates when
	// the job's ranks form replication groups: the batches are those of
	// DataParallel.Rank of DataParallel.Size.
	DataParallel *DataParallel
	// Worker of Workers (0 and 1 without DataLoader workers).
	Worker, Workers int
	// Epoch, if set; else the committed epoch.
	Epoch *int64
	// Step, if set, is this worker's first step (from a checkpoint); else
	// the committed step plus Worker.
	Step *int64
	// Fingerprint, if set, must be the sidecar's plan.
	Fingerprint string
	// Handoff asks for the batches in shared memory (the sidecar sends
	// them in the stream when it cannot): fewer copies through the kernel.
	Handoff bool
}

// DataParallel is a rank's data-parallel coordinates.
type DataParallel struct{ Rank, Size int }

// Stream is a worker's batches, in order.
type Stream struct {
	Epoch, StartStep, Steps int64
	Fingerprint             string
	body                    io.ReadCloser
	reader                  *ipc.Reader
	done                    bool
}

// Batches opens the stream of req's batches.
func (c *Client) Batches(ctx context.Context, req Request) (*Stream, error) {
	q := url.Values{}
	q.Set("rank", strconv.Itoa(req.Rank))
	q.Set("world", strconv.Itoa(req.World))
	if dp := req.DataParallel; dp != nil {
		q.Set("dp_rank", strconv.Itoa(dp.Rank))
		q.Set("dp_size", strconv.Itoa(dp.Size))
	}
	q.Set("worker", strconv.Itoa(req.Worker))
	q.Set("workers", strconv.Itoa(max(req.Workers, 1)))
	if req.Epoch != nil {
		q.Set("epoch", strconv.FormatInt(*req.Epoch, 10))
	}
	if req.Step != nil {
		q.Set("step", strconv.FormatInt(*req.Step, 10))
	}
	if req.Fingerprint != "" {
		q.Set("fingerprint", req.Fingerprint)
	}
	var body io.ReadCloser
	var header http.Header
	if req.Handoff {
		q.Set("handoff", "memfd")
		hb, h, err := c.openHandoff(ctx, "/v1/batches?"+q.Encode())
		if err != nil {
			return nil, err
		}
		body, header = hb, h
	} else {
		resp, err := c.do(ctx, http.MethodGet, "/v1/batches", q, nil) //nolint:bodyclose // the Stream closes it
		if err != nil {
			return nil, err
		}
		body, header = resp.Body, resp.Header
	}
	s := &Stream{body: body, Fingerprint: header.Get("Shardfeed-Fingerprint")}
	var err error
	for _, h := range []struct {
		name string
		into *int64
	}{{"Shardfeed-Epoch", &s.Epoch}, {"Shardfeed-Start-Step", &s.StartStep}, {"Shardfeed-Steps", &s.Steps}} {
		if *h.into, err = strconv.ParseInt(header.Get(h.name), 10, 64); err != nil {
			_ = body.Close()
			return nil, fmt.Errorf("sidecar at %s: header %s is %q", c.socket, h.name, header.Get(h.name))
		}
	}
	// Each record is released at the next Next, so its message body goes
	// back to the pool for the next one.
	s.reader, err = ipc.NewReader(&eosReader{r: body}, ipc.WithAllocator(bufpool.Shared), ipc.WithDelayReadSchema(true))
	if err != nil {
		_ = body.Close()
		return nil, fmt.Errorf("sidecar at %s: %w", c.socket, err)
	}
	return s, nil
}

// Next returns the next batch; io.EOF after the last one, ErrCut (wrapped)
// when the stream was cut. The record is valid until the next call; Retain
// it to keep it.
func (s *Stream) Next() (arrow.RecordBatch, error) {
	if s.done {
		return nil, io.EOF
	}
	if s.reader.Next() {
		return s.reader.RecordBatch(), nil
	}
	s.done = true
	if err := s.reader.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCut, err)
	}
	return nil, io.EOF
}

// HandedOff reports whether the last batch Next returned came in shared
// memory (Request.Handoff), not in the stream.
func (s *Stream) HandedOff() bool {
	hb, ok := s.body.(*handoffBody)
	return ok && hb.inMemory
}

// Schema returns the batches' schema (after the first Next).
func (s *Stream) Schema() *arrow.Schema { return s.reader.Schema() }

// Close ends the stream; the sidecar stops assembling its batches.
func (s *Stream) Close() error {
	s.reader.Release()
	return s.body.Close()
}

// Commit records that every rank finished the steps of epoch before step
// and that the checkpoint is saved; resumed says this client resumed from
// its own older checkpoint. It returns the stored state.
//
// A sidecar that is away (its container restarting) or answers 503 is
// asked again for up to CommitWait: the same commit twice records it once.
func (c *Client) Commit(ctx context.Context, epoch, step int64, resumed bool) (*State, error) {
	body, _ := json.Marshal(map[string]any{"epoch": epoch, "step": step, "resumed": resumed})
	deadline := time.Now().Add(CommitWait)
	pause := 100 * time.Millisecond
	for {
		resp, err := c.do(ctx, http.MethodPost, "/v1/commit", nil, strings.NewReader(string(body)))
		if err == nil {
			defer func() { _ = resp.Body.Close() }()
			var st State
			return &st, json.NewDecoder(resp.Body).Decode(&st)
		}
		var api *APIError
		if (errors.As(err, &api) && api.Status != http.StatusServiceUnavailable) || ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// CommitWait is how long Commit waits for a sidecar that is away.
var CommitWait = 2 * time.Minute

// ReportWaits sends the seconds a rank's training loop waited for each of
// its batches since its last report (POST /v1/waits): the sidecar's
// shardfeed_sidecar_data_wait_seconds{rank}, which the dashboard and the
// ShardfeedTrainingStarved alert read. Report every few seconds, at most
// 4096 waits at a time; a lost report is a gap in a graph, so callers
// need not retry.
func (c *Client) ReportWaits(ctx context.Context, rank int, seconds []float64) error {
	body, err := json.Marshal(map[string]any{"rank": rank, "seconds": seconds})
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/waits", nil, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// State returns the job's committed state.
func (c *Client) State(ctx context.Context) (*State, error) {
	var st State
	return &st, c.getJSON(ctx, "/v1/state", &st)
}

// Status decodes the sidecar's /v1/status into v.
func (c *Client) Status(ctx context.Context, v any) error {
	return c.getJSON(ctx, "/v1/status", v)
}

// Sample returns the one-row batch of global sample id g.
func (c *Client) Sample(ctx context.Context, g int64) (arrow.RecordBatch, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/sample", url.Values{"index": {strconv.FormatInt(g, 10)}}, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	r, err := ipc.NewReader(resp.Body)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	if !r.Next() {
		return nil, fmt.Errorf("sidecar sent no sample: %w", r.Err())
	}
	rec := r.RecordBatch()
	rec.Retain()
	return rec, nil
}

// eosReader turns the end of a body that did not end with the Arrow
// end-of-stream marker into io.ErrUnexpectedEOF: the Arrow reader takes a
// plain EOF for the end of the stream, and a cut stream must not pass for
// a whole epoch.
type eosReader struct {
	r    io.Reader
	tail [8]byte
	n    int
}

var eosMarker = [8]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}

func (e *eosReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if n >= 8 {
		copy(e.tail[:], p[n-8:n])
		e.n = 8
	} else if n > 0 {
		keep := min(e.n, 8-n)
		copy(e.tail[:keep], e.tail[e.n-keep:e.n])
		copy(e.tail[keep:], p[:n])
		e.n = keep + n
	}
	if errors.Is(err, io.EOF) && (e.n < 8 || e.tail != eosMarker) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}
