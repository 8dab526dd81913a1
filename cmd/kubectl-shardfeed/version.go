package main

import (
	"encoding/json"
	"fmt"

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
			switch output {
			case "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info)
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			default:
				return fmt.Errorf("--output %q is not supported: use text or json", output)
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
