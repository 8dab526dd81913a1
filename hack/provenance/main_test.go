package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTheStatementNamesEachArtifactByItsDigest(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"b.whl": "wheel", "a.tgz": "chart"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	commit := strings.Repeat("ab", 20)
	out := filepath.Join(dir, "p.json")
	if err := run("1.2.3", commit, "https://github.com/shardfeed/shardfeed", "ghcr.io/shardfeed/shardfeed", "ci", "2026-12-03T00:00:00Z", out,
		[]string{filepath.Join(dir, "b.whl"), filepath.Join(dir, "a.tgz")}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var s statement
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	// sha256("chart"), sha256("wheel"), in name order.
	want := []resource{
		{Name: "a.tgz", Digest: digestSet{"sha256": "cc57fc1903e444cf6a726490b43b27ee9f87facc037f86872201847c565b45fb"}},
		{Name: "b.whl", Digest: digestSet{"sha256": "ba59926159d2aa256eb8739b8da7e2b574b960e1202c6d624cbe981cef996c91"}},
	}
	if s.Type != statementType || s.PredicateType != slsaV1 || len(s.Subject) != 2 {
		t.Fatalf("statement %s of %s with %d subjects", s.Type, s.PredicateType, len(s.Subject))
	}
	for i, w := range want {
		if s.Subject[i].Name != w.Name || s.Subject[i].Digest["sha256"] != w.Digest["sha256"] {
			t.Errorf("subject %d: %+v, want %s", i, s.Subject[i], w.Name)
		}
	}
	if got := s.Predicate.BuildDefinition.ResolvedDependencies[0].Digest["gitCommit"]; got != commit {
		t.Errorf("the source's commit %q, want %q", got, commit)
	}
	for _, bad := range []struct{ version, commit, started string }{{"", commit, "2026-12-03T00:00:00Z"}, {"1", "abc", "2026-12-03T00:00:00Z"}, {"1", commit, "yesterday"}} {
		if err := run(bad.version, bad.commit, "r", "i", "b", bad.started, out, []string{out}); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
