package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newEmulateCmd is `m2ho emulate`: the real-time driver of the link model
// (bench/emu) between two TUN devices.
func newEmulateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "emulate [flags]",
		Short: "Emulate a 5G link with handovers between two TUN devices",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("emulate: not built yet")
		},
	}
}
