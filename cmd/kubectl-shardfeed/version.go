package main

import (
	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/internal/version"
)

// newVersionCommand prints the plugin's version: that of the release it
// came with, which a user compares with the operator's (the chart's
// appVersion) when a report looks wrong. It asks the cluster nothing.
func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, its commit and its plan algorithm's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			return version.Write(cmd.OutOrStdout(), output, info, info.String()+"\n")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
