package stores

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/s3"
)

// hostileSources are the sources a dataset author can point at an endpoint
// they run, one per SDK and token exchange: the store's own requests, and
// AWS STS (an S3-compatible endpoint serves it).
func hostileSources(endpoint string) map[string]store.Source {
	noRetry := store.Retry{MaxElapsed: time.Millisecond, BaseDelay: time.Millisecond, RequestTimeout: 20 * time.Second}
	return map[string]store.Source{
		"s3": {URI: "s3://data/web/", Endpoint: endpoint, Insecure: true, Region: "us-east-1", Retry: noRetry,
			Credentials: map[string][]byte{s3.AccessKeyFile: []byte("key"), s3.SecretKeyFile: []byte("secret")}},
		"gs": {URI: "gs://data/web/", Endpoint: endpoint, Insecure: true, Retry: noRetry},
		// A made-up key of the author's own Secret is enough.
		"az": {URI: "az://acct/data/web/", Endpoint: endpoint, Insecure: true, Retry: noRetry,
			Credentials: map[string][]byte{azure.KeyFile: []byte(base64.StdEncoding.EncodeToString([]byte("not-a-key")))}},
		"sts": {URI: "s3://data/web/", Endpoint: endpoint, Insecure: true, Region: "us-east-1", Retry: noRetry,
			Identity: &store.Identity{RoleARN: "arn:aws:iam::123456789012:role/r",
				Token: func(context.Context) (string, error) { return "header.payload.signature", nil }}},
	}
}

// heapPeak samples the heap every millisecond until stop is called, and
// returns the highest figure above the heap at the start.
func heapPeak() (stop func() uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	start := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > start && v-start > peak.Load() {
				peak.Store(v - start)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

// endless writes up to 1 GiB of filler, the way an author's endpoint
// would fill an error or a listing.
func endless(w http.ResponseWriter, r *http.Request, sent *atomic.Int64) {
	chunk := []byte(strings.Repeat("<Error><Code>x</Code><Message>hunter2</Message></Error>", 1000))
	for r.Context().Err() == nil && sent.Load() < 1<<30 {
		n, err := w.Write(chunk)
		sent.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// TestHostileBodiesStayBounded: an endpoint of the author's that answers
// every request (the stores' and the STS exchange's) with a body of up to
// 1 GiB, as an error or as a 200 that is not an object, costs a few MiB
// of heap, and the error says what happened without the body.
func TestHostileBodiesStayBounded(t *testing.T) {
	for _, answer := range []struct {
		name   string
		status int
		length bool // says its length up front
	}{
		{"error with a length", 500, true},
		{"error without a length", 400, false},
		{"a 200 that is not an object", 200, false},
	} {
		for _, name := range []string{"s3", "gs", "az", "sts"} {
			t.Run(answer.name+"/"+name, func(t *testing.T) {
				var sent atomic.Int64
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/xml")
					if answer.length {
						w.Header().Set("Content-Length", strconv.Itoa(1<<30))
					}
					w.WriteHeader(answer.status)
					if r.Method != http.MethodHead {
						endless(w, r, &sent)
					}
				}))
				defer srv.Close()
				ctx := context.Background()
				st, err := Open(ctx, hostileSources(srv.URL)[name])
				if err != nil {
					t.Fatal(err)
				}
				stop := heapPeak()
				errs := map[string]error{}
				_, errs["list"] = st.List(ctx)
				_, errs["stat"] = st.Stat(ctx, "index.json")
				_, _, errs["index"] = index.ReadStoreIndex(ctx, st, 1<<20)
				peak := stop()
				t.Logf("heap peak +%d KiB, the server sent %d MiB", peak>>10, sent.Load()>>20)
				if peak > 48<<20 {
					t.Errorf("the heap grew by %d MiB under a hostile endpoint (bound: 48 MiB)", peak>>20)
				}
				for op, err := range errs {
					// A 200 is a fine answer to a HEAD, and some SDKs read a
					// listing that is no listing as an empty one; the index
					// is never one.
					if err == nil && (answer.status >= 300 || op == "index") {
						t.Errorf("%s: no error from a hostile answer", op)
					}
					if err == nil {
						continue
					}
					if strings.Contains(err.Error(), "hunter2") {
						t.Errorf("%s: the error carries the body: %.300s", op, err)
					}
				}
				if sent.Load() >= 1<<30 {
					t.Errorf("the server sent its whole GiB: nothing stopped reading")
				}
			})
		}
	}
}

// TestRedirectsNeverLeaveTheEndpoint: an endpoint that redirects every
// request to another host gets an error, and the other host never sees a
// request (nor the SharedKey signature, the SAS token or a bearer token
// the request carried).
func TestRedirectsNeverLeaveTheEndpoint(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	sas := map[string][]byte{azure.SASFile: []byte("sv=2024&sig=hunter2")}
	sources := hostileSources(srv.URL)
	azSAS := sources["az"]
	azSAS.Credentials = sas
	sources["az (SAS)"] = azSAS
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := Open(ctx, src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.List(ctx)
			if err == nil {
				t.Error("list: no error from a redirect to another host")
			}
			_, _, err = index.ReadStoreIndex(ctx, st, 1<<20)
			if err == nil {
				t.Error("index: no error from a redirect to another host")
			}
		})
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// TestTheExchangeReachesOnlyAllowedHosts: a policy that does not list the
// STS host refuses the exchange before any token is sent.
func TestTheExchangeReachesOnlyAllowedHosts(t *testing.T) {
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached.Add(1) }))
	defer srv.Close()
	src := hostileSources(srv.URL)["sts"]
	src.Endpoints = Policy([]string{"minio.storage:9000"}, true)
	_, err := Open(context.Background(), src)
	var refused *store.HostError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "loopback address") {
		t.Fatalf("Open = %v, want the host refused", err)
	}
	if reached.Load() != 0 {
		t.Fatalf("the STS host got %d requests", reached.Load())
	}
}

