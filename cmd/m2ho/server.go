package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"

	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/proxy/wave"
	"github.com/m2ho/m2ho/tun"
)

// serverConfig is `m2ho server`'s configuration: flags, or the same keys in
// a YAML file (configs/server.yaml); a flag given on the command line wins.
type serverConfig struct {
	Listen            string        `yaml:"listen"`
	Cert              string        `yaml:"cert"`
	Key               string        `yaml:"key"`
	ClientCA          string        `yaml:"client-ca"`
	InnerPrefixes     []string      `yaml:"inner-prefix"`
	Routes            []string      `yaml:"route"`
	TUN               string        `yaml:"tun"`
	MTU               int           `yaml:"mtu"`
	FullPackets       bool          `yaml:"full-packets"`
	NoRouting         bool          `yaml:"no-routing"`
	QueueLen          int           `yaml:"queue-len"`
	MaxConnsPerClient int           `yaml:"max-conns-per-client"`
	MaxSessions       int           `yaml:"max-sessions"`
	AddressHold       time.Duration `yaml:"address-hold"`
	MaxHeldAddresses  int           `yaml:"max-held-addresses"`
	MetricsAddr       string        `yaml:"metrics-addr"`
	QlogDir           string        `yaml:"qlog-dir"`
	CPUProfile        string        `yaml:"-"` // hidden flag, as m2ho run's
	TUNOffload        string        `yaml:"tun-offload"`
	Pacer             string        `yaml:"pacer"`
	WaveBurst         int           `yaml:"wave-burst"`
	WaveMinTxTime     time.Duration `yaml:"wave-min-tx-time"`
	WaveMaxBurst      int           `yaml:"wave-max-burst"`
	WaveTrainDivisor  int           `yaml:"wave-train-rtt-divisor"`
	WaveQueueWindow   time.Duration `yaml:"wave-queue-window"`
	WaveQueueBDP      float64       `yaml:"wave-queue-bdp"`
	WaveQueueDelay    time.Duration `yaml:"wave-queue-delay"`
	WaveStartupRamp   bool          `yaml:"wave-startup-ramp"`
}

func defaultServerConfig() serverConfig {
	return serverConfig{
		Listen:            ":4433",
		InnerPrefixes:     []string{"10.77.0.0/24"},
		TUN:               "m2hos0",
		MTU:               tunnel.DefaultMTU,
		FullPackets:       true,
		QueueLen:          0, // defaultQueueLen
		MaxConnsPerClient: 4,
		MaxSessions:       1024,
		AddressHold:       tunnel.DefaultAddressHold,
		MaxHeldAddresses:  tunnel.DefaultMaxHeldAddresses,
		MetricsAddr:       "127.0.0.1:9478",
		TUNOffload:        "auto",
		// none: through the tunnel Wave still delivers 14-16 % less than
		// quic-go's own pacing at low BDP (proxy/wave/README.md).
		Pacer:         pacerNone,
		WaveBurst:     wave.DefaultBurstPackets,
		WaveMinTxTime: wave.DefaultMinTxTime,
		WaveMaxBurst:  wave.DefaultMaxBurstPackets,
		// bursts grow while noisy trains are shorter than min_rtt/8
		WaveTrainDivisor: wave.DefaultTrainRTTDivisor,
		WaveQueueBDP:     wave.DefaultQueueBDP,
		WaveQueueDelay:   wave.DefaultQueueDelay,
		WaveQueueWindow:  defaultWaveQueueWindow,
		WaveStartupRamp:  true,
	}
}

// defaultWaveQueueWindow is the server's --wave-queue-window: the bound
// of the queue in front of Wave doubles the largest bandwidth-delay
// estimate of the last 200 ms (third largest of ten slots), so that a 5G
// cell's capacity dips, every 100 ms on the bench's drive, do not
// tail-drop the tunnelled TCP's window each time. Measured on 2026-12-03
// against the current estimate alone (README, "The queue bound on a
// varying cell"): mixed drive +12.6 % goodput at an inner RTT p50 of 49
// against 31 ms (quic-go alone 83), high BDP +11.9 % at the same RTT, low
// BDP unchanged (+5 ms inner RTT). 0 turns it off.
const defaultWaveQueueWindow = 200 * time.Millisecond

