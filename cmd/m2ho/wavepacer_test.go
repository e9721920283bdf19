package main

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/proxy/wave"
	"github.com/m2ho/m2ho/signaling"
)

func newTestWavePacer(t *testing.T) (*wavePacers, *wavePacer) {
	t.Helper()
	set, err := newWavePacers(wave.DefaultConfig(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	p, err := wave.New(set.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return set, &wavePacer{set: set, g: wave.NewGate(p, wave.NewEvents(64)), id: "phone-1"}
}

// The adapter on the tunnel's Pacer seam: a burst of 10 at once, then a
// wait of the initial TxTime; a predicted handover caps what may be in
// flight, a withdrawal lifts the cap, an executed handover restarts TxTime
// from c_est; each applied hint is counted.
func TestWavePacerAdapter(t *testing.T) {
	set, w := newTestWavePacer(t)
	t0 := time.Unix(1000, 0)
	// Fewer than a burst queued: no burst-fill hold (wave.Gate), they go
	// at once as a partial burst.
	_, w2 := newTestWavePacer(t)
	if n, wait := w2.Budget(t0, 3); n != 3 || wait != 0 {
		t.Fatalf("3 queued: %d, %v; want all 3 now", n, wait)
	}
	// No BDP estimate yet: the static queue bound stays.
	if l := w.QueueLimit(); l != 0 {
		t.Fatalf("QueueLimit before any ACK %d, want 0", l)
	}
	var _ tunnel.QueueLimiter = w
	n, wait := w.Budget(t0, 25)
	if n != 10 || wait != 0 {
		t.Fatalf("first budget %d, %v; want a burst of 10 now", n, wait)
	}
	for i := range n {
		// Sent comes a little later each time: the release instant is the
		// budget's, so the burst is one release, not ten.
		w.Sent(t0.Add(time.Duration(i)*time.Microsecond), 1280)
	}
	if c := w.g.State().Counters; c.Bursts != 1 || c.ReleaseOverrun != 0 {
		t.Fatalf("counters after one burst: %+v", c)
	}
	n, wait = w.Budget(t0.Add(time.Millisecond), 15)
	if n != 0 || wait != wave.DefaultInitialTxTime-time.Millisecond {
		t.Fatalf("budget inside the window: %d, %v; want 0 and the rest of 200ms", n, wait)
	}
	// Predicted: ŝ_max 3000 bytes, 12800 already released: capped.
	w.Hint(t0.Add(2*time.Millisecond), tunnel.Hint{Kind: tunnel.HintPredicted, SMax: 3000, CellType: signaling.CellMmWave})
	n, wait = w.Budget(t0.Add(300*time.Millisecond), 15)
	if n != 0 || wait != time.Millisecond {
		t.Fatalf("capped budget %d, %v; want 0 and a 1ms poll", n, wait)
	}
	w.Hint(t0.Add(301*time.Millisecond), tunnel.Hint{Kind: tunnel.HintWithdrawn})
	if n, _ = w.Budget(t0.Add(302*time.Millisecond), 15); n != 10 {
		t.Fatalf("after withdrawal %d, want a burst of 10", n)
	}
	for range n {
		w.Sent(t0.Add(303*time.Millisecond), 1280)
	}
	// Executed at 1.35 MB/s: a burst of 10 × 1350 bytes takes 10 ms.
	w.Hint(t0.Add(310*time.Millisecond), tunnel.Hint{Kind: tunnel.HintExecuted, CellType: signaling.CellMmWave, CEst: 1.35e6})
	if tx := w.g.State().TxTime; tx != 10*time.Millisecond {
		t.Fatalf("TxTime after the executed hint %v, want 10ms", tx)
	}
	if n, _ = w.Budget(t0.Add(311*time.Millisecond), 15); n != 10 {
		t.Fatalf("after the executed hint %d, want a new burst at once", n)
	}
	// An invalid hint is refused and counted, not applied.
	w.Hint(t0.Add(312*time.Millisecond), tunnel.Hint{Kind: tunnel.HintPredicted, SMax: 0})
	for k, want := range map[tunnel.HintKind]uint64{tunnel.HintPredicted: 1, tunnel.HintWithdrawn: 1, tunnel.HintExecuted: 1} {
		if got := set.applied[k].Load(); got != want {
			t.Errorf("%v applied %d, want %d", k, got, want)
		}
	}
	if set.refused.Load() != 1 {
		t.Errorf("refused %d, want 1", set.refused.Load())
	}
}

// The adaptive burst's counters reach the metrics (finished and live
// sessions summed), with each live session's burst size; --wave-max-burst
// reaches wave.Config.MaxBurstPackets.
func TestWaveCollectorBurstCounters(t *testing.T) {
	set, w := newTestWavePacer(t)
	set.gone = wave.Counters{BurstsPartial: 2, BurstGrows: 3, BurstShrinks: 1, StartupRamps: 4}
	set.live[w] = struct{}{}
	t0 := time.Unix(1000, 0)
	if n, _ := w.Budget(t0, 3); n != 3 {
		t.Fatalf("budget %d, want 3", n)
	}
	for range 3 {
		w.Sent(t0, 1280)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&waveCollector{w: set})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range m.GetLabel() {
				k += "{" + l.GetValue() + "}"
			}
			if c := m.GetCounter(); c != nil {
				got[k] = c.GetValue()
			} else {
				got[k] = m.GetGauge().GetValue()
			}
		}
	}
	for k, want := range map[string]float64{
		"m2ho_wave_bursts_total{partial}":            2,
		"m2ho_wave_burst_size_changes_total{grow}":   3,
		"m2ho_wave_burst_size_changes_total{shrink}": 1,
		"m2ho_wave_startup_ramps_total":              4,
		"m2ho_wave_burst_packets{0}":                 float64(wave.DefaultBurstPackets),
		"m2ho_wave_bursts_total{opened}":             1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}

	c := defaultServerConfig()
	var sc tunnel.ServerConfig
	c.Pacer = pacerWave
	if wp, err := c.pacers(zap.NewNop(), &sc); err != nil || wp.cfg.StartupRampOff || wp.cfg.QueueWindow != 200*time.Millisecond || wp.cfg.QueueDelay != 300*time.Millisecond {
		t.Fatalf("default server config: %v, StartupRampOff %v, QueueWindow %v; want the startup ramp on, a 200 ms queue window and a 300 ms queue delay cap (%v)", err, wp != nil && wp.cfg.StartupRampOff, wp.cfg.QueueWindow, wp.cfg.QueueDelay)
	}
	c.Pacer, c.WaveMaxBurst, c.WaveTrainDivisor, c.WaveQueueWindow, c.WaveQueueBDP, c.WaveQueueDelay = pacerWave, 40, -1, 2*time.Second, 0.5, 0
	c.WaveStartupRamp = false
	wp, err := c.pacers(zap.NewNop(), &sc)
	if err != nil {
		t.Fatal(err)
	}
	if wp.cfg.MaxBurstPackets != 40 || sc.NewConnPacer == nil {
		t.Fatalf("MaxBurstPackets %d, want 40 (--wave-max-burst)", wp.cfg.MaxBurstPackets)
	}
	if wp.cfg.QueueWindow != 2*time.Second {
		t.Fatalf("QueueWindow %v, want 2s (--wave-queue-window)", wp.cfg.QueueWindow)
	}
	if wp.cfg.TrainRTTDivisor != -1 {
		t.Fatalf("TrainRTTDivisor %d, want -1 (--wave-train-rtt-divisor)", wp.cfg.TrainRTTDivisor)
	}
	if wp.cfg.QueueBDP != 0.5 {
		t.Fatalf("QueueBDP %v, want 0.5 (--wave-queue-bdp)", wp.cfg.QueueBDP)
	}
	if wp.cfg.QueueDelay != -1 {
		t.Fatalf("QueueDelay %v, want -1 (--wave-queue-delay 0: off)", wp.cfg.QueueDelay)
	}
	if !wp.cfg.StartupRampOff {
		t.Fatal("StartupRampOff false, want true (--wave-startup-ramp=false)")
	}
}
