package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
	"github.com/shardfeed/shardfeed/internal/progress"
	"github.com/shardfeed/shardfeed/internal/workloadidentity"
)

// PodWebhookPath is where the pod-injection webhook is served.
const PodWebhookPath = "/mutate-v1-pod"

// PodInjector is the mutating webhook that adds the sidecar to the pods
// labelled shardfeed.io/dataset (the rules are internal/inject's).
type PodInjector struct {
	// Cache, if set, is read first: the manager's cache of the datasets
	// and of the ConfigMaps shardfeed writes. A job's pods then cost one
	// API request each (their owner's GET) after the first.
	Cache client.Reader
	// Reader reads the pods' owners (never cached: the manager does not
	// watch the cluster's Jobs and StatefulSets) and what the cache does
	// not hold yet (a dataset seconds old): a direct client, whose
	// requests the manager counts (AdmissionAPIRequests).
	Reader client.Reader
	// ConfigMaps creates and updates each job's state ConfigMap (the
	// attempt's generation), compare-and-swap on its resourceVersion.
	ConfigMaps corev1client.ConfigMapsGetter
	Decoder    admission.Decoder
	// Images decides the sidecar's image: the operator's default, or a
	// dataset's within the platform's allow-list.
	Images inject.ImagePolicy
	// Operator is where sidecars record progress (the progress endpoint).
	Operator inject.Operator
	// Resources are the sidecar's default requests.
	Resources corev1.ResourceRequirements
	// Audiences are the workload identity audiences the platform allows
	// beside the clouds' own.
	Audiences []string
	// AllowedEndpoints and AllowCloudEndpoints are the platform's endpoint
	// policy (StorePolicy's), which sidecars check their requests and the
	// addresses they connect to against.
	AllowedEndpoints    []string
	AllowCloudEndpoints bool
	// NodeAgent, when its URL is set, is the node agent (the chart's
	// nodeCache.enabled): sidecars of the pods of NodeAgentNamespaces
	// ("*": all) ask it first, over TLS through its node-local Service.
	NodeAgent           inject.NodeAgent
	NodeAgentNamespaces []string
	// Kinds are the job kinds whose pods' owners the webhook reads and
	// ranks (nil: the built-in ones; the manager adds the platform's
	// --job-kinds).
	Kinds *jobkind.Registry
	// OperatorNamespace is never injected (the webhook configuration
	// excludes it too): the operator must start whatever the webhook does.
	OperatorNamespace string

	// admitting shares one Admit among the admissions of an attempt that
	// arrive before the cache holds its state: a job's first pods, which
	// would otherwise each read the state and race to write it.
	admitting singleflight.Group
}

// The configuration's objectSelector (the dataset label) and
// namespaceSelector (not the operator's namespace) are set in
// config/webhook and the Helm chart: markers cannot say them.
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=NoneOnDryRun,groups="",resources=pods,verbs=create,versions=v1,name=pods.shardfeed.io,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,timeoutSeconds=10

