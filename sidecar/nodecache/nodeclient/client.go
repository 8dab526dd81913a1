// Package nodeclient is a sidecar's client of its node's agent (the node
// cache, #58, served by sidecar/nodecache): it asks the agent for a shard,
// or names the shards its pod reads next, with the pod's token and the
// stream's credentials of the moment. The agent must prove who it is
// first; any failure of it is an error the sidecar answers by reading the
// store itself, and every byte the agent serves is checked again by the
// sidecar's cache.
package nodeclient

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/trust"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// Defaults of a Client's bounds.
const (
	// DefaultWait bounds how long a sidecar waits for the agent's answer
	// to begin: a hit begins at once, a fill when the agent has the shard.
	DefaultWait = 10 * time.Second
	// DefaultIdle bounds a pause in the answer's bytes.
	DefaultIdle = 5 * time.Second
)

// Client is a sidecar's way to its node's agent. Every failure of it (no
// agent, a slow or refusing one, one that cannot prove it is the agent)
// is an error the caller answers by reading the store itself.
//
// The agent proves who it is before anything is sent: TLS with a
// certificate the operator's CA signed for the agent's name, verified
// against the bundle the pod's plan carries. The pod's token and the
// stream's credentials go to nobody else.
type Client struct {
	tokenFile  string
	wait, idle time.Duration
	base       string
	http       *http.Client

	// down is when the agent last could not be reached: the next dials
	// wait for backoff, so a node without an agent costs no dial per shard.
	downMu sync.Mutex
	down   time.Time

	// inFlight holds a slot for each request until its answer is closed:
	// the agent answers 429 past its requests a pod may have in flight,
	// and a sidecar fetching many small shards at once would read those
	// from the store.
	inFlight chan struct{}

	hits, fills, fallbacks, bytes atomic.Int64
}

// Stats are a client's counters.
type Stats struct {
	// Hits and Fills are shards the agent served from its cache and
	// fetched for this request; Fallbacks those read from the store
	// because the agent could not serve them.
	Hits, Fills, Fallbacks int64
	// Bytes is what the agent served.
	Bytes int64
}

// Options say where the agent is and how it is trusted.
type Options struct {
	// URL is https://<Service>.<namespace>.svc:<port>: its host is the
	// name the agent's certificate must carry.
	URL string
	// Addr, if set, is the host:port dialled first (the node-local
	// Service's cluster IP), the URL's host if it does not answer.
	Addr string
	// CAFile is the operator's CA bundle, read at each handshake.
	CAFile string
	// TokenFile is the pod's projected token (audience nodewire.Audience), read at
	// each request since the kubelet rotates it.
	TokenFile string
	// Wait and Idle bound the answer's start and its pauses (0: the
	// defaults).
	Wait, Idle time.Duration
}

// backoff is how long a client leaves an agent it could not reach alone.
const backoff = 30 * time.Second

// New checks the options and returns the client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
		return nil, fmt.Errorf("node agent URL %q: want https://HOST:PORT (the agent's Service): the agent is reached over TLS only", o.URL)
	}
	if o.CAFile == "" || o.TokenFile == "" {
		return nil, errors.New("the node agent needs the operator's CA bundle file and the token file")
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	c := &Client{tokenFile: o.TokenFile, wait: o.Wait, idle: o.Idle, base: "https://" + u.Host, inFlight: make(chan struct{}, nodewire.PodRequests)}
	dialer := &net.Dialer{Timeout: time.Second}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !c.up() {
				return nil, errAway
			}
			// The Service's cluster IP first (clusters without DNS), its
			// name if that does not answer (the Service was recreated).
			if o.Addr != "" {
				if conn, err := dialer.DialContext(ctx, network, o.Addr); err == nil {
					return conn, nil
				}
			}
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				c.away()
			}
			return conn, err
		},
		TLSClientConfig:     trust.Verifier{CAFile: o.CAFile, Name: u.Hostname(), Peer: "the node agent"}.Config(),
		TLSHandshakeTimeout: 5 * time.Second,
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	c.http = &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, nil
}

