package configmaps

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestDerivedNamesAreValidAndNeverCollide(t *testing.T) {
	long := strings.Repeat("d", 253)
	longJob := strings.Repeat("j.", 126) + "j"
	pairs := [][2]string{
		{"a-b", "c"}, {"a", "b-c"}, {"web", "train-1"}, {"web-train", "1"},
		{long, "train"}, {long, longJob}, {long[:252], longJob}, {"x", longJob}, {long, long},
	}
	states := map[string][2]string{}
	for _, p := range pairs {
		name := StateName(p[0], p[1])
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("StateName(%d chars, %d chars) = %q: %v", len(p[0]), len(p[1]), name, errs)
		}
		if other, ok := states[name]; ok {
			t.Errorf("StateName(%q, %q) == StateName(%q, %q) == %q", p[0], p[1], other[0], other[1], name)
		}
		states[name] = p
		for _, v := range JobLabels(p[0], p[1]) {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("label value %q: %v", v, errs)
			}
		}
	}
	plans := map[string]string{}
	for _, ds := range []string{"web", "web-plan", long, long[:250], long[:249] + "-x"} {
		name := PlanName(ds)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("PlanName(%d chars) = %q: %v", len(ds), name, errs)
		}
		if other, ok := plans[name]; ok {
			t.Errorf("PlanName(%q) == PlanName(%q)", ds, other)
		}
		if _, ok := states[name]; ok {
			t.Errorf("PlanName(%q) is a state's name", ds)
		}
		plans[name] = ds
	}
	if got := PlanName("web"); got != "web-plan" {
		t.Errorf("PlanName(web) = %q: a short name stays readable", got)
	}
	if got := LabelValue("train-1"); got != "train-1" {
		t.Errorf("LabelValue(train-1) = %q", got)
	}
	if a, b := LabelValue(long), LabelValue(long[:252]+"e"); a == b || len(a) != 63 {
		t.Errorf("long label values %q, %q", a, b)
	}
}
