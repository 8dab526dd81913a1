//go:build integration

package scale_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/store/stores"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// scenario is what one run creates.
type scenario struct {
	nodes, namespaces, datasets int
	// Jobs the cluster's controllers run: Indexed Jobs' completions,
	// StatefulSets' replicas, JobSets' replicated Jobs × completions.
	indexed, statefulSets []int
	jobSets               [][2]int
	// paced Jobs' pods are created by the load generator, as a Job
	// controller does, at rate per second, each creation timed.
	paced []int
	rate  float64
	// commitFor is how long the jobs' rank 0s commit (every 100 steps at
	// 1 step/s, as real jobs do).
	commitFor time.Duration
	// Unrelated objects in the cluster, which the manager must not cache.
	unrelatedConfigMaps, unrelatedJobs int
}

func (s scenario) pods() int {
	var n int
	for _, p := range slices.Concat(s.indexed, s.statefulSets, s.paced) {
		n += p
	}
	for _, j := range s.jobSets {
		n += j[0] * j[1]
	}
	return n
}

// numSplits divides every job's world (powers of two up to 1024 pods of
// one process).
const numSplits = 1024

var (
	// short is make test's: every kind of job and phase of the full run
	// at 528 pods (its figures in docs/benchmarks.md).
	short = scenario{nodes: 100, namespaces: 5, datasets: 10, indexed: []int{128, 64, 8, 8, 8, 8}, statefulSets: []int{32, 16},
		jobSets: [][2]int{{2, 32}}, paced: []int{128, 64}, rate: 100, commitFor: 10 * time.Second}
	fullScenario = scenario{nodes: 1000, namespaces: 20, datasets: 100,
		indexed:      []int{1024, 512, 512, 256, 256, 256, 256, 128, 128, 128, 128, 128, 128, 128, 128, 64, 64, 64, 64, 64, 64, 64, 64, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8},
		statefulSets: []int{256, 256, 128, 128, 128, 128}, jobSets: [][2]int{{4, 256}, {8, 64}},
		paced: []int{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}, rate: 100, commitFor: 2 * time.Minute, unrelatedConfigMaps: 20000, unrelatedJobs: 2000}
)

// launched is a job the scenario started, and what its pods must say.
type launched struct {
	ns, name, dataset string
	kind              string // Job, StatefulSet, JobSet
	pods              int
	job               string // shardfeed's job identity
	uid               string
	completions       int // per Job of a JobSet
}

