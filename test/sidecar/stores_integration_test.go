//go:build integration

package sidecar_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/azure"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

// cloudStream is a Parquet stream "p" in a store of another cloud, served
// by its emulator, beside the MDS stream "m" on MinIO.
type cloudStream struct {
	uri, endpoint string
	// secret is the credentialsSecretRef the stream names, with its keys
	// (a mounted Secret's files); "" for none.
	secret string
	keys   map[string]string
}

func gcsStream(t *testing.T) cloudStream {
	t.Helper()
	f, err := testenv.StartFakeGCS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Stop() })
	// fake-gcs-server takes no credentials: the stream names none.
	return cloudStream{uri: "gs://" + f.Bucket(t) + "/p/", endpoint: f.URL}
}

func azureStream(t *testing.T) cloudStream {
	t.Helper()
	a, err := testenv.StartAzurite(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	return cloudStream{uri: "az://" + testenv.AzuriteAccount + "/" + a.Container(t) + "/p/", endpoint: a.URL,
		secret: "azurite", keys: map[string]string{azure.KeyFile: testenv.AzuriteKey}}
}

// newMixedDataset writes "m" (mdsN samples, MDS on MinIO) and "p" (pN
// samples, Parquet in cs) and a manifest naming both. Its credentials
// directory holds MinIO's keys and, under the Secret's name, cs's keys:
// what --credentials-dir gives the CLI, and (Secrets by name) a pod.
func newMixedDataset(t *testing.T, cs cloudStream, mdsN, pN int, spec string) dataset {
	t.Helper()
	ctx := context.Background()
	bucket, dir := mdsInMinIO(t, mdsN)
	if err := sampledata.Parquet(ctx, filepath.Join(dir, "p"), "p", pN, 300, 50); err != nil {
		t.Fatal(err)
	}
	creds := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		b, err := os.ReadFile(filepath.Join(minioServer.CredentialsDir(t), k))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(creds, k), string(b))
	}
	secretRef := ""
	if cs.secret != "" {
		for k, v := range cs.keys {
			writeFile(t, filepath.Join(creds, cs.secret, k), v)
		}
		secretRef = fmt.Sprintf(", credentialsSecretRef: {name: %s}", cs.secret)
	}
	// Upload through the store itself, as `shardfeed convert --out` does.
	src := store.Source{URI: cs.uri, Endpoint: cs.endpoint, Insecure: true}
	if cs.secret != "" {
		src.CredentialsDir = filepath.Join(creds, cs.secret)
	}
	st, err := stores.Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(dir, "p"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return st.Put(ctx, filepath.Base(path), f, fi.Size())
	})
	if err != nil {
		t.Fatal(err)
	}
	path := writeMixedManifest(t, dir, bucket, "", fmt.Sprintf(`  - name: p
    format: parquet
    source: {uri: %q, endpoint: %q, insecure: true%s}
%s`, cs.uri, cs.endpoint, secretRef, spec))
	return dataset{bucket: bucket, manifest: path, credentials: creds}
}

// writeMixedManifest writes dir/dataset.yaml: a dataset whose first
// stream is the MDS stream "m" of bucket (with mFields, more of its YAML),
// and rest, the YAML of its other streams and spec fields.
func writeMixedManifest(t *testing.T, dir, bucket, mFields, rest string) string {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: feed}
spec:
  streams:
  - name: m
    format: mds
    source: {uri: "s3://%s/m/", endpoint: %q, insecure: true}
