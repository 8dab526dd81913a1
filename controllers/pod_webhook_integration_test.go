//go:build integration

package controllers_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
	"github.com/shardfeed/shardfeed/planner"
)

// podWebhookConfiguration is the pod webhook as the chart installs it:
// labelled pods only, failing closed, reinvoked if another webhook changed
// the pod.
func podWebhookConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	path := controllers.PodWebhookPath
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-pod-injection"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "pods.shardfeed.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "x", Namespace: "x", Path: &path}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inject.LabelDataset, Operator: metav1.LabelSelectorOpExists}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
}

// validatedNamespace labels the namespaces whose TrainingDatasets go
// through the validating webhook here: the other tests create datasets
// while no webhook is served.
const validatedNamespace = "shardfeed.io/test-validation"

// datasetWebhookConfiguration is the TrainingDataset validating webhook as
// the chart installs it (there for every namespace).
func datasetWebhookConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	path := controllers.DatasetWebhookPath
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-validation"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "trainingdatasets.shardfeed.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "x", Namespace: "x", Path: &path}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{datav1alpha1.GroupVersion.Group}, APIVersions: []string{"v1alpha1"}, Resources: []string{"trainingdatasets"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{validatedNamespace: "true"}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// serveWebhook serves the webhooks from the test process until the test ends.
func serveWebhook(t testing.TB) {
	t.Helper()
	serveWebhookWith(t, testInjector(apiServer.Client, kubernetes.NewForConfigOrDie(apiServer.Config).CoreV1()))
}

// testInjector is the pod webhook of these tests, reading with reader and
// writing states with configMaps.
func testInjector(reader client.Reader, configMaps corev1client.ConfigMapsGetter) *controllers.PodInjector {
	return &controllers.PodInjector{
		Reader: reader, ConfigMaps: configMaps, Decoder: admission.NewDecoder(apiServer.Scheme),
		Images:   inject.ImagePolicy{Default: "ghcr.io/shardfeed/shardfeed:test", Allowed: []string{"registry.example/team/sidecar:*"}},
		Operator: inject.Operator{URL: "https://shardfeed-webhook.shardfeed-system.svc:443"},
	}
}

// serveWebhookWith serves pods (the pod webhook) and the dataset webhook
// from the test process until the test ends.
func serveWebhookWith(t testing.TB, pods *controllers.PodInjector) {
	t.Helper()
	host, port, certDir := apiServer.Webhooks()
	srv := webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir})
	srv.Register(controllers.PodWebhookPath, &webhook.Admission{Handler: pods})
	srv.Register(controllers.JobWebhookPath, &webhook.Admission{Handler: &controllers.JobReserver{Pods: pods}})
	srv.Register(controllers.DatasetWebhookPath, admission.WithValidator(apiServer.Scheme, &controllers.DatasetValidator{
		Reader: apiServer.Client, Access: kubernetes.NewForConfigOrDie(apiServer.Config).AuthorizationV1().SubjectAccessReviews(),
		Policy: controllers.StorePolicy{AmbientNamespaces: []string{"*"}},
		Images: inject.ImagePolicy{Default: "ghcr.io/shardfeed/shardfeed:test", Allowed: []string{"registry.example/team/sidecar:*"}},
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only: is it up
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server did not start: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// indexedJobPod is a pod as the Job controller creates it for index i.
func indexedJobPod(ns string, job *batchv1.Job, i int, dataset string) *corev1.Pod {
	idx := fmt.Sprint(i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", job.Name, i), Namespace: ns,
			Labels:          map[string]string{inject.LabelDataset: dataset, jobkind.JobCompletionIndex: idx, "job-name": job.Name},
			Annotations:     map[string]string{jobkind.JobCompletionIndex: idx},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}, RestartPolicy: corev1.RestartPolicyNever},
	}
}

func createJob(t testing.TB, ns, name string, completions int32) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{Completions: ptr.To(completions), Parallelism: ptr.To(completions), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}, RestartPolicy: corev1.RestartPolicyNever}}},
	}
	if err := apiServer.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestIntegrationPodWebhookInjectsIndexedJobPodsAndDeniesWhatCannotBeServed(t *testing.T) {
	serveWebhook(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "s3"}}}},
		NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	job := createJob(t, ns, "train", 4)
	pod := indexedJobPod(ns, job, 2, "web")
	if err := apiServer.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := apiServer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.InitContainers) != 1 || got.Spec.InitContainers[0].Name != inject.SidecarName {
		t.Fatalf("the stored pod has no sidecar: %+v", got.Spec.InitContainers)
	}
	sc := got.Spec.InitContainers[0]
	want := map[string]string{"SHARDFEED_DATASET": "web", "SHARDFEED_PODS": "4", "SHARDFEED_JOB": "train", "SHARDFEED_ATTEMPT": string(job.UID),
		"SHARDFEED_RANK_MODE": "pod", "SHARDFEED_IMAGE": "ghcr.io/shardfeed/shardfeed:test"}
	for _, e := range sc.Env {
		if v, ok := want[e.Name]; ok && v != e.Value {
			t.Errorf("%s = %q, want %q", e.Name, e.Value, v)
		}
		delete(want, e.Name)
	}
	if len(want) > 0 {
		t.Errorf("the sidecar lacks %v", want)
	}
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Error("the sidecar is not a native sidecar (restartPolicy Always)")
	}
	if got.Annotations[inject.AnnotationInjected] == "" {
		t.Error("no injected annotation")
	}

	// Injecting twice changes nothing: an injected pod goes through the
	// webhook again (as on reinvocation) and comes out the same.
	again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again", Namespace: ns, Labels: got.Labels, Annotations: got.Annotations,
		OwnerReferences: got.OwnerReferences}, Spec: *got.Spec.DeepCopy()}
	again.Spec.NodeName = ""
	if err := apiServer.Client.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(again.Spec.InitContainers, got.Spec.InitContainers) ||
		!equality.Semantic.DeepEqual(again.Spec.Volumes, got.Spec.Volumes) ||
		!equality.Semantic.DeepEqual(again.Spec.Containers, got.Spec.Containers) {
		t.Errorf("a second injection changed the pod:\n%+v\nwant\n%+v", again.Spec, got.Spec)
	}

	tests := []struct {
		name string
		pod  func() *corev1.Pod
		says string
	}{
		{"a dataset that does not exist", func() *corev1.Pod { return indexedJobPod(ns, job, 0, "nope") }, `TrainingDataset "nope", which does not exist`},
		{"a world that does not divide numSplits", func() *corev1.Pod { return indexedJobPod(ns, createJob(t, ns, "odd", 3), 0, "web") }, "3 ranks do not divide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := apiServer.Client.Create(ctx, tt.pod())
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want a denial saying %q", err, tt.says)
			}
		})
	}

	// A pod without the label is not the webhook's business.
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := apiServer.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if len(plain.Spec.InitContainers) != 0 {
		t.Fatal("an unlabelled pod was changed")
	}
}

