package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
)

func TestAChecksDueTimeDecidesTheFastPath(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	dataset := func(every time.Duration, checked *metav1.Time, indexing ...datav1alpha1.StreamIndexing) *datav1alpha1.TrainingDataset {
		ds := &datav1alpha1.TrainingDataset{Spec: datav1alpha1.TrainingDatasetSpec{
			Streams: []datav1alpha1.Stream{{Name: "p", Format: datav1alpha1.FormatParquet}, {Name: "m", Format: datav1alpha1.FormatMDS}},
			Index:   &datav1alpha1.IndexJob{}}}
		if every > 0 {
			ds.Spec.Index.RecheckEvery = &metav1.Duration{Duration: every}
		}
		ds.Status.Streams = []datav1alpha1.StreamTotals{{Name: "p", IndexChecked: checked}, {Name: "m"}}
		ds.Status.Indexing = indexing
		return ds
	}
	for _, tc := range []struct {
		name string
		ds   *datav1alpha1.TrainingDataset
		in   time.Duration
		ok   bool
	}{
		{"no recheckEvery", dataset(0, at(time.Hour)), 0, false},
		{"checked a while ago", dataset(time.Hour, at(20*time.Minute)), 40 * time.Minute, true},
		{"due", dataset(time.Hour, at(2*time.Hour)), 0, true},
		{"never checked: an interval from now", dataset(time.Hour, nil), time.Hour, true},
		{"a check running", dataset(time.Hour, at(time.Minute), datav1alpha1.StreamIndexing{Name: "p", Phase: datav1alpha1.IndexingChecking}), 0, true},
		{"indexing again", dataset(time.Hour, at(2*time.Hour), datav1alpha1.StreamIndexing{Name: "p", Phase: datav1alpha1.IndexingParts}), 0, true},
		// Held for the jobs training: their commits take the fast path.
		{"held", dataset(time.Hour, at(2*time.Hour), datav1alpha1.StreamIndexing{Name: "p", Phase: datav1alpha1.IndexingHeld}), time.Hour, true},
		{"failed", dataset(time.Hour, at(2*time.Hour), datav1alpha1.StreamIndexing{Name: "p", Phase: datav1alpha1.IndexingFailed}), time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, ok := recheckIn(tc.ds, now)
			if in != tc.in || ok != tc.ok {
				t.Errorf("recheckIn = %s, %v; want %s, %v", in, ok, tc.in, tc.ok)
			}
		})
	}
}
