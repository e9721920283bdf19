package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/proxy/wave"
	"github.com/m2ho/m2ho/proxy/wave/quicwave"
)

// Pacer names for `m2ho server --pacer`.
const (
	pacerNone = "none" // quic-go's own NewReno and pacer only (tunnel.PassThrough)
	pacerWave = "wave" // QUIC Wave's burst pacer in front of SendDatagram, hints applied
)

// wavePacers makes the server's per-session Wave pacers (QUIC Wave; proxy/
// wave) and keeps their totals for the metrics. Each connection gets a
// quicwave.Trace in its context before the handshake (connContext); the
// server's tracer is wrapped so that quic-go's PacketSent / PacketReceived
// (ACK frames) / PacketLost events of that connection reach the Trace's
// event buffer (wrapTracer); the session's pacer drains that buffer each
// time the tunnel's sender loop asks it for a budget.
//
// The tunnel's sender loop (proxy/tunnel runSender) is the pump: it asks
// Budget how many queued packets may go, hands them to connect-ip-go's
// WritePacket (→ SendDatagram) and reports each with Sent. The packets
// released on one Budget answer are recorded at that answer's instant, so
// a burst released at once counts as one release (wave's burst window).
// quic-go's own NewReno and pacer still sit below SendDatagram: Wave
// decides what is handed over and when, quic-go may still delay it.
type wavePacers struct {
	cfg wave.Config
	mtu int
	log *zap.Logger

	mu   sync.Mutex
	live map[*wavePacer]struct{}
	gone wave.Counters // counters of pacers whose session ended

	noTrace atomic.Uint64 // sessions without a trace (fell back to none)
	applied [4]atomic.Uint64
	refused atomic.Uint64
}

func newWavePacers(cfg wave.Config, mtu int, log *zap.Logger) (*wavePacers, error) {
	if _, err := wave.New(cfg); err != nil {
		return nil, err
	}
	return &wavePacers{cfg: cfg, mtu: mtu, log: log, live: map[*wavePacer]struct{}{}}, nil
}

// install sets sc's hooks.
func (w *wavePacers) install(sc *tunnel.ServerConfig) {
	sc.ConnContext = func(ctx context.Context) context.Context {
		return quicwave.WithTrace(ctx, quicwave.NewTrace(wave.NewEvents(8192), nil, nil))
	}
	sc.WrapTracer = quicwave.Tracer
	sc.NewConnPacer = w.newConnPacer
}

func (w *wavePacers) newConnPacer(identity string, qc *quic.Conn) tunnel.Pacer {
	tr := quicwave.FromContext(qc.Context())
	p, err := wave.New(w.cfg)
	if tr == nil || err != nil {
		w.noTrace.Add(1)
		w.log.Error("wave pacer unavailable for this session: quic-go pacing only", zap.String("client", identity), zap.Bool("trace", tr != nil), zap.Error(err))
		return tunnel.PassThrough{}
	}
	wp := &wavePacer{set: w, p: p, ev: tr.Events(), id: identity}
	w.mu.Lock()
	w.live[wp] = struct{}{}
	w.mu.Unlock()
	go func() {
		<-qc.Context().Done()
		w.mu.Lock()
		delete(w.live, wp)
		wp.mu.Lock()
		addCounters(&w.gone, wp.p.State().Counters)
		wp.mu.Unlock()
		w.mu.Unlock()
	}()
	return wp
}

// totals sums the counters of every pacer so far, and the live pacers'
// states (for gauges).
func (w *wavePacers) totals() (c wave.Counters, live []wave.State) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c = w.gone
	for wp := range w.live {
		wp.mu.Lock()
		st := wp.p.State()
		wp.mu.Unlock()
		addCounters(&c, st.Counters)
		live = append(live, st)
	}
	return c, live
}

