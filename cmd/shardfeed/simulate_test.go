package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseBandwidth(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  bool
	}{
		{"1GB/s", 1e9, false}, {"500MB/s", 5e8, false}, {"1GiB/s", 1 << 30, false}, {"10Gbit/s", 1.25e9, false},
		{"800Mbps", 1e8, false}, {"123456", 123456, false},
		{"0", 0, true}, {"-1GB/s", 0, true}, {"fast", 0, true}, {"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseBandwidth(tt.in)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("parseBandwidth(%q) = %g, %v; want %g (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestSimulateCommand(t *testing.T) {
	manifest := fixture(t, "  numSplits: 4\n  globalBatchSize: 8\n  shuffle: {blockSize: 16, seed: 2}\n")
	tests := []struct {
		name string
		args []string
		says []string
		err  bool
	}{
		{"text", []string{"--pods", "2", "--bandwidth", "1MB/s", "--step-time", "10ms"},
			[]string{"POD", "BYTES/EPOCH", "MIN CACHE", "FIRST BATCH", "STALL", "mean gap", "distinct shards per global batch"}, false},
		{"pods that do not divide numSplits", []string{"--pods", "3"}, []string{"divide"}, true},
		{"a mesh", []string{"--mesh", "pp=3,dp=2,tp=2", "--procs-per-pod", "4"}, []string{"3 pods × 4 ranks in mesh pp=3,dp=2,tp=2"}, false},
		{"a mesh whose dp does not divide", []string{"--mesh", "dp=3", "--procs-per-pod", "1"}, []string{"3 does not divide spec.numSplits (4)"}, true},
		{"a bandwidth that is not one", []string{"--pods", "1", "--bandwidth", "quick"}, []string{"--bandwidth", "1GB/s"}, true},
		{"an unknown output", []string{"--pods", "1", "-o", "yaml"}, []string{"text or json"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runCLI(t, append([]string{"simulate", "-f", manifest}, tt.args...)...)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want one: %v\n%s", err, tt.err, out)
			}
			text := out
			if err != nil {
				text += err.Error()
			}
			for _, s := range tt.says {
				if !strings.Contains(text, s) {
					t.Errorf("output lacks %q:\n%s", s, text)
				}
			}
		})
	}

	// A scheduled dataset: its steps at every batch size.
	scheduled := fixture(t, scheduleTail)
	out, err := runCLI(t, "simulate", "-f", scheduled, "--pods", "2", "--bandwidth", "10MB/s")
	if err != nil || !strings.Contains(out, "66 steps") {
		t.Fatalf("simulate of a scheduled dataset: %v\n%s", err, out)
	}

	// JSON: per pod, the bytes are the plan summary's.
	out, err = runCLI(t, "simulate", "-f", manifest, "--pods", "2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var sim struct {
		Steps int64
		Pods  []struct {
			Pod           int
			Bytes         int64
			MinCacheBytes int64
		}
	}
	if err := json.Unmarshal([]byte(out), &sim); err != nil {
		t.Fatal(err)
	}
	plan, err := runCLI(t, "plan", "-f", manifest, "--pods", "2", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var summary struct {
		Pods []struct {
			FetchedBytes     int64 `json:"fetchedBytes"`
			MinCacheBytesPod int64 `json:"minCacheBytesPerPod"`
		}
	}
	if err := json.Unmarshal([]byte(plan), &summary); err != nil {
		t.Fatal(err)
	}
	if len(sim.Pods) != 2 || sim.Pods[0].Bytes+sim.Pods[1].Bytes != summary.Pods[0].FetchedBytes ||
		sim.Pods[0].MinCacheBytes != summary.Pods[0].MinCacheBytesPod {
		t.Errorf("simulate %+v disagrees with plan %+v", sim, summary)
	}
}
