package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
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
		{"the node cache", []string{"--pods", "4", "--bandwidth", "1MB/s", "--node-cache", "--trials", "20", "--rescale-to", "2"},
			[]string{"20 trials of this job", "with the node cache (new pod i on old pod i's node)"}, false},
		{"a sweep without the node cache", []string{"--pods", "2", "--trials", "20"}, []string{"add --node-cache"}, true},
		{"a node cache limit that is not one", []string{"--pods", "2", "--node-cache", "--node-cache-limit", "lots"}, []string{"--node-cache-limit", "500Gi"}, true},
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

// Where a stream's index is compact, simulate measures a pod's sidecar
// reading it in parts, at the job's start and as a rescale's new pod: a
// part of the entries, and the bytes it read (its header's first read, and
// at most a block of each section an entry). A JSON index is read whole.
func TestSimulateMeasuresAPodsStartWithItsIndexInParts(t *testing.T) {
	const shards = 20000
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: "parquet", Shards: make([]indexfile.Entry, shards)}
	for h := range f.Shards {
		object := fmt.Sprintf("part-%05d.parquet", h)
		f.Shards[h] = indexfile.Entry{Name: object + "#0", Object: object, Offset: 4, Length: 4096 * 100, Samples: 100,
			Hash: fmt.Sprintf("xxh64:%016x", h), ObjectSize: 4096*100 + 512}
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "dataset.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: pretrain}
spec:
  streams:
  - name: tokens
    format: parquet
    source: {uri: "s3://corpus/tokens/"}
  numSplits: 32
  globalBatchSize: 64
  shuffle: {blockSize: 512, seed: 7}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, form := range []index.Form{index.FormCompact, index.FormJSON} {
		idx := filepath.Join(dir, string(form))
		data, err := json.Marshal(f)
		name := indexfile.FileName
		if form == index.FormCompact {
			data, err = compact.Encode(f)
			name = compact.FileName
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(idx, "tokens"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(idx, "tokens", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"simulate", "-f", manifest, "--index-dir", idx, "--pods", "8", "--procs-per-pod", "2", "--rescale-to", "4"}
		out, err := runCLI(t, append(args, "-o", "json")...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", form, err, out)
		}
		var sim struct {
			InParts      *partsStart `json:"startInParts"`
			RescaleParts *partsStart `json:"rescaleStartInParts"`
		}
		if err := json.Unmarshal([]byte(out), &sim); err != nil {
			t.Fatal(err)
		}
		if form == index.FormJSON {
			if sim.InParts != nil || sim.RescaleParts != nil {
				t.Fatalf("a JSON index measured read in parts: %s", out)
			}
			continue
		}
		for _, ps := range []struct {
			pods int
			got  *partsStart
		}{{8, sim.InParts}, {4, sim.RescaleParts}} {
			if ps.got == nil || ps.got.Pods != ps.pods || ps.got.Entries < 1 || ps.got.Entries > shards/int64(ps.pods) ||
				ps.got.IndexBytes <= 0 || ps.got.IndexBytes > 32<<10+4*compact.BlockSize*(ps.got.Entries+1) {
				t.Fatalf("pods %d: a start in parts %+v, of an index of %d bytes and %d shards", ps.pods, ps.got, len(data), shards)
			}
		}
		if sim.RescaleParts.AtStep == 0 {
			t.Fatal("the rescale's pod started at step 0, not the middle of the epoch")
		}
		text, err := runCLI(t, args...)
		if err != nil || !strings.Contains(text, "pod 0 of 8 at step 0, its indexes read in parts") || !strings.Contains(text, "pod 0 of 4 at step") {
			t.Fatalf("text: %v\n%s", err, text)
		}
	}
}
