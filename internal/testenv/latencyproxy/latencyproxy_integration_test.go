//go:build integration

package latencyproxy

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/s3"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

// openThrough opens the project's own S3 store on bucket's web/ through p.
func openThrough(t *testing.T, p *Proxy, bucket string, retry store.Retry) store.Store {
	t.Helper()
	st, err := stores.Open(context.Background(), store.Source{
		URI: "s3://" + bucket + "/web/", Endpoint: p.URL(), Insecure: true, Region: minioServer.Region, Retry: retry,
		Credentials: map[string][]byte{s3.AccessKeyFile: []byte(minioServer.AccessKey), s3.SecretKeyFile: []byte(minioServer.SecretKey)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Through the proxy the S3 store lists, heads, reads a range and a whole
// object and writes: MinIO accepts every signature (the client signed the
// proxy's host, which reaches MinIO unchanged), and each call is counted
// as the request kind it is.
func TestIntegrationTheS3StoreWorksThroughTheProxyAndIsCounted(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	const delay = 20 * time.Millisecond
	p := Start(t, Options{Upstream: minioServer.Endpoint, Delay: delay, Jitter: 5 * time.Millisecond, Seed: 1})
	st := openThrough(t, p, bucket, store.Retry{})
	want := bytes.Repeat([]byte("0123456789"), 10_000)
	for _, tc := range []struct {
		name string
		op   func() error
		want Counts
	}{
		{"a put", func() error { return st.Put(ctx, "a/shard.bin", bytes.NewReader(want), int64(len(want))) }, Counts{Put: 1}},
		{"a second put", func() error { return st.Put(ctx, "b/shard.bin", bytes.NewReader(want[:10]), 10) }, Counts{Put: 1}},
		{"a listing", func() error {
			objs, err := st.List(ctx)
			if err == nil && len(objs) != 2 {
				t.Errorf("listed %v, want the 2 objects", objs)
			}
			return err
		}, Counts{List: 1}},
		{"a head", func() error {
			o, err := st.Stat(ctx, "a/shard.bin")
			if err == nil && o.Size != int64(len(want)) {
				t.Errorf("stat: size %d, want %d", o.Size, len(want))
			}
			return err
		}, Counts{Head: 1}},
		// A read is one round trip: no HEAD before the GET.
		{"a range", func() error { return readBack(ctx, t, st, 1234, 100, want[1234:1334]) }, Counts{GetRanged: 1}},
		{"a whole object", func() error { return readBack(ctx, t, st, 0, -1, want) }, Counts{Get: 1}},
	} {
		p.Reset()
		began := time.Now()
		if err := tc.op(); err != nil {
			t.Fatalf("%s through the proxy: %v", tc.name, err)
		}
		if took := time.Since(began); took < delay {
			t.Errorf("%s took %s, less than the proxy's delay %s", tc.name, took, delay)
		}
		got := p.Counts()
		got.BytesIn, got.BytesOut = 0, 0
		if got != tc.want {
			t.Errorf("%s: counts %s, want %s", tc.name, got, tc.want)
		}
	}
	// What went in reached MinIO as written.
	obj, err := minioServer.Client.StatObject(ctx, bucket, "web/a/shard.bin", minio.StatObjectOptions{})
	if err != nil || obj.Size != int64(len(want)) {
		t.Errorf("MinIO holds %d bytes, %v; want %d", obj.Size, err, len(want))
	}
}

// Over the rate limit with SlowDown, the store is answered 503 SlowDown as
// S3 answers it, retries, and gets through.
func TestIntegrationTheS3StoreRidesOutSlowDown(t *testing.T) {
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	if _, err := minioServer.Client.PutObject(ctx, bucket, "web/k", bytes.NewReader([]byte("v")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	p := Start(t, Options{Upstream: minioServer.Endpoint, Rate: 4, Burst: 1, Throttle: SlowDown})
	var retries atomic.Int64
	st := openThrough(t, p, bucket, store.Retry{BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, MaxElapsed: time.Minute,
		OnRetry: func(error, int, time.Duration) { retries.Add(1) }})
	for i := range 3 {
		if _, err := st.Stat(ctx, "k"); err != nil {
			t.Fatalf("stat %d: %v", i, err)
		}
	}
	c := p.Counts()
	if c.Throttled == 0 || c.Head != 3 {
		t.Errorf("counts %s: want some throttled and the 3 heads through", c)
	}
	t.Logf("3 heads at 4 a second: %s, %d retries by the store", c, retries.Load())
}

func readBack(ctx context.Context, t *testing.T, st store.Store, off, n int64, want []byte) error {
	t.Helper()
	body, err := st.Get(ctx, "a/shard.bin", off, n)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	got, err := io.ReadAll(body)
	if err == nil && !bytes.Equal(got, want) {
		t.Errorf("read %d bytes at %d, not the bytes written", len(got), off)
	}
	return err
}
