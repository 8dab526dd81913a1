package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/version"
)

func TestVersionPrintsTheReleaseAndItsPlanAlgorithm(t *testing.T) {
	tests := []struct {
		args  []string
		check func(out string) bool
		err   string
	}{
		{[]string{"version"}, func(out string) bool { return out == version.Get().String()+"\n" }, ""},
		{[]string{"version", "-o", "json"}, func(out string) bool {
			var info version.Info
			return json.Unmarshal([]byte(out), &info) == nil && info == version.Get() && info.PlanVersion > 0
		}, ""},
		{[]string{"version", "-o", "yaml"}, nil, `--output "yaml" is not supported`},
		{[]string{"version", "extra"}, nil, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := newRoot()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(tt.args)
			err := root.Execute()
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case !tt.check(out.String()):
				t.Errorf("printed %q", out.String())
			}
		})
	}
}
