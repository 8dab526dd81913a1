package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newReservedCommand is what a queued job's reservation container runs
// (internal/inject.Reserve): only in a pod the webhook did not inject.
func newReservedCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "reserved",
		Short:  "The placeholder a queued job's pod template carries for the sidecar's requests",
		Hidden: true,
		Args:   cobra.ArbitraryArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this container only reserves the sidecar's requests in a queued job's pod template, and the pod webhook replaces it with the sidecar: " +
				"this pod was not injected (is its shardfeed.io/dataset label set, and its namespace served by the webhook? kubectl shardfeed why POD)")
		},
	}
}