// TestIntegrationPodWebhookSizesTheCacheFromThePlansLargestShard: the
// cache's emptyDir holds cacheLimit plus room for the downloads in flight,
// 4 × the largest shard the plan ConfigMap records (docs/operator.md).
func TestIntegrationPodWebhookSizesTheCacheFromThePlansLargestShard(t *testing.T) {
	serveWebhook(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	limit := resource.MustParse("1Gi")
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}, {Name: "b", Source: datav1alpha1.Source{URI: "s3://data/b/"}}},
		NumSplits: 8, GlobalBatchSize: 64, Sidecar: datav1alpha1.SidecarSpec{CacheLimit: &limit},
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	writePlan(t, ds, []configmaps.StreamDigest{{Name: "a", MaxShardBytes: 64 << 20}, {Name: "b", MaxShardBytes: 100 << 20}})
	pod := indexedJobPod(ns, createJob(t, ns, "train", 4), 0, "web")
	if err := apiServer.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != inject.CacheVolume {
			continue
		}
		if want := limit.Value() + 4*(100<<20); v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() != want {
			t.Fatalf("cache emptyDir = %+v, want sizeLimit %d (cacheLimit + 4 × the largest shard)", v.EmptyDir, want)
		}
		return
	}
	t.Fatalf("no cache volume in %+v", pod.Spec.Volumes)
}

// writePlan creates the plan ConfigMap of ds as the reconciler writes it
// (its own test checks that), with the streams' digests.
func writePlan(t testing.TB, ds *datav1alpha1.TrainingDataset, streams []configmaps.StreamDigest) {
	t.Helper()
	plan := &configmaps.Plan{Spec: ds.Spec, Fingerprint: planner.Fingerprint{Sum: "v1-test", Inputs: map[string]string{}}, Streams: streams}
	data, err := plan.Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName(ds.Name), Namespace: ds.Namespace,
		Labels:          map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, datav1alpha1.GroupVersion.WithKind("TrainingDataset"))}}, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// asServiceAccount is a client that acts as a ServiceAccount of ns, as the
