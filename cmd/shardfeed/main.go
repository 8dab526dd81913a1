// Command shardfeed is the data-plane and tooling CLI of shardfeed: the
// sidecar, the standalone server, the planner and the shard tools share one
// binary, one subcommand each.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shardfeed:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "shardfeed",
		Short: "Feed training jobs their data from object storage",
		Long: `shardfeed streams dataset shards from object storage to training processes,
with deterministic, elastic and resumable epoch plans.

Documentation: docs/ in https://github.com/shardfeed/shardfeed`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newCheckInstallCommand(), newConvertCommand(), newIndexCommand(), newPlanCommand(), newProbeCommand(), newServeCommand(), newSidecarCommand(), newSimulateCommand(), newVersionCommand())
	return root
}
