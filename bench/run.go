package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/bench/emu/driver"
	"github.com/m2ho/m2ho/bench/netns"
	"github.com/m2ho/m2ho/signaling"
)

// Config is one bench invocation.
type Config struct {
	// Scenario is a builtin name (emu.BuiltinNames) or a YAML path.
	Scenario string
	Scale    float64 // capacities and buffers x Scale; 0 = 1
	// Seed is passed to the emulator when non-zero; 0 keeps the
	// scenario's own seed. Every run uses the same one, so every run has
	// the same schedule.
	Seed uint64
	// Duration is iperf3's -t (rounded up to whole seconds); 0 = the
	// scenario's duration. The emulator is started for EmuMargin longer,
	// because iperf3 starts only once the emulated link (and, for a
	// tunnel variant, the restarted tunnel) is up, and the receiver ends
	// a set-up and a drain later; the bench stops it (SIGTERM) once the
	// download is over, so the margin only bounds a run that hangs.
	Duration  time.Duration
	EmuMargin time.Duration // 0 = 30s
	Repeat    int           // runs per variant; 0 = 1
	// Seeds, when given, are the emulator seeds of the repetitions (one
	// run per variant each, Repeat = len(Seeds)); otherwise repetition i
	// uses seed+i, so every repetition is a distinct schedule and the
	// variants of one repetition share it (the pairing of Statistics).
	Seeds    []uint64
	Variants []Variant
	OutDir   string
	// Binary is the m2ho executable run in the namespaces; "" = this
	// process's own executable.
	Binary  string
	DataDir string // --data-dir for the emulator ("" = its default)
	// XCAL and Capacity replay a user's own drive (--xcal, --capacity):
	// passed to the emulator and used for the scenario the bench reports.
	XCAL, Capacity string
	LateThreshold  float64 // --late-threshold PCT for the emulator (0 = its default)
	// NoAnchorPause replays LTE anchor handovers that keep the NR cell as
	// signalling only (the emulator's --anchor-pause=false).
	NoAnchorPause bool
	// NoMmWaveEdge leaves mmWave cells at their capacity up to a handover
	// down to sub-6 (the emulator's --mmwave-edge=false).
	NoMmWaveEdge bool
	// SeedDB is an ŝ_max database file (m2ho run --smax-db's form) that
	// every run's proxy starts from, the same for every variant: what a
	// phone learned before this drive (m2ho replay --learn-answers
	// writes one from other drives' logs). "" = every run starts empty.
	SeedDB string
	// RetryInvalid is how many times a repetition with an invalid run is
	// set aside and made again, all its variants (retry.go); 0 = never.
	RetryInvalid int
	Port         int    // iperf3 port; 0 = 5201
	CommandLine  string // recorded in the summary
	// Progress receives the progress line (nil = none).
	Progress io.Writer
	Log      *zap.Logger

	// emuUnsealed leaves the emu hop forwarding by itself (the fake
	// emulator of the orchestration test carries nothing); every real
	// run seals it (netns.Chain.SealEmu).
	emuUnsealed bool
}

// Names of the devices the bench asks its children to create.
const (
	proxyTUN = "m2ho0"
	emuTUN   = "m2emu"
)

// CheckTools reports, in one clear error, what the host lacks to run the
// bench: Linux and root for namespaces, ip(8), iperf3.
func CheckTools() error {
	var errs []error
	if err := netns.Available(); err != nil {
		errs = append(errs, err)
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		errs = append(errs, errors.New("iperf3 is not installed (Debian: apt-get install iperf3)"))
	}
	if _, err := exec.LookPath("ss"); err != nil {
		errs = append(errs, errors.New("ss (iproute2) is not installed"))
	}
	return errors.Join(errs...)
}

// EmulatorBuilt reports whether bin has a working `emulate` subcommand
// (its help lists --signal-socket); the error says why not.
func EmulatorBuilt(bin string) error {
	out, err := exec.Command(bin, "emulate", "--help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s emulate --help: %v: %s", bin, err, bytes.TrimSpace(out))
	}
	if !bytes.Contains(out, []byte("--signal-socket")) {
		return fmt.Errorf("%s emulate is not built in this binary (its --help has no --signal-socket)", bin)
	}
	return nil
}

// LoadScenario resolves a builtin name or a file, with the XCAL reader
// scenarios taken from real logs need.
func LoadScenario(name, dataDir string) (*emu.Scenario, error) {
	opts := emu.LoadOptions{DataDir: dataDir, XCAL: readXCAL}
	if slices.Contains(emu.BuiltinNames(), name) {
		return driver.Builtin(name, opts)
	}
	return driver.LoadScenario(name, opts)
}

// readXCAL reads an XCAL export; rows that do not parse are skipped (the
// reader names them), I/O errors end the load.
func readXCAL(path string) ([]signaling.Event, error) {
	evs, _, _, err := driver.ReadXCAL(path)
	return evs, err
}