func addCounters(dst *wave.Counters, c wave.Counters) {
	dst.Bursts += c.Bursts
	dst.BurstsMeasured += c.BurstsMeasured
	dst.RecoveryUpdates += c.RecoveryUpdates
	dst.Adjustments += c.Adjustments
	dst.BurstsLossy += c.BurstsLossy
	dst.BurstsAppLimited += c.BurstsAppLimited
	dst.BurstsShortTrain += c.BurstsShortTrain
	dst.PacketsSent += c.PacketsSent
	dst.PacketsUnpaced += c.PacketsUnpaced
	dst.PacketsAcked += c.PacketsAcked
	dst.PacketsLost += c.PacketsLost
	dst.CapBlocked += c.CapBlocked
	dst.HintsPredicted += c.HintsPredicted
	dst.HintsExecuted += c.HintsExecuted
	dst.HintsWithdrawn += c.HintsWithdrawn
	dst.HintsInvalid += c.HintsInvalid
}

// wavePacer adapts one wave.Pacer to the tunnel's Pacer seam.
type wavePacer struct {
	set    *wavePacers
	id     string
	mu     sync.Mutex // Hint comes from the hints stream's goroutine
	p      *wave.Pacer
	ev     *wave.Events
	relNow time.Time // instant of the last budget that allowed packets
	// holdSince is when a new burst window could have opened with fewer
	// than a burst's packets queued (zero: not holding).
	holdSince time.Time
}

// burstHold is the longest a new burst waits for a full burst's packets
// (or TxTime, if shorter). Wave measures only bursts released at one
// instant; a TCP sender inside the tunnel hands its segments over one by
// one (the kernel paces them), so releasing each as it comes would make
// every burst "spread" (no ATD, no recovery update) and TxTime would stay
// at its initial 200 ms: 10 packets per 200 ms, ~0.5 Mbit/s, for good.
// Holding the window's start until a burst is queued (a slow-starting TCP
// fills one within a few ms) lets Wave measure; an application-limited
// flow waits at most burstHold per burst.
const burstHold = 5 * time.Millisecond

// Budget drains quic-go's events into the pacer and answers how many
// packets may go now; with none, how long until the next burst window (or
// a millisecond when only an ACK can lift the ŝ_max cap).
func (w *wavePacer) Budget(now time.Time, queued int) (int, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ev.DrainInto(w.p)
	packets, bytes := w.p.Budget(now)
	if packets > 0 {
		if full := w.p.Config().BurstPackets; packets == full && queued < full {
			if w.holdSince.IsZero() {
				w.holdSince = now
			}
			hold := min(w.p.TxTime(), burstHold)
			if held := now.Sub(w.holdSince); held < hold {
				return 0, hold - held
			}
		}
		w.holdSince = time.Time{}
		n := min(packets, queued)
		if bytes != math.MaxInt {
			// cwnd-like: go on while below the cap (overshoot < 1 packet).
			n = min(n, max(1, (bytes+w.set.mtu-1)/w.set.mtu))
		}
		w.relNow = now
		return n, 0
	}
	at, _ := w.p.Next(now)
	if at.IsZero() {
		return 0, time.Millisecond
	}
	return 0, max(at.Sub(now), 50*time.Microsecond)
}

// Sent records one released packet at its budget's instant.
func (w *wavePacer) Sent(now time.Time, size int) {
	w.mu.Lock()
	t := w.relNow
	if t.IsZero() {
		t = now
	}
	w.p.OnRelease(t, 1, size)
	w.mu.Unlock()
}