// defaultQueueLen is the session queue bound that --queue-len 0 stands
// for: 512 packets in front of quic-go's own pacing; 2048 in front of
// Wave, which bounds its queue itself (--wave-queue-bdp, capped by
// --wave-queue-delay). 512 was a sixth of a 600 ms, 50 Mbit/s BDP: under
// Wave every overflow cut the tunnelled CUBIC below the BDP, ~15 s to
// regrow at 600 ms (README, "Correction"); 2048 takes the half estimate
// that path needs (1564 packets) and holds 2.6 MB of slots per session.
func defaultQueueLen(pacer string) int {
	if pacer == pacerWave {
		return 2048
	}
	return 512
}

func newServerCmd(g *globalFlags) *cobra.Command {
	c := defaultServerConfig()
	var configPath string
	cmd := &cobra.Command{
		Use:   "server [flags]",
		Short: "Run the QUIC tunnel server (CONNECT-IP over HTTP/3, mutual TLS)",
		Long: `server is the far end of the phone's QUIC tunnel. It listens on UDP for
QUIC + HTTP/3 and serves CONNECT-IP (RFC 9484) at ` + tunnel.ConnectIPPath + `
to clients holding a certificate signed by --client-ca (m2ho keys makes
them). Each session gets one inner address per --inner-prefix (the prefix's
first host address is the server's own, on its TUN) and may reach only the
--route prefixes: packets with another inner source or another destination
are dropped and counted. Per client identity (certificate CN) at most
--max-conns-per-client connections; each session's downlink queue holds
--queue-len packets (tail drop, counted). Hints from the phone arrive on the
same connection (proxy/tunnel/HINTS.md) and are logged and counted.

--pacer wave puts QUIC Wave's burst pacer in front of each
session's downlink: bursts of --wave-burst packets (growing up to
--wave-max-burst while TxTime sits at its floor, or while noisy ACK trains
are shorter than min_rtt/--wave-train-rtt-divisor), one every TxTime, TxTime
from the dispersion of each burst's ACK train; the downlink queue is held
at about twice Wave's bandwidth-delay estimate (drops counted); a predicted
handover caps
bytes in flight at the hinted ŝ_max, an executed one restarts TxTime from
the hinted c_est (c_est 0, unknown: the estimate restarts at the current
rate). --pacer none (the default: through the tunnel Wave trades 14-16 %
of goodput for a 6x lower RTT at low BDP, proxy/wave/README.md) leaves
pacing to quic-go (its Reno with HyStart, and its pacer), which stays
underneath Wave in either case.

The server creates a TUN device with its inner addresses and (unless
--no-routing) turns on IP forwarding; all of it is undone on SIGINT/SIGTERM
or when start-up fails. Traffic to --route prefixes beyond this host needs
their replies routed back to the inner prefix (or a NAT you set up).

Flags may also come from a YAML file (--config, see configs/server.yaml);
a flag given on the command line wins over the file.

Example (as root):
  m2ho server --cert pki/server.crt --key pki/server.key --client-ca pki/ca.crt \
    --inner-prefix 10.77.0.0/24 --route 198.51.100.0/24`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath != "" {
				if err := mergeConfigYAML(&c, configPath, cmd.Flags()); err != nil {
					return err
				}
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer log.Sync()
			return runServer(cmd.Context(), c, log, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file with the same keys as these flags (flags win)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "UDP address to listen on")
	fs.StringVar(&c.Cert, "cert", c.Cert, "server certificate (PEM)")
	fs.StringVar(&c.Key, "key", c.Key, "server private key (PEM)")
	fs.StringVar(&c.ClientCA, "client-ca", c.ClientCA, "CA certificate(s) (PEM) that client certificates must be signed by")
	fs.StringSliceVar(&c.InnerPrefixes, "inner-prefix", c.InnerPrefixes, "pool of inner addresses, at most one IPv4 and one IPv6 prefix")
	fs.StringSliceVar(&c.Routes, "route", c.Routes, "prefix clients may reach (repeatable; required: the server is no open relay)")
	fs.StringVar(&c.TUN, "tun", c.TUN, "name of the TUN device to create")
	fs.IntVar(&c.MTU, "mtu", c.MTU, "inner MTU (1280-1400: a packet must fit one QUIC DATAGRAM)")
	fs.BoolVar(&c.FullPackets, "full-packets", c.FullPackets, "send QUIC packets of --mtu+42 bytes (path MTU discovery off) and ask clients for 20-byte connection IDs, so that MTU-sized tunnelled packets fill them and quic-go sends a burst with one GSO system call instead of one per packet (the tunnel's ceiling on a busy machine); the path must carry UDP payloads of --mtu+42 bytes (false: quic-go's defaults, 1350-byte first packets, discovery up to 1452)")
	fs.BoolVar(&c.NoRouting, "no-routing", c.NoRouting, "do not enable IP forwarding")
	fs.IntVar(&c.QueueLen, "queue-len", c.QueueLen, "downlink queue bound per session, in packets (0: 512, or 2048 with --pacer wave, which bounds its queue itself)")
	fs.IntVar(&c.MaxConnsPerClient, "max-conns-per-client", c.MaxConnsPerClient, "connections open at once per client certificate")
	fs.IntVar(&c.MaxSessions, "max-sessions", c.MaxSessions, "sessions open at once, all clients")
	fs.DurationVar(&c.AddressHold, "address-hold", c.AddressHold, "keep a client's inner addresses for it this long after its session ended, so that a redial gets them back (0: off)")
	fs.IntVar(&c.MaxHeldAddresses, "max-held-addresses", c.MaxHeldAddresses, "addresses held at most per pool; when full the hold expiring first goes (0: off)")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "address for Prometheus metrics at /metrics (empty: off)")
	fs.StringVar(&c.QlogDir, "qlog-dir", c.QlogDir, "write one qlog file per connection into this directory (empty: off)")
	fs.StringVar(&c.CPUProfile, "cpu-profile", "", "write a pprof CPU profile of the server's run to this file")
	fs.MarkHidden("cpu-profile")
	fs.StringVar(&c.TUNOffload, "tun-offload", c.TUNOffload, "TUN offloads (virtio-net header, TSO/USO, batches): auto (fall back to one packet per system call where the kernel refuses), on (fail instead), off")
	fs.StringVar(&c.Pacer, "pacer", c.Pacer, "downlink pacer per session: none (quic-go's own pacing only) or wave (QUIC Wave bursts, handover hints applied; experimental, see README)")
	fs.IntVar(&c.WaveBurst, "wave-burst", c.WaveBurst, "packets per Wave burst (with TxTime >= --wave-min-tx-time this bounds the rate: 10 packets per 1ms is ~100 Mbit/s)")
	fs.DurationVar(&c.WaveMinTxTime, "wave-min-tx-time", c.WaveMinTxTime, "floor of Wave's TxTime")
	fs.IntVar(&c.WaveMaxBurst, "wave-max-burst", c.WaveMaxBurst, "largest adaptive Wave burst in packets (the burst doubles from --wave-burst while TxTime is at its floor); equal to --wave-burst: fixed bursts")
	fs.IntVar(&c.WaveTrainDivisor, "wave-train-rtt-divisor", c.WaveTrainDivisor, "Wave bursts also grow while their ACK trains are noisy and shorter than min_rtt divided by this (1..1024; the trains then carry the hosts' millisecond timing noise as a small part; -1: off, bursts grow only at the TxTime floor)")
	fs.DurationVar(&c.WaveQueueWindow, "wave-queue-window", c.WaveQueueWindow, "the downlink queue is held at twice the bandwidth-delay estimate of the last --wave-queue-window (third largest of ten slots), so a capacity dip shorter than this does not drop the tunnelled TCP's window, at the price of a longer standing queue (10ms..1m; 1s buys more rate at about twice the delay; 0: the current estimate alone, the most delay-first)")
	fs.BoolVar(&c.WaveStartupRamp, "wave-startup-ramp", c.WaveStartupRamp, "until its first measured burst, Wave halves TxTime (from 200 ms) after each used-up burst window whose queue was still waiting, so that tunnelled TCPs in slow start are not held at its probe rate (false: Wave's published rule, 200 ms until measured)")
	fs.Float64Var(&c.WaveQueueBDP, "wave-queue-bdp", c.WaveQueueBDP, "the downlink queue in front of Wave holds this many bandwidth-delay estimates plus one offload batch (0.25..8); it can only lower --queue-len, which bounds it too")
	fs.DurationVar(&c.WaveQueueDelay, "wave-queue-delay", c.WaveQueueDelay, "on long paths the queue in front of Wave holds at most this much delay: --wave-queue-bdp estimates, lowered to this over min_rtt but not below half an estimate (what a tunnelled CUBIC's window cut needs to keep the link busy); 300ms keeps 2 estimates up to a 150 ms min_rtt and half of one at 600 ms (0: off, --wave-queue-bdp on every path)")
	return cmd
}

// check validates the configuration before anything is touched, naming
// the flag at fault.
func (c *serverConfig) check(log *zap.Logger) (tunnel.ServerConfig, error) {
	var sc tunnel.ServerConfig
	if c.Cert == "" || c.Key == "" || c.ClientCA == "" {
		return sc, errors.New("--cert, --key and --client-ca are required (m2ho keys makes them)")
	}
	crt, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return sc, fmt.Errorf("--cert/--key: %w", err)
	}
	pool, err := tunnel.LoadCertPool(c.ClientCA)
	if err != nil {
		return sc, fmt.Errorf("--client-ca: %w", err)
	}
	queueLen := c.QueueLen
	if queueLen == 0 {
		queueLen = defaultQueueLen(c.Pacer)
	}
	sc = tunnel.ServerConfig{Certificate: crt, ClientCAs: pool, MTU: c.MTU, NoFullPackets: !c.FullPackets, QueueLen: queueLen,
		MaxConnsPerClient: c.MaxConnsPerClient, MaxSessions: c.MaxSessions, QlogDir: c.QlogDir, Log: log,
		AddressHold: c.AddressHold, MaxHeldAddresses: c.MaxHeldAddresses}
	// 0 on the command line means off; in tunnel.ServerConfig it means the default.
	if c.AddressHold == 0 {
		sc.AddressHold = -1
	}
	if c.MaxHeldAddresses == 0 {
		sc.MaxHeldAddresses = -1
	}
	for _, s := range c.InnerPrefixes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return sc, fmt.Errorf("--inner-prefix %q: %v", s, err)
		}
		sc.InnerPrefixes = append(sc.InnerPrefixes, p)
	}
	if len(c.Routes) == 0 {
		return sc, errors.New("--route: at least one prefix: the server forwards only to configured routes")
	}
	for _, s := range c.Routes {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return sc, fmt.Errorf("--route %q: %v", s, err)
		}
		sc.Routes = append(sc.Routes, p)
	}
	switch {
	case c.QueueLen < 0:
		return sc, fmt.Errorf("--queue-len %d: must be positive (0: the default)", c.QueueLen)
	case c.MaxConnsPerClient < 1:
		return sc, fmt.Errorf("--max-conns-per-client %d: must be positive", c.MaxConnsPerClient)
	case c.MaxSessions < 1:
		return sc, fmt.Errorf("--max-sessions %d: must be positive", c.MaxSessions)
	case c.AddressHold < 0:
		return sc, fmt.Errorf("--address-hold %v: must not be negative (0 turns the holds off)", c.AddressHold)
	case c.MaxHeldAddresses < 0:
		return sc, fmt.Errorf("--max-held-addresses %d: must not be negative (0 turns the holds off)", c.MaxHeldAddresses)
	}
	if c.QlogDir != "" {
		if st, err := os.Stat(c.QlogDir); err != nil || !st.IsDir() {
			return sc, fmt.Errorf("--qlog-dir %q: not a directory", c.QlogDir)
		}
	}
	if _, err := tun.ParseOffloadMode(c.TUNOffload); err != nil {
		return sc, fmt.Errorf("--tun-offload: %w", err)
	}
	if _, err := c.pacers(log, &tunnel.ServerConfig{}); err != nil {
		return sc, err
	}
	return sc, nil
}