// Run executes the bench: builds the namespace chain, runs every variant
// Repeat times in alternation (pass, m2ho, pass, m2ho, ...), analyses the
// runs and writes summary.json, summary.md and the plots into OutDir.
// Everything it started is stopped and the namespaces removed on return,
// also when ctx is cancelled (SIGINT). The summary is returned even when
// it is invalid; err is for runs that could not be made or read.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if len(cfg.Seeds) > 0 {
		cfg.Repeat = len(cfg.Seeds)
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = 1
	}
	if cfg.EmuMargin <= 0 {
		cfg.EmuMargin = 30 * time.Second
	}
	if cfg.Port == 0 {
		cfg.Port = 5201
	}
	if len(cfg.Variants) == 0 {
		return Summary{}, errors.New("bench: no variants")
	}
	if err := CheckTools(); err != nil {
		return Summary{}, fmt.Errorf("bench cannot run here: %w", err)
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return Summary{}, fmt.Errorf("bench: own executable: %w", err)
		}
		cfg.Binary = exe
	}
	if err := EmulatorBuilt(cfg.Binary); err != nil {
		return Summary{}, err
	}
	sc, err := LoadScenarioDrive(cfg.Scenario, cfg.DataDir, cfg.XCAL, cfg.Capacity)
	if err != nil {
		return Summary{}, fmt.Errorf("scenario %s: %w", cfg.Scenario, err)
	}
	seedDB, seedSum, err := readSeedDB(cfg.SeedDB)
	if err != nil {
		return Summary{}, err
	}
	if sc.Drive != nil && cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "drive %s: %s\n", sc.Drive.XCAL, sc.Drive.Alignment.Text)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = sc.Config.Duration
	}
	secs := int(math.Ceil(cfg.Duration.Seconds()))
	if secs < 1 {
		return Summary{}, fmt.Errorf("bench: duration %v too short", cfg.Duration)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = sc.Config.Seed
	}
	if n, err := clearRuns(cfg.OutDir); err != nil {
		return Summary{}, err
	} else if n > 0 {
		cfg.Log.Info("bench: replaced the runs an earlier bench left in --out", zap.String("out", cfg.OutDir), zap.Int("runs", n))
	}
	if err := os.MkdirAll(filepath.Join(cfg.OutDir, "runs"), 0o755); err != nil {
		return Summary{}, err
	}
	sockDir, err := os.MkdirTemp("", "m2hob")
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(sockDir)

	cfg.Log.Info("bench", zap.String("scenario", sc.Name), zap.Float64("scale", cfg.Scale),
		zap.Int("scheduled_handovers_file_seed", len(sc.Config.Schedule.Handovers)), // each seed draws its own drive zap.Int("seconds", secs),
		zap.Int("repeat", cfg.Repeat), zap.String("out", cfg.OutDir))

	total := cfg.Repeat * len(cfg.Variants)
	var results []RunResult
	n := 0
	seeds := make([]uint64, cfg.Repeat)
	for i := range seeds {
		seeds[i] = seed + uint64(i)
		if len(cfg.Seeds) > 0 {
			seeds[i] = cfg.Seeds[i]
		}
	}
	st := Settings{Scenario: cfg.Scenario, ScenarioName: sc.Name, XCAL: cfg.XCAL, Capacity: cfg.Capacity, DataDir: cfg.DataDir,
		Scale: cfg.Scale, Seed: seed, Seeds: seeds, DurationS: float64(secs), Repeat: cfg.Repeat, Variants: cfg.Variants,
		NoAnchorPause: cfg.NoAnchorPause, NoMmWaveEdge: cfg.NoMmWaveEdge, CommandLine: cfg.CommandLine, SeedDB: cfg.SeedDB, SeedDBSHA256: seedSum}
	if err := writeSettings(cfg.OutDir, st); err != nil {
		return Summary{}, err
	}
	for i := range cfg.Repeat {
		for attempt := 1; ; attempt++ {
			var rep []RunResult
			var dirs []string
			for _, v := range cfg.Variants {
				n++
				rd := filepath.Join(cfg.OutDir, "runs", fmt.Sprintf("%s-%d", v.Name, i+1))
				r := runner{cfg: cfg, sc: sc, v: v, index: i, dir: rd, secs: secs, seed: seeds[i], seedDB: seedDB,
					sock: filepath.Join(sockDir, fmt.Sprintf("s%d.sock", n)), label: fmt.Sprintf("run %d/%d %s", n, total, v.Name)}
				if err := r.runFresh(ctx); err != nil {
					return Summary{}, fmt.Errorf("%s: %w (files in %s)", r.label, err, rd)
				}
				d, err := LoadRun(rd)
				if err != nil {
					return Summary{}, err
				}
				res, err := AnalyzeRun(d)
				if err != nil {
					return Summary{}, err
				}
				if cfg.Progress != nil {
					host := ""
					if res.HostCPU != nil {
						host = fmt.Sprintf(", host CPU stolen %.1f %%", res.HostCPU.StealPct)
					}
					fmt.Fprintf(cfg.Progress, "\r%s: %.1f Mbps, %d handovers, valid=%v%s%s\n", r.label, res.GoodputMbps, len(res.Handovers), res.Valid(), host, strings.Repeat(" ", 20))
				}
				rep = append(rep, res)
				dirs = append(dirs, rd)
			}
			retry, why := retryRepetition(rep, attempt, cfg.RetryInvalid)
			if !retry {
				results = append(results, rep...)
				break
			}
			if err := setAside(cfg.OutDir, dirs, attempt); err != nil {
				return Summary{}, err
			}
			total += len(cfg.Variants)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "repetition %d (seed %d) invalid: %s; set aside in %s, retry %d of %d\n",
					i+1, seeds[i], why, filepath.Join(cfg.OutDir, retriedDir), attempt, cfg.RetryInvalid)
			}
			cfg.Log.Info("bench: repetition retried", zap.Int("repetition", i+1), zap.Uint64("seed", seeds[i]),
				zap.Int("attempt", attempt), zap.String("why", why))
		}
	}
	s := Summarize(results, st.Meta())
	s.Calibration = Calibrate(CalibrationRuns(cfg.OutDir, results), MeasuredReference(dataDirOr(cfg.DataDir)))
	if s.Retried, err = readRetried(cfg.OutDir, cfg.Variants); err != nil {
		return s, err
	}
	s.RetryInvalid = cfg.RetryInvalid
	return s, WriteOutputs(cfg.OutDir, s, results)
}

