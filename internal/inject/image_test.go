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
