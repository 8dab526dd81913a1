package jobkind

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const trainRun = `
- group: training.example.com
  version: v1
  kind: TrainRun
  resource: trainruns
  podTemplates: [spec.template]
  replicas: [spec.workers, spec.chiefs]
  rank: {label: training.example.com/worker-index}
  queued: true
`

// longPath is 16 fields of 63 characters: the longest path.
func longPath(c string) string {
	return strings.TrimSuffix(strings.Repeat(strings.Repeat(c, 63)+".", 16), ".")
}

func TestParseTakesAPlatformsKindAndRefusesWhatIsNotOne(t *testing.T) {
	tests := []struct {
		name, doc, want string // want: a part of the error ("" none)
	}{
		{"a kind", trainRun, ""},
		{"JSON", `[{"group": "a.example.com", "version": "v1", "kind": "Run", "resource": "runs", "podTemplates": ["spec.pods[].template"], "replicas": ["spec.n"], "rank": {"annotation": "a.example.com/index"}}]`, ""},
		{"none", `[]`, ""},
		{"a misspelt field", strings.Replace(trainRun, "replicas:", "replica:", 1), `unknown field "replica"`},
		{"not a list", `{group: x}`, "a list of {group"},
		{"not YAML", "- [", "not YAML or JSON"},
		{"a group without a dot", strings.Replace(trainRun, "training.example.com\n", "training\n", 1), `group "training"`},
		{"a lower-case kind", strings.Replace(trainRun, "TrainRun", "trainrun", 1), `kind "trainrun"`},
		{"a plural in capitals", strings.Replace(trainRun, "resource: trainruns", "resource: TrainRuns", 1), `resource "TrainRuns"`},
		{"no version", strings.Replace(trainRun, "version: v1", "version: ''", 1), `version ""`},
		{"a built-in kind", strings.Replace(strings.Replace(trainRun, "training.example.com\n", "kubeflow.org\n", 1), "TrainRun", "PyTorchJob", 1), "is the built-in PyTorchJob's"},
		{"another kind of a built-in group", strings.Replace(trainRun, "training.example.com\n", "jobset.x-k8s.io\n", 1), "is the built-in JobSet's"},
		{"a bare [] (no list named)", strings.Replace(trainRun, "[spec.template]", `["spec.[].template"]`, 1), "is not a field"},
		{"a field of 64 characters", strings.Replace(trainRun, "[spec.template]", "[spec."+strings.Repeat("a", 64)+"]", 1), "up to 63 characters"},
		{"five pod templates", strings.Replace(trainRun, "[spec.template]", "[a, b, c, d, e]", 1), "1 to 4 of them"},
		// The longest paths make a match condition the API server takes.
		{"the longest paths", strings.Replace(trainRun, "[spec.template]", "["+longPath("a")+", "+longPath("b")+", "+longPath("c")+", "+longPath("d")+"]", 1), ""},
		{"a group too long for the webhook's name", strings.Replace(trainRun, "training.example.com\n", strings.Repeat("a", 60)+"."+strings.Repeat("b", 60)+"."+strings.Repeat("c", 50)+"\n", 1), "more than 163"},
		{"two kinds of one resource", trainRun + strings.Replace(strings.TrimPrefix(trainRun, "\n"), "TrainRun", "OtherRun", 1), "declared twice"},
		{"no pod template", strings.Replace(trainRun, "podTemplates: [spec.template]", "podTemplates: []", 1), "podTemplates: give the path"},
		{"a path with a quote (CEL injection)", strings.Replace(trainRun, "[spec.template]", `["spec.template') || true || ('"]`, 1), "is not a field"},
		{"a path of a CEL reserved word", strings.Replace(trainRun, "[spec.template]", "[spec.namespace.template]", 1), "CEL reserved word"},
		{"a map's values first", strings.Replace(trainRun, "[spec.template]", `["*.template"]`, 1), "is not a field"},
		{"an empty field", strings.Replace(trainRun, "[spec.template]", `["spec..template"]`, 1), "is not a field"},
		{"too deep a path", strings.Replace(trainRun, "[spec.template]", "["+strings.Repeat("a.", 16)+"b]", 1), "more than 16"},
		{"no replicas", strings.Replace(trainRun, "replicas: [spec.workers, spec.chiefs]", "replicas: []", 1), "replicas: give the field"},
		{"replicas of each item", strings.Replace(trainRun, "[spec.workers, spec.chiefs]", `["spec.groups[].n"]`, 1), "is not a field"},
		{"no rank", strings.Replace(trainRun, "rank: {label: training.example.com/worker-index}", "rank: {}", 1), "exactly one of label or annotation"},
		{"both ranks", strings.Replace(trainRun, "rank: {label: training.example.com/worker-index}", "rank: {label: a, annotation: b}", 1), "exactly one"},
		{"a rank label that is no label", strings.Replace(trainRun, "training.example.com/worker-index", "bad label!", 1), `rank.label "bad label!"`},
		{"twice", trainRun + strings.TrimPrefix(trainRun, "\n"), "declared twice"},
		{"too large", strings.Repeat(" ", MaxDeclaredBytes+1), "more than 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kinds, err := Parse([]byte(tt.doc))
			if err == nil {
				_, err = Builtin().With(kinds...)
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestADeclaredKindsPodsAreRankedByTheirLabelOfTheObjectsReplicas(t *testing.T) {
	declared, err := Parse([]byte(trainRun))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := Builtin().With(declared...)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(`{"spec": {"workers": 3, "chiefs": 1}}`), &obj); err != nil {
		t.Fatal(err)
	}
	replicas, _, err := reg.Lookup("training.example.com", "TrainRun").Size(obj)
	if err != nil || replicas != 4 {
		t.Fatalf("size %d, %v; want 4 (3 workers and 1 chief)", replicas, err)
	}
	owner := Owner{Group: "training.example.com", Kind: "TrainRun", Name: "r", Replicas: replicas}
	pod := func(labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		owner    Owner
		declared int
		want     Placement
		claimed  bool
		refusal  string
	}{
		{"its index", pod(map[string]string{"training.example.com/worker-index": "2"}), owner, 0, Placement{Rank: 2, Pods: 4}, true, ""},
		{"the pod count it declares", pod(map[string]string{"training.example.com/worker-index": "5"}), owner, 8, Placement{Rank: 5, Pods: 8}, true, ""},
		{"no index", pod(nil), owner, 0, Placement{}, true, "without a valid label training.example.com/worker-index"},
		{"a negative index", pod(map[string]string{"training.example.com/worker-index": "-1"}), owner, 0, Placement{}, true, "without a valid label"},
		{"outside its pods", pod(map[string]string{"training.example.com/worker-index": "4"}), owner, 0, Placement{}, true, "outside its 4 pods"},
		{"of another group", pod(map[string]string{"training.example.com/worker-index": "1"}), Owner{Group: "other.example.com", Kind: "TrainRun"}, 0, Placement{}, false, ""},
		{"an Indexed Job's pod still", pod(map[string]string{JobCompletionIndex: "1"}), Owner{Group: "batch", Kind: "Job", Replicas: 2}, 0,
			Placement{RankField: "metadata.annotations['" + JobCompletionIndex + "']", Pods: 2}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, claimed, err := reg.Place(tt.pod, tt.owner, tt.declared)
			var refusal *Refusal
			switch {
			case tt.refusal != "":
				if !errors.As(err, &refusal) || !strings.Contains(refusal.Reason, tt.refusal) {
					t.Fatalf("error %v, want a refusal saying %q", err, tt.refusal)
				}
			case err != nil:
				t.Fatal(err)
			case got != tt.want || claimed != tt.claimed:
				t.Fatalf("placed %+v (claimed %v), want %+v (%v)", got, claimed, tt.want, tt.claimed)
			}
		})
	}
}

func TestSizeReadsEachKindsReplicas(t *testing.T) {
	tests := []struct {
		kind, obj         string
		replicas, leading int
		err               string
	}{
		{"Job", `{"spec": {"completions": 8}}`, 8, 0, ""},
		{"Job", `{"spec": {}}`, 0, 0, ""},
		{"StatefulSet", `{"spec": {"replicas": 3}}`, 3, 0, ""},
		{"PyTorchJob", `{"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}`, 4, 1, ""},
		{"PyTorchJob", `{"spec": {"pytorchReplicaSpecs": {"Master": {}, "Worker": {}}}}`, 2, 1, ""},
		{"PyTorchJob", `{"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}}`, 2, 0, ""},
		{"Job", `{"spec": {"completions": -1}}`, 0, 0, "non-negative integer"},
		{"Job", `{"spec": {"completions": "8"}}`, 0, 0, "non-negative integer"},
		{"Job", `{"spec": {"completions": 1.5}}`, 0, 0, "non-negative integer"},
		{"Job", `{"spec": {"completions": 4294967296}}`, 0, 0, "more than 1048576"},
		{"PyTorchJob", `{"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1048576}, "Worker": {"replicas": 1}}}}`, 0, 0, "more than 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.obj, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tt.obj), &obj); err != nil {
				t.Fatal(err)
			}
			k := Builtin().Named(tt.kind)
			replicas, leading, err := k.Size(obj)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || replicas != tt.replicas || leading != tt.leading {
				t.Fatalf("size %d (leading %d), %v; want %d (%d)", replicas, leading, err, tt.replicas, tt.leading)
			}
		})
	}
}

