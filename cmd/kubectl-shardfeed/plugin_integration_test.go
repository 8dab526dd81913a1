//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/planner"
)

var apiServer *testenv.APIServer

func TestMain(m *testing.M) {
	var err error
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = apiServer.Stop()
	os.Exit(code)
}

// run runs the plugin as kubectl would, against the test's API server.
func run(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--kubeconfig", apiServer.Kubeconfig(t), "-n", ns}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// planned creates a dataset and what the operator writes for it: its plan
// ConfigMap and status.
func planned(t *testing.T, ns string) *datav1alpha1.TrainingDataset {
	t.Helper()
	ctx := context.Background()
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: datav1alpha1.TrainingDatasetSpec{
		Streams:   []datav1alpha1.Stream{{Name: "text", Source: datav1alpha1.Source{URI: "s3://data/text/"}}},
		NumSplits: 8, GlobalBatchSize: 64,
	}}
	if err := apiServer.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	plan := &configmaps.Plan{Spec: ds.Spec, Fingerprint: planner.Fingerprint{Sum: "v1-aaaa", Inputs: map[string]string{"spec.numSplits": "8"}},
		Streams:       []configmaps.StreamDigest{{Name: "text", ContentHash: "c0ffee", Shards: 12, Samples: 2560, Bytes: 3 << 30, MaxShardBytes: 256 << 20}},
		MinCacheBytes: map[int]int64{1: 1 << 30, 2: 768 << 20, 4: 512 << 20}}
	data, err := plan.Data()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName(ds.Name), Namespace: ns,
		Labels: map[string]string{configmaps.LabelDataset: ds.Name, configmaps.LabelManagedBy: configmaps.ManagedBy}}, Data: data}); err != nil {
		t.Fatal(err)
	}
	ds.Status = datav1alpha1.TrainingDatasetStatus{Samples: 2560, StepsPerEpoch: 40, PlanFingerprint: "v1-aaaa", PlanConfigMap: configmaps.PlanName(ds.Name),
		Conditions: []metav1.Condition{{Type: datav1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Planned", Message: "the plan is ready", LastTransitionTime: metav1.Now()}}}
	if err := apiServer.Client.Status().Update(ctx, ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// jobState writes a job's state ConfigMap as the operator does.
func jobState(t *testing.T, ns string, s *configmaps.State) {
	t.Helper()
	data, err := configmaps.StateData(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName(s.Dataset, s.Job),
		Namespace: ns, Labels: configmaps.JobLabels(s.Dataset, s.Job)}, Data: data}); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationPluginSummarizesThePlanAndPrintsItsManifest(t *testing.T) {
	ns := apiServer.Namespace(t)
	ds := planned(t, ns)
	out, err := run(t, ns, "plan", "web")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"plan v1-aaaa", "2560 samples, 8 splits, global batch 64, 40 steps per epoch", "text  12", "3.0 GiB",
		"Minimum cache per pod, by pod count: 1: 1.0 GiB, 2: 768.0 MiB, 4: 512.0 MiB", "Ready=True Planned: the plan is ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan says:\n%s\nwant %q in it", out, want)
		}
	}
	out, err = run(t, ns, "manifest", "web")
	if err != nil {
		t.Fatal(err)
	}
	var back datav1alpha1.TrainingDataset
	if err := yaml.UnmarshalStrict([]byte(out), &back); err != nil {
		t.Fatalf("the manifest does not parse: %v\n%s", err, out)
	}
	if back.Kind != "TrainingDataset" || back.Name != "web" || back.Spec.NumSplits != ds.Spec.NumSplits || back.Spec.Streams[0].Source.URI != "s3://data/text/" {
		t.Errorf("the manifest is\n%s\nnot the planned spec", out)
	}
	if _, err := run(t, ns, "plan", "nope"); err == nil || !strings.Contains(err.Error(), "TrainingDataset "+ns+"/nope not found") {
		t.Errorf("a missing dataset: %v", err)
	}
}

