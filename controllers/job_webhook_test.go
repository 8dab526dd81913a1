package controllers

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/internal/inject"
	"github.com/shardfeed/shardfeed/internal/jobkind"
)

func TestPodTemplatesOfEachKindAQueueAdmits(t *testing.T) {
	tmpl := func(name string) string {
		return `{"metadata": {"labels": {"shardfeed.io/dataset": "web", "t": "` + name + `"}}, "spec": {"containers": [{"name": "c"}]}}`
	}
	tests := []struct {
		name, group, kind, obj string
		want                   []string // the templates' t labels, in order
		ok                     bool
	}{
		{"a Job", "batch", "Job", `{"spec": {"template": ` + tmpl("job") + `}}`, []string{"job"}, true},
		{"a Job without a template", "batch", "Job", `{"spec": {}}`, nil, true},
		{"a JobSet's replicated Jobs", "jobset.x-k8s.io", "JobSet",
			`{"spec": {"replicatedJobs": [{"template": {"spec": {"template": ` + tmpl("a") + `}}}, {"name": "bad"}, {"template": {"spec": {"template": ` + tmpl("b") + `}}}]}}`,
			[]string{"a", "b"}, true},
		{"a PyTorchJob's replicas, by type", "kubeflow.org", "PyTorchJob",
			`{"spec": {"pytorchReplicaSpecs": {"Worker": {"template": ` + tmpl("worker") + `}, "Master": {"template": ` + tmpl("master") + `}}}}`,
			[]string{"master", "worker"}, true},
		{"another kind", "kubeflow.org", "TFJob", `{"spec": {"tfReplicaSpecs": {}}}`, nil, false},
		{"a Job of another group", "example.com", "Job", `{"spec": {"template": ` + tmpl("job") + `}}`, nil, false},
		{"not an object's shape", "batch", "Job", `{"spec": "x"}`, nil, true},
		{"a toy kind registered from the test, each list item's map values", "toy.example.com", "Toy",
			`{"spec": {"groups": [{"roles": {"b": {"pod": ` + tmpl("b") + `}, "a": {"pod": ` + tmpl("a") + `}}}, {"roles": {"c": {"pod": ` + tmpl("c") + `}}}]}}`,
			[]string{"a", "b", "c"}, true},
		{"a StatefulSet (no queue admits it)", "apps", "StatefulSet", `{"spec": {"template": ` + tmpl("sts") + `}}`, nil, false},
	}
	kinds, err := jobkind.Builtin().With(&jobkind.Kind{Group: "toy.example.com", Version: "v1", Kind: "Toy", Resource: "toys",
		Templates: []jobkind.Path{"spec.groups[].roles.*.pod"}, Queued: true})
	if err != nil {
		t.Fatal(err)
	}
	podTemplates := func(group, kind string, obj map[string]any) ([]map[string]any, bool) {
		k := kinds.Lookup(group, kind)
		if k == nil || !k.Queued {
			return nil, false
		}
		return k.PodTemplates(obj), true
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tt.obj), &obj); err != nil {
				t.Fatal(err)
			}
			got, ok := podTemplates(tt.group, tt.kind, obj)
			var names []string
			for _, g := range got {
				names = append(names, g["metadata"].(map[string]any)["labels"].(map[string]any)["t"].(string))
			}
			if ok != tt.ok || len(names) != len(tt.want) {
				t.Fatalf("templates %v (ok %v), want %v (ok %v)", names, ok, tt.want, tt.ok)
			}
			for i := range names {
				if names[i] != tt.want[i] {
					t.Errorf("templates %v, want %v", names, tt.want)
				}
			}
			// The templates are obj's own: a change to one is a change to obj.
			for _, g := range got {
				g["changed"] = true
			}
			if len(got) > 0 && !containsChanged(obj) {
				t.Error("the templates returned are copies, not obj's own")
			}
		})
	}
}

func containsChanged(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if v["changed"] == true {
			return true
		}
		for _, e := range v {
			if containsChanged(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsChanged(e) {
				return true
			}
		}
	}
	return false
}

// FuzzJobReserver: whatever a job's author writes (any JSON, any shape
// under the kinds' template paths), the webhook answers without panicking:
// allowed, patched or an error, never a half-written object.
func FuzzJobReserver(f *testing.F) {
	scheme := runtime.NewScheme()
	if err := datav1alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	ds := &datav1alpha1.TrainingDataset{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ds).Build()
	r := &JobReserver{Pods: &PodInjector{Reader: reader, Images: inject.ImagePolicy{Default: "shardfeed:v1"}}}
	labelled := `{"metadata": {"labels": {"shardfeed.io/dataset": "web"}}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}}`
	for _, seed := range []struct{ kind, obj string }{
		{"Job", `{"spec": {"template": ` + labelled + `}}`},
		{"JobSet", `{"spec": {"replicatedJobs": [{"template": {"spec": {"template": ` + labelled + `}}}]}}`},
		{"PyTorchJob", `{"spec": {"pytorchReplicaSpecs": {"Worker": {"template": ` + labelled + `}}}}`},
		{"Job", `{"spec": {"template": {"metadata": {"labels": {"shardfeed.io/dataset": "gone"}}, "spec": {"initContainers": 7}}}}`},
		{"JobSet", `[]`},
	} {
		f.Add(seed.kind, []byte(seed.obj))
	}
	groups := map[string]string{"Job": "batch", "JobSet": "jobset.x-k8s.io", "PyTorchJob": "kubeflow.org"}
	f.Fuzz(func(t *testing.T, kind string, raw []byte) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Namespace: "ml", Name: "x", Kind: metav1.GroupVersionKind{Group: groups[kind], Kind: kind},
			Object: runtime.RawExtension{Raw: raw}}}
		resp := r.Handle(context.Background(), req)
		if resp.Allowed && len(resp.Patches) > 0 {
			// A patch applies to what was sent and leaves JSON.
			var obj any
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatalf("a patch for a body that is not JSON: %v", err)
			}
		}
	})
}
