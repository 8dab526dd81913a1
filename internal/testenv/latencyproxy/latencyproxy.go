// Package latencyproxy is an HTTP proxy in front of an S3-compatible store
// (MinIO on loopback, in the tests and benchmarks) that makes it answer
// like a store far away: each request waits a time to first byte, the
// requests a second are limited as a real store limits them, and every
// request is counted by kind, so that a benchmark can say how many round
// trips its figures paid.
//
// Unlike testenv.SlowProxy, which delays the chunks of a TCP stream, it
// reads request boundaries (keep-alive, chunked and streaming bodies
// included, through net/http's server and httputil.ReverseProxy), so the
// delay is per request and the counts are of requests. It passes each
// request's Host header and every header the client signed unchanged, so
// S3 signatures (SigV4, streaming or not) still verify upstream.
package latencyproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// Throttle is what the proxy does with a request over its rate limit.
type Throttle int

const (
	// Wait holds the request until the limit lets it through (a client
	// sees a slower store).
	Wait Throttle = iota
	// SlowDown answers it at once with 503 SlowDown, as S3 does when a
	// prefix's request rate is exceeded (a client's retries are tested).
	SlowDown
)

// Options configure a Proxy.
type Options struct {
	// Upstream is the store's host:port (plain HTTP).
	Upstream string
	// Delay is added to every forwarded request before it reaches the
	// upstream: a round trip to a store far away (20–50 ms for a cloud
	// object store's time to first byte).
	Delay time.Duration
	// Jitter, when positive, adds a uniform extra delay in [0, Jitter) to
	// each request, drawn from a generator seeded with Seed (the same seed,
	// the same sequence of delays in the order requests arrive).
	Jitter time.Duration
	Seed   uint64
	// Rate is the requests a second let through (0: no limit); Burst is how
	// many may go at once above it (at least 1).
	Rate  float64
	Burst int
	// Throttle is what happens to a request over the limit.
	Throttle Throttle
}

// Counts are the requests a Proxy has seen, by kind, and their bytes.
type Counts struct {
	// Get is GETs of whole objects; GetRanged those with a Range header.
	Get       int64 `json:"get"`
	GetRanged int64 `json:"getRanged"`
	Head      int64 `json:"head"`
	// List is GETs of a bucket's keys (ListObjects, V1 or V2).
	List int64 `json:"list"`
	Put  int64 `json:"put"`
	// Other is every other request (bucket location, multipart, deletes…).
	Other int64 `json:"other"`
	// Throttled is the requests answered 503 SlowDown without reaching the
	// upstream (not in the counts above).
	Throttled int64 `json:"throttled"`
	// BytesIn is the request bodies' bytes, BytesOut the responses'.
	BytesIn  int64 `json:"bytesIn"`
	BytesOut int64 `json:"bytesOut"`
}

// Requests is the requests forwarded upstream, of every kind.
func (c Counts) Requests() int64 {
	return c.Get + c.GetRanged + c.Head + c.List + c.Put + c.Other
}

// String is the counts as one line of JSON.
func (c Counts) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// kind is a request's row of Counts.
type kind int

const (
	kindGet kind = iota
	kindGetRanged
	kindHead
	kindList
	kindPut
	kindOther
	kinds
)

// Proxy is a running latency proxy.
type Proxy struct {
	// Addr is where clients connect (host:port).
	Addr string

	opts    Options
	srv     *http.Server
	done    chan struct{}
	limiter *rate.Limiter
	rp      *httputil.ReverseProxy

	mu  sync.Mutex // guards rng
	rng *rand.Rand

	byKind             [kinds]atomic.Int64
	throttled, in, out atomic.Int64
	transport          *http.Transport
	closeOnce          sync.Once
	serveErr           error
}

