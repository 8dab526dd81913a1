package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/sidecarconfig"
)

// webhookName is the pod webhook's name in the chart's
// MutatingWebhookConfiguration.
const webhookName = "pods.shardfeed.io"

func newWhyCommand(c *cluster) *cobra.Command {
	return &cobra.Command{
		Use:   "why POD | KIND/NAME",
		Short: "Say why a pod was (or was not) injected; for a Job or other owner (job/NAME), why its pods were refused",
		Long: `why explains the pod webhook's decision for a pod: injected (with the rank
wiring its sidecar was given), or not, and then why: no shardfeed.io/dataset
label, no webhook installed, a namespace or object selector that leaves the
pod out, or a pod created while the webhook was away (failurePolicy Ignore).

For an owner (job/NAME, jobset/NAME, statefulset/NAME, pytorchjob/NAME, ...)
whose pods were never created, it prints the webhook's refusals from the
owner's events: each says what is wrong and how to fix it.`,
		Args: cobra.ExactArgs(1),
		RunE: c.runE(func(ctx context.Context, cl client.Client, ns string, cmd *cobra.Command, args []string) error {
			if kind, name, ok := strings.Cut(args[0], "/"); ok {
				if strings.EqualFold(kind, "pod") || strings.EqualFold(kind, "pods") {
					return whyPod(ctx, cl, ns, name, cmd.OutOrStdout())
				}
				return whyOwner(ctx, cl, ns, kind, name, cmd.OutOrStdout())
			}
			return whyPod(ctx, cl, ns, args[0], cmd.OutOrStdout())
		}),
	}
}

func whyPod(ctx context.Context, cl client.Client, ns, name string, out io.Writer) error {
	pod := &corev1.Pod{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("pod %s/%s not found; for pods never created, ask about their owner: kubectl shardfeed why job/NAME", ns, name)
		}
		return err
	}
	r := &report{w: out}
	if inject.Injected(pod) {
		writeInjected(r, pod)
		return r.done(nil)
	}
	r.printf("Pod %s/%s was NOT injected:\n", ns, name)
	dataset, labelled := pod.Labels[inject.LabelDataset]
	if !labelled {
		r.printf("  - it has no %s label: the webhook sees only the pods that name their dataset.\n", inject.LabelDataset)
		r.printf("    Put the label on the pod template (%s),\n", whereLabels())
		r.println("    then create the job again.")
		return r.done(notInjected)
	}
	reasons := 0
	ds := &datav1alpha1.TrainingDataset{}
	switch err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: dataset}, ds); {
	case apierrors.IsNotFound(err):
		reasons++
		r.printf("  - its dataset %q does not exist in namespace %s (kubectl get tds -n %s); the webhook refuses such pods, so this one\n", dataset, ns, ns)
		r.println("    was admitted without it (see below).")
	case err != nil:
		return err
	case !ds.CreationTimestamp.Before(&pod.CreationTimestamp) && !ds.CreationTimestamp.Equal(&pod.CreationTimestamp):
		reasons++
		r.printf("  - the pod is older than its dataset %q (created %s, the dataset %s): recreate the pod.\n", dataset,
			pod.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"), ds.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
	}
	var hooks admissionregistrationv1.MutatingWebhookConfigurationList
	if err := cl.List(ctx, &hooks); err != nil {
		if apierrors.IsForbidden(err) {
			r.println("  - (you may not list MutatingWebhookConfigurations: ask a cluster admin to run this command to check the webhook)")
			return r.done(notInjected)
		}
		return err
	}
	var found []webhookOf
	for _, cfg := range hooks.Items {
		for _, h := range cfg.Webhooks {
			if h.Name == webhookName {
				found = append(found, webhookOf{cfg.Name, cfg.CreationTimestamp, h})
			}
		}
	}
	if len(found) == 0 {
		r.printf("  - no MutatingWebhookConfiguration has the webhook %s: the operator is not installed (helm install shardfeed ...;\n", webhookName)
		r.println("    shardfeed check-install checks an installation).")
		return r.done(notInjected)
	}
	nsObj := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil && !apierrors.IsForbidden(err) {
		return err
	}
	for _, w := range found {
		reasons += explainWebhook(r, w, pod, nsObj)
	}
	if reasons == 0 {
		r.println("  - the webhook selects this pod, so it was not reached when the pod was created, and its failurePolicy let the pod in:")
		r.println("    check the operator's pods and their logs (kubectl -n <operator namespace> logs deploy/shardfeed-controller-manager),")
		r.println("    then recreate the pod.")
	}
	return r.done(notInjected)
}

var notInjected = &checkFailed{what: "not injected"}

type webhookOf struct {
	config  string
	created metav1.Time
	hook    admissionregistrationv1.MutatingWebhook
}

