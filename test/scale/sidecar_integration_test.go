//go:build integration

package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/streams"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/daemon"
	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
	"github.com/shardfeed/shardfeed/sidecar/pipeline"
)

// sidecarStart is a stream of many small Parquet shards on MinIO, whose
// compact index a pod's sidecar reads in parts: the shards the pods the
// test starts read first exist, the others are only in the index.
type sidecarStart struct {
	shards, perShard int64
	pods, ranks      int
	rescaleTo        int
	blockSize        int64
	runs             int
}

var (
	shortSidecarStart = sidecarStart{shards: 1e5, perShard: 1000, pods: 128, ranks: 8, rescaleTo: 96, blockSize: 1 << 14, runs: 1}
	// The stream: 1e7 shards of 1e3 samples, 1e10 samples.
	fullSidecarStart = sidecarStart{shards: 1e7, perShard: 1000, pods: 1024, ranks: 8, rescaleTo: 768, blockSize: 1 << 14, runs: 3}
)

// TestIntegrationSidecarStartsFromAnIndexInParts starts a real pod's
// sidecar (daemon.Open, then the prefetch of its start step until the
// step's shards are decoded, as a pod's sidecar does before it is ready)
// over a compact index of d.shards shards on MinIO: the first pod of the
// job at step 0, and the first new pod of a rescale at the middle of the
// epoch. It reports the bytes of the index each read, the entries it
// resolved, its time to ready and its heap; it checks that each read a
// small part of the index and served its ranks' first batch.
func TestIntegrationSidecarStartsFromAnIndexInParts(t *testing.T) {
	d := shortSidecarStart
	if full {
		d = fullSidecarStart
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bucket := minioServer.Bucket(t)
	uri := "s3://" + bucket + "/tokens/"
	creds := minioServer.CredentialsDir(t)
	st, err := stores.Open(ctx, store.Source{URI: uri, Endpoint: minioServer.URL(), Insecure: true, CredentialsDir: creds})
	if err != nil {
		t.Fatal(err)
	}
	object, entry := parquetShard(ctx, t, d.perShard)
	began := time.Now()
	data := manyShards(t, entry, d.shards)
	if err := st.Put(ctx, compact.Key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	t.Logf("a compact index of %d shards: %s, written in %s", d.shards, bytesize.Human(int64(len(data))), time.Since(began).Round(time.Millisecond))
	splits := int64(d.pods * d.ranks / gcd(d.pods, d.rescaleTo) * d.rescaleTo)
	spec := datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "tokens", Format: datav1alpha1.FormatParquet,
			Source: datav1alpha1.Source{URI: uri, Endpoint: minioServer.URL(), Insecure: true}}},
		NumSplits: int32(splits), GlobalBatchSize: 2 * splits, //nolint:gosec // a few thousand splits
		Shuffle: datav1alpha1.Shuffle{BlockSize: ptr.To(d.blockSize), Seed: ptr.To[int64](7)},
	}
	steps := planned(t, data, &spec).Steps()
	type start struct {
		pods int
		step int64
	}
	starts := []start{{d.pods, 0}, {d.rescaleTo, steps / 2}}
	// The shards the started pods fetch first exist, and the first (whose
	// footer gives the stream's schema).
	keys := []string{"part-00000000.parquet"}
	firsts := make([][]int, len(starts))
	for i, s := range starts {
		firsts[i] = firstShards(t, data, &spec, s.pods, s.step)
		for _, h := range firsts[i] {
			keys = append(keys, fmt.Sprintf("part-%08d.parquet", h))
		}
	}
	putAll(ctx, t, st, keys, object)
	// What any sidecar reads to plan: the header, the counts and shard 0;
	// what the manager reads: the header.
	base := lean(t, data).BytesRead()
	header := headerBytes(t, data)
	op := operatorPlan(ctx, t, spec, creds)
	if op.read > header+64<<10 {
		t.Errorf("the operator's plan read %d bytes of the index, its header is %d", op.read, header)
	}
	mgr := managerPlan(t, spec)
	if mgr.read > header+64<<10 || mgr.peak > managerMemoryLimit {
		t.Errorf("the manager read %d bytes of the index (its header is %d), its peak resident memory %s (the chart's limit %s)",
			mgr.read, header, bytesize.Human(mgr.peak), bytesize.Human(managerMemoryLimit))
	}
	var rows []string
	for i, s := range starts {
		var opened, took []time.Duration
		var heaps, read, entries []int64
		for run := range d.runs {
			r := startPod(ctx, t, d, spec, creds, s.pods, s.step, filepath.Join(t.TempDir(), fmt.Sprint(run)))
			opened, took, heaps, read, entries = append(opened, r.opened), append(took, r.ready), append(heaps, r.heap), append(read, r.indexBytes), append(entries, r.entries)
			// Its part: the entries of the shards it fetches first (and
			// shard 0's), each at most a block of each of its sections.
			if most := int64(len(firsts[i])) + 1; r.entries > most || r.indexBytes > base+4*compact.BlockSize*r.entries {
				t.Errorf("pod 0 of %d read %d bytes of an index of %d (%d to plan), %d entries, of shards it fetches first %d: more than its part",
					s.pods, r.indexBytes, len(data), base, r.entries, most)
			}
		}
		rows = append(rows, fmt.Sprintf("| pod 0 of %d at step %d | %s | %s | %s (%s) | %s |\n", s.pods, s.step,
			durations(opened), durations(took), byteRange(read), countRange(entries), byteRange(heaps)))
	}
	report := fmt.Sprintf("A pod's sidecar over a compact index of %.0e shards of %d samples (%s, its header %s) on MinIO, numSplits %d, global batch %d, shuffle block %d; %d run(s) each, fresh caches. "+
		"The operator's plan of it (streams.OpenSummary under the default 16 MiB cap, planspec, planner.New: what a reconcile does) read %s in %d requests in %s, %s of heap. "+
		"The manager (one replica, its default flags) made a TrainingDataset of it Ready in %s, its reconcile reading %s of the index in %d requests (shardfeed_dataset_index_read_bytes_total), at a peak resident memory of %s (the chart's limit: %s).\n\n"+
		"| sidecar | opened: index header and counts, plan | ready: and its epoch, its start step's shards fetched and decoded | index bytes read (entries resolved) | heap at ready |\n| --- | --- | --- | --- | --- |\n%s",
		float64(d.shards), d.perShard, bytesize.Human(int64(len(data))), bytesize.Human(header), splits, 2*splits, d.blockSize, d.runs,
		bytesize.Human(op.read), op.requests, op.took.Round(time.Millisecond), bytesize.Human(op.heap),
		mgr.ready.Round(time.Millisecond), bytesize.Human(mgr.read), mgr.requests, bytesize.Human(mgr.peak), bytesize.Human(managerMemoryLimit), strings.Join(rows, ""))
	t.Logf("sidecar start:\n%s", report)
	if path := os.Getenv("SCALE_SIDECAR_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil { //nolint:gosec // a report
			t.Error(err)
		}
	}
}

