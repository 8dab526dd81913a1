package s3

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/store"
)

// hostile opens the store of s3://data/web/ at an endpoint that answers
// every request with handler: the dataset author picks endpoints.
func hostile(t *testing.T, handler http.HandlerFunc, retry store.Retry) store.Store {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	src := store.Source{URI: "s3://data/web/", Endpoint: srv.URL, Insecure: true, Region: "us-east-1", Retry: retry,
		Credentials: map[string][]byte{AccessKeyFile: []byte("key"), SecretKeyFile: []byte("secret")}}
	u, _ := url.Parse(src.URI)
	st, err := Open(context.Background(), src, u)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const secret = "db_password=hunter2"

func TestErrorsCarryTheStatusAndCodeNeverTheBody(t *testing.T) {
	xmlError := func(code string) string {
		return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>internal-admin: ` + secret +
			`</Message><Key>web/index.json</Key><RequestId>` + secret + `</RequestId></Error>`
	}
	tests := []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"plain text 400", 400, "internal-admin: " + secret, []string{"HTTP 400"}},
		{"plain text 500", 500, "internal-admin: " + secret, []string{"HTTP 500"}},
		{"S3 XML with a known code", 400, xmlError("InvalidRequest"), []string{"HTTP 400 InvalidRequest"}},
		{"S3 XML 500", 500, xmlError("InternalError"), []string{"HTTP 500"}},
		{"S3 XML 403", 403, xmlError("AccessDenied"), []string{"HTTP 403 AccessDenied", "check the stream's credentials"}},
		{"a code that is the endpoint's text", 400, xmlError(secret), []string{"HTTP 400"}},
		{"a code that is a secret word", 400, xmlError("hunter2"), []string{"HTTP 400"}},
		{"HTML", 502, "<html><body>" + secret + "</body></html>", []string{"HTTP 502"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := hostile(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}, store.Retry{MaxElapsed: time.Millisecond, BaseDelay: time.Millisecond})
			ctx := context.Background()
			errs := map[string]error{}
			_, errs["index"] = index.ReadStore(ctx, st)
			_, errs["get"] = st.Get(ctx, "index.json", 0, 10)
			_, errs["stat"] = st.Stat(ctx, "index.json")
			_, errs["list"] = st.List(ctx)
			for op, err := range errs {
				if err == nil {
					t.Fatalf("%s: no error from a %d answer", op, tt.status)
				}
				if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "internal-admin") {
					t.Errorf("%s: the error carries the response body: %v", op, err)
				}
			}
			// A HEAD has no body: the code shows on a listing and a GET.
			for _, op := range []string{"list", "get"} {
				for _, w := range tt.want {
					if !strings.Contains(errs[op].Error(), w) {
						t.Errorf("%s: %v does not say %q", op, errs[op], w)
					}
				}
			}
		})
	}
}

func TestIndexReadsStopAtTheCapOfAnEndlessBody(t *testing.T) {
	var sent atomic.Int64
	st := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1099511627776") // 1 TiB, it says
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		if r.Method == http.MethodHead {
			return
		}
		chunk := []byte(`{"name":"s","samples":1,"bytes":1,"hash":"xxh64:00"},`)
		_, _ = w.Write([]byte(`{"shards":[`))
		for r.Context().Err() == nil && sent.Load() < 1<<30 { // endless, up to 1 GiB
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}, store.Retry{})
	_, _, err := index.ReadStoreIndex(context.Background(), st, 1<<20)
	var tooLarge *indexfile.TooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != 1<<20 {
		t.Fatalf("got %v, want the cap's error", err)
	}
	for _, w := range []string{"s3://data/web/_shardfeed/index.json", "cap of 1048576 bytes (1 MiB)", "--max-index-bytes"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v does not say %q", err, w)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := sent.Load(); n > 8<<20 {
		t.Errorf("the server sent %d bytes before the reader stopped at a 1 MiB cap", n)
	}
}

func TestATarpitEndsAtThePerRequestTimeout(t *testing.T) {
	st := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		if r.Method == http.MethodHead {
			return
		}
		w.WriteHeader(200)
		for r.Context().Err() == nil { // 1 byte per second
			if _, err := w.Write([]byte("{")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(time.Second)
		}
	}, store.Retry{RequestTimeout: 2 * time.Second, MaxElapsed: 2 * time.Second, BaseDelay: time.Millisecond})
	start := time.Now()
	_, err := index.ReadStore(context.Background(), st)
	if err == nil || !strings.Contains(err.Error(), "no complete answer within 2s (the per-request timeout)") {
		t.Fatalf("got %v, want the per-request timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("a 2 s per-request timeout took %s", d)
	}
}