// explainWebhook says what in one webhook leaves the pod out; it returns
// how many reasons it found.
func explainWebhook(r *report, w webhookOf, pod *corev1.Pod, ns *corev1.Namespace) int {
	reasons := 0
	if w.created.After(pod.CreationTimestamp.Time) {
		reasons++
		r.printf("  - the pod is older than the webhook (%s, created %s): recreate the pod.\n", w.config, w.created.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if sel, err := metav1.LabelSelectorAsSelector(w.hook.NamespaceSelector); err == nil && ns.Name != "" && !sel.Matches(labels.Set(ns.Labels)) {
		reasons++
		r.printf("  - namespace %s is outside the webhook's namespaceSelector (%s in %s): the operator's own namespace never gets\n", ns.Name, sel, w.config)
		r.println("    sidecars; for others, the chart's webhook.namespaceSelector decides.")
	}
	if sel, err := metav1.LabelSelectorAsSelector(w.hook.ObjectSelector); err == nil && !sel.Matches(labels.Set(pod.Labels)) {
		reasons++
		r.printf("  - the pod's labels are outside the webhook's objectSelector (%s in %s).\n", sel, w.config)
	}
	if len(w.hook.ClientConfig.CABundle) == 0 && w.hook.ClientConfig.Service != nil {
		reasons++
		r.printf("  - the webhook in %s has no caBundle yet: the API server cannot call it (the operator writes it at start).\n", w.config)
	}
	if w.hook.FailurePolicy != nil && *w.hook.FailurePolicy == admissionregistrationv1.Ignore && reasons == 0 {
		r.printf("  - the webhook's failurePolicy is Ignore (%s): a pod created while the operator was unreachable starts without a sidecar.\n", w.config)
	}
	return reasons
}

// writeInjected shows an injected pod's sidecar and its rank wiring, as
// the sidecar reads it.
func writeInjected(r *report, pod *corev1.Pod) {
	r.printf("Pod %s/%s was injected (dataset %q).\n", pod.Namespace, pod.Name, pod.Labels[inject.LabelDataset])
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.SidecarName })
	if i < 0 {
		r.printf("  but it has no %s container: something removed it after admission\n", inject.SidecarName)
		return
	}
	sc := pod.Spec.InitContainers[i]
	r.printf("  sidecar %s\n", sc.Image)
	for _, e := range sc.Env {
		switch e.Name {
		case sidecarconfig.EnvRankMode, sidecarconfig.EnvPodRank, sidecarconfig.EnvPods, sidecarconfig.EnvProcsPerPod, sidecarconfig.EnvDataParallel,
			sidecarconfig.EnvJob, sidecarconfig.EnvAttempt, sidecarconfig.EnvGeneration:
			v := e.Value
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				v = "from the pod's " + e.ValueFrom.FieldRef.FieldPath
			}
			r.printf("  %s=%s\n", e.Name, v)
		}
	}
}

// whyOwner prints the webhook's refusals of an owner's pods from its
// events (FailedCreate, the API server's "admission webhook ... denied").
func whyOwner(ctx context.Context, cl client.Client, ns, kind, name string, out io.Writer) error {
	var events corev1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(ns)); err != nil {
		return err
	}
	r := &report{w: out}
	var denials []string
	seen := map[string]bool{}
	for _, e := range events.Items {
		if e.InvolvedObject.Name != name || !strings.EqualFold(e.InvolvedObject.Kind, singular(kind)) {
			continue
		}
		if !strings.Contains(e.Message, webhookName) && !strings.Contains(e.Message, "shardfeed") {
			continue
		}
		if !seen[e.Message] {
			seen[e.Message] = true
			denials = append(denials, e.Message)
		}
	}
	if len(denials) == 0 {
		r.printf("No refusal by shardfeed's webhook in the events of %s %s/%s (events are kept about an hour).\n", singular(kind), ns, name)
		r.println("For a pod that exists: kubectl shardfeed why POD.")
		return r.done(nil)
	}
	r.printf("shardfeed's webhook refused pods of %s %s/%s:\n", singular(kind), ns, name)
	for _, d := range denials {
		r.println("  - " + d)
	}
	return r.done(&checkFailed{what: "refused"})
}

// singular is an event's kind for what a user types (job, jobs, Job, sts):
// a job kind's name, or what was typed for another kind.
func singular(kind string) string {
	if k := jobkind.Builtin().Named(kind); k != nil {
		return k.Kind
	}
	return kind
}

// whereLabels says where each job kind takes the dataset label.
func whereLabels() string {
	var where []string
	for _, k := range jobkind.Builtin().Kinds() {
		where = append(where, fmt.Sprintf("a %s's %s", k.Kind, k.LabelAt))
	}
	return strings.Join(where, "; ")
}
