//go:build integration

package nodecache_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/trust"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// rawClient is a client of the agent that does what it likes with the
// answers (a hostile pod's), from the loopback address from ("" any).
func rawClient(a *agent, from string) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, a.addr)
		},
		TLSClientConfig:   trust.Verifier{CAFile: a.caFile, Name: agentName, Peer: "the node agent"}.Config(),
		DisableKeepAlives: true,
	}}
}

// post sends a shard request to the agent with the token in the file
// token (or the token itself when it is no file).
func post(ctx context.Context, t *testing.T, c *http.Client, token string, body nodewire.Request) (*http.Response, error) {
	t.Helper()
	if b, err := os.ReadFile(token); err == nil {
		token = string(b)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+agentName+nodewire.ShardPath, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
	return c.Do(req)
}

// The fourth security review's finding 3: 64 requests whose answers a pod
// never read held every serving slot, and the other namespaces were
// answered 503 for minutes. One pod now holds at most its share of the
// slots, an answer no byte of which is taken for WriteIdle is dropped,
// and another namespace is served meanwhile.
func TestIntegrationAPodThatReadsNothingHoldsOnlyItsShare(t *testing.T) {
	d := newDataset(t, "xxh64", 48<<20)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) {
		o.MaxInFlight, o.MaxInFlightPerPod, o.WriteIdle = 4, 2, time.Second
	})
	creds := minioServer.CredentialsDir(t)
	hostile := newPod(t, apiServer.Namespace(t), node)
	req := request(t, d, d.shards[0], creds)
	c := rawClient(a, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	statuses := map[int]int{}
	var held []*http.Response
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			resp, err := post(ctx, t, c, hostile.token, req)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK {
				held = append(held, resp) //nolint:bodyclose // never read: closed at the end
				return
			}
			msg, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(msg), "requests in flight") {
				t.Errorf("the hostile pod's request beyond its share: %d %s", resp.StatusCode, msg)
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusOK] != 2 || statuses[http.StatusTooManyRequests] != 4 {
		t.Fatalf("the hostile pod's 6 requests at once were answered %v; want 2 served and 4 refused (429)", statuses)
	}

	// Another namespace is served while the hostile pod holds its share.
	other := newSidecar(t, d, a, newPod(t, apiServer.Namespace(t), node), creds, 0)
	other.readAll(t, d)
	if st := other.cache.Stats(); st.Node.Hits != 1 {
		t.Errorf("another namespace's pod took %d shards from the node (misses: %s); want 1", st.Node.Hits, other.missReasons())
	}

	// The unread answers are dropped after WriteIdle: the hostile pod's
	// slots come back, and its held bodies end short.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := post(ctx, t, c, hostile.token, req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hostile pod's slots were not given back after its answers stalled: still %d", resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, resp := range held {
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && n == d.shards[0].Size {
			t.Errorf("a stalled answer was kept open and sent whole (%d bytes)", n)
		}
	}
}

