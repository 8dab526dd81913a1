package controllers

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// writeStatus is a reconcile's one status write, deferred with the status
// as the reconcile found it (before): made only when the status changed,
// with status.observedGeneration. Its error joins the reconcile's (*err);
// a conflict (a newer object) has the reconcile run again at once (*res).
func (r *TrainingDatasetReconciler) writeStatus(ctx context.Context, ds *datav1alpha1.TrainingDataset, before *datav1alpha1.TrainingDatasetStatus, res *reconcile.Result, err *error) {
	ds.Status.ObservedGeneration = ds.Generation
	if equality.Semantic.DeepEqual(before, &ds.Status) {
		return
	}
	if uerr := r.Status().Update(ctx, ds); uerr != nil && !apierrors.IsConflict(uerr) {
		*err = errors.Join(*err, uerr)
	} else if apierrors.IsConflict(uerr) {
		*res = reconcile.Result{RequeueAfter: time.Millisecond} // a newer object: compute again
	}
}

// cause is a condition's reason and message.
type cause struct{ reason, message string }

// setReady sets the Ready/Degraded pair, which always disagree, in that
// order (their events follow it). With no degraded cause (the zero
// cause), the dataset is Ready for ready's reason and not Degraded
// (Healthy); otherwise it is not Ready, for ready's reason, and Degraded
// for degraded's, which is the same cause unless the dataset waits on
// something (an index) that degraded names.
func (r *TrainingDatasetReconciler) setReady(ds *datav1alpha1.TrainingDataset, ready, degraded cause) {
	if degraded == (cause{}) {
		r.setCondition(ds, datav1alpha1.ConditionReady, metav1.ConditionTrue, ready.reason, ready.message)
		r.setCondition(ds, datav1alpha1.ConditionDegraded, metav1.ConditionFalse, datav1alpha1.ReasonHealthy, "")
		return
	}
	r.setCondition(ds, datav1alpha1.ConditionReady, metav1.ConditionFalse, ready.reason, ready.message)
	r.setCondition(ds, datav1alpha1.ConditionDegraded, metav1.ConditionTrue, degraded.reason, degraded.message)
}

// setCondition sets a condition with the object's generation and records
// an event when its status or reason changes.
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

// readyWith says whether ds's status says Ready with plan fingerprint.
func (r *TrainingDatasetReconciler) readyWith(ds *datav1alpha1.TrainingDataset, fingerprint string) bool {
	ready := meta.FindStatusCondition(ds.Status.Conditions, datav1alpha1.ConditionReady)
	return ds.Status.PlanFingerprint == fingerprint && ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == ds.Generation
}
