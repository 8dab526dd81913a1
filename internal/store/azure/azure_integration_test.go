//go:build integration

package azure_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/storetest"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var server *testenv.Azurite

func TestMain(m *testing.M) {
	var err error
	if server, err = testenv.StartAzurite(context.Background()); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = server.Stop()
	os.Exit(code)
}

func open(t *testing.T, uri string, src store.Source) (store.Store, error) {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	src.URI = uri
	return azure.Open(context.Background(), src, u)
}

func sharedKey() map[string][]byte {
	return map[string][]byte{azure.KeyFile: []byte(testenv.AzuriteKey)}
}

// TestIntegrationConformance: the store passes every store's test against
// Azurite, with each kind of credential.
func TestIntegrationConformance(t *testing.T) {
	keyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(keyDir, azure.KeyFile), []byte(testenv.AzuriteKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	connection := "DefaultEndpointsProtocol=http;AccountName=" + testenv.AzuriteAccount + ";AccountKey=" + testenv.AzuriteKey +
		";BlobEndpoint=" + server.URL + "/" + testenv.AzuriteAccount + ";"
	for _, tc := range []struct {
		name, prefix string
		src          store.Source
	}{
		{"shared key from a Secret", "", store.Source{Credentials: sharedKey()}},
		{"shared key from a directory, with a prefix", "data/web/", store.Source{CredentialsDir: keyDir}},
		{"connection string", "p/", store.Source{Credentials: map[string][]byte{azure.ConnectionStringFile: []byte(connection)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Endpoint, tc.src.Insecure = server.URL, true
			st, err := open(t, "az://"+testenv.AzuriteAccount+"/"+server.Container(t)+"/"+tc.prefix, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			storetest.Conformance(t, azure.Descriptor, st)
		})
	}
	// The abfss:// form users paste names the same blobs.
	c := server.Container(t)
	st, err := open(t, "abfss://"+c+"@"+testenv.AzuriteAccount+".dfs.core.windows.net/x/", store.Source{Endpoint: server.URL, Insecure: true, Credentials: sharedKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "a", strings.NewReader("abc"), 3); err != nil {
		t.Fatal(err)
	}
	az, _ := open(t, "az://"+testenv.AzuriteAccount+"/"+c+"/x/", store.Source{Endpoint: server.URL, Insecure: true, Credentials: sharedKey()})
	if o, err := az.Stat(context.Background(), "a"); err != nil || o.Size != 3 {
		t.Errorf("the blob written through abfss:// read through az://: %+v, %v", o, err)
	}
}

// TestIntegrationRefusals: what a stream's author gets wrong is refused
// naming the fix.
func TestIntegrationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, uri string
		src       store.Source
		says      string
	}{
		{"no container", "az://acct/", store.Source{}, "write az://<account>/<container>/<prefix>/"},
		{"abfss without a container", "abfss://acct.dfs.core.windows.net/x/", store.Source{}, "write abfss://<container>@<account>.dfs.core.windows.net/<prefix>/"},
		{"plain HTTP not allowed", "az://acct/c/", store.Source{Endpoint: server.URL, Credentials: sharedKey()}, "plain HTTP: set insecure: true"},
		{"not an endpoint", "az://acct/c/", store.Source{Endpoint: "http://azurite:10000/devstoreaccount1", Insecure: true}, "with no path"},
		{"a Secret without a key", "az://acct/c/", store.Source{Credentials: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("x")}},
			"the Secret needs one of the keys AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN or AZURE_STORAGE_CONNECTION_STRING"},
		{"a key that is not base64", "az://acct/c/", store.Source{Credentials: map[string][]byte{azure.KeyFile: []byte("not base64!")}},
			"AZURE_STORAGE_KEY is not a storage account key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := open(t, tc.uri, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
	// A wrong key: 403, naming the fix, not retried.
	st, err := open(t, "az://"+testenv.AzuriteAccount+"/"+server.Container(t)+"/", store.Source{Endpoint: server.URL, Insecure: true,
		Credentials: map[string][]byte{azure.KeyFile: []byte("d3Jvbmcga2V5")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.List(context.Background()); err == nil || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "check the stream's credentials") {
		t.Errorf("a wrong key: %v", err)
	}
}

// TestIntegrationNoResponseBodyInErrors: what an endpoint answers in its
// error bodies (which azcore.ResponseError keeps) never reaches an error's
// text; the status and a known code do, and a 5xx is retried.
func TestIntegrationNoResponseBodyInErrors(t *testing.T) {
	const secret = "internal-admin db_password=hunter2"
	var calls int
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		status, code := http.StatusForbidden, "AuthorizationFailure"
		if strings.Contains(r.URL.RawQuery, "prefix=flaky") {
			status, code = http.StatusServiceUnavailable, "Made-up code: "+secret
		}
		w.Header().Set("x-ms-error-code", code)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`<?xml version="1.0"?><Error><Code>` + code + `</Code><Message>` + secret + `</Message></Error>`))
	}))
	t.Cleanup(hostile.Close)
	for _, tc := range []struct {
		prefix, says string
		retried      bool
	}{
		{"denied/", "HTTP 403 AuthorizationFailure (check the stream's credentials", false},
		{"flaky/", "HTTP 503", true},
	} {
		calls = 0
		st, err := open(t, "az://acct/c/"+tc.prefix, store.Source{Endpoint: hostile.URL, Insecure: true, Credentials: sharedKey(),
			Retry: store.Retry{BaseDelay: 1, MaxDelay: 1, MaxElapsed: 50_000_000}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.List(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "Made-up") {
			t.Errorf("%s: %v, want %q and nothing of the body", tc.prefix, err, tc.says)
		}
		var se *store.StatusError
		if tc.retried != (calls > 1) || (tc.retried && (!errors.As(err, &se) || se.Status != 503 || se.Code != "")) {
			t.Errorf("%s: %d calls, error %v: want retried=%v with status 503 and no code", tc.prefix, calls, err, tc.retried)
		}
	}
}
