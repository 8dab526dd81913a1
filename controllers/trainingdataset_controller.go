// Package controllers holds the operator's reconcilers.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
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
// writes the status once.
func (r *TrainingDatasetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	logger := log.FromContext(ctx)
	var ds datav1alpha1.TrainingDataset
	if err := r.Get(ctx, req.NamespacedName, &ds); err != nil {
		if apierrors.IsNotFound(err) {
			r.applied.forget(req.NamespacedName)
			forgetDatasetMetrics(req.Namespace, req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := ds.Status.DeepCopy()
	defer func() {
		ds.Status.ObservedGeneration = ds.Generation
		if equality.Semantic.DeepEqual(before, &ds.Status) {
			return
		}
		if uerr := r.Status().Update(ctx, &ds); uerr != nil && !apierrors.IsConflict(uerr) {
			err = errors.Join(err, uerr)
		} else if apierrors.IsConflict(uerr) {
			res = reconcile.Result{RequeueAfter: time.Millisecond} // a newer object: compute again
		}
	}()

	// The CA is read once: the plan applied and the plan remembered carry
	// the same one, so a CA that changes mid-reconcile is applied by the
	// reconcile its change queued (remembering the new one with the old
	// one applied let that reconcile think the plan stood).
	ca := r.operatorCA()
	last, stands := r.appliedStands(ctx, &ds, ca)
	if left := r.indexRecheck() - time.Since(last.at); stands && left > 0 && r.readyWith(&ds, last.fingerprint) {
		// Only a job's state changed (a commit, a job's first pod): its
		// progress is all there is to gather.
		return reconcile.Result{RequeueAfter: left}, r.aggregateJobs(ctx, &ds)
	}
	r.applied.forget(req.NamespacedName)
	DatasetPlans.WithLabelValues(req.Namespace, req.Name).Inc()
	indexes, planned, release, err := r.readIndexes(ctx, &ds)
	if err == nil {
		defer release()
	}
	if err != nil {
		reason, notAllowed := indexErrorReason(err)
		r.setCondition(&ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionFalse, reason, err.Error())
		r.setCondition(&ds, datav1alpha1.ConditionReady, metav1.ConditionFalse, datav1alpha1.ReasonWaitingForIndex, "the plan needs every stream's index")
		r.setCondition(&ds, datav1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, err.Error())
		if notAllowed {
			return reconcile.Result{}, nil // a spec change (or a new policy, with a restart) triggers the next try
		}
		logger.Info("Index unreachable, retrying", "err", err.Error())
		return reconcile.Result{RequeueAfter: r.retry()}, nil
	}
	r.setCondition(&ds, datav1alpha1.ConditionIndexResolved, metav1.ConditionTrue, datav1alpha1.ReasonIndexRead, fmt.Sprintf("read the index of %d stream(s)", len(indexes)))
	r.setTotals(&ds, indexes)

	params, err := planspec.Params(&ds.Spec, indexes)
	var pl *planner.Plan
	if err == nil {
		pl, err = planner.New(params)
	}
	if err != nil {
		msg := "the spec cannot be planned with these indexes: " + err.Error()
		r.setCondition(&ds, datav1alpha1.ConditionReady, metav1.ConditionFalse, datav1alpha1.ReasonInvalidPlan, msg)
		r.setCondition(&ds, datav1alpha1.ConditionDegraded, metav1.ConditionTrue, datav1alpha1.ReasonInvalidPlan, msg)
		return reconcile.Result{}, nil // a spec or index change triggers the next try
	}
	ds.Status.Samples = pl.Total()
	ds.Status.PlanFingerprint = pl.Fingerprint().Sum
	ds.Status.StepsPerEpoch = pl.Steps()
	planData := last.data
	identities := identitiesOf(planned)
	if !stands || last.fingerprint != pl.Fingerprint().Sum || last.identities != identities {
		planData, err = r.applyPlan(ctx, &ds, planned, pl, indexes, ca)
	} // else the plan ConfigMap holds this plan, as applied: nothing to compute or write
	if err != nil {
		reason := datav1alpha1.ReasonApplyFailed
		var notOwned *notOwnedError
		if errors.As(err, &notOwned) {
			reason = datav1alpha1.ReasonConfigMapNotOwned
		}
		r.setCondition(&ds, datav1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
		r.setCondition(&ds, datav1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, err.Error())
		if notOwned != nil {
			// Not an error to back off from: someone must move the
			// ConfigMap away (it is not watched: it is not shardfeed's).
			return reconcile.Result{RequeueAfter: notOwnedRetry}, nil
		}
		return reconcile.Result{}, err
	}
	ds.Status.PlanConfigMap = configmaps.PlanName(ds.Name)
	if err := r.aggregateJobs(ctx, &ds); err != nil {
		return reconcile.Result{}, err
	}
	r.setCondition(&ds, datav1alpha1.ConditionReady, metav1.ConditionTrue, datav1alpha1.ReasonPlanned,
		fmt.Sprintf("plan %s: %d samples in %d splits, %d steps of %d per epoch", pl.Fingerprint().Sum, pl.Total(), pl.NumSplits(), pl.Steps(), pl.GlobalBatchSize()))
	r.setCondition(&ds, datav1alpha1.ConditionDegraded, metav1.ConditionFalse, datav1alpha1.ReasonHealthy, "")
	r.applied.remember(req.NamespacedName, appliedPlan{uid: ds.UID, generation: ds.Generation,
		fingerprint: pl.Fingerprint().Sum, operatorCA: ca, identities: identities, data: planData, at: time.Now()})
	return reconcile.Result{RequeueAfter: r.indexRecheck()}, nil
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

// readyWith says whether ds's status says Ready with plan fingerprint.
func (r *TrainingDatasetReconciler) readyWith(ds *datav1alpha1.TrainingDataset, fingerprint string) bool {
	ready := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady)
	return ds.Status.PlanFingerprint == fingerprint && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == ds.Generation
}

func (r *TrainingDatasetReconciler) retry() time.Duration {
	if r.UnreachableRetry > 0 {
		return r.UnreachableRetry
	}
	return 5 * time.Second
}

// setCondition sets a condition with the object's generation and records
// an event when its status changes.
func (r *TrainingDatasetReconciler) setCondition(ds *datav1alpha1.TrainingDataset, typ string, status metav1.ConditionStatus, reason, msg string) {
	old := meta.FindStatusCondition(ds.Status.Conditions, typ)
	changed := old == nil || old.Status != status || old.Reason != reason
	meta.SetStatusCondition(&ds.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: ds.Generation,
	})
	if !changed || r.Recorder == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if (typ == datav1alpha1.ConditionDegraded) == (status == metav1.ConditionTrue) {
		kind = corev1.EventTypeWarning
	}
	if msg == "" {
		msg = reason
	}
	r.Recorder.Eventf(ds, nil, kind, reason, "Reconcile", "%s=%s: %s", typ, status, msg)
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
		Watches(&corev1.ConfigMap{}, toDataset, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[configmaps.LabelManagedBy] == configmaps.ManagedBy
		}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers()}).
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
