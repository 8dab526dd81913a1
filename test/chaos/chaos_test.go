//go:build chaos

// The fault-injection suite on the local cluster: hack/e2e.sh brings the
// cluster up, imports the images and runs it (make test-chaos for every
// scenario, the short run inside make test).
package chaos_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardfeed/shardfeed/internal/testenv"
	"github.com/shardfeed/shardfeed/test/chaos"
	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// full is every scenario of make test-chaos: each fault alone, then all of
// them together in the seed's order.
var full = []chaos.Scenario{
	{Name: "sidecar-kill", Worlds: []int{4}, Faults: []chaos.Fault{chaos.KillSidecar, chaos.KillSidecar}},
	{Name: "trainer-kill", Worlds: []int{4}, Faults: []chaos.Fault{chaos.KillTrainer, chaos.KillTrainer}},
	{Name: "rescale", Worlds: []int{4, 3, 6, 2}},
	{Name: "minio-outage", Worlds: []int{4}, Faults: []chaos.Fault{chaos.MinIOOutage}},
	{Name: "apiserver-restart", Worlds: []int{4}, Faults: []chaos.Fault{chaos.APIServerRestart}},
	{Name: "corrupt-fail", Worlds: []int{4}, Faults: []chaos.Fault{chaos.CorruptShard}},
	{Name: "corrupt-skip", Worlds: []int{4}, Faults: []chaos.Fault{chaos.CorruptShard}, OnCorruptShard: "skip"},
	{Name: "slow-store", Worlds: []int{4}, Faults: []chaos.Fault{chaos.SlowStore}},
	{Name: "manager-kill", Worlds: []int{4}, Faults: []chaos.Fault{chaos.KillManager, chaos.KillManager}},
	{Name: "manager-roll", Worlds: []int{4}, Faults: []chaos.Fault{chaos.RollManager}},
	// The node cache (#58): its agent killed mid-fill, its entries garbled
	// and truncated on the node, its disk (a 256 KiB tmpfs) full; the job
	// reads the store where the node fails it.
	{Name: "node-cache", Worlds: []int{4, 2}, NodeCache: true, NodeDiskBytes: 256 << 10,
		Faults: []chaos.Fault{chaos.KillAgent, chaos.GarbleNodeCache, chaos.KillAgent}},
	upgrade,
	// Ten injections, some of them long (the store down for up to a
	// minute while the sidecars' caches carry the job on): a long epoch.
	{Name: "everything", Worlds: []int{4, 3, 6, 2}, OnCorruptShard: "skip", Samples: 19200, Faults: []chaos.Fault{
		chaos.KillSidecar, chaos.KillTrainer, chaos.MinIOOutage, chaos.APIServerRestart, chaos.CorruptShard, chaos.SlowStore,
		chaos.KillManager, chaos.RollManager}},
}

// upgrade: a job runs across an operator upgrade and a rescale. The
// upgrade takes tens of seconds: slower steps, and it begins in the first
// fifth of the epoch, so the job still runs when it ends.
var upgrade = chaos.Scenario{Name: "operator-upgrade", Worlds: []int{4, 2}, Faults: []chaos.Fault{chaos.UpgradeOperator},
	StepTime: 250 * time.Millisecond, Latest: 0.2}

// short is the run inside make test: one job through a rescale and the
// faults that need no long wait (a sidecar and a trainer killed while
// batches are in their shared memory among them), and the upgrade. The
// job trains on through some injections (a manager replica's restart
// takes about 20 s, the store's outage 10 s): an epoch of 800 steps
// (80 s) with every fault in its first 40 % leaves them all room.
var short = []chaos.Scenario{
	{Name: "short", Worlds: []int{4, 2}, OnCorruptShard: "skip", OutageMin: 10 * time.Second, OutageMax: 10 * time.Second,
		Samples: 9600, Latest: 0.4,
		Faults: []chaos.Fault{chaos.KillSidecar, chaos.KillTrainer, chaos.MinIOOutage, chaos.APIServerRestart, chaos.CorruptShard, chaos.KillManager}},
	upgrade,
}

func TestChaosEveryScenarioIsExactlyOnce(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, nodeIP := os.Getenv("KUBECONFIG"), os.Getenv("SHARDFEED_CLUSTER_NODE_IP")
	if kubeconfig == "" || nodeIP == "" {
		t.Fatal("no cluster: run this through hack/e2e.sh (make test-chaos), which brings the local cluster up")
	}
	seed := uint64(1)
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q is not a number", s)
		}
	}
	scenarios := full
	if testing.Short() {
		scenarios = short
	}
	if only := os.Getenv("CHAOS_SCENARIOS"); only != "" {
		var picked []chaos.Scenario
		seen := map[string]bool{}
		for _, sc := range append(full, short...) {
			if strings.Contains(","+only+",", ","+sc.Name+",") && !seen[sc.Name] {
				seen[sc.Name] = true
				picked = append(picked, sc)
			}
		}
		scenarios = picked
	}
	t.Logf("seed %d (CHAOS_SEED=%d replays this run), %d scenario(s)", seed, seed, len(scenarios))
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	suite, err := chaos.NewSuite(ctx, chaos.Options{Seed: seed, Options: scenario.Options{Root: root, Bin: filepath.Join(root, "bin"),
		Kubeconfig: kubeconfig, NodeIP: nodeIP, Out: logWriter{t}}})
	if err != nil {
		t.Fatal(err)
	}
	defer suite.Close()
	var results []chaos.Result
	for _, sc := range scenarios {
		r := suite.Run(ctx, sc)
		results = append(results, r)
		if r.Err != nil {
			t.Errorf("scenario %s: %v", sc.Name, r.Err)
		}
		for _, p := range r.Problems {
			t.Errorf("scenario %s: %s", sc.Name, p)
		}
		if r.Err == nil && !r.Lineage.OK() {
			t.Errorf("scenario %s: the committed lineage is not the plan's: %s", sc.Name, r.Summary())
		}
		// The trainers take their batches in the sidecars' shared memory.
		if r.Err == nil && r.HandedOff < r.Trained/2 {
			t.Errorf("scenario %s: only %d of %d steps came in the sidecar's shared memory", sc.Name, r.HandedOff, r.Trained)
		}
		if r.Err == nil && len(r.Injections) != len(sc.Faults)+len(sc.Worlds)-1 {
			t.Errorf("scenario %s: %d injections, want %d", sc.Name, len(r.Injections), len(sc.Faults)+len(sc.Worlds)-1)
		}
	}
	var table bytes.Buffer
	chaos.Table(&table, results)
	t.Logf("seed %d:\n%s", seed, table.String())
	if out := os.Getenv("CHAOS_TABLE"); out != "" {
		if err := os.WriteFile(out, table.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}
