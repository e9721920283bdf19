package main

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// observer logs one line per controller decision and keeps the tallies the
// metrics export: time in each state and prediction outcomes. The
// controller calls it under the engine's lock; metrics read it under mu.
type observer struct {
	log *zap.Logger

	mu          sync.Mutex
	state       m2ho.State
	since       time.Time
	inState     [3]time.Duration
	transitions [3]uint64 // entries into each state
	outcomes    map[string]uint64
	signalLost  bool
	signalStale bool
}

func newObserver(log *zap.Logger) *observer {
	return &observer{log: log, since: time.Now(), outcomes: map[string]uint64{}}
}

func (o *observer) Transition(now time.Time, from, to m2ho.State, why string) {
	o.mu.Lock()
	if int(from) < len(o.inState) {
		o.inState[from] += now.Sub(o.since)
	}
	o.state, o.since = to, now
	if int(to) < len(o.transitions) {
		o.transitions[to]++
	}
	o.mu.Unlock()
	o.log.Info("state", zap.Stringer("from", from), zap.Stringer("to", to), zap.String("why", why))
}

func (o *observer) Prediction(now time.Time, p m2ho.PredictionOutcome) {
	label := p.Kind.String()
	if p.Kind == m2ho.OutcomeWithdrawn {
		label += "-" + p.Reason.String()
	}
	o.mu.Lock()
	o.outcomes[label]++
	o.mu.Unlock()
	fields := []zap.Field{zap.String("outcome", label)}
	switch p.Kind {
	case m2ho.OutcomePredicted:
		fields = append(fields, zap.Stringer("type", p.Predicted), zap.String("target", p.Target.ID))
	case m2ho.OutcomeConfirmed:
		fields = append(fields, zap.Duration("lead", p.Lead), zap.Stringer("type", p.Actual))
	case m2ho.OutcomeUnpredicted:
		fields = append(fields, zap.Stringer("type", p.Actual))
	}
	o.log.Info("prediction", fields...)
}

func (o *observer) SignalLost(now time.Time) {
	o.mu.Lock()
	o.signalLost = true
	o.mu.Unlock()
	o.log.Warn("signalling lost: pass-through until the next event")
}

func (o *observer) SignalRestored(now time.Time) {
	o.mu.Lock()
	o.signalLost = false
	o.mu.Unlock()
	o.log.Info("signalling restored")
}

func (o *observer) SignalStale(now time.Time, late time.Duration) {
	o.mu.Lock()
	o.signalStale = true
	o.mu.Unlock()
	o.log.Warn("signalling stale: pass-through until events are fresh again", zap.Duration("late", late))
}

func (o *observer) SignalFresh(now time.Time) {
	o.mu.Lock()
	o.signalStale = false
	o.mu.Unlock()
	o.log.Info("signalling fresh again")
}

// collector exports the engine's counters and the controller's state as
// Prometheus metrics, read at scrape time (nothing on the packet path).
type collector struct {
	eng  *proxy.Engine
	ctrl *m2ho.Controller
	srv  *sigio.Server
	obs  *observer

	packets, bytes, rewrites, drops, unparseable, flows, evictions, unsafe       *prometheus.Desc
	state, stateSeconds, stateEntries, predictions, signalLost, events, badLines *prometheus.Desc
	signalStale, staleEvents, staleSpells                                        *prometheus.Desc
	sMax, cEst, answered                                                         *prometheus.Desc
}

