package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/inject"
)

// JobWebhookPath is where the queued jobs' reservation webhook is served.
const JobWebhookPath = "/mutate-queued-jobs"

// QueueNameLabel is the label by which Kueue queues a job: the webhook's
// objectSelector.
const QueueNameLabel = "kueue.x-k8s.io/queue-name"

// JobReserver is the mutating webhook that adds, to each pod template of a
// queued job labelled shardfeed.io/dataset, a reservation of the sidecar's
// requests (inject.Reservation): a queue admits a job by its templates'
// requests, before the pod webhook adds the sidecar to its pods.
type JobReserver struct {
	// Pods is the pod webhook, whose readers, image policy and default
	// requests the reservation uses.
	Pods *PodInjector
}

// The webhook's marker is in zz_generated.jobkinds.go, from
// internal/jobkind's queued kinds.

// Handle reserves the sidecar's requests in a job's labelled templates. A
// template naming a dataset that does not exist yet is left as it is, with
// a warning: its pods wait for the dataset, and the job must not.
func (r *JobReserver) Handle(ctx context.Context, req admission.Request) admission.Response {
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	kind := r.Pods.Kinds.Lookup(req.Kind.Group, req.Kind.Kind)
	if kind == nil || !kind.Queued {
		return admission.Allowed("not a kind whose pod templates shardfeed reserves in")
	}
	templates := kind.PodTemplates(obj)
	if r.Pods.OperatorNamespace != "" && req.Namespace == r.Pods.OperatorNamespace {
		return admission.Allowed("the operator's namespace is never injected")
	}
	var warnings []string
	reserved := 0
	for _, t := range templates {
		var tmpl corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(t, &tmpl); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("reading a pod template of %s %s: %w", req.Kind.Kind, req.Name, err))
		}
		name := tmpl.Labels[inject.LabelDataset]
		if name == "" {
			continue
		}
		var ds datav1alpha1.TrainingDataset
		switch err := r.Pods.get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: name}, &ds); {
		case apierrors.IsNotFound(err):
			warnings = append(warnings, fmt.Sprintf("TrainingDataset %q does not exist in namespace %q: the sidecar's requests are not reserved in this job's quota, and its pods are refused until it exists", name, req.Namespace))
			continue
		case err != nil:
			return admission.Errored(http.StatusInternalServerError, err)
		}
		c := inject.Reservation(&tmpl, &ds, r.Pods.Images, r.Pods.Resources)
		if c == nil {
			continue
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		spec, _ := t["spec"].(map[string]any)
		inits, _ := spec["initContainers"].([]any)
		spec["initContainers"] = append([]any{u}, inits...)
		reserved++
	}
	if reserved == 0 {
		resp := admission.Allowed("no pod template to reserve in")
		resp.Warnings = warnings
		return resp
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	log.FromContext(ctx).Info("Reserved the sidecar's requests in a queued job", "kind", req.Kind.Kind, "job", req.Name, "templates", reserved)
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	resp.Warnings = warnings
	return resp
}
