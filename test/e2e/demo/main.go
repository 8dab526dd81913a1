// Command demo plays the end-to-end scenario (test/e2e/scenario) on the
// local cluster and narrates it: what `make demo` runs once the cluster is
// up and the images are imported.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shardfeed/shardfeed/test/e2e/scenario"
)

func main() { os.Exit(run()) }

func run() int {
	root, _ := os.Getwd()
	o := scenario.Options{Out: os.Stdout}
	// Its own flag set: controller-runtime registers --kubeconfig on the
	// default one.
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	flags.StringVar(&o.Root, "root", root, "the repository")
	flags.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig")
	flags.StringVar(&o.NodeIP, "node-ip", os.Getenv("SHARDFEED_CLUSTER_NODE_IP"), "the node's address, where pods reach MinIO")
	flags.IntVar(&o.Samples, "samples", 1600, "samples per stream")
	flags.DurationVar(&o.StepTime, "step-time", 40*time.Millisecond, "the trainers' time per step")
	_ = flags.Parse(os.Args[1:])
	o.Bin = filepath.Join(o.Root, "bin")
	if o.Kubeconfig == "" || o.NodeIP == "" {
		fmt.Fprintln(os.Stderr, "demo: no cluster: run hack/cluster-up.sh and source .cache/cluster/env (make demo does both)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := scenario.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		return 1
	}
	fmt.Println()
	fmt.Println(rep.Summary())
	for _, p := range rep.Problems {
		fmt.Println("  " + p)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