func TestIntegrationScale(t *testing.T) {
	sc := short
	if full {
		sc = fullScenario
	}
	ctx := context.Background()
	c := apiServer.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil {
		t.Fatal(err)
	}
	unrelated(t, sc)
	began := time.Now()
	step := func(what string) { t.Logf("%6.1f s: %s", time.Since(began).Seconds(), what) }
	// The webhook configuration exists before the replicas start, as the
	// chart installs it: they publish their CA into it as they start.
	addr := listen(t)
	installWebhooks(t, addr.Addr().String())
	reps := startReplicas(t, 2, addr)
	waitCABundle(t)
	step("2 manager replicas ready")

	// Datasets over one index in MinIO, in namespaces of their own.
	uri := writeIndex(t)
	var namespaces []string
	for i := range sc.namespaces {
		ns := fmt.Sprintf("team-%d", i)
		namespaces = append(namespaces, ns)
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
			Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(minioServer.AccessKey), "AWS_SECRET_ACCESS_KEY": []byte(minioServer.SecretKey)}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var datasets []client.ObjectKey
	for i := range sc.datasets {
		key := client.ObjectKey{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("data-%d", i)}
		datasets = append(datasets, key)
		if err := c.Create(ctx, newDataset(key, uri, "64Gi")); err != nil {
			t.Fatal(err)
		}
	}
	waitDatasetsReady(t, datasets)
	readyIn := time.Since(start)
	t.Logf("%d datasets in %d namespaces ready (planned, plan ConfigMap written) in %s", sc.datasets, sc.namespaces, readyIn.Round(time.Millisecond))

	// The paced Jobs alone: pods created at sc.rate per second, each
	// creation timed.
	before := snapshot(t, reps)
	var paced []launched
	for i, n := range sc.paced {
		paced = append(paced, createPacedJob(t, datasets[(i+7)%len(datasets)], fmt.Sprintf("paced-%d", i), n))
	}
	latencies, pacing := pace(t, paced, sc.rate)
	pacedPods := waitPodsBound(t, namespaces, podsOf(paced))
	afterPaced := snapshot(t, reps)
	step("paced pods on nodes")

	// Then a burst: every other job at once, their pods made by the
	// cluster's controllers.
	burst := time.Now()
	var jobs []launched
	for i, n := range sc.indexed {
		ds := datasets[i%len(datasets)]
		jobs = append(jobs, createIndexedJob(t, ds, fmt.Sprintf("train-%d", i), n, ""))
	}
	indexed := slices.Clone(jobs)
	for i, n := range sc.statefulSets {
		ds := datasets[(i+3)%len(datasets)]
		jobs = append(jobs, createStatefulSet(t, ds, fmt.Sprintf("sts-%d", i), n))
	}
	for i, js := range sc.jobSets {
		ds := datasets[(i+5)%len(datasets)]
		jobs = append(jobs, createJobSet(t, ds, fmt.Sprintf("jobset-%d", i), js[0], js[1]))
	}
	pods := waitPodsBound(t, namespaces, sc.pods())
	afterBurst := snapshot(t, reps)
	burstTook := time.Since(burst)
	jobs = append(jobs, paced...)
	checkWiring(t, jobs, pods)
	t.Logf("%d pods admitted and bound to %d simulated nodes (%d paced, then %d in a burst in %s)", len(pods), countNodes(pods),
		len(pacedPods), len(pods)-len(pacedPods), burstTook.Round(time.Millisecond))
	for _, ph := range []struct {
		name          string
		before, after counters
		jobs, pods    int
	}{{"paced", before, afterPaced, len(paced), len(pacedPods)}, {"burst", afterPaced, afterBurst, len(jobs) - len(paced), len(pods) - len(pacedPods)}} {
		n := ph.after.admissions - ph.before.admissions
		if want := float64(ph.pods); n < want {
			t.Errorf("%s: the replicas served %.0f pod admissions for %.0f pods", ph.name, n, want)
		}
		// One GET of the pod's owner each, and a few more for each job's
		// first pods (its state's creation, raced by the pods in flight).
		if req := ph.after.webhookRequests - ph.before.webhookRequests; req > n+16*float64(ph.jobs) {
			t.Errorf("%s: the webhook made %.0f API requests for %.0f admissions of %d jobs, want one per admission and a few per job", ph.name, req, n, ph.jobs)
		}
	}

	step("paced pods and the burst admitted and bound")
	// A job of 512 pods gets the cache check of a small one.
	checkLargeJobCacheLimit(t, namespaces[0], uri)

	// Registrations (one per sidecar start) and commits (rank 0 every 100
	// steps at 1 step/s).
	step("a 512-pod job's cache check")
	gen := &loadGenerator{addr: addr.Addr().String(), ca: operatorCA(t)}
	regStart := time.Now()
	beforeWrites := configMapWrites(t)
	registered := gen.registerAll(t, pods, datasets)
	regTook := time.Since(regStart)
	writesDuringRegistration := configMapWrites(t) - beforeWrites
	beforeCommits := configMapWrites(t)
	commits, statusLags := gen.commit(t, jobs, pods, sc.commitFor)
	slices.Sort(statusLags)
	commitWrites := configMapWrites(t) - beforeCommits
	step("registrations and commits")
	if len(gen.errs) > 0 {
		t.Fatalf("%d progress calls failed, the first: %v", len(gen.errs), gen.errs[0])
	}

	// A wave of rescales: every Indexed Job is deleted and made again with
	// half its pods and the same shardfeed.io/job, all at once: each job's
	// state survives, its new attempt gets the next generation.
	beforeWave := snapshot(t, reps)
	wave := rescaleWave(t, indexed)
	afterWave := snapshot(t, reps)
	step("rescale wave")
	if n := afterWave.admissions - beforeWave.admissions; n < float64(wave.pods) {
		t.Errorf("rescale wave: the replicas served %.0f admissions for %d pods", n, wave.pods)
	}

	// Deleting the datasets deletes everything the operator made for them.
	gone := deleteDatasets(t, namespaces)
	step("datasets deleted")

	use := measure(t, reps)
	slices.Sort(latencies)
	r := report{sc: sc, paced: phase(before, afterPaced), burst: phase(afterPaced, afterBurst), peak: use.maxPeak(),
		p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), pacedRate: float64(len(latencies)) / pacing.Seconds(),
		burstPods: len(pods) - len(pacedPods), burstTook: burstTook,
		registrations: registered, regTook: regTook, regWrites: writesDuringRegistration, commits: commits, commitWrites: commitWrites,
		wave: wave, waveCost: phase(beforeWave, afterWave), gone: gone, readyIn: readyIn,
		statusP50: percentile(statusLags, 0.5), statusMax: percentile(statusLags, 1)}
	r.log(t)
}

