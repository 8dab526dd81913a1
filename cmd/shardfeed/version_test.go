package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/version"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

func TestVersionCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, out string)
		wantErr string
	}{
		{
			name: "text",
			args: []string{"version"},
			check: func(t *testing.T, out string) {
				if !strings.HasPrefix(out, "shardfeed ") || !strings.Contains(out, "\nJPEG decoder: "+images.JPEGDecoder+"\n") ||
					!strings.Contains(out, "\nVideo decoder: "+video.Decoder+"\n") {
					t.Errorf("output %q does not start with %q and name the JPEG and video decoders", out, "shardfeed ")
				}
			},
		},
		{
			name: "--version, as other tools have it",
			args: []string{"--version"},
			check: func(t *testing.T, out string) {
				if out != version.Get().String()+"\n" {
					t.Errorf("--version = %q, want %q", out, version.Get().String())
				}
			},
		},
		{
			name: "json",
			args: []string{"version", "-o", "json"},
			check: func(t *testing.T, out string) {
				var info struct {
					version.Info
					JPEGDecoder  string `json:"jpegDecoder"`
					VideoDecoder string `json:"videoDecoder"`
				}
				if err := json.Unmarshal([]byte(out), &info); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, out)
				}
				if info.PlanVersion != version.PlanVersion || info.GoVersion == "" || info.JPEGDecoder != images.JPEGDecoder || info.VideoDecoder != video.Decoder {
					t.Errorf("info = %+v, want plan version %d and a Go version", info, version.PlanVersion)
				}
			},
		},
		{name: "unknown format", args: []string{"version", "-o", "yaml"}, wantErr: "use text or json"},
		{name: "extra argument", args: []string{"version", "now"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := newRootCommand()
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, out.String())
		})
	}
}

// serve's flags as `--help` shows them: metrics on loopback unless asked
// (a laptop's serve is no service of its network), one default each.
func TestServeHelpShowsOneDefaultAndLoopbackMetrics(t *testing.T) {
	out, err := runCLI(t, "serve", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("a flag with two defaults: %s", strings.TrimSpace(line))
		}
		if strings.Contains(line, "--metrics-addr") && !strings.Contains(line, `(default "127.0.0.1:9464")`) {
			t.Errorf("metrics are not on loopback by default: %s", strings.TrimSpace(line))
		}
	}
}