// The fourth security review's finding 3: warm requests of garbage grew
// the wanted set to 2.49 M entries in 6 minutes. It is bounded now, one
// pod to its share, and another pod's shards are still kept.
func TestIntegrationWarmRequestsOfOnePodAreBounded(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) {
		o.MaxWanted, o.MaxWantedPerPod, o.WarmQueue = 1000, 300, 8
	})
	creds := minioServer.CredentialsDir(t)
	src := request(t, d, d.shards[0], creds).Source
	hostile := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	for i := range 20 {
		shards := make([]nodewire.Part, nodewire.MaxWarmShards)
		for j := range shards {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			shards[j] = nodewire.Part{Key: fmt.Sprintf("garbage-%d-%d", i, j), Size: 1 << 30, Hash: "sha256:" + hex.EncodeToString(b)}
		}
		if _, err := hostile.Warm(context.Background(), nodewire.WarmRequest{Source: src, Shards: shards}); err != nil {
			t.Fatal(err)
		}
	}
	if w := a.Stats().Wanted; w > 300 {
		t.Fatalf("one pod's warm requests keep %d entries wanted; want at most its share, 300", w)
	}
	good := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	ans, err := good.Warm(context.Background(), nodewire.WarmRequest{Source: src, Shards: []nodewire.Part{partOf(d.shards[0])}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Dropped != 0 {
		t.Errorf("another pod's warm request: %+v; want its shard kept", ans)
	}
	if w := a.Stats().Wanted; w > 301 {
		t.Errorf("%d entries wanted; want at most 301", w)
	}
}

// The fourth security review's finding 3: one shared budget of token
// reviews let random tokens from one pod starve new pods. Each address
// has its own budget now: a new pod elsewhere is reviewed and served.
func TestIntegrationRandomTokensFromOnePodDoNotStarveOthers(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	a := startAgent(t, t.TempDir(), nil)
	creds := minioServer.CredentialsDir(t)
	req := request(t, d, d.shards[0], creds)
	fresh := newPod(t, apiServer.Namespace(t), node)
	hostile := rawClient(a, "127.0.0.2")
	var sent, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b := make([]byte, 24)
				_, _ = rand.Read(b)
				resp, err := post(context.Background(), t, hostile, "garbage."+hex.EncodeToString(b), req)
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode == http.StatusTooManyRequests {
					refused.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second) // the hostile pod's tokens flood in
	resp, err := post(context.Background(), t, rawClient(a, "127.0.0.3"), fresh.token, req)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n, r := sent.Load(), refused.Load(); r < n*3/4 {
		t.Errorf("of %d random tokens from one address, %d were refused before review; want most", n, r)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, d.data[d.shards[0].Key]) {
		t.Fatalf("a new pod after another pod's random tokens: %d %.200s; want its shard", resp.StatusCode, got)
	}
}

// The red team's: one pod opened 128 connections whose bodies it
// trickled, and held every admission slot (503 to everyone) until the
// server's read timeout. A pod's bodies are read within its own share
// now, each within 5 s, and another namespace is served meanwhile.
func TestIntegrationAPodThatTricklesItsBodiesHoldsOnlyItsShare(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) { o.MaxInFlight, o.MaxInFlightPerPod = 4, 2 })
	creds := minioServer.CredentialsDir(t)
	hostile := newPod(t, apiServer.Namespace(t), node)
	token, err := os.ReadFile(hostile.token)
	if err != nil {
		t.Fatal(err)
	}
	cfg := trust.Verifier{CAFile: a.caFile, Name: agentName, Peer: "the node agent"}.Config()
	var conns []net.Conn
	statuses := make(chan string, 64)
	for range 12 {
		conn, err := tlsDial(a.addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 300000\r\n\r\n{",
			nodewire.ShardPath, agentName, strings.TrimSpace(string(token)))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			b := make([]byte, 512)
			n, _ := conn.Read(b)
			statuses <- strings.SplitN(string(b[:n]), "\r\n", 2)[0]
		}()
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	time.Sleep(500 * time.Millisecond) // the trickles are being read
	other := newSidecar(t, d, a, newPod(t, apiServer.Namespace(t), node), creds, 0)
	other.readAll(t, d)
	if st := other.cache.Stats(); st.Node.Hits != 1 {
		t.Errorf("another namespace's pod took %d shards from the node while one pod trickled 12 bodies (misses: %s); want 1", st.Node.Hits, other.missReasons())
	}
	// Each trickled body is cut off after 5 s: the pod's share is free
	// again, and the pod itself is served.
	again := a.client(t, hostile.token, 0)
	if err := waitUntil(15*time.Second, func() bool {
		body, err := again.Get(context.Background(), request(t, d, d.shards[0], creds))
		if err != nil {
			return false
		}
		_ = body.Close()
		return true
	}); err != nil {
		t.Fatal("the trickling pod's share was not given back once its bodies were cut off")
	}
	refused := 0
	for range 10 {
		if s := <-statuses; strings.Contains(s, "429") {
			refused++
		}
	}
	if refused < 10-2 {
		t.Errorf("of one pod's 12 trickled requests, %d were refused beyond its share of 2", refused)
	}
}