func podsOf(jobs []launched) int {
	n := 0
	for _, j := range jobs {
		n += j.pods
	}
	return n
}

// writeIndex writes a shardfeed index of 64 shards into a bucket of MinIO
// (the objects themselves are never read: no sidecar runs).
func writeIndex(t *testing.T) string {
	t.Helper()
	bucket := minioServer.Bucket(t)
	uri := "s3://" + bucket + "/tokens/"
	st, err := stores.Open(context.Background(), store.Source{URI: uri, Endpoint: minioServer.URL(), Insecure: true, CredentialsDir: minioServer.CredentialsDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: "parquet", Shards: make([]indexfile.Entry, 64)}
	for i := range f.Shards {
		f.Shards[i] = indexfile.Entry{Name: fmt.Sprintf("part-%03d.parquet#0", i), Object: fmt.Sprintf("part-%03d.parquet", i),
			Offset: 4, Length: 64 << 20, Samples: 65536, Hash: fmt.Sprintf("xxh64:%016x", i), ObjectSize: 64<<20 + 1024}
	}
	if err := index.Write(context.Background(), st, f); err != nil {
		t.Fatal(err)
	}
	return uri
}

func newDataset(key client.ObjectKey, uri, cacheLimit string) *datav1alpha1.TrainingDataset {
	return &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "tokens", Format: datav1alpha1.FormatParquet, Source: datav1alpha1.Source{URI: uri, Endpoint: minioServer.URL(), Insecure: true,
			CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}}}},
		NumSplits: numSplits, GlobalBatchSize: 4 * numSplits,
		Sidecar: datav1alpha1.SidecarSpec{CacheLimit: ptr.To(resource.MustParse(cacheLimit))},
	}}
}

func waitDatasetsReady(t *testing.T, keys []client.ObjectKey) {
	t.Helper()
	waitUntil(t, 3*time.Minute, "the datasets to be ready", func() (bool, string) {
		for _, k := range keys {
			var ds datav1alpha1.TrainingDataset
			if err := apiServer.Client.Get(context.Background(), k, &ds); err != nil {
				return false, err.Error()
			}
			if c := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return false, fmt.Sprintf("%s: %+v", k, ds.Status.Conditions)
			}
		}
		return true, ""
	})
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %s", timeout, what, why)
		}
		time.Sleep(time.Second)
	}
}

// podTemplate is a training pod on the simulated nodes.
func podTemplate(dataset string, labels, annotations map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	l := map[string]string{inject.LabelDataset: dataset}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: annotations}, Spec: corev1.PodSpec{
		Containers:    []corev1.Container{{Name: "trainer", Image: "pytorch"}},
		RestartPolicy: restart, NodeSelector: map[string]string{testenv.KWOKNodeLabel: testenv.KWOKNodeValue},
		Tolerations: []corev1.Toleration{testenv.KWOKToleration()},
	}}
}

func indexedJob(ds client.ObjectKey, name string, pods int, job string) *batchv1.Job {
	var a map[string]string
	if job != "" {
		a = map[string]string{inject.AnnotationJob: job}
	}
	n := int32(pods) //nolint:gosec // a scenario's size
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace}, Spec: batchv1.JobSpec{
		Completions: &n, Parallelism: &n, CompletionMode: ptr.To(batchv1.IndexedCompletion), BackoffLimit: ptr.To[int32](1000),
		Template: podTemplate(ds.Name, nil, a, corev1.RestartPolicyNever)}}
}