// WriteOutputs writes summary.json, summary.md and the plots.
func WriteOutputs(dir string, s Summary, runs []RunResult) error {
	var j, md bytes.Buffer
	if err := s.WriteJSON(&j); err != nil {
		return err
	}
	if err := s.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), j.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	return WritePlots(dir, s, runs)
}

// Files of one run directory.
const (
	runMetaFile     = "run.json"
	clientJSONFile  = "iperf3-client.json"
	serverLogFile   = "iperf3-server.log"
	emuSubdir       = "emu"
	emuEventsFile   = "events.jsonl" // under emuSubdir
	emuDownLogFile  = "mm-down.log"  // under emuSubdir: deliveries and drops
	proxyLogFile    = "proxy.log"
	emulatorLogFile = "emulate.log"
	// Tunnel variants only.
	tunnelServerLogFile = "tunnel-server.log"
	tunnelRTTFile       = "tunnel-rtt.tsv"
)

// runMeta is run.json: what the bench knew about a run that no child
// wrote down.
type runMeta struct {
	Variant  string   `json:"variant"`
	Index    int      `json:"index"`
	Seed     uint64   `json:"seed"`
	Args     []string `json:"args"`
	LaunchNs int64    `json:"launch_ns"`
}

// LoadRun reads one run directory (runs/<variant>-<i>) back, so a
// finished bench can be re-analysed without running it again.
func LoadRun(dir string) (RunData, error) {
	var d RunData
	var meta runMeta
	b, err := os.ReadFile(filepath.Join(dir, runMetaFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return d, fmt.Errorf("%s: %w", filepath.Join(dir, runMetaFile), err)
	}
	d.Variant, d.Index, d.LaunchNs, d.Seed = meta.Variant, meta.Index, meta.LaunchNs, meta.Seed
	// The hygiene's files; runs made before them have none.
	if err := readJSONFile(dir, sysctlFile, &d.Sysctls); err != nil && !os.IsNotExist(err) {
		return d, err
	}
	if err := readJSONFile(dir, cellsFile, &d.Cells); err != nil && !os.IsNotExist(err) {
		return d, err
	}
	var host HostCPU
	if err := readJSONFile(dir, hostCPUFile, &host); err == nil {
		d.HostCPU = &host
	} else if !os.IsNotExist(err) {
		return d, err
	}
	if fh, err := os.Open(filepath.Join(dir, netstatFile)); err == nil {
		d.Kernel, err = ParseNetstat(fh, filepath.Join(dir, netstatFile), KernelCounters)
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	if fh, err := os.Open(filepath.Join(dir, kernelLogFile)); err == nil {
		d.KernelLog, err = ReadKernelLog(fh, filepath.Join(dir, kernelLogFile))
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	if d.SMax, err = readSMaxDB(filepath.Join(dir, smaxDBFile)); err != nil {
		return d, err
	}
	if fh, err := os.Open(filepath.Join(dir, tunnelRTTFile)); err == nil {
		// From the download's launch on: earlier lines are the tunnel
		// before its restart over the emulated link (runSteps).
		d.TunnelRTTms, err = ReadTunnelRTTSince(fh, filepath.Join(dir, tunnelRTTFile), d.LaunchNs)
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	if fh, err := os.Open(filepath.Join(dir, smaxLogFile)); err == nil {
		d.SMaxRises, err = ReadSMaxLog(fh, filepath.Join(dir, smaxLogFile))
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	if fh, err := os.Open(filepath.Join(dir, verdictFile)); err == nil {
		d.Verdicts, err = ReadVerdictLog(fh, filepath.Join(dir, verdictFile))
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	if fh, err := os.Open(filepath.Join(dir, predLogFile)); err == nil {
		d.Episodes, err = ReadPredLog(fh, filepath.Join(dir, predLogFile))
		fh.Close()
		if err != nil {
			return d, err
		}
	}
	ed := filepath.Join(dir, emuSubdir)
	p := filepath.Join(ed, "emulator.json")
	if b, err = os.ReadFile(p); err != nil {
		return d, err
	}
	if d.Emu, err = ReadEmulatorSummary(b, p); err != nil {
		return d, err
	}
	readTSV := func(name string, f func(io.Reader, string) error) error {
		p := filepath.Join(ed, name)
		fh, err := os.Open(p)
		if err != nil {
			return err
		}
		defer fh.Close()
		return f(fh, p)
	}
	if err := errors.Join(
		readTSV("capacity.tsv", func(r io.Reader, n string) (err error) { d.Capacity, err = ReadCapacity(r, n); return }),
		readTSV("handovers.tsv", func(r io.Reader, n string) (err error) { d.Handovers, err = ReadHandovers(r, n); return }),
		readTSV("falsealarms.tsv", func(r io.Reader, n string) (err error) { d.FalseAlarms, err = ReadFalseAlarms(r, n); return }),
	); err != nil {
		return d, err
	}
	if fh, err := os.Open(filepath.Join(ed, emuEventsFile)); err == nil {
		d.KeptCell, err = ReadKeptCellCommands(fh, filepath.Join(ed, emuEventsFile), d.Emu.StartUnixNS)
		fh.Close()
		if err != nil {
			return d, err
		}
		if len(d.KeptCell) > 0 {
			drops, err := readDropFile(filepath.Join(ed, emuDownLogFile))
			switch {
			case err == nil:
				countKeptCellDrops(d.KeptCell, drops)
			case os.IsNotExist(err):
				for i := range d.KeptCell {
					d.KeptCell[i].Drops = -1
				}
			default:
				return d, err
			}
		}
	}
	p = filepath.Join(dir, clientJSONFile)
	if b, err = os.ReadFile(p); err != nil {
		return d, err
	}
	if d.Sender, err = ReadIperf3Sender(b, p); err != nil {
		return d, err
	}
	p = filepath.Join(dir, serverLogFile)
	fh, err := os.Open(p)
	if err != nil {
		return d, err
	}
	defer fh.Close()
	d.Recv, err = ReadRecvLog(fh, p)
	return d, err
}

// clearRuns removes the run directories an earlier bench left in
// dir/runs, so that this bench's runs are not mixed with them: the proxy's
// and the emulator's logs append, and Reanalyze reads every run there (a
// second `make demo` into the same directory failed on its verdict log's
// second header). A run directory is one with a run.json, or named
// VARIANT-N as the bench names them; anything else in runs/ is an error
// naming it, and nothing is removed. It returns how many it removed.
func clearRuns(dir string) (int, error) {
	runs := filepath.Join(dir, "runs")
	ents, err := os.ReadDir(runs)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("--out %s: %w", dir, err)
	}
	for _, e := range ents {
		p := filepath.Join(runs, e.Name())
		if !e.IsDir() {
			return 0, fmt.Errorf("--out %s: %s is not a run directory of the bench; move it away or choose another --out", dir, p)
		}
		if _, err := os.Stat(filepath.Join(p, "run.json")); err == nil {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '-')
		if _, err := strconv.Atoi(e.Name()[i+1:]); i <= 0 || err != nil {
			return 0, fmt.Errorf("--out %s: %s is not a run directory of the bench (no run.json); move it away or choose another --out", dir, p)
		}
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(runs, e.Name())); err != nil {
			return 0, fmt.Errorf("--out %s: %w", dir, err)
		}
	}
	// An earlier bench's set-aside attempts belong to its runs.
	if err := os.RemoveAll(filepath.Join(dir, retriedDir)); err != nil {
		return 0, fmt.Errorf("--out %s: %w", dir, err)
	}
	return len(ents), nil
}

// Reanalyze re-reads every run under dir/runs and rewrites the outputs;
// m says what the runs were (variants in order, repeat, scenario).
func Reanalyze(dir string, m Meta) (Summary, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		return Summary{}, err
	}
	var results []RunResult
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d, err := LoadRun(filepath.Join(dir, "runs", e.Name()))
		if err != nil {
			return Summary{}, err
		}
		r, err := AnalyzeRun(d)
		if err != nil {
			return Summary{}, err
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b RunResult) int { return a.Index - b.Index })
	s := Summarize(results, m)
	s.Calibration = Calibrate(CalibrationRuns(dir, results), MeasuredReference(dataDirOr(m.DataDir)))
	if s.Retried, err = readRetried(dir, m.Variants); err != nil {
		return s, err
	}
	return s, WriteOutputs(dir, s, results)
}

// runner makes one run.
type runner struct {
	cfg   Config
	sc    *emu.Scenario
	chain *netns.Chain
	v     Variant
	index int
	dir   string
	sock  string
	label string
	secs  int
	seed  uint64
	// seedDB is the database file the proxy starts from (Config.SeedDB).
	seedDB []byte

	children []*child
	lastMbps atomic.Uint64 // math.Float64bits of the last receiver interval
}

// child is a started process and its exit.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (r *runner) start(name, logPath string, cmd *exec.Cmd) (*child, error) {
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = f, f
		defer f.Close() // the child keeps its own descriptor
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	r.children = append(r.children, c)
	return c, nil
}

// stop asks c to exit (SIGTERM), then kills it after grace.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return strings.TrimSpace(string(b))
}

