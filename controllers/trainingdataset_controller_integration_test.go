//go:build integration

package controllers_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/planner"
	"github.com/shardfeed/shardfeed/sidecar/sampledata"
)

var (
	apiServer   *testenv.APIServer
	minioServer *testenv.MinIO
)

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServerWithWebhooks(envtest.WebhookInstallOptions{
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{podWebhookConfiguration()},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{datasetWebhookConfiguration()},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.RunWithMinIO(m, &minioServer)
	if cli != "" { // the CLI the indexing tests built
		_ = os.RemoveAll(filepath.Dir(cli))
	}
	_ = apiServer.Stop()
	os.Exit(code)
}

// startManager runs the operator's controllers in the test process until
// the test ends.
func startManager(t *testing.T) { startManagerLogging(t, logr.Discard()) }

// startManagerLogging is startManager with the manager's logs to log;
// configure, if given, adjusts the reconciler before it starts.
func startManagerLogging(t *testing.T, log logr.Logger, configure ...func(*controllers.TrainingDatasetReconciler)) {
	t.Helper()
	runManager(t, apiServer.Config, log, configure...)
}

// runManager is startManagerLogging acting with the identity of cfg.
func runManager(t *testing.T, cfg *rest.Config, log logr.Logger, configure ...func(*controllers.TrainingDatasetReconciler)) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:  log,
		Scheme:  apiServer.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Two minutes, not the default 30 s, to stop; one that outlives two
		// minutes has hung, which is what this checks. The hang seen under
		// make test's load (no goroutine of shardfeed's left, the priority
		// queue's hand-out blocked holding its lock) was
		// controller-runtime#3538: the controller uses the classic queue.
		GracefulShutdownTimeout: ptr.To(2 * time.Minute),
		// Each test runs its own manager in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      controllers.CacheOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controllers.TrainingDatasetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("shardfeed-operator"), UnreachableRetry: 200 * time.Millisecond,
		// These tests' datasets read MinIO with the test's own credentials
		// where they name no Secret (the manager binary's tests check the
		// default, which allows no namespace).
		Policy:     controllers.StorePolicy{AmbientNamespaces: []string{"*"}},
		IndexImage: "ghcr.io/shardfeed/shardfeed:test"}
	for _, c := range configure {
		c(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			// A runnable that outlived the grace period: say where it was
			// (the manager's own logs are discarded).
			var stacks bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			t.Errorf("manager: %v\nthe goroutines in shardfeed's, controller-runtime's and client-go's code then:\n%s", err, shardfeedStacks(stacks.String()))
		}
	})
}

// shardfeedStacks keeps the goroutine profile's entries that pass through
// shardfeed's own packages, or the manager's (a runnable of
// controller-runtime's that outlived the grace, twice seen with none of
// shardfeed's left).
func shardfeedStacks(profile string) string {
	var keep []string
	for _, entry := range strings.Split(profile, "\n\n") {
		if strings.Contains(entry, "github.com/shardfeed/shardfeed/") || strings.Contains(entry, "sigs.k8s.io/controller-runtime/") ||
			strings.Contains(entry, "k8s.io/client-go/") {
			keep = append(keep, entry)
		}
	}
	return strings.Join(keep, "\n\n")
}

// mdsStream writes n samples as MDS to a fresh bucket and returns its URI.
func mdsStream(t *testing.T, n int) (uri string, idx planner.StreamIndex) {
	t.Helper()
	bucket := minioServer.Bucket(t)
	return "s3://" + bucket + "/m/", putMDS(t, bucket, n)
}