// operatorRead is what the operator's plan of the dataset read and took.
type operatorRead struct {
	read, requests, heap int64
	took                 time.Duration
}

// operatorPlan plans the dataset as the operator's reconcile does: each
// stream's index by its header (streams.OpenSummary, under the default
// --max-index-bytes), its params and plan.
func operatorPlan(ctx context.Context, t *testing.T, spec datav1alpha1.TrainingDatasetSpec, creds string) operatorRead {
	t.Helper()
	var counts store.Counts
	heap0 := liveHeap()
	began := time.Now()
	src := streams.Source(spec.Streams[0])
	src.CredentialsDir, src.Counts = creds, &counts
	st, err := streams.OpenSummary(ctx, 0, planspec.Resolved(&spec, 0), nil, src, 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planspec.Params(&spec, []planner.StreamIndex{st.Index})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(p)
	if err != nil {
		t.Fatal(err)
	}
	r := operatorRead{read: counts.ReadBytes.Load(), requests: counts.Requests(), took: time.Since(began)}
	r.heap = max(liveHeap()-heap0, 0)
	runtime.KeepAlive(pl)
	return r
}

// managerMemoryLimit is the chart's memory limit of a manager replica
// (resources.limits.memory).
const managerMemoryLimit = 384 << 20

// managerRead is what the manager's reconcile of a dataset read and took.
type managerRead struct {
	read, requests, peak int64
	ready                time.Duration
}

// managerPlan starts a manager replica and creates a TrainingDataset of
// spec, with the bucket's credentials in a Secret, and waits until it is
// Ready: the real reconcile over the index, its bytes read as the
// manager's metrics count them and the replica's peak resident memory.
func managerPlan(t *testing.T, spec datav1alpha1.TrainingDatasetSpec) managerRead {
	t.Helper()
	ctx := context.Background()
	c := apiServer.Client
	for _, ns := range []string{operatorNS, "index-in-parts"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: "index-in-parts"},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(minioServer.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(minioServer.SecretKey)}}); err != nil {
		t.Fatal(err)
	}
	reps := startReplicas(t, 1, listen(t))
	key := client.ObjectKey{Namespace: "index-in-parts", Name: "tokens"}
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Spec: *spec.DeepCopy()}
	ds.Spec.Streams[0].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: "s3"}
	began := time.Now()
	if err := c.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ds) })
	waitDatasetsReady(t, []client.ObjectKey{key})
	r := managerRead{ready: time.Since(began)}
	time.Sleep(time.Second) // the reconciles of the dataset's creation are over
	match := []string{`namespace="index-in-parts"`, `dataset="tokens"`}
	plans := int64(metrics(t, reps, "shardfeed_dataset_plans_total", match...))
	read := int64(metrics(t, reps, "shardfeed_dataset_index_read_bytes_total", match...))
	if plans < 1 || read == 0 {
		t.Fatalf("the manager planned the dataset %d times, reading %d bytes of its index", plans, read)
	}
	// What one reconcile read (each reads the same).
	r.read, r.requests = read/plans, int64(metrics(t, reps, "shardfeed_dataset_index_read_requests_total", match...))/plans
	r.peak = measure(t, reps).maxPeak()
	return r
}