// waitFor polls cond every 20 ms until it holds, c exits, ctx ends or
// timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, c *child, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if c != nil && c.exited() {
			return fmt.Errorf("%s exited (%v) before %s", c.name, c.err, what)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitExit waits for c's exit up to timeout or ctx's end.
func waitExit(ctx context.Context, c *child, timeout time.Duration) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %v", c.name, timeout)
	}
}

// runFresh makes the run in a chain of its own, so nothing of the kernel's
// state (the TCP metrics cache, counters) carries from one run to the
// next, with TCPSysctls set and recorded in every namespace; after the
// run it keeps the server's TCP counters (the sender's recovery) and the
// cells' buffers.
func (r *runner) runFresh(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(r.dir, emuSubdir), 0o755); err != nil {
		return err
	}
	if r.seedDB != nil {
		// The proxy's database starts as the seed (Config.SeedDB).
		if err := os.WriteFile(filepath.Join(r.dir, smaxDBFile), r.seedDB, 0o644); err != nil {
			return err
		}
	}
	chain, err := netns.NewChain("m2hob", true)
	if err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	defer func() {
		if cerr := chain.Close(); cerr != nil {
			r.cfg.Log.Warn("removing namespaces", zap.Error(cerr))
		}
	}()
	r.chain = chain
	sys, err := configureTCP(chain)
	if err != nil {
		return err
	}
	if err := writeJSONFile(r.dir, sysctlFile, sys); err != nil {
		return err
	}
	if r.sc != nil {
		// The scenario as the emulator will build it (emulate scales it
		// the same way), for the cells' buffers.
		if m, err := emu.New(r.sc.Scaled(r.cfg.Scale).Config, time.Unix(0, 0), r.seed); err == nil {
			if err := writeJSONFile(r.dir, cellsFile, m.Cells()); err != nil {
				return err
			}
		}
	}
	// The host's CPU from here to the download's end (hostcpu.go); a host
	// without /proc/stat's steal field runs without the record.
	cpu0, cerr := sampleCPU()
	if err := r.run(ctx); err != nil {
		return err
	}
	if cpu1, err := sampleCPU(); cerr == nil && err == nil {
		if err := writeJSONFile(r.dir, hostCPUFile, hostCPUBetween(cpu0, cpu1)); err != nil {
			return err
		}
	} else {
		r.cfg.Log.Warn("bench: host CPU not recorded", zap.Error(errors.Join(cerr, err)))
	}
	out, err := chain.Exec(netns.Server, "cat", "/proc/net/netstat").Output()
	if err != nil {
		return fmt.Errorf("server /proc/net/netstat: %w", err)
	}
	return os.WriteFile(filepath.Join(r.dir, netstatFile), out, 0o644)
}