%s%s`, bucket, minioServer.URL(), mFields, rest)
	path := filepath.Join(dir, "dataset.yaml")
	writeFile(t, path, manifest)
	return path
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationEveryStoreMixesWithMinIOExactlyOnceThroughAKillAndARescale
// is the stores issue's acceptance, for GCS (fake-gcs-server) and Azure
// Blob (Azurite): a dataset of an MDS stream on MinIO and a Parquet stream
// on the other store goes through a kill and a 4→2 rescale exactly once
// (trainKillAndResume).
func TestIntegrationEveryStoreMixesWithMinIOExactlyOnceThroughAKillAndARescale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream func(*testing.T) cloudStream
	}{{"gs", gcsStream}, {"az", azureStream}} {
		t.Run(tc.name, func(t *testing.T) {
			ds := newMixedDataset(t, tc.stream(t), 900, 700, "  numSplits: 4\n  globalBatchSize: 16\n  shuffle: {seed: 11, blockSize: 100}\n")
			trainKillAndResume(t, ds, "mixed")
		})
	}
}

// trainKillAndResume serves ds with real sidecar processes, one per pod
// (trainThroughARescale), and checks that the committed lineage equals
// `plan --ids` for each world size and that every value is the one
// written. It returns the lineage, (step, rank) → batch, and the job's
// state file.
func trainKillAndResume(t *testing.T, ds dataset, job string) (lineage map[[2]int64]batch, state string) {
	t.Helper()
	r := trainThroughARescale(t, ds, job, readAll, func(b batch) int64 { return b.step })
	for k := range r.steps {
		world, plan := r.planAt(k)
		for rank := range world {
			got, want := r.lineage[[2]int64{k, int64(rank)}].ids, plan[[2]int64{k, int64(rank)}].IDs
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d rank %d of %d: the lineage trained %v, plan --ids says %v", k, rank, world, got, want)
			}
		}
	}
	return r.lineage, r.state
}

// rescaled is a job trained through a kill and a 4 → 2 pod rescale.
type rescaled[T any] struct {
	// lineage is the committed lineage, (step, rank) → batch.
	lineage map[[2]int64]T
	// plan4 and plan2 are `plan --ids` at 4 and 2 ranks.
	plan4, plan2    map[[2]int64]planLine
	steps, commitAt int64
	state           string
}

// planAt is the world size that trained step k and its plan.
func (r rescaled[T]) planAt(k int64) (int, map[[2]int64]planLine) {
	if k >= r.commitAt {
		return 2, r.plan2
	}
	return 4, r.plan4
}

// trainThroughARescale serves ds with real sidecar processes, one per
// pod, each rank's batches read with read: 4 pods train to 2/3 of the
// epoch and rank 0 commits half of it; they are killed with SIGKILL, and 2
// pods resume from the commit to the epoch's end, none fetching more than
// the plan's bound for its pod count.
func trainThroughARescale[T any](t *testing.T, ds dataset, job string,
	read func(context.Context, *shardfeed.Client, shardfeed.Request, func(T) bool) ([]T, error), step func(T) int64) rescaled[T] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := rescaled[T]{state: filepath.Join(t.TempDir(), "state.json"), lineage: map[[2]int64]T{}}
	pod := func(pods, rank int, attempt string) *server {
		dir := t.TempDir()
		return startEnv(t, dir, credentialsEnv(t, ds), podArgs(ds, dir, r.state, job, attempt, pods, rank)...)
	}
	r.plan4, r.plan2 = planIDs(t, ds, 0, 4, 1), planIDs(t, ds, 0, 2, 1)
	r.steps = int64(len(r.plan4) / 4)
	if r.steps < 8 || int64(len(r.plan2)/2) != r.steps {
		t.Fatalf("the plan has %d steps at world 4 and %d at world 2", r.steps, len(r.plan2)/2)
	}

	// 4 pods train to 2/3 of the epoch; rank 0 commits half of it.
	stop := r.steps * 2 / 3
	r.commitAt = r.steps / 2
	var four []*server
	for rank := range 4 {
		four = append(four, pod(4, rank, "a1"))
	}
	for rank, srv := range four {
		got, err := read(ctx, srv.client, shardfeed.Request{Rank: rank, World: 4}, func(b T) bool { return step(b)+1 < stop })
		if err != nil {
			t.Fatalf("world 4 rank %d: %v\n%s", rank, err, srv.logs())
		}
		for _, b := range got {
			if step(b) < r.commitAt {
				r.lineage[[2]int64{step(b), int64(rank)}] = b
			}
		}
	}
	if _, err := four[0].client.Commit(ctx, 0, r.commitAt, false); err != nil {
		t.Fatal(err)
	}
	for _, srv := range four {
		srv.kill()
	}

	// 2 pods resume at the commit and train to the end.
	var two []*server
	for rank := range 2 {
		two = append(two, pod(2, rank, "a2"))
	}
	bound := planSummary(t, ds, 2).bytes
	for rank, srv := range two {
		got, err := read(ctx, srv.client, shardfeed.Request{Rank: rank, World: 2}, nil)
		if err != nil {
			t.Fatalf("world 2 rank %d: %v\n%s", rank, err, srv.logs())
		}
		if len(got) == 0 || step(got[0]) != r.commitAt {
			t.Fatalf("world 2 rank %d resumed at %v, want the committed step %d", rank, got[:min(len(got), 1)], r.commitAt)
		}
		for _, b := range got {
			r.lineage[[2]int64{step(b), int64(rank)}] = b
		}
		var status struct {
			Pipeline struct {
				Cache struct{ FetchedBytes, AheadBytes int64 } `json:"cache"`
			} `json:"pipeline"`
		}
		if err := srv.client.Status(ctx, &status); err != nil {
			t.Fatal(err)
		}
		// Beside the next epoch's first shards, fetched ahead.
		if got := status.Pipeline.Cache.FetchedBytes - status.Pipeline.Cache.AheadBytes; got > bound {
			t.Errorf("pod %d of 2 fetched %d bytes, over the plan's bound of %d per pod", rank, got, bound)
		}
	}
	if _, err := two[0].client.Commit(ctx, 0, r.steps, false); err != nil {
		t.Fatal(err)
	}
	return r
}

// podArgs are the arguments of the sidecar of pod rank of pods, working
// in dir, for attempt of job, whose committed progress is in state.
func podArgs(ds dataset, dir, state, job, attempt string, pods, rank int) []string {
	return []string{"sidecar", "-f", ds.manifest, "--socket", filepath.Join(dir, "run", "feed.sock"),
		"--cache-dir", filepath.Join(dir, "cache"), "--state", state, "--metrics-addr", "", "--credentials-dir", ds.credentials,
		"--rank-mode", "pod", "--pods", fmt.Sprint(pods), "--pod-rank", fmt.Sprint(rank), "--procs-per-pod", "1", "--job", job, "--attempt", attempt}
}
