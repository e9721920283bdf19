// Command m2ho is the phone-side handover-aware transport proxy and its
// tools: replaying signalling traces through the predictor, running the
// proxy on a TUN device, emulating a 5G link, and benchmarking.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// exitError carries a process exit code through cobra without printing
// anything more: the command has already reported what went wrong.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

type globalFlags struct {
	logLevel  string
	logFormat string
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "m2ho",
		Short: "Handover-aware transport proxy for a 5G phone that tethers laptops",
		Long: `m2ho reads the radio's own signalling (measurement reports, handover
commands, random access, MAC scheduling), predicts handovers, and protects
the tethered laptop's TCP flows from what a handover does to them, by
rewriting the receive window of uplink ACKs and dropping spurious duplicate
ACKs (M2HO, MobiCom'24).

Subcommands:
  replay    run signalling traces through the handover predictor and score it
  run       the phone-side proxy: TUN, policy routing, signalling socket, metrics
  emulate   a user-space 5G link with handovers between two TUN devices
  bench     A/B benchmark of TCP CUBIC through the emulated link, per variant
  feed      replay a signalling trace into a running proxy's socket, at real or scaled time
  server    the QUIC tunnel server (CONNECT-IP, mutual TLS)
  keys      generate the tunnel's CA, server and client certificates`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "console", "log format: console or json")
	root.AddCommand(newReplayCmd(g))
	root.AddCommand(newRunCmd(g))
	root.AddCommand(newEmulateCmd(g))
	root.AddCommand(newBenchCmd(g))
	root.AddCommand(newFeedCmd(g))
	root.AddCommand(newServerCmd(g))
	root.AddCommand(newKeysCmd())
	return root
}

// logger builds the process logger from the global flags; logs go to stderr
// so that stdout stays machine-readable.
func (g *globalFlags) logger() (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(g.logLevel)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	var cfg zap.Config
	switch g.logFormat {
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	case "json":
		cfg = zap.NewProductionConfig()
	default:
		return nil, fmt.Errorf("--log-format %q: want console or json", g.logFormat)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	return cfg.Build()
}

func main() {
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	var ee exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "m2ho:", err)
	os.Exit(2)
}