// sidecar does in its pod.
func asServiceAccount(t *testing.T, ns, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIntegrationPodWebhookGivesEachAttemptAGenerationAndThePodsNoAccess(t *testing.T) {
	serveWebhook(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 4, GlobalBatchSize: 16,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	stateName := configmaps.StateName("web", "train")

	// A dry run changes nothing (the webhook is sideEffects: NoneOnDryRun).
	job := createJob(t, ns, "train", 2)
	if err := apiServer.Client.Create(ctx, indexedJobPod(ns, job, 0, "web"), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	var state corev1.ConfigMap
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateName}, &state); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the state ConfigMap: %v", err)
	}

	// The job's first pod: the operator creates its state, pinning the
	// image, and gives the attempt generation 1; the sidecar gets a token
	// for the operator's audience and where to reach the operator.
	first := indexedJobPod(ns, job, 0, "web")
	if err := apiServer.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateName}, &state); err != nil {
		t.Fatal(err)
	}
	st, err := configmaps.StateFromData(state.Data)
	if err != nil || st.SidecarImage != "ghcr.io/shardfeed/shardfeed:test" || st.PlanVersion != planner.PlanVersion || st.Job != "train" || st.Generation != 1 {
		t.Fatalf("state %+v (%v): want the image and plan version pinned, generation 1", st, err)
	}
	if len(state.OwnerReferences) != 1 || state.OwnerReferences[0].UID != ds.UID || state.Labels[configmaps.LabelManagedBy] != configmaps.ManagedBy {
		t.Errorf("the state ConfigMap has owners %+v and labels %v, want the dataset and shardfeed's", state.OwnerReferences, state.Labels)
	}
	contract := sidecarOf(t, first)
	if contract.Generation != 1 || contract.Job != "train" || contract.Attempt != string(job.UID) || contract.OperatorURL != "https://shardfeed-webhook.shardfeed-system.svc:443" {
		t.Errorf("the sidecar's contract %+v", contract)
	}
	var token *corev1.ServiceAccountTokenProjection
	for _, v := range first.Spec.Volumes {
		if v.Name == inject.TokenVolume {
			token = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if token == nil || token.Audience != "shardfeed" || token.ExpirationSeconds == nil || *token.ExpirationSeconds > 3600 {
		t.Errorf("the sidecar's token projection %+v: want audience shardfeed, at most an hour", token)
	}

	// The pod's ServiceAccount gets no access at all: the operator makes
	// no Role and no RoleBinding, and the state is the operator's alone.
	sa := asServiceAccount(t, ns, "default")
	var cm corev1.ConfigMap
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"get the state", sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: stateName}, &cm)},
		{"get the plan", sa.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName("web")}, &cm)},
		{"list ConfigMaps", sa.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns))},
		{"read Secrets", sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))},
	} {
		if !apierrors.IsForbidden(tc.err) {
			t.Errorf("the pod's ServiceAccount may %s (err %v)", tc.what, tc.err)
		}
	}
	var roles rbacv1.RoleList
	var bindings rbacv1.RoleBindingList
	if err := apiServer.Client.List(ctx, &roles, client.InNamespace(ns)); err != nil || len(roles.Items) != 0 {
		t.Errorf("Roles in the namespace: %d (%v), want none", len(roles.Items), err)
	}
	if err := apiServer.Client.List(ctx, &bindings, client.InNamespace(ns)); err != nil || len(bindings.Items) != 0 {
		t.Errorf("RoleBindings in the namespace: %d (%v), want none", len(bindings.Items), err)
	}

	// The attempt's second pod shares its generation; the next attempt of
	// the job (another Job object) gets generation 2, for good.
	second := indexedJobPod(ns, job, 1, "web")
	second.Spec.ServiceAccountName = "trainer"
	if err := apiServer.Client.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if g := sidecarOf(t, second).Generation; g != 1 {
		t.Errorf("the attempt's second pod has generation %d, want 1", g)
	}
	third := indexedJobPod(ns, createJob(t, ns, "train-again", 2), 0, "web")
	third.Annotations[inject.AnnotationJob] = "train"
	if err := apiServer.Client.Create(ctx, third); err != nil {
		t.Fatal(err)
	}
	if g := sidecarOf(t, third).Generation; g != 2 {
		t.Errorf("the next attempt has generation %d, want 2", g)
	}

	// A job whose state pins another tag of the operator's image keeps
	// it, whatever the operator's default now is (an upgrade mid-job); a
	// state that pins any other image (pre-created by anyone who may
	// create ConfigMaps: hardening issue, finding 1) does not choose the
	// image that receives the Secrets; one shardfeed did not create is
	// never adopted.
	for _, tt := range []struct {
		job, pin, want string
		labelled       bool
	}{
		{"old", "ghcr.io/shardfeed/shardfeed:0.1", "ghcr.io/shardfeed/shardfeed:0.1", true},
		{"evil", "registry.evil/steal-credentials:latest", "ghcr.io/shardfeed/shardfeed:test", true},
		{"lookalike", "ghcr.io/shardfeed/shardfeed-evil:test", "ghcr.io/shardfeed/shardfeed:test", true},
		{"foreign", "ghcr.io/shardfeed/shardfeed:0.1", "", false},
	} {
		pinned, _ := configmaps.StateData(&configmaps.State{Dataset: "web", Job: tt.job, SidecarImage: tt.pin})
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("web", tt.job), Namespace: ns}, Data: pinned}
		if tt.labelled {
			cm.Labels = configmaps.JobLabels("web", tt.job)
		}
		if err := apiServer.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		job := createJob(t, ns, tt.job, 2)
		pod := indexedJobPod(ns, job, 0, "web")
		err := apiServer.Client.Create(ctx, pod)
		if !tt.labelled {
			if err == nil || !strings.Contains(err.Error(), cm.Name) || !strings.Contains(err.Error(), "not created by shardfeed") {
				t.Errorf("a pod of a job whose state name another ConfigMap holds: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := pod.Spec.InitContainers[0].Image; got != tt.want {
			t.Errorf("job %s pinned to %s: the sidecar image is %q, want %q", tt.job, tt.pin, got, tt.want)
		}
	}

	// A plan ConfigMap shardfeed did not write for the dataset is refused
	// too: the sidecar would read its streams.
	if err := apiServer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName("web"), Namespace: ns,
		Labels: map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy}}}); err != nil {
		t.Fatal(err)
	}
	pod := indexedJobPod(ns, createJob(t, ns, "late", 2), 0, "web")
	if err := apiServer.Client.Create(ctx, pod); err == nil || !strings.Contains(err.Error(), "web-plan") || !strings.Contains(err.Error(), "never adopts") {
		t.Errorf("a pod whose plan ConfigMap is not the dataset's: %v", err)
	}
}

