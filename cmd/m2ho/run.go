package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/m2ho/bwe"
	"github.com/m2ho/m2ho/m2ho/smaxfile"
	"github.com/m2ho/m2ho/proxy"
	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/signaling/sigio"
	"github.com/m2ho/m2ho/tun"
)

// runConfig is `m2ho run`'s configuration: flags, or the same keys in a
// YAML file (configs/phone.yaml); a flag given on the command line wins.
type runConfig struct {
	TUN            string        `yaml:"tun"`
	MTU            int           `yaml:"mtu"`
	TUNOffload     string        `yaml:"tun-offload"`
	TetherIf       string        `yaml:"tether-if"`
	UplinkIf       string        `yaml:"uplink-if"`
	TetherNets     []string      `yaml:"tether-net"`
	NoRouting      bool          `yaml:"no-routing"`
	Table          int           `yaml:"table"`
	Socket         string        `yaml:"socket"`
	SignalTimeout  time.Duration `yaml:"signal-timeout"`
	SignalStale    time.Duration `yaml:"signal-stale"`
	Flows          []string      `yaml:"flow"`
	DefaultMode    string        `yaml:"default-mode"`
	MetricsAddr    string        `yaml:"metrics-addr"`
	SMaxDB         string        `yaml:"smax-db"`
	Estimator      string        `yaml:"estimator"`
	SmoothingBound time.Duration `yaml:"smoothing-bound"`
	Lambda         float64       `yaml:"lambda"`
	MaxFlows       int           `yaml:"max-flows"`
	FlowIdle       time.Duration `yaml:"flow-idle"`
	StableRate     bool          `yaml:"stable-rate"`
	Eqn2InFlight   bool          `yaml:"eqn2-inflight-bound"`
	InFlightPeers  bool          `yaml:"inflight-peers"`
	Eqn2Bound      string        `yaml:"eqn2-bound"`
	RampQueue      float64       `yaml:"ramp-queue"`
	RampPairRate   bool          `yaml:"ramp-pair-rate"`
	SlotPipe       bool          `yaml:"slot-pipe"`
	SlotStart      bool          `yaml:"slot-start"`
	OWDPathBase    bool          `yaml:"owd-path-base"`
	MmWaveClamp    bool          `yaml:"mmwave-horizontal-clamp"`
	FirstQueue     bool          `yaml:"first-queue-vs-default"`
	BurstDefault   bool          `yaml:"burst-vs-default"`
	AnchorKeeps    bool          `yaml:"anchor-keeps-cell"`
	AnswerRates    bool          `yaml:"answer-rates"`
	MmWaveA2Hold   time.Duration `yaml:"mmwave-a2-hold"`
	Predictor      string        `yaml:"predictor"`
	// CPUProfile (a hidden flag, no YAML key) writes a pprof CPU profile
	// of the whole run, for `make netbench`'s profile.
	CPUProfile string `yaml:"-"`
	VerdictLog string `yaml:"verdict-log"`
	Eqn2Log    string `yaml:"eqn2-log"`
	SMaxLog    string `yaml:"smax-log"`
	PredLog    string `yaml:"prediction-log"`
	// The QUIC tunnel (quic and quic+m2ho flows; proxy/tunnel).
	TunnelServer     string `yaml:"tunnel-server"`
	TunnelServerName string `yaml:"tunnel-server-name"`
	TunnelCA         string `yaml:"tunnel-ca"`
	TunnelCert       string `yaml:"tunnel-cert"`
	TunnelKey        string `yaml:"tunnel-key"`
	TunnelLocalAddr  string `yaml:"tunnel-local-addr"`
	TunnelQlogDir    string `yaml:"tunnel-qlog-dir"`
	TunnelHints      bool   `yaml:"tunnel-hints"`
	TunnelNATHost    string `yaml:"tunnel-nat-host"`
	TunnelRTTLog     string `yaml:"tunnel-rtt-log"`
	TunnelCountDrops bool   `yaml:"tunnel-count-drops"`
	// TunnelHintRateWait: how long an executed hint may wait for the
	// tunnel's measured delivery rate on the new cell (its c_est).
	TunnelHintRateWait time.Duration `yaml:"tunnel-hint-rate-wait"`
	// TunnelReaderYield (a hidden flag, no YAML key): false turns the
	// tunnel trace's yield to its DATAGRAM reader off, to measure it.
	TunnelReaderYield bool `yaml:"-"`
	// TunnelRecvWait: quic-go's receiving goroutine waits for http3's
	// while quic-go's DATAGRAM receive queue is nearly full.
	TunnelRecvWait bool `yaml:"tunnel-recv-wait"`
	// TunnelFullPackets: tunnel.ClientConfig's full packets (not
	// NoFullPackets).
	TunnelFullPackets bool `yaml:"tunnel-full-packets"`
}

// tunnel is the tunnel part of the configuration.
func (c *runConfig) tunnel() tunnelFlags {
	return tunnelFlags{Server: c.TunnelServer, ServerName: c.TunnelServerName, CA: c.TunnelCA, Cert: c.TunnelCert,
		Key: c.TunnelKey, LocalAddr: c.TunnelLocalAddr, QlogDir: c.TunnelQlogDir, NATHost: c.TunnelNATHost, CountDrops: c.TunnelCountDrops,
		HintRateWait: c.TunnelHintRateWait, NoReaderYield: !c.TunnelReaderYield, NoRecvWait: !c.TunnelRecvWait,
		NoFullPackets: !c.TunnelFullPackets}
}

