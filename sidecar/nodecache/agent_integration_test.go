//go:build integration

package nodecache_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodeclient"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

var (
	apiServer   *testenv.APIServer
	minioServer *testenv.MinIO
)

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.RunWithMinIO(m, &minioServer)
	_ = apiServer.Stop()
	os.Exit(code)
}

const node = "node-a"

// dataset is shards of random bytes in a fresh bucket, hashed as an index
// hashes them.
type dataset struct {
	bucket string
	shards []cache.Shard
	data   map[string][]byte
}

func newDataset(t *testing.T, algo string, sizes ...int) *dataset {
	t.Helper()
	d := &dataset{bucket: minioServer.Bucket(t), data: map[string][]byte{}}
	r := rand.New(rand.NewPCG(uint64(len(sizes)), 11))
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		key := fmt.Sprintf("shard.%05d.mds", i)
		if _, err := minioServer.Client.PutObject(context.Background(), d.bucket, "web/"+key, bytes.NewReader(b), int64(n), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		sum, err := checksum.Of(algo, b)
		if err != nil {
			t.Fatal(err)
		}
		d.shards = append(d.shards, cache.Shard{Stream: "web", Key: key, Size: int64(n), Hash: sum.String()})
		d.data[key] = b
	}
	return d
}

// source is the stream's store as a sidecar has it: a mounted Secret.
func (d *dataset) source(credentialsDir string) store.Source {
	return store.Source{URI: "s3://" + d.bucket + "/web/", Endpoint: minioServer.URL(), Insecure: true, CredentialsDir: credentialsDir,
		Retry: store.Retry{MaxElapsed: 5 * time.Second, RequestTimeout: 20 * time.Second}}
}

// agent runs a node agent on a port of its own until the test ends,
// with a certificate of pki's CA for agentName.
type agent struct {
	*nodecache.Agent
	addr, caFile string
	dir          string
	stop         func()
}

// client is a sidecar's client of the agent, presenting token.
func (a *agent) client(t *testing.T, token string, wait time.Duration) *nodeclient.Client {
	t.Helper()
	c, err := nodeclient.New(nodeclient.Options{URL: "https://" + agentName + ":9466", Addr: a.addr, CAFile: a.caFile, TokenFile: token, Wait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func startAgent(t *testing.T, dir string, edit func(*nodecache.Options)) *agent {
	t.Helper()
	reviewer, err := nodecache.NewTokenReviewer(apiServer.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts := nodecache.Options{Dir: dir, Node: node, Auth: reviewer, AllowedEndpoints: []string{minioServer.Endpoint},
		Retry: store.Retry{MaxElapsed: 2 * time.Second, RequestTimeout: 20 * time.Second}, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
	if edit != nil {
		edit(&opts)
	}
	a, err := nodecache.NewAgent(opts)
	if err != nil {
		t.Fatal(err)
	}
	p := newPKI(t)
	certFile, keyFile := p.issue(t, false, agentName)
	l, err := nodecache.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, l, &nodecache.Certificate{CertFile: certFile, KeyFile: keyFile}) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &agent{Agent: a, addr: l.Addr().String(), caFile: p.caFile, dir: dir, stop: stop}
}

// pod is a pod on a node, with its projected token for the agent.
type pod struct {
	ns, name, token string
}

func newPod(t *testing.T, ns, nodeName string) pod {
	t.Helper()
	const sa = "trainer"
	ctx := context.Background()
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := apiServer.Client.Create(ctx, acct); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "trainer-", Namespace: ns},
		Spec: corev1.PodSpec{ServiceAccountName: sa, NodeName: nodeName, Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}}
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return pod{ns: ns, name: p.Name, token: requestToken(t, ns, sa, p, nodewire.Audience)}
}

// requestToken asks for a token as the kubelet does for a projected
// volume, bound to p if given, and writes it to a file.
func requestToken(t *testing.T, ns, sa string, p *corev1.Pod, audience string) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}
	if p != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
	}
	if err := apiServer.Client.SubResource("token").Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}, tr); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sidecar is a pod's shard cache, asking the agent first.
