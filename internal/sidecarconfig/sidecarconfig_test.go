package sidecarconfig

import (
	"testing"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

// TestWhatTheWebhookRendersTheSidecarParses renders configs as the
// webhook does and parses the environment as the sidecar does (pod fields
// resolved as the kubelet would): the same config comes back.
func TestWhatTheWebhookRendersTheSidecarParses(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		fields map[string]string
	}{
		{name: "pod mode", config: Config{Dataset: "web", Placement: Placement{RankMode: RankModePod, Pod: 3, Pods: 4, ProcsPerPod: 2}, Job: "train", Attempt: "uid-1", Image: "i:1"}},
		{name: "pod rank from a field", config: Config{Dataset: "web", Placement: Placement{RankMode: RankModePod, Pod: 5, Pods: 8, ProcsPerPod: 1}, PodRankField: "metadata.labels['x']", Job: "j", Attempt: "a", Image: "i"},
			fields: map[string]string{"metadata.labels['x']": "5"}},
		{name: "replication groups", config: Config{Dataset: "web", Placement: Placement{RankMode: RankModePod, Pod: 1, Pods: 2, ProcsPerPod: 4, DataParallel: 2}, Job: "j", Attempt: "a", Image: "i"}},
		{name: "client mode", config: Config{Dataset: "web", Placement: Placement{RankMode: RankModeClient, Pods: 1, ProcsPerPod: 1}, Job: "j", Attempt: "a", Image: "i"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields := map[string]string{"metadata.namespace": "team-a"}
			for k, v := range tt.fields {
				fields[k] = v
			}
			env := map[string]string{}
			for _, e := range tt.config.Env() {
				if e.ValueFrom != nil {
					env[e.Name] = fields[e.ValueFrom.FieldRef.FieldPath]
				} else {
					env[e.Name] = e.Value
				}
			}
			got, err := FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			want := tt.config
			want.PodRankField, want.Namespace = "", "team-a"
			if got != want {
				t.Errorf("parsed %+v, rendered %+v", got, want)
			}
			if env[EnvSocket] != SocketPath || env[EnvPlanDir] != PlanDir || env[EnvCacheDir] != CacheDir || env[EnvCredentialsDir] != CredentialsDir {
				t.Errorf("paths = %v", env)
			}
		})
	}
}

func TestFromEnvRefusesANonNumber(t *testing.T) {
	_, err := FromEnv(func(k string) (string, bool) { return "x", k == EnvPods })
	if err == nil {
		t.Fatal("SHARDFEED_PODS=x was accepted")
	}
}

func TestArgsCarryThePort(t *testing.T) {
	if got := (Config{}).Args()[2]; got != ":9464" {
		t.Errorf("default metrics address %s", got)
	}
	if got := (Config{MetricsPort: 9000}).Args()[2]; got != ":9000" {
		t.Errorf("metrics address %s", got)
	}
}

// The training containers find the socket by the variable the clients read.
func TestTheClientsReadTheSocketVariableTheWebhookSets(t *testing.T) {
	if EnvSocket != shardfeed.SocketEnv {
		t.Errorf("the webhook sets %s, the Go client reads %s", EnvSocket, shardfeed.SocketEnv)
	}
}
