//go:build integration

package gcs_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/gcs"
	"github.com/shardfeed/shardfeed/internal/store/storetest"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var server *testenv.FakeGCS

func TestMain(m *testing.M) {
	var err error
	if server, err = testenv.StartFakeGCS(context.Background()); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = server.Stop()
	os.Exit(code)
}

func open(t *testing.T, uri string, src store.Source) store.Store {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	src.URI = uri
	st, err := gcs.Open(context.Background(), src, u)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestIntegrationConformance: the store passes every store's test against
// a real server of the GCS protocol.
func TestIntegrationConformance(t *testing.T) {
	for _, prefix := range []string{"", "data/web/"} {
		t.Run("prefix "+prefix, func(t *testing.T) {
			st := open(t, "gs://"+server.Bucket(t)+"/"+prefix, store.Source{Endpoint: server.URL, Insecure: true})
			storetest.Conformance(t, gcs.Descriptor, st)
		})
	}
}

// TestIntegrationRefusals: what a stream's author gets wrong is refused
// naming the fix.
func TestIntegrationRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		uri  string
		src  store.Source
		says string
	}{
		{"no bucket", "gs:///x/", store.Source{}, "has no bucket: write gs://bucket/prefix/"},
		{"plain HTTP not allowed", "gs://b/", store.Source{Endpoint: server.URL}, "plain HTTP: set insecure: true"},
		{"not an endpoint", "gs://b/", store.Source{Endpoint: "http://fake-gcs:4443/storage/v1"}, "with no path"},
		{"a key that is not a service account's", "gs://b/", store.Source{Credentials: map[string][]byte{gcs.KeyFile: []byte(`{"type": "authorized_user"}`)}},
			`is not a service account's JSON key`},
		{"a key that posts elsewhere", "gs://b/", store.Source{Credentials: map[string][]byte{gcs.KeyFile: []byte(`{"type": "service_account", "token_uri": "http://169.254.169.254/x"}`)}},
			"names a token_uri that is not Google's"},
		{"a Secret without the key", "gs://b/", store.Source{Endpoint: server.URL, Insecure: true, Credentials: map[string][]byte{"key.json": []byte("{}")}},
			"the Secret needs the key service-account.json"},
		{"a directory without the key", "gs://b/", store.Source{Endpoint: server.URL, Insecure: true, CredentialsDir: t.TempDir()},
			"the Secret needs the key service-account.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse(tc.uri)
			tc.src.URI = tc.uri
			_, err := gcs.Open(ctx, tc.src, u)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
	st := open(t, "gs://no-such-bucket-here/x/", store.Source{Endpoint: server.URL, Insecure: true, Retry: store.Retry{MaxElapsed: 1}})
	if _, err := st.List(ctx); err == nil || !strings.Contains(err.Error(), "gs://no-such-bucket-here/x/") {
		t.Errorf("listing a missing bucket: %v", err)
	}
}

// TestIntegrationNoResponseBodyInErrors: an endpoint's error bodies (which
// the SDK keeps in googleapi.Error) never reach an error's text; the
// status and a known reason do, and a 5xx is retried.
func TestIntegrationNoResponseBodyInErrors(t *testing.T) {
	const secret = "internal-admin db_password=hunter2"
	var calls int
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		status, reason := http.StatusForbidden, "forbidden"
		if strings.Contains(r.URL.RawQuery, "prefix=flaky") {
			status, reason = http.StatusServiceUnavailable, "made-up reason: "+secret
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error": {"code": ` + strconv.Itoa(status) + `, "message": "` + secret + `", "errors": [{"reason": "` + reason + `", "message": "` + secret + `"}]}}`))
	}))
	t.Cleanup(hostile.Close)
	for _, tc := range []struct {
		prefix, says string
		retried      bool
	}{
		{"denied/", "HTTP 403 forbidden (check the stream's credentials", false},
		{"flaky/", "HTTP 503", true},
	} {
		calls = 0
		st := open(t, "gs://b/"+tc.prefix, store.Source{Endpoint: hostile.URL, Insecure: true, Retry: store.Retry{BaseDelay: 1, MaxDelay: 1, MaxElapsed: 50_000_000}})
		_, err := st.List(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "made-up") {
			t.Errorf("%s: %v, want %q and nothing of the body", tc.prefix, err, tc.says)
		}
		var se *store.StatusError
		if tc.retried != (calls > 1) || (tc.retried && (!errors.As(err, &se) || se.Status != 503 || se.Code != "")) {
			t.Errorf("%s: %d calls, error %#v: want retried=%v with status 503 and no code", tc.prefix, calls, err, tc.retried)
		}
	}
}

// TestIntegrationServiceAccountKeyFromADirectory: a mounted Secret's key
// file is read (a malformed key is refused by the SDK, naming it).
func TestIntegrationServiceAccountKeyFromADirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, gcs.KeyFile), []byte(`{"type": "service_account"`), 0o600); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("gs://b/")
	_, err := gcs.Open(context.Background(), store.Source{URI: "gs://b/", CredentialsDir: dir}, u)
	if err == nil {
		t.Fatal("a truncated service-account key was accepted")
	}
}
