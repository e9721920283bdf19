package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/m2ho/m2ho/bench"
)

// newBenchCmd is `m2ho bench`: A/B runs of iperf3 CUBIC through the
// emulated link, per variant.
func newBenchCmd(g *globalFlags) *cobra.Command {
	var (
		cfg         bench.Config
		variants    []string
		defs        []string
		reanalyze   string
		anchorPause bool
		mmWaveEdge  bool
	)
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Benchmark TCP CUBIC through the emulated 5G link, per variant",
		Long: `bench builds the namespaces laptop <-> phone <-> emulator <-> server, and for
each repetition runs every variant in turn: ` + "`m2ho run`" + ` with the variant's
arguments on the phone, ` + "`m2ho emulate`" + ` with the scenario on the emulator
(same seed, so the same handovers, in every run), and an iperf3 CUBIC
download (server -> laptop, -J -i 0.1). It then writes into --out:
summary.json, summary.md (read this first), throughput.png,
convergence_cdf.png, goodput_by_type.png, and runs/<variant>-<i>/ with every
raw file; bench.json, its settings, comes first, so --reanalyze OUT rereads
a finished or interrupted bench as it ran (flags given override). Needs
root, Linux, ip, ss and iperf3.

Variants: pass (proxy on the path, does nothing) and m2ho are builtin, and
the QUIC tunnel's: quic (quic-go's own Reno (with HyStart) and pacer), quic-wave (Wave
bursts on the server, no hints), quic-wave-hints (Wave plus the handover
hints), quic+m2ho (that and M2HO's verdicts on the inner TCP's ACKs). A
tunnel variant starts m2ho server in the server namespace (keys from m2ho
keys in the run's directory); the download goes through the tunnel and the
summary adds the tunnel's own RTT. Define more with --variant-def
NAME='ARGS for m2ho run'; one whose ARGS use a quic mode is a tunnel
variant (the server as the builtin of that name, or its defaults), and
NAME='RUN ARGS | SERVER ARGS' gives m2ho server's arguments too.

Scenarios: builtin ` + strings.Join(benchScenarioNames(), ", ") + `, or a YAML path
(low-bdp, high-bdp with 600 ms and bdp-switch between the two by handovers
are QUIC Wave's situations).

Exit status: 0 when every run was valid; 3 when the emulator marked a run
invalid (it could not keep up: the summary is still written and says
which run and why, but its figures are not a result); 1 on any error.
On a shared machine, --retry-invalid N makes such a repetition again (all
its variants, same seed, same order, so the pairs stay measured side by
side), up to N times; the attempts set aside stay in OUT/runs-retried.`,
		Example: `  m2ho bench --scenario mixed-drive --repeat 3
  m2ho bench --scenario steady --duration 30s --scale 0.5
  m2ho bench --scenario low-bdp --seeds 1,2,3 --variants quic,quic-wave --retry-invalid 2
  m2ho bench --variants pass,m2ho,lam2 --variant-def 'lam2=--default-mode m2ho --lambda 2'
  m2ho bench --variants quic,qw --variant-def 'qw=--default-mode quic --tunnel-hints=false | --pacer wave'
  m2ho bench --xcal drive-ho.csv --capacity udp-bw.log --variants pass
  m2ho replay --learn-answers seed.json other-drive-*.csv && m2ho bench --xcal drive-ho.csv --seed-db seed.json
  m2ho bench --reanalyze bench-out/mixed-drive-20260101-120000`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer log.Sync()
			vs, err := bench.ParseVariants(variants, defs)
			if err != nil {
				return err
			}
			cfg.Variants = vs
			cfg.NoAnchorPause = !anchorPause
			cfg.NoMmWaveEdge = !mmWaveEdge
			cfg.Log = log
			cfg.Progress = os.Stderr
			cfg.CommandLine = "m2ho " + strings.Join(os.Args[1:], " ")
			if cfg.Scale <= 0 {
				return fmt.Errorf("--scale %v: must be > 0", cfg.Scale)
			}
			if cfg.RetryInvalid < 0 {
				return fmt.Errorf("--retry-invalid %d: must be >= 0", cfg.RetryInvalid)
			}
			if cfg.Capacity != "" && cfg.XCAL == "" {
				return fmt.Errorf("--capacity: needs --xcal (the drive it was measured on)")
			}
			if cfg.XCAL != "" && !cmd.Flags().Changed("scenario") {
				cfg.Scenario = "measured" // its link settings, the drive's schedule
			}
			if reanalyze != "" {
				m, err := reanalyzeSettings(cmd.Flags().Changed, cfg, vs, reanalyze, os.Stderr)
				if err != nil {
					return err
				}
				s, err := bench.Reanalyze(reanalyze, m)
				if err != nil {
					return err
				}
				return report(reanalyze, s)
			}
			if cfg.OutDir == "" {
				name := strings.TrimSuffix(filepath.Base(cfg.Scenario), filepath.Ext(cfg.Scenario))
				cfg.OutDir = filepath.Join("bench-out", name+"-"+time.Now().Format("20060102-150405"))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := bench.Run(ctx, cfg)
			if err != nil {
				if ctx.Err() != nil {
					fmt.Fprintln(os.Stderr, "\ninterrupted; children stopped and namespaces removed")
				}
				return err
			}
			return report(cfg.OutDir, s)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Scenario, "scenario", "mixed-drive", "builtin scenario name or YAML path")
	f.Float64Var(&cfg.Scale, "scale", 1, "multiply capacities and buffers (for slower machines; printed with every result)")
	f.Uint64Var(&cfg.Seed, "seed", 0, "emulator seed of the first repetition; repetition i uses seed+i (0: the scenario's)")
	f.Var(newSeedsValue(&cfg.Seeds), "seeds", "comma-separated emulator seeds, one repetition each (overrides --repeat and --seed)")
	f.DurationVar(&cfg.Duration, "duration", 0, "iperf3 duration per run (0: the scenario's)")
	f.IntVar(&cfg.Repeat, "repeat", 1, "runs per variant, variants alternating")
	f.StringSliceVar(&variants, "variants", []string{"pass", "m2ho"}, "variants to run, in this order")
	f.StringArrayVar(&defs, "variant-def", nil, "define a variant: NAME=ARGS (arguments for m2ho run) or NAME='RUN ARGS | SERVER ARGS' (a tunnel variant with m2ho server's arguments); repeatable")
	f.StringVar(&cfg.OutDir, "out", "", "output directory (default ./bench-out/<scenario>-<timestamp>); the runs an earlier bench left there are replaced, anything else under its runs/ is refused")
	f.StringVar(&cfg.Binary, "m2ho-binary", "", "m2ho executable for the proxy and emulator (default: this one)")
	f.StringVar(&cfg.XCAL, "xcal", "", "replay a real drive: its XCAL export (every report, command and random access at its logged time); the scenario (default measured) gives the link settings")
	f.StringVar(&cfg.Capacity, "capacity", "", "with --xcal: the drive's iperf3 -J UDP log, the capacity of every cell (aligned by timestamps when they overlap, else from both starts); without it the cells take the scenario's per-type capacities")
	f.StringVar(&cfg.DataDir, "data-dir", "", "shared data directory for scenarios built from measurements")
	f.Float64Var(&cfg.LateThreshold, "late-threshold", 0, "emulator: percent of late deliveries that make a run invalid (0: its default)")
	f.BoolVar(&mmWaveEdge, "mmwave-edge", true, "emulator: lower an mmWave cell's capacity in the 5 s before each handover from it down to sub-6, as the measured cells fell (the scenario's mmwave_edge: mixed-drive and measured have it; a replay with --capacity has its own); false leaves the capacity alone, as before 2026-12-07 session 31")
	f.BoolVar(&anchorPause, "anchor-pause", true, "emulator: pause the link at LTE anchor handovers that keep the NR cell (command to random access, the queue kept; TS 37.340 10.7); false replays them as signalling only, as before 2026-12-06")
	f.StringVar(&cfg.SeedDB, "seed-db", "", "start every run's proxy from this s_max database file (m2ho run --smax-db's form), the same for every variant: what a phone learned before this drive, e.g. the answer rates m2ho replay --learn-answers learned from other drives' logs (default: every run starts empty)")
	f.IntVar(&cfg.RetryInvalid, "retry-invalid", 0, "make a repetition again, all its variants with the same seed, when one of its runs is invalid (the emulator could not keep up), at most N times; the attempts set aside are kept in OUT/runs-retried and listed in the summary")
	f.IntVar(&cfg.Port, "port", 5201, "iperf3 port")
	f.StringVar(&reanalyze, "reanalyze", "", "re-read DIR/runs of a finished or interrupted bench and rewrite its outputs (no runs), with the bench's own settings from DIR/bench.json (an older bench: its summary.json); flags given override them")
	return cmd
}