func createIndexedJob(t *testing.T, ds client.ObjectKey, name string, pods int, job string) launched {
	t.Helper()
	j := indexedJob(ds, name, pods, job)
	if err := apiServer.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return launched{ns: ds.Namespace, name: name, dataset: ds.Name, kind: "Job", pods: pods, job: cmpOr(job, name), uid: string(j.UID)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func createStatefulSet(t *testing.T, ds client.ObjectKey, name string, pods int) launched {
	t.Helper()
	n := int32(pods) //nolint:gosec // a scenario's size
	sel := map[string]string{"app": name}
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace}, Spec: appsv1.StatefulSetSpec{
		Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: sel}, PodManagementPolicy: appsv1.ParallelPodManagement,
		Template: podTemplate(ds.Name, sel, nil, corev1.RestartPolicyAlways)}}
	if err := apiServer.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return launched{ns: ds.Namespace, name: name, dataset: ds.Name, kind: "StatefulSet", pods: pods, job: name, uid: string(s.UID)}
}

// createJobSet makes a JobSet's child Jobs as JobSet's controller does:
// Indexed Jobs whose pods carry JobSet's labels (the JobSet API itself is
// not installed).
func createJobSet(t *testing.T, ds client.ObjectKey, name string, jobs, completions int) launched {
	t.Helper()
	uid := fmt.Sprintf("jobset-uid-%s-%d", name, rand.Int64())
	for i := range jobs {
		j := indexedJob(ds, fmt.Sprintf("%s-workers-%d", name, i), completions, "")
		l := j.Spec.Template.Labels
		l[jobkind.JobSetName], l[jobkind.JobSetUID], l[jobkind.JobSetRestartAttempt] = name, uid, "0"
		l[jobkind.JobSetJobGlobalIndex], l[jobkind.JobSetGlobalReplicas] = strconv.Itoa(i), strconv.Itoa(jobs)
		l[jobkind.JobSetJobIndex], l[jobkind.JobSetReplicas] = strconv.Itoa(i), strconv.Itoa(jobs)
		if err := apiServer.Client.Create(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	return launched{ns: ds.Namespace, name: name, dataset: ds.Name, kind: "JobSet", pods: jobs * completions, job: name, uid: uid, completions: completions}
}

// pacedManager is the Job controller the paced Job names: the cluster's
// own leaves it to the load generator.
const pacedManager = "scale.shardfeed.io/load-generator"

func createPacedJob(t *testing.T, ds client.ObjectKey, name string, pods int) launched {
	t.Helper()
	j := indexedJob(ds, name, pods, "")
	j.Spec.ManagedBy = ptr.To(pacedManager)
	if err := apiServer.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return launched{ns: ds.Namespace, name: j.Name, dataset: ds.Name, kind: "Job", pods: pods, job: j.Name, uid: string(j.UID)}
}

// pace creates the paced Jobs' pods one Job after the other, rate per
// second, as their controller would, and returns each creation's latency
// (the webhook's admission within it).
func pace(t *testing.T, jobs []launched, rate float64) ([]time.Duration, time.Duration) {
	t.Helper()
	start := time.Now()
	var latencies []time.Duration
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for _, job := range jobs {
		tmpl := indexedJob(client.ObjectKey{Namespace: job.ns, Name: job.dataset}, job.name, job.pods, "").Spec.Template
		for i := range job.pods {
			<-tick.C
			wg.Go(func() {
				idx := strconv.Itoa(i)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", job.name, i), Namespace: job.ns,
					Labels:          map[string]string{inject.LabelDataset: job.dataset, jobkind.JobCompletionIndex: idx, "job-name": job.name},
					Annotations:     map[string]string{jobkind.JobCompletionIndex: idx},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.name, UID: types.UID(job.uid), Controller: ptr.To(true)}}},
					Spec: *tmpl.Spec.DeepCopy()}
				t0 := time.Now()
				err := apiServer.Client.Create(context.Background(), p)
				took := time.Since(t0)
				mu.Lock()
				latencies = append(latencies, took)
				if err != nil {
					failed = err
				}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if failed != nil {
		t.Fatalf("creating a paced pod: %v", failed)
	}
	return latencies, time.Since(start)
}

// waitPodsBound waits until the namespaces hold want training pods, each
// admitted and bound to a simulated node by the scheduler, and returns
// them. (KWOK then marks them running, in its own time: what a pod's
// containers do is not what this harness measures.)
func waitPodsBound(t *testing.T, namespaces []string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	progress := time.Now()
	waitUntil(t, 10*time.Minute, fmt.Sprintf("%d training pods on nodes", want), func() (bool, string) {
		pods = pods[:0]
		running, bound := 0, 0
		for _, ns := range namespaces {
			var list corev1.PodList
			if err := apiServer.Client.List(context.Background(), &list, client.InNamespace(ns), client.HasLabels{inject.LabelDataset}); err != nil {
				return false, err.Error()
			}
			for _, p := range list.Items {
				if p.DeletionTimestamp != nil {
					continue
				}
				pods = append(pods, p)
				if p.Spec.NodeName != "" {
					bound++
				}
				if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
					running++
				}
			}
		}
		why := fmt.Sprintf("%d pods, %d on a node, %d running", len(pods), bound, running)
		if time.Since(progress) > 10*time.Second {
			t.Logf("waiting for %d pods on nodes: %s", want, why)
			progress = time.Now()
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				why += fmt.Sprintf("; pod %s/%s on %q: %s %+v", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
				break
			}
		}
		return len(pods) == want && bound == want, why
	})
	return pods
}

func countNodes(pods []corev1.Pod) int {
	nodes := map[string]bool{}
	for _, p := range pods {
		nodes[p.Spec.NodeName] = true
	}
	return len(nodes)
}

// checkWiring checks that every pod has its sidecar and the rank wiring
// of its job: the job's identity and size, its rank (or where the kubelet
// reads it), an attempt and a generation; and that a job's ranks are each
// taken once.
func checkWiring(t *testing.T, jobs []launched, pods []corev1.Pod) {
	t.Helper()
	byJob := map[string]launched{}
	for _, j := range jobs {
		byJob[j.ns+"/"+j.job] = j
	}
	ranks := map[string]map[int]bool{}
	for i := range pods {
		p := &pods[i]
		if !inject.Injected(p) {
			t.Fatalf("pod %s/%s runs without the sidecar", p.Namespace, p.Name)
		}
		cfg, err := contract(p)
		if err != nil {
			t.Fatalf("pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		j, ok := byJob[p.Namespace+"/"+cfg.Job]
		if !ok {
			t.Fatalf("pod %s/%s: its sidecar names job %q, which the scenario did not start", p.Namespace, p.Name, cfg.Job)
		}
		rank, err := podRank(p, j, cfg)
		if err != nil {
			t.Fatalf("pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		switch {
		case cfg.Dataset != j.dataset || cfg.RankMode != sidecarconfig.RankModePod || cfg.Pods != j.pods:
			t.Fatalf("pod %s/%s of %s %s (%d pods, dataset %s): the sidecar's contract says dataset %q, rank mode %q, %d pods",
				p.Namespace, p.Name, j.kind, j.name, j.pods, j.dataset, cfg.Dataset, cfg.RankMode, cfg.Pods)
		case cfg.Attempt == "" || cfg.Generation < 1:
			t.Fatalf("pod %s/%s: no attempt or generation (%q, %d)", p.Namespace, p.Name, cfg.Attempt, cfg.Generation)
		}
		key := j.ns + "/" + j.job
		if ranks[key] == nil {
			ranks[key] = map[int]bool{}
		}
		if ranks[key][rank] {
			t.Fatalf("job %s: two pods of rank %d", key, rank)
		}
		ranks[key][rank] = true
	}
}

// contract is what the webhook told the pod's sidecar, with the pod field
// the kubelet will read its rank from.
func contract(p *corev1.Pod) (sidecarconfig.Config, error) {
	c := &p.Spec.InitContainers[0]
	cfg, err := sidecarconfig.FromContainer(c)
	for _, e := range c.Env {
		if e.Name == sidecarconfig.EnvPodRank && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			cfg.PodRankField = e.ValueFrom.FieldRef.FieldPath
		}
	}
	return cfg, err
}

// podRank is the rank the sidecar will serve: the contract's, or the pod
// field the kubelet reads it from.
func podRank(p *corev1.Pod, j launched, cfg sidecarconfig.Config) (int, error) {
	switch j.kind {
	case "JobSet":
		idx, _ := strconv.Atoi(p.Annotations[jobkind.JobCompletionIndex])
		g, _ := strconv.Atoi(p.Labels[jobkind.JobSetJobGlobalIndex])
		want := g*j.completions + idx
		if cfg.PodRankField != "" || cfg.Pod != want {
			return 0, fmt.Errorf("JobSet pod of job %d, index %d: rank %d (field %q), want %d", g, idx, cfg.Pod, cfg.PodRankField, want)
		}
		return want, nil
	case "Job":
		if cfg.PodRankField != "metadata.annotations['"+jobkind.JobCompletionIndex+"']" {
			return 0, fmt.Errorf("an Indexed Job's pod reads its rank from %q", cfg.PodRankField)
		}
		return strconv.Atoi(p.Annotations[jobkind.JobCompletionIndex])
	default:
		if cfg.PodRankField != "metadata.labels['"+jobkind.PodIndexLabel+"']" {
			return 0, fmt.Errorf("a StatefulSet's pod reads its rank from %q", cfg.PodRankField)
		}
		return strconv.Atoi(p.Labels[jobkind.PodIndexLabel])
	}
}

// checkLargeJobCacheLimit: a pod of a 512-pod job on a dataset whose
// cacheLimit is below what such a pod needs is refused at admission.
func checkLargeJobCacheLimit(t *testing.T, ns, uri string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: "tight"}
	if err := apiServer.Client.Create(ctx, newDataset(key, uri, "1Ki")); err != nil {
		t.Fatal(err)
	}
	waitDatasetsReady(t, []client.ObjectKey{key})
	j := indexedJob(key, "big", 512, "")
	j.Spec.ManagedBy = ptr.To(pacedManager)
	if err := apiServer.Client.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big-0", Namespace: ns,
		Labels: map[string]string{inject.LabelDataset: key.Name}, Annotations: map[string]string{jobkind.JobCompletionIndex: "0"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}},
		Spec: *j.Spec.Template.Spec.DeepCopy()}
	err := apiServer.Client.Create(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "spec.sidecar.cacheLimit 1Ki is below") || !strings.Contains(err.Error(), "512-pod job") {
		t.Fatalf("a pod of a 512-pod job under cacheLimit 1Ki: %v, want the cache check's refusal", err)
	}
	if err := apiServer.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}

