//go:build integration

package controllers_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/controllers"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/testenv"
)

// chartQueuedJobsWebhook is the chart's queued-jobs webhooks, as helm
// renders them (its selectors and match conditions are the ones
// under test).
func chartQueuedJobsWebhook(t *testing.T) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	cfg, _ := chartWithValues(t, "")
	if len(cfg.Webhooks) != 3 {
		t.Fatalf("the chart's queued-jobs webhooks: %d, want 3 (Jobs, JobSets, PyTorchJobs)", len(cfg.Webhooks))
	}
	return cfg
}

// chartWithValues renders the chart with a values file (none if ""): its
// queued-jobs webhooks, and the manager's arguments.
func chartWithValues(t *testing.T, values string) (*admissionregistrationv1.MutatingWebhookConfiguration, []string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "sf", filepath.Join(root, "charts", "shardfeed"),
		"--namespace", "shardfeed-system", "--kube-version", "1.36.0", "--show-only", "templates/webhook.yaml", "--show-only", "templates/deployment.yaml"}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "helm"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	var hooks *admissionregistrationv1.MutatingWebhookConfiguration
	var managerArgs []string
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		switch {
		case obj.GetKind() == "MutatingWebhookConfiguration" && obj.GetName() == "shardfeed-pod-injection":
			var cfg admissionregistrationv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cfg); err != nil {
				t.Fatal(err)
			}
			// The queued jobs' webhooks alone (the tests install their own
			// pod webhook under the configuration's name).
			cfg.Name = "shardfeed-queued-jobs"
			cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
				return !strings.HasSuffix(w.Name, ".queued-jobs.shardfeed.io")
			})
			hooks = &cfg
		case obj.GetKind() == "Deployment":
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				if m, _ := c.(map[string]any); m["name"] == "manager" {
					a, _, _ := unstructured.NestedStringSlice(m, "args")
					managerArgs = a
				}
			}
		}
	}
	if hooks == nil || managerArgs == nil {
		t.Fatalf("the chart renders no shardfeed-pod-injection webhook configuration (%v) or no manager container", hooks != nil)
	}
	return hooks, managerArgs
}

