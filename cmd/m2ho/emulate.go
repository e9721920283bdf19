package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/bench/emu/driver"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/tun"
)

type emulateFlags struct {
	scenario      string
	scale         float64
	seed          uint64
	duration      time.Duration
	signalSocket  string
	out           string
	tun           string
	tunOffload    string
	ueIf, netIf   string
	ueNets        []string
	lateThreshold float64
	dataDir       string
	rtPriority    int
	xcal, capLog  string
	// anchorPause, when set, overrides the scenario's handover.anchor_pause.
	anchorPause *bool
	// noMmWaveEdge turns off the scenario's mmwave_edge.
	noMmWaveEdge bool
}

// newEmulateCmd is `m2ho emulate`: the real-time driver of the link model
// (bench/emu) on a TUN device inside the emulator's network namespace.
func newEmulateCmd(g *globalFlags) *cobra.Command {
	f := emulateFlags{scenario: "mixed-drive", scale: 1, out: "emulate-out", tun: "emu0", tunOffload: "auto",
		ueIf: "emu-in", netIf: "emu-out", lateThreshold: 1, rtPriority: 20}
	var anchorPause, mmWaveEdge bool
	cmd := &cobra.Command{
		Use:   "emulate [flags]",
		Short: "Emulate a 5G link with handovers on a TUN device (run inside the emulator's namespace)",
		Long: `emulate is a user-space 5G link with handovers, after mahimahi: every packet
crossing this network namespace (arriving on --ue-if from the phone or on
--net-if from the server) is routed into one TUN device (policy routing,
as the phone's proxy does), held by the link model for as long as the
emulated radio would hold it, and written back. A packet whose destination
lies in the UE-side prefixes (--ue-net; by default everything routed through
--ue-if) goes down the link, anything else up it. Run it where the packets
cross, e.g.  ip netns exec <emu-ns> m2ho emulate --scenario mixed-drive.

What the model reproduces (the M2HO paper, MobiCom'24 §3, measured on a
commercial sub-6 n77 / mmWave n261 network):
  - Burst scheduling: the serving cell serves the UE in slots (500 us sub-6,
    125 us mmWave) and gives it >90 % of the resource blocks while data is
    queued; a burst ends with a partial slot and then an empty one. Each
    slot is published as a MAC event: the proxy estimates the cell's
    capacity (s_max) from exactly this pattern.
  - Capacity per cell: constant, a trace (mahimahi, iperf3 UDP log,
    seconds/Mbps), or varying every 0.1 s as the measured cells of its type
    did (capacity_variation: measured). Base RTT and buffer per cell type
    as measured (bench/emu/CALIBRATION.md).
  - A measurement report comes a lead time before the handover command
    (log-normal fitted to the XCAL logs: median 56 ms, p90 103 ms; the paper's 146 ms
    with report_lead: {dist: paper}): A3 for a horizontal handover, B1 or
    A5 for sub-6->mmWave, A2 for mmWave->sub-6. This is the warning M2HO
    acts on. A replayed drive (--xcal) publishes its own log instead:
    every report, command and random access at its logged time.
  - Finding 1, hard interruption: the UE leaves the source at the command;
    from then until random access to the target completes (33 ms to
    execution plus the 27 ms interruption, by default) nothing is delivered
    in either direction (what the UE sends waits in its buffer), while the
    server keeps sending.
  - Finding 2, reordering flush: at a measured share of handovers
    (errors.flush_holes, 18.4 %, whatever --scale) one transport block
    failed its HARQ transmission just before the command; the packets
    behind it wait in the UE's reordering buffer. The handover command
    flushes that buffer to IP, so TCP sees a hole (duplicate ACKs, a
    spurious fast retransmit) and the missing packets arrive later through
    the target cell. (errors.harq_fraction is the older per-packet model.)
  - Finding 3, target buffer overflow: the source's queue is forwarded to
    the target, and what the sender pushes during the interruption lands
    there too; the target's buffer tail-drops what exceeds it.
  - False alarms: a report followed by an A1 and no handover.
  - LTE anchor handovers that keep the NR cell (EN-DC; a replayed drive's
    "ENDC LTE HO Request (DiffLTE-SameNR)"): the SN stops providing data
    until the UE has synchronised to it again (TS 37.340 10.7), so the
    link pauses from the command to the logged random access, the queue
    kept in the same cell. Not a handover in the outputs (emulator.json
    anchor_pauses). --anchor-pause=false replays them as signalling only.
  - The mmWave edge (mmwave_edge: measured, in mixed-drive and measured): a
    handover from mmWave down to sub-6 is the network's answer to the
    mmWave link failing, so in the 5 s before it the source cell's capacity
    falls as the measured cells' did (to ~10 % of its mean in the last
    2.5 s; bench/emu/CALIBRATION.md). emulator.json mmwave_edges counts
    them; --mmwave-edge=false leaves the capacity alone. A replay with
    --capacity has the log's own.

Every event is written to <out>/events.jsonl and, when --signal-socket is
set, to the proxy's signalling socket at the moment it happens (a bounded
queue: a slow or absent proxy costs counted drops, never packet delay).

Timing: the driver measures its own lateness. A delivery written more than
1 ms after the model's due time is late; a run with more than
--late-threshold percent late deliveries is marked invalid in
emulator.json, not a result; its "loop" block says where the late time
went (bench/emu/LATENESS.md). Every thread of the emulator runs real-time
(SCHED_FIFO, --rt-priority; the packet loop's goroutine is not locked to a
thread, so after a Go preemption any of them resumes it at once) and
sleeps in ppoll between deadlines. --scale multiplies every capacity and buffer
for machines too slow for mmWave rates; it is printed with every result.

Outputs in --out (the bench reads them):
  events.jsonl     every event (JSON lines, signaling/FORMAT.md)
  capacity.tsv     t_s mbps cell type: the serving cell's capacity per
                   100 ms (scaled; 0 from a handover command to random access)
  handovers.tsv    report_s command_s ra_s from to type (horizontal,
                   sub6-to-mmwave, mmwave-to-sub6), seconds from the start
  falsealarms.tsv  report_s a1_s
  emulator.json    scenario, scale, start_unix_ns, duration_s, valid,
                   late_pct, max_late_ms, delivered_packets, overflow_drops,
                   reorder_flushes, flushed_holes, false_alarms, handovers,
                   dup_acks_up (duplicate ACKs the server received),
                   events_published, events_dropped (not sent to the socket),
                   anchor_pauses (link pauses at anchor handovers),
                   mmwave_edges (mmWave -> sub-6 handovers with the edge)
  mm-down.log, mm-up.log   mahimahi mm-link logs (mm-throughput-graph reads them)

Built-in scenarios: ` + strings.Join(emu.BuiltinNames(), ", ") + `; or give a YAML path
(see bench/emu/scenarios/*.yaml for the keys).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer log.Sync()
			if f.xcal != "" && !cmd.Flags().Changed("scenario") {
				f.scenario = "measured" // its link settings, the drive's schedule
			}
			if cmd.Flags().Changed("anchor-pause") {
				f.anchorPause = &anchorPause
			}
			f.noMmWaveEdge = !mmWaveEdge
			return runEmulate(cmd.Context(), f, log)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scenario, "scenario", f.scenario, "built-in scenario ("+strings.Join(emu.BuiltinNames(), ", ")+") or a scenario YAML file")
	fl.Float64Var(&f.scale, "scale", f.scale, "multiply every capacity and buffer (for slower machines); printed with the result")
	fl.Uint64Var(&f.seed, "seed", 0, "random seed (0 = the scenario's)")
	fl.DurationVar(&f.duration, "duration", 0, "run length (0 = the scenario's); a synthetic schedule is drawn for it")
	fl.StringVar(&f.signalSocket, "signal-socket", "", "the proxy's signalling socket to publish events to (empty: none)")
	fl.StringVar(&f.out, "out", f.out, "output directory")
	fl.StringVar(&f.tun, "tun", f.tun, "TUN device to create")
	fl.StringVar(&f.tunOffload, "tun-offload", f.tunOffload, "TUN offloads (64 KiB frames split on read, merged on write, batches of 128): auto (fall back to one packet per system call where the kernel refuses), on (fail instead), off")
	fl.StringVar(&f.ueIf, "ue-if", f.ueIf, "interface facing the phone (UE side)")
	fl.StringVar(&f.netIf, "net-if", f.netIf, "interface facing the server (network side)")
	fl.StringSliceVar(&f.ueNets, "ue-net", nil, "UE-side prefixes, packets to them go down the link (default: the routes through --ue-if)")
	fl.Float64Var(&f.lateThreshold, "late-threshold", f.lateThreshold, "percent of late deliveries (>1 ms after due) above which the run is invalid")
	fl.IntVar(&f.rtPriority, "rt-priority", f.rtPriority, "run every emulator thread SCHED_FIFO at this priority (1-99) so a busy machine does not delay deliveries; 0: normal scheduling")
	fl.StringVar(&f.xcal, "xcal", "", "replay this XCAL export (a real drive) instead of the scenario's schedule: every report, command and random access at its logged time")
	fl.StringVar(&f.capLog, "capacity", "", "with --xcal: the drive's iperf3 -J UDP log as the capacity of every cell (aligned by timestamps when they overlap, else from both starts); without it the cells take the scenario's per-type capacities")
	fl.BoolVar(&mmWaveEdge, "mmwave-edge", true, "lower an mmWave cell's capacity in the 5 s before each handover from it down to sub-6 as the scenario's mmwave_edge says (false: never)")
	fl.BoolVar(&anchorPause, "anchor-pause", true, "pause the link at LTE anchor handovers that keep the NR cell, from the command to the random access (false: replay them as signalling only); default: the scenario's handover.anchor_pause, true")
	fl.StringVar(&f.dataDir, "data-dir", "", "shared data directory for scenarios that read ../shared/data (default $M2HO_SHARED_DATA, else <repo>/../shared/data)")
	return cmd
}

// xcalEvents reads an XCAL export for the measured scenario; bad rows are
// skipped (and counted), I/O errors end the load.
func xcalEvents(log *zap.Logger) func(string) ([]signaling.Event, error) {
	return func(path string) ([]signaling.Event, error) {
		evs, bad, first, err := driver.ReadXCAL(path)
		if err != nil {
			return nil, err
		}
		if bad > 0 {
			log.Warn("XCAL rows skipped", zap.String("file", path), zap.Int("rows", bad), zap.Error(first))
		}
		return evs, nil
	}
}

func loadScenario(f emulateFlags, log *zap.Logger) (*emu.Scenario, error) {
	if f.capLog != "" && f.xcal == "" {
		return nil, errors.New("--capacity: needs --xcal (the drive it was measured on)")
	}
	opts := emu.LoadOptions{XCAL: xcalEvents(log), DataDir: f.dataDir, Duration: f.duration, Seed: f.seed, XCALPath: f.xcal, CapacityPath: f.capLog}
	var (
		s   *emu.Scenario
		err error
	)
	if slices.Contains(emu.BuiltinNames(), f.scenario) {
		s, err = driver.Builtin(f.scenario, opts)
	} else {
		s, err = driver.LoadScenario(f.scenario, opts)
	}
	if err != nil {
		return nil, err
	}
	if !(f.scale > 0) {
		return nil, fmt.Errorf("--scale %v: must be > 0", f.scale)
	}
	if f.anchorPause != nil {
		s.Config.AnchorPause = *f.anchorPause
	}
	if f.noMmWaveEdge {
		s.Config.MmWaveEdge = nil
	}
	return s.Scaled(f.scale), nil
}

func runEmulate(ctx context.Context, f emulateFlags, log *zap.Logger) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !(f.lateThreshold > 0) {
		return fmt.Errorf("--late-threshold %v: must be > 0 (percent)", f.lateThreshold)
	}
	scn, err := loadScenario(f, log)
	if err != nil {
		return err
	}
	nets, err := emu.ParsePrefixes(f.ueNets)
	if err != nil {
		return fmt.Errorf("--ue-net: %w", err)
	}
	offload, err := tun.ParseOffloadMode(f.tunOffload)
	if err != nil {
		return fmt.Errorf("--tun-offload: %w", err)
	}
	link, err := driver.OpenLink(driver.LinkConfig{TUN: f.tun, UEIf: f.ueIf, NetIf: f.netIf, UENets: nets, Offload: offload})
	if err != nil {
		return err
	}
	defer func() {
		if err := link.Close(); err != nil {
			log.Error("removing the TUN and its routing", zap.Error(err))
		}
	}()
	dur := scn.Config.Duration
	if scn.Drive != nil {
		fmt.Printf("emulate: drive %s: %s\n", scn.Drive.XCAL, scn.Drive.Alignment.Text)
	}
	log.Info("emulating",
		zap.String("scenario", scn.Name), zap.String("source", scn.Source), zap.Float64("scale", scn.Config.Scale),
		zap.Duration("duration", dur), zap.String("tun", f.tun), zap.String("tun_offload", offload.String()), zap.String("device", link.Device), zap.String("ue_nets", emu.FormatPrefixes(link.UENets)),
		zap.Strings("routing", link.Routing()), zap.String("out", f.out))
	d, err := driver.NewDriver(driver.DriverConfig{
		Scenario: scn, Seed: f.seed, Duration: dur, SignalSocket: f.signalSocket, OutDir: f.out,
		InvalidLatePct: f.lateThreshold, RTPriority: f.rtPriority,
		Progress: func(p driver.Progress) {
			fmt.Fprintf(os.Stderr, "emulate %5.0fs/%.0fs  serving %s (%s)  handovers %d  down %7.1f Mbps  late %.2f%%\n",
				p.Elapsed.Seconds(), p.Duration.Seconds(), p.Serving.ID, emu.CellTypeName(p.Serving.Type), p.Handovers, p.DownMbps, p.LatePct)
		},
	}, link)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := d.Run(ctx)
	s := res.Summary
	verdict := "valid"
	if !s.Valid {
		verdict = fmt.Sprintf("INVALID (late %.2f%% > %.2f%%: this machine could not keep up; lower --scale)", s.LatePct, f.lateThreshold)
	}
	fmt.Printf("emulate: scenario %s scale %g: %.1f s, %d handovers, %d false alarms, %d delivered, %d overflow drops, %d reorder flushes, %d dup ACKs up, late %.3f%% (max %.2f ms), %s; outputs in %s\n",
		s.Scenario, s.Scale, s.DurationS, s.Handovers, s.FalseAlarms, s.DeliveredPackets, s.OverflowDrops, s.ReorderFlushes,
		s.DupAcksUp, s.LatePct, s.MaxLateMs, verdict, f.out)
	if f.signalSocket != "" && s.EventsDropped > 0 {
		log.Warn("events not delivered to the signalling socket", zap.Int64("dropped", s.EventsDropped), zap.Int64("published", s.EventsPublished))
	}
	return err
}
