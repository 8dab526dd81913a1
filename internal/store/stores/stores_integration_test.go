//go:build integration

package stores

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/s3"
	"github.com/shardfeed/shardfeed/internal/store/storetest"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) {
	cleanup, err := trustCloudNames() // before any TLS: the system roots are read once
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.RunWithMinIO(m, &minioServer)
	cleanup()
	os.Exit(code)
}

// credentialsDir writes a Secret's files, as the webhook mounts them.
func credentialsDir(t *testing.T, key, secret string) string {
	dir := t.TempDir()
	for name, v := range map[string]string{s3.AccessKeyFile: key, s3.SecretKeyFile: secret + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func s3Source(t *testing.T, bucket, prefix string) store.Source {
	return store.Source{
		URI:            "s3://" + bucket + "/" + prefix,
		Endpoint:       "http://" + minioServer.Endpoint,
		Insecure:       true,
		CredentialsDir: credentialsDir(t, minioServer.AccessKey, minioServer.SecretKey),
		Retry:          store.Retry{MaxElapsed: 20 * time.Second},
	}
}

func TestIntegrationS3Store(t *testing.T) {
	bucket := minioServer.Bucket(t)
	st, err := Open(context.Background(), s3Source(t, bucket, "datasets/web/"))
	if err != nil {
		t.Fatal(err)
	}
	if st.URI() != "s3://"+bucket+"/datasets/web/" {
		t.Errorf("URI = %s", st.URI())
	}
	storetest.Conformance(t, s3.Descriptor, st)
}

func TestIntegrationS3StoreDefaultChainFromEnvironment(t *testing.T) {
	bucket := minioServer.Bucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", minioServer.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", minioServer.SecretKey)
	src := s3Source(t, bucket, "")
	src.CredentialsDir = ""
	st, err := Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(context.Background(), "a", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("Put with environment credentials: %v", err)
	}
}

func TestIntegrationS3ErrorsNameBucketKeyAndStatus(t *testing.T) {
	bucket := minioServer.Bucket(t)
	ctx := context.Background()
	tests := []struct {
		name string
		src  store.Source
		want []string
	}{
		{"wrong credentials", func() store.Source {
			s := s3Source(t, bucket, "p/")
			s.CredentialsDir = credentialsDir(t, minioServer.AccessKey, "wrong-secret")
			return s
		}(), []string{"s3://" + bucket + "/p/shard.mds", "HTTP 403", "check the stream's credentials"}},
		{"missing bucket", s3Source(t, "no-such-bucket-here", "p/"), []string{"s3://no-such-bucket-here/p/shard.mds", "HTTP 404 NoSuchBucket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Open(ctx, tt.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Stat(ctx, "shard.mds")
			if err == nil {
				t.Fatal("Stat succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if errors.Is(err, store.ErrNotFound) {
				t.Errorf("error %q is store.ErrNotFound: a missing bucket or bad credentials are not a missing object", err)
			}
		})
	}
}

func TestIntegrationS3RetriesWhileTheStoreIsDown(t *testing.T) {
	bucket := minioServer.Bucket(t)
	ctx := context.Background()
	st, err := Open(ctx, s3Source(t, bucket, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, "k", strings.NewReader("value"), 5); err != nil {
		t.Fatal(err)
	}
	minioServer.Kill()
	restarted := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		restarted <- minioServer.Restart(ctx)
	}()
	start := time.Now()
	o, err := st.Stat(ctx, "k")
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restarting MinIO: %v", rerr)
	}
	if err != nil || o.Size != 5 {
		t.Fatalf("Stat across a restart = %+v, %v; want the object", o, err)
	}
	if time.Since(start) < 2*time.Second {
		t.Errorf("Stat returned after %s, before MinIO was back", time.Since(start))
	}
}

// BenchmarkListTree lists a tree of 64 directories of 200 objects each on
// MinIO: one recursive listing (List), and ListTree's directory per
// request stream at 1 and 16 at once; objects/s.
func BenchmarkListTree(b *testing.B) {
	ctx := context.Background()
	bucket := minioServer.Bucket(b)
	const dirs, per = 64, 200
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for d := range dirs {
		for k := range per {
			g.Go(func() error {
				_, err := minioServer.Client.PutObject(gctx, bucket, fmt.Sprintf("tree/d%03d/part-%05d.parquet", d, k), strings.NewReader("x"), 1, minio.PutObjectOptions{})
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for name, v := range map[string]string{s3.AccessKeyFile: minioServer.AccessKey, s3.SecretKeyFile: minioServer.SecretKey} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	st, err := Open(ctx, store.Source{URI: "s3://" + bucket + "/tree/", Endpoint: "http://" + minioServer.Endpoint, Insecure: true, CredentialsDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		list func() ([]store.Object, error)
	}{
		{"List", func() ([]store.Object, error) { return st.List(ctx) }},
		{"ListTree/parallel=1", func() ([]store.Object, error) { return store.ListTree(ctx, st, 1, nil) }},
		{"ListTree/parallel=16", func() ([]store.Object, error) { return store.ListTree(ctx, st, 16, nil) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				objs, err := c.list()
				if err != nil || len(objs) != dirs*per {
					b.Fatalf("%d objects, %v", len(objs), err)
				}
			}
			b.ReportMetric(float64(dirs*per*b.N)/b.Elapsed().Seconds(), "objects/s")
		})
	}
}
