//go:build integration

package sidecar_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// BenchmarkEgress measures what a job's pods fetch from MinIO in one epoch
// of 64 MiB (64 MDS shards of 1 MiB), for world sizes 1 to 16 (one rank per
// pod): real sidecars in pod mode, their downloaded bytes summed, over the
// dataset's bytes. Beside it, the same ratio for the naive baseline, torch's
// DistributedSampler (shuffled) over a map-style dataset whose loader
// fetches the shards of the samples its rank gets: computed from the
// sampler's index sets, each shard counted once per rank.
func BenchmarkEgress(b *testing.B) {
	const n = 8192 // 8 KiB samples
	ds := newTokenDataset(b, n, "  numSplits: 16\n  globalBatchSize: 64\n  shuffle: {seed: 1, blockSize: 1024}\n")
	st, err := stores.Open(context.Background(), store.Source{URI: "s3://" + ds.bucket + "/t/", Endpoint: minioServer.URL(), Insecure: true,
		CredentialsDir: ds.credentials})
	if err != nil {
		b.Fatal(err)
	}
	x, err := index.ReadStore(context.Background(), st)
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	shardOf := make([]int, 0, n)
	for i, s := range x.Shards {
		total += s.Bytes
		for range s.Samples {
			shardOf = append(shardOf, i)
		}
	}
	for _, world := range []int{1, 2, 4, 8, 16} {
		b.Run(fmt.Sprintf("world=%d", world), func(b *testing.B) {
			for range b.N {
				var fetched, requests int64
				var first time.Duration
				for pod := range world {
					// A fresh cache for every run (b.TempDir is a new
					// directory at each call): a warm one fetches nothing.
					f, r, t := podFetches(b, ds, b.TempDir(), world, pod)
					fetched, requests, first = fetched+f, requests+r, max(first, t)
				}
				b.ReportMetric(float64(fetched)/float64(total), "shardfeed-egress-x")
				b.ReportMetric(float64(requests), "shardfeed-requests/epoch")
				b.ReportMetric(first.Seconds(), "shardfeed-cold-first-batch-s")
				if world == 1 {
					f, t := podResumes(b, ds, 0.9)
					b.ReportMetric(t.Seconds(), "shardfeed-cold-resume-first-batch-s")
					b.ReportMetric(float64(f)/float64(total), "shardfeed-cold-resume-egress-x")
					// What the rest of an epoch reads depends on the shuffle's
					// blocks: with blocks of about one shard, a tenth of it.
					f, t = podResumes(b, reshuffled(b, ds, "  numSplits: 16\n  globalBatchSize: 64\n  shuffle: {seed: 1, blockSize: 128}\n"), 0.9)
					b.ReportMetric(t.Seconds(), "shardfeed-block128-cold-resume-first-batch-s")
					b.ReportMetric(float64(f)/float64(total), "shardfeed-block128-cold-resume-egress-x")
				}
			}
			// DistributedSampler(shuffle=True, drop_last=False): one
			// permutation, rank r takes positions r, r+W, …
			perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
			var naive int64
			for r := range world {
				seen := map[int]bool{}
				for i := r; i < n; i += world {
					s := shardOf[perm[i]]
					if !seen[s] {
						seen[s] = true
						naive += x.Shards[s].Bytes
					}
				}
			}
			b.ReportMetric(float64(naive)/float64(total), "distributedsampler-egress-x")
		})
	}
}

// reshuffled is ds (its data in MinIO) under another plan spec.
func reshuffled(b *testing.B, ds dataset, spec string) dataset {
	b.Helper()
	streams := []sampledata.Stream{{Name: "t", Format: "mds", URI: "s3://" + ds.bucket + "/t/", Endpoint: minioServer.URL()}}
	ds.manifest = filepath.Join(b.TempDir(), "dataset.yaml")
	if err := os.WriteFile(ds.manifest, []byte(sampledata.Manifest("feed", streams, spec)), 0o644); err != nil {
		b.Fatal(err)
	}
	return ds
}

// podResumes is a one-pod job resumed on a new node: it committed at
// fraction `at` of its epoch, and its sidecar starts again with an empty
// cache. It returns the bytes the new sidecar downloaded and the time from
// its start to the first batch of the rest of the epoch.
func podResumes(b *testing.B, ds dataset, at float64) (bytes int64, first time.Duration) {
	b.Helper()
	dir := b.TempDir()
	sidecar := func(cache string) *server {
		return startEnv(b, dir, credentialsEnv(b, ds), "sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
			"--cache-dir", filepath.Join(dir, cache), "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "",
			"--rank-mode", "pod", "--pods", "1", "--pod-rank", "0", "--procs-per-pod", "1", "--job", "egress", "--attempt", "a1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old := sidecar("cache-old")
	st, err := old.client.Batches(ctx, shardfeed.Request{Rank: 0, World: 1})
	if err != nil {
		b.Fatal(err)
	}
	step := int64(at * float64(st.Steps))
	_ = st.Close()
	if _, err := old.client.Commit(ctx, 0, step, false); err != nil {
		b.Fatal(err)
	}
	old.kill()

	start := time.Now()
	srv := sidecar("cache-new")
	defer srv.kill()
	got, err := readAll(ctx, srv.client, shardfeed.Request{Rank: 0, World: 1}, func(batch) bool {
		if first == 0 {
			first = time.Since(start)
		}
		return true
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(got) == 0 || got[0].step != step {
		b.Fatalf("the resumed sidecar served %d batches from step %v, want from the committed step %d", len(got), got, step)
	}
	var status struct {
		Pipeline struct {
			Cache struct{ FetchedBytes, AheadBytes int64 } `json:"cache"`
		} `json:"pipeline"`
	}
	if err := srv.client.Status(ctx, &status); err != nil {
		b.Fatal(err)
	}
	// The epoch's bytes: not the next epoch's first shards, fetched ahead.
	return status.Pipeline.Cache.FetchedBytes - status.Pipeline.Cache.AheadBytes, first
}

// podFetches runs pod `pod` of a job of `pods` one-rank pods, reads its
// rank's epoch, and returns the bytes its sidecar downloaded, the requests
// it made to the store (the index's included) and the time from the
// sidecar's start, its cache empty, to its rank's first batch.
func podFetches(b *testing.B, ds dataset, dir string, pods, pod int) (bytes, requests int64, first time.Duration) {
	b.Helper()
	start := time.Now()
	srv := startEnv(b, dir, credentialsEnv(b, ds), "sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
		"--cache-dir", filepath.Join(dir, "cache"), "--state", filepath.Join(dir, "state.json"), "--metrics-addr", "",
		"--rank-mode", "pod", "--pods", fmt.Sprint(pods), "--pod-rank", fmt.Sprint(pod), "--procs-per-pod", "1", "--job", "egress", "--attempt", "a1")
	defer srv.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := readAll(ctx, srv.client, shardfeed.Request{Rank: pod, World: pods}, func(batch) bool {
		if first == 0 {
			first = time.Since(start)
		}
		return true
	}); err != nil {
		b.Fatal(err)
	}
	var status struct {
		Pipeline struct {
			Cache struct{ FetchedBytes, AheadBytes int64 } `json:"cache"`
		} `json:"pipeline"`
		Store struct{ Requests, AheadGets int64 } `json:"store"`
	}
	if err := srv.client.Status(ctx, &status); err != nil {
		b.Fatal(err)
	}
	// The epoch's bytes and requests: not the next epoch's first shards,
	// fetched ahead.
	c := status.Pipeline.Cache
	return c.FetchedBytes - c.AheadBytes, status.Store.Requests - status.Store.AheadGets, first
}