// pacers installs the --pacer's hooks in sc; nil for none.
func (c *serverConfig) pacers(log *zap.Logger, sc *tunnel.ServerConfig) (*wavePacers, error) {
	switch c.Pacer {
	case pacerNone:
		return nil, nil
	case pacerWave:
		if c.WaveBurst < 1 {
			return nil, fmt.Errorf("--wave-burst %d: must be positive", c.WaveBurst)
		}
		if c.WaveMinTxTime <= 0 {
			return nil, fmt.Errorf("--wave-min-tx-time %v: must be positive", c.WaveMinTxTime)
		}
		if c.WaveMaxBurst < c.WaveBurst {
			return nil, fmt.Errorf("--wave-max-burst %d: must be at least --wave-burst %d", c.WaveMaxBurst, c.WaveBurst)
		}
		if d := c.WaveTrainDivisor; d != -1 && (d < 1 || d > 1024) {
			return nil, fmt.Errorf("--wave-train-rtt-divisor %d: want 1..1024, or -1 (off)", d)
		}
		if w := c.WaveQueueWindow; w != 0 && (w < 10*time.Millisecond || w > time.Minute) {
			return nil, fmt.Errorf("--wave-queue-window %v: want 10ms..1m, or 0 (off)", w)
		}
		if q := c.WaveQueueBDP; !(q >= 0.25 && q <= 8) {
			return nil, fmt.Errorf("--wave-queue-bdp %v: want 0.25..8", q)
		}
		if d := c.WaveQueueDelay; d < 0 || d > time.Minute {
			return nil, fmt.Errorf("--wave-queue-delay %v: want 0 (off) ..1m", d)
		}
		wc := wave.DefaultConfig()
		wc.BurstPackets, wc.MinTxTime, wc.MaxBurstPackets = c.WaveBurst, c.WaveMinTxTime, c.WaveMaxBurst
		wc.TrainRTTDivisor, wc.QueueWindow, wc.QueueBDP = c.WaveTrainDivisor, c.WaveQueueWindow, c.WaveQueueBDP
		wc.StartupRampOff = !c.WaveStartupRamp
		if wc.QueueDelay = c.WaveQueueDelay; wc.QueueDelay == 0 {
			wc.QueueDelay = -1 // off
		}
		w, err := newWavePacers(wc, log.Named("wave"))
		if err != nil {
			return nil, fmt.Errorf("--wave-burst/--wave-max-burst/--wave-min-tx-time: %w", err)
		}
		w.install(sc)
		return w, nil
	}
	return nil, fmt.Errorf("--pacer %q: want %s or %s", c.Pacer, pacerWave, pacerNone)
}