type sidecar struct {
	cache  *cache.Cache
	client *nodeclient.Client
	misses []error
	mu     sync.Mutex
}

func newSidecar(t *testing.T, d *dataset, a *agent, p pod, credentialsDir string, wait time.Duration) *sidecar {
	t.Helper()
	src := d.source(credentialsDir)
	st, err := stores.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	s := &sidecar{client: a.client(t, p.token, wait)}
	s.cache, err = cache.New(cache.Options{Dir: t.TempDir(), Node: s.client.Fetch(map[string]store.Source{"web": src}),
		NodeWarm: s.client.Warmer(map[string]store.Source{"web": src}),
		OnNodeMiss: func(_ cache.Shard, err error) {
			s.mu.Lock()
			s.misses = append(s.misses, err)
			s.mu.Unlock()
		}, CorruptAttempts: 1, Retry: store.Retry{MaxElapsed: time.Second}}, map[string]store.Store{"web": st})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readAll reads every shard through the sidecar's cache and checks its
// bytes are the object's.
func (s *sidecar) readAll(t *testing.T, d *dataset) {
	t.Helper()
	for _, sh := range d.shards {
		p, err := s.cache.Acquire(context.Background(), sh)
		if err != nil {
			t.Fatalf("%s: %v", sh.Key, err)
		}
		got, err := os.ReadFile(p)
		s.cache.Release(sh)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, d.data[sh.Key]) {
			t.Fatalf("%s: the sidecar got bytes that are not the object's", sh.Key)
		}
	}
}

func (s *sidecar) missReasons() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, err := range s.misses {
		out = append(out, err.Error())
	}
	return strings.Join(out, "\n")
}

func total(d *dataset) int64 {
	n := int64(0)
	for _, s := range d.shards {
		n += s.Size
	}
	return n
}

// Two jobs of one namespace and Secret on one node: the second's shards
// all come from the node, with no byte fetched from the store, and every
// byte checked.
func TestIntegrationASecondJobReadsTheNodesCopy(t *testing.T) {
	d := newDataset(t, "xxh64", 3<<20, 1<<20, 40<<20, 100, 2<<20)
	a := startAgent(t, t.TempDir(), nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)

	first := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
	first.readAll(t, d)
	st := a.Stats()
	if st.Fills != int64(len(d.shards)) || st.Hits != 0 || st.Cache.FetchedBytes != total(d) {
		t.Fatalf("the first job: agent fills %d, hits %d, fetched %d bytes; want %d fills of %d bytes (misses: %s)",
			st.Fills, st.Hits, st.Cache.FetchedBytes, len(d.shards), total(d), first.missReasons())
	}
	if fs := first.cache.Stats(); fs.FetchedBytes != 0 || fs.Node.Hits != int64(len(d.shards)) {
		t.Fatalf("the first job's sidecar fetched %d bytes from the store and took %d shards from the node; want 0 and %d", fs.FetchedBytes, fs.Node.Hits, len(d.shards))
	}

	second := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
	second.readAll(t, d)
	// The agent counts an answer's bytes once it has written them, which
	// the reader may have before: wait for the count a moment.
	st2 := a.Stats()
	for i := 0; i < 100 && st2.HitBytes < total(d); i++ {
		time.Sleep(20 * time.Millisecond)
		st2 = a.Stats()
	}
	if st2.Cache.FetchedBytes != st.Cache.FetchedBytes {
		t.Errorf("the second job cost %d bytes of egress, want 0", st2.Cache.FetchedBytes-st.Cache.FetchedBytes)
	}
	if st2.Hits != int64(len(d.shards)) || st2.HitBytes != total(d) || st2.ByNamespace[ns].HitBytes != total(d) {
		t.Errorf("the second job: %d hits of %d bytes (namespace %s: %d); want %d of %d", st2.Hits, st2.HitBytes, ns, st2.ByNamespace[ns].HitBytes, len(d.shards), total(d))
	}
	if ss := second.cache.Stats(); ss.FetchedBytes != 0 || second.client.Stats().Hits != int64(len(d.shards)) {
		t.Errorf("the second sidecar fetched %d bytes from the store, %d node hits", ss.FetchedBytes, second.client.Stats().Hits)
	}
}

