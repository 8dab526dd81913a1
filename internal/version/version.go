// Package version reports the build's version, stamped by the linker
// (see the Makefile's LDFLAGS).
package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Set with -ldflags "-X github.com/shardfeed/shardfeed/internal/version.version=...".
var (
	version = "dev"
	commit  = ""
)

// Repository is where release images are published. An image's tag is
// the release's version without the git tag's "v" (0.1.0 for v0.1.0), the
// chart's appVersion: one scheme for the chart, the docs and make images.
const Repository = "ghcr.io/shardfeed/shardfeed"

// Image is this build's release image: Repository:<version without v>.
func Image() string {
	return Repository + ":" + strings.TrimPrefix(Get().Version, "v")
}

// PlanVersion is the newest version of the plan algorithm (design §3) this
// build computes. A change to any plan bumps it; a plan that uses no
// feature of a newer version keeps its version. A plan's version is part
// of its fingerprint.
const PlanVersion = 5

// Info describes a build.
type Info struct {
	Version     string `json:"version"`
	Commit      string `json:"commit,omitempty"`
	GoVersion   string `json:"goVersion"`
	Platform    string `json:"platform"`
	PlanVersion int    `json:"planVersion"`
}

// Get returns the build's version information. Without linker stamping the
// commit comes from the VCS information Go records, when there is one.
func Get() Info {
	info := Info{
		Version:     version,
		Commit:      commit,
		GoVersion:   runtime.Version(),
		Platform:    runtime.GOOS + "/" + runtime.GOARCH,
		PlanVersion: PlanVersion,
	}
	if info.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					info.Commit = s.Value
				}
			}
		}
	}
	return info
}

// String renders the information on one line.
func (i Info) String() string {
	s := fmt.Sprintf("shardfeed %s (plan v%d, %s, %s)", i.Version, i.PlanVersion, i.GoVersion, i.Platform)
	if i.Commit != "" {
		s += " commit " + i.Commit
	}
	return s
}

// BuildInfo is a gauge of 1 whose labels say which build runs, as
// Prometheus' own <namespace>_build_info does: a dashboard joins on it to
// show versions, and an alert can spot replicas of different builds.
func BuildInfo(namespace string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help: "A metric with a constant 1, labelled with the build's version, commit, Go version and plan version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Commit, "goversion": i.GoVersion,
			"planversion": strconv.Itoa(i.PlanVersion)},
	})
	g.Set(1)
	return g
}

// Write prints a version report as a command's --output asks: text (the
// lines given) or json (v, indented).
func Write(w io.Writer, output string, v any, text string) error {
	switch output {
	case "text":
		_, err := io.WriteString(w, text)
		return err
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	default:
		return fmt.Errorf("--output %q is not supported: use text or json", output)
	}
}
