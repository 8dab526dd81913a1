// Package controllers holds the operator's reconcilers.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ctrl "sigs.k8s.io/controller-runtime"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/internal/planspec"
	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/planner"
)

// FieldOwner is the field manager of everything the operator applies.
const FieldOwner = "shardfeed-operator"

// TrainingDatasetReconciler reads a TrainingDataset's indexes, writes its
// plan ConfigMap and reports totals, conditions and jobs' progress.
type TrainingDatasetReconciler struct {
	client.Client
	// APIReader reads Secrets directly: they are never cached.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// UnreachableRetry is the first wait before reading an unreachable
	// index again (the work queue backs off from there); default 5 s.
	UnreachableRetry time.Duration
	// Policy is what datasets' streams may be read from, and the bounds
	// on reading their indexes.
	Policy StorePolicy
	// IndexRecheck is how often a planned dataset's indexes are read again
	// to notice one written again in place (default 10 min). Between
	// those, a reconcile woken by a job's state only gathers status.jobs.
	IndexRecheck time.Duration
	// Workers reconcile datasets in parallel (default 4): a dataset whose
	// endpoint is slow holds one, not the controller.
	Workers int
	// OperatorCA returns the CA bundle sidecars verify the operator's
	// progress endpoint with; it goes into every plan ConfigMap.
	OperatorCA func() string
	// IndexImage is the image of the indexing Jobs' pods (spec.index): the
	// operator's sidecar image, pulled with IndexPullSecrets.
	IndexImage       string
	IndexPullSecrets []string

	caChanged chan event.GenericEvent
	applied   appliedPlans
}

// OperatorCAChanged has every dataset's plan ConfigMap written again with
// the bundle OperatorCA returns now. It never blocks: one pending request
// covers every call before it is handled.
func (r *TrainingDatasetReconciler) OperatorCAChanged() {
	select {
	case r.caChanged <- event.GenericEvent{Object: &datav1alpha1.TrainingDataset{}}:
	default:
	}
}

// notOwnedRetry is how often a dataset whose plan ConfigMap's name is
// taken looks again.
const notOwnedRetry = 30 * time.Second

