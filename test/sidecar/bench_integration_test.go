//go:build integration

package sidecar_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/testdata"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// benchData is a dataset of the socket benchmarks: tokens are G=512
// samples of 2048 int32 per batch (4 MiB), blobs G=64 samples of 64 KiB.
type benchData struct {
	name    string
	samples int
	batch   int
	write   func(dir string) error
}

var benchSets = []benchData{
	{"tokens", 16384, 512, func(dir string) error { return testdata.Tokens(dir, 16384, 2048, 8<<20) }},
	{"blobs", 2048, 64, func(dir string) error { return testdata.Blobs(dir, 2048, 64<<10, 8<<20) }},
}

func benchDataset(b *testing.B, set benchData) dataset {
	b.Helper()
	bucket := minioServer.Bucket(b)
	dir := b.TempDir()
	if err := set.write(filepath.Join(dir, set.name)); err != nil {
		b.Fatal(err)
	}
	upload(b, bucket, set.name, filepath.Join(dir, set.name))
	manifest := filepath.Join(dir, "dataset.yaml")
	streams := []testdata.Stream{{Name: set.name, Format: "mds", URI: "s3://" + bucket + "/" + set.name + "/", Endpoint: minioServer.URL()}}
	spec := fmt.Sprintf("  numSplits: 1\n  globalBatchSize: %d\n  shuffle: {blockSize: 4096}\n", set.batch)
	if err := os.WriteFile(manifest, []byte(testdata.Manifest("bench", streams, spec)), 0o644); err != nil {
		b.Fatal(err)
	}
	return dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(b)}
}

// readEpoch reads epoch e from step 0 and returns its batches and bytes.
func readEpoch(ctx context.Context, c *shardfeed.Client, e int64) (batches int, bytes int64, err error) {
	st, err := c.Batches(ctx, shardfeed.Request{Rank: 0, World: 1, Epoch: &e, Step: ptr(int64(0))})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = st.Close() }()
	for {
		rec, err := st.Next()
		if errors.Is(err, io.EOF) {
			return batches, bytes, nil
		}
		if err != nil {
			return batches, bytes, err
		}
		batches++
		for _, col := range rec.Columns() {
			for _, buf := range col.Data().Buffers() {
				if buf != nil {
					bytes += int64(buf.Len())
				}
			}
			for _, child := range col.Data().Children() {
				for _, buf := range child.Buffers() {
					if buf != nil {
						bytes += int64(buf.Len())
					}
				}
			}
		}
	}
}

// BenchmarkServeSocket measures batches from a warm sidecar to a Go client
// and to pyarrow, against a raw Unix-socket copy of the same bytes.
func BenchmarkServeSocket(b *testing.B) {
	root, err := testenv.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	python := filepath.Join(root, "bin", "venv", "bin", "python")
	for _, set := range benchSets {
		ds := benchDataset(b, set)
		srv := serve(b, ds, b.TempDir(), "--memory-limit", "2Gi")
		ctx := context.Background()
		batches, bytes, err := readEpoch(ctx, srv.client, 0) // warms the cache
		if err != nil {
			b.Fatal(err)
		}
		b.Run(set.name+"/go-client", func(b *testing.B) {
			b.SetBytes(bytes)
			for i := range b.N {
				if _, _, err := readEpoch(ctx, srv.client, int64(i%4)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batches*b.N)/b.Elapsed().Seconds(), "batches/s")
		})
		b.Run(set.name+"/pyarrow", func(b *testing.B) {
			if _, err := os.Stat(python); err != nil {
				b.Skipf("no Python venv at %s: run make tools", python)
			}
			b.SetBytes(bytes)
			out, err := exec.Command(python, filepath.Join(root, "hack", "bench", "socket_reader.py"), srv.socket, fmt.Sprint(b.N)).Output()
			if err != nil {
				b.Fatal(err)
			}
			var r struct {
				Seconds float64
				Batches int
			}
			if err := json.Unmarshal(out, &r); err != nil {
				b.Fatal(err, string(out))
			}
			b.ReportMetric(float64(r.Batches)/r.Seconds, "batches/s")
			b.ReportMetric(float64(bytes*int64(b.N))/r.Seconds/1e6, "reader-MB/s")
		})
		b.Run(set.name+"/raw-socket", func(b *testing.B) {
			b.SetBytes(bytes)
			rawCopy(b, bytes/int64(batches), batches*b.N)
			b.ReportMetric(float64(batches*b.N)/b.Elapsed().Seconds(), "batches/s")
		})
		srv.kill()
	}
}

// rawCopy has a child process write n chunks of size bytes over a Unix
// socket to this one, which reads them fully: the ceiling of any protocol
// between two processes on this machine.
func rawCopy(b *testing.B, size int64, n int) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "raw.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	writer := exec.Command(os.Args[0], "-test.run", "^$")
	writer.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", rawWriterEnv, path, size, n))
	writer.Stderr = os.Stderr
	if err := writer.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = writer.Wait() }()
	c, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.(*net.UnixConn).SetReadBuffer(4 << 20) // as the client does
	b.ResetTimer()
	buf := make([]byte, size)
	for range n {
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// rawWriterEnv makes the test binary the writer of rawCopy.
const rawWriterEnv = "SHARDFEED_BENCH_RAW_WRITER"

// rawWriter is the child of rawCopy: it connects to the socket and
// writes the chunks.
func rawWriter(spec string) error {
	var path string
	var size int64
	var n int
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("bad %s %q", rawWriterEnv, spec)
	}
	path = parts[0]
	if _, err := fmt.Sscan(parts[1], &size); err != nil {
		return err
	}
	if _, err := fmt.Sscan(parts[2], &n); err != nil {
		return err
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.(*net.UnixConn).SetWriteBuffer(4 << 20) // as the sidecar does
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range n {
		if _, err := c.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkServeFirstBatch measures the time from starting `shardfeed
// serve` (empty cache, MinIO on loopback) to the first batch in the client.
func BenchmarkServeFirstBatch(b *testing.B) {
	ds := benchDataset(b, benchSets[0])
	var total time.Duration
	for range b.N {
		dir := b.TempDir()
		socket := filepath.Join(dir, "run", "feed.sock")
		begin := time.Now()
		cmd := exec.Command(binary, "serve", "-f", ds.manifest, "--socket", socket, "--cache-dir", filepath.Join(dir, "cache"),
			"--state", filepath.Join(dir, "state.json"), "--credentials-dir", ds.credentials, "--metrics-addr", "")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		c := shardfeed.New(socket)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := c.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		st, err := c.Batches(ctx, shardfeed.Request{Rank: 0, World: 1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.Next(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(begin)
		_ = st.Close()
		cancel()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/first-batch")
}
