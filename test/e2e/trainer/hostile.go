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
		return fmt.Errorf("E2E_VICTIM: a JSON array of shard requests: %v", err)
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
		DialContext:       func(ctx context.Context, network, _ string) (net.Conn, error) { return (&net.Dialer{}).DialContext(ctx, network, addr) },
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
	rep := hostileReport{Statuses: map[int]int{}, RandomTokens: map[int]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx := context.Background()
	// The flood: 32 at once, every victim shard again and again with keys
	// that read nothing; half the answers that come are never read.
	var unread []*http.Response
	for w := range 32 {
		wg.Go(func() {
			for i := range 12 {
				body := victim[(w*12+i)%len(victim)]
				resp, err := post(ctx, "/v1/shard", string(token), body)
				if err != nil {
					continue
				}
				mu.Lock()
				rep.Statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusOK && i%2 == 0 {
					rep.Served++
					unread = append(unread, resp) //nolint:bodyclose // held unread on purpose, closed at the end
					mu.Unlock()
					continue
				}
				mu.Unlock()
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					rep.Served++
					rep.VictimBytes += int64(len(b))
					mu.Unlock()
				}
			}
		})
	}
	// Random tokens, from the same address.
	for range 4 {
		wg.Go(func() {
			for range 50 {
				b := make([]byte, 24)
				_, _ = rand.Read(b)
				resp, err := post(ctx, "/v1/shard", "forged."+hex.EncodeToString(b), victim[0])
				if err != nil {
					continue
				}
				_ = resp.Body.Close()
				mu.Lock()
				rep.RandomTokens[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	// Garbage to warm: 40 requests of 256 made-up shards.
	var source json.RawMessage
	var first struct {
		Source json.RawMessage `json:"source"`
	}
	if err := json.Unmarshal(victim[0], &first); err == nil {
		source = first.Source
	}
	for i := range 40 {
		shards := make([]map[string]any, 256)
		for j := range shards {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			shards[j] = map[string]any{"key": fmt.Sprintf("garbage/%d/%d", i, j), "size": 1 << 30, "hash": "sha256:" + hex.EncodeToString(b)}
		}
		body, _ := json.Marshal(map[string]any{"source": source, "shards": shards})
		resp, err := post(ctx, "/v1/warm", string(token), body)
		if err != nil {
			continue
		}
		var ans struct{ Present, Queued, Dropped int }
		if resp.StatusCode == http.StatusAccepted {
			_ = json.NewDecoder(resp.Body).Decode(&ans)
			rep.Warm.Present += ans.Present
			rep.Warm.Queued += ans.Queued
			rep.Warm.Dropped += ans.Dropped
		} else {
			rep.Warm.Refused++
		}
		_ = resp.Body.Close()
	}
	wg.Wait()
	time.Sleep(20 * time.Second) // the unread answers stall the agent's writes
	for _, resp := range unread {
		_ = resp.Body.Close()
	}
	rep.FakeAgentRequests = fake.Load()
	out, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println("HOSTILE " + string(out))
	return nil
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
