package controllers

import (
	"encoding/json"
	"maps"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
)

// The field-level patch turns the pod the API server sent into the pod the
// webhook made, as the generic JSON diff did, and leaves alone what this
// API version does not know.
func TestPodPatchMakesTheMutatedPod(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{GenerateName: "train-", Namespace: "team",
				Labels:      map[string]string{inject.LabelDataset: "web"},
				Annotations: map[string]string{jobkind.JobCompletionIndex: "3"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "trainer", Image: "pytorch:2",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}},
				RestartPolicy: corev1.RestartPolicyNever,
				Volumes:       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			},
		}
	}
	injected := func(p *corev1.Pod) *corev1.Pod {
		ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
			Spec: datav1alpha1.TrainingDatasetSpec{NumSplits: 8, GlobalBatchSize: 64,
				Streams: []datav1alpha1.Stream{{Name: "m", Source: datav1alpha1.Source{URI: "s3://b/m/"}}}}}
		out, err := inject.Inject(inject.Input{Pod: p, Dataset: ds, Owner: inject.Owner{Kind: "Job", Name: "train", UID: "u1", Replicas: 8},
			Images: inject.ImagePolicy{Default: "shardfeed:v1"}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	tests := []struct {
		name   string
		pod    func() *corev1.Pod
		mutate func(*corev1.Pod) *corev1.Pod
		// unknown is a field of the spec this API version does not know.
		unknown bool
		wantOK  bool
	}{
		{name: "the sidecar injected", pod: base, mutate: injected, wantOK: true},
		{name: "injected, with a field the API version does not know", pod: base, mutate: injected, unknown: true, wantOK: true},
		{name: "a pod with no annotations and no volumes", pod: func() *corev1.Pod {
			p := base()
			p.Annotations, p.Spec.Volumes = nil, nil
			return p
		}, mutate: injected, wantOK: true},
		{name: "a field emptied", pod: base, mutate: func(p *corev1.Pod) *corev1.Pod {
			p = p.DeepCopy()
			p.Spec.Volumes, p.Labels = nil, map[string]string{}
			return p
		}, wantOK: true},
		{name: "nothing changed", pod: base, mutate: func(p *corev1.Pod) *corev1.Pod { return p.DeepCopy() }, wantOK: true},
		{name: "the status changed: the generic diff", pod: base, mutate: func(p *corev1.Pod) *corev1.Pod {
			p = p.DeepCopy()
			p.Status.Phase = corev1.PodRunning
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod()
			mutated := tt.mutate(pod)
			ops, ok := podPatch(pod, mutated)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			raw, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			if tt.unknown {
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				m["spec"].(map[string]any)["futureField"] = map[string]any{"a": 1.0}
				raw, _ = json.Marshal(m)
			}
			patchJSON, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			patch, err := jsonpatchapply.DecodePatch(patchJSON)
			if err != nil {
				t.Fatal(err)
			}
			out, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("applying %s: %v", patchJSON, err)
			}
			var got corev1.Pod
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			var want corev1.Pod // as the API server reads it: through JSON
			wantJSON, _ := json.Marshal(mutated)
			_ = json.Unmarshal(wantJSON, &want)
			if !equality.Semantic.DeepEqual(&got, &want) {
				t.Fatalf("patched pod %s\nwant %s\npatch %s", out, wantJSON, patchJSON)
			}
			if tt.unknown {
				var m map[string]any
				_ = json.Unmarshal(out, &m)
				if f, _ := m["spec"].(map[string]any)["futureField"].(map[string]any); !maps.Equal(f, map[string]any{"a": 1.0}) {
					t.Errorf("the field this API version does not know became %v", f)
				}
			}
		})
	}
}