// sidecarOf reads the contract the webhook gave the pod's sidecar.
func sidecarOf(t *testing.T, pod *corev1.Pod) sidecarconfig.Config {
	t.Helper()
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == inject.SidecarName {
			contract, err := sidecarconfig.FromContainer(c)
			if err != nil {
				t.Fatal(err)
			}
			return contract
		}
	}
	t.Fatalf("pod %s has no sidecar", pod.Name)
	return sidecarconfig.Config{}
}

// warningsCollector keeps the API server's warnings.
type warningsCollector struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningsCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func TestIntegrationDatasetWebhookRejectsWhatCELCannotCheck(t *testing.T) {
	serveWebhook(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	var nsObj corev1.Namespace
	if err := apiServer.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[validatedNamespace] = "true"
	if err := apiServer.Client.Update(ctx, &nsObj); err != nil {
		t.Fatal(err)
	}
	warnings := &warningsCollector{}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.WarningHandler = warnings
	c, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	dataset := func(name string, sidecar datav1alpha1.SidecarSpec, streams ...datav1alpha1.Stream) *datav1alpha1.TrainingDataset {
		if len(streams) == 0 {
			streams = []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}
		}
		return &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: datav1alpha1.TrainingDatasetSpec{Streams: streams, NumSplits: 2, GlobalBatchSize: 8, Sidecar: sidecar}}
	}
	q := resource.MustParse
	tests := []struct {
		name string
		ds   *datav1alpha1.TrainingDataset
		says string
	}{
		{"an image that is not a reference", dataset("img", datav1alpha1.SidecarSpec{Image: "Registry/Shardfeed:latest"}), "spec.sidecar.image"},
		{"an image the platform does not allow", dataset("foreign", datav1alpha1.SidecarSpec{Image: "registry.evil/steal:1"}),
			"not an image the platform team allows for sidecars (they receive the dataset's storage credentials): remove it to run the operator's ghcr.io/shardfeed/shardfeed:test, use a release of ghcr.io/shardfeed/shardfeed at least as new, or one of the chart's sidecar.allowedImages (registry.example/team/sidecar:*)"},
		// The default names no release, so no other tag of its repository
		// is known to be as new: an old release would receive the Secrets.
		{"another tag of the default repository", dataset("old", datav1alpha1.SidecarSpec{Image: "ghcr.io/shardfeed/shardfeed:v0.1.0"}), "use a release of ghcr.io/shardfeed/shardfeed at least as new"},
		{"a request above its limit", dataset("res", datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"memory": q("4Gi")}, Limits: corev1.ResourceList{"memory": q("1Gi")}}}), "raise the limit or lower the request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The API server matches the webhook's namespaceSelector
			// against its cache of namespaces: until it sees the label
			// just set, a create is not sent to the webhook. Admitted
			// then, the object is deleted and created again.
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; {
				if err = c.Create(ctx, tt.ds.DeepCopy()); err != nil || time.Now().After(deadline) {
					break
				}
				_ = c.Delete(ctx, tt.ds.DeepCopy())
				time.Sleep(200 * time.Millisecond)
			}
			if err == nil {
				t.Fatalf("admitted for 10 s, want a rejection saying %q: the API server never sent it to the webhook (does the namespace carry %s?)", tt.says, validatedNamespace)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("got %v, want a rejection saying %q", err, tt.says)
			}
		})
	}

	// Valid, with warnings: a Secret that does not exist yet, the same
	// source twice.
	ok := dataset("ok", datav1alpha1.SidecarSpec{Image: "registry.example/team/sidecar:v0.1.0"},
		datav1alpha1.Stream{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "later"}}},
		datav1alpha1.Stream{Name: "b", Source: datav1alpha1.Source{URI: "s3://data/a/"}})
	if err := c.Create(ctx, ok); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(warnings.seen, "\n")
	for _, want := range []string{"Secret " + ns + "/later does not exist yet", `streams "a" and "b" read the same source`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
	// A dataset author who may not read the namespace's Secrets learns
	// nothing of them from the warnings: whether one exists, or its keys.
	author := "system:serviceaccount:" + ns + ":author"
	grant := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "author", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{datav1alpha1.GroupVersion.Group}, Resources: []string{"trainingdatasets"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "author", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "author"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: author}}}
	for _, obj := range []client.Object{grant, binding} {
		if err := apiServer.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	credentialsSecret(t, ns, "partial", "key", "")
	authorWarnings := &warningsCollector{}
	acfg := rest.CopyConfig(apiServer.Config)
	acfg.WarningHandler = authorWarnings
	acfg.Impersonate = rest.ImpersonationConfig{UserName: author, Groups: []string{"system:authenticated"}}
	ac, err := client.New(acfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	probe := dataset("probe", datav1alpha1.SidecarSpec{},
		datav1alpha1.Stream{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "later"}}},
		datav1alpha1.Stream{Name: "b", Source: datav1alpha1.Source{URI: "s3://data/b/", CredentialsSecretRef: &datav1alpha1.SecretReference{Name: "partial"}}},
		datav1alpha1.Stream{Name: "c", Source: datav1alpha1.Source{URI: "s3://data/b/"}})
	if err := ac.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	authorSaw := strings.Join(authorWarnings.seen, "\n")
	if strings.Contains(authorSaw, "Secret") || !strings.Contains(authorSaw, `streams "b" and "c" read the same source`) {
		t.Errorf("an author who may not read Secrets was warned %q: want the duplicate source only", authorSaw)
	}
	// The same dataset, from one who may read them, is warned of both.
	warnings.seen = nil
	probe = dataset("probe2", datav1alpha1.SidecarSpec{}, probe.Spec.Streams...)
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	all = strings.Join(warnings.seen, "\n")
	for _, want := range []string{"Secret " + ns + "/later does not exist yet", "Secret " + ns + "/partial lacks"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}

	// Updates are checked too.
	ok.Spec.Sidecar.Image = "not a reference"
	if err := c.Update(ctx, ok); err == nil {
		t.Error("an update to an invalid image was accepted")
	}

	// A phase appended to a schedule starts at or after every job's
	// committed step: job "late" committed epoch 2 step 5 of 40 (global 85).
	sched := dataset("scheduled", datav1alpha1.SidecarSpec{})
	sched.Spec.Schedule = &datav1alpha1.Schedule{Phases: []datav1alpha1.SchedulePhase{{StartStep: 10, GlobalBatchSize: 16}}}
	if err := c.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}
	sched.Status.StepsPerEpoch = 40
	sched.Status.Jobs = []datav1alpha1.JobProgress{{Job: "early", Epoch: 1, Step: 3}, {Job: "late", Epoch: 2, Step: 5}}
	if err := c.Status().Update(ctx, sched); err != nil {
		t.Fatal(err)
	}
	sched.Spec.Schedule.Phases = append(sched.Spec.Schedule.Phases, datav1alpha1.SchedulePhase{StartStep: 84, SkipSteps: 3})
	err = c.Update(ctx, sched)
	if err == nil || !strings.Contains(err.Error(), `spec.schedule.phases[1] starts at global step 84, before job "late"'s committed step 85 (epoch 2 step 5 of 40): start it at step 85 or later`) {
		t.Fatalf("a phase before a committed step: %v", err)
	}
	sched.Spec.Schedule.Phases[1].StartStep = 85
	if err := c.Update(ctx, sched); err != nil {
		t.Fatalf("a phase at the committed step was refused: %v", err)
	}
}

