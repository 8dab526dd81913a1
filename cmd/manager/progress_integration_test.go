//go:build integration

package main_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/certs"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/planner"
)

// progressFixture is a manager binary serving the webhooks and the
// progress endpoint, and a namespace with a dataset.
type progressFixture struct {
	t          *testing.T
	ns         string
	operatorNS string
	port       int
	caFile     string
}

func newProgressFixture(t *testing.T, extra ...string) *progressFixture {
	t.Helper()
	ctx := context.Background()
	operatorNS, ns := apiServer.Namespace(t), apiServer.Namespace(t)
	f := &progressFixture{t: t, ns: ns, operatorNS: operatorNS, port: freePort(t)}
	installWebhooks(t, f.port, operatorNS)
	startManagerProcess(t, operatorNS, f.port, append([]string{fmt.Sprintf("--progress-url=https://127.0.0.1:%d", f.port), "--allowed-endpoints=127.0.0.1"}, extra...)...)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/", Endpoint: "http://127.0.0.1:1",
			CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "store"}}}},
		NumSplits: 4, GlobalBatchSize: 16,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, sa := range []string{"default", "trainer"} {
		if err := apiServer.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	var secret corev1.Secret
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "shardfeed-webhook-cert"}, &secret); err != nil {
		t.Fatal(err)
	}
	f.caFile = filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f.caFile, secret.Data[certs.KeyCACert], 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// pod creates a pod of Job job (attempt: the Job's UID) named for job
// identity jobName, through the webhook, as the Job controller would.
func (f *progressFixture) pod(jobObj *batchv1.Job, jobName string, i int, sa string) *corev1.Pod {
	f.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", jobObj.Name, i), Namespace: f.ns,
			Labels:          map[string]string{inject.LabelDataset: "web", jobkind.JobCompletionIndex: fmt.Sprint(i)},
			Annotations:     map[string]string{jobkind.JobCompletionIndex: fmt.Sprint(i), inject.AnnotationJob: jobName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: jobObj.Name, UID: jobObj.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}, RestartPolicy: corev1.RestartPolicyNever},
	}
	if err := apiServer.Client.Create(context.Background(), pod); err != nil {
		f.t.Fatal(err)
	}
	return pod
}

func (f *progressFixture) job(name string) *batchv1.Job {
	f.t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: batchv1.JobSpec{
		Completions: ptr.To[int32](2), CompletionMode: ptr.To(batchv1.IndexedCompletion),
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
	}}
	if err := apiServer.Client.Create(context.Background(), job); err != nil {
		f.t.Fatal(err)
	}
	return job
}

