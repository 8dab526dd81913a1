//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

// indexedTars is how many tars the headers-only test indexes over S3:
// enough that a read of members' bytes would show in the share read.
const indexedTars = 250

// A WebDataset set of indexedTars tars (written by webdataset's TarWriter)
// on MinIO is indexed from the tars' headers alone: index reports what it
// read, a small share of the set, and the index plans every sample. With
// Megatron-Energon's index beside them, no tar is read at all.
func TestIntegrationIndexTarsReadingHeadersOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var w struct {
		Tars    []string `json:"tars"`
		Bytes   int64    `json:"bytes"`
		Headers int64    `json:"headers"`
	}
	out := testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "write", dir,
		"--tars", strconv.Itoa(indexedTars), "--samples", "3", "--image-bytes", "24000")
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatal(err)
	}
	bucket := minioServer.Bucket(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(w.Tars))
	next := make(chan string)
	for range 16 {
		wg.Go(func() {
			for name := range next {
				if _, err := minioServer.Client.FPutObject(ctx, bucket, "wds/"+name, filepath.Join(dir, name), minio.PutObjectOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, name := range w.Tars {
		next <- name
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	uri := "s3://" + bucket + "/wds/"
	creds := minioServer.CredentialsDir(t)
	endpoint := "http://" + minioServer.Endpoint
	got, err := runCLI(t, "index", uri, "--format", "webdataset", "--endpoint", endpoint, "--insecure", "--credentials-dir", creds)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if !strings.Contains(got, fmt.Sprintf("wrote %s_shardfeed/index.json: %d shards, %d samples", uri, indexedTars, 3*indexedTars)) {
		t.Fatalf("index output:\n%s", got)
	}
	m := regexp.MustCompile(`read \S+ \S+ of the indexed objects' \S+ \S+ \(([0-9.]+)%\) in (\d+) requests`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("index does not say what it read:\n%s", got)
	}
	share, _ := strconv.ParseFloat(m[1], 64)
	read := share / 100 * float64(w.Bytes)
	t.Logf("indexing %d tars (%d bytes, %d of them headers) read %.2f%% of them (%.0f bytes) in %s requests",
		len(w.Tars), w.Bytes, w.Headers, share, read, m[2])
	// A ranged read per member's headers (TarWriter writes a PAX header
	// and its record before each: 1.5 KiB) and one at each tar's end:
	// the headers and little more, never the members' bytes.
	if most := 1.1*float64(w.Headers) + float64(len(w.Tars))*1536; read > most || share > 30 {
		t.Fatalf("indexing read %.0f bytes (%.2f%% of the tars), want only their headers (%d bytes):\n%s", read, share, w.Headers, got)
	}

	// With Megatron-Energon's index beside the tars, index reads no tar:
	// only .nv-meta and the .tar.idx files, and writes the same index.
	first := readObject(t, bucket, "wds/_shardfeed/index.json")
	testenv.PythonScript(t, "venv-oracle", "test/oracle/webdataset_oracle.py", "energon", dir)
	var energonBytes int64
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".tar") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, _ := d.Info()
		energonBytes += info.Size()
		_, err = minioServer.Client.FPutObject(ctx, bucket, "wds/"+rel, path, minio.PutObjectOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = runCLI(t, "index", uri, "--format", "webdataset", "--endpoint", endpoint, "--insecure", "--credentials-dir", creds)
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if !strings.Contains(got, "note: reused Megatron-Energon's index") {
		t.Fatalf("index did not reuse Energon's index:\n%s", got)
	}
	m = regexp.MustCompile(`read (\S+ \S+) of the indexed objects' \S+ \S+ \(([0-9.]+)%\)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("index does not say what it read:\n%s", got)
	}
	reread, _ := strconv.ParseFloat(m[2], 64)
	t.Logf("with Energon's index (%d bytes beside the tars), index read %s (%.2f%% of the tars' size)", energonBytes, m[1], reread)
	if reread/100*float64(w.Bytes) > 1.01*float64(energonBytes) {
		t.Fatalf("index read %s with Energon's index beside the tars, more than its %d bytes", m[1], energonBytes)
	}
	if second := readObject(t, bucket, "wds/_shardfeed/index.json"); !bytes.Equal(first, second) {
		t.Fatalf("Energon's index gives another index than the tars' headers")
	}

	manifest := filepath.Join(t.TempDir(), "ds.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, `apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: wds}
spec:
  streams:
    - name: images
      format: webdataset
      source: {uri: %q, endpoint: %q, insecure: true}
  numSplits: 4
  globalBatchSize: 8
`, uri, endpoint), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = runCLI(t, "plan", "-f", manifest, "--credentials-dir", creds, "--summary")
	if err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^\s*epoch\s+%d samples in 4 splits`, 3*indexedTars)).MatchString(got) {
		t.Fatalf("the plan does not count the set's %d samples:\n%s", 3*indexedTars, got)
	}
}

// readObject reads an object of the test's MinIO bucket whole.
func readObject(t *testing.T, bucket, key string) []byte {
	t.Helper()
	o, err := minioServer.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Close() }()
	var b bytes.Buffer
	if _, err := b.ReadFrom(o); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