func writeJSONFile(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644)
}

func (r *runner) run(ctx context.Context) (err error) {
	defer func() {
		// Reverse order: the load first, the proxy last, so nothing is
		// left sending into a removed TUN.
		for i := len(r.children) - 1; i >= 0; i-- {
			r.children[i].stop(5 * time.Second)
		}
	}()
	if err := os.MkdirAll(filepath.Join(r.dir, emuSubdir), 0o755); err != nil {
		return err
	}
	c := r.chain

	// 0-2. The link's processes, in runSteps's order: for a tunnel
	// variant the tunnel server first, then the proxy (which dials the
	// tunnel), the emulator, and a restart of the tunnel connection once
	// the emulated link is up.
	target := c.LaptopAddr4.String()
	var tunnelArgs []string
	var proxy, emulator *child
	proxyLog := filepath.Join(r.dir, proxyLogFile)
	emuDur := time.Duration(r.secs)*time.Second + r.cfg.EmuMargin
	emuLog := filepath.Join(r.dir, emulatorLogFile)
	for _, step := range runSteps(r.v.Tunnel()) {
		var err error
		switch step {
		case stepTunnelServer:
			if tunnelArgs, err = r.startTunnelServer(ctx); err != nil {
				return err
			}
			target = tunnelInner
		case stepProxy:
			proxy, err = r.startProxy(ctx, proxyLog, tunnelArgs)
		case stepEmulator:
			if emulator, err = r.startEmulator(ctx, emuDur, emuLog); err == nil && !r.cfg.emuUnsealed {
				// From here on nothing crosses the emu hop but what
				// the emulator carries: should it end or die before the
				// download does, the link goes dark instead of turning
				// into a bare veth (and AnalyzeRun marks the run).
				err = c.SealEmu()
			}
		case stepTunnelRestart:
			err = r.restartTunnel(ctx, proxy, proxyLog)
		}
		if err != nil {
			return err
		}
	}

	// 3. The receiver in the laptop namespace, its interval lines read
	// and timestamped as they come (the alignment, see Alignment).
	port := strconv.Itoa(r.cfg.Port)
	srvCmd := c.Exec(netns.Laptop, "iperf3", "-s", "-1", "-B", c.LaptopAddr4.String(), "-p", port,
		"--forceflush", "-i", "0.1", "-f", "k")
	// Our own pipe: exec's StdoutPipe may be closed by Wait before the
	// last lines are read.
	pipe, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	defer pipe.Close()
	srvCmd.Stdout, srvCmd.Stderr = pw, pw
	logf, err := os.Create(filepath.Join(r.dir, serverLogFile))
	if err != nil {
		return err
	}
	defer logf.Close()
	srv, err := r.start("iperf3 server", "", srvCmd)
	pw.Close() // the child has its copy; EOF comes when it exits
	if err != nil {
		return err
	}
	var readWG sync.WaitGroup
	readWG.Add(1)
	go func() {
		defer readWG.Done()
		r.readServer(pipe, logf)
	}()
	if err := waitFor(ctx, "iperf3 server listening on "+port, 5*time.Second, srv, func() bool {
		out, err := c.Exec(netns.Laptop, "ss", "-Hltn", "sport = :"+port).Output()
		return err == nil && len(bytes.TrimSpace(out)) > 0
	}); err != nil {
		return err
	}

	// 4. The sender in the server namespace: the download.
	launch := time.Now()
	meta := runMeta{Variant: r.v.Name, Index: r.index, Seed: r.seed, Args: r.v.Args, LaunchNs: launch.UnixNano()}
	mb, _ := json.MarshalIndent(meta, "", "  ")
	if err := os.WriteFile(filepath.Join(r.dir, runMetaFile), mb, 0o644); err != nil {
		return err
	}
	cliArgs := []string{"iperf3", "-c", target, "-p", port, "-C", "cubic", "-J", "-i", "0.1", "-t", strconv.Itoa(r.secs)}
	if r.v.Tunnel() {
		// The source must lie in the tunnel's advertised route (the
		// kernel would pick the server TUN's own inner address).
		cliArgs = append(cliArgs, "-B", c.ServerAddr4.String())
	}
	cliCmd := c.Exec(netns.Server, cliArgs...)
	var cliOut, cliErr bytes.Buffer
	cliCmd.Stdout, cliCmd.Stderr = &cliOut, &cliErr
	ks, err := r.startKernelSampler()
	if err != nil {
		return err
	}
	cli, err := r.start("iperf3 client", "", cliCmd)
	if err != nil {
		ks.stop()
		return err
	}
	stopProgress := r.progress(launch)
	err = waitExit(ctx, cli, time.Duration(r.secs)*time.Second+30*time.Second)
	stopProgress()
	if kerr := ks.stop(); kerr != nil && err == nil {
		err = fmt.Errorf("sampling the server's TCP counters: %w", kerr)
	}
	if werr := os.WriteFile(filepath.Join(r.dir, clientJSONFile), cliOut.Bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if cli.err != nil {
		return fmt.Errorf("iperf3 client: %v: %s %s", cli.err, bytes.TrimSpace(cliErr.Bytes()), tail(filepath.Join(r.dir, clientJSONFile)))
	}
	if err := waitExit(ctx, srv, 5*time.Second); err != nil {
		return err
	}
	readWG.Wait()

	// 5. The download is over: the emulator is stopped (it writes its
	// files on SIGTERM), then the proxy.
	emulator.cmd.Process.Signal(syscall.SIGTERM)
	if err := waitExit(ctx, emulator, 30*time.Second); err != nil {
		return fmt.Errorf("%w; emulator log: %s", err, tail(emuLog))
	}
	if emulator.err != nil {
		return fmt.Errorf("m2ho emulate: %v; log: %s", emulator.err, tail(emuLog))
	}
	proxy.stop(5 * time.Second)
	return nil
}

// startKernelSampler samples the server namespace's TCP counters
// (kernelSampler) into the run's kernelLogFile.
func (r *runner) startKernelSampler() (*kernelSampler, error) {
	var f *os.File
	err := r.chain.Do(netns.Server, func() error {
		var err error
		f, err = os.Open("/proc/thread-self/net/netstat")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("server netstat: %w", err)
	}
	return startKernelSampler(f, filepath.Join(r.dir, kernelLogFile))
}

// The steps that bring a run's link up (run, runSteps).
const (
	stepTunnelServer  = "tunnel server"
	stepProxy         = "proxy"
	stepEmulator      = "emulator"
	stepTunnelRestart = "tunnel restart"
)

// runSteps is the order in which run brings the link up. The proxy comes
// before the emulator, which publishes to the proxy's signalling socket
// from its first event. A tunnel variant's proxy dials the tunnel when it
// starts, so over the bare path (the emulator's routing is not there
// yet): quic-go would keep that path's min RTT (~1 ms) for good, and its
// HyStart would leave slow start at the first RTT sample above it plus
// 4-16 ms, which at high-bdp's 600 ms left the tunnel at ~1 Mbit/s.
// Hence the restart once the emulator is up: a new connection whose RTT
// and congestion state are those of the emulated path.
func runSteps(tunnel bool) []string {
	if tunnel {
		return []string{stepTunnelServer, stepProxy, stepEmulator, stepTunnelRestart}
	}
	return []string{stepProxy, stepEmulator}
}

// startProxy starts `m2ho run` on the phone; ready when its signalling
// socket exists.
func (r *runner) startProxy(ctx context.Context, proxyLog string, tunnelArgs []string) (*child, error) {
	c, bin := r.chain, r.cfg.Binary
	proxyArgs := append([]string{bin, "run", "--tether-if", netns.PhoneTetherIf, "--uplink-if", netns.PhoneUplinkIf,
		"--tun", proxyTUN, "--socket", r.sock, "--metrics-addr", "", "--smax-db", filepath.Join(r.dir, smaxDBFile),
		"--verdict-log", filepath.Join(r.dir, verdictFile), "--eqn2-log", filepath.Join(r.dir, eqn2File), "--smax-log", filepath.Join(r.dir, smaxLogFile),
		"--prediction-log", filepath.Join(r.dir, predLogFile)}, r.v.Args...)
	proxyArgs = append(proxyArgs, tunnelArgs...)
	proxy, err := r.start("m2ho run", proxyLog, c.Exec(netns.Phone, proxyArgs...))
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "signalling socket "+r.sock, 10*time.Second, proxy, func() bool {
		st, err := os.Stat(r.sock)
		return err == nil && st.Mode()&os.ModeSocket != 0
	}); err != nil {
		return nil, fmt.Errorf("%w; proxy log: %s", err, tail(proxyLog))
	}
	return proxy, nil
}

// startEmulator starts `m2ho emulate`; ready when its TUN device is up
// (and a moment later, when its routing is in place).
func (r *runner) startEmulator(ctx context.Context, emuDur time.Duration, emuLog string) (*child, error) {
	c, bin := r.chain, r.cfg.Binary
	emuArgs := []string{bin, "emulate", "--scenario", r.cfg.Scenario, "--scale", strconv.FormatFloat(r.cfg.Scale, 'g', -1, 64),
		"--seed", strconv.FormatUint(r.seed, 10), "--duration", emuDur.String(), "--signal-socket", r.sock,
		"--out", filepath.Join(r.dir, emuSubdir), "--tun", emuTUN, "--ue-if", netns.EmuInIf, "--net-if", netns.EmuOutIf,
		// The phone's uplink address too: the tunnel's UDP goes to it
		// (nothing else does), and it must count as downlink.
		"--ue-net", "10.77.1.0/24,fd77:1::/64," + c.PhoneUplink4.String() + "/32," + c.PhoneUplink6.String() + "/128"}
	if r.cfg.DataDir != "" {
		emuArgs = append(emuArgs, "--data-dir", r.cfg.DataDir)
	}
	if r.cfg.XCAL != "" {
		emuArgs = append(emuArgs, "--xcal", r.cfg.XCAL)
		if r.cfg.Capacity != "" {
			emuArgs = append(emuArgs, "--capacity", r.cfg.Capacity)
		}
	}
	if r.cfg.NoAnchorPause {
		emuArgs = append(emuArgs, "--anchor-pause=false")
	}
	if r.cfg.NoMmWaveEdge {
		emuArgs = append(emuArgs, "--mmwave-edge=false")
	}
	if r.cfg.LateThreshold > 0 {
		emuArgs = append(emuArgs, "--late-threshold", strconv.FormatFloat(r.cfg.LateThreshold, 'g', -1, 64))
	}
	emulator, err := r.start("m2ho emulate", emuLog, c.Exec(netns.Emu, emuArgs...))
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "emulator TUN "+emuTUN+"*", 10*time.Second, emulator, func() bool {
		out, err := c.Exec(netns.Emu, "ip", "-o", "link", "show", "up").Output()
		return err == nil && bytes.Contains(out, []byte(": "+emuTUN))
	}); err != nil {
		return nil, fmt.Errorf("%w; emulator log: %s", err, tail(emuLog))
	}
	// Routing follows the device; give the emulator a moment to finish.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(300 * time.Millisecond):
	}
	return emulator, nil
}