// token requests a token as the kubelet does for the projected volume
// (bound, if pod is set, to it) and writes it to a file.
func (f *progressFixture) token(sa string, pod *corev1.Pod, audience string) string {
	f.t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if audience != "" {
		tr.Spec.Audiences = []string{audience}
	}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	if err := apiServer.Client.SubResource("token").Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: f.ns}}, tr); err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(f.t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// sidecar is the ledger a pod's sidecar uses: the pod's own token.
func (f *progressFixture) sidecar(pod *corev1.Pod) *progress.Remote {
	f.t.Helper()
	return f.remote(f.token(pod.Spec.ServiceAccountName, pod, progress.Audience))
}

func (f *progressFixture) remote(tokenFile string) *progress.Remote {
	f.t.Helper()
	r, err := progress.NewRemote(progress.Remote{URL: fmt.Sprintf("https://127.0.0.1:%d", f.port), CAFile: f.caFile, TokenFile: tokenFile, Outage: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *progressFixture) state(job string) *configmaps.State {
	f.t.Helper()
	var cm corev1.ConfigMap
	if err := apiServer.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: configmaps.StateName("web", job)}, &cm); err != nil {
		f.t.Fatal(err)
	}
	st, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}

var plan = planner.Fingerprint{Sum: "v1-test", Inputs: map[string]string{"spec.numSplits": "4"}}

func registered(t *testing.T, r *progress.Remote) progress.Job {
	t.Helper()
	j := progress.Job{Fingerprint: plan, Steps: 100}
	if _, err := r.Register(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestIntegrationAPodMovesOnlyItsOwnJobsProgress: the hardening issue's
// findings 3 and 5 on the manager binary. Two jobs' pods share one
// ServiceAccount and have no access to the API server; each pod's sidecar
// moves its own job's progress through the operator and nothing else; a
// replaced attempt stays fenced after any number of newer attempts; and
// every way to present another identity is refused.
func TestIntegrationAPodMovesOnlyItsOwnJobsProgress(t *testing.T) {
	f := newProgressFixture(t)
	ctx := context.Background()
	jobA, jobB := f.job("train-a"), f.job("train-b")
	podA, podB := f.pod(jobA, "train-a", 0, "default"), f.pod(jobB, "train-b", 0, "default")
	sideA, sideB := f.sidecar(podA), f.sidecar(podB)
	j := registered(t, sideA)
	registered(t, sideB)
	if st, err := sideA.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 5}); err != nil || st.Step != 5 || st.Job != "train-a" {
		t.Fatalf("pod A's commit: %+v, %v", st, err)
	}
	if st, err := sideB.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 7}); err != nil || st.Step != 7 || st.Job != "train-b" {
		t.Fatalf("pod B's commit: %+v, %v", st, err)
	}
	if a, b := f.state("train-a"), f.state("train-b"); a.Step != 5 || b.Step != 7 {
		t.Fatalf("job A at step %d, job B at %d: each pod moved its own job only", a.Step, b.Step)
	}

	// Identities the endpoint refuses, and what it says.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: f.ns},
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := apiServer.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	gone := f.pod(f.job("gone"), "gone", 0, "trainer")
	goneToken := f.token("trainer", gone, progress.Audience)
	if err := apiServer.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, token string
		status      int
		says        string
	}{
		{"the API server's audience", f.token("default", podA, ""), 401, "not a valid ServiceAccount token"},
		{"not bound to a pod", f.token("default", nil, progress.Audience), 403, "not bound to a pod"},
		{"a pod without the sidecar", f.token("default", plain, progress.Audience), 403, "no shardfeed-sidecar container"},
		{"a deleted pod", goneToken, 401, "not a valid"},
		{"no token", writeFile(t, ""), 401, "no bearer token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.remote(tt.token).Commit(ctx, j, progress.Commit{Epoch: 0, Step: 9})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprint(tt.status)) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v, want %d saying %q", err, tt.status, tt.says)
			}
		})
	}
	// A pod's author writes the sidecar container themselves, with a
	// generation of MaxInt64 (the red team's reproduction: it fenced job A
	// and the next admission overflowed). Labelled, the webhook denies it;
	// unlabelled (the webhook never sees it), the endpoint refuses it.
	forged := func(name string, gen int64, labels map[string]string) *corev1.Pod {
		c := *podA.Spec.InitContainers[slices.IndexFunc(podA.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName })].DeepCopy()
		c.Env = slices.Clone(c.Env)
		for i := range c.Env {
			if c.Env[i].Name == sidecarconfig.EnvGeneration {
				c.Env[i].Value = fmt.Sprint(gen)
			}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels}, Spec: corev1.PodSpec{
			ServiceAccountName: "default", InitContainers: []corev1.Container{c}, Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}},
			Volumes: podA.Spec.Volumes}}
	}
	for _, gen := range []int64{math.MaxInt64, 2} {
		err := apiServer.Client.Create(ctx, forged(fmt.Sprint("forged-labelled-", gen%10), gen, map[string]string{inject.LabelDataset: "web"}))
		if err == nil || !strings.Contains(err.Error(), "container the operator did not inject") && !strings.Contains(err.Error(), "which the operator did not admit") {
			t.Errorf("a labelled pod with a forged sidecar container of generation %d: %v, want a denial", gen, err)
		}
	}
	unlabelled := forged("forged", 2, nil)
	if err := apiServer.Client.Create(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	forger := f.sidecar(unlabelled)
	if _, err := forger.Register(ctx, progress.Job{Fingerprint: plan, Steps: 100}); err == nil || !strings.Contains(err.Error(), "not one the operator admitted") {
		t.Errorf("a forged contract registered: %v", err)
	}
	if _, err := forger.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 90}); err == nil || !strings.Contains(err.Error(), "not one the operator admitted") {
		t.Errorf("a forged contract committed: %v", err)
	}
	if st, err := sideA.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 5}); err != nil || st.Step != 5 || st.Generation != 1 {
		t.Fatalf("job A after the forgeries: %+v, %v (want it unfenced, at generation 1)", st, err)
	}

	for _, body := range []string{`{"plan": "v1-test", "steps": 100, "epoch": 1, "step": 2, "job": "train-b"}`, `{"plan": "v1-test"}`, `[]`} {
		status, text := post(t, f, podA, progress.PathCommit, body)
		if status != http.StatusBadRequest {
			t.Errorf("commit body %s: %d %s, want 400", body, status, text)
		}
	}
	// A sidecar of another progress API version: refused, saying which
	// version this operator serves.
	if status, text := post(t, f, podA, "/progress/v9/commit", `{}`); status != http.StatusNotFound ||
		!strings.Contains(text, "serves the progress API v1 (/progress/v1/*)") {
		t.Errorf("a commit of progress API v9: %d %s, want 404 naming v1", status, text)
	}
	if a, b := f.state("train-a"), f.state("train-b"); a.Step != 5 || b.Step != 7 {
		t.Fatalf("after the refusals: job A at step %d, job B at %d", a.Step, b.Step)
	}

	// Job A is replaced, then replaced again many times over: its first
	// attempt's sidecar (generation 1 in its pod's spec) stays fenced.
	var newest *progress.Remote
	const attempts = 2*configmaps.MaxAttempts + 3
	for i := range attempts {
		newest = f.sidecar(f.pod(f.job(fmt.Sprintf("train-a-%d", i)), "train-a", 0, "trainer"))
	}
	registered(t, newest)
	for what, call := range map[string]func() error{
		"registers": func() error { _, err := sideA.Register(ctx, j); return err },
		"commits":   func() error { _, err := sideA.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 9}); return err },
	} {
		if err := call(); !errors.Is(err, progress.ErrRefused) || !strings.Contains(err.Error(), "(generation 1) is fenced") {
			t.Errorf("the first attempt %s after %d newer ones: %v", what, attempts, err)
		}
	}
	if st, err := newest.Commit(ctx, j, progress.Commit{Epoch: 0, Step: 6}); err != nil || st.Generation != attempts+1 {
		t.Fatalf("the newest attempt's commit: %+v, %v", st, err)
	}
}