func TestLabelledCELOfEachPathShape(t *testing.T) {
	tests := []struct {
		paths []Path
		want  string
	}{
		{[]Path{"spec.template"}, "has(object.spec) && has(object.spec.template) && has(object.spec.template.metadata) && has(object.spec.template.metadata.labels) && 'L' in object.spec.template.metadata.labels"},
		{[]Path{"spec.jobs[].pod"}, "has(object.spec) && has(object.spec.jobs) && object.spec.jobs.exists(x0, has(x0.pod) && has(x0.pod.metadata) && has(x0.pod.metadata.labels) && 'L' in x0.pod.metadata.labels)"},
		{[]Path{"spec.roles.*"}, "has(object.spec) && has(object.spec.roles) && object.spec.roles.exists(k0, has(object.spec.roles[k0].metadata) && has(object.spec.roles[k0].metadata.labels) && 'L' in object.spec.roles[k0].metadata.labels)"},
		{[]Path{"a", "b"}, "(has(object.a) && has(object.a.metadata) && has(object.a.metadata.labels) && 'L' in object.a.metadata.labels) || (has(object.b) && has(object.b.metadata) && has(object.b.metadata.labels) && 'L' in object.b.metadata.labels)"},
	}
	for _, tt := range tests {
		k := &Kind{Templates: tt.paths}
		if got := k.LabelledCEL("L"); got != tt.want {
			t.Errorf("%v:\n got %s\nwant %s", tt.paths, got, tt.want)
		}
	}
}

func TestNamedTakesWhatAUserTypes(t *testing.T) {
	for typed, want := range map[string]string{"job": "Job", "Jobs": "Job", "sts": "StatefulSet", "statefulsets": "StatefulSet",
		"jobset": "JobSet", "pytorchjobs": "PyTorchJob", "TrainJob": "TrainJob"} {
		if k := Builtin().Named(typed); k == nil || k.Kind != want {
			t.Errorf("Named(%q) = %v, want %s", typed, k, want)
		}
	}
	if k := Builtin().Named("deployment"); k != nil {
		t.Errorf("Named(deployment) = %s, want none", k.Kind)
	}
}

// FuzzParse: whatever a platform writes, Parse answers without panicking,
// and what it takes gives CEL, templates and sizes without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(trainRun))
	f.Add([]byte(`[{"group":"a.b","version":"v1","kind":"K","resource":"ks","podTemplates":["s.x[].y.*"],"replicas":["s.n"],"rank":{"label":"k"}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kinds, err := Parse(data)
		if err != nil {
			return
		}
		for _, k := range kinds {
			_ = k.LabelledCEL("shardfeed.io/dataset")
			obj := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}
			_ = k.PodTemplates(obj)
			_, _, _ = k.Size(obj)
		}
	})
}
