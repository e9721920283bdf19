package main

import (
	"bufio"
	"io"
	"math"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	zapobs "go.uber.org/zap/zaptest/observer"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy"
	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
	"github.com/m2ho/m2ho/tun"
)

// parseMetrics reads the Prometheus text format into name{labels} -> value.
func parseMetrics(t testing.TB, r io.Reader) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMetricsFollowTheEngine drives the engine and controller the way
// runDaemon wires them (packets through Engine.Process, events through
// Engine.Do) on virtual time, and checks that every exported series
// moves as the packets and events say: packets by direction, rewrites and
// drops by reason, state and entries, predictions by outcome, flows,
// signal loss; and that the log has one line per state change.
func TestMetricsFollowTheEngine(t *testing.T) {
	core, logs := zapobs.New(zap.InfoLevel)
	log := zap.New(core)
	obs := newObserver(log)
	ctrl := m2ho.New(m2ho.Config{Observer: obs, SignalLoss: time.Second, StableRate: m2ho.ToggleOff})
	laptop := netip.MustParseAddrPort("10.77.1.2:40000")
	server := netip.MustParseAddrPort("10.77.2.2:443")
	eng := proxy.NewEngine(proxy.EngineConfig{
		TetherPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.1.0/24")},
		DefaultMode:    proxy.ModeM2HO,
	}, tun.NewChannelTUN(1500, 8), ctrl, log)
	srv, err := sigio.Listen(t.TempDir()+"/s.sock", func(signaling.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(eng, ctrl, srv, obs))
	scrape := func() map[string]float64 {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return parseMetrics(t, rec.Body)
	}

	now := time.Now()
	event := func(ev signaling.Event) {
		ev.Time = now
		eng.Do(func() { ctrl.OnEvent(now, &ev) })
	}
	up := func(ack uint32, win uint16) bool {
		return eng.Process(now, packettest.TCP{Src: laptop, Dst: server, Seq: 1001, Ack: ack, Flags: packettest.ACK, Window: win}.Build())
	}
	down := func(seq uint32, n int) {
		if !eng.Process(now, packettest.TCP{Src: server, Dst: laptop, Seq: seq, Ack: 1001, Flags: packettest.ACK, Window: 500, Payload: make([]byte, n)}.Build()) {
			t.Fatal("a downlink segment was dropped")
		}
	}
	// Handshake with window scale 7 on both sides.
	eng.Process(now, packettest.TCP{Src: laptop, Dst: server, Seq: 1000, Flags: packettest.SYN, Window: 65535, MSS: 1460, HasWScale: true, WScale: 7}.Build())
	eng.Process(now, packettest.TCP{Src: server, Dst: laptop, Seq: 5000, Ack: 1001, Flags: packettest.SYN | packettest.ACK, Window: 65535, MSS: 1460, HasWScale: true, WScale: 7}.Build())

	m := scrape()
	if m["m2ho_signal_lost"] != 1 || m[`m2ho_state{state="stable"}`] != 1 || m["m2ho_flows"] != 1 {
		t.Errorf("before any event: signal_lost %v, stable %v, flows %v; want 1, 1, 1", m["m2ho_signal_lost"], m[`m2ho_state{state="stable"}`], m["m2ho_flows"])
	}

	cell88 := signaling.Cell{ID: "88", Type: signaling.CellSub6}
	cell393 := signaling.Cell{ID: "393", Type: signaling.CellSub6}
	event(signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasPeriodic, Serving: cell88})
	seq := uint32(5001)
	for i := 0; i < 10; i++ {
		down(seq, 1400)
		seq += 1400
		now = now.Add(time.Millisecond)
	}
	up(seq, 20000) // 2.56 MB window: above any clamp

	event(signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3, Serving: cell88, Neighbor: cell393})
	m = scrape()
	if m[`m2ho_state{state="preparation"}`] != 1 || m["m2ho_smax_bytes"] != m2ho.DefaultSMax || m[`m2ho_predictions_total{outcome="predicted"}`] != 1 {
		t.Errorf("after A3: preparation %v, smax %v, predicted %v", m[`m2ho_state{state="preparation"}`], m["m2ho_smax_bytes"], m[`m2ho_predictions_total{outcome="predicted"}`])
	}
	if !up(seq, 20000) {
		t.Fatal("an ACK was dropped in Preparation")
	}
	if m = scrape(); m[`m2ho_window_rewrites_total{reason="preparation"}`] != 1 {
		t.Errorf("rewrites{preparation} = %v after one ACK in Preparation", m[`m2ho_window_rewrites_total{reason="preparation"}`])
	}

	event(signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOIntraNR, Serving: cell88, Target: cell393})
	event(signaling.Event{Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess})
	// A duplicate ACK below what was sent before the command: dropped.
	if up(seq-1400, 20000) {
		t.Error("a duplicate ACK in Smoothing was forwarded")
	}
	m = scrape()
	if m[`m2ho_state{state="smoothing"}`] != 1 || m[`m2ho_ack_drops_total{reason="smoothing"}`] != 1 || m[`m2ho_predictions_total{outcome="confirmed"}`] != 1 {
		t.Errorf("in Smoothing: state %v, drops %v, confirmed %v", m[`m2ho_state{state="smoothing"}`], m[`m2ho_ack_drops_total{reason="smoothing"}`], m[`m2ho_predictions_total{outcome="confirmed"}`])
	}
	// The ACK for everything sent before the command releases Smoothing's
	// hold on this flow, and is forwarded, with the clamp (it holds
	// through Smoothing).
	if !up(seq, 20000) {
		t.Error("the releasing ACK was dropped")
	}

	now = now.Add(200 * time.Millisecond)
	eng.Do(func() { ctrl.Tick(now) }) // past the smoothing bound
	now = now.Add(2 * time.Second)
	eng.Do(func() { ctrl.Tick(now) }) // past the signal timeout
	m = scrape()
	for k, want := range map[string]float64{
		`m2ho_packets_total{dir="uplink"}`:                 5,
		`m2ho_packets_total{dir="downlink"}`:               11,
		`m2ho_state{state="stable"}`:                       1,
		`m2ho_state_entries_total{state="preparation"}`:    1,
		`m2ho_state_entries_total{state="smoothing"}`:      1,
		`m2ho_state_entries_total{state="stable"}`:         1,
		`m2ho_ack_drops_total{reason="smoothing"}`:         1,
		`m2ho_window_rewrites_total{reason="preparation"}`: 2,
		`m2ho_unsafe_verdicts_total`:                       0,
		`m2ho_signal_lost`:                                 1,
		`m2ho_flows`:                                       1,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if m[`m2ho_bytes_total{dir="downlink"}`] < 10*1400 {
		t.Errorf("downlink bytes %v < the payload sent", m[`m2ho_bytes_total{dir="downlink"}`])
	}
	if n := logs.FilterMessage("state").Len(); n != 3 {
		t.Errorf("%d state log lines for 3 state changes: %v", n, logs.All())
	}
	if logs.FilterMessage("signalling lost: pass-through until the next event").Len() != 1 {
		t.Errorf("signal loss not logged once: %v", logs.All())
	}
}

