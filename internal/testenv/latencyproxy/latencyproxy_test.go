package latencyproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is a local server that records what reached it.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	arrived []time.Time
	hosts   []string
	bodies  []int
}

// reply is what the upstream answers to every request: 1000 bytes.
var reply = bytes.Repeat([]byte("x"), 1000)

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.arrived = append(u.arrived, now)
		u.hosts = append(u.hosts, r.Host)
		u.bodies = append(u.bodies, len(b))
		u.mu.Unlock()
		_, _ = w.Write(reply)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) seen() (arrived []time.Time, hosts []string, bodies []int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.arrived...), append([]string(nil), u.hosts...), append([]int(nil), u.bodies...)
}

// do sends a request and reads its answer, returning its status.
func do(t *testing.T, method, url string, body io.Reader, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestEachRequestWaitsTheDelayBeforeReachingTheUpstream(t *testing.T) {
	u := newUpstream(t)
	const delay = 40 * time.Millisecond
	p := Start(t, Options{Upstream: u.Listener.Addr().String(), Delay: delay})
	const n = 5
	sent := make([]time.Time, n)
	began := time.Now()
	for i := range n {
		sent[i] = time.Now()
		if code := do(t, http.MethodGet, p.URL()+"/bucket/key", nil, nil); code != http.StatusOK {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if took := time.Since(began); took < n*delay {
		t.Errorf("%d requests one after another took %s, less than %d × %s", n, took, n, delay)
	}
	arrived, _, _ := u.seen()
	if len(arrived) != n {
		t.Fatalf("the upstream saw %d requests, want %d", len(arrived), n)
	}
	for i := range n {
		if waited := arrived[i].Sub(sent[i]); waited < delay {
			t.Errorf("request %d reached the upstream %s after it was sent, before the delay %s", i, waited, delay)
		}
		if i > 0 && arrived[i].Before(arrived[i-1]) {
			t.Errorf("request %d reached the upstream before request %d", i, i-1)
		}
	}
	if c := p.Counts(); c.Get != n || c.Requests() != n || c.BytesOut != n*int64(len(reply)) {
		t.Errorf("counts %s, want %d whole GETs of %d bytes each", c, n, len(reply))
	}
}

func TestJitterIsDrawnFromTheSeedWithinItsRange(t *testing.T) {
	o := Options{Upstream: "127.0.0.1:1", Delay: 20 * time.Millisecond, Jitter: 10 * time.Millisecond, Seed: 7}
	a, err := New("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	b, err := New("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	distinct := map[time.Duration]bool{}
	for i := range 100 {
		da, db := a.delay(), b.delay()
		if da != db {
			t.Fatalf("delay %d: %s and %s from the same seed", i, da, db)
		}
		if da < o.Delay || da >= o.Delay+o.Jitter {
			t.Fatalf("delay %d: %s, outside [%s, %s)", i, da, o.Delay, o.Delay+o.Jitter)
		}
		distinct[da] = true
	}
	if len(distinct) < 10 {
		t.Errorf("%d distinct delays in 100: the jitter does not vary", len(distinct))
	}
}

func TestRequestsOverTheRateWaitForIt(t *testing.T) {
	u := newUpstream(t)
	const perSecond = 20
	p := Start(t, Options{Upstream: u.Listener.Addr().String(), Rate: perSecond, Burst: 1})
	const n = 11 // the first goes at once, each other 1/20 s after the one before
	began := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code := do(t, http.MethodHead, p.URL()+"/bucket/key", nil, nil); code != http.StatusOK {
				t.Errorf("HEAD: %d", code)
			}
		})
	}
	wg.Wait()
	if took, least := time.Since(began), (n-1)*time.Second/perSecond; took < least*9/10 {
		t.Errorf("%d requests at %d a second (burst 1) took %s, less than %s", n, perSecond, took, least)
	}
	if c := p.Counts(); c.Head != n || c.Throttled != 0 {
		t.Errorf("counts %s, want %d HEADs and none throttled", c, n)
	}
}

func TestRequestsOverTheRateAreAnsweredSlowDown(t *testing.T) {
	u := newUpstream(t)
	p := Start(t, Options{Upstream: u.Listener.Addr().String(), Rate: 0.001, Burst: 2, Throttle: SlowDown})
	var codes []int
	for range 3 {
		codes = append(codes, do(t, http.MethodGet, p.URL()+"/bucket/key", nil, map[string]string{"Range": "bytes=0-9"}))
	}
	if want := []int{200, 200, 503}; !slices.Equal(codes, want) {
		t.Fatalf("statuses %v, want %v", codes, want)
	}
	req, _ := http.NewRequest(http.MethodGet, p.URL()+"/bucket/key", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "<Code>SlowDown</Code>") {
		t.Errorf("over the rate: %s %q, want 503 with S3's SlowDown code", resp.Status, body)
	}
	if arrived, _, _ := u.seen(); len(arrived) != 2 {
		t.Errorf("the upstream saw %d requests, want the 2 of the burst", len(arrived))
	}
	if c := p.Counts(); c.GetRanged != 2 || c.Throttled != 2 || c.Requests() != 2 {
		t.Errorf("counts %s, want 2 ranged GETs forwarded and 2 throttled", c)
	}
}

// unsized hides a body's length, so the client sends it chunked.
type unsized struct{ io.Reader }

func TestRequestsAreCountedByKindWithTheirHostAndBodyUnchanged(t *testing.T) {
	u := newUpstream(t)
	p := Start(t, Options{Upstream: u.Listener.Addr().String()})
	body := func() io.Reader { return bytes.NewReader(bytes.Repeat([]byte("b"), 300)) }
	for _, tc := range []struct {
		name, method, path string
		body               io.Reader
		header             map[string]string
	}{
		{"a whole object", http.MethodGet, "/bucket/dir/key.parquet", nil, nil},
		{"a range", http.MethodGet, "/bucket/dir/key.parquet", nil, map[string]string{"Range": "bytes=-8"}},
		{"a head", http.MethodHead, "/bucket/dir/key.parquet", nil, nil},
		{"a V2 listing", http.MethodGet, "/bucket/?list-type=2&prefix=dir%2F&delimiter=%2F", nil, nil},
		{"a V1 listing", http.MethodGet, "/bucket?prefix=dir%2F", nil, nil},
		{"a put", http.MethodPut, "/bucket/dir/new", body(), nil},
		{"a chunked put", http.MethodPut, "/bucket/dir/chunked", unsized{body()}, nil},
		{"the bucket's location", http.MethodGet, "/bucket/?location=", nil, nil},
		{"a bucket made", http.MethodPut, "/bucket2", nil, nil},
		{"a multipart upload begun", http.MethodPost, "/bucket/dir/big?uploads=", nil, nil},
		{"a delete", http.MethodDelete, "/bucket/dir/new", nil, nil},
	} {
		if code := do(t, tc.method, p.URL()+tc.path, tc.body, tc.header); code != http.StatusOK {
			t.Fatalf("%s: %d", tc.name, code)
		}
	}
	want := Counts{Get: 1, GetRanged: 1, Head: 1, List: 2, Put: 2, Other: 4, BytesIn: 600, BytesOut: 10 * int64(len(reply))}
	if c := p.Counts(); c != want {
		t.Errorf("counts\n%s, want\n%s", c, want)
	}
	_, hosts, bodies := u.seen()
	for i, h := range hosts {
		if h != p.Addr {
			t.Errorf("request %d reached the upstream for host %q, want the client's %q (its signature covers it)", i, h, p.Addr)
		}
	}
	if bodies[5] != 300 || bodies[6] != 300 {
		t.Errorf("the puts' bodies reached the upstream as %d and %d bytes, want 300", bodies[5], bodies[6])
	}
	p.Reset()
	if c := p.Counts(); c != (Counts{}) {
		t.Errorf("after Reset: %s", c)
	}
}