// putMDS writes n samples as MDS under bucket/m/, over what is there.
func putMDS(t *testing.T, bucket string, n int) planner.StreamIndex {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	if err := sampledata.MDS(dir, "m", n, 2000, ""); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, err := minioServer.Client.FPutObject(context.Background(), bucket, "m/"+e.Name(), filepath.Join(dir, e.Name()), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	x, err := index.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func credentialsSecret(t testing.TB, ns, name, key, secret string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(key), "AWS_SECRET_ACCESS_KEY": []byte(secret)}}
	if err := apiServer.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// createDataset creates the dataset "web" in ns over uri, read with
// MinIO's credentials from a Secret.
func createDataset(t *testing.T, ns, uri string, numSplits int32, batch int64) *datav1alpha1.TrainingDataset {
	t.Helper()
	credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
	ds := dataset(ns, uri, "minio", numSplits, batch)
	if err := apiServer.Client.Create(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

func dataset(ns, uri, secret string, numSplits int32, batch int64) *datav1alpha1.TrainingDataset {
	src := datav1alpha1.Source{URI: uri, Endpoint: minioServer.URL(), Insecure: true}
	if secret != "" {
		src.CredentialsSecretRef = &datav1alpha1.SecretReference{Name: secret}
	}
	return &datav1alpha1.TrainingDataset{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: datav1alpha1.TrainingDatasetSpec{
			Streams:   []datav1alpha1.Stream{{Name: "m", Source: src}},
			NumSplits: numSplits, GlobalBatchSize: batch,
		},
	}
}

// waitFor polls the dataset until cond holds, and fails with its status.
func waitFor(t *testing.T, key client.ObjectKey, what string, cond func(*datav1alpha1.TrainingDataset) bool) *datav1alpha1.TrainingDataset {
	t.Helper()
	var ds datav1alpha1.TrainingDataset
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := apiServer.Client.Get(context.Background(), key, &ds); err == nil && cond(&ds) {
			return &ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: status %+v", what, ds.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func condition(ds *datav1alpha1.TrainingDataset, typ string) *metav1.Condition {
	return meta.FindStatusCondition(ds.Status.Conditions, typ)
}

func TestIntegrationDatasetConvergesToReadyWithItsPlanConfigMap(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	uri, idx := mdsStream(t, 900)
	ds := createDataset(t, ns, uri, 6, 12)
	got := waitFor(t, client.ObjectKeyFromObject(ds), "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && d.Status.ObservedGeneration == d.Generation
	})
	// What the operator computed is what `shardfeed plan` and the sidecars compute.
	params, err := planspec.Params(&got.Spec, []planner.StreamIndex{idx})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := planner.New(params)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.PlanFingerprint != pl.Fingerprint().Sum || got.Status.Samples != 900 {
		t.Fatalf("status %+v, want plan %s and 900 samples", got.Status, pl.Fingerprint().Sum)
	}
	if len(got.Status.Streams) != 1 || got.Status.Streams[0].Shards != int64(len(idx.Shards)) || got.Status.Streams[0].Bytes != idx.Bytes() {
		t.Fatalf("stream totals %+v", got.Status.Streams)
	}
	for _, typ := range []string{datav1alpha1.ConditionIndexResolved, datav1alpha1.ConditionReady} {
		if c := condition(got, typ); c == nil || c.ObservedGeneration != got.Generation {
			t.Fatalf("condition %s: %+v", typ, c)
		}
	}
	var cm corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-plan"}, &cm); err != nil {
		t.Fatal(err)
	}
	if got.Status.PlanConfigMap != "web-plan" || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != got.UID {
		t.Fatalf("plan ConfigMap %s owned by %+v", got.Status.PlanConfigMap, cm.OwnerReferences)
	}
	plan, err := configmaps.PlanFromData(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Fingerprint.Sum != pl.Fingerprint().Sum || plan.Streams[0].ContentHash != idx.ContentHash() || plan.Spec.NumSplits != 6 {
		t.Fatalf("plan ConfigMap %+v", plan)
	}
	if plan.MaxShardBytes() != idx.MaxShardBytes() || idx.MaxShardBytes() == 0 {
		t.Errorf("plan's largest shard: %d bytes, the index's %d", plan.MaxShardBytes(), idx.MaxShardBytes())
	}
	ep, _ := pl.Epoch(0)
	for _, pods := range []int{1, 2, 3, 6} {
		want, _ := ep.MinCacheBytes(pods, int(datav1alpha1.DefaultPrefetch))
		if plan.MinCacheBytes[pods] != want {
			t.Fatalf("min cache for %d pods: %d, want %d", pods, plan.MinCacheBytes[pods], want)
		}
	}
	if strings.Contains(cm.Data[configmaps.KeySpec], minioServer.SecretKey) {
		t.Fatal("the plan ConfigMap holds the secret key")
	}

	// A job commits: its state ConfigMap shows in status.jobs.
	now := time.Now().UTC().Truncate(time.Second)
	data, _ := configmaps.StateData(&configmaps.State{Dataset: "web", Job: "train-1", Epoch: 2, Step: 17, Committed: &now})
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("web", "train-1"), Namespace: ns,
		Labels: configmaps.JobLabels("web", "train-1"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(got, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}},
		Data: data}
	if err := apiServer.Client.Create(ctx, state); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, client.ObjectKeyFromObject(ds), "the job's progress", func(d *datav1alpha1.TrainingDataset) bool {
		return len(d.Status.Jobs) == 1 && d.Status.Jobs[0].Step == 17
	})
	if j := got.Status.Jobs[0]; j.Job != "train-1" || j.Epoch != 2 || j.LastCommitTime == nil || !j.LastCommitTime.Time.Equal(now) {
		t.Fatalf("job %+v", j)
	}

	// A sidecar skipped a corrupt shard (onCorruptShard: skip): the status
	// counts it and a Warning event names it.
	data, _ = configmaps.StateData(&configmaps.State{Dataset: "web", Job: "train-1", Epoch: 2, Step: 17, Committed: &now,
		Skipped:       []configmaps.SkippedShard{{Stream: "m", Shard: "shard.00003.mds", Samples: 41, Reason: "xxh64 mismatch", Time: now}},
		SkippedShards: 1, SkippedSamples: 41})
	state.Data = data
	if err := apiServer.Client.Update(ctx, state); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, client.ObjectKeyFromObject(ds), "the skipped shard in status", func(d *datav1alpha1.TrainingDataset) bool {
		return len(d.Status.Jobs) == 1 && d.Status.Jobs[0].SkippedShards == 1
	})
	if j := got.Status.Jobs[0]; j.SkippedSamples != 41 {
		t.Fatalf("job %+v: want 41 skipped samples", j)
	}
	// The job's sidecars reported what they read: status.jobs shows it,
	// with the share of shard bytes that came from the node cache.
	data, _ = configmaps.StateData(&configmaps.State{Dataset: "web", Job: "train-1", Epoch: 2, Step: 17, Committed: &now,
		SkippedShards: 1, SkippedSamples: 41, Reads: &configmaps.Reads{StoreBytes: 1 << 20, NodeCacheHits: 12, NodeCacheBytes: 3 << 20, NodeCacheMisses: 2}})
	state.Data = data
	if err := apiServer.Client.Update(ctx, state); err != nil {
		t.Fatal(err)
	}
	got = waitFor(t, client.ObjectKeyFromObject(ds), "the job's reads in status", func(d *datav1alpha1.TrainingDataset) bool {
		return len(d.Status.Jobs) == 1 && d.Status.Jobs[0].Reads != nil
	})
	if r := got.Status.Jobs[0].Reads; *r != (datav1alpha1.JobReads{StoreBytes: 1 << 20, NodeCacheHits: 12, NodeCacheBytes: 3 << 20, NodeCacheMisses: 2, NodeCacheShare: "75.0%"}) {
		t.Fatalf("status.jobs[0].reads = %+v, want the state's with 75.0%% from the node", *r)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var events eventsv1.EventList
		if err := apiServer.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range events.Items {
			found = found || (e.Reason == datav1alpha1.ReasonShardSkipped && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "m/shard.00003.mds (41 samples: xxh64 mismatch)"))
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Warning event %s naming the shard: %+v", datav1alpha1.ReasonShardSkipped, events.Items)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A job's state changes with each commit and each job's first pod; the
// reconcile it wakes gathers status.jobs from the cache and reads no index
// (at a cluster's scale, re-reading and re-planning on every commit was
// most of the manager's CPU). The plan is still applied again when its
// ConfigMap goes or is changed.
func TestIntegrationJobsProgressDoesNotReadTheIndexAgain(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	uri, _ := mdsStream(t, 300)
	ds := createDataset(t, ns, uri, 2, 10)
	key := client.ObjectKeyFromObject(ds)
	got := waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && d.Status.ObservedGeneration == d.Generation
	})
	planKey := client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(ds.Name)}
	var plan corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, planKey, &plan); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the reconciles of the dataset's creation are over
	plans := testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name))

	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("web", "train"), Namespace: ns,
		Labels: configmaps.JobLabels("web", "train"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(got, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}}}
	for step := int64(1); step <= 5; step++ {
		state.Data, _ = configmaps.StateData(&configmaps.State{Dataset: "web", Job: "train", Step: step})
		var err error
		if step == 1 {
			err = apiServer.Client.Create(ctx, state)
		} else {
			err = apiServer.Client.Update(ctx, state)
		}
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, key, fmt.Sprintf("step %d in status.jobs", step), func(d *datav1alpha1.TrainingDataset) bool {
			return len(d.Status.Jobs) == 1 && d.Status.Jobs[0].Step == step
		})
	}
	if n := testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name)) - plans; n != 0 {
		t.Errorf("5 changes of a job's state read the index and planned %v times, want 0", n)
	}

	// The plan ConfigMap changed by someone, then deleted: applied again.
	tampered := plan.DeepCopy()
	tampered.Data[configmaps.KeyMinCache] = `{"1":1}`
	if err := apiServer.Client.Update(ctx, tampered); err != nil {
		t.Fatal(err)
	}
	planIs := func(what string, want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var cm corev1.ConfigMap
			err := apiServer.Client.Get(ctx, planKey, &cm)
			if err == nil && maps.Equal(cm.Data, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the plan ConfigMap is %v (%v), want it as the operator wrote it", what, cm.Data, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	planIs("changed by someone", plan.Data)
	if err := apiServer.Client.Delete(ctx, &plan); err != nil {
		t.Fatal(err)
	}
	planIs("deleted", plan.Data)
	if n := testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name)) - plans; n < 2 {
		t.Errorf("the plan ConfigMap changed and deleted: planned %v times, want at least 2", n)
	}
}