// TestIntegrationReplicasWriteTheStateCompareAndSwap: sidecars of one
// attempt commit through two manager replicas at once; no accepted commit
// is lost and the lineage never goes back.
func TestIntegrationReplicasWriteTheStateCompareAndSwap(t *testing.T) {
	f := newProgressFixture(t)
	// Another replica, on its own port, with the same certificate.
	second := freePort(t)
	startManagerProcess(t, f.operatorNS, second, "--allowed-endpoints=127.0.0.1")
	ctx := context.Background()
	job := f.job("train")
	var wg sync.WaitGroup
	for w := range 4 {
		pod := f.pod(job, "train", w, "default")
		r := f.sidecar(pod)
		if w%2 == 1 { // through the other replica
			var err error
			if r, err = progress.NewRemote(progress.Remote{URL: fmt.Sprintf("https://127.0.0.1:%d", second), CAFile: f.caFile, TokenFile: r.TokenFile}); err != nil {
				t.Fatal(err)
			}
		}
		j := registered(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int64(w + 1); k <= 40; k += 4 {
				if _, err := r.Commit(ctx, j, progress.Commit{Epoch: 0, Step: k}); err != nil && !errors.Is(err, progress.ErrRefused) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st := f.state("train")
	if st.Step != 40 {
		t.Fatalf("stored step %d after commits up to 40 through two replicas", st.Step)
	}
	for i := 1; i < len(st.History); i++ {
		if st.History[i].Step < st.History[i-1].Step {
			t.Fatalf("the lineage goes back: %+v", st.History)
		}
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// post sends a raw body with the pod's token.
func post(t *testing.T, f *progressFixture, pod *corev1.Pod, path, body string) (int, string) {
	t.Helper()
	token, err := os.ReadFile(f.token(pod.Spec.ServiceAccountName, pod, progress.Audience))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("https://127.0.0.1:%d%s", f.port, path), bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+string(token))
	// Only the status matters here: the Remote tests verify the chain.
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// TestIntegrationEachJobsStateSumsWhatItsSidecarsRead: every sidecar of a
// job reports what it read (from the store, from the node cache); the
// operator sums the reports of each job and writes them into its state
// (which status.jobs shows: the controllers' tests). A pod adds to its own
// job only, and a report out of bounds is refused.
func TestIntegrationEachJobsStateSumsWhatItsSidecarsRead(t *testing.T) {
	f := newProgressFixture(t, "--progress-reads-flush=300ms")
	ctx := context.Background()
	jobA, jobB := f.job("train-a"), f.job("train-b")
	a0, a1, b0 := f.sidecar(f.pod(jobA, "train-a", 0, "default")), f.sidecar(f.pod(jobA, "train-a", 1, "default")), f.sidecar(f.pod(jobB, "train-b", 0, "default"))
	for _, r := range []*progress.Remote{a0, a1, b0} {
		registered(t, r)
	}
	reports := []struct {
		r  *progress.Remote
		rd configmaps.Reads
	}{
		{a0, configmaps.Reads{StoreBytes: 1000, NodeCacheHits: 3, NodeCacheBytes: 3000, NodeCacheMisses: 1}},
		{a1, configmaps.Reads{NodeCacheHits: 5, NodeCacheBytes: 5000}},
		{a0, configmaps.Reads{StoreBytes: 500}},
		{b0, configmaps.Reads{StoreBytes: 7}},
	}
	for _, rep := range reports {
		if err := rep.r.Reads(ctx, rep.rd); err != nil {
			t.Fatal(err)
		}
	}
	want := configmaps.Reads{StoreBytes: 1500, NodeCacheHits: 8, NodeCacheBytes: 8000, NodeCacheMisses: 1}
	var a, b *configmaps.Reads
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if a, b = f.state("train-a").Reads, f.state("train-b").Reads; a != nil && b != nil && *a == want {
			break
		}
	}
	if a == nil || b == nil || *a != want || *b != (configmaps.Reads{StoreBytes: 7}) {
		t.Fatalf("the states count job A %+v and job B %+v; want the sums of each job's own pods' reports, %+v and 7 store bytes", a, b, want)
	}
	// Out of bounds, or not a report: refused, nothing added.
	pod := f.pod(jobA, "train-a", 2, "default")
	registered(t, f.sidecar(pod))
	for _, body := range []string{`{"storeBytes": -1}`, fmt.Sprintf(`{"nodeCacheBytes": %d}`, int64(progress.MaxReadsDelta)+1), `{"job": "train-b", "storeBytes": 1}`, `[]`} {
		if status, text := post(t, f, pod, progress.PathReads, body); status != http.StatusBadRequest {
			t.Errorf("reads body %s: %d %s, want 400", body, status, text)
		}
	}
	time.Sleep(time.Second) // a flush or more
	if st := f.state("train-a"); *st.Reads != want {
		t.Fatalf("after refused reports, job A's state counts %+v, want %+v", st.Reads, want)
	}
}
