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
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
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
	{"tokens", 16384, 512, func(dir string) error { return sampledata.Tokens(dir, 16384, 2048, 8<<20) }},
	{"blobs", 2048, 64, func(dir string) error { return sampledata.Blobs(dir, 2048, 64<<10, 8<<20) }},
}

func benchDataset(b *testing.B, set benchData) dataset {
	b.Helper()
	return benchDatasetSpec(b, set, fmt.Sprintf("  numSplits: 1\n  globalBatchSize: %d\n  shuffle: {blockSize: 4096}\n", set.batch))
}

func benchDatasetSpec(b *testing.B, set benchData, spec string) dataset {
	b.Helper()
	bucket := minioServer.Bucket(b)
	dir := b.TempDir()
	if err := set.write(filepath.Join(dir, set.name)); err != nil {
		b.Fatal(err)
	}
	upload(b, bucket, set.name, filepath.Join(dir, set.name))
	manifest := filepath.Join(dir, "dataset.yaml")
	streams := []sampledata.Stream{{Name: set.name, Format: "mds", URI: "s3://" + bucket + "/" + set.name + "/", Endpoint: minioServer.URL()}}
	if err := os.WriteFile(manifest, []byte(sampledata.Manifest("bench", streams, spec)), 0o644); err != nil {
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
				b.Fatalf("no Python venv at %s: run make tools-python (make bench does)", python)
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
			rawCopy(b, bytes/int64(batches), batches, batches*b.N)
			b.ReportMetric(float64(batches*b.N)/b.Elapsed().Seconds(), "batches/s")
		})
		srv.kill()
	}
}

// rawCopy has a child process write n chunks of size bytes over a Unix
// socket to this one, which reads them fully: the ceiling of any protocol
// between two processes on this machine. The chunks are taken in turn from
// a buffer of epoch chunks, the size of the epoch's data, as the sidecar
// takes its batches from the decoded epoch (a single chunk written again
// and again would stay in the CPU's cache, which no real epoch does).
func rawCopy(b *testing.B, size int64, epoch, n int) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "raw.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	writer := exec.Command(os.Args[0], "-test.run", "^$")
	writer.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", rawWriterEnv, path, size, epoch, n))
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
	var size int64
	var epoch, n int
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		return fmt.Errorf("bad %s %q", rawWriterEnv, spec)
	}
	path := parts[0]
	if _, err := fmt.Sscan(parts[1], &size); err != nil {
		return err
	}
	if _, err := fmt.Sscan(parts[2], &epoch); err != nil {
		return err
	}
	if _, err := fmt.Sscan(parts[3], &n); err != nil {
		return err
	}
	data := make([]byte, size*int64(epoch)) // filled before connecting: the reader's clock starts at the connection
	for i := range data {
		data[i] = byte(i)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.(*net.UnixConn).SetWriteBuffer(4 << 20) // as the sidecar does
	for i := range n {
		j := int64(i % epoch)
		if _, err := c.Write(data[j*size : (j+1)*size]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkServeFirstBatch measures the time from starting `shardfeed
// serve` (empty cache, MinIO on loopback) to the first batch in the client,
// and the bytes fetched by then. The first batch needs, for every split,
// the shards of its first shuffle block (min(blockSize, split length)
// samples): 128 MiB of tokens in 8 MiB shards, cut into 1 or 8 splits.
func BenchmarkServeFirstBatch(b *testing.B) {
	for _, c := range []struct {
		splits, block int
	}{{1, 4096}, {8, 256}, {8, 4096}} {
		b.Run(fmt.Sprintf("splits=%d/block=%d", c.splits, c.block), func(b *testing.B) {
			measureFirstBatch(b, benchDatasetSpec(b, benchSets[0], fmt.Sprintf("  numSplits: %d\n  globalBatchSize: 512\n  shuffle: {blockSize: %d}\n", c.splits, c.block)))
		})
	}
}

// BenchmarkServeFirstBatchLance is BenchmarkServeFirstBatch's first case
// on the same tokens as a Lance table (written by pylance, format: lance,
// indexed in shards of about 8 MiB): a cold first batch from MinIO.
func BenchmarkServeFirstBatchLance(b *testing.B) {
	bucket, dir := minioServer.Bucket(b), b.TempDir()
	testenv.PythonScript(b, "venv-oracle", "test/oracle/lance_oracle.py", "write", filepath.Join(dir, "tokens.lance"), "--case", "tokens", "--version", "2.2")
	upload(b, bucket, "tokens.lance", filepath.Join(dir, "tokens.lance"))
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: bench}
spec:
  streams:
  - name: tokens
    format: lance
    source: {uri: "s3://%s/tokens.lance/", endpoint: %q, insecure: true}
  numSplits: 1
  globalBatchSize: 512
  shuffle: {blockSize: 4096}
`, bucket, minioServer.URL())), 0o644); err != nil {
		b.Fatal(err)
	}
	ds := dataset{bucket: bucket, manifest: manifest, credentials: minioServer.CredentialsDir(b)}
	if out, err := runShardfeed("index", "-f", manifest, "--shard-size", "8MiB", "--credentials-dir", ds.credentials); err != nil {
		b.Fatalf("index: %v\n%s", err, out)
	}
	measureFirstBatch(b, ds)
}

// measureFirstBatch reports the mean time to ds's first batch from a cold
// start, and the bytes fetched by then.
func measureFirstBatch(b *testing.B, ds dataset) {
	b.ResetTimer()
	var total time.Duration
	var fetched int64
	for range b.N {
		d, n := firstBatch(b, ds)
		total += d
		fetched += n
	}
	b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/first-batch")
	b.ReportMetric(float64(fetched)/float64(b.N)/(1<<20), "MiB-fetched")
}

// firstBatch starts serve on ds with an empty cache and returns the time to
// its first batch and the bytes it had fetched then.
func firstBatch(b *testing.B, ds dataset) (time.Duration, int64) {
	dir := b.TempDir()
	socket := filepath.Join(dir, "run", "feed.sock")
	begin := time.Now()
	cmd := exec.Command(binary, "serve", "-f", ds.manifest, "--socket", socket, "--cache-dir", filepath.Join(dir, "cache"),
		"--state", filepath.Join(dir, "state.json"), "--credentials-dir", ds.credentials, "--metrics-addr", "", "--prefetch", "0")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	c := shardfeed.New(socket)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	st, err := c.Batches(ctx, shardfeed.Request{Rank: 0, World: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	if _, err := st.Next(); err != nil {
		b.Fatal(err)
	}
	took := time.Since(begin)
	var status struct {
		Pipeline struct {
			Cache struct{ FetchedBytes int64 } `json:"cache"`
		} `json:"pipeline"`
	}
	if err := c.Status(ctx, &status); err != nil {
		b.Fatal(err)
	}
	return took, status.Pipeline.Cache.FetchedBytes
}
