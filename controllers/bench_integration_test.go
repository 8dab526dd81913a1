//go:build integration

package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
)

// percentile of sorted durations, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// burst creates a dataset and pods labelled pods of an Indexed Job in a
// burst (parallel at a time) through the real API server, which calls the
// pod webhook served by this process. It returns each creation's latency
// as the client saw it, the time of the whole burst and the namespace, or
// the first failure (a refused pod, or one created without the sidecar).
func burst(tb testing.TB, pods, parallel int, timer stopwatch) ([]time.Duration, time.Duration, string, error) {
	ctx := context.Background()
	ns := apiServer.Namespace(tb)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}},
		NumSplits: int32(pods), GlobalBatchSize: int64(pods), //nolint:gosec // a test's pod count
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		return nil, 0, ns, err
	}
	writePlan(tb, ds, nil)                         // as the reconciler would have
	job := createJob(tb, ns, "train", int32(pods)) //nolint:gosec // a test's pod count
	latencies := make([]time.Duration, pods)
	work := make(chan int)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	timer.StartTimer()
	start := time.Now()
	for range parallel {
		wg.Go(func() {
			for i := range work {
				p := indexedJobPod(ns, job, i, "web")
				t0 := time.Now()
				err := apiServer.Client.Create(ctx, p)
				latencies[i] = time.Since(t0)
				if err == nil && !inject.Injected(p) {
					err = fmt.Errorf("pod %d was created without the sidecar", i)
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	timer.StopTimer()
	slices.Sort(latencies)
	return latencies, elapsed, ns, failed
}

// stopwatch is what burst times with: a benchmark's timer, or none.
type stopwatch interface {
	StartTimer()
	StopTimer()
}

// noTimer is the timer of a test.
type noTimer struct{}

func (noTimer) StartTimer() {}
func (noTimer) StopTimer()  {}

// countingConfig is the API server's config with a counter of the
// requests made through it.
func countingConfig() (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			n.Add(1)
			return rt.RoundTrip(r)
		})
	})
	return cfg, &n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serveCachedWebhook serves the pod webhook as the manager does: reading
// from a cache made with the manager's options (started and synced here),
// and counting the API requests it makes beside the cache.
func serveCachedWebhook(t testing.TB) *atomic.Int64 {
	t.Helper()
	c, err := cache.New(apiServer.Config, func() cache.Options {
		o := controllers.CacheOptions()
		o.Scheme = apiServer.Scheme
		return o
	}())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	// What the manager's controller watches: the informers exist before
	// the first admission.
	for _, o := range []client.Object{&datav1alpha1.TrainingDataset{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cfg, requests := countingConfig()
	reader, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	pods := testInjector(reader, kubernetes.NewForConfigOrDie(cfg).CoreV1())
	pods.Cache = c
	serveWebhookWith(t, pods)
	return requests
}

// TestIntegrationAThousandPodsInABurstAreAllInjected: 1000 labelled pods
// of an Indexed Job created 16 at a time through the real API server are
// all admitted, every pod the API server holds has the sidecar, and the
// webhook made one API request per pod (the Job's GET) beside its cache,
// plus the few of the job's first pods (the state's creation).
func TestIntegrationAThousandPodsInABurstAreAllInjected(t *testing.T) {
	const pods = 1000
	requests := serveCachedWebhook(t)
	latencies, elapsed, ns, err := burst(t, pods, 16, noTimer{})
	if err != nil {
		t.Fatal(err)
	}
	// The job's first pods share one creation of its state; a few more
	// may read the plan or the state before the cache has them.
	if n := requests.Load(); n > pods+16 {
		t.Errorf("the webhook made %d API requests for %d pods, want at most one per pod (the Job) and a few for the first", n, pods)
	}
	var list corev1.PodList
	if err := apiServer.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != pods {
		t.Fatalf("the API server holds %d pods, want %d", len(list.Items), pods)
	}
	for i := range list.Items {
		if p := &list.Items[i]; !inject.Injected(p) {
			t.Fatalf("pod %s is stored without the sidecar", p.Name)
		}
	}
	t.Logf("%d pods in %s (%.0f pods/s), admission p50 %.0f ms, p99 %.0f ms, %.3f API requests per admission", pods, elapsed.Round(time.Millisecond),
		float64(pods)/elapsed.Seconds(), percentile(latencies, 0.5), percentile(latencies, 0.99), float64(requests.Load())/pods)
}

// BenchmarkPodAdmission times the burst of 1000 pods: latency of a pod's
// creation as the client sees it, p50 and p99.
func BenchmarkPodAdmission(b *testing.B) {
	const pods, parallel = 1000, 16
	requests := serveCachedWebhook(b)
	for range b.N {
		b.StopTimer()
		before := requests.Load()
		latencies, elapsed, _, err := burst(b, pods, parallel, b)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(requests.Load()-before)/pods, "api-requests/pod")
		b.ReportMetric(percentile(latencies, 0.5), "p50-ms")
		b.ReportMetric(percentile(latencies, 0.99), "p99-ms")
		b.ReportMetric(float64(pods)/elapsed.Seconds(), "pods/s")
	}
}

// BenchmarkReconcile100kShards times one reconcile of a dataset whose
// index lists 100 000 shards in MinIO: read the index, plan, apply the
// plan ConfigMap, write the status.
func BenchmarkReconcile100kShards(b *testing.B) {
	const shards = 100_000
	ctx := context.Background()
	bucket := minioServer.Bucket(b)
	st, err := stores.Open(ctx, store.Source{URI: "s3://" + bucket + "/big/", Endpoint: minioServer.URL(), Insecure: true,
		CredentialsDir: minioServer.CredentialsDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: "parquet", Shards: make([]indexfile.Entry, shards)}
	for i := range f.Shards {
		f.Shards[i] = indexfile.Entry{Name: fmt.Sprintf("part-%06d.parquet#0", i), Object: fmt.Sprintf("part-%06d.parquet", i),
			Offset: 4, Length: 64 << 20, Samples: 10_000, Hash: fmt.Sprintf("xxh64:%016x", i), ObjectSize: 64<<20 + 1024}
	}
	if err := index.Write(ctx, st, f); err != nil {
		b.Fatal(err)
	}
	ns := apiServer.Namespace(b)
	ds := dataset(ns, "s3://"+bucket+"/big/", "", 64, 4096)
	ds.Spec.Streams[0].Format = datav1alpha1.FormatParquet // the index's
	ds.Spec.Streams[0].Source.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: "s3"}
	credentialsSecret(b, ns, "s3", minioServer.AccessKey, minioServer.SecretKey)
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		b.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(apiServer.Config)
	if err != nil {
		b.Fatal(err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	stop := make(chan struct{})
	broadcaster.StartRecordingToSink(stop)
	defer close(stop)
	r := &controllers.TrainingDatasetReconciler{Client: apiServer.Client, APIReader: apiServer.Client,
		Recorder: broadcaster.NewRecorder(apiServer.Scheme, "shardfeed-bench")}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: ds.Name}}
	b.ResetTimer()
	for range b.N {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var got datav1alpha1.TrainingDataset
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(ds), &got); err != nil {
		b.Fatal(err)
	}
	if got.Status.Samples != shards*10_000 || got.Status.Streams[0].Shards != shards {
		b.Fatalf("status after reconcile: %d samples, %+v, conditions %+v", got.Status.Samples, got.Status.Streams, got.Status.Conditions)
	}
	var cm corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(ds.Name)}, &cm); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cm.Size()), "plan-configmap-bytes")
}
