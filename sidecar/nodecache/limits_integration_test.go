//go:build integration

package nodecache_test

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/shardfeed/shardfeed/internal/trust"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
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
func post(ctx context.Context, t *testing.T, c *http.Client, token string, body nodecache.Request) (*http.Response, error) {
	t.Helper()
	if b, err := os.ReadFile(token); err == nil {
		token = string(b)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+agentName+nodecache.ShardPath, bytes.NewReader(raw))
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
		shards := make([]nodecache.Part, nodecache.MaxWarmShards)
		for j := range shards {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			shards[j] = nodecache.Part{Key: fmt.Sprintf("garbage-%d-%d", i, j), Size: 1 << 30, Hash: "sha256:" + hex.EncodeToString(b)}
		}
		if _, err := hostile.Warm(context.Background(), nodecache.WarmRequest{Source: src, Shards: shards}); err != nil {
			t.Fatal(err)
		}
	}
	if w := a.Stats().Wanted; w > 300 {
		t.Fatalf("one pod's warm requests keep %d entries wanted; want at most its share, 300", w)
	}
	good := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	ans, err := good.Warm(context.Background(), nodecache.WarmRequest{Source: src, Shards: []nodecache.Part{nodecache.PartOf(d.shards[0])}})
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