func newCollector(eng *proxy.Engine, ctrl *m2ho.Controller, srv *sigio.Server, obs *observer) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("m2ho_"+name, help, labels, nil)
	}
	return &collector{
		eng: eng, ctrl: ctrl, srv: srv, obs: obs,
		packets:      d("packets_total", "Packets seen on the TUN, by direction.", "dir"),
		bytes:        d("bytes_total", "Bytes seen on the TUN, by direction.", "dir"),
		rewrites:     d("window_rewrites_total", "Uplink windows rewritten, by reason.", "reason"),
		drops:        d("ack_drops_total", "Uplink pure ACKs dropped, by reason.", "reason"),
		unparseable:  d("unparseable_packets_total", "Packets passed unchanged because they could not be parsed."),
		flows:        d("flows", "Flows in the flow table."),
		evictions:    d("flow_evictions_total", "Flows evicted because the table was full."),
		unsafe:       d("unsafe_verdicts_total", "Verdicts the packet path refused (the packet passed unchanged)."),
		state:        d("state", "1 for the controller's current state.", "state"),
		stateSeconds: d("state_seconds_total", "Time spent in each state.", "state"),
		stateEntries: d("state_entries_total", "Entries into each state.", "state"),
		predictions:  d("predictions_total", "Prediction outcomes.", "outcome"),
		signalLost:   d("signal_lost", "1 while signalling is lost and the proxy passes everything through."),
		signalStale:  d("signal_stale", "1 while signalling comes late (beyond --signal-stale) and the proxy passes everything through."),
		staleEvents:  d("signal_stale_events_total", "Signalling events that came later than --signal-stale beyond their writer's usual lag (not acted on)."),
		staleSpells:  d("signal_stale_spells_total", "Times the controller went to pass-through because signalling came late."),
		events:       d("signal_events_total", "Signalling events accepted on the socket."),
		badLines:     d("signal_bad_lines_total", "Malformed signalling lines answered with an error."),
		sMax:         d("smax_bytes", "Clamp budget (target cell's estimated buffer) while in Preparation."),
		cEst:         d("cest_bytes_per_second", "Delivery rate estimate c_est."),
		answered: d("report_answered_share", "Share of the reports of a kind, sent from a data cell of a type, that the network answered with a handover command before their deadline (decayed over about 16, Laplace-smoothed); under 0.2 no prediction resting only on that kind clamps (--answer-rates).",
			"report", "serving"),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.packets, c.bytes, c.rewrites, c.drops, c.unparseable, c.flows, c.evictions, c.unsafe,
		c.state, c.stateSeconds, c.stateEntries, c.predictions, c.signalLost, c.signalStale, c.staleEvents, c.staleSpells,
		c.events, c.badLines, c.sMax, c.cEst, c.answered} {
		ch <- d
	}
}

var reasonNames = [proxy.NumReasons]string{"none", "preparation", "stable-rate", "smoothing", "release"}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.eng.Stats()
	var hint m2ho.Hint
	var stale bool
	var staleEvents, staleSpells uint64
	c.eng.Do(func() {
		hint = c.ctrl.Hint()
		stale, staleEvents, staleSpells = c.ctrl.StaleSignal()
	})
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(c.packets, s.Uplink.Packets, "uplink")
	counter(c.packets, s.Downlink.Packets, "downlink")
	counter(c.bytes, s.Uplink.Bytes, "uplink")
	counter(c.bytes, s.Downlink.Bytes, "downlink")
	for i := 1; i < proxy.NumReasons; i++ {
		counter(c.rewrites, s.RewritesBy[i], reasonNames[i])
		counter(c.drops, s.DropsBy[i], reasonNames[i])
	}
	counter(c.unparseable, s.Unparseable)
	gauge(c.flows, float64(s.Flows))
	counter(c.evictions, s.Evictions)
	counter(c.unsafe, s.UnsafeVerdicts)

	c.obs.mu.Lock()
	in := c.obs.inState
	if int(c.obs.state) < len(in) {
		in[c.obs.state] += time.Since(c.obs.since)
	}
	entries := c.obs.transitions
	outcomes := make(map[string]uint64, len(c.obs.outcomes))
	for k, v := range c.obs.outcomes {
		outcomes[k] = v
	}
	lost := c.obs.signalLost
	c.obs.mu.Unlock()
	for _, st := range []m2ho.State{m2ho.Stable, m2ho.Preparation, m2ho.Smoothing} {
		v := 0.0
		if hint.State == st {
			v = 1
		}
		gauge(c.state, v, st.String())
		ch <- prometheus.MustNewConstMetric(c.stateSeconds, prometheus.CounterValue, in[st].Seconds(), st.String())
		counter(c.stateEntries, entries[st], st.String())
	}
	for k, v := range outcomes {
		counter(c.predictions, v, k)
	}
	b := 0.0
	if lost || hint.PassThrough && !stale {
		b = 1
	}
	gauge(c.signalLost, b)
	b = 0
	if stale {
		b = 1
	}
	gauge(c.signalStale, b)
	counter(c.staleEvents, staleEvents)
	counter(c.staleSpells, staleSpells)
	ss := c.srv.Stats()
	counter(c.events, uint64(ss.Events))
	counter(c.badLines, uint64(ss.Errors))
	gauge(c.sMax, float64(hint.SMax))
	gauge(c.cEst, hint.CEst)
	for _, a := range c.ctrl.AnswerCounts() {
		gauge(c.answered, a.Share(), a.Report.String(), a.Serving.String())
	}
}