func runServer(ctx context.Context, c serverConfig, log *zap.Logger, out interface{ Write([]byte) (int, error) }) error {
	sc, err := c.check(log)
	if err != nil {
		return err
	}
	waves, err := c.pacers(log, &sc)
	if err != nil {
		return err
	}
	// connect-ip-go logs every packet it drops through the standard
	// logger; a client sending spoofed packets must not flood the log. The
	// drops are counted (m2ho_tunnel_drops_total); the lines stay
	// available at --log-level debug.
	if restore, err := zap.RedirectStdLogAt(log.Named("connect-ip"), zapcore.DebugLevel); err == nil {
		defer restore()
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
	if _, err := net.InterfaceByName(c.TUN); err == nil {
		return fmt.Errorf("--tun %q: an interface of that name exists already (another m2ho server running?)", c.TUN)
	}
	offload, _ := tun.ParseOffloadMode(c.TUNOffload) // checked by check
	dev, note, err := tun.Open(tun.Config{Name: c.TUN, MTU: c.MTU, Offload: offload})
	if err != nil {
		return err
	}
	undo = append(undo, func() { dev.Close() })
	log.Info("TUN device", zap.String("name", dev.Name()), zap.String("tun_offload", offload.String()), zap.String("device", note))
	if waves != nil {
		fmt.Fprintf(out, "m2ho: pacer wave (bursts of %d packets, TxTime >= %v; quic-go's Reno and pacer underneath)\n", c.WaveBurst, c.WaveMinTxTime)
	} else {
		fmt.Fprintln(out, "m2ho: pacer none (quic-go's Reno and pacer only)")
	}
	srv, err := tunnel.NewServer(sc, dev)
	if err != nil {
		return err
	}
	for _, p := range srv.ServerAddrs() {
		if err := ipCmd("addr", "add", p.String(), "dev", dev.Name()); err != nil {
			return err
		}
	}
	if err := ipCmd("link", "set", dev.Name(), "up"); err != nil {
		return err
	}
	fmt.Fprintf(out, "m2ho: TUN %s (mtu %d) with %v: %s\n", dev.Name(), dev.MTU(), srv.ServerAddrs(), note)
	if !c.NoRouting {
		for _, k := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			prev, err := setSysctl(k, "1")
			if err != nil {
				if strings.Contains(k, "ipv6") && errors.Is(err, os.ErrNotExist) {
					continue
				}
				return err
			}
			undo = append(undo, func() {
				if _, err := setSysctl(k, prev); err != nil {
					log.Error("restoring sysctl", zap.String("key", k), zap.Error(err))
				}
			})
			fmt.Fprintf(out, "m2ho: configured: %s=1 (was %s)\n", k, prev)
		}
	}
	addr, err := srv.Listen(c.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(out, "m2ho: listening on %s (udp), routes %v\n", addr, c.Routes)
	if c.MetricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(&serverCollector{srv: srv})
		if waves != nil {
			reg.MustRegister(&waveCollector{w: waves})
		}
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			srv.Close()
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		hs := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln)
		undo = append(undo, func() { hs.Close() })
		fmt.Fprintf(out, "m2ho: metrics on http://%s/metrics\n", ln.Addr())
	}
	err = srv.Serve(ctx)
	srv.Close()
	dev.Close()
	srv.Wait()
	st := srv.Stats()
	fmt.Fprintf(out, "m2ho: server stopped: %d connection(s), %d session(s); up %d pkts, down %d pkts; dropped: spoofed %d, outside routes %d, queue %d, queue limit %d, uplink ring %d, quic datagram receive queue %d, http3 datagram queue %d, send errors %d; client migrations %d\n",
		st.ConnsAccepted, st.SessionsOpened, st.PacketsUp, st.PacketsDown, st.DropSpoofedSource, st.DropOutsideRoutes, st.DropQueueFull,
		st.DropQueueLimit, st.DropUpQueueFull, st.DropDatagramRecvQueue, st.DropH3DatagramQueue, st.DropSendError, st.PeerMigrations)
	return err
}

