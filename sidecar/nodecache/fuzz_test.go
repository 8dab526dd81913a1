package nodecache

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

type anyPod struct{}

func (anyPod) Authenticate(context.Context, string, string) (Caller, error) {
	return Caller{Namespace: "ml", ServiceAccount: "trainer", Pod: "p", Node: "n"}, nil
}

// storelessAgent is an agent whose every store fails to open, counting
// the tries, with a warm queue of 8 and no fill running.
func storelessAgent(f *testing.F) (*Agent, *atomic.Int64) {
	var opened atomic.Int64
	a, err := NewAgent(Options{Dir: f.TempDir(), Auth: anyPod{}, Node: "n", AllowedEndpoints: []string{"minio:9000"}, LimitBytes: 1 << 20,
		WarmQueue: 8, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Open: func(context.Context, store.Source) (store.Store, error) {
			opened.Add(1)
			return nil, errors.New("no store in this test")
		}})
	if err != nil {
		f.Fatal(err)
	}
	return a, &opened
}

// FuzzAgentRequest: whatever a pod sends, the agent answers with a status
// (never a panic), serves nothing it did not fill from a store, and never
// opens a store for a request it refuses.
func FuzzAgentRequest(f *testing.F) {
	for _, seed := range []string{
		`{"source":{"uri":"s3://b/p/","endpoint":"minio:9000","credentials":{"AWS_ACCESS_KEY_ID":"YQ=="}},"key":"a.mds","size":10,"hash":"xxh64:00ff"}`,
		`{"source":{"uri":"file:///etc/"},"key":"passwd","size":1,"hash":"sha256:00"}`,
		`{"source":{"uri":"s3://b/"},"key":"../x","size":-1}`,
		`{"source":{"uri":"s3://b/","identity":{"token":"t"}},"key":"k","size":1,"hash":"md5:00","range":true,"offset":5}`,
		`{"key":` + strings.Repeat("[", 1000),
		``, `null`, `[]`, `{"unknown":1}`,
	} {
		f.Add(seed)
	}
	a, opened := storelessAgent(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, nodewire.ShardPath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer token")
		w := httptest.NewRecorder()
		before := opened.Load()
		a.ServeHTTP(w, req)
		if (w.Code == http.StatusBadRequest || w.Code == http.StatusForbidden) && opened.Load() != before {
			t.Fatalf("a refused request (%d) opened a store: %q", w.Code, body)
		}
		if w.Code == http.StatusOK {
			t.Fatalf("served %d bytes with no store to fill from: %q", w.Body.Len(), body)
		}
		if w.Code < 400 {
			t.Fatalf("status %d", w.Code)
		}
	})
}

// FuzzAgentWarmRequest: whatever a pod names as its next shards, the agent
// answers with a status (never a panic), takes only a warm request it
// could serve as shard requests (202, each shard queued, present or
// dropped), and never opens a store for one it refuses. Its fills do not
// run here (no Serve): only what a request does at once is fuzzed.
func FuzzAgentWarmRequest(f *testing.F) {
	for _, seed := range []string{
		`{"source":{"uri":"s3://b/p/","endpoint":"minio:9000","credentials":{"AWS_ACCESS_KEY_ID":"YQ=="}},"shards":[{"key":"a.mds","size":10,"hash":"xxh64:00ff"},{"key":"b.mds","size":3,"version":"sha256:00"}]}`,
		`{"source":{"uri":"file:///etc/"},"shards":[{"key":"passwd","size":1,"hash":"sha256:00"}]}`,
		`{"source":{"uri":"s3://b/","credentials":{"k":""}},"shards":[]}`,
		`{"source":{"uri":"s3://b/","identity":{"token":"t"}},"shards":[{"key":"k","size":1,"hash":"md5:00","range":true,"offset":5}]}`,
		`{"shards":` + strings.Repeat("[", 1000),
		``, `null`, `[]`, `{"unknown":1}`,
	} {
		f.Add(seed)
	}
	a, opened := storelessAgent(f)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, nodewire.WarmPath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer token")
		w := httptest.NewRecorder()
		a.ServeHTTP(w, req)
		if opened.Load() != 0 {
			t.Fatalf("a warm request opened a store at once: %q", body)
		}
		switch w.Code {
		case http.StatusAccepted:
			var wr nodewire.WarmRequest
			var ans nodewire.WarmAnswer
			if json.NewDecoder(strings.NewReader(body)).Decode(&wr) != nil || wr.Check() != nil || json.Unmarshal(w.Body.Bytes(), &ans) != nil ||
				ans.Present+ans.Queued+ans.Dropped != len(wr.Shards) {
				t.Fatalf("took %q, answered %q", body, w.Body.String())
			}
		case http.StatusBadRequest, http.StatusForbidden:
		default:
			t.Fatalf("status %d for %q", w.Code, body)
		}
	})
}
