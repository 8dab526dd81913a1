// Command shardfeed is the data-plane and tooling CLI of shardfeed: the
// sidecar, the standalone server, the planner and the shard tools share one
// binary, one subcommand each.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/internal/store"
	"github.com/shardfeed/shardfeed/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "shardfeed:", err)
		os.Exit(1)
	}
}

// setRetryLog logs every retried store request at info, with its cause.
func setRetryLog(log *slog.Logger, timeout time.Duration) {
	store.DefaultRetry.OnRetry = func(err error, attempt int, wait time.Duration) {
		log.Info("A store request failed; retrying", "attempt", attempt, "in", wait.Round(time.Millisecond).String(),
			"givesUpAfter", timeout.String()+" (--store-timeout)", "cause", err.Error())
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
		// --version prints what `shardfeed version` does.
		Version: version.Get().Version,
	}
	root.SetVersionTemplate(version.Get().String() + "\n")
	storeTimeout := root.PersistentFlags().Duration("store-timeout", store.DefaultMaxElapsed,
		"how long a request to object storage is retried (timeouts, refused connections, 5xx) before the command fails; each retry is logged with its cause")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if *storeTimeout <= 0 {
			return fmt.Errorf("--store-timeout=%s: give a positive duration such as 2m", *storeTimeout)
		}
		store.DefaultRetry.MaxElapsed = *storeTimeout
		setRetryLog(slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)), *storeTimeout)
		return nil
	}
	root.AddCommand(newAgentCommand(), newCheckInstallCommand(), newConvertCommand(), newFormatsCommand(), newIndexCommand(), newJobsCommand(), newPlanCommand(), newProbeCommand(), newReservedCommand(), newServeCommand(), newSidecarCommand(), newSimulateCommand(), newVersionCommand())
	return root
}
