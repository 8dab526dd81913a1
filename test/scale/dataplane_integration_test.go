//go:build integration

package scale_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/bytesize"
	"github.com/shardfeed/shardfeed/internal/index"
	"github.com/shardfeed/shardfeed/internal/index/compact"
	"github.com/shardfeed/shardfeed/internal/index/indexfile"
	"github.com/shardfeed/shardfeed/planner"
)

// dataPlane is a job the planner and `shardfeed simulate` size: one stream
// of shards of equal size, pods of ranks ranks each, rescaled to rescaleTo
// pods in the middle of an epoch.
type dataPlane struct {
	samples, shards, sampleBytes int64
	pods, ranks, rescaleTo       int
	blockSizes                   []int64
	bandwidth                    string
	stepTime                     time.Duration
}

var (
	// Above index.CompactAbove shards: the index is compact, and simulate
	// measures a sidecar's start with it read in parts.
	shortDataPlane = dataPlane{samples: 1e8, shards: 2e4, sampleBytes: 4096, pods: 128, ranks: 8, rescaleTo: 96,
		blockSizes: []int64{1 << 18, 1 << 14}, bandwidth: "1GB/s", stepTime: time.Second}
	// The job: 1024 pods of 8 ranks over 1e10 samples in 1e7
	// shards (2048 tokens of 2 bytes a sample: 4 MB shards, 41 TB).
	fullDataPlane = dataPlane{samples: 1e10, shards: 1e7, sampleBytes: 4096, pods: 1024, ranks: 8, rescaleTo: 768,
		blockSizes: []int64{1 << 18, 1 << 14}, bandwidth: "1GB/s", stepTime: time.Second}
)

// splits divides both worlds: the rescale keeps the plan.
func (d dataPlane) splits() int64 {
	a, b := int64(d.pods*d.ranks), int64(d.rescaleTo*d.ranks)
	g := a
	for r := b; r != 0; {
		g, r = r, g%r
	}
	return a / g * b
}

// simulated is what `shardfeed simulate -o json` prints, in part.
type simulated struct {
	Steps int64
	Pods  []planner.PodSim
	Start struct {
		Shards    int
		Indexes   time.Duration `json:"indexesNanos"`
		Plan      time.Duration `json:"planNanos"`
		HeapBytes int64
	}
	Rescale *planner.Rescale
	Sweep   *planner.Sweep
	// A pod's sidecar's start, the indexes read in parts, at step 0 and
	// as a rescale's new pod.
	InParts      *partsStart `json:"startInParts"`
	RescaleParts *partsStart `json:"rescaleStartInParts"`
	Warnings     []string
}

// partsStart is simulate's startInParts.
type partsStart struct {
	Pods       int
	AtStep     int64
	IndexBytes int64
	Entries    int64
	Indexes    time.Duration `json:"indexesNanos"`
	Plan       time.Duration `json:"planNanos"`
	Resolve    time.Duration `json:"resolveNanos"`
	HeapBytes  int64
}

func (p *partsStart) String() string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%s (%d entries), %s, %s", bytesize.Human(p.IndexBytes), p.Entries, (p.Indexes + p.Plan + p.Resolve).Round(time.Millisecond), bytesize.Human(p.HeapBytes))
}

