package version

import (
	"strings"
	"testing"
)

func TestStringNamesVersionPlanAndCommit(t *testing.T) {
	tests := []struct {
		name string
		info Info
		want []string
		not  []string
	}{
		{
			name: "with commit",
			info: Info{Version: "v0.1.0", Commit: "abc123", GoVersion: "go1.26", Platform: "linux/amd64", PlanVersion: 1},
			want: []string{"shardfeed v0.1.0", "plan v1", "commit abc123", "linux/amd64"},
		},
		{
			name: "without commit",
			info: Info{Version: "dev", GoVersion: "go1.26", Platform: "linux/arm64", PlanVersion: 2},
			want: []string{"shardfeed dev", "plan v2", "linux/arm64"},
			not:  []string{"commit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.info.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("String() = %q, want it to contain %q", got, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("String() = %q, want it without %q", got, n)
				}
			}
		})
	}
}

func TestGetReportsLinkerStampedVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.9.9"
	if got := Get(); got.Version != "v9.9.9" || got.PlanVersion != PlanVersion {
		t.Fatalf("Get() = %+v, want version v9.9.9 and plan version %d", got, PlanVersion)
	}
}

func TestImageTagIsTheVersionWithoutTheV(t *testing.T) {
	defer func(v string) { version = v }(version)
	for _, tc := range []struct{ version, want string }{
		{"v0.3.1", "ghcr.io/shardfeed/shardfeed:0.3.1"},
		{"0.3.1", "ghcr.io/shardfeed/shardfeed:0.3.1"},
		{"dev", "ghcr.io/shardfeed/shardfeed:dev"},
	} {
		version = tc.version
		if got := Image(); got != tc.want {
			t.Errorf("version %s: image %s, want %s", tc.version, got, tc.want)
		}
	}
}
