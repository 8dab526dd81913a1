package controllers

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/configmaps"
)

// TestTheWebhookReadsItsCacheThenTheAPIServer: what the pod webhook reads
// where, when its cache is behind the API server.
func TestTheWebhookReadsItsCacheThenTheAPIServer(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ds := func(uid string) *datav1alpha1.TrainingDataset {
		return &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: types.UID(uid)}}
	}
	plan := func(uid string, managed bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.PlanName("web"), Namespace: "team",
			OwnerReferences: []metav1.OwnerReference{datasetOwner(ds(uid))}}}
		if managed {
			cm.Labels = map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy}
		}
		return cm
	}
	tests := []struct {
		name          string
		cache, server []client.Object
		wantUID       string // the dataset read
		wantPlan      bool
		wantErr       func(error) bool
		wantAPIReads  int
	}{
		{name: "both in the cache", cache: []client.Object{ds("a"), plan("a", true)}, server: []client.Object{ds("a"), plan("a", true)},
			wantUID: "a", wantPlan: true},
		{name: "a dataset seconds old", server: []client.Object{ds("a"), plan("a", true)},
			wantUID: "a", wantPlan: true, wantAPIReads: 2},
		{name: "no plan yet", cache: []client.Object{ds("a")}, server: []client.Object{ds("a")},
			wantUID: "a", wantAPIReads: 1},
		{name: "made again: the cache holds the old dataset, the new plan", cache: []client.Object{ds("old"), plan("new", true)},
			server: []client.Object{ds("new"), plan("new", true)}, wantUID: "new", wantPlan: true, wantAPIReads: 2},
		{name: "a plan shardfeed did not write", cache: []client.Object{ds("a")}, server: []client.Object{ds("a"), plan("a", false)},
			wantErr: func(err error) bool { var e *notOwnedError; return errors.As(err, &e) }, wantAPIReads: 3},
		{name: "no dataset", wantErr: apierrors.IsNotFound, wantAPIReads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.server...).Build()}
			p := &PodInjector{Cache: fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.cache...).Build(), Reader: server}
			got, gotPlan, err := p.datasetAndPlan(context.Background(), "team", "web")
			switch {
			case tt.wantErr != nil:
				if !tt.wantErr(err) {
					t.Fatalf("err = %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case string(got.UID) != tt.wantUID || (gotPlan != nil) != tt.wantPlan:
				t.Fatalf("read dataset %q and plan %v, want %q and %v", got.UID, gotPlan != nil, tt.wantUID, tt.wantPlan)
			}
			if server.reads != tt.wantAPIReads {
				t.Errorf("%d reads from the API server, want %d", server.reads, tt.wantAPIReads)
			}
		})
	}
}

type countingReader struct {
	client.Reader
	reads int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestAdmittedPodsOfAKnownAttemptNeedNoWrite: the cached state answers an
// admission only when Admit would write nothing.
func TestAdmittedPodsOfAKnownAttemptNeedNoWrite(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team", UID: "a"}}
	full := configmaps.State{Dataset: "web", Job: "train", SidecarImage: "img", PlanVersion: 1, Generation: 2,
		Attempts: []configmaps.Attempt{{ID: "uid-1", Generation: 1}, {ID: "uid-2", Generation: 2}}}
	tests := []struct {
		name    string
		edit    func(*configmaps.State, *corev1.ConfigMap)
		attempt string
		want    int64 // the generation answered; 0: go to Admit
	}{
		{name: "a known attempt", attempt: "uid-2", want: 2},
		{name: "an older attempt keeps its generation", attempt: "uid-1", want: 1},
		{name: "a new attempt", attempt: "uid-3"},
		{name: "no image pinned yet", attempt: "uid-2", edit: func(s *configmaps.State, _ *corev1.ConfigMap) { s.SidecarImage = "" }},
		{name: "no plan version yet", attempt: "uid-2", edit: func(s *configmaps.State, _ *corev1.ConfigMap) { s.PlanVersion = 0 }},
		{name: "another job's state", attempt: "uid-2", edit: func(s *configmaps.State, _ *corev1.ConfigMap) { s.Job = "other" }},
		{name: "another dataset's ConfigMap", attempt: "uid-2", edit: func(_ *configmaps.State, cm *corev1.ConfigMap) {
			cm.OwnerReferences[0].UID = "b"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := full
			s.Attempts = append([]configmaps.Attempt(nil), full.Attempts...)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configmaps.StateName("web", "train"), Namespace: "team",
				Labels: map[string]string{configmaps.LabelManagedBy: configmaps.ManagedBy}, OwnerReferences: []metav1.OwnerReference{datasetOwner(ds)}}}
			if tt.edit != nil {
				tt.edit(&s, cm)
			}
			data, err := configmaps.StateData(&s)
			if err != nil {
				t.Fatal(err)
			}
			cm.Data = data
			p := &PodInjector{Cache: fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).Build()}
			var got int64
			if st := p.admitted(context.Background(), ds, "train", tt.attempt); st != nil {
				got = st.GenerationOf(tt.attempt)
			}
			if got != tt.want {
				t.Errorf("generation %d from the cache, want %d", got, tt.want)
			}
		})
	}
}
