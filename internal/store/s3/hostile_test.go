package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
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

// A read is of the bytes asked for, or an error: an endpoint that ignores
// the range (a whole object where a range from byte 50 was asked) or
// answers another one is refused, never read as those bytes; an answer
// whose headers do not parse is refused once (not retried), without
// quoting them.
func TestAReadIsOfTheRangeAskedForOrAnError(t *testing.T) {
	object := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!@#$%^&*()")
	lastModified := time.Now().UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name     string
		off, n   int64
		answer   func(w http.ResponseWriter, r *http.Request)
		want     string // the bytes read; "" for an error
		wantErr  string
		attempts int32
	}{
		{"the range", 50, 10, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 50-59/%d", len(object)))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(object[50:60])
		}, string(object[50:60]), "", 1},
		{"the whole object from byte 0", 0, 10, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(object)
		}, string(object[:10]), "", 1},
		{"the whole object for a range", 50, 10, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(object)
		}, "", "with the whole object", 1},
		{"another range", 50, 10, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-9/%d", len(object)))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(object[:10])
		}, "", "with another range", 1},
		{"a longer range", 50, 10, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 50-69/%d", len(object)))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(object[50:70])
		}, "", "with another range", 1},
		{"headers that do not parse", 50, 10, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Last-Modified", "garbage "+secret)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 50-59/%d", len(object)))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(object[50:60])
		}, "", "is not one S3 gives", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var attempts atomic.Int32
			st := hostile(t, func(w http.ResponseWriter, r *http.Request) {
				attempts.Add(1)
				if w.Header().Get("Last-Modified") == "" {
					w.Header().Set("Last-Modified", lastModified)
				}
				tc.answer(w, r)
			}, store.Retry{MaxElapsed: time.Second, BaseDelay: time.Millisecond})
			body, err := st.Get(context.Background(), "obj", tc.off, tc.n)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(io.LimitReader(body, tc.n))
				_ = body.Close()
			}
			switch {
			case tc.wantErr == "" && (err != nil || string(got) != tc.want):
				t.Errorf("read %q, %v; want %q", got, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("read %q, %v; want an error saying %q", got, err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "hunter2"):
				t.Errorf("the error quotes the endpoint's header: %v", err)
			case attempts.Load() != tc.attempts:
				t.Errorf("%d requests, want %d", attempts.Load(), tc.attempts)
			}
		})
	}
}
