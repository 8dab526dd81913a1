package nodecache

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// Warm requests, shard requests and the evictions they cause, at once on
// a node cache that is always full: none waits on another for ever. (The
// chaos run found the agent stuck: a warm request held the wanted entries'
// lock while asking the cache, and an eviction held the cache's while
// asking whether an entry was wanted.)
func TestWarmRequestsAndEvictionsAtOnceNeverDeadlock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	const shards, size = 24, 4096
	var reqs []nodewire.Request
	for i := range shards {
		b := bytes.Repeat([]byte{byte(i)}, size)
		key := fmt.Sprintf("s%02d", i)
		if err := st.Put(ctx, key, bytes.NewReader(b), size); err != nil {
			t.Fatal(err)
		}
		sum, _ := checksum.Of("xxh64", b)
		reqs = append(reqs, nodewire.Request{Source: nodewire.Source{URI: "s3://b/", Endpoint: "minio:9000", Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("k")}},
			Part: nodewire.Part{Key: key, Size: size, Hash: sum.String()}})
	}
	a, err := NewAgent(Options{Dir: t.TempDir(), Auth: anyPod{}, Node: "n", AllowedEndpoints: []string{"minio:9000"}, LimitBytes: 4 * size,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Open: func(context.Context, store.Source) (store.Store, error) { return st, nil }})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	a.warmFills(actx)
	post := func(path string, v any) int {
		body, _ := json.Marshal(v)
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
		r.Header.Set("Authorization", "Bearer token")
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		return w.Code
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 60 {
				k := (g*7 + i) % shards
				if i%2 == 0 {
					w := nodewire.WarmRequest{Source: reqs[k].Source}
					for _, r := range reqs[k:min(k+6, shards)] {
						w.Shards = append(w.Shards, r.Part)
					}
					post(nodewire.WarmPath, w)
				} else {
					post(nodewire.ShardPath, reqs[k])
				}
				_ = a.Stats()
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("warm and shard requests did not finish in 60 s: a lock waits on another")
	}
	if st := a.Stats(); st.Cache.Evictions == 0 || st.Hits+st.Fills == 0 || st.WarmRequests == 0 {
		t.Fatalf("%+v: want requests served, warm requests taken and entries evicted", st)
	}
}