func benchScenarioNames() []string {
	return bench.BuiltinScenarioNames()
}

// report prints where the outputs are and fails the command when the
// summary is invalid, so scripts cannot take an invalid run as a result.
func report(dir string, s bench.Summary) error {
	fmt.Printf("summary: %s\nplots:   %s, %s, %s\n", filepath.Join(dir, "summary.md"),
		filepath.Join(dir, bench.PlotThroughput), filepath.Join(dir, bench.PlotConvergence), filepath.Join(dir, bench.PlotByType))
	for _, v := range s.Variants {
		fmt.Printf("  %-8s goodput %7.1f Mbps  convergence mean %.3f s  retransmits %d\n", v.Name, v.GoodputMbps, v.ConvergenceSMean, v.Retransmits)
	}
	if c := s.Calibration; c != nil {
		if err := bench.WriteCalibrationMarkdown(os.Stdout, c); err != nil {
			return err
		}
	}
	if !s.Valid {
		for _, p := range s.Problems {
			fmt.Fprintln(os.Stderr, "invalid:", p)
		}
		return exitError{code: 3}
	}
	return nil
}

// seedsValue is --seeds: a comma-separated list of uint64.
type seedsValue struct{ p *[]uint64 }

func newSeedsValue(p *[]uint64) *seedsValue { return &seedsValue{p} }
func (v *seedsValue) Type() string          { return "seeds" }
func (v *seedsValue) String() string {
	var ss []string
	for _, x := range *v.p {
		ss = append(ss, strconv.FormatUint(x, 10))
	}
	return strings.Join(ss, ",")
}
func (v *seedsValue) Set(s string) error {
	var out []uint64
	seen := map[uint64]bool{}
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || x == 0 {
			return fmt.Errorf("%q is not a positive integer seed", f)
		}
		if seen[x] {
			return fmt.Errorf("seed %d given twice", x)
		}
		seen[x] = true
		out = append(out, x)
	}
	*v.p = out
	return nil
}