// Entries are shared within a namespace and its Secret's keys: a pod of
// another namespace, or one with other keys, gets none of them; a source
// the platform marks shared is read by all.
func TestIntegrationTheNodeCacheKeepsNamespacesAndCredentialsApart(t *testing.T) {
	d := newDataset(t, "xxh64", 1<<20, 2<<20)
	a := startAgent(t, t.TempDir(), nil)
	creds := minioServer.CredentialsDir(t)
	owner := apiServer.Namespace(t)
	newSidecar(t, d, a, newPod(t, owner, node), creds, 0).readAll(t, d)
	filled := a.Stats()

	// Another namespace, the same keys: not one hit; its own fill.
	other := apiServer.Namespace(t)
	s := newSidecar(t, d, a, newPod(t, other, node), creds, 0)
	s.readAll(t, d)
	st := a.Stats()
	if st.Hits != filled.Hits || st.ByNamespace[other].Hits != 0 || st.ByNamespace[other].Fills != int64(len(d.shards)) {
		t.Errorf("a pod of another namespace got %d hits (%d fills); want none of the owner's entries", st.ByNamespace[other].Hits, st.ByNamespace[other].Fills)
	}

	// The owner's namespace with keys that do not read the bucket: no
	// entry is served; the agent's fill is refused by the store.
	wrong := t.TempDir()
	writeKeys(t, wrong, "not-the-secret")
	thief := newPod(t, owner, node)
	body, err := a.client(t, thief.token, 0).Get(context.Background(), request(t, d, d.shards[0], wrong))
	if err == nil {
		_ = body.Close()
		t.Fatal("a pod with keys that cannot read the bucket was served its shard from the node cache")
	}
	if !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "HTTP 403") {
		t.Errorf("the refusal: %v; want the store's own refusal of the keys", err)
	}
	if got := a.Stats().Hits; got != st.Hits {
		t.Errorf("hits went from %d to %d for keys that cannot read the bucket", st.Hits, got)
	}

	// A source the platform marks shared, its shards hashed with sha256:
	// another namespace reads the entries the first filled.
	ds := newDataset(t, "sha256", 1<<20, 2<<20)
	shared := startAgent(t, t.TempDir(), func(o *nodecache.Options) {
		o.SharedSources = []string{"s3://" + ds.bucket + "/web/?endpoint=" + minioServer.URL(), "s3://" + d.bucket + "/web/?endpoint=" + minioServer.URL()}
	})
	newSidecar(t, ds, shared, newPod(t, owner, node), creds, 0).readAll(t, ds)
	newSidecar(t, ds, shared, newPod(t, other, node), creds, 0).readAll(t, ds)
	if sst := shared.Stats(); sst.ByNamespace[other].Hits != int64(len(ds.shards)) || sst.Cache.FetchedBytes != total(ds) {
		t.Errorf("a shared source: the other namespace got %d hits, the agent fetched %d bytes; want %d and %d", sst.ByNamespace[other].Hits, sst.Cache.FetchedBytes, len(ds.shards), total(ds))
	}
	// Its xxh64 shards are kept per namespace: a forger could match
	// xxh64 with bytes of its own.
	newSidecar(t, d, shared, newPod(t, owner, node), creds, 0).readAll(t, d)
	newSidecar(t, d, shared, newPod(t, other, node), creds, 0).readAll(t, d)
	if sst := shared.Stats(); sst.ByNamespace[other].Hits != int64(len(ds.shards)) || sst.ByNamespace[other].Fills != int64(len(d.shards)) {
		t.Errorf("a shared source's xxh64 shards: the other namespace got %d hits and %d fills; want its own fills", sst.ByNamespace[other].Hits-int64(len(ds.shards)), sst.ByNamespace[other].Fills)
	}
}

