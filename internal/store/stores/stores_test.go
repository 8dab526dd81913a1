package stores

import (
	"context"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/local"
	"github.com/shardfeed/shardfeed/internal/store/storetest"
)

func TestFileStore(t *testing.T) {
	st, err := Open(context.Background(), store.Source{URI: "file://" + t.TempDir() + "/data/"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Conformance(t, local.Descriptor, st)
}

func TestOpenRejectsBadSources(t *testing.T) {
	tests := []struct {
		src  store.Source
		want string
	}{
		{store.Source{URI: "hdfs://bucket/x"}, `scheme "hdfs" is not supported: use abfss://, az://, file://, gs:// or s3://`},
		{store.Source{URI: "az://account/"}, "write az://<account>/<container>/<prefix>/"},
		{store.Source{URI: "gs:///x"}, "has no bucket: write gs://bucket/prefix/"},
		{store.Source{URI: "s3:///x"}, "has no bucket"},
		{store.Source{URI: "file://host/x"}, "names host"},
		{store.Source{URI: "s3://b/p", Endpoint: "http://minio:9000"}, "set insecure: true"},
		{store.Source{URI: "s3://b/p", Endpoint: "ftp://minio"}, "write host:port"},
		{store.Source{URI: "s3://b/p", Endpoint: "minio:9000", CredentialsDir: "/nonexistent"}, "the Secret needs the keys AWS_ACCESS_KEY_ID"},
	}
	for _, tt := range tests {
		t.Run(tt.src.URI+tt.src.Endpoint, func(t *testing.T) {
			_, err := Open(context.Background(), tt.src)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want %q", err, tt.want)
			}
		})
	}
}

// Every store's descriptor says what the reconciler, the webhook and the
// CLI look up: one descriptor per scheme, found by Lookup; an unknown
// scheme is refused everywhere, never taken for AWS.
func TestDescriptors(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range Descriptors {
		t.Run(d.Scheme, func(t *testing.T) {
			storetest.CheckDescriptor(t, d)
			if seen[d.Scheme] {
				t.Fatalf("scheme %s listed twice", d.Scheme)
			}
			seen[d.Scheme] = true
			got, _, err := Lookup(d.Scheme + "://a/b/")
			if err != nil || got.Scheme != d.Scheme {
				t.Fatalf("Lookup = %s, %v", got.Scheme, err)
			}
		})
	}
	for _, tt := range []struct{ uri, region, host, audience string }{
		{"s3://b/p/", "", "s3.amazonaws.com", "sts.amazonaws.com"},
		{"s3://b/p/", "eu-west-1", "s3.eu-west-1.amazonaws.com", "sts.amazonaws.com"},
		// The region selects the partition, and the host with it.
		{"s3://b/p/", "cn-north-1", "s3.cn-north-1.amazonaws.com.cn", "sts.amazonaws.com"},
		{"s3://b/p/", "us-gov-west-1", "s3.us-gov-west-1.amazonaws.com", "sts.amazonaws.com"},
		{"gs://b/p/", "", "storage.googleapis.com", ""},
		{"az://Acct/c/p/", "", "acct.blob.core.windows.net", "api://AzureADTokenExchange"},
		{"abfss://c@Acct.dfs.core.windows.net/p/", "", "acct.blob.core.windows.net", "api://AzureADTokenExchange"},
	} {
		if h, err := DefaultHost(tt.uri, tt.region); err != nil || h != tt.host {
			t.Errorf("DefaultHost(%s, %s) = %q, %v; want %q", tt.uri, tt.region, h, err, tt.host)
		}
		if a := DefaultAudience(tt.uri); a != tt.audience {
			t.Errorf("DefaultAudience(%s) = %q, want %q", tt.uri, a, tt.audience)
		}
	}
	for _, uri := range []string{"hdfs://nn/p/", "minio://b/p/", "file:///data/"} {
		if h, err := DefaultHost(uri, ""); err == nil {
			t.Errorf("DefaultHost(%s) = %q, want an error", uri, h)
		}
	}
	if h, err := DefaultHost("s3://b/p/", "moon-base-1x"); err == nil || !strings.Contains(err.Error(), "no AWS partition") {
		t.Errorf("a region of no partition reaches %q (%v), want it refused", h, err)
	}
	if _, _, err := Lookup("hdfs://nn/p/"); err == nil || !strings.Contains(err.Error(), `scheme "hdfs" is not supported: use s3://, gs://, az://, abfss://, file://`) {
		t.Errorf("Lookup of an unknown scheme: %v", err)
	}
	if _, ok := SecretKeysOf("file:///data/"); ok {
		t.Error("file:// takes a credentials Secret")
	}
}

func TestRoot(t *testing.T) {
	tests := []struct{ uri, want, wantErr string }{
		{"s3://wh/shardfeed/events/", "s3://wh/", ""},
		{"gs://wh", "gs://wh/", ""},
		{"az://acct/data/idx/", "az://acct/data/", ""},
		{"abfss://data@acct.dfs.core.windows.net/idx/", "abfss://data@acct.dfs.core.windows.net/", ""},
		{"file:///tmp/x/", "file:///", ""},
		{"az://acct", "", "names no account and container"},
		{"s3:///x/", "", "names no bucket"},
		{"hdfs://nn/x/", "", `scheme "hdfs" is not supported`},
		{"wh/x", "", `scheme "" is not supported`},
	}
	for _, tt := range tests {
		got, err := Root(tt.uri)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Root(%q) = %q, %v; want an error with %q", tt.uri, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Root(%q) = %q, %v; want %q", tt.uri, got, err, tt.want)
		}
	}
}

func TestSameStore(t *testing.T) {
	tests := []struct {
		a, b    string
		want    bool
		wantErr string
	}{
		{"s3://data/x/", "s3://other/idx/", true, ""},
		{"s3://data/x/", "gs://data/x/", false, ""},
		{"az://acct/c/x/", "az://acct/d/idx/", true, ""},
		{"az://acct/c/x/", "az://other/c/idx/", false, ""},
		{"abfss://c@acct.dfs.core.windows.net/x/", "abfss://d@acct.dfs.core.windows.net/idx/", true, ""},
		{"abfss://c@acct.dfs.core.windows.net/x/", "abfss://c@other.dfs.core.windows.net/x/", false, ""},
		{"s3://data/x/", "hdfs://nn/x/", false, `scheme "hdfs" is not supported`},
	}
	for _, tt := range tests {
		got, err := SameStore(tt.a, tt.b)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("SameStore(%q, %q) = %v, %v; want an error with %q", tt.a, tt.b, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SameStore(%q, %q) = %v, %v; want %v", tt.a, tt.b, got, err, tt.want)
		}
	}
}