// The job kinds' RBAC (get, to size a pod's job) is in
// zz_generated.jobkinds.go, from internal/jobkind's rows.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update

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
		// Ours on a reinvocation; a pod's author may write the container
		// too, with a contract of their choosing (a generation that fences
		// the running job): only one the operator recorded passes.
		if req.DryRun != nil && *req.DryRun {
			return admission.Allowed("already injected (a dry run records nothing to check it against)")
		}
		if reason := p.foreignSidecar(ctx, req.Namespace, name, &pod); reason != "" {
			return admission.Denied(reason)
		}
		return admission.Allowed("already injected")
	}
	if p.OperatorNamespace != "" && req.Namespace == p.OperatorNamespace {
		return admission.Allowed("the operator's namespace is never injected")
	}
	ns := req.Namespace
	ds, plan, err := p.datasetAndPlan(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return admission.Denied(fmt.Sprintf("the pod's label shardfeed.io/dataset names TrainingDataset %q, which does not exist in namespace %q: create it, or fix the label", name, ns))
	}
	var notYours *notOwnedError
	if errors.As(err, &notYours) {
		return admission.Denied(err.Error())
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	owner, err := p.owner(ctx, ns, &pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	in := inject.Input{Pod: &pod, Dataset: ds, Owner: owner, Kinds: p.Kinds, Images: p.Images, Operator: p.Operator, Resources: p.Resources, Audiences: p.Audiences,
		AllowedEndpoints: p.AllowedEndpoints, AllowCloudEndpoints: p.AllowCloudEndpoints}
	if slices.Contains(p.NodeAgentNamespaces, "*") || slices.Contains(p.NodeAgentNamespaces, ns) {
		in.NodeAgent = p.NodeAgent
	}
	var planned *configmaps.Plan
	if plan != nil {
		if pl, err := configmaps.PlanFromData(plan.Data); err == nil {
			in.MinCacheBytes, in.MaxShardBytes, planned = pl.MinCacheBytes, pl.MaxShardBytes(), pl
		}
	}
	// A first pass decides the image the job would start with.
	mutated, err := inject.Inject(in)
	var denied *inject.Denied
	if errors.As(err, &denied) {
		return admission.Denied(denied.Reason)
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if reason, err := p.checkIdentities(ctx, ds, planned); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	} else if reason != "" {
		return admission.Denied(reason)
	}
	job, attempt := inject.JobName(&pod, owner), inject.Attempt(&pod, owner)
	state, err := p.admit(ctx, ds, job, attempt, sidecarImage(mutated), req.DryRun != nil && *req.DryRun)
	var notOwned *progress.NotOwnedError
	if errors.Is(err, progress.ErrRefused) || errors.As(err, &notOwned) {
		return admission.Denied(err.Error())
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	in.PinnedImage, in.Generation = state.SidecarImage, state.GenerationOf(attempt)
	if mutated, err = inject.Inject(in); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	log.FromContext(ctx).Info("Injected the sidecar", "pod", pod.Name+pod.GenerateName, "dataset", name, "job", job, "attempt", attempt, "generation", in.Generation)
	if ops, ok := podPatch(&pod, mutated); ok {
		return admission.Patched("", ops...)
	}
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// checkIdentities says why a pod may not read with the dataset's workload
// identities: the sidecar exchanges the pod's token for what the plan
// carries, so that must be what the pod's ServiceAccount names now
// (workloadidentity.Resolve), whoever wrote the plan and whenever (a plan
// of an operator before the annotations decided, or an annotation changed
// since). The ServiceAccount is read directly, never cached.
func (p *PodInjector) checkIdentities(ctx context.Context, ds *datav1alpha1.TrainingDataset, plan *configmaps.Plan) (string, error) {
	for i, s := range ds.Spec.Streams {
		wi := s.Source.WorkloadIdentity
		if wi == nil {
			continue
		}
		var sa corev1.ServiceAccount
		switch err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: wi.ServiceAccountName}, &sa); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("TrainingDataset %q: spec.streams[%d] (%q) reads as ServiceAccount %s/%s, which does not exist: create it, federated with the cloud (docs/stores.md)",
				ds.Name, i, s.Name, ds.Namespace, wi.ServiceAccountName), nil
		case err != nil:
			return "", fmt.Errorf("reading ServiceAccount %s/%s: %w", ds.Namespace, wi.ServiceAccountName, err)
		}
		resolved, err := workloadidentity.Resolve(s.Source, &sa)
		if err != nil {
			return fmt.Sprintf("TrainingDataset %q: spec.streams[%d] (%q): %v", ds.Name, i, s.Name, err), nil
		}
		if plan == nil {
			continue // the sidecar waits for the plan, which the reconciler resolves the same way
		}
		j := slices.IndexFunc(plan.Spec.Streams, func(p datav1alpha1.Stream) bool { return p.Name == s.Name })
		if j < 0 || plan.Spec.Streams[j].Source.WorkloadIdentity == nil || *plan.Spec.Streams[j].Source.WorkloadIdentity != *resolved.WorkloadIdentity {
			return fmt.Sprintf("TrainingDataset %q: the plan ConfigMap %s reads stream %q with another identity than ServiceAccount %s/%s names now (its annotations changed, or the plan predates them): the operator plans again within its index recheck (10 minutes by default); create the pod then",
				ds.Name, configmaps.PlanName(ds.Name), s.Name, ds.Namespace, wi.ServiceAccountName), nil
		}
	}
	return "", nil
}

