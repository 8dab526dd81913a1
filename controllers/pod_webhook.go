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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/planner"
)

// PodWebhookPath is where the pod-injection webhook is served.
const PodWebhookPath = "/mutate-v1-pod"

// PodInjector is the mutating webhook that adds the sidecar to the pods
// labelled shardfeed.io/dataset (the rules are internal/inject's).
type PodInjector struct {
	// Reader reads datasets, their ConfigMaps and the pods' owners (the
	// manager's API reader: a state ConfigMap created for the job's
	// previous pod must be seen at once).
	Reader client.Reader
	// Writer creates each job's state ConfigMap, Role and RoleBinding.
	Writer  client.Client
	Decoder admission.Decoder
	// Images decides the sidecar's image: the operator's default, or a
	// dataset's within the platform's allow-list.
	Images inject.ImagePolicy
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
	if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Denied(fmt.Sprintf("the pod's label shardfeed.io/dataset names TrainingDataset %q, which does not exist in namespace %q: create it, or fix the label", name, ns))
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	owner, err := p.owner(ctx, ns, &pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	in := inject.Input{Pod: &pod, Dataset: &ds, Owner: owner, Images: p.Images}
	var plan corev1.ConfigMap
	if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(name)}, &plan); err == nil {
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
	if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
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
			if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &job); err != nil && !apierrors.IsNotFound(err) {
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
			if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &sts); err != nil && !apierrors.IsNotFound(err) {
				return o, err
			} else if err == nil && sts.Spec.Replicas != nil {
				o.Replicas = int(*sts.Spec.Replicas)
			}
		}
		return o, nil
	}
	return inject.Owner{}, nil
}

// The sidecar runs with its pod's ServiceAccount, which the operator does
// not own, so before a job's first pod starts the operator creates the
// job's state ConfigMap (pinning the sidecar image and plan version) and a
// Role that lets the pod's ServiceAccount read the plan and update that
// one ConfigMap, by name (design §7). Both are owned by the dataset.

// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;create;update;patch
// +kubebuilder:rbac:groups=data.shardfeed.io,resources=trainingdatasets/finalizers,verbs=update

// JobAccessName is the name of a job's Role and RoleBinding.
func JobAccessName(dataset, job string) string { return "shardfeed-" + dataset + "-" + job }

// pinnedState reads the job's state ConfigMap: the image and plan version
// the job started with, and whether the job has state at all.
func (p *PodInjector) pinnedState(ctx context.Context, ns, dataset, job string) (*configmaps.State, bool, error) {
	var cm corev1.ConfigMap
	err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.StateName(dataset, job)}, &cm)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	st, err := configmaps.StateFromData(cm.Data)
	if err != nil {
		return nil, true, fmt.Errorf("ConfigMap %s/%s: %w", ns, cm.Name, err)
	}
	return st, true, nil
}

// createState creates the job's state ConfigMap pinning image, and returns
// the image the job is pinned to: image, or the one a pod of the same job
// admitted a moment earlier pinned.
func (p *PodInjector) createState(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, image string) (string, error) {
	data, err := configmaps.StateData(&configmaps.State{Dataset: ds.Name, Job: job, SidecarImage: image, PlanVersion: planner.PlanVersion})
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: configmaps.StateName(ds.Name, job), Namespace: ds.Namespace,
			Labels:          jobLabels(ds.Name, job),
			OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)},
		},
		Data: data,
	}
	// Create, not apply: once created, the ConfigMap is the sidecars'.
	err = p.Writer.Create(ctx, cm, client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		st, _, err := p.pinnedState(ctx, ds.Namespace, ds.Name, job)
		if err != nil || st == nil {
			return "", fmt.Errorf("reading the state of job %q: %w", job, err)
		}
		if st.SidecarImage != "" {
			return st.SidecarImage, nil
		}
		return image, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating ConfigMap %s/%s: %w", ds.Namespace, cm.Name, err)
	}
	return image, nil
}

// grantAccess applies the job's Role and binds the pod's ServiceAccount to
// it; a job whose pods use several ServiceAccounts gets all of them bound.
func (p *PodInjector) grantAccess(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, serviceAccount string) error {
	name := JobAccessName(ds.Name, job)
	role := rbacv1ac.Role(name, ds.Namespace).
		WithLabels(jobLabels(ds.Name, job)).
		WithOwnerReferences(datasetOwnerApply(ds)).
		WithRules(
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").
				WithResourceNames(configmaps.PlanName(ds.Name)).WithVerbs("get"),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").
				WithResourceNames(configmaps.StateName(ds.Name, job)).WithVerbs("get", "update"),
		)
	if err := p.Writer.Apply(ctx, role, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying Role %s/%s: %w", ds.Namespace, name, err)
	}
	return p.bind(ctx, ds, job, serviceAccount)
}

// bind adds serviceAccount to the job's RoleBinding. Subjects is an atomic
// list, so this reads, adds and writes, retrying on a conflict, and never
// drops a ServiceAccount another pod of the job added.
func (p *PodInjector) bind(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, serviceAccount string) error {
	name := JobAccessName(ds.Name, job)
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ds.Namespace, Name: serviceAccount}
	for range 5 {
		var rb rbacv1.RoleBinding
		err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: name}, &rb)
		switch {
		case apierrors.IsNotFound(err):
			rb = rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ds.Namespace, Labels: jobLabels(ds.Name, job),
					OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{subject},
			}
			err = p.Writer.Create(ctx, &rb, client.FieldOwner(FieldOwner))
		case err != nil:
			return fmt.Errorf("reading RoleBinding %s/%s: %w", ds.Namespace, name, err)
		case slices.Contains(rb.Subjects, subject):
			return nil
		default:
			rb.Subjects = append(rb.Subjects, subject)
			err = p.Writer.Update(ctx, &rb, client.FieldOwner(FieldOwner))
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("binding ServiceAccount %s to Role %s/%s: %w", serviceAccount, ds.Namespace, name, err)
		}
		return nil
	}
	return fmt.Errorf("RoleBinding %s/%s: too many conflicting writes; the pod's creation is retried", ds.Namespace, name)
}

func jobLabels(dataset, job string) map[string]string {
	return map[string]string{configmaps.LabelDataset: dataset, configmaps.LabelJob: job, configmaps.LabelManagedBy: configmaps.ManagedBy}
}