// pyTorchJobCRD is enough of Kubeflow's PyTorchJob CRD for the webhook to
// read a job's replicas from the API server.
func pyTorchJobCRD(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "pytorchjobs.kubeflow.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubeflow.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "pytorchjobs", Singular: "pytorchjob", Kind: "PyTorchJob", ListKind: "PyTorchJobList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := envtest.CreateCRDs(apiServer.Config, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(apiServer.Config, []*apiextensionsv1.CustomResourceDefinition{crd}, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationPodWebhookWiresJobSetAndPyTorchJobPods(t *testing.T) {
	serveWebhook(t)
	pyTorchJobCRD(t)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	sidecarEnv := func(p *corev1.Pod) map[string]string {
		out := map[string]string{}
		for _, e := range p.Spec.InitContainers[0].Env {
			out[e.Name] = e.Value
		}
		return out
	}

	// A JobSet's second Job (of 2), 4 pods each: its pod 3 is rank 7 of 8.
	job := createJob(t, ns, "llm-workers-1", 4)
	p := indexedJobPod(ns, job, 3, "web")
	p.Labels[jobkind.JobSetName], p.Labels[jobkind.JobSetUID] = "llm", "js-uid"
	p.Labels[jobkind.JobSetJobIndex], p.Labels[jobkind.JobSetReplicas] = "1", "2"
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	env := sidecarEnv(p)
	if env["SHARDFEED_POD_RANK"] != "7" || env["SHARDFEED_PODS"] != "8" || env["SHARDFEED_JOB"] != "llm" || env["SHARDFEED_ATTEMPT"] != "js-uid-0" {
		t.Errorf("JobSet pod wired as %v", env)
	}

	// A TrainJob's node 1 of 2 (Kubeflow Trainer v2's torch runtime): the
	// third Job of its JobSet after two initializers, torchrun starting 4
	// processes: rank 1 of 2 pods, 4 processes each.
	job = createJob(t, ns, "tj-node-0", 2)
	p = indexedJobPod(ns, job, 1, "web")
	p.Name = "tj-node-0-1"
	p.Labels[jobkind.JobSetName], p.Labels[jobkind.JobSetUID] = "tj", "tj-uid"
	p.Labels[jobkind.JobSetJobGlobalIndex], p.Labels[jobkind.JobSetGlobalReplicas] = "2", "3"
	p.Labels[jobkind.JobSetJobIndex], p.Labels[jobkind.JobSetReplicas] = "0", "1"
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: jobkind.TrainerNumNodes, Value: "2"}, {Name: jobkind.TrainerNumProcPerNode, Value: "4"},
		{Name: jobkind.TrainerNodeRank, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + jobkind.JobCompletionIndex + "']"}}}}
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	env = sidecarEnv(p)
	if env["SHARDFEED_POD_RANK"] != "1" || env["SHARDFEED_PODS"] != "2" || env["SHARDFEED_PROCS_PER_POD"] != "4" || env["SHARDFEED_JOB"] != "tj" || env["SHARDFEED_ATTEMPT"] != "tj-uid-0" {
		t.Errorf("TrainJob node wired as %v", env)
	}

	// A PyTorchJob with 1 master and 3 workers: worker 1 is rank 2 of 4.
	ptj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": "pt", "namespace": ns},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": map[string]any{"replicas": int64(1)}, "Worker": map[string]any{"replicas": int64(3)}}},
	}}
	if err := apiServer.Client.Create(ctx, ptj); err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pt-worker-1", Namespace: ns,
			Labels:          map[string]string{inject.LabelDataset: "web", jobkind.KubeflowReplicaType: "worker", jobkind.KubeflowReplicaIndex: "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "pt", UID: ptj.GetUID(), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}},
	}
	if err := apiServer.Client.Create(ctx, worker); err != nil {
		t.Fatal(err)
	}
	env = sidecarEnv(worker)
	if env["SHARDFEED_POD_RANK"] != "2" || env["SHARDFEED_PODS"] != "4" || env["SHARDFEED_JOB"] != "pt" || env["SHARDFEED_ATTEMPT"] != string(ptj.GetUID()) {
		t.Errorf("PyTorchJob worker wired as %v", env)
	}
}