func defaultRunConfig() runConfig {
	return runConfig{
		TUN:                "m2ho0",
		MTU:                1500,
		TUNOffload:         "auto",
		Table:              tun.DefaultRoutingTable,
		Socket:             "/run/m2ho/signal.sock",
		SignalTimeout:      m2ho.DefaultSignalLoss,
		SignalStale:        m2ho.DefaultSignalStale,
		DefaultMode:        "m2ho",
		MetricsAddr:        "127.0.0.1:9477",
		Estimator:          bwe.Names[0],
		SmoothingBound:     m2ho.DefaultSmoothingBound,
		Lambda:             m2ho.DefaultLambda,
		MaxFlows:           proxy.DefaultMaxFlows,
		FlowIdle:           proxy.DefaultIdleTimeout,
		StableRate:         true,
		Eqn2InFlight:       true,
		InFlightPeers:      true,
		Eqn2Bound:          m2ho.Eqn2BoundNames[0],
		RampQueue:          m2ho.DefaultRampQueue,
		RampPairRate:       true,
		SlotPipe:           true,
		SlotStart:          true,
		OWDPathBase:        true,
		MmWaveClamp:        true,
		FirstQueue:         true,
		BurstDefault:       true,
		AnchorKeeps:        true,
		AnswerRates:        true,
		MmWaveA2Hold:       m2ho.DefaultMmWaveA2Hold,
		TunnelHints:        true,
		TunnelReaderYield:  true,
		TunnelRecvWait:     true,
		TunnelFullPackets:  true,
		TunnelHintRateWait: tunnel.DefaultHintRateWait,
		Predictor:          m2ho.Streams.Name(),
	}
}

func newRunCmd(g *globalFlags) *cobra.Command {
	return newRunCmdWith(g, func(cmd *cobra.Command, c runConfig) error {
		log, err := g.logger()
		if err != nil {
			return err
		}
		defer log.Sync()
		return runDaemon(cmd.Context(), c, log, cmd.OutOrStdout())
	})
}

