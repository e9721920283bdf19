package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newBenchCmd is `m2ho bench`: A/B runs of iperf3 CUBIC through the
// emulated link, per variant.
func newBenchCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "bench [flags]",
		Short: "Benchmark TCP CUBIC through the emulated 5G link, per variant",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("bench: not built yet")
		},
	}
}