// +kubebuilder:rbac:groups=data.shardfeed.io,resources=trainingdatasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=data.shardfeed.io,resources=trainingdatasets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is level-based: it computes everything from what exists and
// writes the status once, when the reconcile ends (writeStatus). When the
// plan this replica applied last still stands, it only gathers the jobs'
// progress; otherwise it runs the phases of planning, in order, until one
// ends the reconcile (each that fails says why in the conditions), and
// then marks the dataset Ready.
func (r *TrainingDatasetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	ds, err := r.fetch(ctx, req.NamespacedName)
	if ds == nil {
		return reconcile.Result{}, err
	}
	defer r.writeStatus(ctx, ds, ds.Status.DeepCopy(), &res, &err)

	// The CA is read once: the plan applied and the plan remembered carry
	// the same one, so a CA that changes mid-reconcile is applied by the
	// reconcile its change queued (remembering the new one with the old
	// one applied let that reconcile think the plan stood).
	p := &planning{ds: ds, ca: r.operatorCA()}
	p.last, p.stands = r.appliedStands(ctx, ds, p.ca)
	left := r.indexRecheck() - time.Since(p.last.at)
	if due, ok := recheckIn(ds, time.Now()); ok {
		left = min(left, due) // an indexed stream's check (spec.index.recheckEvery)
	}
	if p.stands && left > 0 && r.readyWith(ds, p.last.fingerprint) {
		// Only a job's state changed (a commit, a job's first pod): its
		// progress is all there is to gather.
		return reconcile.Result{RequeueAfter: left}, r.aggregateJobs(ctx, ds)
	}
	r.applied.forget(req.NamespacedName)
	DatasetPlans.WithLabelValues(req.Namespace, req.Name).Inc()
	defer p.releaseIndexes()
	for _, run := range []phase{r.resolveIndexes, r.computePlan, r.publishPlan, r.gatherJobs} {
		if res, done, err := run(ctx, p); done || err != nil {
			return res, err
		}
	}
	r.markPlanned(p)
	after := r.indexRecheck()
	if p.recheckAfter > 0 {
		after = min(after, p.recheckAfter)
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// fetch reads the dataset, or returns nil when it is gone, forgetting
// the plan this replica applied for it and its metrics.
func (r *TrainingDatasetReconciler) fetch(ctx context.Context, key types.NamespacedName) (*datav1alpha1.TrainingDataset, error) {
	var ds datav1alpha1.TrainingDataset
	if err := r.Get(ctx, key, &ds); err != nil {
		if apierrors.IsNotFound(err) {
			r.applied.forget(key)
			forgetDatasetMetrics(key.Namespace, key.Name)
		}
		return nil, client.IgnoreNotFound(err)
	}
	return &ds, nil
}

// planning is one reconcile's way through the phases of planning: the
// dataset, and what each phase found for the next.
type planning struct {
	ds *datav1alpha1.TrainingDataset
	// ca is the operator's CA bundle, as read once for the reconcile.
	ca string
	// last is the plan this replica applied for the dataset last, and
	// stands whether it still does (appliedStands).
	last   appliedPlan
	stands bool

	// indexes and planned are resolveIndexes's (readIndexes's), release
	// its hold on the bytes in flight, kept while the dataset is planned.
	indexes []planner.StreamIndex
	planned *datav1alpha1.TrainingDatasetSpec
	release func()
	// plan is computePlan's; data is the digest of the plan ConfigMap as
	// publishPlan left it, identities the workload identities it carries
	// (identitiesOf).
	plan       *planner.Plan
	data       dataDigest
	identities string
	// recheckAfter is when the next check of an indexed stream is due, or
	// a check running is to be looked at again (0: none).
	recheckAfter time.Duration
}

// releaseIndexes lets go of the indexes' share of the bytes in flight.
func (p *planning) releaseIndexes() {
	if p.release != nil {
		p.release()
	}
}

// A phase is one step of planning a dataset. done (or an error) ends the
// reconcile with res, the phase having set the conditions that say why;
// otherwise the next phase runs.
type phase func(ctx context.Context, p *planning) (res reconcile.Result, done bool, err error)

// resolveIndexes reads every stream's index (IndexResolved) and reports
// the streams' totals. An index it cannot read leaves the dataset waiting
// for it: read again after a while when unreachable, at the next spec or
// policy change when the policy refuses its source.
func (r *TrainingDatasetReconciler) resolveIndexes(ctx context.Context, p *planning) (reconcile.Result, bool, error) {
	ds := p.ds
	indexes, planned, release, err := r.readIndexes(ctx, ds)
	if res, handled, ierr := r.indexMissing(ctx, ds, err); handled {
		return res, true, ierr
	}
	if err != nil {
		reason, notAllowed := indexErrorReason(err)
		r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, reason, err.Error())
		r.setReady(ds, cause{datav1alpha1.ReasonWaitingForIndex, "the plan needs every stream's index"}, cause{reason, err.Error()})
		if notAllowed {
			return reconcile.Result{}, true, nil // a spec change (or a new policy, with a restart) triggers the next try
		}
		log.FromContext(ctx).Info("Index unreachable, retrying", "err", err.Error())
		return reconcile.Result{RequeueAfter: r.retry()}, true, nil
	}
	p.indexes, p.planned, p.release = indexes, planned, release
	r.setCondition(ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionTrue, datav1alpha1.ReasonIndexRead, fmt.Sprintf("read the index of %d stream(s)", len(indexes)))
	checked := map[string]*metav1.Time{}
	for _, t := range ds.Status.Streams {
		checked[t.Name] = t.IndexChecked
	}
	r.setTotals(ds, indexes)
	// Every stream has its index; spec.index.recheckEvery may be checking
	// some again, or indexing them again.
	still, next, err := r.recheckIndexes(ctx, ds, checked)
	if err != nil {
		return reconcile.Result{}, true, err
	}
	r.indexed(ds, still)
	ds.Status.Indexed = fmt.Sprintf("%d/%d", len(ds.Spec.Streams), len(ds.Spec.Streams))
	p.recheckAfter = next
	return reconcile.Result{}, false, nil
}

// computePlan plans the spec over the indexes and reports the plan's
// totals. A spec that cannot be planned waits for a change of the spec or
// of an index.
func (r *TrainingDatasetReconciler) computePlan(_ context.Context, p *planning) (reconcile.Result, bool, error) {
	ds := p.ds
	params, err := planspec.Params(&ds.Spec, p.indexes)
	if err == nil {
		p.plan, err = planner.New(params)
	}
	if err != nil {
		why := cause{datav1alpha1.ReasonInvalidPlan, "the spec cannot be planned with these indexes: " + err.Error()}
		r.setReady(ds, why, why)
		return reconcile.Result{}, true, nil // a spec or index change triggers the next try
	}
	ds.Status.Samples = p.plan.Total()
	ds.Status.PlanFingerprint = p.plan.Fingerprint().Sum
	ds.Status.StepsPerEpoch = p.plan.Steps()
	return reconcile.Result{}, false, nil
}

// publishPlan applies the plan ConfigMap, unless it holds this plan as
// applied already, and names it in the status. A ConfigMap of its name
// that is not the dataset's is looked at again after a while.
func (r *TrainingDatasetReconciler) publishPlan(ctx context.Context, p *planning) (reconcile.Result, bool, error) {
	ds := p.ds
	p.data, p.identities = p.last.data, identitiesOf(p.planned)
	if !p.stands || p.last.fingerprint != p.plan.Fingerprint().Sum || p.last.identities != p.identities {
		var err error
		if p.data, err = r.applyPlan(ctx, ds, p.planned, p.plan, p.indexes, p.ca); err != nil {
			return r.applyFailed(ds, err)
		}
	} // else the plan ConfigMap holds this plan, as applied: nothing to compute or write
	ds.Status.PlanConfigMap = configmaps.PlanName(ds.Name)
	return reconcile.Result{}, false, nil
}

// applyFailed says why the plan ConfigMap could not be applied.
func (r *TrainingDatasetReconciler) applyFailed(ds *datav1alpha1.TrainingDataset, err error) (reconcile.Result, bool, error) {
	reason := datav1alpha1.ReasonApplyFailed
	var notOwned *notOwnedError
	if errors.As(err, &notOwned) {
		reason = datav1alpha1.ReasonConfigMapNotOwned
	}
	why := cause{reason, err.Error()}
	r.setReady(ds, why, why)
	if notOwned != nil {
		// Not an error to back off from: someone must move the
		// ConfigMap away (it is not watched: it is not shardfeed's).
		return reconcile.Result{RequeueAfter: notOwnedRetry}, true, nil
	}
	return reconcile.Result{}, true, err
}

// gatherJobs reads the jobs' progress into status.jobs.
func (r *TrainingDatasetReconciler) gatherJobs(ctx context.Context, p *planning) (reconcile.Result, bool, error) {
	return reconcile.Result{}, false, r.aggregateJobs(ctx, p.ds)
}

// markPlanned marks the dataset Ready with its plan, and remembers the
// plan as applied: until it no longer stands, or IndexRecheck has passed,
// the reconciles the jobs' commits wake only gather their progress.
func (r *TrainingDatasetReconciler) markPlanned(p *planning) {
	ds, pl := p.ds, p.plan
	r.setReady(ds, cause{datav1alpha1.ReasonPlanned,
		fmt.Sprintf("plan %s: %d samples in %d splits, %d steps of %d per epoch", pl.Fingerprint().Sum, pl.Total(), pl.NumSplits(), pl.Steps(), pl.GlobalBatchSize())}, cause{})
	r.applied.remember(client.ObjectKeyFromObject(ds), appliedPlan{uid: ds.UID, generation: ds.Generation,
		fingerprint: pl.Fingerprint().Sum, operatorCA: p.ca, identities: p.identities, data: p.data, at: time.Now()})
}

func (r *TrainingDatasetReconciler) indexRecheck() time.Duration {
	if r.IndexRecheck > 0 {
		return r.IndexRecheck
	}
	return 10 * time.Minute
}

func (r *TrainingDatasetReconciler) operatorCA() string {
	if r.OperatorCA == nil {
		return ""
	}
	return r.OperatorCA()
}

// appliedStands returns the plan this replica applied last for ds, and
// whether it still stands: the same object, generation and operator CA,
// its plan ConfigMap in the cache as it was written.
func (r *TrainingDatasetReconciler) appliedStands(ctx context.Context, ds *datav1alpha1.TrainingDataset, ca string) (appliedPlan, bool) {
	a, ok := r.applied.get(client.ObjectKeyFromObject(ds))
	if !ok || a.uid != ds.UID || a.generation != ds.Generation || a.operatorCA != ca {
		return appliedPlan{}, false
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, client.ObjectKey{Namespace: ds.Namespace, Name: configmaps.PlanName(ds.Name)}, &cm); err != nil ||
		ownedBy(&cm, ds) != nil || dataSum(cm.Data) != a.data {
		return appliedPlan{}, false
	}
	return a, true
}

func (r *TrainingDatasetReconciler) retry() time.Duration {
	if r.UnreachableRetry > 0 {
		return r.UnreachableRetry
	}
	return 5 * time.Second
}

// SetupWithManager watches TrainingDatasets and the ConfigMaps shardfeed
// writes (the plan, and the jobs' state), mapped to their dataset by label.
func (r *TrainingDatasetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toDataset := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[configmaps.LabelDataset]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	r.caChanged = make(chan event.GenericEvent, 1)
	everyDataset := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list datav1alpha1.TrainingDatasetList
		if err := r.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "Listing the datasets to carry the operator's new CA to their plans")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, d := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&d)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&datav1alpha1.TrainingDataset{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.caChanged, everyDataset)).
		// The indexing Jobs (spec.index), each moving its stream on.
		Owns(&batchv1.Job{}).
		Watches(&corev1.ConfigMap{}, toDataset, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[configmaps.LabelManagedBy] == configmaps.ManagedBy
		}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.workers(),
			// The classic work queue: controller-runtime v0.24's priority
			// queue can deadlock as it shuts down (its hand-out goroutine
			// sends to a worker that already left, holding the queue's lock;
			// kubernetes-sigs/controller-runtime#3538, fixed in v0.25, which
			// needs the Kubernetes 1.37 libraries): a manager stopping for a
			// rollout then held its lease to the end of its grace period,
			// and the integration tests saw it outlive two minutes.
			UsePriorityQueue: ptr.To(false),
		}).
		Complete(r)
}

func (r *TrainingDatasetReconciler) workers() int {
	if r.Workers > 0 {
		return r.Workers
	}
	return 4
}

// indexErrorReason is the condition reason of an error reading a dataset's
// indexes, and whether it is one the policy refused (not retried until
// the spec or the policy changes).
func indexErrorReason(err error) (reason string, notAllowed bool) {
	var (
		ce       *credentialsError
		na       *notAllowedError
		tooLarge *indexfile.TooLargeError
		refused  *store.HostError
	)
	switch {
	case errors.As(err, &ce):
		return datav1alpha1.ReasonCredentials, false
	case errors.As(err, &na):
		return datav1alpha1.ReasonSourceNotAllowed, true
	case errors.As(err, &refused):
		// A host the policy refuses as the store reaches it (a connection
		// string's endpoint, an address a name resolves to).
		return datav1alpha1.ReasonSourceNotAllowed, true
	case errors.As(err, &tooLarge):
		return datav1alpha1.ReasonIndexTooLarge, false
	}
	return datav1alpha1.ReasonIndexUnreachable, false
}