// An index written again in place (`shardfeed index` run after the data
// changed) is read within the recheck interval, with no change to the
// dataset: the status and the plan ConfigMap say the new totals.
func TestIntegrationARewrittenIndexIsReadAgain(t *testing.T) {
	startManagerLogging(t, logr.Discard(), func(r *controllers.TrainingDatasetReconciler) { r.IndexRecheck = time.Second })
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	putMDS(t, bucket, 300)
	ds := createDataset(t, ns, "s3://"+bucket+"/m/", 2, 10)
	key := client.ObjectKeyFromObject(ds)
	first := waitFor(t, key, "300 samples", func(d *datav1alpha1.TrainingDataset) bool { return d.Status.Samples == 300 })
	// Unchanged, the index is read again at each recheck; the plan stands.
	// (Waited for, not timed: a loaded machine reconciles late.)
	plans := testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name))
	read := func() float64 {
		return testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name)) - plans
	}
	for deadline := time.Now().Add(30 * time.Second); read() < 2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if n := read(); n < 2 {
		t.Errorf("in 30 s with a recheck every second, the index was read %v times, want it read again and again", n)
	}
	if again := waitFor(t, key, "Ready", func(d *datav1alpha1.TrainingDataset) bool { return d.Status.Samples == 300 }); again.Status.PlanFingerprint != first.Status.PlanFingerprint {
		t.Fatalf("an unchanged index changed the plan: %s, was %s", again.Status.PlanFingerprint, first.Status.PlanFingerprint)
	}
	idx := putMDS(t, bucket, 500)
	got := waitFor(t, key, "500 samples", func(d *datav1alpha1.TrainingDataset) bool { return d.Status.Samples == 500 })
	if got.Status.PlanFingerprint == first.Status.PlanFingerprint {
		t.Fatalf("a new index and the same plan fingerprint %s", got.Status.PlanFingerprint)
	}
	var cm corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(ds.Name)}, &cm); err != nil {
		t.Fatal(err)
	}
	plan, err := configmaps.PlanFromData(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Fingerprint.Sum != got.Status.PlanFingerprint || plan.Streams[0].ContentHash != idx.ContentHash() {
		t.Fatalf("plan ConfigMap %s over %s, want %s over %s", plan.Fingerprint.Sum, plan.Streams[0].ContentHash, got.Status.PlanFingerprint, idx.ContentHash())
	}
}