// operatorCA is the CA the replicas made, which sidecars trust.
func operatorCA(t *testing.T) string {
	t.Helper()
	var s corev1.Secret
	if err := apiServer.Client.Get(context.Background(), client.ObjectKey{Namespace: operatorNS, Name: "shardfeed-webhook-cert"}, &s); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f, s.Data[certs.KeyCACert], 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// podToken is the sidecar's projected token: bound to the pod, for the
// operator's audience.
func podToken(ctx context.Context, p *corev1.Pod) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.ServiceAccountName, Namespace: p.Namespace}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{progress.Audience}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}
	if err := apiServer.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// plans are the datasets' fingerprints, as each sidecar reads it from its
// mounted plan.
func plans(t *testing.T, datasets []client.ObjectKey) map[client.ObjectKey]configmaps.Plan {
	t.Helper()
	out := map[client.ObjectKey]configmaps.Plan{}
	for _, k := range datasets {
		var cm corev1.ConfigMap
		if err := apiServer.Client.Get(context.Background(), client.ObjectKey{Namespace: k.Namespace, Name: configmaps.PlanName(k.Name)}, &cm); err != nil {
			t.Fatal(err)
		}
		p, err := configmaps.PlanFromData(cm.Data)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = *p
	}
	return out
}

// sidecar is one pod's replayed sidecar.
type sidecar struct {
	remote *progress.Remote
	job    progress.Job
	ns     string
}

