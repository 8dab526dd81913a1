package progress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/trust"
)

// Remote records progress through the operator's progress endpoint. It
// reads the token and the CA bundle from their files at every request and
// connection: the kubelet rotates the token, and the operator's CA bundle
// arrives in the mounted plan ConfigMap when it rotates.
type Remote struct {
	// URL is the endpoint's base, https://<service>.<namespace>.svc:<port>:
	// its host is the name the operator's certificate must carry.
	URL string
	// Addr, if set, is the host:port dialled first (the Service's cluster
	// IP: clusters without DNS), the URL's host if it does not answer.
	Addr string
	// CAFile holds the PEM CA bundle the operator's certificate chains to.
	CAFile string
	// TokenFile holds the projected ServiceAccount token.
	TokenFile string
	// Outage bounds how long a request waits for an operator that does not
	// answer (a restart, a rolling upgrade), retrying with backoff.
	Outage time.Duration

	client *http.Client
	host   string
}

// NewRemote checks the configuration and returns the ledger.
func NewRemote(r Remote) (*Remote, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("operator URL %q: want https://HOST[:PORT] (the operator's Service)", r.URL)
	}
	if r.CAFile == "" || r.TokenFile == "" {
		return nil, errors.New("the operator endpoint needs the CA bundle file and the token file")
	}
	r.host = u.Hostname()
	if r.Outage == 0 {
		r.Outage = 2 * time.Minute
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			// The Service's cluster IP first: it lasts as long as the
			// Service, and a cluster without DNS would make every new
			// connection wait for the resolver's timeouts. The name if the
			// address does not answer (the Service was recreated).
			if r.Addr != "" {
				if conn, err := dialer.DialContext(ctx, network, r.Addr); err == nil {
					return conn, nil
				}
			}
			return dialer.DialContext(ctx, network, addr)
		},
		// Verified against the CA file as it is now: the standard
		// verification would need the pool fixed at start.
		TLSClientConfig:       trust.Verifier{CAFile: r.CAFile, Name: r.host, Peer: "the operator"}.Config(),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       90 * time.Second,
	}
	r.client = &http.Client{Transport: transport, Timeout: time.Minute}
	return &r, nil
}

// CloseIdleConnections closes the connections to the operator no request
// is using (a load generator that plays thousands of sidecars from one
// process).
func (r *Remote) CloseIdleConnections() { r.client.CloseIdleConnections() }

// Register implements Ledger.
func (r *Remote) Register(ctx context.Context, j Job) (*configmaps.State, error) {
	return r.call(ctx, http.MethodPost, PathRegister, RegisterRequest{Fingerprint: j.Fingerprint, Steps: j.Steps, Pods: j.Pods, WorldSize: j.WorldSize, DataParallelSize: j.DataParallel, Phases: j.Phases, PhaseStarts: j.PhaseStarts})
}

// Commit implements Ledger.
func (r *Remote) Commit(ctx context.Context, j Job, c Commit) (*configmaps.State, error) {
	return r.call(ctx, http.MethodPost, PathCommit, CommitRequest{Plan: j.Fingerprint.Sum, Steps: j.Steps, Epoch: c.Epoch, Step: c.Step, Resumed: c.Resumed})
}

// Skip implements Ledger.
func (r *Remote) Skip(ctx context.Context, sk configmaps.SkippedShard) error {
	_, err := r.call(ctx, http.MethodPost, PathSkip, sk)
	return err
}

// Reads implements Ledger.
func (r *Remote) Reads(ctx context.Context, rd configmaps.Reads) error {
	_, err := r.call(ctx, http.MethodPost, PathReads, rd)
	return err
}

// Load implements Ledger.
func (r *Remote) Load(ctx context.Context) (*configmaps.State, error) {
	return r.call(ctx, http.MethodGet, PathState, nil)
}

// call sends one request, retrying while the operator is away, and reads
// the state it answers.
func (r *Remote) call(ctx context.Context, method, path string, body any) (*configmaps.State, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(r.Outage)
	wait := 200 * time.Millisecond
	for {
		st, retry, err := r.once(ctx, method, path, payload)
		if err == nil || !retry || !time.Now().Before(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (r *Remote) once(ctx context.Context, method, path string, payload []byte) (*configmaps.State, bool, error) {
	token, err := os.ReadFile(r.TokenFile)
	if err != nil {
		return nil, false, fmt.Errorf("the sidecar's ServiceAccount token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(r.URL, "/")+path, bytes.NewReader(payload))
	if err != nil {
		return nil, false, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("the operator's progress endpoint %s: %w", r.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, ResponseLimit+1))
	if err != nil {
		return nil, true, fmt.Errorf("the operator's progress endpoint %s: reading the answer: %w", r.URL, err)
	}
	if len(b) > ResponseLimit {
		return nil, false, fmt.Errorf("the operator's progress endpoint %s answered over %d bytes", r.URL, ResponseLimit)
	}
	if resp.StatusCode == http.StatusOK {
		st, err := configmaps.ParseState(b)
		if err != nil {
			return nil, false, fmt.Errorf("the operator's progress endpoint %s: %w", r.URL, err)
		}
		return st, false, nil
	}
	var e ErrorResponse
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = http.StatusText(resp.StatusCode)
	}
	switch resp.StatusCode {
	case http.StatusConflict:
		return nil, false, fmt.Errorf("%w: %s", ErrRefused, strings.TrimPrefix(e.Error, ErrRefused.Error()+": "))
	case http.StatusNotFound:
		return nil, false, fmt.Errorf("the operator at %s does not serve %s (%s): this sidecar and the operator are more than one release apart, and a job keeps the sidecar it started with: finish the job under the operator's previous release, or start it again under a new shardfeed.io/job",
			r.URL, path, e.Error)
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return nil, true, fmt.Errorf("the operator's progress endpoint %s: %d: %s", r.URL, resp.StatusCode, e.Error)
	}
	return nil, false, fmt.Errorf("the operator's progress endpoint %s refused %s: %d: %s", r.URL, path, resp.StatusCode, e.Error)
}
