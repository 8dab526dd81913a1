package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// The bounds on what a store's SDK reads of a response itself. An
// endpoint is the dataset author's choice, and the SDKs read error bodies,
// listings and token answers whole (a 1 GiB error body once cost the
// manager 2.6–6.1 GiB of heap); only an object's body, which the caller
// reads through a bounded reader of its own, is passed on uncapped.
const (
	// MaxErrorBody caps the body of an answer that is not 2xx: the
	// stores' XML and JSON errors are a few hundred bytes.
	MaxErrorBody = 64 << 10
	// MaxAnswerBody caps any other body an SDK decodes itself: a listing
	// page (1000 keys of up to 1 KiB each, under 3 MiB in every store's
	// form), an object's metadata, a token exchange's answer. Decoding
	// it costs up to 4x its size.
	MaxAnswerBody = 8 << 20
)

// ErrBodyTooLarge is wrapped by the error of a body that passed its cap.
var ErrBodyTooLarge = errors.New("response body too large")

type objectBodyKey struct{}

// ObjectBody marks a request's context as an object read: its 2xx body is
// passed on uncapped, since the store's caller bounds what it reads.
func ObjectBody(ctx context.Context) context.Context {
	return context.WithValue(ctx, objectBodyKey{}, (*atomic.Bool)(nil))
}

// HeldObjectBody is ObjectBody for an SDK that reads an object's headers
// before it hands the body over and drains the body whole when it refuses
// them (minio-go's one-request GET, on a Last-Modified it cannot parse):
// until release is called the 2xx body is capped as an error's is, so a
// hostile endpoint's endless body stops at the cap.
func HeldObjectBody(ctx context.Context) (context.Context, func()) {
	held := new(atomic.Bool)
	held.Store(true)
	return context.WithValue(ctx, objectBodyKey{}, held), func() { held.Store(false) }
}

// HTTPClient is the client of every request a store and its credentials
// make: response bodies capped (above), no redirect to another host (a
// redirect would take the request's credentials, or the token it
// exchanges, where the policy never looked), and, where gate is not nil,
// no request to a host it refuses nor a connection to an address its
// policy refuses.
func HTTPClient(gate *Gate) *http.Client {
	return &http.Client{Transport: Transport(gate), CheckRedirect: sameHostRedirect}
}

// Transport is HTTPClient's transport, for SDKs that take a transport
// rather than a client (they follow no redirects of their own).
func Transport(gate *Gate) http.RoundTripper {
	if gate == nil {
		return &guard{rt: baseTransport()}
	}
	return &guard{rt: gate.policy.transportOf(), gate: gate}
}

var (
	baseOnce sync.Once
	base     *http.Transport
)

// idleConnsPerHost is how many idle connections to one store the pool
// keeps: as many as a sidecar's fetches of small shards have in flight
// (net/http keeps 2, and every fetch past them would open a connection
// again: a TCP and TLS handshake, round trips to a far store, for each
// object of tens of KiB).
const idleConnsPerHost = 64

// baseTransport is one pool of connections for every store's client: a
// clone of the default transport (its proxy settings and timeouts).
func baseTransport() *http.Transport {
	baseOnce.Do(func() {
		base = http.DefaultTransport.(*http.Transport).Clone()
		base.MaxIdleConnsPerHost = idleConnsPerHost
		base.MaxIdleConns = max(base.MaxIdleConns, 4*idleConnsPerHost)
	})
	return base
}

// sameHostRedirect follows a redirect only to the host of the first
// request, for at most 5 hops.
func sameHostRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return fmt.Errorf("more than 5 redirects from %s", via[0].URL.Host)
	}
	if !strings.EqualFold(req.URL.Host, via[0].URL.Host) || req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("a redirect from %s://%s to another host is refused (the store's endpoint is the only host its requests may reach)",
			via[0].URL.Scheme, via[0].URL.Host)
	}
	return nil
}

type guard struct {
	rt   http.RoundTripper
	gate *Gate
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	host := strings.ToLower(req.URL.Host)
	if g.gate != nil {
		r, err := g.gate.check(req.URL.Scheme, host)
		if err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		req = req.WithContext(context.WithValue(req.Context(), reachKey{}, r))
	}
	resp, err := g.rt.RoundTrip(req)
	if err != nil || resp.Body == nil || resp.Body == http.NoBody {
		return resp, err
	}
	capBytes := int64(MaxAnswerBody)
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		capBytes = MaxErrorBody
	case req.Context().Value(objectBodyKey{}) != nil:
		held, _ := req.Context().Value(objectBodyKey{}).(*atomic.Bool)
		if held == nil {
			return resp, nil
		}
		resp.Body = &heldBody{ReadCloser: resp.Body, held: held,
			capped: cappedBody{ReadCloser: resp.Body, left: MaxErrorBody, host: host, status: resp.StatusCode, capBytes: MaxErrorBody}}
		return resp, nil
	}
	if resp.ContentLength > capBytes {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s answered HTTP %d with %d bytes, over the cap of %d on what a store reads of an answer that is not an object: %w",
			host, resp.StatusCode, resp.ContentLength, capBytes, ErrBodyTooLarge)
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: capBytes, host: host, status: resp.StatusCode, capBytes: capBytes}
	return resp, nil
}

// heldBody reads through capped while held, and uncapped once released.
type heldBody struct {
	io.ReadCloser
	held   *atomic.Bool
	capped cappedBody
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.held.Load() {
		return b.capped.Read(p)
	}
	return b.ReadCloser.Read(p)
}

// cappedBody fails a read past its cap, rather than ending the body
// early: a truncated listing or error must not read as a whole one.
type cappedBody struct {
	io.ReadCloser
	left, capBytes int64
	host           string
	status         int
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more says whether the body ends at the cap.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("%s answered HTTP %d with a body over the cap of %d bytes on what a store reads of an answer that is not an object: %w",
			b.host, b.status, b.capBytes, ErrBodyTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
