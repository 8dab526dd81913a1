//go:build integration

package nodecache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/sidecar/cache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// warmOf is a warm request for shards of d with the keys in credentialsDir.
func warmOf(t *testing.T, d *dataset, credentialsDir string, shards ...cache.Shard) nodewire.WarmRequest {
	t.Helper()
	w := nodewire.WarmRequest{Source: request(t, d, d.shards[0], credentialsDir).Source}
	for _, s := range shards {
		w.Shards = append(w.Shards, partOf(s))
	}
	return w
}

// waitStats waits up to 20 s for the agent's counters to satisfy ok.
func waitStats(t *testing.T, a *agent, ok func(nodecache.Stats) bool) nodecache.Stats {
	t.Helper()
	st := a.Stats()
	for deadline := time.Now().Add(20 * time.Second); !ok(st) && time.Now().Before(deadline); st = a.Stats() {
		time.Sleep(20 * time.Millisecond)
	}
	return st
}

// A pod's sidecar names the shards it reads next: the agent fetches them
// before the pod asks, and the pod's requests are hits, the time they
// waited on the node measured. A warm request fills only what its own
// credentials read: another namespace's warm fills its own entries, keys
// that cannot read the bucket fill nothing.
func TestIntegrationWarmedShardsAreOnTheNodeBeforeThePodAsks(t *testing.T) {
	d := newDataset(t, "xxh64", 1<<20, 3<<20, 100, 2<<20, 40<<20)
	a := startAgent(t, t.TempDir(), nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	s := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)

	if !s.cache.Hint(d.shards) {
		t.Fatal("the first hint was not taken")
	}
	st := waitStats(t, a, func(st nodecache.Stats) bool { return st.WarmFills == int64(len(d.shards)) })
	if st.WarmFills != int64(len(d.shards)) || st.Cache.FetchedBytes != total(d) || st.Hits+st.Fills != 0 || st.Wanted != len(d.shards) {
		t.Fatalf("after the hint: %d warm fills of %d bytes, %d wanted, %d requests; want %d fills of %d bytes before any request",
			st.WarmFills, st.Cache.FetchedBytes, st.Wanted, st.Hits+st.Fills, len(d.shards), total(d))
	}
	s.readAll(t, d)
	st = waitStats(t, a, func(st nodecache.Stats) bool { return st.WarmHits == int64(len(d.shards)) })
	if st.Hits != int64(len(d.shards)) || st.Fills != 0 || st.WarmHits != int64(len(d.shards)) || st.LeadSeconds <= 0 || st.Cache.FetchedBytes != total(d) {
		t.Fatalf("the pod's reads: %d hits, %d fills, %d on warmed entries (lead %.3f s), the agent fetched %d bytes; want every read a hit on a warmed entry, nothing fetched again",
			st.Hits, st.Fills, st.WarmHits, st.LeadSeconds, st.Cache.FetchedBytes)
	}
	if sc := s.cache.Stats(); sc.FetchedBytes != 0 || sc.Node.Hinted != int64(len(d.shards)) {
		t.Fatalf("the sidecar fetched %d bytes from the store and hinted %d shards; want 0 and %d", sc.FetchedBytes, sc.Node.Hinted, len(d.shards))
	}
	t.Logf("%d shards warmed, then read: pre-warm lead %.3f s in all", len(d.shards), st.LeadSeconds)

	// The same namespace and keys again: the node holds them all.
	c := a.client(t, newPod(t, ns, node).token, 0)
	if ans, err := c.Warm(context.Background(), warmOf(t, d, creds, d.shards...)); err != nil || ans.Present != len(d.shards) {
		t.Fatalf("warming what the node holds: %+v, %v; want all present", ans, err)
	}
	// Another namespace: none is its own; its warm fills its own entries.
	other := a.client(t, newPod(t, apiServer.Namespace(t), node).token, 0)
	ans, err := other.Warm(context.Background(), warmOf(t, d, creds, d.shards[:2]...))
	if err != nil || ans.Present != 0 || ans.Queued != 2 {
		t.Fatalf("another namespace's warm: %+v, %v; want none present, both queued", ans, err)
	}
	before := st.WarmFills
	st = waitStats(t, a, func(st nodecache.Stats) bool { return st.WarmFills == before+2 })
	if st.WarmFills != before+2 {
		t.Fatalf("another namespace's warm: %d fills, want 2 of its own", st.WarmFills-before)
	}
	// Keys that cannot read the bucket: queued, refused by the store,
	// and nothing for them on the node.
	wrong := t.TempDir()
	writeKeys(t, wrong, "not-the-secret")
	if ans, err := c.Warm(context.Background(), warmOf(t, d, wrong, d.shards[0])); err != nil || ans.Queued != 1 {
		t.Fatalf("a warm with keys that cannot read: %+v, %v; want it queued", ans, err)
	}
	st = waitStats(t, a, func(st nodecache.Stats) bool { return st.WarmFailed == 1 })
	if st.WarmFailed != 1 || st.WarmFills != before+2 {
		t.Fatalf("a warm with keys that cannot read: %d failed, %d more fills; want 1 failed, none filled", st.WarmFailed, st.WarmFills-before-2)
	}
}