// A job a queue admits (Kueue's label) whose pod templates name a dataset
// gets, in each such template, a reservation of the sidecar's requests,
// which the pod webhook replaces with the sidecar: the queue counts what
// the pods will ask for. Jobs not queued, or whose templates name no
// dataset, are never sent to the webhook (the chart's selectors and match
// conditions, on a real API server); a dataset that does not exist yet
// leaves the job as it is, with a warning.
func TestIntegrationQueuedJobsReserveTheSidecarsRequestsInTheirTemplates(t *testing.T) {
	serveWebhook(t)
	pyTorchJobCRD(t)
	apiServer.InstallMutatingWebhook(t, chartQueuedJobsWebhook(t))
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("300Mi")}
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams: []datav1alpha1.Stream{{Name: "a", Source: datav1alpha1.Source{URI: "s3://data/a/"}}}, NumSplits: 8, GlobalBatchSize: 64,
		Sidecar: datav1alpha1.SidecarSpec{Resources: corev1.ResourceRequirements{Requests: requests}},
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	// The sidecar's requests: the dataset's, with the hand-off memory.
	memory := requests[corev1.ResourceMemory]
	memory.Add(*resource.NewQuantity(planspec.HandoffBytes(&ds.Spec), resource.BinarySI))
	requests[corev1.ResourceMemory] = memory
	queued := func(name string, labels map[string]string, guaranteed bool) *batchv1.Job {
		trainer := corev1.Container{Name: "trainer", Image: "pytorch"}
		if guaranteed {
			limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}
			trainer.Resources = corev1.ResourceRequirements{Requests: limits, Limits: limits}
		}
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{controllers.QueueNameLabel: "team"}},
			Spec: batchv1.JobSpec{Completions: ptr.To(int32(2)), Parallelism: ptr.To(int32(2)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Suspend: ptr.To(true),
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{trainer}, RestartPolicy: corev1.RestartPolicyNever}}},
		}
	}
	reservation := func(spec *corev1.PodSpec) *corev1.Container {
		for i := range spec.InitContainers {
			if inject.IsReservation(&spec.InitContainers[i]) {
				return &spec.InitContainers[i]
			}
		}
		return nil
	}

	// The API server takes the configuration up within moments: the first
	// job is made until it is reserved.
	var job *batchv1.Job
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		job = queued("train-"+string(rune('a'+i)), map[string]string{inject.LabelDataset: "web"}, false)
		if err := apiServer.Client.Create(ctx, job); err != nil {
			t.Fatal(err)
		}
		if reservation(&job.Spec.Template.Spec) != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := reservation(&job.Spec.Template.Spec)
	if r == nil {
		t.Fatalf("a queued Job labelled for a dataset has no reservation: %+v", job.Spec.Template.Spec.InitContainers)
	}
	if !equality.Semantic.DeepEqual(r.Resources.Requests, requests) || r.Resources.Limits != nil ||
		job.Spec.Template.Spec.InitContainers[0].Name != inject.SidecarName || ptr.Deref(r.RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
		t.Errorf("reservation %+v: want the dataset's requests %v, first, a native sidecar", r, requests)
	}

	// Its pods get the sidecar in the reservation's place, with its requests.
	pod := indexedJobPod(ns, job, 1, "web")
	pod.Spec = *job.Spec.Template.Spec.DeepCopy()
	if err := apiServer.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var sidecars []corev1.Container
	for _, c := range pod.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			sidecars = append(sidecars, c)
		}
	}
	if len(sidecars) != 1 || inject.IsReservation(&sidecars[0]) || !slices.Equal(sidecars[0].Command, []string{"/shardfeed"}) ||
		!equality.Semantic.DeepEqual(sidecars[0].Resources, r.Resources) {
		t.Errorf("the pod of a reserved template has init containers %+v: want one sidecar, with the reservation's resources %v", pod.Spec.InitContainers, r.Resources)
	}
	if contract := sidecarOf(t, pod); contract.Pods != 2 {
		t.Errorf("the pod is wired as %+v", contract.Placement)
	}

	// A Guaranteed template's reservation has limits equal to its
	// requests, as its pods' sidecar will.
	job = queued("guaranteed", map[string]string{inject.LabelDataset: "web"}, true)
	if err := apiServer.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if r := reservation(&job.Spec.Template.Spec); r == nil || !equality.Semantic.DeepEqual(r.Resources.Limits, requests) {
		t.Errorf("a Guaranteed template's reservation: %+v, want limits %v", r, requests)
	}

	// Not sent, or nothing to reserve: a job not queued, a queued job
	// whose template names no dataset.
	plain := queued("not-queued", map[string]string{inject.LabelDataset: "web"}, false)
	plain.Labels = nil
	other := queued("no-dataset", map[string]string{"app": "x"}, false)
	for _, j := range []*batchv1.Job{plain, other} {
		if err := apiServer.Client.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
		if len(j.Spec.Template.Spec.InitContainers) != 0 {
			t.Errorf("job %s was changed: %+v", j.Name, j.Spec.Template.Spec.InitContainers)
		}
	}

	// A dataset that does not exist yet: the job is created as it is, with
	// a warning that says so.
	warnings := &warningsCollector{}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.WarningHandler = warnings
	warned, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	missing := queued("missing", map[string]string{inject.LabelDataset: "later"}, false)
	if err := warned.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	if len(missing.Spec.Template.Spec.InitContainers) != 0 || len(warnings.seen) != 1 ||
		!strings.Contains(warnings.seen[0], `TrainingDataset "later" does not exist`) || !strings.Contains(warnings.seen[0], "not reserved") {
		t.Errorf("a job naming a missing dataset: init containers %+v, warnings %q", missing.Spec.Template.Spec.InitContainers, warnings.seen)
	}

	// A PyTorchJob: each labelled replica template is reserved.
	labelled := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{inject.LabelDataset: "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "pytorch"}}}}
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&labelled)
	if err != nil {
		t.Fatal(err)
	}
	ptj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
		"metadata": map[string]any{"name": "pt", "namespace": ns, "labels": map[string]any{controllers.QueueNameLabel: "team"}},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Master": map[string]any{"replicas": int64(1), "template": runtime.DeepCopyJSON(tmpl)},
			"Worker": map[string]any{"replicas": int64(3), "template": runtime.DeepCopyJSON(tmpl)}}},
	}}
	if err := apiServer.Client.Create(ctx, ptj); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"Master", "Worker"} {
		raw, _, _ := unstructured.NestedMap(ptj.Object, "spec", "pytorchReplicaSpecs", typ, "template")
		var got corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &got); err != nil {
			t.Fatal(err)
		}
		if r := reservation(&got.Spec); r == nil || !equality.Semantic.DeepEqual(r.Resources.Requests, requests) {
			t.Errorf("PyTorchJob %s template: reservation %+v", typ, r)
		}
	}
}