var errAway = errors.New("the node agent was not reachable a moment ago")

func (c *Client) up() bool {
	c.downMu.Lock()
	defer c.downMu.Unlock()
	return time.Since(c.down) >= backoff
}

// failed notes a request that got no answer (no agent, a slow one, one
// that could not prove it is the agent): the agent is left alone for a
// while. A caller that went away says nothing of the agent.
func (c *Client) failed(ctx context.Context) {
	if ctx.Err() == nil || errors.Is(context.Cause(ctx), errSlow) {
		c.away()
	}
}

func (c *Client) away() {
	c.downMu.Lock()
	c.down = time.Now()
	c.downMu.Unlock()
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Hits: c.hits.Load(), Fills: c.fills.Load(), Fallbacks: c.fallbacks.Load(), Bytes: c.bytes.Load()}
}

// Fallback counts a shard the caller read from the store after the agent
// failed it (or served bytes that did not check).
func (c *Client) Fallback() { c.fallbacks.Add(1) }

var errSlow = errors.New("the node agent did not answer in time")

// Get asks the agent for a shard. The body must be closed; its bytes are
// the agent's word, for the caller to check against the index.
func (c *Client) Get(ctx context.Context, r nodewire.Request) (io.ReadCloser, error) {
	token, err := readBounded(c.tokenFile, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("node agent: the pod's token: %w", err)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	select {
	case c.inFlight <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("node agent: %w", context.Cause(ctx))
	}
	ctx, cancelCtx := context.WithCancelCause(ctx)
	release := sync.OnceFunc(func() { <-c.inFlight })
	cancel := func(cause error) {
		cancelCtx(cause)
		if cause == nil { // the request is over (its answer closed): its slot is free
			release()
		}
	}
	slow := time.AfterFunc(c.wait, func() { cancel(errSlow) })
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+nodewire.ShardPath, strings.NewReader(string(body)))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	slow.Stop()
	if err != nil {
		c.failed(ctx)
		if cause := context.Cause(ctx); errors.Is(cause, errSlow) {
			err = fmt.Errorf("%w (%s)", cause, c.wait)
		}
		cancel(nil)
		return nil, fmt.Errorf("node agent: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("node agent: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	if resp.ContentLength != r.Size {
		_ = resp.Body.Close()
		cancel(nil)
		return nil, fmt.Errorf("node agent: %d bytes offered for a shard of %d", resp.ContentLength, r.Size)
	}
	if resp.Header.Get(nodewire.HeaderCache) == nodewire.CacheHit {
		c.hits.Add(1)
	} else {
		c.fills.Add(1)
	}
	return &idleBody{body: resp.Body, cancel: cancel, idle: c.idle, timer: time.AfterFunc(c.idle, func() { cancel(errSlow) }), counted: &c.bytes}, nil
}

// Warm names shards the pod reads next, for the agent to fetch ahead and
// keep; it returns what the agent made of them.
func (c *Client) Warm(ctx context.Context, w nodewire.WarmRequest) (nodewire.WarmAnswer, error) {
	token, err := readBounded(c.tokenFile, 64<<10)
	if err != nil {
		return nodewire.WarmAnswer{}, fmt.Errorf("node agent: the pod's token: %w", err)
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nodewire.WarmAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+nodewire.WarmPath, strings.NewReader(string(body)))
	if err != nil {
		return nodewire.WarmAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		c.failed(ctx)
		return nodewire.WarmAnswer{}, fmt.Errorf("node agent: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return nodewire.WarmAnswer{}, fmt.Errorf("node agent: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted {
		return nodewire.WarmAnswer{}, fmt.Errorf("node agent: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var ans nodewire.WarmAnswer
	if err := json.Unmarshal(msg, &ans); err != nil {
		return nodewire.WarmAnswer{}, fmt.Errorf("node agent: a warm answer that is not one: %w", err)
	}
	return ans, nil
}

// Warmer is the cache's way to name to the agent the shards of the
// streams whose sources are given that the pod reads next, a warm request
// per stream and nodewire.MaxWarmShards shards; others are not named.
func (c *Client) Warmer(sources map[string]store.Source) cache.NodeWarm {
	return func(ctx context.Context, shards []cache.Shard) error {
		byStream := map[string][]nodewire.Part{}
		var order []string
		for _, s := range shards {
			if _, ok := sources[s.Stream]; !ok {
				continue
			}
			if _, ok := byStream[s.Stream]; !ok {
				order = append(order, s.Stream)
			}
			byStream[s.Stream] = append(byStream[s.Stream], partOf(s))
		}
		for _, name := range order {
			src, err := SourceOf(ctx, sources[name])
			if err != nil {
				return fmt.Errorf("node agent: the stream's credentials: %w", err)
			}
			for ws := range slices.Chunk(byStream[name], nodewire.MaxWarmShards) {
				if _, err := c.Warm(ctx, nodewire.WarmRequest{Source: src, Shards: ws}); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// idleBody cancels its request when no byte comes for idle.
type idleBody struct {
	body    io.ReadCloser
	cancel  context.CancelCauseFunc
	idle    time.Duration
	timer   *time.Timer
	counted *atomic.Int64
	once    sync.Once
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.timer.Reset(b.idle)
	b.counted.Add(int64(n))
	return n, err
}

func (b *idleBody) Close() error {
	err := b.body.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return err
}

// Fetch is the cache's way to the agent for the shards of the streams
// whose sources are given (by stream name), with each stream's
// credentials as they are at the request; other shards (a filter's runs)
// are not asked for.
func (c *Client) Fetch(sources map[string]store.Source) cache.NodeFetch {
	return func(ctx context.Context, s cache.Shard) (io.ReadCloser, error) {
		src, ok := sources[s.Stream]
		if !ok {
			return nil, nil
		}
		ns, err := SourceOf(ctx, src)
		if err != nil {
			return nil, fmt.Errorf("node agent: the stream's credentials: %w", err)
		}
		return c.Get(ctx, nodewire.Request{Source: ns, Part: partOf(s)})
	}
}

// SourceOf is what a sidecar's store source hands the agent for one
// request: the Secret's keys as mounted now (the kubelet updates a
// rotated Secret's files), or the workload identity's current token.
func SourceOf(ctx context.Context, src store.Source) (nodewire.Source, error) {
	out := nodewire.Source{URI: src.URI, Endpoint: src.Endpoint, Region: src.Region, Insecure: src.Insecure}
	switch {
	case src.Identity != nil:
		token, err := src.Identity.Token(ctx)
		if err != nil {
			return nodewire.Source{}, err
		}
		id := src.Identity
		out.Identity = &nodewire.Identity{Token: token, Audience: id.Audience, RoleARN: id.RoleARN,
			ServiceAccountEmail: id.ServiceAccountEmail, ClientID: id.ClientID, TenantID: id.TenantID}
	case src.Credentials != nil:
		out.Credentials = src.Credentials
	case src.CredentialsDir != "":
		creds, err := readSecretDir(src.CredentialsDir)
		if err != nil {
			return nodewire.Source{}, err
		}
		out.Credentials = creds
	}
	return out, nil
}

// partOf is the part of a shard as the sidecar's cache names it.
func partOf(s cache.Shard) nodewire.Part {
	return nodewire.Part{Key: s.Key, Range: s.Range, Offset: s.Offset, Size: s.Size, Hash: s.Hash, Version: s.Version}
}

// readSecretDir reads a mounted Secret's keys: its plain files (the
// kubelet's "..data" names are its own).
func readSecretDir(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		if len(out) == 32 {
			return nil, fmt.Errorf("credentials %s: more than 32 keys", dir)
		}
		b, err := readBounded(filepath.Join(dir, e.Name()), 64<<10)
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %s bytes", path, strconv.FormatInt(limit, 10))
	}
	return b, nil
}