// restartTunnel makes the proxy replace its tunnel connection (SIGUSR1,
// m2ho run's tunnelLink.restart) and waits until the new one is up: its
// log says "tunnel up again". A new connection with other inner
// addresses would break the download's destination (tunnelInner): an
// error.
func (r *runner) restartTunnel(ctx context.Context, proxy *child, proxyLog string) error {
	count := func(what string) int {
		b, _ := os.ReadFile(proxyLog)
		return bytes.Count(b, []byte(what))
	}
	before := count("tunnel up again")
	if err := proxy.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("restarting the tunnel (SIGUSR1 to m2ho run): %w", err)
	}
	if err := waitFor(ctx, "the tunnel up again over the emulated link", 30*time.Second, proxy, func() bool {
		return count("tunnel up again") > before
	}); err != nil {
		return fmt.Errorf("%w; proxy log: %s", err, tail(proxyLog))
	}
	if count("other inner addresses") > 0 {
		return fmt.Errorf("the restarted tunnel got other inner addresses (the download goes to %s); proxy log: %s", tunnelInner, tail(proxyLog))
	}
	return nil
}

// ReadTunnelRTT reads `m2ho run --tunnel-rtt-log`: a header, then
// unix_ns, latest, smoothed, min RTT (ms) per line; it returns the latest
// RTT samples. A malformed line is an error naming name:line.
func ReadTunnelRTT(r io.Reader, name string) ([]float64, error) {
	return ReadTunnelRTTSince(r, name, 0)
}

