//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

// A real Prometheus (built from its release) scrapes the manager and the
// sidecars as the chart's ServiceMonitor and PodMonitor say, with the
// chart's rule file: every rule loads and evaluates; a healthy job trains
// exactly once and no alert of its namespace or of the operator goes off;
// every query of the chart's dashboard (the node cache's row: in the node
// cache story) returns series while it trains; a job reading through a
// slow store fires ShardfeedTrainingStarved.
func TestEndToEndPrometheusScrapesAlertsAndServesTheDashboard(t *testing.T) {
	o, ctx := clusterOptions(t, 1200)
	rep, err := scenario.RunMonitoring(ctx, o)
	if err != nil {
		t.Fatal(err)
	}

	// The rules: every one of the chart's file, each healthy.
	raw, err := os.ReadFile(filepath.Join(o.Root, "charts", "shardfeed", "files", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	loaded := map[string]scenario.PromRule{}
	for _, r := range rep.Rules {
		loaded[r.Group+"/"+r.Name] = r
	}
	want := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			want++
			name := r.Alert + r.Record
			if got, ok := loaded[g.Name+"/"+name]; !ok || got.Health != "ok" {
				t.Errorf("rule %s/%s: loaded %v, health %q %s", g.Name, name, ok, got.Health, got.LastError)
			}
		}
	}
	if want < 8 || len(rep.Rules) != want {
		t.Errorf("Prometheus loaded %d rules, the file has %d", len(rep.Rules), want)
	}

	// The healthy job.
	for _, p := range rep.Healthy.Problems {
		t.Error(p)
	}
	if !rep.Healthy.OK() {
		t.Errorf("the healthy job: %s", rep.Healthy.Summary())
	}
	if len(rep.HealthyAlerts) > 0 {
		t.Errorf("alerts of the healthy job's namespace or of the operator while it trained: %v", rep.HealthyAlerts)
	}
	if len(rep.Dashboard) < 20 {
		t.Errorf("only %d dashboard queries run", len(rep.Dashboard))
	}
	for q, n := range rep.Dashboard {
		if n == 0 {
			t.Errorf("dashboard panel %q: no series for %s", q.Panel, q.Expr)
		}
	}

	// The starved job.
	if rep.Starved == nil || rep.StarvedWaitShare <= 0.5 {
		t.Errorf("ShardfeedTrainingStarved did not fire for the job on the slow store (its ranks waited %.0f%% of their time)", 100*rep.StarvedWaitShare)
	}
	if rep.HealthyWaitShare >= 0.5 {
		t.Errorf("the healthy job's ranks waited %.0f%% of their time", 100*rep.HealthyWaitShare)
	}
}