// get reads key from the cache, else (not there yet, or no cache) from
// the API server.
func (p *PodInjector) get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if p.Cache != nil && p.Cache.Get(ctx, key, obj) == nil {
		return nil
	}
	return p.Reader.Get(ctx, key, obj)
}

// datasetAndPlan reads the dataset and its plan ConfigMap (nil if the
// reconciler has not written it yet), from the cache where it has them. A
// plan the cached dataset does not own may be a dataset deleted and made
// again a moment ago: both are read again from the API server before the
// plan is refused.
func (p *PodInjector) datasetAndPlan(ctx context.Context, ns, name string) (*datav1alpha1.TrainingDataset, *corev1.ConfigMap, error) {
	read := func(get func(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error) (*datav1alpha1.TrainingDataset, *corev1.ConfigMap, error) {
		var ds datav1alpha1.TrainingDataset
		if err := get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &ds); err != nil {
			return nil, nil, err
		}
		var plan corev1.ConfigMap
		switch err := get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.PlanName(name)}, &plan); {
		case apierrors.IsNotFound(err):
			return &ds, nil, nil
		case err != nil:
			return nil, nil, err
		}
		if err := ownedBy(&plan, &ds); err != nil {
			return &ds, nil, &notOwnedError{err}
		}
		return &ds, &plan, nil
	}
	ds, plan, err := read(p.get)
	var notYours *notOwnedError
	if errors.As(err, &notYours) && p.Cache != nil {
		return read(p.Reader.Get)
	}
	return ds, plan, err
}

// admit gives the pod's attempt its generation and pins the job's image
// and plan version in the job's state, before the pod exists and where only
// the operator writes. A dry run changes nothing: it returns the
// generation the attempt would get.
func (p *PodInjector) admit(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, attempt, image string, dryRun bool) (*configmaps.State, error) {
	if s := p.admitted(ctx, ds, job, attempt); s != nil {
		return s, nil
	}
	store := progress.NewConfigMapStore(p.ConfigMaps, ds.Namespace, ds.Name, job)
	owner := datasetOwner(ds)
	store.Owner, store.Outage = &owner, 5*time.Second
	if !dryRun {
		key := ds.Namespace + "/" + ds.Name + "/" + job + "/" + attempt
		v, err, _ := p.admitting.Do(key, func() (any, error) {
			return progress.Admit(ctx, store, ds.Name, job, attempt, image)
		})
		if err != nil {
			return nil, err
		}
		return v.(*configmaps.State), nil // read only, by every admission that shared it
	}
	state, err := store.Load(ctx)
	if err == nil && state.GenerationOf(attempt) == 0 {
		state.Attempts = append(state.Attempts, configmaps.Attempt{ID: attempt, Generation: state.Generation + 1})
	}
	return state, err
}