// The sidecars verify the progress endpoint with the CA bundle of their
// plan ConfigMap: when the operator's CA changes (a rotation), every plan
// carries the new bundle without any change to the datasets.
func TestIntegrationANewOperatorCAReachesEveryPlan(t *testing.T) {
	var ca atomic.Value
	ca.Store("ca-1")
	var r *controllers.TrainingDatasetReconciler
	startManagerLogging(t, logr.Discard(), func(rec *controllers.TrainingDatasetReconciler) {
		rec.OperatorCA = func() string { return ca.Load().(string) }
		r = rec
	})
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	uri, _ := mdsStream(t, 100)
	credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
	var names []string
	for _, name := range []string{"one", "two"} {
		ds := dataset(ns, uri, "minio", 2, 10)
		ds.Name = name
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		names = append(names, configmaps.PlanName(name))
	}
	planCA := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for _, name := range names {
			for {
				var cm corev1.ConfigMap
				err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm)
				if err == nil && cm.Data[configmaps.KeyOperatorCA] == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("plan %s carries CA %q (%v), want %q", name, cm.Data[configmaps.KeyOperatorCA], err, want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	planCA("ca-1")
	ca.Store("ca-1\nca-2")
	r.OperatorCAChanged()
	r.OperatorCAChanged() // a second call while one is pending neither blocks nor is needed
	planCA("ca-1\nca-2")
}

func TestIntegrationDatasetReportsUnreachableIndexesAndRecovers(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	uri, _ := mdsStream(t, 300)
	tests := []struct {
		name   string
		setup  func(ns string) *datav1alpha1.TrainingDataset
		reason string
		says   []string
	}{
		{"missing Secret", func(ns string) *datav1alpha1.TrainingDataset { return dataset(ns, uri, "nope", 2, 4) },
			datav1alpha1.ReasonCredentials, []string{"Secret", "/nope", "does not exist", "AWS_ACCESS_KEY_ID"}},
		{"wrong credentials", func(ns string) *datav1alpha1.TrainingDataset {
			credentialsSecret(t, ns, "bad", "someone", "wrong-secret-key")
			return dataset(ns, uri, "bad", 2, 4)
		}, datav1alpha1.ReasonIndexUnreachable, []string{"403", "index.json"}},
		{"missing bucket", func(ns string) *datav1alpha1.TrainingDataset {
			credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
			return dataset(ns, "s3://no-such-bucket-here/m/", "minio", 2, 4)
		}, datav1alpha1.ReasonIndexUnreachable, []string{"no-such-bucket-here"}},
		{"a plan ConfigMap's name taken", func(ns string) *datav1alpha1.TrainingDataset {
			credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
			squatter := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-plan", Namespace: ns}, Data: map[string]string{"mine": "yes"}}
			if err := apiServer.Client.Create(ctx, squatter); err != nil {
				t.Fatal(err)
			}
			return dataset(ns, uri, "minio", 2, 4)
		}, datav1alpha1.ReasonConfigMapNotOwned, []string{"ConfigMap", "/web-plan", "never adopts"}},
		{"a plan with no batch", func(ns string) *datav1alpha1.TrainingDataset {
			credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
			return dataset(ns, uri, "minio", 300, 600)
		}, datav1alpha1.ReasonInvalidPlan, []string{"cannot be planned"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := apiServer.Namespace(t)
			ds := tt.setup(ns)
			if err := apiServer.Client.Create(ctx, ds); err != nil {
				t.Fatal(err)
			}
			got := waitFor(t, client.ObjectKeyFromObject(ds), tt.reason, func(d *datav1alpha1.TrainingDataset) bool {
				c := condition(d, datav1alpha1.ConditionDegraded)
				return c != nil && c.Reason == tt.reason
			})
			c := condition(got, datav1alpha1.ConditionDegraded)
			if c.Status != metav1.ConditionTrue {
				t.Fatalf("Degraded %+v", c)
			}
			for _, s := range tt.says {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q does not say %q", c.Message, s)
				}
			}
			if r := condition(got, datav1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse {
				t.Fatalf("Ready %+v", r)
			}
			if strings.Contains(c.Message, "wrong-secret-key") {
				t.Fatal("a condition shows the secret key")
			}
			if tt.reason == datav1alpha1.ReasonConfigMapNotOwned {
				var cm corev1.ConfigMap
				if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-plan"}, &cm); err != nil || len(cm.Data) != 1 || len(cm.OwnerReferences) != 0 {
					t.Errorf("the ConfigMap that was in the way was changed: %+v, %v", cm, err)
				}
			}
		})
	}

	// Level-based: the credentials arrive later, and the dataset converges.
	ns := apiServer.Namespace(t)
	ds := dataset(ns, uri, "late", 2, 4)
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	waitFor(t, client.ObjectKeyFromObject(ds), "CredentialsMissing", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionIndexResolved)
		return c != nil && c.Reason == datav1alpha1.ReasonCredentials
	})
	credentialsSecret(t, ns, "late", minioServer.AccessKey, minioServer.SecretKey)
	waitFor(t, client.ObjectKeyFromObject(ds), "Ready after the Secret came", func(d *datav1alpha1.TrainingDataset) bool {
		c := condition(d, datav1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	})
}