// reanalyzeSettings is what --reanalyze DIR rereads the bench with: the
// bench's own settings (DIR/bench.json, or an older bench's
// summary.json), each one overridden by its flag when given (changed
// reports which were); with neither file, the flags alone. It says on
// w where the settings came from. The scenario is loaded only when a
// flag changes it (for its name and duration), so a bench whose files
// moved is still reread.
func reanalyzeSettings(changed func(string) bool, cfg bench.Config, vs []bench.Variant, dir string, w io.Writer) (bench.Meta, error) {
	st, err := bench.ReadSettings(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return bench.Meta{}, fmt.Errorf("--reanalyze: %w", err)
	}
	if err != nil { // neither file: the flags as given
		sc, err := bench.LoadScenarioDrive(cfg.Scenario, cfg.DataDir, cfg.XCAL, cfg.Capacity)
		if err != nil {
			return bench.Meta{}, fmt.Errorf("--scenario %s: %w", cfg.Scenario, err)
		}
		dur := cfg.Duration
		if dur <= 0 {
			dur = sc.Config.Duration
		}
		fmt.Fprintf(w, "reanalyze: %s has no %s nor summary.json; using the flags as given\n", dir, bench.SettingsFile)
		return reanalyzeMeta(cfg, sc.Name, dur, vs), nil
	}
	src := filepath.Join(dir, bench.SettingsFile)
	if st.FromSummary {
		src = filepath.Join(dir, "summary.json") + " (an older bench: its data directory and tunnel server arguments were not recorded)"
	}
	scenarioGiven := changed("scenario") || changed("xcal") || changed("capacity")
	if !scenarioGiven {
		cfg.Scenario, cfg.XCAL, cfg.Capacity = st.Scenario, st.XCAL, st.Capacity
	}
	if !changed("data-dir") && st.DataDir != "" {
		cfg.DataDir = st.DataDir
	}
	if !changed("scale") {
		cfg.Scale = st.Scale
	}
	if !changed("seeds") && !changed("seed") && !changed("repeat") {
		cfg.Seeds, cfg.Seed, cfg.Repeat = st.Seeds, st.Seed, st.Repeat
	}
	if !changed("variants") && !changed("variant-def") {
		vs = st.Variants
	}
	name, dur := st.ScenarioName, time.Duration(st.DurationS*float64(time.Second))
	if changed("duration") {
		dur = cfg.Duration
	}
	if scenarioGiven {
		sc, err := bench.LoadScenarioDrive(cfg.Scenario, cfg.DataDir, cfg.XCAL, cfg.Capacity)
		if err != nil {
			return bench.Meta{}, fmt.Errorf("--scenario %s: %w", cfg.Scenario, err)
		}
		name = sc.Name
		if !changed("duration") {
			dur = sc.Config.Duration
		}
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	fmt.Fprintf(w, "reanalyze: settings from %s, flags given override them: scenario %s, scale %g, %d repetitions, %v, variants %s\n",
		src, name, cfg.Scale, max(len(cfg.Seeds), cfg.Repeat, 1), dur, strings.Join(names, ","))
	return reanalyzeMeta(cfg, name, dur, vs), nil
}

// reanalyzeMeta describes a finished bench as the flags repeat it: with
// --seeds, one repetition per seed, the first seed the bench's seed.
func reanalyzeMeta(cfg bench.Config, scenario string, dur time.Duration, vs []bench.Variant) bench.Meta {
	m := bench.Meta{Scenario: scenario, Scale: cfg.Scale, Seed: cfg.Seed, DurationS: dur.Seconds(), Repeat: max(cfg.Repeat, 1),
		CommandLine: cfg.CommandLine, Variants: vs, DataDir: cfg.DataDir}
	if len(cfg.Seeds) > 0 {
		m.Seeds, m.Seed, m.Repeat = cfg.Seeds, cfg.Seeds[0], len(cfg.Seeds)
	}
	return m
}
