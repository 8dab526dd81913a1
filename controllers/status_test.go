package controllers

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

// TestTheReadyDegradedPairSaysEachOutcomeOnceWithItsEvents walks one
// dataset through the outcomes a reconcile ends with: each sets Ready and
// Degraded to opposite statuses with the dataset's generation, and records
// an event for each condition whose status or reason changed (a Warning
// for Ready=False and Degraded=True), none for an outcome repeated.
func TestTheReadyDegradedPairSaysEachOutcomeOnceWithItsEvents(t *testing.T) {
	type want struct {
		ready, degraded metav1.Condition // Type and ObservedGeneration are filled in
		events          []string
	}
	waiting := cause{datav1alpha1.ReasonWaitingForIndex, "the plan needs every stream's index"}
	unreachable := cause{datav1alpha1.ReasonIndexUnreachable, "stream \"web\": HTTP 403"}
	invalid := cause{datav1alpha1.ReasonInvalidPlan, "the spec cannot be planned with these indexes: no samples"}
	planned := cause{datav1alpha1.ReasonPlanned, "plan abc: 10 samples in 2 splits, 5 steps of 2 per epoch"}
	steps := []struct {
		name            string
		ready, degraded cause
		want            want
	}{
		{"an index not read", waiting, unreachable, want{
			metav1.Condition{Status: metav1.ConditionFalse, Reason: waiting.reason, Message: waiting.message},
			metav1.Condition{Status: metav1.ConditionTrue, Reason: unreachable.reason, Message: unreachable.message},
			[]string{"Warning WaitingForIndex Ready=False: the plan needs every stream's index", "Warning IndexUnreachable Degraded=True: stream \"web\": HTTP 403"}}},
		{"a spec that cannot be planned", invalid, invalid, want{
			metav1.Condition{Status: metav1.ConditionFalse, Reason: invalid.reason, Message: invalid.message},
			metav1.Condition{Status: metav1.ConditionTrue, Reason: invalid.reason, Message: invalid.message},
			[]string{"Warning InvalidPlan Ready=False: " + invalid.message, "Warning InvalidPlan Degraded=True: " + invalid.message}}},
		{"planned", planned, cause{}, want{
			metav1.Condition{Status: metav1.ConditionTrue, Reason: planned.reason, Message: planned.message},
			metav1.Condition{Status: metav1.ConditionFalse, Reason: datav1alpha1.ReasonHealthy},
			[]string{"Normal Planned Ready=True: " + planned.message, "Normal Healthy Degraded=False: Healthy"}}},
		{"planned again", planned, cause{}, want{
			metav1.Condition{Status: metav1.ConditionTrue, Reason: planned.reason, Message: planned.message},
			metav1.Condition{Status: metav1.ConditionFalse, Reason: datav1alpha1.ReasonHealthy},
			nil}},
	}
	recorder := events.NewFakeRecorder(16)
	r := &TrainingDatasetReconciler{Recorder: recorder}
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml", Generation: 3}}
	for _, step := range steps {
		r.setReady(ds, step.ready, step.degraded)
		for typ, want := range map[string]metav1.Condition{datav1alpha1.ConditionReady: step.want.ready, datav1alpha1.ConditionDegraded: step.want.degraded} {
			got := meta.FindStatusCondition(ds.Status.Conditions, typ)
			if got == nil || got.Status != want.Status || got.Reason != want.Reason || got.Message != want.Message || got.ObservedGeneration != ds.Generation {
				t.Errorf("%s: %s is %+v, want %s %s %q of generation %d", step.name, typ, got, want.Status, want.Reason, want.Message, ds.Generation)
			}
		}
		var got []string
		for len(recorder.Events) > 0 {
			got = append(got, <-recorder.Events)
		}
		if !slices.Equal(got, step.want.events) {
			t.Errorf("%s: events %q, want %q", step.name, got, step.want.events)
		}
	}
	if n := len(ds.Status.Conditions); n != 2 {
		t.Errorf("%d conditions, want Ready and Degraded only: %+v", n, ds.Status.Conditions)
	}
}
