//go:build integration

package testenv

import (
	"bytes"
	"context"
	"io"
	"log"
	"os"
	"testing"

	"github.com/minio/minio-go/v7"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	apiServer *APIServer
	store     *MinIO
)

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	if store, err = StartMinIO(context.Background()); err != nil {
		_ = apiServer.Stop()
		log.Fatal(err)
	}
	code := m.Run()
	if err := store.Stop(); err != nil {
		log.Print(err)
	}
	if err := apiServer.Stop(); err != nil {
		log.Print(err)
	}
	os.Exit(code)
}

func TestIntegrationAPIServerStoresAndReturnsConfigMap(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-plan", Namespace: ns},
		Data:       map[string]string{"fingerprint": "abc", "numSplits": "8"},
	}
	if err := apiServer.Client.Create(ctx, want); err != nil {
		t.Fatalf("creating ConfigMap: %v", err)
	}
	var got corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		t.Fatalf("reading ConfigMap back: %v", err)
	}
	if got.UID == "" || got.ResourceVersion == "" {
		t.Errorf("ConfigMap read back without uid or resourceVersion: %+v", got.ObjectMeta)
	}
	if got.Data["fingerprint"] != "abc" || got.Data["numSplits"] != "8" {
		t.Errorf("data = %v, want %v", got.Data, want.Data)
	}
	// A second create of the same name must conflict: the server is real.
	again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-plan", Namespace: ns}}
	if err := apiServer.Client.Create(ctx, again); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second create: error = %v, want AlreadyExists", err)
	}
}

func TestIntegrationMinIOStoresAndReturnsObject(t *testing.T) {
	ctx := context.Background()
	bucket := store.Bucket(t)
	payload := bytes.Repeat([]byte("shard-bytes "), 100_000) // 1.2 MB: more than one read buffer
	if _, err := store.Client.PutObject(ctx, bucket, "stream/shard.00000.mds", bytes.NewReader(payload),
		int64(len(payload)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	obj, err := store.Client.GetObject(ctx, bucket, "stream/shard.00000.mds", minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	defer func() { _ = obj.Close() }()
	got, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("reading object: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("read %d bytes back, want the %d bytes written", len(got), len(payload))
	}
	// A byte range, as the Parquet reader will fetch one row group.
	var opts minio.GetObjectOptions
	if err := opts.SetRange(12, 23); err != nil {
		t.Fatal(err)
	}
	part, err := store.Client.GetObject(ctx, bucket, "stream/shard.00000.mds", opts)
	if err != nil {
		t.Fatalf("ranged get: %v", err)
	}
	defer func() { _ = part.Close() }()
	if b, err := io.ReadAll(part); err != nil || string(b) != "shard-bytes " {
		t.Errorf("ranged get = %q, %v; want %q", b, err, "shard-bytes ")
	}
}

func TestIntegrationBucketsAreFreshPerTest(t *testing.T) {
	ctx := context.Background()
	a, b := store.Bucket(t), store.Bucket(t)
	if a == b {
		t.Fatalf("two buckets with the same name %q", a)
	}
	for obj := range store.Client.ListObjects(ctx, a, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("new bucket %s holds %q", a, obj.Key)
	}
}