func ipCmd(args ...string) error {
	if b, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

// setSysctl writes v and returns the previous value.
func setSysctl(path, v string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	prev := strings.TrimSpace(string(b))
	if prev == v {
		return prev, nil
	}
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return prev, nil
}

// serverCollector exports the server's counters.
type serverCollector struct{ srv *tunnel.Server }

var (
	srvDescConns   = prometheus.NewDesc("m2ho_tunnel_connections_total", "QUIC connections by outcome (accepted, refused: over the per-client bound).", []string{"outcome"}, nil)
	srvDescSess    = prometheus.NewDesc("m2ho_tunnel_sessions_total", "CONNECT-IP sessions by outcome.", []string{"outcome"}, nil)
	srvDescOpen    = prometheus.NewDesc("m2ho_tunnel_sessions_open", "CONNECT-IP sessions open now.", nil, nil)
	srvDescPackets = prometheus.NewDesc("m2ho_tunnel_packets_total", "Packets forwarded by direction (up: client to TUN).", []string{"dir"}, nil)
	srvDescBytes   = prometheus.NewDesc("m2ho_tunnel_bytes_total", "Bytes forwarded by direction.", []string{"dir"}, nil)
	srvDescDrops   = prometheus.NewDesc("m2ho_tunnel_drops_total", "Packets dropped by reason.", []string{"reason"}, nil)
	srvDescPTB     = prometheus.NewDesc("m2ho_tunnel_packet_too_big_total", "ICMP Packet Too Big sent for oversize packets.", nil, nil)
	srvDescClamp   = prometheus.NewDesc("m2ho_tunnel_mss_clamped_total", "TCP SYNs whose MSS was clamped to the inner MTU.", nil, nil)
	srvDescHints   = prometheus.NewDesc("m2ho_tunnel_hints_total", "Hints received from phones by kind.", []string{"kind"}, nil)
	srvDescHintsX  = prometheus.NewDesc("m2ho_tunnel_hints_rejected_total", "Hints rejected (malformed, seq not increasing, too long).", nil, nil)
	srvDescMigr    = prometheus.NewDesc("m2ho_tunnel_peer_migrations_total", "Client connections that moved to a new address (QUIC connection migration).", nil, nil)
	srvDescResumed = prometheus.NewDesc("m2ho_tunnel_addresses_resumed_total", "Inner addresses given back to the client identity that held them (a redial).", nil, nil)
	srvDescSuperse = prometheus.NewDesc("m2ho_tunnel_sessions_superseded_total", "Sessions ended because a newer session of the same client took their addresses.", nil, nil)
	srvDescHeld    = prometheus.NewDesc("m2ho_tunnel_addresses_held", "Inner addresses held for clients without a session.", nil, nil)
)

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{srvDescConns, srvDescSess, srvDescOpen, srvDescPackets, srvDescBytes, srvDescDrops, srvDescPTB, srvDescClamp, srvDescHints, srvDescHintsX, srvDescMigr, srvDescResumed, srvDescSuperse, srvDescHeld} {
		ch <- d
	}
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	cnt := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	cnt(srvDescConns, st.ConnsAccepted, "accepted")
	cnt(srvDescConns, st.ConnsRefused, "refused")
	cnt(srvDescSess, st.SessionsOpened, "opened")
	cnt(srvDescSess, st.SessionsRefused, "refused")
	ch <- prometheus.MustNewConstMetric(srvDescOpen, prometheus.GaugeValue, float64(st.SessionsOpen))
	cnt(srvDescPackets, st.PacketsUp, "up")
	cnt(srvDescPackets, st.PacketsDown, "down")
	cnt(srvDescBytes, st.BytesUp, "up")
	cnt(srvDescBytes, st.BytesDown, "down")
	cnt(srvDescDrops, st.DropSpoofedSource, "spoofed-source")
	cnt(srvDescDrops, st.DropOutsideRoutes, "outside-routes")
	cnt(srvDescDrops, st.DropInvalid, "invalid")
	cnt(srvDescDrops, st.DropQueueFull, "queue-full")
	cnt(srvDescDrops, st.DropQueueLimit, "queue-limit")
	cnt(srvDescDrops, st.DropUpQueueFull, "up-ring-full")
	cnt(srvDescDrops, st.DropNoSession, "no-session")
	cnt(srvDescDrops, st.DropSendError, "send-error")
	cnt(srvDescDrops, st.DropDatagramRecvQueue, "quic-datagram-receive-queue")
	cnt(srvDescDrops, st.DropH3DatagramQueue, "h3-datagram-queue")
	cnt(srvDescPTB, st.PTBSent)
	cnt(srvDescClamp, st.MSSClamped)
	for _, k := range []tunnel.HintKind{tunnel.HintPredicted, tunnel.HintExecuted, tunnel.HintWithdrawn} {
		cnt(srvDescHints, st.Hints[k], k.String())
	}
	cnt(srvDescHintsX, st.HintsRejected)
	cnt(srvDescMigr, st.PeerMigrations)
	cnt(srvDescResumed, st.AddressesResumed)
	cnt(srvDescSuperse, st.SessionsSuperseded)
	ch <- prometheus.MustNewConstMetric(srvDescHeld, prometheus.GaugeValue, float64(st.AddressesHeld))
}

