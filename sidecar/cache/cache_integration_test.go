//go:build integration

package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/internal/checksum"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

var minioServer *testenv.MinIO

func TestMain(m *testing.M) { os.Exit(testenv.RunWithMinIO(m, &minioServer)) }

// upload puts random shards into a fresh bucket and returns the stream's
// store and shards.
func upload(t testing.TB, sizes ...int) (store.Store, []Shard, [][]byte) {
	t.Helper()
	ctx := context.Background()
	bucket := minioServer.Bucket(t)
	r := rand.New(rand.NewPCG(uint64(len(sizes)), 7))
	var shards []Shard
	var data [][]byte
	for i, n := range sizes {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		key := fmt.Sprintf("web/shard.%05d.mds", i)
		if _, err := minioServer.Client.PutObject(ctx, bucket, key, bytes.NewReader(b), int64(n), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		sum, _ := checksum.Of("xxh3_64", b)
		shards = append(shards, Shard{Stream: "web", Key: fmt.Sprintf("shard.%05d.mds", i), Size: int64(n), Hash: sum.String()})
		data = append(data, b)
	}
	credDir := minioServer.CredentialsDir(t)
	st, err := stores.Open(ctx, store.Source{
		URI: "s3://" + bucket + "/web/", Endpoint: "http://" + minioServer.Endpoint, Insecure: true,
		CredentialsDir: credDir, Retry: store.Retry{MaxElapsed: 30 * time.Second, RequestTimeout: 20 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, shards, data
}

func TestIntegrationCacheFetchesEachShardOnceFromMinIO(t *testing.T) {
	st, shards, data := upload(t, 3<<20, 1<<20, 5<<20, 100, 2<<20)
	c, err := New(Options{Dir: t.TempDir(), Parallel: 2}, map[string]store.Store{"web": st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for reader := range 4 { // four local ranks reading every shard
		wg.Go(func() {
			for i := range shards {
				s := shards[(i+reader)%len(shards)]
				p, err := c.Acquire(ctx, s)
				if err == nil {
					var got []byte
					if got, err = os.ReadFile(p); err == nil && !bytes.Equal(got, data[(i+reader)%len(shards)]) {
						err = fmt.Errorf("%s: wrong bytes", s.Key)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	var total int64
	for _, d := range data {
		total += int64(len(d))
	}
	if s := c.Stats(); s.Downloads != int64(len(shards)) || s.FetchedBytes != total {
		t.Errorf("stats = %+v, want %d downloads of %d bytes in all", s, len(shards), total)
	}
}

// slowStore delays every read, so that a download is still running when
// the test stops MinIO under it: at most 128 KiB per 5 ms, counting what
// it read.
type slowStore struct {
	store.Store
	read *atomic.Int64
}

func (s slowStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	r, err := s.Store.Get(ctx, key, off, n)
	if err != nil {
		return nil, err
	}
	return slowReader{r, s.read}, nil
}

type slowReader struct {
	io.ReadCloser
	read *atomic.Int64
}

func (r slowReader) Read(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	n, err := r.ReadCloser.Read(p[:min(len(p), 128<<10)])
	r.read.Add(int64(n))
	return n, err
}

func TestIntegrationDownloadSurvivesMinIOStoppingMidway(t *testing.T) {
	// Larger than what the sockets hold in flight (Linux lets a
	// receive buffer grow to tcp_rmem's 32 MiB): a 16 MiB shard was
	// sometimes all sent before MinIO was stopped.
	st, shards, data := upload(t, 64<<20)
	read := &atomic.Int64{}
	c, err := New(Options{Dir: t.TempDir()}, map[string]store.Store{"web": slowStore{st, read}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	go func() {
		// About 3 MB into the 64 MB shard, whenever the download began (a
		// fixed delay killed MinIO before the request on a loaded machine).
		for deadline := time.Now().Add(time.Minute); read.Load() < 3<<20 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		minioServer.Kill()
		time.Sleep(2 * time.Second)
		if err := minioServer.Restart(ctx); err != nil {
			t.Errorf("restarting MinIO: %v", err)
		}
	}()
	p, err := c.Acquire(ctx, shards[0])
	if err != nil {
		t.Fatalf("Acquire across a MinIO restart: %v", err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data[0]) {
		t.Fatalf("read %d bytes back (%v), want the %d bytes uploaded", len(got), err, len(data[0]))
	}
	if s := c.Stats(); s.FetchedBytes <= int64(len(data[0])) || s.Downloads != 1 {
		t.Errorf("stats = %+v: want one completed download after a cut-short one (fetched %d bytes of a %d-byte shard: more means the first download was cut and redone; equal, that MinIO had sent it all before it stopped)",
			s, s.FetchedBytes, len(data[0]))
	}
}

func TestIntegrationShardCorruptAtTheSourceIsNeverServed(t *testing.T) {
	st, shards, data := upload(t, 1<<20)
	ctx := context.Background()
	bad := bytes.Clone(data[0])
	bad[12345] ^= 0x40
	if err := st.Put(ctx, shards[0].Key, bytes.NewReader(bad), int64(len(bad))); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Dir: t.TempDir()}, map[string]store.Store{"web": st})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, shards[0])
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Attempts != 3 {
		t.Fatalf("Acquire of a corrupt shard = %v, want a CorruptError after 3 downloads", err)
	}
	if s := c.Stats(); s.FetchedBytes != 3<<20 || s.UsedBytes != 0 {
		t.Errorf("stats = %+v, want 3 full downloads and nothing kept", s)
	}
}

// BenchmarkDownload fetches 32 shards of 8 MB from MinIO into an empty cache
// with 1, 4 and 16 parallel downloads: MB/s into the cache, hashes checked.
func BenchmarkDownload(b *testing.B) {
	sizes := make([]int, 32)
	for i := range sizes {
		sizes[i] = 8 << 20
	}
	st, shards, _ := upload(b, sizes...)
	for _, parallel := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("parallel=%d", parallel), func(b *testing.B) {
			b.SetBytes(int64(32 * (8 << 20)))
			for b.Loop() {
				c, err := New(Options{Dir: b.TempDir(), Parallel: parallel}, map[string]store.Store{"web": st})
				if err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, s := range shards {
					wg.Go(func() {
						if _, err := c.Acquire(context.Background(), s); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