// ReadTunnelRTTSince is ReadTunnelRTT keeping the lines stamped at or
// after sinceNs (Unix ns).
func ReadTunnelRTTSince(r io.Reader, name string, sinceNs int64) ([]float64, error) {
	sc := bufio.NewScanner(r)
	var out []float64
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		if n == 1 && len(f) > 0 && f[0] == "unix_ns" {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 tab-separated fields, got %d", name, n, len(f))
		}
		ts, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: unix_ns %q: want an integer", name, n, f[0])
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: latest RTT %q: want a non-negative number of ms", name, n, f[1])
		}
		if ts >= sinceNs {
			out = append(out, v)
		}
	}
	return out, sc.Err()
}

// tunnelInner is the inner address the tunnel server gives the phone (the
// first of its pool; one session per run): the download's destination in
// the tunnel variants, NATed by the phone to the laptop (--tunnel-nat-host).
const tunnelInner = "10.78.0.2"

// startTunnelServer makes keys (m2ho keys) in the run's directory, starts
// `m2ho server` in the server namespace with the variant's ServerArgs and
// waits until it listens; it returns the tunnel flags for `m2ho run`.
func (r *runner) startTunnelServer(ctx context.Context) ([]string, error) {
	c, bin := r.chain, r.cfg.Binary
	pki := filepath.Join(r.dir, "pki")
	if out, err := exec.Command(bin, "keys", "--out", pki, "--server-name", "localhost", "--client", "phone-1").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("m2ho keys: %v: %s", err, bytes.TrimSpace(out))
	}
	listen := netip.AddrPortFrom(c.ServerAddr4, 4433).String()
	args := append([]string{bin, "server", "--listen", listen,
		"--cert", filepath.Join(pki, "server.crt"), "--key", filepath.Join(pki, "server.key"), "--client-ca", filepath.Join(pki, "ca.crt"),
		"--inner-prefix", "10.78.0.0/24", "--route", c.ServerAddr4.String() + "/32", "--tun", "m2hos0", "--metrics-addr", ""}, r.v.ServerArgs...)
	logPath := filepath.Join(r.dir, tunnelServerLogFile)
	srv, err := r.start("m2ho server", logPath, c.Exec(netns.Server, args...))
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, "m2ho server listening on "+listen, 15*time.Second, srv, func() bool {
		b, _ := os.ReadFile(logPath)
		return bytes.Contains(b, []byte("listening on"))
	}); err != nil {
		return nil, fmt.Errorf("%w; server log: %s", err, tail(logPath))
	}
	return []string{"--tunnel-server", listen, "--tunnel-server-name", "localhost",
		"--tunnel-ca", filepath.Join(pki, "ca.crt"), "--tunnel-cert", filepath.Join(pki, "phone-1.crt"), "--tunnel-key", filepath.Join(pki, "phone-1.key"),
		"--tunnel-nat-host", c.LaptopAddr4.String(), "--tunnel-rtt-log", filepath.Join(r.dir, tunnelRTTFile)}, nil
}

// readServer copies the receiver's lines to the log with their arrival
// time and keeps the last interval's rate for the progress line.
func (r *runner) readServer(pipe io.Reader, log io.Writer) {
	sc := bufio.NewScanner(pipe)
	w := bufio.NewWriter(log)
	defer w.Flush()
	for sc.Scan() {
		now := time.Now().UnixNano()
		line := sc.Text()
		fmt.Fprintf(w, "%d\t%s\n", now, line)
		if iv, ok, _ := ParseRecvLine(line); ok && iv.End > iv.Start {
			r.lastMbps.Store(math.Float64bits(float64(iv.Bytes) * 8 / (iv.End - iv.Start) / 1e6))
		}
	}
}

// progress prints the progress line once a second until stopped.
func (r *runner) progress(start time.Time) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(r.cfg.Progress, "\r%s  %5.1fs/%ds  last %7.1f Mbps ", r.label,
					time.Since(start).Seconds(), r.secs, math.Float64frombits(r.lastMbps.Load()))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// BuiltinScenarioNames lists the scenarios compiled into the emulator.
func BuiltinScenarioNames() []string { return emu.BuiltinNames() }