// Hint applies a phone's hint (already logged and counted by the tunnel
// server): predicted caps bytes in flight at ŝ_max, executed restarts the
// estimate from c_est, withdrawn lifts the cap. The effect is logged.
func (w *wavePacer) Hint(now time.Time, h tunnel.Hint) {
	w.mu.Lock()
	w.ev.DrainInto(w.p)
	var err error
	switch h.Kind {
	case tunnel.HintPredicted:
		err = w.p.OnHandoverPredicted(now, int(min(h.SMax, math.MaxInt32)))
	case tunnel.HintExecuted:
		err = w.p.OnHandoverExecuted(now, h.CellType.String(), h.CEst)
	case tunnel.HintWithdrawn:
		w.p.OnPredictionWithdrawn(now)
	default:
		err = fmt.Errorf("unknown hint kind %d", h.Kind)
	}
	st := w.p.State()
	w.mu.Unlock()
	if err != nil {
		w.set.refused.Add(1)
		w.set.log.Warn("wave: hint not applied", zap.String("client", w.id), zap.Stringer("kind", h.Kind), zap.Error(err))
		return
	}
	if int(h.Kind) < len(w.set.applied) {
		w.set.applied[h.Kind].Add(1)
	}
	w.set.log.Info("wave: hint applied", zap.String("client", w.id), zap.Stringer("kind", h.Kind),
		zap.Stringer("mode", st.Mode), zap.Duration("tx_time", st.TxTime), zap.Int("cap_bytes", st.CapBytes),
		zap.Int("in_flight", st.BytesInFlight), zap.Float64("hint_rate", st.HintRate))
}

// waveCollector exports the pacers' totals and the live sessions' TxTime.
type waveCollector struct{ w *wavePacers }

var (
	wvDescBursts = prometheus.NewDesc("m2ho_wave_bursts_total", "Wave bursts by outcome (opened, measured: gave an ATD, recovery: QUIC Wave recovery update, adjustment: ΔRTT > β reset, lossy, app-limited, short-train).", []string{"outcome"}, nil)
	wvDescPkts   = prometheus.NewDesc("m2ho_wave_packets_total", "Packets seen by the Wave pacers (sent: matched to a burst, unpaced, acked, lost).", []string{"event"}, nil)
	wvDescCap    = prometheus.NewDesc("m2ho_wave_cap_blocked_total", "Budget refusals by the ŝ_max cap of a predicted handover.", nil, nil)
	wvDescHints  = prometheus.NewDesc("m2ho_wave_hints_applied_total", "Hints applied to a Wave pacer by kind (refused: invalid for the pacer).", []string{"kind"}, nil)
	wvDescTx     = prometheus.NewDesc("m2ho_wave_tx_time_seconds", "Current TxTime of each live session's pacer (the interval between bursts).", []string{"session"}, nil)
	wvDescNo     = prometheus.NewDesc("m2ho_wave_sessions_without_trace_total", "Sessions that fell back to quic-go's pacing (no trace).", nil, nil)
)

func (c *waveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{wvDescBursts, wvDescPkts, wvDescCap, wvDescHints, wvDescTx, wvDescNo} {
		ch <- d
	}
}

func (c *waveCollector) Collect(ch chan<- prometheus.Metric) {
	t, live := c.w.totals()
	cnt := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	cnt(wvDescBursts, t.Bursts, "opened")
	cnt(wvDescBursts, t.BurstsMeasured, "measured")
	cnt(wvDescBursts, t.RecoveryUpdates, "recovery")
	cnt(wvDescBursts, t.Adjustments, "adjustment")
	cnt(wvDescBursts, t.BurstsLossy, "lossy")
	cnt(wvDescBursts, t.BurstsAppLimited, "app-limited")
	cnt(wvDescBursts, t.BurstsShortTrain, "short-train")
	cnt(wvDescPkts, t.PacketsSent, "sent")
	cnt(wvDescPkts, t.PacketsUnpaced, "unpaced")
	cnt(wvDescPkts, t.PacketsAcked, "acked")
	cnt(wvDescPkts, t.PacketsLost, "lost")
	cnt(wvDescCap, t.CapBlocked)
	for _, k := range []tunnel.HintKind{tunnel.HintPredicted, tunnel.HintExecuted, tunnel.HintWithdrawn} {
		cnt(wvDescHints, c.w.applied[k].Load(), k.String())
	}
	cnt(wvDescHints, c.w.refused.Load(), "refused")
	cnt(wvDescNo, c.w.noTrace.Load())
	for i, st := range live {
		ch <- prometheus.MustNewConstMetric(wvDescTx, prometheus.GaugeValue, st.TxTime.Seconds(), fmt.Sprint(i))
	}
}
