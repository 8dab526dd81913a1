//go:build integration

// Package scale_test drives the operator at a GPU cluster's scale on one
// machine: the real kube-apiserver and etcd, kube-controller-manager (Jobs,
// StatefulSets, garbage collection) and kube-scheduler, KWOK's simulated
// nodes, two manager replicas behind a proxy as behind their Service, and a
// load generator that creates pods as a Job controller does and replays the
// sidecars' registrations and commits. `make test` runs the short scenario;
// `make test-scale` (SHARDFEED_SCALE=full) the full one, and SCALE_REPORT
// names a file for its figures (docs/benchmarks.md). TestIntegrationDataPlane
// sizes a large job's data plane with `shardfeed simulate`
// (SCALE_DATAPLANE_REPORT).
package scale_test

import (
	"context"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shardfeed/shardfeed/internal/testenv"
)

var (
	apiServer     *testenv.APIServer
	cluster       *testenv.Simulated
	minioServer   *testenv.MinIO
	managerBinary string
	// shardfeedBinary is the CLI (`shardfeed simulate`).
	shardfeedBinary string
	full            = os.Getenv("SHARDFEED_SCALE") == "full"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shardfeed-scale-")
	if err != nil {
		log.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		log.Fatal(err)
	}
	managerBinary, shardfeedBinary = filepath.Join(dir, "manager"), filepath.Join(dir, "shardfeed")
	for bin, pkg := range map[string]string{managerBinary: "./cmd/manager", shardfeedBinary: "./cmd/shardfeed"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			log.Fatalf("building %s: %v", pkg, err)
		}
	}
	ctx := context.Background()
	if apiServer, err = testenv.StartAPIServer(); err != nil {
		log.Fatal(err)
	}
	// The short run's nodes are fewer: KWOK takes on each node with a
	// sync of its pods, about a minute for a thousand on this machine.
	nodes := short.nodes
	if full {
		nodes = fullScenario.nodes
	}
	if cluster, err = testenv.StartSimulated(ctx, apiServer, nodes); err != nil {
		_ = apiServer.Stop()
		log.Fatal(err)
	}
	if minioServer, err = testenv.StartMinIO(ctx); err != nil {
		_ = cluster.Stop()
		_ = apiServer.Stop()
		log.Fatal(err)
	}
	code := m.Run()
	_ = minioServer.Stop()
	_ = cluster.Stop()
	_ = apiServer.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