// structFields maps each YAML key (= flag name) of the struct c points to
// onto its field, in declaration order.
// Fields tagged yaml:"-" (flags without a YAML key) are left out.
func structFields(c any) ([]string, map[string]any) {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	var keys []string
	out := map[string]any{}
	for i := 0; i < t.NumField(); i++ {
		k := t.Field(i).Tag.Get("yaml")
		if k == "-" {
			continue
		}
		keys = append(keys, k)
		out[k] = v.Field(i).Addr().Interface()
	}
	return keys, out
}

// mergeYAMLFields fills the fields whose flag was not given from the
// file (the command line wins), naming file:line and the key on any
// error; an unknown key or one given twice is an error. It serves both
// `m2ho run --config` and `m2ho server --config`.
func mergeYAMLFields(keys []string, fields map[string]any, path string, fs *pflag.FlagSet) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: want a mapping of flag names to values", path, root.Line)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		dst, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("%s:%d: unknown key %q (keys are the flag names: %s)", path, k.Line, k.Value, strings.Join(keys, ", "))
		}
		if line, dup := seen[k.Value]; dup {
			return fmt.Errorf("%s:%d: key %q given twice (first at line %d)", path, k.Line, k.Value, line)
		}
		seen[k.Value] = k.Line
		if fs.Changed(k.Value) {
			continue
		}
		if err := v.Decode(dst); err != nil {
			msg := err.Error()
			if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
				msg = te.Errors[0]
				if j := strings.Index(msg, ": "); strings.HasPrefix(msg, "line ") && j > 0 {
					msg = msg[j+2:]
				}
			}
			return fmt.Errorf("%s:%d: %s: %s", path, v.Line, k.Value, msg)
		}
	}
	return nil
}

func mergeConfigYAML(c any, path string, fs *pflag.FlagSet) error {
	keys, fields := structFields(c)
	return mergeYAMLFields(keys, fields, path, fs)
}