// TestIntegrationDataPlane sizes a large job's data plane with the planner
// and `shardfeed simulate`, from an index of the job's size as `shardfeed
// index` writes it: what each sidecar computes at start, what each pod
// fetches and holds, its first batch, and what a rescale refetches.
func TestIntegrationDataPlane(t *testing.T) {
	d := shortDataPlane
	if full {
		d = fullDataPlane
	}
	dir := t.TempDir()
	idx := filepath.Join(dir, "indexes", "tokens", indexfile.FileName)
	indexBytes := writeLargeIndex(t, idx, d)
	splits := d.splits()
	var rows, nodeRows []string
	for _, block := range d.blockSizes {
		manifest := filepath.Join(dir, fmt.Sprintf("dataset-%d.yaml", block))
		if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: data.shardfeed.io/v1alpha1
kind: TrainingDataset
metadata: {name: pretrain}
spec:
  streams:
  - name: tokens
    format: parquet
    source: {uri: "s3://corpus/tokens/"}
  numSplits: %d
  globalBatchSize: %d
  shuffle: {blockSize: %d, seed: 7}
`, splits, 2*splits, block)), 0o600); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		out, err := exec.Command(shardfeedBinary, "simulate", "-f", manifest, "--index-dir", filepath.Join(dir, "indexes"),
			"--pods", fmt.Sprint(d.pods), "--procs-per-pod", fmt.Sprint(d.ranks), "--bandwidth", d.bandwidth,
			"--step-time", d.stepTime.String(), "--rescale-to", fmt.Sprint(d.rescaleTo),
			"--node-cache", "--node-bandwidth", nodeBandwidth, "--trials", fmt.Sprint(trials), "-o", "json").Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			t.Fatalf("simulate: %v\n%s", err, stderr)
		}
		took := time.Since(began)
		var sim simulated
		if err := json.Unmarshal(out, &sim); err != nil {
			t.Fatal(err)
		}
		checkDataPlane(t, d, sim)
		// A stream's index larger than a sidecar reads is named.
		if over := indexBytes > indexfile.DefaultMaxBytes; over != (len(sim.Warnings) == 1 && strings.Contains(sim.Warnings[0], "more than the 64.0 MiB a sidecar reads")) {
			t.Errorf("an index of %d bytes: warnings %q", indexBytes, sim.Warnings)
		}
		rows = append(rows, dataPlaneRow(block, sim, took))
		nodeRows = append(nodeRows, nodeCacheRow(block, sim))
	}
	report := fmt.Sprintf("%d pods × %d ranks (then %d pods), %.0e samples of %d bytes in %.0e shards of %s (%s), numSplits %d, global batch %d, %s per pod from the store, %s per step. "+
		"The index as `shardfeed index` writes it: %s (the sidecar reads at most %s of a stream's index, the manager %s by default).\n\n"+
		"| shuffle block | reading the whole index: parsed, plan built, heap | a pod's sidecar reading the index in parts: read (entries), start, heap; a rescale's new pod | per pod and epoch: shards, bytes, GETs (min–max) | cache per pod | first batch | rescale %d → %d pods mid-epoch: the new pods fetch, of which refetched | their first batch | simulate took |\n"+
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n%s",
		d.pods, d.ranks, d.rescaleTo, float64(d.samples), d.sampleBytes, float64(d.shards), bytesize.Human(d.samples/d.shards*d.sampleBytes), bytesize.Human(d.samples*d.sampleBytes),
		splits, 2*splits, d.bandwidth, d.stepTime, bytesize.Human(indexBytes), bytesize.Human(indexfile.DefaultMaxBytes), "16 MiB",
		d.pods, d.rescaleTo, strings.Join(rows, ""))
	report += fmt.Sprintf("\nWith the node cache (#58; `simulate --node-cache`, one pod to a node, %s from a node's cache, no node budget): "+
		"a sweep of %d trials of the job one after another on the same nodes, and the rescale above with new pod i on old pod i's node.\n\n"+
		"| shuffle block | sweep: from the store without / with the node cache | first batch from the store / a later trial's from its node | rescale: the new pods read from their nodes, from the store (of which refetched) | their first batch without / with |\n"+
		"| --- | --- | --- | --- | --- |\n%s", nodeBandwidth, trials, strings.Join(nodeRows, ""))
	t.Logf("data plane:\n%s", report)
	if path := os.Getenv("SCALE_DATAPLANE_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil { //nolint:gosec // a report
			t.Error(err)
		}
	}
}

// writeLargeIndex writes an index of d's shards (one Parquet row group an
// object) to path's directory, as `shardfeed index` does (index.json, or
// index.sfi above index.CompactAbove shards), and returns its size.
func writeLargeIndex(t *testing.T, path string, d dataPlane) int64 {
	t.Helper()
	per := d.samples / d.shards
	f := &indexfile.File{Shardfeed: indexfile.Version, Format: "parquet", Shards: make([]indexfile.Entry, d.shards)}
	for i := range f.Shards {
		object := fmt.Sprintf("part-%07d.parquet", i)
		f.Shards[i] = indexfile.Entry{Name: object + "#0", Object: object, Offset: 4, Length: per * d.sampleBytes, Samples: per,
			Hash: fmt.Sprintf("xxh64:%016x", i), ObjectSize: per*d.sampleBytes + 1024}
	}
	// In the form shardfeed index writes by default: compact above
	// index.CompactAbove shards.
	data, err := json.MarshalIndent(f, "", " ")
	if index.FormAuto.Of(f) == index.FormCompact {
		data, err = compact.Encode(f)
		path = filepath.Join(filepath.Dir(path), compact.FileName)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return int64(len(data))
}

// checkDataPlane checks what must hold whatever the figures: every pod
// fetches, the pods read every shard, a rescale's bytes add up.
func checkDataPlane(t *testing.T, d dataPlane, sim simulated) {
	t.Helper()
	if len(sim.Pods) != d.pods || sim.Start.Shards != int(d.shards) {
		t.Fatalf("simulate sized %d pods over %d shards, want %d over %d", len(sim.Pods), sim.Start.Shards, d.pods, d.shards)
	}
	shardBytes := d.samples / d.shards * d.sampleBytes
	var fetched int64
	for _, ps := range sim.Pods {
		if ps.Bytes <= 0 || ps.Requests < int64(ps.Shards) || ps.MinCacheBytes < shardBytes || ps.FirstBatch <= 0 {
			t.Fatalf("pod %+v", ps)
		}
		fetched += ps.Bytes
	}
	if fetched < d.samples*d.sampleBytes {
		t.Errorf("the pods fetch %d bytes in an epoch, less than the dataset's %d", fetched, d.samples*d.sampleBytes)
	}
	// A compact index is read in parts by a pod's sidecar: a part of it.
	if compact := d.shards > index.CompactAbove; compact != (sim.InParts != nil && sim.RescaleParts != nil) {
		t.Fatalf("an index of %d shards: simulate measured a start in parts %+v, a rescale's %+v", d.shards, sim.InParts, sim.RescaleParts)
	}
	for _, ps := range []*partsStart{sim.InParts, sim.RescaleParts} {
		// At most about the shards a pod reads in an epoch (a small job's
		// first window is most of them).
		if ps != nil && (ps.Entries < 1 || ps.Entries > 2*d.shards/int64(min(d.pods, d.rescaleTo)) || ps.IndexBytes <= 0) {
			t.Errorf("a start in parts resolved %d entries of %d shards (reading %d bytes): not the part of a pod", ps.Entries, d.shards, ps.IndexBytes)
		}
	}
	r := sim.Rescale
	if r == nil || r.ToPods != d.rescaleTo || r.Before+r.Unchanged != fetched || r.Refetched <= 0 || r.Refetched > r.After {
		t.Fatalf("rescale %+v: before + unchanged must be the epoch's %d bytes, something refetched, no more than after", r, fetched)
	}
	// The node cache: a sweep's later trials fetch nothing (no node
	// budget); a rescale's new pods read part of their window from their
	// nodes and refetch less.
	if sw := sim.Sweep; sw == nil || sw.Egress != trials*fetched || sw.EgressWithNode != fetched || sw.FirstBatchFromNode >= sw.FirstBatch {
		t.Errorf("sweep %+v: want %d trials × the epoch's %d bytes without the node cache, one epoch with it, and a first batch sooner from the node", sim.Sweep, trials, fetched)
	}
	if n := r.NodeCache; n == nil || n.FromNodes+n.FromStore != r.After || n.FromNodes <= 0 || n.Refetched >= r.Refetched {
		t.Errorf("a rescale with the node cache %+v, without %+v: want the window split between the nodes and the store, less refetched", r.NodeCache, r)
	}
}

// The node cache's figures: a sweep of trials, a node's read rate.
const (
	trials        = 20
	nodeBandwidth = "2GB/s"
)

func nodeCacheRow(block int64, sim simulated) string {
	sw, r := sim.Sweep, sim.Rescale
	n := r.NodeCache
	return fmt.Sprintf("| %d | %s / %s | %s / %s | %s, %s (%s) | %s / %s |\n", block,
		bytesize.Human(sw.Egress), bytesize.Human(sw.EgressWithNode), sw.FirstBatch.Round(100*time.Millisecond), sw.FirstBatchFromNode.Round(100*time.Millisecond),
		bytesize.Human(n.FromNodes), bytesize.Human(n.FromStore), bytesize.Human(n.Refetched), r.FirstBatch.Round(100*time.Millisecond), n.FirstBatch.Round(100*time.Millisecond))
}

func dataPlaneRow(block int64, sim simulated, took time.Duration) string {
	lo, hi := sim.Pods[0], sim.Pods[0]
	var firstMax time.Duration
	var cache int64
	for _, ps := range sim.Pods {
		if ps.Bytes < lo.Bytes {
			lo = ps
		}
		if ps.Bytes > hi.Bytes {
			hi = ps
		}
		firstMax, cache = max(firstMax, ps.FirstBatch), max(cache, ps.MinCacheBytes)
	}
	r := sim.Rescale
	epoch := r.Before + r.Unchanged
	return fmt.Sprintf("| %d | %s + %s, %s | %s; %s | %d–%d shards, %s–%s, %d–%d GETs | %s | %s (slowest pod) | %s (%s had it kept its size), %s refetched (%.2f%% of the epoch's %s) | %s | %s |\n",
		block, sim.Start.Indexes.Round(10*time.Millisecond), sim.Start.Plan.Round(10*time.Millisecond), bytesize.Human(sim.Start.HeapBytes), sim.InParts, sim.RescaleParts,
		lo.Shards, hi.Shards, bytesize.Human(lo.Bytes), bytesize.Human(hi.Bytes), lo.Requests, hi.Requests,
		bytesize.Human(cache), firstMax.Round(100*time.Millisecond),
		bytesize.Human(r.After), bytesize.Human(r.Unchanged), bytesize.Human(r.Refetched), 100*float64(r.Refetched)/float64(epoch), bytesize.Human(epoch),
		r.FirstBatch.Round(100*time.Millisecond), took.Round(100*time.Millisecond))
}
