//go:build integration

package sidecar_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// TestIntegrationAnIndexApartFromReadOnlyData is source.indexURI's
// acceptance: a Parquet stream in a bucket nobody writes to is indexed,
// with a row filter, into another bucket; the data's bucket gains nothing,
// and plan and serve read the index and the filter's runs from there, every
// matching row exactly once.
func TestIntegrationAnIndexApartFromReadOnlyData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data, idx, dir := minioServer.Bucket(t), minioServer.Bucket(t), t.TempDir()
	local := filepath.Join(dir, "m")
	if err := sampledata.Parquet(ctx, local, "m", 600, 150, 50); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(local, "_shardfeed")); err != nil { // the data alone
		t.Fatal(err)
	}
	upload(t, data, "m", local) // named as checkValues expects stream 0
	manifest := filepath.Join(dir, "dataset.yaml")
	yaml := fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: feed}
spec:
  streams:
  - name: m
    format: parquet
    source: {uri: "s3://%s/m/", indexURI: "s3://%s/shardfeed/m/", endpoint: %q, insecure: true}
    filter: "id %% 3 == 0"
  numSplits: 2
  globalBatchSize: 8
  dropLast: false
  shuffle: {seed: 5, blockSize: 16}
`, data, idx, minioServer.URL())
	if err := os.WriteFile(manifest, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := dataset{bucket: data, manifest: manifest, credentials: minioServer.CredentialsDir(t)}

	out, err := runShardfeed("plan", "-f", manifest, "--credentials-dir", ds.credentials)
	if err == nil || !strings.Contains(out, "s3://"+idx+"/shardfeed/m/_shardfeed/index.json") || !strings.Contains(out, "--index-uri s3://"+idx+"/shardfeed/m/") {
		t.Fatalf("plan before the index names neither where it looked nor the command: %v\n%s", err, out)
	}
	out, err = runShardfeed("index", "-f", manifest, "--credentials-dir", ds.credentials)
	if err != nil {
		t.Fatalf("index: %v\n%s", err, out)
	}
	mustContain(t, out, "wrote s3://"+idx+"/shardfeed/m/_shardfeed/index.json: 12 shards, 600 samples",
		"wrote s3://"+idx+"/shardfeed/m/_shardfeed/filter-", "200 of 600 samples match")
	for o := range minioServer.Client.ListObjects(ctx, data, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if !strings.HasSuffix(o.Key, ".parquet") {
			t.Fatalf("index wrote %s into the data's bucket", o.Key)
		}
	}

	plan := planIDs(t, ds, 0, 1, 1)
	srv := serve(t, ds, t.TempDir())
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1, Worker: 0, Workers: 1, Epoch: ptr(int64(0))}, nil)
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, srv.logs())
	}
	seen := map[int64]int{}
	for _, b := range got {
		line, ok := plan[[2]int64{b.step, 0}]
		if !ok {
			t.Fatalf("step %d is not in the plan", b.step)
		}
		if err := sameBatch(b, line); err != nil {
			t.Fatal(err)
		}
		for j, id := range b.rowIDs {
			if b.pads[j] {
				continue
			}
			if id%3 != 0 {
				t.Fatalf("step %d: row id %d does not match the filter", b.step, id)
			}
			seen[id]++
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d distinct matching rows served, want 200", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %d served %d times", id, n)
		}
	}
}
