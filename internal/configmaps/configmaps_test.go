package configmaps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	datav1alpha1 "github.com/shardfeed/shardfeed/api/v1alpha1"
	"github.com/shardfeed/shardfeed/planner"
)

// samplePlan is a plan with every field set.
func samplePlan() *Plan {
	return &Plan{
		Spec:          datav1alpha1.TrainingDatasetSpec{NumSplits: 8, GlobalBatchSize: 64, Streams: []datav1alpha1.Stream{{Name: "web", Source: datav1alpha1.Source{URI: "s3://b/web/"}}}},
		Fingerprint:   planner.Fingerprint{Sum: "v1-abc", Inputs: map[string]string{"spec.numSplits": "8"}},
		Streams:       []StreamDigest{{Name: "web", ContentHash: "ff", Shards: 3, Samples: 300, Bytes: 3000}},
		MinCacheBytes: map[int]int64{1: 3000, 2: 2000},
	}
}

func TestPlanRoundTripsThroughDataAndAMountedDirectory(t *testing.T) {
	want := samplePlan()
	data, err := want.Data()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, read := range map[string]func() (*Plan, error){
		"data": func() (*Plan, error) { return PlanFromData(data) },
		"dir":  func() (*Plan, error) { return PlanFromDir(dir) },
	} {
		got, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Fingerprint.Sum != "v1-abc" || got.Fingerprint.Inputs["spec.numSplits"] != "8" || got.Spec.NumSplits != 8 ||
			got.Spec.Streams[0].Source.URI != "s3://b/web/" || got.Streams[0] != want.Streams[0] || got.MinCacheBytes[2] != 2000 {
			t.Fatalf("%s: %+v", name, got)
		}
	}
}

func TestPlanFromDataRefusesWhatItCannotTrust(t *testing.T) {
	good, err := (&Plan{Fingerprint: planner.Fingerprint{Sum: "v1-abc"}}).Data()
	if err != nil {
		t.Fatal(err)
	}
	// A plan records its own version: 1 for a plan of no later feature.
	for sum, v := range map[string]string{"v1-abc": "1", "v2-abc": "2"} {
		d, err := (&Plan{Fingerprint: planner.Fingerprint{Sum: sum}}).Data()
		if err != nil || d[KeyPlanVersion] != v {
			t.Fatalf("plan %s records plan version %q, %v", sum, d[KeyPlanVersion], err)
		}
		if _, err := PlanFromData(d); err != nil {
			t.Fatalf("plan %s: %v", sum, err)
		}
	}
	with := func(k, v string) map[string]string {
		d := map[string]string{}
		for a, b := range good {
			d[a] = b
		}
		if v == "" {
			delete(d, k)
		} else {
			d[k] = v
		}
		return d
	}
	tests := []struct {
		name string
		data map[string]string
		want string
	}{
		{"not written by shardfeed", map[string]string{}, `no "layout" key`},
		{"a newer layout", with(KeyLayout, "2"), "layout \"2\", this shardfeed reads layout 1"},
		{"a newer plan version", with(KeyPlanVersion, "9"), "plan version \"9\", this sidecar computes plan versions 1 to"},
		{"no plan version", with(KeyPlanVersion, "0"), "plan version \"0\""},
		{"no spec", with(KeySpec, ""), `no key "spec.json"`},
		{"a broken spec", with(KeySpec, "{"), `key "spec.json"`},
		{"a bad pod count", with(KeyMinCache, `{"two": 5}`), `pod count "two"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanFromData(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestStateLayout(t *testing.T) {
	s := &State{Dataset: "web", Job: "j", Epoch: 3, Step: 9, Attempts: []Attempt{{ID: "a"}, {ID: "b"}}}
	data, err := StateData(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := StateFromData(data)
	if err != nil || got.Epoch != 3 || got.Step != 9 || got.Newest() != "b" || got.Layout != LayoutVersion {
		t.Fatalf("%+v, %v", got, err)
	}
	empty, err := StateFromData(nil)
	if err != nil || empty.Step != 0 || empty.Newest() != "" {
		t.Fatalf("the operator's empty ConfigMap reads as %+v, %v", empty, err)
	}
	for _, bad := range []string{`{"layout": 7}`, `{"layout": 1, "step": -1}`, `[`} {
		if _, err := StateFromData(map[string]string{KeyState: bad}); err == nil {
			t.Errorf("state %s was accepted", bad)
		}
	}
	if got := StateName("web", "train-1"); !strings.HasPrefix(got, "web-train-1-") || !strings.HasSuffix(got, "-state") || PlanName("web") != "web-plan" {
		t.Fatalf("ConfigMap names differ from design §1 (as docs/configmaps.md revises it): %s", got)
	}
}

func TestResumeAtRollsOverACompleteEpoch(t *testing.T) {
	tests := []struct {
		name               string
		epoch, step, steps int64
		wantEpoch, want    int64
	}{
		{"mid-epoch", 2, 7, 10, 2, 7},
		{"epoch complete", 2, 10, 10, 3, 0},
		{"steps unknown", 2, 10, 0, 2, 10},
		{"fresh", 0, 0, 10, 0, 0},
	}
	for _, tt := range tests {
		st := &State{Epoch: tt.epoch, Step: tt.step}
		if e, s := st.ResumeAt(tt.steps); e != tt.wantEpoch || s != tt.want {
			t.Errorf("%s: ResumeAt = (%d, %d), want (%d, %d)", tt.name, e, s, tt.wantEpoch, tt.want)
		}
	}
}