// podStart is what one sidecar's start measured.
type podStart struct {
	opened, ready             time.Duration
	heap, indexBytes, entries int64
}

// startPod starts pod 0 of pods' sidecar at step and waits until it is
// ready; then it reads the pod's first rank's batch at the step.
func startPod(ctx context.Context, t *testing.T, d sidecarStart, spec datav1alpha1.TrainingDatasetSpec, creds string, pods int, step int64, dir string) podStart {
	t.Helper()
	heap0 := liveHeap()
	began := time.Now()
	feed, err := daemon.Open(ctx, daemon.Config{Dataset: "start", Spec: spec, CredentialsDir: creds, CacheDir: dir, Prefetch: -1,
		Placement: sidecarconfig.Placement{RankMode: sidecarconfig.RankModePod, Pod: 0, Pods: pods, ProcsPerPod: d.ranks}})
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Pipeline.Close()
	opened := time.Since(began)
	first, n, err := feed.Plan.PodSplits(0, pods)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.Pipeline.Prefetch(0, first, n, step); err != nil {
		t.Fatal(err)
	}
	for !feed.Pipeline.Ready(0, first, n, step) {
		if ctx.Err() != nil || time.Since(began) > 5*time.Minute {
			t.Fatalf("pod 0 of %d not ready at step %d after %s: %v", pods, step, time.Since(began), feed.Pipeline.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := podStart{opened: opened, ready: time.Since(began)}
	r.heap = max(liveHeap()-heap0, 0)
	r.indexBytes, r.entries = feed.IndexBytes()
	b, err := feed.Pipeline.Batches(ctx, pipeline.Request{Rank: 0, World: pods * d.ranks, Workers: 1, Start: step, ScopeFirst: first, ScopeSplits: n})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	batch, err := b.Next(ctx)
	if err != nil {
		t.Fatalf("pod 0 of %d, rank 0's batch %d: %v", pods, step, err)
	}
	defer batch.Release()
	if want := feed.Plan.GlobalBatchSize() / int64(pods*d.ranks); batch.Step != step || batch.Record.NumRows() != want {
		t.Fatalf("rank 0's batch at step %d: step %d, %d rows, want %d", step, batch.Step, batch.Record.NumRows(), want)
	}
	return r
}

// parquetShard writes a Parquet object of rows rows (a token id column)
// and indexes it with shardfeed's own Parquet indexer: the object, and its
// one shard's entry.
func parquetShard(ctx context.Context, t *testing.T, rows int64) ([]byte, indexfile.Entry) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{{Name: "token", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range rows {
		b.Append(i)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, rows)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, pq.NewWriterProperties(pq.WithMaxRowGroupLength(rows)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "part.parquet"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := stores.Open(ctx, store.Source{URI: "file://" + dir + "/"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := formats.Default().Index(ctx, st, datav1alpha1.FormatParquet, format.IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Shards) != 1 {
		t.Fatalf("the object indexed as %d shards", len(f.Shards))
	}
	return buf.Bytes(), f.Shards[0]
}

// manyShards is the compact index of shards copies of entry, each an
// object of its own (part-%08d.parquet, the same bytes).
func manyShards(t *testing.T, entry indexfile.Entry, shards int64) []byte {
	t.Helper()
	suffix := strings.TrimPrefix(entry.Name, entry.Object)
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatParquet, Shards: make([]indexfile.Entry, shards)}
	for h := range f.Shards {
		e := entry
		e.Object = fmt.Sprintf("part-%08d.parquet", h)
		e.Name = e.Object + suffix
		f.Shards[h] = e
	}
	data, err := compact.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// lean reads a compact index in parts from memory.
func lean(t *testing.T, data []byte) *compact.Counts {
	t.Helper()
	r, err := compact.NewReader(int64(len(data)), func(off, n int64) ([]byte, error) { return data[off : off+n], nil }, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _, c, err := r.LeanFile()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// headerBytes is the bytes a reader of a compact index's header reads.
func headerBytes(t *testing.T, data []byte) int64 {
	t.Helper()
	r, err := compact.NewReader(int64(len(data)), func(off, n int64) ([]byte, error) { return data[off : off+n], nil }, 0)
	if err != nil {
		t.Fatal(err)
	}
	return r.BytesRead()
}

// planned is the dataset's plan over the index, read in parts.
func planned(t *testing.T, data []byte, spec *datav1alpha1.TrainingDatasetSpec) *planner.Plan {
	t.Helper()
	p, err := planspec.Params(spec, []planner.StreamIndex{lean(t, data).StreamIndex()})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// firstShards are the shards pod 0 of pods fetches first from step: those
// its step reads, and its prefetcher's window past them (a superset).
func firstShards(t *testing.T, data []byte, spec *datav1alpha1.TrainingDatasetSpec, pods int, step int64) []int {
	t.Helper()
	pl := planned(t, data, spec)
	first, n, err := pl.PodSplits(0, pods)
	if err != nil {
		t.Fatal(err)
	}
	ep, err := pl.EpochOf(0, first, n)
	if err != nil {
		t.Fatal(err)
	}
	needs := ep.ShardsAhead(first, n)
	var out []int
	ahead := 0
	for _, nd := range needs {
		if nd.FirstStep > step {
			if ahead++; ahead > 2*pipeline.SizedAhead(8) {
				break
			}
		}
		if nd.LastStep >= step {
			out = append(out, nd.Shard)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// putAll writes body at each key, 16 at once.
func putAll(ctx context.Context, t *testing.T, st store.Store, keys []string, body []byte) {
	t.Helper()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, k := range keys {
		g.Go(func() error { return st.Put(gctx, k, bytes.NewReader(body), int64(len(body))) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64()) //nolint:gosec // a heap's size
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func durations(ds []time.Duration) string {
	lo, hi := slices.Min(ds), slices.Max(ds)
	if lo.Round(time.Millisecond) == hi.Round(time.Millisecond) {
		return lo.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s–%s", lo.Round(time.Millisecond), hi.Round(time.Millisecond))
}

func byteRange(v []int64) string {
	lo, hi := slices.Min(v), slices.Max(v)
	if bytesize.Human(lo) == bytesize.Human(hi) {
		return bytesize.Human(lo)
	}
	return bytesize.Human(lo) + "–" + bytesize.Human(hi)
}

func countRange(v []int64) string {
	lo, hi := slices.Min(v), slices.Max(v)
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}