// Stale signalling shows in its own gauge and counters, not as lost
// signalling, and is logged when it begins and ends.
func TestMetricsSignalStale(t *testing.T) {
	core, logs := zapobs.New(zap.InfoLevel)
	obs := newObserver(zap.New(core))
	ctrl := m2ho.New(m2ho.Config{Observer: obs})
	eng := proxy.NewEngine(proxy.EngineConfig{TetherPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.1.0/24")}},
		tun.NewChannelTUN(1500, 8), ctrl, zap.New(core))
	scrape := scraper(t, eng, ctrl, obs)
	t0 := time.Now()
	slot := func(arrive, stamp time.Duration) {
		ev := signaling.Event{Kind: signaling.KindMACSlot, Time: t0.Add(stamp).Round(0), Serving: signaling.Cell{ID: "88", Type: signaling.CellSub6}}
		eng.Do(func() { ctrl.OnEvent(t0.Add(arrive), &ev) })
	}
	slot(0, 0)
	slot(time.Second, 500*time.Millisecond) // 500 ms late
	slot(time.Second+time.Millisecond, 501*time.Millisecond)
	m := scrape()
	for k, want := range map[string]float64{
		"m2ho_signal_stale": 1, "m2ho_signal_stale_events_total": 2, "m2ho_signal_stale_spells_total": 1, "m2ho_signal_lost": 0,
	} {
		if m[k] != want {
			t.Errorf("while stale: %s = %v, want %v", k, m[k], want)
		}
	}
	for ms := 1100; ms <= 1400; ms += 10 {
		slot(time.Duration(ms)*time.Millisecond, time.Duration(ms-1)*time.Millisecond)
	}
	m = scrape()
	if m["m2ho_signal_stale"] != 0 || m["m2ho_signal_stale_events_total"] != 2 || m["m2ho_signal_lost"] != 0 {
		t.Errorf("fresh again: stale %v events %v lost %v", m["m2ho_signal_stale"], m["m2ho_signal_stale_events_total"], m["m2ho_signal_lost"])
	}
	if logs.FilterMessage("signalling stale: pass-through until events are fresh again").Len() != 1 ||
		logs.FilterMessage("signalling fresh again").Len() != 1 {
		t.Errorf("stale spell not logged once each way: %v", logs.All())
	}
}

// The learned answer rates (--answer-rates) are exported per kind of
// report and data cell type.
func TestMetricsAnswerShare(t *testing.T) {
	obs := newObserver(zap.NewNop())
	ctrl := m2ho.New(m2ho.Config{Observer: obs, SMaxDB: m2ho.NewSMaxDB()})
	eng := proxy.NewEngine(proxy.EngineConfig{TetherPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.1.0/24")}},
		tun.NewChannelTUN(1500, 8), ctrl, zap.NewNop())
	scrape := scraper(t, eng, ctrl, obs)
	t0 := time.Now()
	a2 := signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA2, Serving: signaling.Cell{ID: "524", Type: signaling.CellMmWave}}
	eng.Do(func() {
		ctrl.OnEvent(t0, &a2)
		ctrl.Tick(t0.Add(3 * time.Second)) // expired: unanswered
	})
	m := scrape()
	// One unanswered: (0+1)/(0+1+2).
	if got := m[`m2ho_report_answered_share{report="nr-a2",serving="mmwave"}`]; math.Abs(got-1.0/3) > 1e-9 {
		t.Errorf("answered share of nr-a2 from mmwave %v, want 1/3 (metrics %v)", got, m)
	}
}

// scraper registers the collector of eng and ctrl (with a signalling
// socket of its own) and returns a function that scrapes it.
func scraper(t *testing.T, eng *proxy.Engine, ctrl *m2ho.Controller, obs *observer) func() map[string]float64 {
	t.Helper()
	srv, err := sigio.Listen(t.TempDir()+"/s.sock", func(signaling.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(eng, ctrl, srv, obs))
	return func() map[string]float64 {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return parseMetrics(t, rec.Body)
	}
}
