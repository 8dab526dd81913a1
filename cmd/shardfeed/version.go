package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/internal/version"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of shardfeed and of its plan algorithm",
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
