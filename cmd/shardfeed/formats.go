package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/sidecar/format"
	"github.com/shardfeed/shardfeed/sidecar/format/formats"
)

// formatRow is one format of the registry, as `shardfeed formats` prints
// it: what the Python client's list of formats, its guess of a folder's
// format and its docstrings are read from.
type formatRow struct {
	Name string `json:"name"`
	// Index is how shardfeed index reads the stream: "objects" (the
	// files under the prefix with these suffixes), "table" (a table at
	// one version, through its catalog or its own metadata) or "own" (the
	// format keeps its own index, which is served as it is).
	Index    string   `json:"index"`
	Suffixes []string `json:"suffixes,omitempty"`
}

func newFormatsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "formats",
		Short: "List the formats shardfeed reads: their names, how a stream of each is indexed, and the file suffixes it indexes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows := formatRows(formats.Default())
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rows)
			}
			for _, r := range rows {
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "%-12s %-8s %s\n", r.Name, r.Index, strings.Join(r.Suffixes, " ")); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON: [{name, index, suffixes}]")
	return cmd
}

func formatRows(reg format.Registry) []formatRow {
	var rows []formatRow
	for kind, f := range reg {
		r := formatRow{Name: string(kind), Index: "own"}
		switch {
		case format.IsTable(f):
			r.Index = "table"
		case format.IndexesObjects(f):
			r.Index, r.Suffixes = "objects", slices.Clone(f.(format.Indexer).Suffixes())
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b formatRow) int { return strings.Compare(a.Name, b.Name) })
	return rows
}
