package stores

import (
	"context"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/storetest"
)

func TestFileStore(t *testing.T) {
	st, err := Open(context.Background(), store.Source{URI: "file://" + t.TempDir() + "/data/"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Conformance(t, st)
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