// Start listens on a free port of 127.0.0.1 and proxies to o.Upstream until
// the test ends.
func Start(t testing.TB, o Options) *Proxy {
	t.Helper()
	p, err := New("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// New listens on addr (host:port; port 0 for a free one) and proxies to
// o.Upstream until Close.
func New(addr string, o Options) (*Proxy, error) {
	if o.Upstream == "" {
		return nil, errors.New("latency proxy: no upstream: give the store's host:port")
	}
	if o.Delay < 0 || o.Jitter < 0 || o.Rate < 0 {
		return nil, fmt.Errorf("latency proxy: delay %s, jitter %s and rate %g must not be negative", o.Delay, o.Jitter, o.Rate)
	}
	target := &url.URL{Scheme: "http", Host: o.Upstream}
	p := &Proxy{opts: o, done: make(chan struct{}), rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))} //nolint:gosec // a benchmark's jitter, not a secret
	p.limiter = rate.NewLimiter(rate.Inf, 0)
	if o.Rate > 0 {
		p.limiter = rate.NewLimiter(rate.Limit(o.Rate), max(o.Burst, 1))
	}
	// Many idle connections: a client at 256 requests in flight must not
	// make the proxy dial afresh for each (which would add its own cost).
	p.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		// Pass Accept-Encoding as the client sent it (none: none).
		DisableCompression: true,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = target.Scheme
			pr.Out.URL.Host = target.Host
			// The client signed the Host it dialled (this proxy's): the
			// upstream checks the signature over the same Host.
			pr.Out.Host = pr.In.Host
		},
		Transport:     p.transport,
		FlushInterval: -1, // stream responses as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, fmt.Sprintf("latency proxy: upstream %s: %v", o.Upstream, err), http.StatusBadGateway)
		},
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p.Addr = l.Addr().String()
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: time.Minute}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
			p.serveErr = err
		}
	}()
	return p, nil
}

// URL is the proxy's endpoint as a store's endpoint field takes it.
func (p *Proxy) URL() string { return "http://" + p.Addr }

// Counts is what the proxy has seen so far.
func (p *Proxy) Counts() Counts {
	return Counts{
		Get: p.byKind[kindGet].Load(), GetRanged: p.byKind[kindGetRanged].Load(), Head: p.byKind[kindHead].Load(),
		List: p.byKind[kindList].Load(), Put: p.byKind[kindPut].Load(), Other: p.byKind[kindOther].Load(),
		Throttled: p.throttled.Load(), BytesIn: p.in.Load(), BytesOut: p.out.Load(),
	}
}

// Reset sets the counts to zero (between a benchmark's runs).
func (p *Proxy) Reset() {
	for i := range p.byKind {
		p.byKind[i].Store(0)
	}
	p.throttled.Store(0)
	p.in.Store(0)
	p.out.Store(0)
}

// Close stops the proxy, cutting the requests in flight.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		err = p.srv.Close()
		<-p.done
		p.transport.CloseIdleConnections()
		if err == nil {
			err = p.serveErr
		}
	})
	return err
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if p.opts.Throttle == SlowDown {
		if !p.limiter.Allow() {
			p.throttled.Add(1)
			slowDown(w, r)
			return
		}
	} else if err := p.limiter.Wait(r.Context()); err != nil {
		return // the client went away while it waited
	}
	if d := p.delay(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	p.byKind[kindOf(r)].Add(1)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: &p.in}
	}
	p.rp.ServeHTTP(&countingWriter{ResponseWriter: w, n: &p.out}, r)
}

// delay is the next request's time to first byte.
func (p *Proxy) delay() time.Duration {
	d := p.opts.Delay
	if p.opts.Jitter > 0 {
		p.mu.Lock()
		d += time.Duration(p.rng.Int64N(int64(p.opts.Jitter)))
		p.mu.Unlock()
	}
	return d
}

// slowDown answers as S3 does over a prefix's request rate.
func slowDown(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><Resource>%s</Resource><RequestId>latencyproxy</RequestId></Error>`,
		xmlEscape(r.URL.Path))
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

// objectSubresources are the queries that make a request on an object or a
// bucket something other than a read, a listing or a write of data.
var objectSubresources = []string{"acl", "tagging", "uploads", "uploadId", "retention", "legal-hold", "attributes", "restore", "select",
	"location", "policy", "versioning", "lifecycle", "cors", "encryption", "notification", "object-lock", "replication", "delete"}

// kindOf is a path-style S3 request's kind (the proxy is addressed by its
// IP, so clients address buckets by path).
func kindOf(r *http.Request) kind {
	q := r.URL.Query()
	for _, s := range objectSubresources {
		if q.Has(s) {
			return kindOther
		}
	}
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucketOnly := path != "" && !strings.Contains(strings.TrimSuffix(path, "/"), "/")
	switch r.Method {
	case http.MethodGet:
		switch {
		case path == "":
			return kindOther // ListBuckets
		case bucketOnly:
			return kindList
		case r.Header.Get("Range") != "":
			return kindGetRanged
		default:
			return kindGet
		}
	case http.MethodHead:
		return kindHead
	case http.MethodPut:
		if bucketOnly {
			return kindOther // MakeBucket
		}
		return kindPut
	default:
		return kindOther
	}
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes) reach the
// server's writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
