package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
)

// PodWebhookPath is where the pod-injection webhook is served.
const PodWebhookPath = "/mutate-v1-pod"

// PodInjector is the mutating webhook that adds the sidecar to the pods
// labelled shardfeed.io/dataset (the rules are internal/inject's).
type PodInjector struct {
	// Reader reads datasets, their ConfigMaps and the pods' owners (the
	// manager's API reader: a state ConfigMap created for the job's
	// previous pod must be seen at once).
	Reader ctrl.Reader
	// Writer creates each job's state ConfigMap, Role and RoleBinding.
	Writer       ctrl.Client
	Decoder      admission.Decoder
	DefaultImage string
	// OperatorNamespace is never injected (the webhook configuration
	// excludes it too): the operator must start whatever the webhook does.
	OperatorNamespace string

	// granted remembers, for a minute, the (namespace, dataset, job,
	// ServiceAccount) whose Role and binding were just applied: a job's
	// pods arrive in a burst and need them once.
	granted sync.Map
}

const grantedFor = time.Minute

// The configuration's objectSelector (the dataset label) and
// namespaceSelector (not the operator's namespace) are set in
// config/webhook and the Helm chart: markers cannot say them.
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=pods.shardfeed.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=10

// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get
// +kubebuilder:rbac:groups=kubeflow.org,resources=pytorchjobs,verbs=get

// Handle injects the sidecar, or denies a pod that cannot be served.
func (p *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := p.Decoder.Decode(req, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	name := pod.Labels[inject.LabelDataset]
	if name == "" {
		return admission.Allowed("no shardfeed.io/dataset label")
	}
	if inject.Injected(&pod) {
		return admission.Allowed("already injected")
	}
	if p.OperatorNamespace != "" && req.Namespace == p.OperatorNamespace {
		return admission.Allowed("the operator's namespace is never injected")
	}
	ns := req.Namespace
	var ds datav1alpha1.TrainingDataset
	if err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Denied(fmt.Sprintf("the pod's label shardfeed.io/dataset names TrainingDataset %q, which does not exist in namespace %q: create it, or fix the label", name, ns))
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	owner, err := p.owner(ctx, ns, &pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	in := inject.Input{Pod: &pod, Dataset: &ds, Owner: owner, DefaultImage: p.DefaultImage}
	var plan corev1.ConfigMap
	if err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: configmaps.PlanName(name)}, &plan); err == nil {
		if pl, err := configmaps.PlanFromData(plan.Data); err == nil {
			in.MinCacheBytes, in.MaxShardBytes = pl.MinCacheBytes, pl.MaxShardBytes()
		}
	}
	job := inject.JobName(&pod, owner)
	state, hasState, err := p.pinnedState(ctx, ns, name, job)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if state != nil {
		in.PinnedImage = state.SidecarImage
	}
	mutated, err := inject.Inject(in)
	var denied *inject.Denied
	if errors.As(err, &denied) {
		return admission.Denied(denied.Reason)
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// Side effects only for a real creation (the webhook is
	// sideEffects: NoneOnDryRun).
	if req.DryRun == nil || !*req.DryRun {
		if !hasState {
			image := sidecarImage(mutated)
			pinned, err := p.createState(ctx, &ds, job, image)
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			if pinned != image { // another pod of the job pinned first
				in.PinnedImage = pinned
				if mutated, err = inject.Inject(in); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
		}
		key := ns + "/" + name + "/" + job + "/" + serviceAccount(&pod)
		if at, ok := p.granted.Load(key); !ok || time.Since(at.(time.Time)) > grantedFor {
			if err := p.grantAccess(ctx, &ds, job, serviceAccount(&pod)); err != nil {
				return admission.Errored(http.StatusInternalServerError, err)
			}
			p.granted.Store(key, time.Now())
		}
	}
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	log.FromContext(ctx).Info("Injected the sidecar", "pod", pod.Name+pod.GenerateName, "dataset", name, "job", job)
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

func sidecarImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			return c.Image
		}
	}
	return ""
}

func serviceAccount(pod *corev1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return pod.Spec.ServiceAccountName
	}
	return "default"
}

// pyTorchJobSize reads a Kubeflow PyTorchJob's Master and Worker replicas
// (unstructured: the Kubeflow API need not be installed, nor its Go module
// linked). Where it cannot be read, the masters default to Kubeflow's one
// and the size stays unknown (the pod then needs shardfeed.io/pods).
func (p *PodInjector) pyTorchJobSize(ctx context.Context, ns, name, apiVersion string) (replicas, masters int, err error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind("PyTorchJob")
	if err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return 0, 1, nil
		}
		return 0, 0, err
	}
	for _, typ := range []string{"Master", "Worker"} {
		path := []string{"spec", "pytorchReplicaSpecs", typ}
		if _, has, _ := unstructured.NestedMap(u.Object, path...); !has {
			continue
		}
		n, found, err := unstructured.NestedInt64(u.Object, append(path, "replicas")...)
		if err != nil {
			return 0, 0, fmt.Errorf("PyTorchJob %s/%s: spec.pytorchReplicaSpecs.%s.replicas: %w", ns, name, typ, err)
		}
		if !found {
			n = 1 // Kubeflow's default
		}
		replicas += int(n)
		if typ == "Master" {
			masters = int(n)
		}
	}
	return replicas, masters, nil
}

// owner finds the pod's controlling Job, StatefulSet or PyTorchJob and its
// size.
func (p *PodInjector) owner(ctx context.Context, ns string, pod *corev1.Pod) (inject.Owner, error) {
	var err error
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		o := inject.Owner{Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
		switch ref.Kind {
		case "Job":
			var job batchv1.Job
			if err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: ref.Name}, &job); err != nil && !apierrors.IsNotFound(err) {
				return o, err
			} else if err == nil && job.Spec.Completions != nil {
				o.Replicas = int(*job.Spec.Completions)
			}
		case "PyTorchJob":
			o.Replicas, o.Masters, err = p.pyTorchJobSize(ctx, ns, ref.Name, ref.APIVersion)
			if err != nil {
				return o, err
			}
		case "StatefulSet":
			var sts appsv1.StatefulSet
			if err := p.Reader.Get(ctx, ctrl.ObjectKey{Namespace: ns, Name: ref.Name}, &sts); err != nil && !apierrors.IsNotFound(err) {
				return o, err
			} else if err == nil && sts.Spec.Replicas != nil {
				o.Replicas = int(*sts.Spec.Replicas)
			}
		}
		return o, nil
	}
	return inject.Owner{}, nil
}