// A compact index is planned from its header and sample counts: the
// reconcile of a dataset that orders its samples at random reads a small
// part of it (shardfeed_dataset_index_read_bytes_total counts what it
// read), and one that needs every shard's entry to plan (stratified
// batching) reads it whole. Both plan every sample.
func TestIntegrationACompactIndexIsPlannedFromItsHeader(t *testing.T) {
	startManager(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	bucket := minioServer.Bucket(t)
	const shards = 20000
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: datav1alpha1.FormatParquet, Shards: make([]indexfile.Entry, shards)}
	var samples int64
	for h := range f.Shards {
		n := int64(100 + h%7)
		samples += n
		f.Shards[h] = indexfile.Entry{Name: fmt.Sprintf("part-%05d.parquet#0", h), Object: fmt.Sprintf("part-%05d.parquet", h),
			Offset: 4, Length: 4000, Samples: n, Hash: fmt.Sprintf("xxh64:%016x", h), ObjectSize: 5000}
	}
	data, err := compact.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := minioServer.Client.PutObject(ctx, bucket, "c/"+compact.Key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := compact.NewReader(int64(len(data)), func(off, n int64) ([]byte, error) { return data[off : off+n], nil }, 0)
	if err != nil {
		t.Fatal(err)
	}
	header := r.BytesRead()
	credentialsSecret(t, ns, "minio", minioServer.AccessKey, minioServer.SecretKey)
	for _, tc := range []struct {
		name     string
		batching datav1alpha1.Batching
		most     int64 // bytes of the index a reconcile may read
		least    int64
	}{
		{"random", datav1alpha1.BatchingRandom, header + 64<<10, 1},
		{"stratified", datav1alpha1.BatchingStratified, int64(len(data)) + 64<<10, int64(len(data))},
	} {
		ds := dataset(ns, "s3://"+bucket+"/c/", "minio", 8, 64)
		ds.Name = tc.name
		ds.Spec.Streams[0].Format = datav1alpha1.FormatParquet
		ds.Spec.Batching = tc.batching
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, client.ObjectKeyFromObject(ds), "Ready", func(d *datav1alpha1.TrainingDataset) bool {
			c := condition(d, datav1alpha1.ConditionReady)
			return c != nil && c.Status == metav1.ConditionTrue && d.Status.ObservedGeneration == d.Generation
		})
		if got.Status.Samples != samples || len(got.Status.Streams) != 1 || got.Status.Streams[0].Shards != shards {
			t.Errorf("%s: planned %d samples, streams %+v; want %d samples in %d shards", tc.name, got.Status.Samples, got.Status.Streams, samples, shards)
		}
		// A reconcile counts its plan before its reads: poll until the
		// reconciles of the dataset's creation are over.
		var plans, requests float64
		var read, perPlan int64
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			plans = testutil.ToFloat64(controllers.DatasetPlans.WithLabelValues(ns, ds.Name))
			read = int64(testutil.ToFloat64(controllers.DatasetIndexReadBytes.WithLabelValues(ns, ds.Name)))
			requests = testutil.ToFloat64(controllers.DatasetIndexReadRequests.WithLabelValues(ns, ds.Name))
			if perPlan = read / int64(max(plans, 1)); perPlan <= tc.most && perPlan >= tc.least && requests >= plans {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v planning reconciles read %d bytes of an index of %d (its header %d) in %v requests: %d each, want %d to %d",
					tc.name, plans, read, len(data), header, requests, perPlan, tc.least, tc.most)
			}
		}
		t.Logf("%s: %v planning reconcile(s) read %d bytes of an index of %d (its header %d) in %v requests", tc.name, plans, read, len(data), header, requests)
	}
}