// registerAll registers every pod's sidecar, 32 at a time, and keeps the
// clients for the commits.
func (g *loadGenerator) registerAll(t *testing.T, pods []corev1.Pod, datasets []client.ObjectKey) int {
	t.Helper()
	pl := plans(t, datasets)
	g.sidecars = map[string]*sidecar{}
	tokens := t.TempDir()
	work := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 32 {
		wg.Go(func() {
			for p := range work {
				cfg, _ := contract(p)
				token, err := podToken(context.Background(), p)
				if err != nil {
					g.fail(fmt.Errorf("pod %s/%s: a token: %w", p.Namespace, p.Name, err))
					continue
				}
				plan := pl[client.ObjectKey{Namespace: p.Namespace, Name: cfg.Dataset}]
				j := progress.Job{Dataset: cfg.Dataset, Job: cfg.Job, Attempt: cfg.Attempt, Generation: cfg.Generation,
					Fingerprint: plan.Fingerprint, Steps: 1000, Pods: cfg.Pods, WorldSize: cfg.Pods}
				remote, err := g.remote(tokens, token)
				if err != nil {
					g.fail(fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
					continue
				}
				s := &sidecar{remote: remote, job: j, ns: p.Namespace}
				_, err = s.remote.Register(context.Background(), j)
				// Thousands of sidecars in one process: each reconnects
				// for its next call rather than hold a connection.
				s.remote.CloseIdleConnections()
				if err != nil {
					g.fail(fmt.Errorf("pod %s/%s: registering: %w", p.Namespace, p.Name, err))
					continue
				}
				mu.Lock()
				g.sidecars[p.Namespace+"/"+p.Name] = s
				mu.Unlock()
			}
		})
	}
	for i := range pods {
		work <- &pods[i]
	}
	close(work)
	wg.Wait()
	return len(g.sidecars)
}

// commit has each job's rank 0 commit every 100 steps at 1 step/s for
// d, each job at its own phase, and returns the commits made and, for
// each, the time until its dataset's status.jobs showed it.
func (g *loadGenerator) commit(t *testing.T, jobs []launched, pods []corev1.Pod, d time.Duration) (int, []time.Duration) {
	t.Helper()
	var firsts []*sidecar
	for _, j := range jobs {
		for i := range pods {
			p := &pods[i]
			cfg, _ := contract(p)
			if p.Namespace != j.ns || cfg.Job != j.job {
				continue
			}
			if r, err := podRank(p, j, cfg); err == nil && r == 0 && g.sidecars[p.Namespace+"/"+p.Name] != nil {
				firsts = append(firsts, g.sidecars[p.Namespace+"/"+p.Name])
			}
		}
	}
	const every = 100 * time.Second // 100 steps at 1 step/s
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	var lags []time.Duration
	end := time.Now().Add(d)
	for i, s := range firsts {
		// Job i is at its own point of its 100 steps.
		first := time.Duration(int64(every) * int64(i) / int64(len(firsts)))
		wg.Go(func() {
			step := int64(100)
			for at := time.Now().Add(first % d); at.Before(end); at = at.Add(every) {
				time.Sleep(time.Until(at))
				committed := time.Now()
				_, err := s.remote.Commit(context.Background(), s.job, progress.Commit{Epoch: 0, Step: step})
				s.remote.CloseIdleConnections()
				if err != nil {
					g.fail(fmt.Errorf("job %s: commit at step %d: %w", s.job.Job, step, err))
					return
				}
				lag, err := statusShows(s, step, committed)
				if err != nil {
					g.fail(err)
					return
				}
				step += 100
				mu.Lock()
				n++
				lags = append(lags, lag)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n, lags
}

// statusShows waits until the status of s's dataset shows its job at
// step, and returns the time since from.
func statusShows(s *sidecar, step int64, from time.Time) (time.Duration, error) {
	key := client.ObjectKey{Namespace: s.ns, Name: s.job.Dataset}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ds datav1alpha1.TrainingDataset
		if err := apiServer.Client.Get(context.Background(), key, &ds); err != nil {
			return 0, err
		}
		for _, j := range ds.Status.Jobs {
			if j.Job == s.job.Job && j.Step >= step {
				return time.Since(from), nil
			}
		}
	}
	return 0, fmt.Errorf("job %s: its commit of step %d is not in its dataset's status after a minute", s.job.Job, step)
}

// waveFigures are a rescale wave's.
type waveFigures struct {
	jobs, oldPods, pods int
	// admitted: the deletions to every new pod on a node; cleaned: to
	// every old pod gone.
	admitted, cleaned time.Duration
}

// rescaleWave deletes each of jobs (Indexed Jobs) and makes it again with
// half its pods under the same shardfeed.io/job, all at once, as an
// elastic trainer's controller does after losing nodes. Every job's state
// survives its Job, and the new pods get the next generation.
func rescaleWave(t *testing.T, jobs []launched) waveFigures {
	t.Helper()
	ctx := context.Background()
	w := waveFigures{jobs: len(jobs)}
	before := map[string]*configmaps.State{}
	for _, j := range jobs {
		st := jobState(t, j)
		if st.GenerationOf(j.uid) == 0 {
			t.Fatalf("job %s/%s: its state records no generation for attempt %s: %+v", j.ns, j.job, j.uid, st.Attempts)
		}
		before[j.ns+"/"+j.job] = st
		w.oldPods += j.pods
	}
	began := time.Now()
	var next []launched
	for _, j := range jobs {
		if err := apiServer.Client.Delete(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.name, Namespace: j.ns}},
			client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
		ds := client.ObjectKey{Namespace: j.ns, Name: j.dataset}
		next = append(next, createIndexedJob(t, ds, j.name+"-r", max(j.pods/2, 1), j.job))
	}
	var pods []corev1.Pod
	for _, j := range next {
		pods = append(pods, waitJobPods(t, j.ns, j.name, j.pods)...)
		w.pods += j.pods
	}
	w.admitted = time.Since(began)
	checkWiring(t, next, pods)
	for _, j := range jobs {
		waitJobPods(t, j.ns, j.name, 0)
	}
	w.cleaned = time.Since(began)
	for _, j := range next {
		st, old := jobState(t, j), before[j.ns+"/"+j.job]
		if st.GenerationOf(j.uid) != old.Generation+1 {
			t.Fatalf("rescaled job %s/%s: attempts %+v, before %+v: want the next generation", j.ns, j.job, st.Attempts, old.Attempts)
		}
	}
	for i := range pods {
		cfg, _ := contract(&pods[i])
		if cfg.Generation < 2 {
			t.Fatalf("rescaled pod %s/%s: generation %d, want the next one", pods[i].Namespace, pods[i].Name, cfg.Generation)
		}
	}
	return w
}

// jobState reads the state ConfigMap of j's job, which must exist.
func jobState(t *testing.T, j launched) *configmaps.State {
	t.Helper()
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: j.ns, Name: configmaps.StateName(j.dataset, j.job)}
	if err := apiServer.Client.Get(context.Background(), key, &cm); err != nil {
		t.Fatalf("job %s's state: %v", j.job, err)
	}
	st, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitJobPods waits until Job name's pods number n, each on a node.
func waitJobPods(t *testing.T, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitUntil(t, 3*time.Minute, fmt.Sprintf("Job %s to have %d pods on nodes", name, n), func() (bool, string) {
		var list corev1.PodList
		if err := apiServer.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
			return false, err.Error()
		}
		pods = list.Items
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				bound++
			}
		}
		return len(pods) == n && bound == n, fmt.Sprintf("%d pods, %d on a node", len(pods), bound)
	})
	return pods
}