// With the node cache, only the pods of the namespaces the platform names
// are told the agent, and no pod needs a hostPath for it: namespaces
// enforcing the restricted Pod Security level (whose admission runs after
// the webhook and refuses any hostPath) admit them.
func TestIntegrationPodWebhookGivesTheNodeAgentToTheNamedNamespacesOnly(t *testing.T) {
	ctx := context.Background()
	named, other := apiServer.Namespace(t), apiServer.Namespace(t)
	for _, ns := range []string{named, other} {
		if err := apiServer.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, client.Merge); err != nil {
			t.Fatal(err)
		}
	}
	injector := testInjector(apiServer.Client, kubernetes.NewForConfigOrDie(apiServer.Config).CoreV1())
	agent := inject.NodeAgent{URL: "https://shardfeed-node-agent.shardfeed-system.svc:9466", Addr: "198.19.0.9:9466"}
	injector.NodeAgent, injector.NodeAgentNamespaces = agent, []string{named}
	serveWebhookWith(t, injector)
	for _, tt := range []struct {
		ns    string
		agent bool
	}{{named, true}, {other, false}} {
		ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tt.ns}, Spec: datav1alpha1.TrainingDatasetSpec{
			Streams:   []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}},
			NumSplits: 8, GlobalBatchSize: 64,
		}}
		if err := apiServer.Client.Create(ctx, ds); err != nil {
			t.Fatal(err)
		}
		writePlan(t, ds, []configmaps.StreamDigest{{Name: "a", MaxShardBytes: 1 << 20}})
		pod := indexedJobPod(tt.ns, createJob(t, tt.ns, "train", 4), 0, "web")
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}
		if err := apiServer.Client.Create(ctx, pod); err != nil {
			t.Fatalf("namespace %s: %v", tt.ns, err)
		}
		told := slices.Contains(pod.Spec.InitContainers[0].Env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgent, Value: agent.URL}) &&
			slices.Contains(pod.Spec.InitContainers[0].Env, corev1.EnvVar{Name: sidecarconfig.EnvNodeAgentAddr, Value: agent.Addr})
		if told != tt.agent {
			t.Errorf("namespace %s (named: %v): the sidecar is told the agent: %v", tt.ns, tt.agent, told)
		}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				t.Errorf("namespace %s: the pod mounts hostPath %s", tt.ns, v.HostPath.Path)
			}
		}
	}
}

// A private registry: the pods the webhook injects, on a real API server,
// pull with the platform's Secrets beside their own.
func TestIntegrationPodWebhookGivesInjectedPodsTheSidecarsPullSecrets(t *testing.T) {
	pods := testInjector(apiServer.Client, kubernetes.NewForConfigOrDie(apiServer.Config).CoreV1())
	pods.Images.PullSecrets = []string{"sidecar-pull"}
	serveWebhookWith(t, pods)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 2, GlobalBatchSize: 8,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	job := createJob(t, ns, "pull", 2)
	p := indexedJobPod(ns, job, 1, "web")
	p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "team"}}
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !inject.Injected(p) || fmt.Sprint(p.Spec.ImagePullSecrets) != "[{team} {sidecar-pull}]" {
		t.Errorf("injected %v with imagePullSecrets %v, want [team sidecar-pull]", inject.Injected(p), p.Spec.ImagePullSecrets)
	}
}
