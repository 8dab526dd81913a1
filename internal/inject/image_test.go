package inject

import (
	"strings"
	"testing"
)

func TestImagePolicyAllowsTheDefaultItsRepositoryAndTheList(t *testing.T) {
	p := ImagePolicy{Default: "ghcr.io/shardfeed/shardfeed:v2", Allowed: []string{"registry.team/sidecar:*", "registry.team/pinned@*", "exact/image:1"}}
	tests := []struct {
		image string
		want  bool
	}{
		{"ghcr.io/shardfeed/shardfeed:v2", true},
		{"ghcr.io/shardfeed/shardfeed:v1", true}, // a job pinned before an upgrade
		{"ghcr.io/shardfeed/shardfeed@sha256:" + strings.Repeat("a", 64), true},
		{"ghcr.io/shardfeed/shardfeed-evil:v2", false},
		{"ghcr.io/shardfeed/shardfeed/evil:v2", false},
		{"ghcr.io/shardfeed:v2", false},
		{"registry.team/sidecar:anything", true},
		{"registry.team/sidecar", false},
		{"registry.team/sidecar:a@sha256:" + strings.Repeat("b", 64), false},
		{"registry.team/pinned@sha256:" + strings.Repeat("c", 64), true},
		{"registry.team/pinned:latest", false},
		{"exact/image:1", true},
		{"exact/image:2", false},
		{"registry.evil/steal:latest", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.image); got != tt.want {
			t.Errorf("Allows(%q) = %v, want %v", tt.image, got, tt.want)
		}
	}
	err := ImagePolicy{Default: "shardfeed:v1"}.Check("registry.evil/x:1")
	if err == nil || !strings.Contains(err.Error(), "sidecar.allowedImages (none)") {
		t.Errorf("Check with no list = %v", err)
	}
}

// A dataset's author picks spec.sidecar.image, and the sidecar receives
// the dataset's Secrets: "any tag of the default repository" let them pick
// an old release. Only the default's release and newer ones, or the list;
// a job's pin (Allows) still keeps an older image across an upgrade.
func TestADatasetMayNotPickAnOlderSidecarRelease(t *testing.T) {
	digest := "ghcr.io/shardfeed/shardfeed@sha256:" + strings.Repeat("a", 64)
	release := ImagePolicy{Default: "ghcr.io/shardfeed/shardfeed:0.3.0", Allowed: []string{"registry.team/sidecar:*", "ghcr.io/shardfeed/shardfeed:0.2.9-patched"}}
	pinned := ImagePolicy{Default: digest}
	for _, tt := range []struct {
		p     ImagePolicy
		image string
		ok    bool
	}{
		{release, "ghcr.io/shardfeed/shardfeed:0.3.0", true},
		{release, "ghcr.io/shardfeed/shardfeed:0.3.1", true},
		{release, "ghcr.io/shardfeed/shardfeed:v0.4.0", true},
		{release, "ghcr.io/shardfeed/shardfeed:1.0.0", true},
		{release, "ghcr.io/shardfeed/shardfeed:0.2.9", false},
		{release, "ghcr.io/shardfeed/shardfeed:0.3.0-rc.1", false},
		{release, "ghcr.io/shardfeed/shardfeed:latest", false},
		{release, digest, false}, // a digest names no release
		{release, "ghcr.io/shardfeed/shardfeed:0.2.9-patched", true},
		{release, "registry.team/sidecar:anything", true},
		{release, "ghcr.io/shardfeed/shardfeed-evil:9.9.9", false},
		{pinned, digest, true},
		{pinned, "ghcr.io/shardfeed/shardfeed:9.9.9", false}, // the default names no release to compare with
	} {
		if err := tt.p.Check(tt.image); (err == nil) != tt.ok {
			t.Errorf("default %s: Check(%q) = %v, want allowed %v", tt.p.Default, tt.image, err, tt.ok)
		}
	}
	if !release.Allows("ghcr.io/shardfeed/shardfeed:0.2.9") {
		t.Error("a job pinned to an older release before an upgrade lost its image")
	}
}
