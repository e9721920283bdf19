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
	pacerNone = "none" // quic-go's own controller (CUBIC) and pacer only (tunnel.PassThrough)
	pacerWave = "wave" // QUIC Wave's burst pacer in front of SendDatagram, hints applied
)

// wavePacers makes the server's per-session Wave pacers (QUIC Wave; proxy/
// wave) and keeps their totals for the metrics. Each connection gets a
// quicwave.Trace in its context before the handshake (connContext); the
// server's tracer is wrapped so that quic-go's PacketSent / PacketReceived
// (ACK frames) / PacketLost events of that connection reach the Trace's
// event buffer (wrapTracer); the session's wave.Gate drains that buffer
// each time the tunnel's sender loop asks it for a budget.
//
// The tunnel's sender loop (proxy/tunnel runSender) is the pump: it asks
// Budget how many queued packets may go, hands them to connect-ip-go's
// WritePacket (→ SendDatagram) and reports each with Sent; the Gate
// records the packets released on one Budget answer as one release at
// that answer's instant (wave's burst window), and measures a burst that
// is the whole queue as a partial burst instead of holding it. Its
// QueueLimit (about twice Wave's BDP estimate) bounds the session's
// downlink queue (tunnel.QueueLimiter): Wave paces at about the
// bottleneck's rate, so the inner TCP would otherwise keep the whole
// static queue full. quic-go's own controller (CUBIC; NewReno only after a
// path migration) and pacer still sit below SendDatagram: Wave decides
// what is handed over and when, quic-go may still delay it.
type wavePacers struct {
	cfg wave.Config
	log *zap.Logger

	mu   sync.Mutex
	live map[*wavePacer]struct{}
	gone wave.Counters // counters of pacers whose session ended

	noTrace atomic.Uint64 // sessions without a trace (fell back to none)
	applied [4]atomic.Uint64
	refused atomic.Uint64
}

