package wave

import (
	"testing"
	"time"
)

// Startup ramp (see "Startup ramp" in the package comment): before the
// first measurement a used-up window whose queue was still waiting at its
// end halves TxTime, down to MinTxTime.
func TestStartupRampHalvesWhileBacklogged(t *testing.T) {
	h := newHarness(t, Config{})
	at, want := 0.0, 200*time.Millisecond
	h.burst(at, 10)
	for i := 0; i < 10; i++ {
		at += float64(h.p.TxTime()) / float64(time.Millisecond) // the window's end: the queue was waiting
		h.burst(at, 10)
		want = max(want/2, time.Millisecond)
		if got := h.p.TxTime(); got != want {
			t.Fatalf("window %d at %.4f ms: TxTime %v, want %v", i+2, at, got, want)
		}
	}
	s := h.p.State()
	if s.Mode != ModeInitial || s.StartupRamps != 8 {
		t.Fatalf("mode %v, %d ramps; want initial, 8 (200 ms to the 1 ms floor)", s.Mode, s.StartupRamps)
	}
}

func TestStartupRampNeedsWaitingQueue(t *testing.T) {
	for _, c := range []struct {
		name  string
		first int     // datagrams in the first window
		next  float64 // ms of the next release
	}{
		{"window not used up", 9, 200},
		{"flow paused past half a TxTime", 10, 301},
	} {
		h := newHarness(t, Config{})
		h.burst(0, c.first)
		h.burst(c.next, 10)
		if s := h.p.State(); s.TxTime != 200*time.Millisecond || s.StartupRamps != 0 {
			t.Errorf("%s: TxTime %v, %d ramps; want 200ms, 0", c.name, s.TxTime, s.StartupRamps)
		}
	}
	// Within half a TxTime of the window's end still counts as waiting
	// (a loaded host's loop runs late).
	h := newHarness(t, Config{})
	h.burst(0, 10)
	h.burst(299, 10)
	if got := h.p.TxTime(); got != 100*time.Millisecond {
		t.Errorf("release 99 ms after the window's end: TxTime %v, want 100ms", got)
	}
}

func TestStartupRampOff(t *testing.T) {
	h := newHarness(t, Config{StartupRampOff: true})
	h.burst(0, 10)
	h.burst(200, 10)
	h.burst(400, 10)
	if s := h.p.State(); s.TxTime != 200*time.Millisecond || s.StartupRamps != 0 {
		t.Fatalf("StartupRampOff: TxTime %v, %d ramps; want 200ms, 0 (Wave's published rule)", s.TxTime, s.StartupRamps)
	}
}

// Once a burst is measured the rate is tracking's: back-to-back full
// windows leave it alone, and so does adjustment (the path said its queue
// is over β).
func TestStartupRampEndsAtMeasurement(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2) // tracking, TxTime 10 ms
	h.burst(200, 10)
	h.burst(210, 10)
	h.burst(220, 10)
	if s := h.p.State(); s.Mode != ModeTracking || s.StartupRamps != 0 {
		t.Fatalf("tracking: mode %v, %d ramps; want tracking, 0", s.Mode, s.StartupRamps)
	}
	near(t, "TxTime in tracking", h.p.TxTime(), ms(10))

	h = newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2)
	h.train(h.burst(200, 10), 1000, 2)
	late := h.burst(1001, 10)
	h.train(late, 1801, 2) // ΔRTT > β: adjustment, TxTime 200 ms
	if s := h.p.State(); s.Mode != ModeAdjustment {
		t.Fatalf("mode %v, want adjustment", s.Mode)
	}
	h.burst(1900, 10)
	h.burst(2100, 10)
	h.burst(2300, 10)
	if s := h.p.State(); s.TxTime != 200*time.Millisecond || s.StartupRamps != 0 {
		t.Fatalf("adjustment: TxTime %v, %d ramps; want 200ms, 0", s.TxTime, s.StartupRamps)
	}
}

// TestStartupRampInnerSlowStart: an inner TCP in slow start through Wave
// at high BDP (bench high-bdp: 50 Mbit/s, 600 ms, 4 MB; the tunnel queue
// bounded at Wave's BDP estimate, as on the server), under the ACK-train
// noise models of jitter_test.go. Under the receiver-stall model the
// first ACK trains cannot be measured and Wave stays at its probe rate
// (10 packets per 200 ms) for 1.6 s; without the ramp the inner TCP's
// segments queue in front of it for whole rounds, and the minimum of a
// round's first 8 RTT samples, what Linux's HyStart compares with
// min_rtt + 16 ms (at 600 ms) to end slow start, stood 85 ms above the
// path at a window of 78 segments: the real stack's early exits
// (session 11's high-bdp runs, 100-200 KB of a 3.75 MB BDP). With the
// ramp it stays within 16 ms, as quic-go's controller does in the same
// model.
func TestStartupRampInnerSlowStart(t *testing.T) {
	C := 50 * mbit
	steps := []rateStep{{0, C, 300 * time.Millisecond}}
	const hystartThreshold = 16 * time.Millisecond // clamp(600 ms/8, 4 ms, 16 ms)
	noises := append([]noise{{"none", func(*tsim) {}}}, trainNoises...)
	for _, nz := range noises {
		worst := map[string]time.Duration{}
		for _, v := range []struct {
			name string
			snd  func() tunSender
		}{
			{"quic", func() tunSender { return newRenoSender() }},
			{"wave", func() tunSender { return newWaveSender(t, Config{}) }},
			{"wave without ramp", func() tunSender { return newWaveSender(t, Config{StartupRampOff: true}) }},
		} {
			s := newTsim(t, steps, 4<<20, v.snd(), true)
			_, s.bdpQueue = s.snd.(*waveSender)
			s.hsWatchBelow = 300 // before the inner window itself fills a fifth of the path
			nz.set(s)
			s.run(4 * time.Second)
			worst[v.name] = s.hsWorst
			t.Logf("%-6s %-17s HyStart's round minimum at most %v above min_rtt (cwnd %.0f); cwnd at 4 s %.0f%s",
				nz.name, v.name, s.hsWorst.Round(10*time.Microsecond), s.hsWorstCwnd, s.cwnd, waveTail(s))
		}
		if w := worst["wave"]; w > hystartThreshold {
			t.Errorf("%s: with the ramp a round's first RTT samples stood %v above min_rtt, want <= %v (HyStart would end slow start)", nz.name, w, hystartThreshold)
		}
		if w := worst["quic"]; w > hystartThreshold {
			t.Errorf("%s: quic-go's controller alone gives %v, want <= %v: the model no longer separates the pacer's delay from the inner TCP's own", nz.name, w, hystartThreshold)
		}
		if nz.name == "stall" && worst["wave without ramp"] <= hystartThreshold {
			t.Errorf("stall without the ramp: %v; the test no longer shows what the ramp is for", worst["wave without ramp"])
		}
	}
}
