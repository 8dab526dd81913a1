//go:build integration

package formats_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/minio/minio-go/v7"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	fmtpkg "github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// An object-store prefix that changed since it was indexed is said as a
// folder's is: an object added, and one rewritten to the very same size
// (which only its ETag tells).
func TestIntegrationAChangedPrefixIsSaid(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	put := func(key, body string) {
		t.Helper()
		if _, err := minioServer.Client.PutObject(ctx, bucket, "s/"+key, bytes.NewReader([]byte(body)), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("a.jsonl", "{\"id\": 1}\n{\"id\": 2}\n")
	put("b.jsonl", "{\"id\": 3}\n")
	st, err := stores.Open(ctx, store.Source{URI: "s3://" + bucket + "/s/", Endpoint: "http://" + minioServer.Endpoint, Insecure: true,
		CredentialsDir: minioServer.CredentialsDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := formats.Default()
	f, err := reg.Index(ctx, st, datav1alpha1.FormatJSONL, fmtpkg.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Write(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	changes := func() string {
		t.Helper()
		l, err := index.ReadStoreLayout(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		c, err := reg.Changes(ctx, st, l.File, fmtpkg.TableOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.String()
	}
	if got := changes(); got != "" {
		t.Fatalf("as indexed: %q", got)
	}
	put("b.jsonl", "{\"id\": 4}\n")
	if got := changes(); got != "objects rewritten in place (the same names and sizes, another ETag or modification time)" {
		t.Fatalf("rewritten: %q", got)
	}
	put("c.jsonl", "{\"id\": 5}\n")
	if got := changes(); got != "1 object added (c.jsonl)" {
		t.Fatalf("grown: %q", got)
	}
}
