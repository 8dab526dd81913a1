package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/configmaps"
	"github.com/shardfeed/shardfeed/internal/progress"
)

// Every --fresh run leaves a job's state under .shardfeed/: jobs lists
// them, and jobs rm removes the named ones or the stale ones.
func TestJobsListsAndRemovesLocalJobState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".shardfeed")
	commit := func(dataset, job string, at time.Time, step int64) {
		st, err := progress.NewFileStore(filepath.Join(dir, dataset, job, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(context.Background(), func(s *configmaps.State) error {
			s.Dataset, s.Job, s.Step, s.Committed = dataset, job, step, &at
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// As a job last touched then: its files too (the state, its lock).
		entries, err := os.ReadDir(filepath.Join(dir, dataset, job))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.Chtimes(filepath.Join(dir, dataset, job, e.Name()), at, at); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(filepath.Join(dir, dataset, job), at, at); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	commit("web", "local", now, 40)
	commit("web", "local-20261101-120000", now.Add(-30*24*time.Hour), 7)
	commit("code", "local-20261102-120000", now.Add(-20*24*time.Hour), 3)

	out, err := runCLI(t, "jobs", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code  ", "local-20261102-120000", "web", "local-20261101-120000", "40"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs output lacks %q:\n%s", want, out)
		}
	}
	if _, err := runCLI(t, "jobs", "rm", "--dir", dir, "nope"); err == nil || !strings.Contains(err.Error(), "no job nope") {
		t.Errorf("removing a job that is not there: %v", err)
	}
	if _, err := runCLI(t, "jobs", "rm", "--dir", dir); err == nil {
		t.Error("jobs rm with neither names nor --older-than removed something")
	}
	out, err = runCLI(t, "jobs", "rm", "--dir", dir, "--older-than", "168h")
	if err != nil || strings.Count(out, "removed job") != 2 {
		t.Fatalf("jobs rm --older-than: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "web", "local", "state.json")); err != nil {
		t.Fatalf("the recent job went too: %v", err)
	}
	if out, err = runCLI(t, "jobs", "rm", "--dir", dir, "local"); err != nil || !strings.Contains(out, `removed job "local" of TrainingDataset "web"`) {
		t.Fatalf("jobs rm local: %v\n%s", err, out)
	}
	if out, _ = runCLI(t, "jobs", "--dir", dir); !strings.Contains(out, "no job state") {
		t.Errorf("jobs after removing every one:\n%s", out)
	}
}