func TestIntegrationPluginChecksAJobsLineage(t *testing.T) {
	ns := apiServer.Namespace(t)
	planned(t, ns)
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	commit := func(epoch, step int64, attempt string, resumed bool) configmaps.Commit {
		at = at.Add(time.Minute)
		return configmaps.Commit{Epoch: epoch, Step: step, Attempt: attempt, Resumed: resumed, Time: at}
	}
	state := func(job, fingerprint string, history ...configmaps.Commit) *configmaps.State {
		last := history[len(history)-1]
		return &configmaps.State{Dataset: "web", Job: job, Fingerprint: planner.Fingerprint{Sum: fingerprint},
			Epoch: last.Epoch, Step: last.Step, Committed: &last.Time, Attempt: last.Attempt, Generation: 2,
			Attempts: []configmaps.Attempt{{ID: "a1", Generation: 1}, {ID: "a2", Generation: 2}}, Pods: 2, WorldSize: 8, History: history}
	}
	// Killed after step 20, resumed from its checkpoint at 15 by the next
	// attempt, then through the end of epoch 0 and into epoch 1.
	jobState(t, ns, state("good", "v1-aaaa", commit(0, 10, "a1", false), commit(0, 20, "a1", false), commit(0, 15, "a2", true),
		commit(0, 40, "a2", false), commit(1, 8, "a2", false)))
	out, err := run(t, ns, "progress", "web", "good")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Job good (TrainingDataset " + ns + "/web)", "resumes at epoch 1, step 8 of 40 (20.0% of epoch 1)", "2 pods, 8 ranks",
		"lineage check: ok: 5 commits in order", "trained exactly once so far: epoch 0 and steps 0–7 of epoch 1",
		"shardfeed plan -f - --ids --world-size 8 --epoch 1 --steps 0:8", "--epoch E   (E = 0 … 0, each whole)"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress says:\n%s\nwant %q in it", out, want)
		}
	}

	for _, tt := range []struct {
		name  string
		state *configmaps.State
		want  string
	}{
		{"another plan", func() *configmaps.State {
			s := state("moved", "v1-bbbb", commit(0, 10, "a2", false))
			s.Fingerprint.Inputs = map[string]string{"spec.numSplits": "4"}
			return s
		}(), "trains on plan v1-bbbb, the dataset's is now v1-aaaa: its ids are not the current plan's (a changed dataset is a new TrainingDataset); changed: spec.numSplits: 4, now 8"},
		{"a step back", state("back", "v1-aaaa", commit(0, 20, "a2", false), commit(0, 10, "a2", false)), "commit 1: epoch 0 step 10 after step 20, not a resume"},
		{"a fenced attempt", state("fenced", "v1-aaaa", commit(0, 10, "a2", false), commit(0, 12, "a1", false)), "attempt a1 (generation 1) after generation 2"},
		{"past the epoch", state("past", "v1-aaaa", commit(0, 41, "a2", false)), "step 41 passes the epoch's 40 steps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobState(t, ns, tt.state)
			out, err := run(t, ns, "progress", "web", tt.state.Job)
			var failed *checkFailed
			if !errors.As(err, &failed) || !strings.Contains(out, "lineage check: FAILED") || !strings.Contains(out, tt.want) {
				t.Errorf("got %v:\n%s\nwant a failed check saying %q", err, out, tt.want)
			}
		})
	}
	// Every job of the dataset at once: one failure fails the command.
	if out, err := run(t, ns, "progress", "web"); err == nil || strings.Count(out, "Job ") != 5 {
		t.Errorf("all jobs: %v\n%s", err, out)
	}
	if _, err := run(t, ns, "progress", "web", "never"); err == nil || !strings.Contains(err.Error(), `no job "never"`) {
		t.Errorf("a job that never started: %v", err)
	}
}

func TestIntegrationPluginSaysWhyAPodWasOrWasNotInjected(t *testing.T) {
	ctx := context.Background()
	ns := apiServer.Namespace(t)
	ds := planned(t, ns)
	create := func(name string, labels map[string]string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}}
		if err := apiServer.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(name string, injected bool, wants ...string) {
		t.Helper()
		out, err := run(t, ns, "why", name)
		if injected != (err == nil) {
			t.Errorf("why %s: %v\n%s", name, err, out)
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("why %s says:\n%s\nwant %q in it", name, out, want)
			}
		}
	}

	create("plain", nil)
	expect("plain", false, "NOT injected", "no shardfeed.io/dataset label")
	create("labelled", map[string]string{inject.LabelDataset: "web"})
	expect("labelled", false, "no MutatingWebhookConfiguration has the webhook pods.shardfeed.io")

	// An injected pod, as the webhook makes it: rank 3 of 4 of a Job.
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-3", Namespace: ns, Labels: map[string]string{inject.LabelDataset: "web"},
		Annotations: map[string]string{jobkind.JobCompletionIndex: "3"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "pytorch"}}}}
	p, err := inject.Inject(inject.Input{Pod: p, Dataset: ds, Owner: inject.Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 4},
		Images: inject.ImagePolicy{Default: "shardfeed:v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := apiServer.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	expect("train-3", true, `was injected (dataset "web")`, "sidecar shardfeed:v1", "SHARDFEED_PODS=4", "SHARDFEED_JOB=train",
		"SHARDFEED_POD_RANK=from the pod's metadata.annotations['batch.kubernetes.io/job-completion-index']")

	// The chart's webhook, installed after the pod and leaving its
	// namespace out (as it does the operator's own).
	hook := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "shardfeed-pod-injection-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: webhookName, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:   admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "shardfeed-system", Name: "shardfeed-webhook", Path: ptr.To("/mutate-v1-pod")}},
			SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			FailurePolicy:  ptr.To(admissionregistrationv1.Ignore),
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: inject.LabelDataset, Operator: metav1.LabelSelectorOpExists}}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns}}}},
		}}}
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds
	if err := apiServer.Client.Create(ctx, hook); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiServer.Client.Delete(context.Background(), hook) })
	expect("labelled", false, "the pod is older than the webhook", "namespace "+ns+" is outside the webhook's namespaceSelector", "has no caBundle yet")

	// A Job whose pods the webhook refused: its events say why.
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "train.1", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: ns, Name: "refused", APIVersion: "batch/v1"},
		Reason:         "FailedCreate", Type: corev1.EventTypeWarning,
		Message: `Error creating: admission webhook "pods.shardfeed.io" denied the request: 3 pods × 1 processes = 3 ranks do not divide numSplits 8: run 1, 2, 4 or 8 pods`}
	if err := apiServer.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, ns, "why", "job/refused")
	if err == nil || !strings.Contains(out, "3 ranks do not divide numSplits 8") {
		t.Errorf("why job/refused: %v\n%s", err, out)
	}
	if out, err := run(t, ns, "why", "job/fine"); err != nil || !strings.Contains(out, "No refusal") {
		t.Errorf("why job/fine: %v\n%s", err, out)
	}
}
