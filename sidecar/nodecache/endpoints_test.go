package nodecache

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/s3"
	"github.com/shardfeed/shardfeed/sidecar/nodecache/nodewire"
)

// The third security review's finding 2 on the node agent: a connection
// string's BlobEndpoint took the agent to a host on no list (a listener
// standing in for the node's metadata service answered
// /latest/meta-data/iam/security-credentials/node-role, and the agent
// returned the body to the pod), and with "*" the agent reached the
// metadata service written as [::ffff:169.254.169.254], by name, and at
// AWS's IPv6 address. Each is refused now, and the listener hears nothing.
func TestTheAgentReachesNoMetadataServiceAndNoUnlistedEndpoint(t *testing.T) {
	var heard atomic.Int64
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		heard.Add(1)
		_, _ = io.WriteString(w, `{"AccessKeyId":"ASIA-NODE-ROLE","SecretAccessKey":"node-secret"}`)
	}))
	defer metadata.Close()
	port := metadata.URL[strings.LastIndex(metadata.URL, ":")+1:]
	sum, _ := checksum.Of("xxh64", []byte("x"))
	keys := map[string][]byte{s3.AccessKeyFile: []byte("k"), s3.SecretKeyFile: []byte("s")}
	tests := []struct {
		name   string
		listed []string
		clouds bool
		src    nodewire.Source
		says   string
	}{
		{"a connection string's BlobEndpoint on no list", nil, true,
			nodewire.Source{URI: "az://acct/latest/", Insecure: true, Credentials: map[string][]byte{azure.ConnectionStringFile: []byte("BlobEndpoint=" + metadata.URL + "/;SharedAccessSignature=sv=2022-11-02&sig=x")}},
			"the blob endpoint of AZURE_STORAGE_CONNECTION_STRING"},
		{"a connection string's endpoint of another account", nil, true,
			nodewire.Source{URI: "az://acct/latest/", Credentials: map[string][]byte{azure.ConnectionStringFile: []byte("DefaultEndpointsProtocol=https;AccountName=other;AccountKey=a2V5")}},
			`names the account "other"`},
		{"* and the metadata address, IPv4-mapped", []string{"*"}, false, nodewire.Source{URI: "s3://b/", Endpoint: "[::ffff:169.254.169.254]", Insecure: true, Credentials: keys}, "link-local or metadata address"},
		{"* and the metadata service by name", []string{"*"}, false, nodewire.Source{URI: "s3://b/", Endpoint: "metadata.google.internal", Insecure: true, Credentials: keys}, "metadata service"},
		{"* and AWS's IPv6 metadata address", []string{"*"}, false, nodewire.Source{URI: "s3://b/", Endpoint: "[fd00:ec2::254]", Insecure: true, Credentials: keys}, "link-local or metadata address"},
		{"* and a name on loopback", []string{"*"}, false, nodewire.Source{URI: "s3://data/", Endpoint: "localhost:" + port, Insecure: true, Credentials: keys}, "a loopback address"},
		{"an S3 website under the clouds' domain", nil, true, nodewire.Source{URI: "s3://b/", Endpoint: "https://latest.s3-website-us-east-1.amazonaws.com", Credentials: keys}, "is not one the platform team allows"},
		{"an Azure SAS token to an API Gateway", nil, true,
			nodewire.Source{URI: "az://acct/c/", Endpoint: "https://abc123defg.execute-api.us-east-1.amazonaws.com", Credentials: map[string][]byte{azure.SASFile: []byte("sv=2022&sig=x")}},
			"is not one the platform team allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			heard.Store(0)
			a, err := NewAgent(Options{Dir: t.TempDir(), Auth: anyPod{}, Node: "n", AllowedEndpoints: tt.listed, AllowCloudEndpoints: tt.clouds,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(nodewire.Request{Source: tt.src, Part: nodewire.Part{Key: "meta-data/iam/security-credentials/node-role", Size: 1, Hash: sum.String()}})
			r := httptest.NewRequest(http.MethodPost, nodewire.ShardPath, strings.NewReader(string(body)))
			r.Header.Set("Authorization", "Bearer token")
			w := httptest.NewRecorder()
			a.ServeHTTP(w, r)
			if w.Code == http.StatusOK || !strings.Contains(w.Body.String(), tt.says) {
				t.Fatalf("HTTP %d %q, want a refusal saying %q", w.Code, w.Body.String(), tt.says)
			}
			if strings.Contains(w.Body.String(), "node-secret") || heard.Load() != 0 {
				t.Fatalf("the listener standing in for the metadata service heard %d requests (answer %q)", heard.Load(), w.Body.String())
			}
		})
	}
}