func newWavePacers(cfg wave.Config, log *zap.Logger) (*wavePacers, error) {
	if _, err := wave.New(cfg); err != nil {
		return nil, err
	}
	return &wavePacers{cfg: cfg, log: log, live: map[*wavePacer]struct{}{}}, nil
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
	wp := &wavePacer{set: w, g: wave.NewGate(p, tr.Events()), id: identity}
	w.mu.Lock()
	w.live[wp] = struct{}{}
	w.mu.Unlock()
	go func() {
		// one state line a second: TxTime and what it is made of
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for done := false; !done; {
			select {
			case <-qc.Context().Done():
				done = true
			case <-tk.C:
			}
			st := wp.g.State()
			w.log.Info("wave: state", zap.String("client", identity), zap.Stringer("mode", st.Mode),
				zap.Duration("tx_time", st.TxTime), zap.Int("burst_packets", st.BurstPackets),
				zap.Duration("atd", st.ATD), zap.Duration("atd_last", st.ATDLast),
				zap.Duration("min_rtt", st.MinRTT), zap.Duration("delta_rtt", st.DeltaRTT), zap.Duration("noise_floor", st.NoiseFloor),
				zap.Uint64("bursts", st.Counters.Bursts), zap.Uint64("bursts_measured", st.Counters.BurstsMeasured), zap.Uint64("recovery_updates", st.Counters.RecoveryUpdates),
				zap.Uint64("app_limited", st.Counters.BurstsAppLimited), zap.Uint64("short_train", st.Counters.BurstsShortTrain), zap.Uint64("lossy", st.Counters.BurstsLossy),
				zap.Uint64("startup_ramps", st.Counters.StartupRamps), zap.Uint64("hints_no_rate", st.Counters.HintsNoRate))
		}
		st := wp.g.State()
		w.mu.Lock()
		delete(w.live, wp)
		addCounters(&w.gone, st.Counters)
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
		st := wp.g.State()
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
	dst.BurstsPartial += c.BurstsPartial
	dst.BurstGrows += c.BurstGrows
	dst.BurstShrinks += c.BurstShrinks
	dst.StartupRamps += c.StartupRamps
	dst.PacketsSent += c.PacketsSent
	dst.PacketsUnpaced += c.PacketsUnpaced
	dst.PacketsAcked += c.PacketsAcked
	dst.PacketsLost += c.PacketsLost
	dst.CapBlocked += c.CapBlocked
	dst.HintsPredicted += c.HintsPredicted
	dst.HintsExecuted += c.HintsExecuted
	dst.HintsWithdrawn += c.HintsWithdrawn
	dst.HintsInvalid += c.HintsInvalid
	dst.HintsNoRate += c.HintsNoRate
	dst.TrainsTrimmed += c.TrainsTrimmed
}

// wavePacer adapts one wave.Gate (a wave.Pacer behind its sender-loop
// adapter) to the tunnel's Pacer seam, and applies the phone's hints.
type wavePacer struct {
	set *wavePacers
	id  string
	g   *wave.Gate
}

// Budget answers how many queued packets may go now; with none, how long
// until the next burst window (or wave.CapPoll when only an ACK can lift
// the ŝ_max cap). See wave.Gate.Budget.
func (w *wavePacer) Budget(now time.Time, queued int) (int, time.Duration) {
	return w.g.Budget(now, queued)
}

// Sent records one released packet as part of its budget's release.
func (w *wavePacer) Sent(now time.Time, size int) { w.g.Sent(now, size) }

// QueueLimit bounds the session's downlink queue (tunnel.QueueLimiter):
// see wave.Gate.QueueLimit; 0 until Wave has a BDP estimate.
func (w *wavePacer) QueueLimit() int { return w.g.QueueLimit() }

// Hint applies a phone's hint (already logged and counted by the tunnel
// server): predicted caps bytes in flight at ŝ_max, executed restarts the
// estimate from c_est, withdrawn lifts the cap. The effect is logged.
func (w *wavePacer) Hint(now time.Time, h tunnel.Hint) {
	var err error
	switch h.Kind {
	case tunnel.HintPredicted:
		err = w.g.HandoverPredicted(now, int(min(h.SMax, math.MaxInt32)))
	case tunnel.HintExecuted:
		err = w.g.HandoverExecuted(now, h.CellType.String(), h.CEst)
	case tunnel.HintWithdrawn:
		w.g.PredictionWithdrawn(now)
	default:
		err = fmt.Errorf("unknown hint kind %d", h.Kind)
	}
	if err != nil {
		w.set.refused.Add(1)
		w.set.log.Warn("wave: hint not applied", zap.String("client", w.id), zap.Stringer("kind", h.Kind), zap.Error(err))
		return
	}
	st := w.g.State()
	if int(h.Kind) < len(w.set.applied) {
		w.set.applied[h.Kind].Add(1)
	}
	w.set.log.Info("wave: hint applied", zap.String("client", w.id), zap.Stringer("kind", h.Kind),
		zap.Stringer("mode", st.Mode), zap.Duration("tx_time", st.TxTime), zap.Int("cap_bytes", st.CapBytes),
		zap.Int("in_flight", st.BytesInFlight), zap.Float64("hint_rate", st.HintRate), zap.Int("burst_packets", st.BurstPackets))
}

// waveCollector exports the pacers' totals and the live sessions' TxTime.
type waveCollector struct{ w *wavePacers }

var (
	wvDescBursts = prometheus.NewDesc("m2ho_wave_bursts_total", "Wave bursts by outcome (opened, measured: gave an ATD, partial: measured with fewer packets than the burst size, ATD scaled, recovery: QUIC Wave recovery update, adjustment: ΔRTT > β reset, lossy, app-limited, short-train).", []string{"outcome"}, nil)
	wvDescSize   = prometheus.NewDesc("m2ho_wave_burst_size_changes_total", "Changes of Wave's adaptive burst size (grow: doubled, TxTime at its floor; shrink: halved).", []string{"direction"}, nil)
	wvDescBurstN = prometheus.NewDesc("m2ho_wave_burst_packets", "Current burst size of each live session's pacer.", []string{"session"}, nil)
	wvDescPkts   = prometheus.NewDesc("m2ho_wave_packets_total", "Packets seen by the Wave pacers (sent: matched to a burst, unpaced, acked, lost).", []string{"event"}, nil)
	wvDescCap    = prometheus.NewDesc("m2ho_wave_cap_blocked_total", "Budget refusals by the ŝ_max cap of a predicted handover.", nil, nil)
	wvDescHints  = prometheus.NewDesc("m2ho_wave_hints_applied_total", "Hints applied to a Wave pacer by kind (refused: invalid for the pacer).", []string{"kind"}, nil)
	wvDescTx     = prometheus.NewDesc("m2ho_wave_tx_time_seconds", "Current TxTime of each live session's pacer (the interval between bursts).", []string{"session"}, nil)
	wvDescRamp   = prometheus.NewDesc("m2ho_wave_startup_ramps_total", "TxTime halvings of Wave's startup ramp (before the first measured burst, a used-up window whose queue was still waiting).", nil, nil)
	wvDescNo     = prometheus.NewDesc("m2ho_wave_sessions_without_trace_total", "Sessions that fell back to quic-go's pacing (no trace).", nil, nil)
)

func (c *waveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{wvDescBursts, wvDescSize, wvDescRamp, wvDescBurstN, wvDescPkts, wvDescCap, wvDescHints, wvDescTx, wvDescNo} {
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
	cnt(wvDescBursts, t.BurstsPartial, "partial")
	cnt(wvDescSize, t.BurstGrows, "grow")
	cnt(wvDescSize, t.BurstShrinks, "shrink")
	cnt(wvDescRamp, t.StartupRamps)
	cnt(wvDescBursts, t.RecoveryUpdates, "recovery")
	cnt(wvDescBursts, t.Adjustments, "adjustment")
	cnt(wvDescBursts, t.BurstsLossy, "lossy")
	cnt(wvDescBursts, t.BurstsAppLimited, "app-limited")
	cnt(wvDescBursts, t.BurstsShortTrain, "short-train")
	cnt(wvDescBursts, t.TrainsTrimmed, "train-trimmed")
	cnt(wvDescPkts, t.PacketsSent, "sent")
	cnt(wvDescPkts, t.PacketsUnpaced, "unpaced")
	cnt(wvDescPkts, t.PacketsAcked, "acked")
	cnt(wvDescPkts, t.PacketsLost, "lost")
	cnt(wvDescCap, t.CapBlocked)
	for _, k := range []tunnel.HintKind{tunnel.HintPredicted, tunnel.HintExecuted, tunnel.HintWithdrawn} {
		cnt(wvDescHints, c.w.applied[k].Load(), k.String())
	}
	cnt(wvDescHints, c.w.refused.Load(), "refused")
	cnt(wvDescHints, t.HintsNoRate, "executed-without-rate")
	cnt(wvDescNo, c.w.noTrace.Load())
	for i, st := range live {
		ch <- prometheus.MustNewConstMetric(wvDescTx, prometheus.GaugeValue, st.TxTime.Seconds(), fmt.Sprint(i))
		ch <- prometheus.MustNewConstMetric(wvDescBurstN, prometheus.GaugeValue, float64(st.BurstPackets), fmt.Sprint(i))
	}
}
