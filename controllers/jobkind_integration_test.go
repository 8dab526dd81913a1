//go:build integration

package controllers_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
)

// A platform's in-house job CRD, declared in the chart's values: no
// rebuild.
const trainRunValues = `
jobKinds:
  - group: training.example.com
    version: v1
    kind: TrainRun
    resource: trainruns
    podTemplates: [spec.template, "spec.roles.*.template"]
    replicas: [spec.workers, spec.chiefs]
    rank: {label: training.example.com/worker-index}
    queued: true
`

// installCRD installs a namespaced CRD whose objects keep any field.
func installCRD(t *testing.T, group, kind, plural string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{crd}
	if err := envtest.CreateCRDs(apiServer.Config, crds); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(apiServer.Config, crds, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

// A platform declares its own job CRD in the chart's values, and a test
// registers a toy kind in Go with a rank of its own: the manager's
// arguments carry the declaration, the chart's queued-jobs webhook sends a
// queued TrainRun whose template names a dataset (its match condition,
// made by the chart from the paths, is the one internal/jobkind makes), the
// sidecar's requests are reserved in it, and the pods each kind's
// controller creates are admitted and ranked, the job sized from its
// object, on a real API server.
func TestIntegrationAPlatformsOwnJobKindsAreAdmittedRankedAndReserved(t *testing.T) {
	hooks, args := chartWithValues(t, trainRunValues)
	var declared []*jobkind.Kind
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--job-kinds="); ok {
			var err error
			if declared, err = jobkind.Parse([]byte(v)); err != nil {
				t.Fatalf("the manager refuses the chart's --job-kinds: %v", err)
			}
		}
	}
	if len(declared) != 1 {
		t.Fatalf("the chart passes the manager %d job kinds, want 1 (args %q)", len(declared), args)
	}
	// A toy kind registered in Go: each pod's rank is twice its "half"
	// label (a rank source of the test's own).
	toy := &jobkind.Kind{Group: "toy.example.com", Version: "v1", Kind: "Toy", Resource: "toys", Owns: true,
		Replicas: []jobkind.Replicas{{Path: "spec.size"}},
		Rank: func(pod *corev1.Pod, owner jobkind.Owner, pods int) (jobkind.Placement, bool, error) {
			if owner.Kind != "Toy" {
				return jobkind.Placement{}, false, nil
			}
			half, err := strconv.Atoi(pod.Labels["toy.example.com/half"])
			if err != nil {
				return jobkind.Placement{}, true, &jobkind.Refusal{Reason: "a Toy pod without its half"}
			}
			return jobkind.Placement{Rank: 2 * half, Pods: owner.Replicas}, true, nil
		}}
	kinds, err := jobkind.Builtin().With(append(declared, toy)...)
	if err != nil {
		t.Fatal(err)
	}
	// The chart's match conditions are internal/jobkind's, kind by kind.
	if len(hooks.Webhooks) != 4 {
		t.Fatalf("the chart's queued-jobs webhooks with a queued kind declared: %d, want 4", len(hooks.Webhooks))
	}
	for _, h := range hooks.Webhooks {
		r := h.Rules[0]
		var k *jobkind.Kind
		for _, c := range kinds.Kinds() {
			if c.Group == r.APIGroups[0] && c.Resource == r.Resources[0] {
				k = c
			}
		}
		if k == nil || len(h.MatchConditions) != 1 || h.MatchConditions[0].Expression != k.LabelledCEL(inject.LabelDataset) {
			t.Errorf("webhook %s: match conditions %+v, want internal/jobkind's for its kind", h.Name, h.MatchConditions)
		}
	}

	installCRD(t, "training.example.com", "TrainRun", "trainruns")
	installCRD(t, "toy.example.com", "Toy", "toys")
	pods := testInjector(apiServer.Client, kubernetes.NewForConfigOrDie(apiServer.Config).CoreV1())
	pods.Kinds = kinds
	serveWebhookWith(t, pods)
	apiServer.InstallMutatingWebhook(t, hooks)
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}

	// A queued TrainRun: its labelled templates get the reservation (the
	// API server takes the configuration up within moments).
	labelled := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{inject.LabelDataset: "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&labelled)
	if err != nil {
		t.Fatal(err)
	}
	reserved := func(run *unstructured.Unstructured, path ...string) bool {
		inits, _, _ := unstructured.NestedSlice(run.Object, append(path, "spec", "initContainers")...)
		for _, c := range inits {
			var ctr corev1.Container
			if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &ctr) == nil && inject.IsReservation(&ctr) {
				return true
			}
		}
		return false
	}
	var run *unstructured.Unstructured
	for i, deadline := 0, time.Now().Add(20*time.Second); ; i++ {
		run = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "training.example.com/v1", "kind": "TrainRun",
			"metadata": map[string]any{"name": "queued-" + strconv.Itoa(i), "namespace": ns, "labels": map[string]any{controllers.QueueNameLabel: "team"}},
			"spec": map[string]any{"workers": int64(2), "template": runtime.DeepCopyJSON(tmpl),
				"roles": map[string]any{"chief": map[string]any{"template": runtime.DeepCopyJSON(tmpl)}}},
		}}
		if err := apiServer.Client.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		if reserved(run, "spec", "template") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !reserved(run, "spec", "template") || !reserved(run, "spec", "roles", "chief", "template") {
		t.Fatalf("a queued TrainRun's labelled templates were not reserved: %v", run.Object["spec"])
	}

	// A TrainRun of 3 workers and 1 chief: its pods are ranked by their
	// index label, of 4 pods; one outside them is refused.
	owned := func(apiVersion, kind string, obj *unstructured.Unstructured, name string, labels map[string]string) *corev1.Pod {
		labels[inject.LabelDataset] = "web"
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}},
		}
	}
	run = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "training.example.com/v1", "kind": "TrainRun",
		"metadata": map[string]any{"name": "run", "namespace": ns},
		"spec":     map[string]any{"workers": int64(3), "chiefs": int64(1)},
	}}
	if err := apiServer.Client.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	p := owned("training.example.com/v1", "TrainRun", run, "run-2", map[string]string{"training.example.com/worker-index": "2"})
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if env := sidecarEnvOf(p); env["SHARDFEED_POD_RANK"] != "2" || env["SHARDFEED_PODS"] != "4" || env["SHARDFEED_JOB"] != "run" || env["SHARDFEED_ATTEMPT"] != string(run.GetUID()) {
		t.Errorf("TrainRun pod wired as %v", env)
	}
	p = owned("training.example.com/v1", "TrainRun", run, "run-4", map[string]string{"training.example.com/worker-index": "4"})
	if err := apiServer.Client.Create(ctx, p); err == nil || !strings.Contains(err.Error(), "TrainRun pod with label training.example.com/worker-index=4 outside its 4 pods") {
		t.Errorf("a TrainRun pod outside its job: %v", err)
	}

	// The toy kind's pod: rank 2 × 3 of its 8.
	toyJob := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "toy.example.com/v1", "kind": "Toy",
		"metadata": map[string]any{"name": "toy", "namespace": ns}, "spec": map[string]any{"size": int64(8)},
	}}
	if err := apiServer.Client.Create(ctx, toyJob); err != nil {
		t.Fatal(err)
	}
	p = owned("toy.example.com/v1", "Toy", toyJob, "toy-a", map[string]string{"toy.example.com/half": "3"})
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if env := sidecarEnvOf(p); env["SHARDFEED_POD_RANK"] != "6" || env["SHARDFEED_PODS"] != "8" || env["SHARDFEED_JOB"] != "toy" {
		t.Errorf("Toy pod wired as %v", env)
	}
	p = owned("toy.example.com/v1", "Toy", toyJob, "toy-b", map[string]string{})
	if err := apiServer.Client.Create(ctx, p); err == nil || !strings.Contains(err.Error(), "a Toy pod without its half") {
		t.Errorf("a Toy pod without its rank: %v", err)
	}
}

// sidecarEnvOf is the injected sidecar's environment.
func sidecarEnvOf(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, c := range p.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			for _, e := range c.Env {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}
