package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Hostile mode (E2E_HOSTILE=1): a pod of another tenant on the node cache's
// node. It listens where an agent would, with a certificate of its own for
// the agent's name (E2E_AGENT_NAME), and counts what it is sent; it floods
// the agent (E2E_AGENT_ADDR) with its own pod-bound token (the file
// E2E_AGENT_TOKEN) asking for the victim's shards (E2E_VICTIM: a JSON
// array of requests) with keys that read nothing, with random tokens, with
// answers it never reads, and with warm requests of garbage. It prints one
// JSON line, its report, and exits.

// hostileReport is what the hostile pod saw.
type hostileReport struct {
	// FakeAgentRequests are the requests its own listener was sent.
	FakeAgentRequests int64
	// Statuses counts the agent's answers to its shard requests, Served
	// those answered with bytes, VictimBytes the bytes equal to a victim's
	// shard's hash it was given.
	Statuses    map[int]int
	Served      int
	VictimBytes int64
	// RandomTokens are the agent's answers to requests with random tokens.
	RandomTokens map[int]int
	// Warm sums the agent's answers to its warm requests.
	Warm struct{ Present, Queued, Dropped, Refused int }
}

func hostile() error {
	addr, name, tokenFile := os.Getenv("E2E_AGENT_ADDR"), os.Getenv("E2E_AGENT_NAME"), os.Getenv("E2E_AGENT_TOKEN")
	var victim []json.RawMessage
	if err := json.Unmarshal([]byte(os.Getenv("E2E_VICTIM")), &victim); err != nil || len(victim) == 0 {
		return fmt.Errorf("E2E_VICTIM: want a JSON array of shard requests (%d): %w", len(victim), err)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	var fake atomic.Int64
	if err := fakeAgent(name, &fake); err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a hostile pod trusts anyone
		DisableKeepAlives: true,
	}}
	post := func(ctx context.Context, path, tok string, body []byte) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+name+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		return client.Do(req)
	}
	h := &hostileRun{post: post, token: string(token), victim: victim,
		rep: hostileReport{Statuses: map[int]int{}, RandomTokens: map[int]int{}}}
	var wg sync.WaitGroup
	h.flood(&wg)
	h.randomTokens(&wg)
	h.warmGarbage()
	wg.Wait()
	time.Sleep(20 * time.Second) // the unread answers stall the agent's writes
	for _, resp := range h.unread {
		_ = resp.Body.Close()
	}
	rep := h.rep
	rep.FakeAgentRequests = fake.Load()
	out, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println("HOSTILE " + string(out))
	return nil
}

// hostileRun is the hostile pod's attack in progress.
type hostileRun struct {
	post   func(ctx context.Context, path, tok string, body []byte) (*http.Response, error)
	token  string
	victim []json.RawMessage

	mu     sync.Mutex
	rep    hostileReport
	unread []*http.Response
}

// flood asks for the victim's shards, 32 at once, again and again, with
// keys that read nothing; half the answers that come are never read.
func (h *hostileRun) flood(wg *sync.WaitGroup) {
	ctx := context.Background()
	for w := range 32 {
		wg.Go(func() {
			for i := range 12 {
				resp, err := h.post(ctx, "/v1/shard", h.token, h.victim[(w*12+i)%len(h.victim)])
				if err != nil {
					continue
				}
				h.mu.Lock()
				h.rep.Statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusOK && i%2 == 0 {
					h.rep.Served++
					h.unread = append(h.unread, resp) //nolint:bodyclose // held unread on purpose, closed at the end
					h.mu.Unlock()
					continue
				}
				h.mu.Unlock()
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					h.mu.Lock()
					h.rep.Served++
					h.rep.VictimBytes += int64(len(b))
					h.mu.Unlock()
				}
			}
		})
	}
}

// randomTokens sends requests with made-up tokens, from the same address.
func (h *hostileRun) randomTokens(wg *sync.WaitGroup) {
	for range 4 {
		wg.Go(func() {
			for range 50 {
				b := make([]byte, 24)
				_, _ = rand.Read(b)
				resp, err := h.post(context.Background(), "/v1/shard", "forged."+hex.EncodeToString(b), h.victim[0])
				if err != nil {
					continue
				}
				_ = resp.Body.Close()
				h.mu.Lock()
				h.rep.RandomTokens[resp.StatusCode]++
				h.mu.Unlock()
			}
		})
	}
}

// warmGarbage sends 40 warm requests of 256 made-up shards each.
func (h *hostileRun) warmGarbage() {
	var first struct {
		Source json.RawMessage `json:"source"`
	}
	_ = json.Unmarshal(h.victim[0], &first)
	for i := range 40 {
		shards := make([]map[string]any, 256)
		for j := range shards {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			shards[j] = map[string]any{"key": fmt.Sprintf("garbage/%d/%d", i, j), "size": 1 << 30, "hash": "sha256:" + hex.EncodeToString(b)}
		}
		body, _ := json.Marshal(map[string]any{"source": first.Source, "shards": shards})
		resp, err := h.post(context.Background(), "/v1/warm", h.token, body)
		if err != nil {
			continue
		}
		var ans struct{ Present, Queued, Dropped int }
		h.mu.Lock()
		if resp.StatusCode == http.StatusAccepted {
			_ = json.NewDecoder(resp.Body).Decode(&ans)
			h.rep.Warm.Present += ans.Present
			h.rep.Warm.Queued += ans.Queued
			h.rep.Warm.Dropped += ans.Dropped
		} else {
			h.rep.Warm.Refused++
		}
		h.mu.Unlock()
		_ = resp.Body.Close()
	}
}

// fakeAgent serves TLS on :9466 with a self-made certificate for name,
// counting every request it is sent.
func fakeAgent(name string, count *atomic.Int64) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", ":9466")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count.Add(1)
		http.Error(w, "not the agent", http.StatusTeapot)
	}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	return nil
}
