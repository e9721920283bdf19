package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy/tunnel"
)

// The phone side's tunnel pieces for `m2ho run`, ready for run.go once the
// engine's route seam (proxy.Sink / proxy.Source) is on main; see
// proxy/tunnel/README.md for the wiring.

// tunnelFlags are the flags `m2ho run` needs for quic and quic+m2ho flows
// (to be added to runConfig with these yaml keys).
type tunnelFlags struct {
	Server     string `yaml:"tunnel-server"`      // host:port of m2ho server
	ServerName string `yaml:"tunnel-server-name"` // name in its certificate (default: the host)
	CA         string `yaml:"tunnel-ca"`          // CA that signed the server's certificate
	Cert       string `yaml:"tunnel-cert"`        // this phone's client certificate
	Key        string `yaml:"tunnel-key"`         // and its key
	LocalAddr  string `yaml:"tunnel-local-addr"`  // uplink address to send from (default: any)
	QlogDir    string `yaml:"tunnel-qlog-dir"`
	NATHost    string // the tethered host the inner address stands for before it sent anything
	// CountDrops counts the DATAGRAMs quic-go drops on receipt too
	// (tunnel.ClientConfig.CountDrops: quic-go's qlog events without a
	// file, ~8 allocations per packet in quic-go), for the stop line and
	// metrics; http3's are counted without it.
	CountDrops bool `yaml:"tunnel-count-drops"`
	// HintRateWait: tunnel.ClientConfig.HintRateWait, except that 0
	// means no wait (the flag's 0), not the default.
	HintRateWait time.Duration
	// NoReaderYield: tunnel.ClientConfig.NoReaderYield (measurement only).
	NoReaderYield bool
	// NoRecvWait: tunnel.ClientConfig.NoRecvWait.
	NoRecvWait bool
	// NoFullPackets: tunnel.ClientConfig.NoFullPackets.
	NoFullPackets bool
}

// clientConfig checks the flags and loads the files, naming the flag at
// fault. NAT is on: the laptop's address is rewritten to the inner
// address the server assigns.
func (f tunnelFlags) clientConfig(log *zap.Logger) (tunnel.ClientConfig, error) {
	var cc tunnel.ClientConfig
	if f.Server == "" {
		return cc, errors.New("--tunnel-server: required for quic and quic+m2ho flows")
	}
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return cc, errors.New("--tunnel-ca, --tunnel-cert and --tunnel-key are required with --tunnel-server (m2ho keys makes them)")
	}
	pool, err := tunnel.LoadCertPool(f.CA)
	if err != nil {
		return cc, fmt.Errorf("--tunnel-ca: %w", err)
	}
	crt, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return cc, fmt.Errorf("--tunnel-cert/--tunnel-key: %w", err)
	}
	var hosts []netip.Addr
	if f.NATHost != "" {
		a, err := netip.ParseAddr(f.NATHost)
		if err != nil {
			return cc, fmt.Errorf("--tunnel-nat-host %q: %v", f.NATHost, err)
		}
		hosts = append(hosts, a)
	}
	return tunnel.ClientConfig{Server: f.Server, ServerName: f.ServerName, RootCAs: pool, Certificate: crt,
		LocalAddr: f.LocalAddr, NAT: true, NATHosts: hosts, QlogDir: f.QlogDir, CountDrops: f.CountDrops, HintRateWait: hintRateWait(f.HintRateWait), NoReaderYield: f.NoReaderYield, NoRecvWait: f.NoRecvWait, NoFullPackets: f.NoFullPackets, Log: log.Named("tunnel")}, nil
}

// hintRateWait maps the flag (0: no wait) to tunnel.ClientConfig's
// convention (0: the default, negative: no wait).
func hintRateWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// dialTunnel dials with a bounded wait, naming the flag on failure.
func (f tunnelFlags) dial(ctx context.Context, log *zap.Logger) (*tunnel.Client, error) {
	cc, err := f.clientConfig(log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := tunnel.Dial(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("--tunnel-server %s: %w", f.Server, err)
	}
	return c, nil
}

// hintForwarder is an m2ho.Observer that turns the controller's
// transitions into tunnel hints (proxy/tunnel/HINTS.md):
//
//	Stable or Smoothing -> Preparation   predicted (target's ŝ_max and type)
//	Preparation -> Smoothing             executed  (new cell's type, c_est)
//	Preparation -> Stable                withdrawn
//
// The controller's c_est is 0 at "executed" (it restarts its estimate at
// the random access, and it never sees the flows inside the tunnel): the
// tunnel client fills in the tunnel's own delivery rate on the new cell
// (tunnel.Client.SendHint, RateMeter), holding that hint up to
// HintRateWait.
//
// The controller calls observers under the engine's lock, so a hint is
// only queued here (bounded; a full queue drops and counts it) and run
// sends it. ctrlHint reads the controller's state; it is set once the
// controller exists (the controller calls Transition after updating it).
type hintForwarder struct {
	next     m2ho.Observer
	ctrlHint func() m2ho.Hint
	ch       chan tunnel.Hint
	dropped  atomic.Uint64
	log      *zap.Logger
}

func newHintForwarder(next m2ho.Observer, log *zap.Logger) *hintForwarder {
	return &hintForwarder{next: next, ch: make(chan tunnel.Hint, 64), log: log}
}

func (h *hintForwarder) Transition(now time.Time, from, to m2ho.State, why string) {
	h.next.Transition(now, from, to, why)
	var x tunnel.Hint
	var st m2ho.Hint
	if h.ctrlHint != nil {
		st = h.ctrlHint()
	}
	switch {
	case to == m2ho.Preparation:
		if st.SMax <= 0 {
			return // no budget to announce (the clamp is never 0)
		}
		x = tunnel.Hint{Kind: tunnel.HintPredicted, TargetCell: st.Target.ID, CellType: st.Target.Type, SMax: int64(st.SMax)}
	case from == m2ho.Preparation && to == m2ho.Smoothing:
		x = tunnel.Hint{Kind: tunnel.HintExecuted, TargetCell: st.Target.ID, CellType: st.Target.Type, CEst: st.CEst}
		if x.CellType == 0 {
			return // the hint needs the new cell's type
		}
	case from == m2ho.Preparation && to == m2ho.Stable:
		x = tunnel.Hint{Kind: tunnel.HintWithdrawn}
	default:
		return
	}
	select {
	case h.ch <- x:
	default:
		h.dropped.Add(1)
	}
}

func (h *hintForwarder) Prediction(now time.Time, o m2ho.PredictionOutcome) {
	h.next.Prediction(now, o)
}
func (h *hintForwarder) SignalLost(now time.Time)     { h.next.SignalLost(now) }
func (h *hintForwarder) SignalRestored(now time.Time) { h.next.SignalRestored(now) }
func (h *hintForwarder) SignalStale(now time.Time, late time.Duration) {
	h.next.SignalStale(now, late)
}
func (h *hintForwarder) SignalFresh(now time.Time) { h.next.SignalFresh(now) }

// run sends the queued hints until ctx ends.
func (h *hintForwarder) run(ctx context.Context, c interface{ SendHint(tunnel.Hint) error }) {
	for {
		select {
		case <-ctx.Done():
			return
		case x := <-h.ch:
			if err := c.SendHint(x); err != nil {
				h.log.Warn("hint not sent", zap.Stringer("kind", x.Kind), zap.Error(err))
			}
		}
	}
}