// The second red-team round: an S3-compatible endpoint serves STS for its
// own store, and only a host the platform lists by name may receive a lent
// ServiceAccount's AWS token; with "*" the author's host hears nothing
// (the token works at AWS STS wherever it was sent first).
func TestAWebIdentitysTokenGoesOnlyToAListedOrAWSTokenService(t *testing.T) {
	var heard atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { heard.Add(1) }))
	defer srv.Close()
	src := hostileSources(srv.URL)["sts"]
	src.Endpoints = Policy([]string{"*"}, true)
	src.Endpoint = strings.Replace(srv.URL, "127.0.0.1", "sts.attacker.example", 1)
	_, err := Open(context.Background(), src)
	var refused *store.HostError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "a token exchange goes only to a cloud's token service") {
		t.Fatalf("Open = %v, want the token exchange refused", err)
	}
	if heard.Load() != 0 {
		t.Fatalf("the author's host heard %d requests", heard.Load())
	}
}

// With an endpoint and no Secret or workload identity, an Azure store reads
// anonymously: the platform's own identity's token (the manager's, in an
// ambient namespace) never goes to an endpoint the author names.
func TestAnAzureEndpointNeverGetsThePlatformsIdentity(t *testing.T) {
	auth := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	t.Setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000000")
	st, err := Open(context.Background(), store.Source{URI: "az://acct/c/web/", Endpoint: srv.URL, Insecure: true,
		Retry: store.Retry{MaxElapsed: time.Millisecond, RequestTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(context.Background(), "index.json"); err == nil {
		t.Fatal("a missing blob was found")
	}
	select {
	case a := <-auth:
		if a != "" {
			t.Fatalf("the endpoint got Authorization %q", a)
		}
	default:
		t.Fatal("the endpoint heard no request")
	}
}
