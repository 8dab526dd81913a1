package controllers

import (
	"encoding/json"
	"testing"
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
