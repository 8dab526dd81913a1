package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/clients/go/shardfeed"
)

func newProbeCommand() *cobra.Command {
	var socket string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe [--socket PATH]",
		Short: "Exit 0 when the sidecar on the socket is ready (the injected sidecar's startup probe)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			c := shardfeed.New(socket)
			if err := c.WaitReady(ctx); err != nil {
				return fmt.Errorf("not ready: %w", err)
			}
			_, _ = fmt.Fprintln(cmd.OutOrStdout(), "ready")
			return nil
		},
	}
	cmd.Flags().StringVar(&socket, "socket", DefaultSocket, "the sidecar's socket")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Second, "how long to wait")
	return cmd
}
