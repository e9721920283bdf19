package wave

import "testing"

// resolutionRun measures `bursts` full bursts of the pacer's current size,
// one every 700 ms, each acked by frames of two packets starting rtt
// after it was sent, frame k of burst i at step[i%len(step)]·k: ATD per
// packet = step/2 whatever the burst size. It returns the burst size.
func resolutionRun(t *testing.T, cfg Config, rtt float64, steps []float64, bursts int) (*harness, int) {
	t.Helper()
	h := newHarness(t, cfg)
	for i := 0; i < bursts; i++ {
		at := float64(i) * 700
		n := h.p.State().BurstPackets
		first := h.burst(at, n)
		step := steps[i%len(steps)]
		for k := int64(0); k < int64(n/2); k++ {
			h.ackUpTo(at+rtt+float64(k)*step, first+2*k+1)
		}
	}
	return h, h.p.State().BurstPackets
}

// noisySteps are trains of 2.2-4.4 ms per 10 packets: a 2.16 ms burst
// (50 Mbit/s) stamped with about a millisecond of noise.
var noisySteps = []float64{0.44, 0.66, 0.88, 0.5, 0.75}

func TestResolutionGrowsNoisyShortTrains(t *testing.T) {
	h, n := resolutionRun(t, Config{TrainRTTDivisor: DefaultTrainRTTDivisor}, 600, noisySteps, 30)
	st := h.p.State()
	if n != DefaultMaxBurstPackets || st.BurstGrows != 4 {
		t.Fatalf("noisy 2-4 ms trains at 600 ms: burst %d after %d grows, want %d (train 32 ms < min_rtt/8 = 75 ms)", n, st.BurstGrows, DefaultMaxBurstPackets)
	}
	// the rate is kept: 0.22 ms per packet (the filter's third smallest:
	// its 16 trains hold 0.22 ms more than twice) times 128
	near(t, "TxTime", st.TxTime, ms(0.22*128))
	if _, off := resolutionRun(t, Config{TrainRTTDivisor: -1}, 600, noisySteps, 30); off != DefaultBurstPackets {
		t.Fatalf("rule off: burst %d, want %d", off, DefaultBurstPackets)
	}
}

func TestResolutionKeepsCleanTrains(t *testing.T) {
	if _, n := resolutionRun(t, Config{TrainRTTDivisor: DefaultTrainRTTDivisor}, 600, []float64{0.5}, 30); n != DefaultBurstPackets {
		t.Fatalf("identical 2.5 ms trains at 600 ms: burst %d, want %d (nothing to resolve)", n, DefaultBurstPackets)
	}
}

func TestResolutionNotAtLowRTT(t *testing.T) {
	// min_rtt 10 ms: the floor is 1.25 ms, below every train
	if _, n := resolutionRun(t, Config{TrainRTTDivisor: DefaultTrainRTTDivisor}, 10, noisySteps, 30); n != DefaultBurstPackets {
		t.Fatalf("noisy 2-4 ms trains at 10 ms: burst %d, want %d", n, DefaultBurstPackets)
	}
}

func TestResolutionShrinksWhenRTTFalls(t *testing.T) {
	h, n := resolutionRun(t, Config{TrainRTTDivisor: DefaultTrainRTTDivisor}, 600, noisySteps, 30)
	if n != DefaultMaxBurstPackets {
		t.Fatalf("setup: burst %d", n)
	}
	// a handover to a 10 ms path: one measured burst of 128 at the same
	// rate (32 ms train, shrink floor now 1.25 ms) halves the size in one
	// step down to where TxTime < 4·1.25 ms
	h.p.OnHandoverExecuted(t0.Add(ms(30*700)), "sub6", 0)
	at := float64(31 * 700)
	first := h.burst(at, h.p.State().BurstPackets)
	for k := int64(0); k < 64; k++ {
		h.ackUpTo(at+10+float64(k)*0.5, first+2*k+1)
	}
	if st := h.p.State(); st.BurstPackets >= DefaultMaxBurstPackets/2 {
		t.Fatalf("after the RTT fell to 10 ms: burst %d TxTime %v, want it shrunk to < 64 in one burst", st.BurstPackets, st.TxTime)
	}
}

func TestResolutionConfig(t *testing.T) {
	for _, d := range []int{-2, 1025} {
		if _, err := New(Config{TrainRTTDivisor: d}); err == nil {
			t.Fatalf("TrainRTTDivisor %d accepted", d)
		}
	}
	if p, _ := New(Config{}); p.Config().TrainRTTDivisor != DefaultTrainRTTDivisor {
		t.Fatalf("default %d", p.Config().TrainRTTDivisor)
	}
}