// writeKeys writes a Secret's keys as mounted: MinIO's access key with the
// secret given.
func writeKeys(t *testing.T, dir, secret string) {
	t.Helper()
	for name, v := range map[string]string{"AWS_ACCESS_KEY_ID": minioServer.AccessKey, "AWS_SECRET_ACCESS_KEY": secret} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func request(t *testing.T, d *dataset, s cache.Shard, credentialsDir string) nodewire.Request {
	t.Helper()
	src, err := nodeclient.SourceOf(context.Background(), d.source(credentialsDir))
	if err != nil {
		t.Fatal(err)
	}
	return nodewire.Request{Source: src, Part: partOf(s)}
}

// partOf is a whole shard of a dataset as a request names it.
func partOf(s cache.Shard) nodewire.Part {
	return nodewire.Part{Key: s.Key, Size: s.Size, Hash: s.Hash}
}

// A pod that names a shard with another hash (bytes it forged) fills
// nothing: the agent reads the store, and the store's bytes do not match.
// A cache directory tampered with on the node is checked again: the
// agent serves the store's bytes, not the file's.
func TestIntegrationTheNodeCacheBelievesOnlyTheStore(t *testing.T) {
	d := newDataset(t, "sha256", 1<<20, 3<<20)
	dir := t.TempDir()
	a := startAgent(t, dir, nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	forger := newPod(t, ns, node)

	forged := bytes.Repeat([]byte("forged"), int(d.shards[0].Size)/6+1)[:d.shards[0].Size]
	sum, _ := checksum.Of("sha256", forged)
	req := request(t, d, d.shards[0], creds)
	req.Hash = sum.String()
	body, err := a.client(t, forger.token, 0).Get(context.Background(), req)
	if err == nil {
		_ = body.Close()
		t.Fatal("the agent served a shard under a hash its store's bytes do not have")
	}
	if !strings.Contains(err.Error(), "the store's bytes are not those of "+req.Hash) {
		t.Errorf("the refusal: %v; want the hash mismatch", err)
	}
	if got := a.Stats().Cache.UsedBytes; got != 0 {
		t.Errorf("the forged request left %d bytes in the node cache", got)
	}

	// The true shards, then the files on the node replaced: garbage of
	// the same size, and a truncated one.
	s := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
	s.readAll(t, d)
	a.stop()
	var files []string
	_ = filepath.WalkDir(filepath.Join(dir, "shards"), func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) != len(d.shards) {
		t.Fatalf("%d entry files on the node, want %d", len(files), len(d.shards))
	}
	for i, f := range files {
		info, _ := os.Stat(f)
		garbage := bytes.Repeat([]byte{0xAB}, int(info.Size())-i*1000)
		if err := os.WriteFile(f, garbage, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "shards", "zz"), []byte("not an entry"), 0o644); err != nil {
		t.Fatal(err)
	}
	restarted := startAgent(t, dir, nil)
	s2 := newSidecar(t, d, restarted, newPod(t, ns, node), creds, 0)
	s2.readAll(t, d)
	st := restarted.Stats()
	if st.Hits != 0 || st.Fills != int64(len(d.shards)) || st.Cache.Reused != 0 || s2.cache.Stats().Node.Hits != int64(len(d.shards)) {
		t.Errorf("after the files were replaced: %d hits, %d fills, %d reused, the sidecar took %d from the node; want every shard filled again from the store (misses: %s)",
			st.Hits, st.Fills, st.Cache.Reused, s2.cache.Stats().Node.Hits, s2.missReasons())
	}
	// Untouched, they are reused after a restart.
	restarted.stop()
	again := startAgent(t, dir, nil)
	newSidecar(t, d, again, newPod(t, ns, node), creds, 0).readAll(t, d)
	if st := again.Stats(); st.Hits != int64(len(d.shards)) || st.Cache.Reused != int64(len(d.shards)) || st.Cache.FetchedBytes != 0 {
		t.Errorf("after a restart: %d hits, %d reused, %d bytes fetched; want every shard from the node, checked", st.Hits, st.Cache.Reused, st.Cache.FetchedBytes)
	}
}

// Without an agent, with one that never answers or stops mid-answer, or
// one that answers wrong bytes, a sidecar reads the store and gets the
// right bytes.
func TestIntegrationASidecarReadsTheStoreWhenTheAgentFails(t *testing.T) {
	d := newDataset(t, "xxh64", 1<<20, 6<<20)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	p := newPod(t, ns, node)
	ca := newPKI(t)
	agentCert, agentKey := ca.issue(t, false, agentName)
	type fake struct {
		certFile, keyFile string // "": plain HTTP
	}
	var mu sync.Mutex
	var asked []string // what impersonators were sent: any request at all
	serve := func(f fake, h http.HandlerFunc) *agent {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
		if f.certFile == "" {
			go func() { _ = srv.Serve(l) }()
		} else {
			go func() { _ = srv.ServeTLS(l, f.certFile, f.keyFile) }()
		}
		t.Cleanup(func() { _ = srv.Close() })
		return &agent{addr: l.Addr().String(), caFile: ca.caFile}
	}
	// An impersonator answers every request with the shard's size of
	// zeros, and writes down what it was sent.
	impersonator := func(f fake) *agent {
		return serve(f, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			asked = append(asked, r.Header.Get("Authorization")+" "+string(body))
			mu.Unlock()
			http.Error(w, "no", http.StatusTeapot)
		})
	}
	agentTLS := fake{agentCert, agentKey}
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	goneAddr := gone.Addr().String()
	_ = gone.Close()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	selfCert, selfKey := ca.issue(t, true, agentName)
	otherCert, otherKey := ca.issue(t, false, "shardfeed-webhook.shardfeed-system.svc")
	for _, tt := range []struct {
		name  string
		agent *agent
		want  string
	}{
		{"no agent", &agent{addr: goneAddr, caFile: ca.caFile}, "dial tcp"},
		{"an agent that never answers", serve(agentTLS, func(http.ResponseWriter, *http.Request) { <-hang }), "did not answer in time"},
		{"an agent that stops mid-answer", serve(agentTLS, func(w http.ResponseWriter, r *http.Request) {
			var req nodewire.Request
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.Header().Set("Content-Length", fmt.Sprint(req.Size))
			_, _ = w.Write(make([]byte, req.Size/2))
			w.(http.Flusher).Flush()
			<-hang
		}), "did not answer in time"},
		{"an agent that lies", serve(agentTLS, func(w http.ResponseWriter, r *http.Request) {
			var req nodewire.Request
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.Header().Set("Content-Length", fmt.Sprint(req.Size))
			_, _ = w.Write(bytes.Repeat([]byte{1}, int(req.Size)))
		}), "the index says"},
		// Whoever holds the agent's address without its certificate is
		// sent nothing: not the token, not the stream's keys.
		{"a plain-HTTP impostor", impersonator(fake{}), "server gave HTTP response to HTTPS client"},
		{"an impostor with a self-signed certificate for the agent's name", impersonator(fake{selfCert, selfKey}), "certificate is not the operator's"},
		{"an impostor with the operator CA's certificate for another name", impersonator(fake{otherCert, otherKey}), "certificate is not the operator's"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSidecar(t, d, tt.agent, p, creds, 300*time.Millisecond)
			start := time.Now()
			s.readAll(t, d)
			st := s.cache.Stats()
			if st.Node.Hits != 0 || st.Node.Misses != int64(len(d.shards)) || st.FetchedBytes != total(d) {
				t.Errorf("node hits %d, misses %d, fetched %d bytes from the store; want every shard from the store", st.Node.Hits, st.Node.Misses, st.FetchedBytes)
			}
			if r := s.missReasons(); !strings.Contains(r, tt.want) {
				t.Errorf("why the agent was passed by: %s; want %q", r, tt.want)
			}
			t.Logf("%d shards read in %s", len(d.shards), time.Since(start).Round(time.Millisecond))
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) > 0 {
		t.Errorf("impostors were sent %d requests, the first: %.200q", len(asked), asked[0])
	}
}

// The agent serves only pods of its node that show a token bound to them
// and meant for it, and reaches only endpoints the platform allows.
func TestIntegrationTheAgentKnowsWhoAsks(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	a := startAgent(t, t.TempDir(), nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	good := newPod(t, ns, node)
	elsewhere := newPod(t, ns, "node-b")
	unbound := requestToken(t, ns, "trainer", nil, nodewire.Audience)
	operatorToken := requestToken(t, ns, "trainer", nil, "shardfeed")
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok := request(t, d, d.shards[0], creds)
	at := func(endpoint string) nodewire.Request {
		r := ok
		r.Source.Endpoint = endpoint
		return r
	}
	fileURI := ok
	fileURI.Source.URI = "file:///etc/"
	fileURI.Key = "passwd"
	noCreds := ok
	noCreds.Source.Credentials = nil
	for _, tt := range []struct {
		name  string
		token string
		req   nodewire.Request
		want  string // "": served
	}{
		{"the pod's own token", good.token, ok, ""},
		{"no token", empty, ok, "401"},
		{"a token not bound to a pod", unbound, ok, "not bound to a pod"},
		{"a token for the operator", operatorToken, ok, "401"},
		{"a pod of another node", elsewhere.token, ok, `runs on node "node-b"`},
		{"an endpoint the platform does not allow", good.token, at("http://127.0.0.2:9000"), "the node agent may not reach this endpoint"},
		{"a node's metadata service", good.token, at("http://169.254.169.254"), "link-local"},
		{"a file", good.token, fileURI, "not files"},
		{"no credentials", good.token, noCreds, "never its own"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, err := a.client(t, tt.token, 0).Get(context.Background(), tt.req)
			if err == nil {
				got, rerr := io.ReadAll(body)
				_ = body.Close()
				if tt.want != "" {
					t.Fatalf("served; want refused with %q", tt.want)
				}
				if rerr != nil || !bytes.Equal(got, d.data[d.shards[0].Key]) {
					t.Fatalf("served %d bytes (%v), not the object's", len(got), rerr)
				}
				return
			}
			if tt.want == "" || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v; want %q", err, cmp(tt.want, "served"))
			}
		})
	}
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// rowGroupAndFooter is an object of 3 MiB read as a Parquet file's row
// group (2 MiB, hashed) and its footer (1 MiB, unhashed, versioned by the
// row group's hash).
func rowGroupAndFooter(t *testing.T) (*dataset, []byte, []cache.Shard) {
	t.Helper()
	d := newDataset(t, "xxh64", 3<<20)
	obj := d.data[d.shards[0].Key]
	rgSum, _ := checksum.Of("xxh64", obj[:2<<20])
	return d, obj, []cache.Shard{
		{Stream: "web", Key: d.shards[0].Key, Range: true, Offset: 0, Size: 2 << 20, Hash: rgSum.String()},
		{Stream: "web", Key: d.shards[0].Key, Range: true, Offset: 2 << 20, Size: 1 << 20, Version: rgSum.String()},
	}
}

// A Parquet file's row group and its footer, next to each other: the
// sidecar asks the agent for each (never one run from the store past it),
// the footer, which the index does not hash, keyed by its row group's hash
// as its version; a second pod reads both from the node.
func TestIntegrationARowGroupAndItsFooterComeFromTheNode(t *testing.T) {
	d, obj, parts := rowGroupAndFooter(t)
	a := startAgent(t, t.TempDir(), nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	read := func(s *sidecar) {
		t.Helper()
		held, err := s.cache.AcquireRun(context.Background(), parts)
		if err != nil || len(held) != 2 {
			t.Fatalf("held %d parts: %v", len(held), err)
		}
		for _, p := range parts {
			path, err := s.cache.Acquire(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, obj[p.Offset:p.Offset+p.Size]) {
				t.Fatalf("part at %d: not the object's bytes", p.Offset)
			}
			s.cache.Release(p)
			s.cache.Release(p)
		}
	}
	for i, want := range []struct{ fills, hits int64 }{{2, 0}, {2, 2}} {
		s := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
		read(s)
		st := a.Stats()
		if cs := s.cache.Stats(); cs.FetchedBytes != 0 || cs.Node.Hits != 2 {
			t.Errorf("pod %d read %d bytes from the store and %d parts from the node; want 0 and 2 (misses: %s)", i, cs.FetchedBytes, cs.Node.Hits, s.missReasons())
		}
		if st.Fills != want.fills || st.Hits != want.hits {
			t.Errorf("after pod %d: %d fills and %d hits, want %d and %d", i, st.Fills, st.Hits, want.fills, want.hits)
		}
	}
	// Another version of the object is another footer.
	parts[0].Hash, parts[1].Version = "xxh64:0000000000000001", "xxh64:0000000000000001"
	body, err := a.client(t, newPod(t, ns, node).token, 0).Get(context.Background(), nodewire.Request{
		Source: request(t, d, d.shards[0], creds).Source, Part: nodewire.Part{Key: parts[1].Key, Range: true, Offset: parts[1].Offset, Size: parts[1].Size, Version: parts[1].Version}})
	if err != nil {
		t.Fatal(err)
	}
	_ = body.Close()
	if st := a.Stats(); st.Fills != 3 || st.Hits != 2 {
		t.Errorf("a footer of another version: %d fills, %d hits; want it filled anew", st.Fills, st.Hits)
	}
}

// Entries changed on the node's disk while the agent runs (garbage of the
// same size, a footer the index does not hash among them) are found when
// next served, discarded and filled again from the store; an unhashed
// entry of an earlier run without the sum the agent kept is not believed.
func TestIntegrationTheAgentChecksEveryEntryItServes(t *testing.T) {
	d, obj, parts := rowGroupAndFooter(t)
	dir := t.TempDir()
	a := startAgent(t, dir, nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	read := func(a *agent) *sidecar {
		t.Helper()
		s := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
		for _, p := range parts {
			path, err := s.cache.Acquire(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			s.cache.Release(p)
			if !bytes.Equal(got, obj[p.Offset:p.Offset+p.Size]) {
				t.Fatalf("part at %d: not the object's bytes", p.Offset)
			}
		}
		return s
	}
	read(a)
	entryFiles := func() []string {
		var out []string
		_ = filepath.WalkDir(filepath.Join(dir, "shards"), func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				out = append(out, p)
			}
			return err
		})
		return out
	}
	garble := func() {
		for _, f := range entryFiles() {
			info, _ := os.Stat(f)
			if err := os.WriteFile(f, bytes.Repeat([]byte{0x5A}, int(info.Size())), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	garble()
	s := read(a)
	if st := a.Stats(); st.Discarded != 2 || st.Fills != 4 || st.Hits != 0 {
		t.Errorf("entries garbled under the agent: %d discarded, %d fills, %d hits; want both found and filled again", st.Discarded, st.Fills, st.Hits)
	}
	if cs := s.cache.Stats(); cs.Node.Hits != 2 || cs.FetchedBytes != 0 {
		t.Errorf("the sidecar took %d parts from the node and read %d bytes from the store; want the node's refilled copies", cs.Node.Hits, cs.FetchedBytes)
	}
	// Restarted: the kept sums hold; garbled again, both are found.
	a.stop()
	garble()
	b := startAgent(t, dir, nil)
	read(b)
	if st := b.Stats(); st.Fills != 2 || st.Hits != 0 {
		t.Errorf("garbled before a restart: %d fills, %d hits; want both filled again", st.Fills, st.Hits)
	}
	// Restarted without the footer's sum: it is filled again, not served.
	b.stop()
	if err := os.RemoveAll(filepath.Join(dir, ".sums")); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, dir, nil)
	read(c)
	if st := c.Stats(); st.Fills != 1 || st.Hits != 1 {
		t.Errorf("the footer's sum lost: %d fills, %d hits; want the footer filled again, the row group served", st.Fills, st.Hits)
	}
}

// A sidecar fetching many small shards at once (the cache runs up to 64
// downloads of them) keeps to the requests a pod may have at the agent
// (8 by default): past them the agent answers 429 and the shard would be
// read from the store.
func TestIntegrationManySmallShardsAtOnceAreAllTheNodes(t *testing.T) {
	sizes := make([]int, 48)
	for i := range sizes {
		sizes[i] = 64 << 10
	}
	d := newDataset(t, "xxh64", sizes...)
	a := startAgent(t, t.TempDir(), nil)
	s := newSidecar(t, d, a, newPod(t, apiServer.Namespace(t), node), minioServer.CredentialsDir(t), 0)
	var wg sync.WaitGroup
	errs := make(chan error, len(d.shards))
	for _, sh := range d.shards {
		wg.Go(func() {
			p, err := s.cache.Acquire(context.Background(), sh)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", sh.Key, err)
				return
			}
			got, err := os.ReadFile(p)
			s.cache.Release(sh)
			if err == nil && !bytes.Equal(got, d.data[sh.Key]) {
				err = errors.New("bytes that are not the object's")
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", sh.Key, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if fs := s.cache.Stats(); fs.FetchedBytes != 0 || fs.Node.Hits != int64(len(d.shards)) {
		t.Errorf("the sidecar fetched %d bytes from the store and took %d of %d shards from the node (misses: %s)",
			fs.FetchedBytes, fs.Node.Hits, len(d.shards), s.missReasons())
	}
}

// Seen in the node cache's e2e story (issue 94): a hostile tenant's flood
// of made-up keys and sizes made room for each before its store answered
// (502), evicting the entries a second job then had to fetch again.
func TestIntegrationAFillOfBytesTheStoreDoesNotHaveEvictsNothing(t *testing.T) {
	d := newDataset(t, "sha256", 1<<20, 1<<20)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) { o.LimitBytes = 3 << 20 })
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	newSidecar(t, d, a, newPod(t, ns, node), creds, 0).readAll(t, d)
	held := a.Stats().Cache.UsedBytes
	if held != 2<<20 {
		t.Fatalf("%d bytes on the node after the first job, want its 2 MiB", held)
	}
	flooder := newPod(t, ns, node)
	for i, tc := range []struct {
		key  string
		size int64
	}{
		{"no-such-object", 2 << 20},                 // not in the store
		{d.shards[0].Key, d.shards[0].Size + 2<<20}, // more bytes than the object has
	} {
		req := request(t, d, d.shards[0], creds)
		req.Key, req.Size = tc.key, tc.size
		body, err := a.client(t, flooder.token, 0).Get(context.Background(), req)
		if err == nil {
			_ = body.Close()
			t.Fatalf("request %d: the agent served %s of %d bytes", i, tc.key, tc.size)
		}
		if st := a.Stats().Cache; st.UsedBytes != held || st.Evictions != 0 {
			t.Fatalf("request %d (%s, %d bytes: %v): %d bytes on the node and %d evictions, want the first job's %d and none",
				i, tc.key, tc.size, err, st.UsedBytes, st.Evictions, held)
		}
	}
}