// The shards a pod named as its next are evicted only when no other will
// do: the least recently used one is kept because it is wanted, and the
// next least recent goes.
func TestIntegrationTheShardsPodsReadNextAreEvictedLast(t *testing.T) {
	const mib = 1 << 20
	d := newDataset(t, "xxh64", mib, mib, mib, mib, mib)
	a := startAgent(t, t.TempDir(), func(o *nodecache.Options) { o.LimitBytes = 4 * mib })
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	first := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
	for _, sh := range d.shards[:4] {
		read(t, first, sh)
		time.Sleep(10 * time.Millisecond) // a distinct use time each
	}
	// Shard 0, the least recently used, is named as a pod's next.
	c := a.client(t, newPod(t, ns, node).token, 0)
	if ans, err := c.Warm(context.Background(), warmOf(t, d, creds, d.shards[0])); err != nil || ans.Present != 1 {
		t.Fatalf("naming a held shard: %+v, %v", ans, err)
	}
	read(t, first, d.shards[4]) // the node is full: one entry goes
	st := a.Stats()
	if st.Cache.Evictions != 1 {
		t.Fatalf("%d evictions, want 1", st.Cache.Evictions)
	}
	// A new pod reads shards 0 and 1: 0 was kept, 1 went.
	second := newSidecar(t, d, a, newPod(t, ns, node), creds, 0)
	read(t, second, d.shards[0])
	if got := a.Stats(); got.Hits != st.Hits+1 {
		t.Fatalf("the wanted shard, least recently used: %d hits, want it kept and served", got.Hits-st.Hits)
	}
	read(t, second, d.shards[1])
	if got := a.Stats(); got.Fills != st.Fills+1 {
		t.Fatalf("the shard not wanted, next least recently used: %d fills, want it evicted and filled again", got.Fills-st.Fills)
	}
}

func read(t *testing.T, s *sidecar, sh cache.Shard) {
	t.Helper()
	if _, err := s.cache.Acquire(context.Background(), sh); err != nil {
		t.Fatalf("%s: %v", sh.Key, err)
	}
	s.cache.Release(sh)
}

// A warm request is checked as a shard request is, and refused with why.
func TestIntegrationTheAgentRefusesAWarmRequestItCannotServeSafely(t *testing.T) {
	d := newDataset(t, "xxh64", 4096)
	a := startAgent(t, t.TempDir(), nil)
	ns := apiServer.Namespace(t)
	creds := minioServer.CredentialsDir(t)
	good := newPod(t, ns, node)
	elsewhere := newPod(t, ns, "node-b")
	ok := warmOf(t, d, creds, d.shards[0])
	edit := func(f func(*nodewire.WarmRequest)) nodewire.WarmRequest {
		w := warmOf(t, d, creds, d.shards[0])
		f(&w)
		return w
	}
	var many []cache.Shard
	for i := range nodewire.MaxWarmShards + 1 {
		many = append(many, cache.Shard{Key: fmt.Sprintf("s%d", i), Size: 1, Hash: d.shards[0].Hash})
	}
	for _, tt := range []struct {
		name  string
		token string
		req   nodewire.WarmRequest
		want  string // "": taken
	}{
		{"the pod's own token", good.token, ok, ""},
		{"a pod of another node", elsewhere.token, ok, `runs on node "node-b"`},
		{"no shard", good.token, edit(func(w *nodewire.WarmRequest) { w.Shards = nil }), "names 0 shards"},
		{"too many shards", good.token, warmOf(t, d, creds, many...), fmt.Sprintf("names %d shards", nodewire.MaxWarmShards+1)},
		{"a file", good.token, edit(func(w *nodewire.WarmRequest) { w.Source.URI = "file:///etc/" }), "not files"},
		{"no credentials", good.token, edit(func(w *nodewire.WarmRequest) { w.Source.Credentials = nil }), "never its own"},
		{"a node's metadata service", good.token, edit(func(w *nodewire.WarmRequest) { w.Source.Endpoint = "http://169.254.169.254" }), "link-local"},
		{"a key outside the source", good.token, edit(func(w *nodewire.WarmRequest) { w.Shards[0].Key = "../other/x" }), "not a plain relative path"},
		{"an unhashed shard", good.token, edit(func(w *nodewire.WarmRequest) { w.Shards[0].Hash = "" }), "no hash and no version"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := a.Stats()
			_, err := a.client(t, tt.token, 0).Warm(context.Background(), tt.req)
			after := a.Stats()
			if tt.want == "" {
				if err != nil || after.WarmRequests != before.WarmRequests+1 {
					t.Fatalf("%v (%d requests taken); want it taken", err, after.WarmRequests-before.WarmRequests)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || after.WarmRequests != before.WarmRequests {
				t.Fatalf("%v; want refused with %q, nothing taken", err, tt.want)
			}
		})
	}
}