// foreignSidecar says why the pod's shardfeed-sidecar container is not one
// the operator injected for the dataset it names, or "": its contract must
// name the dataset, and the attempt with the generation its job's state
// recorded when the operator admitted it (read directly: a reinvocation
// follows the write by milliseconds).
func (p *PodInjector) foreignSidecar(ctx context.Context, ns, dataset string, pod *corev1.Pod) string {
	const fix = "remove it: the operator injects the sidecar itself"
	contract, err := inject.SidecarContract(pod)
	if err != nil {
		return fmt.Sprintf("the pod has a %s container the operator did not inject (%v): %s", inject.SidecarName, err, fix)
	}
	if contract.Dataset != dataset {
		return fmt.Sprintf("the pod's %s container names TrainingDataset %q, its label %q: %s", inject.SidecarName, contract.Dataset, dataset, fix)
	}
	var cm corev1.ConfigMap
	err = p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: configmaps.StateName(dataset, contract.Job)}, &cm)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Sprintf("reading the state of job %q to check the pod's %s container: %v", contract.Job, inject.SidecarName, err)
	}
	if err == nil {
		if s, err := configmaps.StateFromData(cm.Data); err == nil && s.Job == contract.Job && s.GenerationOf(contract.Attempt) == contract.Generation {
			return ""
		}
	}
	return fmt.Sprintf("the pod's %s container names attempt %q of job %q at generation %d, which the operator did not admit: %s",
		inject.SidecarName, contract.Attempt, contract.Job, contract.Generation, fix)
}

// admitted is the job's state from the cache when it already records the
// attempt, the image and the plan version (every pod of an attempt after
// its first): what Admit would return, with nothing to write. A cache a
// moment behind only sends the pod to Admit; a generation it holds is one
// the state gave the attempt (a state made again since is what a sidecar's
// registration already handles).
func (p *PodInjector) admitted(ctx context.Context, ds *datav1alpha1.TrainingDataset, job, attempt string) *configmaps.State {
	if p.Cache == nil {
		return nil
	}
	var cm corev1.ConfigMap
	if err := p.Cache.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: configmaps.StateName(ds.Name, job)}, &cm); err != nil || ownedBy(&cm, ds) != nil {
		return nil
	}
	s, err := configmaps.StateFromData(cm.Data)
	if err != nil || s.Dataset != ds.Name || s.Job != job || s.SidecarImage == "" || s.PlanVersion == 0 || s.GenerationOf(attempt) == 0 {
		return nil
	}
	return s
}

// ownedBy refuses a ConfigMap the dataset's reconciler did not write.
func ownedBy(cm *corev1.ConfigMap, ds *datav1alpha1.TrainingDataset) error {
	if cm.Labels[configmaps.LabelManagedBy] == configmaps.ManagedBy {
		if ref := metav1.GetControllerOf(cm); ref != nil && ref.UID == ds.UID {
			return nil
		}
	}
	return fmt.Errorf("ConfigMap %s/%s exists but shardfeed did not create it for TrainingDataset %q: shardfeed never adopts it; delete or rename it",
		cm.Namespace, cm.Name, ds.Name)
}

func sidecarImage(pod *corev1.Pod) string {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == inject.SidecarName {
			return c.Image
		}
	}
	return ""
}

// owner finds the pod's controller and, for a kind the registry sizes,
// the job's pods, from its object read unstructured (a kind's API need not
// be installed, nor its Go module linked). Where the object cannot be read
// (gone, or its CRD not installed), the size stays unknown: the pod then
// needs shardfeed.io/pods, or its kind's defaults apply.
func (p *PodInjector) owner(ctx context.Context, ns string, pod *corev1.Pod) (inject.Owner, error) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return inject.Owner{}, nil
	}
	o := inject.Owner{Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return o, nil // no kind's (the API server refuses such a reference)
	}
	o.Group = gv.Group
	kind := p.Kinds.Lookup(gv.Group, ref.Kind)
	if kind == nil || !kind.Owns {
		return o, nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ref.APIVersion)
	u.SetKind(ref.Kind)
	if err := p.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return o, nil
		}
		return o, err
	}
	if o.Replicas, o.Masters, err = kind.Size(u.Object); err != nil {
		return o, fmt.Errorf("%s %s/%s: %w", ref.Kind, ns, ref.Name, err)
	}
	o.Sized = true
	return o, nil
}