// deleteDatasets deletes every dataset and waits until nothing the
// operator made for them is left; it returns how long that took.
func deleteDatasets(t *testing.T, namespaces []string) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for _, ns := range namespaces {
		if err := apiServer.Client.DeleteAllOf(ctx, &datav1alpha1.TrainingDataset{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 3*time.Minute, "the datasets' ConfigMaps to be deleted", func() (bool, string) {
		var list corev1.ConfigMapList
		if err := apiServer.Client.List(ctx, &list, client.MatchingLabels{configmaps.LabelManagedBy: configmaps.ManagedBy}); err != nil {
			return false, err.Error()
		}
		left := 0
		for _, cm := range list.Items {
			if slices.Contains(namespaces, cm.Namespace) {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d ConfigMaps left", left)
	})
	var list datav1alpha1.TrainingDatasetList
	if err := apiServer.Client.List(ctx, &list); err != nil || len(list.Items) != 0 {
		t.Fatalf("datasets left: %d (%v)", len(list.Items), err)
	}
	return time.Since(start)
}

// unrelated fills the cluster with objects the operator has no business
// with: ConfigMaps, and suspended Jobs (no pods).
func unrelated(t *testing.T, sc scenario) {
	t.Helper()
	if sc.unrelatedConfigMaps == 0 && sc.unrelatedJobs == 0 {
		return
	}
	ctx := context.Background()
	if err := apiServer.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	work := make(chan client.Object)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for o := range work {
				if err := apiServer.Client.Create(ctx, o); err != nil {
					t.Error(err)
				}
			}
		})
	}
	payload := strings.Repeat("x", 1024)
	for i := range sc.unrelatedConfigMaps {
		work <- &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "unrelated"}, Data: map[string]string{"v": payload}}
	}
	for i := range sc.unrelatedJobs {
		j := indexedJob(client.ObjectKey{Namespace: "unrelated", Name: "none"}, fmt.Sprintf("job-%d", i), 4, "")
		delete(j.Spec.Template.Labels, inject.LabelDataset)
		j.Spec.Suspend = ptr.To(true)
		work <- j
	}
	close(work)
	wg.Wait()
}