func tlsDial(addr string, cfg *tls.Config) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
}

// The red team's: slow warm fills of one pod (large objects of its own)
// filled the warm queue and every filler, and another namespace's warm
// request was dropped. A pod has a share of the queue and half of the
// fillers now.
func TestIntegrationOnePodsSlowWarmFillsLeaveOthersTheirs(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) })
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) {
		o.WarmFillers, o.WarmQueue, o.WarmQueuePerPod = 2, 64, 16
		o.Open = func(ctx context.Context, src store.Source) (store.Store, error) {
			if string(src.Credentials["AWS_ACCESS_KEY_ID"]) == "slow" {
				select { // a fill that takes as long as it may
				case <-slow:
				case <-ctx.Done():
				}
				return nil, context.Cause(ctx)
			}
			return stores.Open(ctx, src)
		}
	})
	creds := minioServer.CredentialsDir(t)
	src := request(t, d, d.shards[0], creds).Source
	slowSrc := src
	slowSrc.Credentials = map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("slow"), "AWS_SECRET_ACCESS_KEY": []byte("x")}
	hostile := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	dropped := 0
	for i := range 5 {
		shards := make([]nodewire.Part, nodewire.MaxWarmShards)
		for j := range shards {
			shards[j] = nodewire.Part{Key: fmt.Sprintf("big-%d-%d", i, j), Size: 1 << 20, Hash: "xxh64:00000000000000" + fmt.Sprintf("%02x", j%256)}
		}
		ans, err := hostile.Warm(context.Background(), nodewire.WarmRequest{Source: slowSrc, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		dropped += ans.Dropped
	}
	if dropped < 4*nodewire.MaxWarmShards {
		t.Errorf("one pod's 5 warm requests of 256 shards: %d dropped; want most beyond its share of 16", dropped)
	}
	good := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	ans, err := good.Warm(context.Background(), nodewire.WarmRequest{Source: src, Shards: []nodewire.Part{partOf(d.shards[0])}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Queued != 1 {
		t.Fatalf("another pod's warm request beside the slow fills: %+v; want its shard queued", ans)
	}
	if err := waitUntil(20*time.Second, func() bool { return a.Stats().WarmFills >= 1 }); err != nil {
		t.Fatalf("another pod's warm fill did not run beside one pod's slow fills: %+v", a.Stats())
	}
}

func waitUntil(limit time.Duration, ok func() bool) error {
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
	}
	return nil
}

// The second round's: an entry being served cannot be evicted, and a pod
// reading a large answer just fast enough held the node's room while
// every other pod's fill waited for it (a minute, each with a slot). A
// fill finds room at once or is refused (507), and its sidecar reads the
// store; a pod's answers in flight are bounded.
func TestIntegrationAPodReadingSlowlyHoldsNoOtherPodsFill(t *testing.T) {
	big := newDataset(t, "sha256", 7<<20)
	small := newDataset(t, "sha256", 2<<20)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) { o.LimitBytes, o.WriteIdle = 8<<20, 10*time.Second })
	creds := minioServer.CredentialsDir(t)
	hostile := newPod(t, apiServer.Namespace(t), node)
	c := rawClient(a, "")
	resp, err := post(context.Background(), t, c, hostile.token, request(t, big, big.shards[0], creds))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the large answer: %d", resp.StatusCode)
	}
	// A second answer of the pod's beyond an eighth of the budget: 429.
	again, err := post(context.Background(), t, c, hostile.token, request(t, small, small.shards[0], creds))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(again.Body)
	_ = again.Body.Close()
	if again.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(msg), "bytes of answers in flight") {
		t.Errorf("a second answer of the slow pod: %d %s; want 429", again.StatusCode, msg)
	}
	other := newSidecar(t, small, a, newPod(t, apiServer.Namespace(t), node), creds, 0)
	other.readAll(t, small)
	if r := other.missReasons(); !strings.Contains(r, "507") || !strings.Contains(r, "no room") {
		t.Errorf("another pod's fill beside the held room: %q; want refused at once for want of room (507), read from the store", r)
	}
}