// newRunCmdWith builds the command around run, which gets the resolved
// configuration (defaults, then the --config file, then flags); tests pass
// their own run.
func newRunCmdWith(g *globalFlags, run func(*cobra.Command, runConfig) error) *cobra.Command {
	c := defaultRunConfig()
	var configPath string
	cmd := &cobra.Command{
		Use:   "run [flags]",
		Short: "Run the phone-side proxy: TUN device, policy routing, signalling socket",
		Long: `run is the phone-side daemon. It creates a TUN device and (unless
--no-routing) policy routing so that traffic between the tethered interface
and the uplink interface crosses the TUN in both directions; it applies
M2HO to the tethered laptop's TCP flows, fed by signalling events written
as JSON lines to a Unix socket (signaling/FORMAT.md). It prints what it
configured and removes all of it on SIGINT/SIGTERM or when start-up fails.

Each new flow gets a mode from the first --flow rule that matches, else
--default-mode:
  pass   forward unchanged
  m2ho   rewrite uplink ACK windows and drop spurious duplicate ACKs
  quic   carry the flow in the QUIC tunnel to --tunnel-server (m2ho server)
  quic+m2ho  the tunnel, and M2HO's verdicts on the flow's uplink ACKs
Rule syntax: [tcp|udp|any] [src|dst [host|net] ADDR] [src-port|dst-port|port N[-M]] mode=MODE
  --flow 'tcp dst-port 443 mode=m2ho' --flow 'tcp dst net 192.0.2.0/24 mode=pass'

When no signalling event arrives for --signal-timeout the controller falls
back to pass-through (no clamp, no drop) and says so in the log. It does
the same while events keep coming but late: an event that reaches it more
than --signal-stale later than its writer's usual (see the flag) is not
acted on, and the controller comes back once events have been on time for
--signal-stale.

Flags may also come from a YAML file (--config, see configs/phone.yaml);
a flag given on the command line wins over the file.

Example (as root):
  m2ho run --tether-if usb0 --uplink-if rmnet0 --socket /run/m2ho/signal.sock`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath != "" {
				if err := mergeYAML(&c, configPath, cmd.Flags()); err != nil {
					return err
				}
			}
			return run(cmd, c)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file with the same keys as these flags (flags win)")
	fs.StringVar(&c.TUN, "tun", c.TUN, "name of the TUN device to create")
	fs.IntVar(&c.MTU, "mtu", c.MTU, "MTU of the TUN device")
	fs.StringVar(&c.TUNOffload, "tun-offload", c.TUNOffload, "TUN offloads (virtio-net header, TSO/USO, batches of 128): auto (fall back to one packet per system call where the kernel refuses), on (fail instead), off")
	fs.StringVar(&c.TetherIf, "tether-if", c.TetherIf, "interface facing the tethered laptop (required unless --no-routing)")
	fs.StringVar(&c.UplinkIf, "uplink-if", c.UplinkIf, "interface facing the network (required unless --no-routing)")
	fs.StringSliceVar(&c.TetherNets, "tether-net", c.TetherNets, "tethered side's prefixes (default: the addresses of --tether-if)")
	fs.BoolVar(&c.NoRouting, "no-routing", c.NoRouting, "do not touch routing; route traffic into the TUN yourself")
	fs.IntVar(&c.Table, "table", c.Table, "policy routing table for the TUN's default route")
	fs.StringVar(&c.Socket, "socket", c.Socket, "Unix socket that accepts signalling events as JSON lines")
	fs.DurationVar(&c.SignalTimeout, "signal-timeout", c.SignalTimeout, "fall back to pass-through after this long without an event")
	fs.DurationVar(&c.SignalStale, "signal-stale", c.SignalStale, signalStaleUsage)
	fs.StringArrayVar(&c.Flows, "flow", c.Flows, "flow rule, e.g. 'tcp dst-port 443 mode=m2ho' (repeatable, first match wins)")
	fs.StringVar(&c.DefaultMode, "default-mode", c.DefaultMode, "mode of flows no rule matches: pass, m2ho, quic or quic+m2ho (the last two need --tunnel-server)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "address for Prometheus metrics at /metrics (empty: off)")
	fs.StringVar(&c.SMaxDB, "smax-db", c.SMaxDB, "file that keeps the per-cell buffer estimates across restarts (empty: memory only)")
	fs.StringVar(&c.Estimator, "estimator", c.Estimator, "bandwidth estimator for c_est: "+strings.Join(bwe.Names, ", "))
	fs.DurationVar(&c.SmoothingBound, "smoothing-bound", c.SmoothingBound, "longest duplicate-ACK suppression, counted from the handover command (keep well under the 200ms minimum RTO)")
	fs.Float64Var(&c.Lambda, "lambda", c.Lambda, "Eqn 2's lambda in rwnd = lambda*c_est*RTT_min/RTT")
	fs.IntVar(&c.MaxFlows, "max-flows", c.MaxFlows, "flow table size; the least recently seen flow is evicted when full")
	fs.DurationVar(&c.FlowIdle, "flow-idle", c.FlowIdle, "forget a flow after this long without a packet")
	fs.StringVar(&c.Eqn2Log, "eqn2-log", c.Eqn2Log, "file to append Eqn 2's inputs and window to, a line each 10ms at most while it holds a flow: unix_ns, the cell's rate and the rate its cap uses (bytes/s), the flow's RTT_min and smoothed RTT (us), lambda*c_est*RTT_min/RTT, the cap, the in-flight bound of the sub-6 dwell (-1: none), its standing queue and the window set (bytes), flows sharing, the flow's last one-way queueing delay (us) and the sender's bytes in flight (empty: off)")
	fs.StringVar(&c.VerdictLog, "verdict-log", c.VerdictLog, "file to append the verdict counters to, a line each 10ms tick they changed: unix_ns, clamp rewrites (Preparation/Smoothing), Eqn 2 rewrites, suppressed ACKs, release rewrites (a held window opening gradually), and the largest signalling lag since the last line in us (arrival less the event's own timestamp; a line for it alone when it reaches 10ms) (empty: off)")
	fs.BoolVar(&c.Eqn2InFlight, "eqn2-inflight-bound", c.Eqn2InFlight, "in a sub-6 dwell under Eqn 2, keep the flows' bytes in flight at or under the cell's measured buffer estimate (s_max) while the pipe fits under it: no capacity dip can then overflow the buffer and cut the carried window (false: the cap rate*RTT_min + queue alone)")
	fs.BoolVar(&c.InFlightPeers, "inflight-peers", c.InFlightPeers, "in a sub-6 cell whose buffer the phone has not yet seen overflow, hold --eqn2-inflight-bound at the least buffer seen full among the other sub-6 cells (the cell's own measured queue if deeper), as the M2HO paper estimates an unknown cell from the known ones; false: the bound waits for the cell's own overflow, which cuts the window carried from mmWave")
	fs.BoolVar(&c.StableRate, "stable-rate", c.StableRate, "apply Eqn 2's rwnd rate control in Stable, from a handover mmWave -> sub-6 until one back into mmWave (false: touch windows only around handovers)")
	fs.StringVar(&c.SMaxLog, "smax-log", c.SMaxLog, "file to append each rise of a cell's buffer estimate (s_max, measured from one-way delay) to, with the sample that made it: unix_ns of the sample, cell, type, s_max, the segment's queueing delay (us), the bytes received and the bytes the MAC slots served since it joined the queue, how long the cell had been busy (us) and the largest single sample (empty: off)")
	fs.StringVar(&c.PredLog, "prediction-log", c.PredLog, "file to append each episode of a prediction's or a command's clamp to, when it ends (back in Stable): unix_ns of its start, its end and the command (0: none), the outcome (confirmed, unpredicted, withdrawn-timeout, withdrawn-a1, ended), the predicted type and target, the serving cell's type, the clamp in bytes (0: none) and the kinds of report it rested on (lte-a3a5, nr-a3a5, lte-b1, nr-a2) (empty: off)")
	fs.StringVar(&c.Eqn2Bound, "eqn2-bound", c.Eqn2Bound, "cap on Eqn 2's carried window in a sub-6 dwell: rate (the cell's last per-RTT rate times RTT_min, plus s_max; the default: best goodput on the bench, but a capacity dip within the next RTT overflows the buffer) or envelope (its least per-RTT rate of the last second: the carried window survives the dips the cell has shown, at about 9 % of goodput on the bench's mixed drive)")
	fs.Float64Var(&c.RampQueue, "ramp-queue", c.RampQueue, "share of a cell's measured s_max (its buffer, learned from one-way delay) that the ramp back on mmWave lets stand queued, and adds per RTT, in (0, 1]; less leaves headroom for the cell's capacity dips, at a slower fill")
	fs.BoolVar(&c.RampPairRate, "ramp-pair-rate", c.RampPairRate, "on the ramp back to mmWave, read the cell's rate as the mean of its last two per-RTT samples: a window-limited flow arrives in one burst per RTT and single samples swing around its rate (false: the last sample alone)")
	fs.BoolVar(&c.SlotPipe, "slot-pipe", c.SlotPipe, "under Eqn 2's bounded window (a sub-6 dwell, the ramp back to mmWave), while a flow meets no queue (its one-way wait, else its RTT, within max(RTT_min/8, 4ms)), let its window grow toward the pipe the cell's MAC slots show (bytes / RB share per slot, times RTT_min), at most doubling per RTT: a cell never measured fills in a few RTTs instead of growing by its fallback buffer estimate per RTT (the 64 KiB default on sub-6) (false: the cap's queue alone paces it; without MAC slots in the feed it changes nothing)")
	fs.BoolVar(&c.SlotStart, "slot-start", c.SlotStart, "the same growth toward the MAC slots' pipe in a new cell's first round trips, before Eqn 2 has the new path's RTT_min and rate, with the previous path's RTT_min (or the new path's latest sample, when less): without it the flows sit at the cell's buffer estimate for those ~100 ms, the 64 KiB default in a cell never measured (false: hold them there; needs --slot-pipe)")
	fs.BoolVar(&c.OWDPathBase, "owd-path-base", c.OWDPathBase, "after a handover, measure each downlink segment's one-way wait (queue depth for the buffer estimate, the queue check of the slot growth, the pipe) against the new path's own least delay, once the MAC slots show the cell drained (false: the least delay of the last 4-8 s across handovers, which reads a path slower than the one before as queued by the difference)")
	fs.BoolVar(&c.MmWaveClamp, "mmwave-horizontal-clamp", c.MmWaveClamp, "clamp the flows' window to the target's buffer estimate (s_max) for a handover from one mmWave cell to another too, as the paper does (false: no clamp for those; the paper saw no overflow at them, and an mmWave cell not yet measured is clamped at the least sub-6 estimate, a fraction of a mmWave flow's window, also for every prediction later withdrawn)")
	fs.BoolVar(&c.FirstQueue, "first-queue-vs-default", c.FirstQueue, "a cell's first buffer measure (queue from one-way delay) replaces the 64 KiB default only when it is at least 2/3 of it, as it must against any other estimate: a window held at the default queues no deeper, so a smaller first measure is the window's queue, not the buffer's (false: any first measure replaces the default)")
	fs.BoolVar(&c.BurstDefault, "burst-vs-default", c.BurstDefault, "a cell's buffer estimate from MAC bursts (before a queue is measured there from one-way delay) stands for the cell, and for cells not known yet, only when above the 64 KiB default: a burst is only as large as its sender made it, and a flow's first round trips make bursts of tens of KB (false: any burst estimate counts)")
	fs.BoolVar(&c.AnswerRates, "answer-rates", c.AnswerRates, "learn per kind of measurement report (lte-a3a5, nr-a3a5, lte-b1, nr-a2, by the data cell's type) how often the network answers it with a handover command before the report's deadline, keep it in --smax-db, and clamp nothing for a prediction resting only on kinds the network rarely answers in time (under 1 in 5, smoothed: four unanswered in a row with no answer); the command still clamps (false: every prediction clamps; the rates are learned either way)")
	fs.DurationVar(&c.MmWaveA2Hold, "mmwave-a2-hold", c.MmWaveA2Hold, "an NR A2 on the mmWave data cell keeps its prediction, and the clamp to the sub-6 target's buffer estimate, at least this long, unless an A1 on that cell takes it back: the mmWave cell at its edge then drains its queue before a handover down to sub-6 forwards it into a smaller buffer (on the February 2023 drives the sub-6 cell came 1.4-2.1 s after the A2); 0: only the A2's own deadline (0.5 s, for a network that releases the mmWave cell at once)")
	fs.BoolVar(&c.AnchorKeeps, "anchor-keeps-cell", c.AnchorKeeps, "an LTE anchor handover whose command keeps the NR data cell (NSA with the secondary leg kept) is not a handover of the data path: its prediction and its command, until random access, clamp to that cell's own s_max (the buffer the data stays in while the secondary node pauses it), then c_est and Eqn 2's window carry on: no restart, no duplicate-ACK smoothing (false: a handover to an NR cell of unknown buffer, with c_est restarted)")
	fs.StringVar(&c.TunnelServer, "tunnel-server", c.TunnelServer, "host:port of the m2ho server for quic and quic+m2ho flows (required when a rule or --default-mode uses them)")
	fs.StringVar(&c.TunnelServerName, "tunnel-server-name", c.TunnelServerName, "name in the tunnel server's certificate (default: the host of --tunnel-server)")
	fs.StringVar(&c.TunnelCA, "tunnel-ca", c.TunnelCA, "CA certificate (PEM) that signed the tunnel server's certificate")
	fs.StringVar(&c.TunnelCert, "tunnel-cert", c.TunnelCert, "this phone's client certificate (PEM; m2ho keys makes it)")
	fs.StringVar(&c.TunnelKey, "tunnel-key", c.TunnelKey, "this phone's client key (PEM)")
	fs.StringVar(&c.TunnelLocalAddr, "tunnel-local-addr", c.TunnelLocalAddr, "UDP address the tunnel sends from (default: the address of --uplink-if, followed when it changes; SIGHUP checks at once)")
	fs.StringVar(&c.TunnelQlogDir, "tunnel-qlog-dir", c.TunnelQlogDir, "write the tunnel connection's qlog into this directory (empty: off)")
	fs.StringVar(&c.TunnelNATHost, "tunnel-nat-host", c.TunnelNATHost, "tethered host that the tunnel's inner address stands for from the start, so the far side may open connections to it (default: the first host that sends)")
	fs.StringVar(&c.TunnelRTTLog, "tunnel-rtt-log", c.TunnelRTTLog, "file to append the tunnel's RTT to every 100ms: unix_ns, latest, smoothed, min RTT in ms (quic-go's statistics; empty: off)")
	fs.BoolVar(&c.TunnelCountDrops, "tunnel-count-drops", c.TunnelCountDrops, "count the tunnel DATAGRAMs quic-go drops on receipt too (http3's are counted anyway; shown when the tunnel stops and in the metrics; costs quic-go's qlog events, ~8 allocations per packet, which --tunnel-recv-wait (the default) and a --tunnel-qlog-dir keep anyway: with either this flag changes nothing)")
	fs.BoolVar(&c.TunnelHints, "tunnel-hints", c.TunnelHints, "send the controller's handover hints (predicted with ŝ_max, executed with c_est, withdrawn) to the tunnel server")
	fs.DurationVar(&c.TunnelHintRateWait, "tunnel-hint-rate-wait", c.TunnelHintRateWait, "longest an executed hint waits for the tunnel's measured delivery rate on the new cell (its c_est; 0: send at once with c_est unknown, and the server restarts from its current rate). On long paths (RTT ≫ this) the first measured interval may close later than this: the hint then goes with c_est unknown")
	fs.StringVar(&c.Predictor, "predictor", c.Predictor, predictorUsage)
	fs.StringVar(&c.CPUProfile, "cpu-profile", "", "write a pprof CPU profile of the run to this file")
	fs.MarkHidden("cpu-profile")
	fs.BoolVar(&c.TunnelFullPackets, "tunnel-full-packets", c.TunnelFullPackets, "ask the tunnel server for 20-byte connection IDs and send QUIC packets of the inner MTU + 42 bytes (path MTU discovery off), so that full-size tunnelled packets fill their QUIC packets and quic-go sends runs of them with one GSO system call, here and on an m2ho server (its --full-packets); the uplink path must carry UDP payloads of 1322 bytes (false: quic-go's defaults)")
	fs.BoolVar(&c.TunnelRecvWait, "tunnel-recv-wait", c.TunnelRecvWait, "when quic-go's DATAGRAM receive queue (128) is nearly full, its receiving goroutine waits for http3's reader (at most 3 ms, at most half the time), so that a burst waits in the UDP socket's buffer instead of being dropped (each drop an inner TCP loss); needs quic-go's qlog events, as --tunnel-count-drops, whose counts it then shows too (false: drop, as before)")
	fs.BoolVar(&c.TunnelReaderYield, "tunnel-reader-yield", c.TunnelReaderYield, "yield to the tunnel's DATAGRAM reader, and wait for it, when http3's per-stream queue is nearly full (false: as before, with no trace unless --tunnel-count-drops or --tunnel-qlog-dir; to measure it)")
	fs.MarkHidden("tunnel-reader-yield")
	return cmd
}

// mergeYAML fills c from the file for every key whose flag was not given.
// Each key is decoded on its own, so an error names file:line and the key;
// a key that is not a flag's name is an error (a typo must not be ignored).
func mergeYAML(c *runConfig, path string, fs *pflag.FlagSet) error {
	return mergeConfigYAML(c, path, fs)
}

// configKeys lists the YAML keys in declaration order.
func configKeys() []string {
	keys, _ := structFields(&runConfig{})
	return keys
}

// check validates everything that can be checked before touching the
// system, naming the flag at fault.
func (c *runConfig) check() (rules []proxy.Rule, def proxy.Mode, est func() bwe.Estimator, err error) {
	if !c.NoRouting && (c.TetherIf == "" || c.UplinkIf == "") {
		return nil, 0, nil, errors.New("--tether-if and --uplink-if are required (or --no-routing with --tether-net)")
	}
	if c.NoRouting && c.TetherIf == "" && len(c.TetherNets) == 0 {
		return nil, 0, nil, errors.New("--no-routing needs --tether-net (or --tether-if to read its addresses)")
	}
	if _, err = tun.ParseOffloadMode(c.TUNOffload); err != nil {
		return nil, 0, nil, fmt.Errorf("--tun-offload: %w", err)
	}
	if rules, err = proxy.ParseRules(c.Flows); err != nil {
		return nil, 0, nil, fmt.Errorf("--flow: %w", err)
	}
	if def, err = proxy.ParseMode(c.DefaultMode); err != nil {
		return nil, 0, nil, fmt.Errorf("--default-mode: %w", err)
	}
	if err = c.modeAvailable(def); err != nil {
		return nil, 0, nil, fmt.Errorf("--default-mode %s: %w", def, err)
	}
	for i, r := range rules {
		if err = c.modeAvailable(r.Mode); err != nil {
			return nil, 0, nil, fmt.Errorf("--flow %d (%s): %w", i+1, r, err)
		}
	}
	if c.usesTunnel(rules, def) {
		if _, err := c.tunnel().clientConfig(zap.NewNop()); err != nil {
			return nil, 0, nil, err
		}
	}
	if est, err = bwe.ByName(c.Estimator); err != nil {
		return nil, 0, nil, fmt.Errorf("--estimator: %w", err)
	}
	if _, err = c.predictorRules(); err != nil {
		return nil, 0, nil, err
	}
	if _, err = m2ho.ParseEqn2Bound(c.Eqn2Bound); err != nil {
		return nil, 0, nil, fmt.Errorf("--eqn2-bound: %w", err)
	}
	switch {
	case !(c.RampQueue > 0 && c.RampQueue <= 1):
		return nil, 0, nil, fmt.Errorf("--ramp-queue %v: must be in (0, 1]", c.RampQueue)
	case c.SignalTimeout <= 0:
		return nil, 0, nil, fmt.Errorf("--signal-timeout %v: must be positive", c.SignalTimeout)
	case c.SignalStale <= 20*time.Millisecond || c.SignalStale >= c.SignalTimeout:
		return nil, 0, nil, fmt.Errorf("--signal-stale %v: must lie in (20ms, --signal-timeout %v): a burst's MAC slots normally come up to ~20ms late, so a tighter bound would judge normal events stale", c.SignalStale, c.SignalTimeout)
	case c.SmoothingBound <= 0 || c.SmoothingBound >= 200*time.Millisecond:
		return nil, 0, nil, fmt.Errorf("--smoothing-bound %v: must lie in (0, 200ms): suppressing ACKs for the minimum RTO would cause timeouts", c.SmoothingBound)
	case c.Lambda <= 0:
		return nil, 0, nil, fmt.Errorf("--lambda %v: must be positive", c.Lambda)
	case c.MTU < 576 || c.MTU > 65535:
		return nil, 0, nil, fmt.Errorf("--mtu %d: must lie in [576, 65535]", c.MTU)
	case c.MaxFlows <= 0:
		return nil, 0, nil, fmt.Errorf("--max-flows %d: must be positive", c.MaxFlows)
	case c.FlowIdle <= 0:
		return nil, 0, nil, fmt.Errorf("--flow-idle %v: must be positive", c.FlowIdle)
	case c.TunnelHintRateWait < 0 || c.TunnelHintRateWait > 2*time.Second:
		return nil, 0, nil, fmt.Errorf("--tunnel-hint-rate-wait %v: must lie in [0, 2s]: a hint held longer arrives after the handover it is about", c.TunnelHintRateWait)
	case c.Socket == "":
		return nil, 0, nil, errors.New("--socket: empty: the daemon needs a signalling socket")
	}
	return rules, def, est, nil
}

// modeAvailable is Mode.Available, with quic and quic+m2ho available when
// a tunnel server is configured.
func (c *runConfig) modeAvailable(m proxy.Mode) error {
	if m == proxy.ModeQUIC || m == proxy.ModeQUICM2HO {
		if c.TunnelServer == "" {
			return fmt.Errorf("mode %s needs --tunnel-server (the m2ho server to carry the flow to)", m)
		}
		return nil
	}
	return m.Available()
}

// usesTunnel reports whether any flow may be tunnelled.
func (c *runConfig) usesTunnel(rules []proxy.Rule, def proxy.Mode) bool {
	tunnelled := func(m proxy.Mode) bool { return m == proxy.ModeQUIC || m == proxy.ModeQUICM2HO }
	if tunnelled(def) {
		return true
	}
	for _, r := range rules {
		if tunnelled(r.Mode) {
			return true
		}
	}
	return false
}

// tetherPrefixes are the laptop side's prefixes: --tether-net, else the
// addresses configured on --tether-if.
func (c *runConfig) tetherPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.TetherNets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--tether-net %q: %v", s, err)
		}
		out = append(out, p.Masked())
	}
	if len(out) > 0 {
		return out, nil
	}
	ifi, err := net.InterfaceByName(c.TetherIf)
	if err != nil {
		return nil, fmt.Errorf("--tether-if %q: %v", c.TetherIf, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("--tether-if %q: %v", c.TetherIf, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		addr, _ := netip.AddrFromSlice(ipn.IP)
		addr = addr.Unmap()
		if addr.IsLinkLocalUnicast() {
			continue
		}
		ones, _ := ipn.Mask.Size()
		out = append(out, netip.PrefixFrom(addr, ones).Masked())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--tether-if %q has no address: give --tether-net", c.TetherIf)
	}
	return out, nil
}

// runDaemon runs until ctx ends or SIGINT/SIGTERM; everything it set up is
// undone on the way out, also when start-up fails half-way.
func runDaemon(ctx context.Context, c runConfig, log *zap.Logger, out interface{ Write([]byte) (int, error) }) (err error) {
	rules, def, est, err := c.check()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.CPUProfile != "" {
		stopProfile, err := startCPUProfile(c.CPUProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}

	var undo []func()
	defer func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}()

	// Interfaces are checked before anything is created, so a typo costs
	// nothing to undo and the error names the flag.
	for _, f := range []struct{ flag, name string }{{"--tether-if", c.TetherIf}, {"--uplink-if", c.UplinkIf}} {
		if f.name == "" {
			continue
		}
		if _, err := net.InterfaceByName(f.name); err != nil {
			return fmt.Errorf("%s %q: %v", f.flag, f.name, err)
		}
	}
	if _, err := net.InterfaceByName(c.TUN); err == nil {
		return fmt.Errorf("--tun %q: an interface of that name exists already (another m2ho running?)", c.TUN)
	}

	// Without a file the estimates are still learned, in memory: the
	// clamp must not fall back to the default for want of a path.
	db := m2ho.NewSMaxDB()
	if c.SMaxDB != "" {
		if db, err = smaxfile.Open(c.SMaxDB); err != nil {
			return fmt.Errorf("--smax-db: %w", err)
		}
	}
	db.SetFirstAgainstDefault(c.FirstQueue)
	db.SetBurstOverDefault(c.BurstDefault)

	obs := newObserver(log)
	var ctrlObs m2ho.Observer = obs
	// The QUIC tunnel, dialled before anything is created on the system so
	// that a wrong server or key costs nothing to undo.
	var link *tunnelLink
	var firstClient *tunnel.Client
	var hf *hintForwarder
	if c.usesTunnel(rules, def) {
		var uplink func() (netip.Addr, bool)
		if c.UplinkIf != "" {
			uplink = interfaceAddr(c.UplinkIf, c.TunnelServer)
		}
		link = newTunnelLink(c.tunnel(), log.Named("tunnel"), uplink)
		if firstClient, err = link.dial(ctx); err != nil {
			return err
		}
		undo = append(undo, func() { link.Close() })
		fmt.Fprintf(out, "m2ho: %s\n", link.describe(firstClient))
		if c.TunnelHints {
			hf = newHintForwarder(obs, log.Named("hints"))
			ctrlObs = hf
		}
	}
	pred, _ := c.predictorRules()                    // checked above
	eqn2Bound, _ := m2ho.ParseEqn2Bound(c.Eqn2Bound) // checked above
	var eqn2Trace func(time.Time, *m2ho.Flow, m2ho.Eqn2Step)
	var eqn2 *eqn2Log
	if c.Eqn2Log != "" {
		if eqn2, err = openEqn2Log(c.Eqn2Log); err != nil {
			return fmt.Errorf("--eqn2-log: %w", err)
		}
		undo = append(undo, func() {
			if err := eqn2.Close(); err != nil {
				log.Warn("eqn2 log", zap.Error(err))
			}
		})
		eqn2Trace = eqn2.trace
	}
	var smaxTrace func(m2ho.SMaxStep)
	var smaxL *smaxLog
	if c.SMaxLog != "" {
		if smaxL, err = openSMaxLog(c.SMaxLog); err != nil {
			return fmt.Errorf("--smax-log: %w", err)
		}
		undo = append(undo, func() {
			if err := smaxL.Close(); err != nil {
				log.Warn("smax log", zap.Error(err))
			}
		})
		smaxTrace = smaxL.trace
	}
	var predL *predLog
	if c.PredLog != "" {
		if predL, err = openPredLog(c.PredLog, ctrlObs); err != nil {
			return fmt.Errorf("--prediction-log: %w", err)
		}
		undo = append(undo, func() {
			if err := predL.Close(); err != nil {
				log.Warn("prediction log", zap.Error(err))
			}
		})
		ctrlObs = predL
	}
	ctrl := m2ho.New(m2ho.Config{
		Rules:                 pred,
		Lambda:                c.Lambda,
		SmoothingBound:        c.SmoothingBound,
		SignalLoss:            c.SignalTimeout,
		SignalStale:           c.SignalStale,
		Estimator:             est,
		Observer:              ctrlObs,
		SMaxDB:                db,
		StableRate:            toggle(c.StableRate),
		Eqn2InFlight:          toggle(c.Eqn2InFlight),
		InFlightPeers:         toggle(c.InFlightPeers),
		Eqn2Bound:             eqn2Bound,
		RampQueue:             c.RampQueue,
		RampPairRate:          toggle(c.RampPairRate),
		SlotPipe:              toggle(c.SlotPipe),
		SlotStart:             toggle(c.SlotStart),
		OWDPathBase:           toggle(c.OWDPathBase),
		MmWaveHorizontalClamp: toggle(c.MmWaveClamp),
		AnchorKeepsCell:       toggle(c.AnchorKeeps),
		AnswerRates:           toggle(c.AnswerRates),
		MmWaveA2Hold:          a2Hold(c.MmWaveA2Hold),
		Eqn2Trace:             eqn2Trace,
		SMaxTrace:             smaxTrace,
	})
	if hf != nil {
		hf.ctrlHint = ctrl.Hint
	}
	if predL != nil {
		predL.hint = ctrl.Hint
	}

	offload, err := tun.ParseOffloadMode(c.TUNOffload)
	if err != nil {
		return fmt.Errorf("--tun-offload: %w", err)
	}
	dev, note, err := tun.Open(tun.Config{Name: c.TUN, MTU: c.MTU, Offload: offload})
	if err != nil {
		return err
	}
	undo = append(undo, func() { dev.Close() })
	fmt.Fprintf(out, "m2ho: TUN %s (mtu %d): %s\n", dev.Name(), dev.MTU(), note)
	log.Info("TUN device", zap.String("name", dev.Name()), zap.String("tun_offload", offload.String()), zap.String("device", note))

	if !c.NoRouting {
		r, err := tun.SetupRouting(tun.RoutingConfig{TetherIf: c.TetherIf, UplinkIf: c.UplinkIf, TUN: dev.Name(), Table: c.Table})
		if err != nil {
			return err
		}
		undo = append(undo, func() {
			if err := r.Undo(); err != nil {
				log.Error("removing policy routing", zap.Error(err))
			} else {
				fmt.Fprintln(out, "m2ho: policy routing removed")
			}
		})
		for _, line := range r.Describe() {
			fmt.Fprintf(out, "m2ho: configured: %s\n", line)
		}
	} else if b, err := exec.Command("ip", "link", "set", dev.Name(), "up").CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s up: %v: %s", dev.Name(), err, strings.TrimSpace(string(b)))
	}

	prefixes, err := c.tetherPrefixes()
	if err != nil {
		return err
	}
	ecfg := proxy.EngineConfig{
		TetherPrefixes: prefixes,
		Rules:          rules,
		DefaultMode:    def,
		MaxFlows:       c.MaxFlows,
		IdleTimeout:    c.FlowIdle,
	}
	if link != nil {
		ecfg.Sinks = map[proxy.Mode]proxy.Sink{proxy.ModeQUIC: link, proxy.ModeQUICM2HO: link}
		ecfg.Sources = []proxy.Source{link}
	}
	eng := proxy.NewEngine(ecfg, dev, ctrl, log)
	fmt.Fprintf(out, "m2ho: tethered side %v, default mode %s, %d flow rule(s)\n", prefixes, def, len(rules))
	for i, r := range rules {
		fmt.Fprintf(out, "m2ho: rule %d: %s\n", i+1, r)
	}

	// The signalling socket feeds the controller under the engine's lock,
	// so events and packets are seen in one order.
	// A directory made for the socket is removed again (if empty) on the
	// way out, so the machine is left as it was.
	if dir := filepath.Dir(c.Socket); dir != "" {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("--socket: %w", err)
			}
			undo = append(undo, func() { os.Remove(dir) })
		}
	}
	feed := newEventFeed(eng.Do, ctrl.OnSourceEvent)
	srv, err := sigio.ListenBatch(c.Socket, feed.sinkBatch)
	if err != nil {
		return fmt.Errorf("--socket: %w", err)
	}
	undo = append(undo, func() { srv.Close() })
	fmt.Fprintf(out, "m2ho: signalling socket %s (pass-through until the first event; after %v without one; while events come %v later than their writer's usual)\n", c.Socket, c.SignalTimeout, c.SignalStale)
	fmt.Fprintf(out, "m2ho: predictor %s\n", pred.Name())
	log.Info("handover predictor", zap.String("predictor", pred.Name()))

	ps := &pumps{
		eng:       eng,
		tick:      ctrl.Tick,
		tickEvery: 10 * time.Millisecond,
		db:        db,
		saveEvery: 5 * time.Second,
		log:       log,
		// The server's Close waits for its goroutines: after this pump
		// returns, no event reaches the controller any more.
		serve: []func(context.Context) error{func(ctx context.Context) error {
			<-ctx.Done()
			return srv.Close()
		}},
	}
	if link != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		undo = append(undo, func() { signal.Stop(hup) })
		kick := make(chan struct{}, 1)
		go func() {
			for range hup {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}()
		// SIGUSR1: a new tunnel connection (tunnelLink.restart; the bench
		// sends it once the emulated link is up).
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		undo = append(undo, func() { signal.Stop(usr1) })
		first := firstClient
		ps.serve = append(ps.serve,
			func(ctx context.Context) error { return link.restartOn(ctx, usr1) },
			func(ctx context.Context) error { return link.supervise(ctx, first) },
			func(ctx context.Context) error { return link.watchUplink(ctx, time.Second, kick) })
		if hf != nil {
			ps.serve = append(ps.serve, func(ctx context.Context) error { hf.run(ctx, link); return nil })
		}
		if c.TunnelRTTLog != "" {
			f, err := os.OpenFile(c.TunnelRTTLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("--tunnel-rtt-log: %w", err)
			}
			undo = append(undo, func() { f.Close() })
			ps.serve = append(ps.serve, func(ctx context.Context) error { return link.logRTT(ctx, f, 100*time.Millisecond) })
		}
	}
	if c.SMaxDB != "" {
		path := c.SMaxDB
		ps.save = func(snap m2ho.SMaxSnapshot) error { return smaxfile.Save(path, snap) }
	}

	if c.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(newCollector(eng, ctrl, srv, obs))
		if link != nil {
			reg.MustRegister(&tunnelCollector{link: link, hints: hf})
		}
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		hs := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		undo = append(undo, func() { hs.Close() })
		ps.serve = append(ps.serve, func(ctx context.Context) error {
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			select {
			case <-ctx.Done():
				hs.Close()
				<-errc
				return nil
			case err := <-errc:
				return fmt.Errorf("--metrics-addr: %w", err)
			}
		})
		fmt.Fprintf(out, "m2ho: metrics on http://%s/metrics\n", ln.Addr())
	}

	// The verdict log (for the bench's per-handover table): the counts of
	// each M2HO action, a line whenever they changed, written after each
	// tick outside the engine's lock.
	var verdicts *os.File
	if c.VerdictLog != "" {
		if verdicts, err = os.OpenFile(c.VerdictLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return fmt.Errorf("--verdict-log: %w", err)
		}
		undo = append(undo, func() { verdicts.Close() })
		fmt.Fprintf(verdicts, "unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\tsignal_lag_us\n")
	}
	var lastVerdicts [4]uint64
	logVerdicts := func(now time.Time) {
		if verdicts == nil {
			return
		}
		st := eng.Stats()
		v := [4]uint64{st.RewritesBy[m2ho.ReasonPreparation], st.RewritesBy[m2ho.ReasonStableRate], st.DropsBy[m2ho.ReasonSmoothing], st.RewritesBy[m2ho.ReasonRelease]}
		// The signalling lag since the last tick (the bench marks a run
		// whose controller saw its events late), a line whenever it is
		// large enough to matter even if no counter moved.
		lag := feed.takeLag()
		if v != lastVerdicts || lag >= signalLagLogged {
			lastVerdicts = v
			fmt.Fprintf(verdicts, "%d\t%d\t%d\t%d\t%d\t%d\n", now.UnixNano(), v[0], v[1], v[2], v[3], max(lag, 0).Microseconds())
		}
	}
	ps.afterTick = func(now time.Time) {
		logVerdicts(now)
		if eqn2 != nil {
			eqn2.flush()
		}
		if smaxL != nil {
			smaxL.flush()
		}
		if predL != nil {
			predL.flush()
		}
	}

	log.Info("m2ho running", zap.String("tun", dev.Name()), zap.String("socket", c.Socket))
	err = ps.run(ctx)
	if ctx.Err() != nil {
		fmt.Fprintln(out, "m2ho: stopping")
		return nil
	}
	return err
}

// signalLagLogged is the signalling lag that writes a verdict-log line
// even when no counter moved: well above the microseconds an event takes
// from the bench's emulator to the controller, well under the 54 ms a
// report leads its command by (the XCAL logs' median).
const signalLagLogged = 10 * time.Millisecond

// toggle maps a boolean flag onto the controller's three-valued switch.
func toggle(on bool) m2ho.Toggle {
	if on {
		return m2ho.ToggleOn
	}
	return m2ho.ToggleOff
}

// startCPUProfile starts a pprof CPU profile into path (the daemons' hidden
// --cpu-profile); the returned function stops and closes it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// a2Hold maps --mmwave-a2-hold (0: off) to m2ho.Config.MmWaveA2Hold (0:
// the default, negative: off).
func a2Hold(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
