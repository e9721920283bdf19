package wave

import (
	"testing"
	"time"
)

// train step for an ATD: 5 frames → ATD = 4·step·5/4 = 5·step.
func stepFor(atd float64) float64 { return atd / 5 }

// TestATDFilterKeepsTheShortestTrain: tracking uses the smallest ATD of
// the last ATDWindow measured bursts, so one stretched train (a delayed
// ACK stamp) does not slow the next bursts; with ATDWindow 1 (Wave's
// published rule) it does.
func TestATDFilterKeepsTheShortestTrain(t *testing.T) {
	for _, tc := range []struct {
		window int
		want   float64 // TxTime after a 2 ms train, then a 10 ms train (ms)
	}{
		{1, 10},
		{DefaultATDWindow, 2},
	} {
		h := newHarness(t, Config{ATDWindow: tc.window})
		h.train(h.burst(0, 10), 50, stepFor(2))
		near(t, "TxTime after the 2 ms train", h.p.TxTime(), ms(2))
		// same pilot (50 ms after its burst): ΔRTT stays 0
		h.train(h.burst(100, 10), 150, stepFor(10))
		s := h.p.State()
		near(t, "TxTime", s.TxTime, ms(tc.want))
		near(t, "ATDLast", s.ATDLast, ms(10))
		if s.BurstsMeasured != 2 {
			t.Fatalf("window %d: measured %d, want 2", tc.window, s.BurstsMeasured)
		}
	}
}

// TestATDFilterWindowSlides: after ATDWindow longer trains the short one
// has left the window and TxTime follows the path's slower dispersion.
func TestATDFilterWindowSlides(t *testing.T) {
	h := newHarness(t, Config{ATDWindow: 3})
	h.train(h.burst(0, 10), 50, stepFor(2))
	at := 100.0
	for i, want := range []float64{2, 2, 6} {
		h.train(h.burst(at, 10), at+50, stepFor(6))
		at += 100
		near(t, "TxTime", h.p.TxTime(), ms(want))
		_ = i
	}
}

// TestATDFilterScalesWithBurstSize: the filter keeps dispersion per
// packet, so a partial burst and the current burst size compare.
func TestATDFilterScalesWithBurstSize(t *testing.T) {
	h := newHarness(t, Config{})
	// 5 of 10 released: 3 frames over 1 ms → ATD 1.5 ms for 5 packets,
	// 3 ms for a burst of 10
	first := h.burst(0, 5)
	h.ackUpTo(50, first+1)
	h.ackUpTo(50.5, first+3)
	h.ackUpTo(51, first+4)
	near(t, "ATD", h.p.State().ATD, ms(3))
	// a full burst with a 4 ms train: the partial one's 3 ms stays the min
	h.train(h.burst(100, 10), 150, stepFor(4))
	near(t, "ATD", h.p.State().ATD, ms(3))
}

// TestATDFilterForgetsOnRestart: an adjustment and an executed handover
// drop the filter's samples (they measured a path that is gone).
func TestATDFilterForgetsOnRestart(t *testing.T) {
	t.Run("handover", func(t *testing.T) {
		h := newHarness(t, Config{})
		h.train(h.burst(0, 10), 50, stepFor(2))
		if err := h.p.OnHandoverExecuted(t0.Add(ms(60)), "sub6", 0.5e6); err != nil {
			t.Fatal(err)
		}
		h.train(h.burst(100, 10), 150, stepFor(8))
		near(t, "TxTime", h.p.TxTime(), ms(8))
	})
	t.Run("adjustment", func(t *testing.T) {
		h := newHarness(t, Config{Beta: 10 * time.Millisecond})
		h.train(h.burst(0, 10), 50, stepFor(2))
		// pilot 100 ms against min_rtt 50: ΔRTT > β, adjustment
		h.train(h.burst(100, 10), 200, stepFor(2))
		if s := h.p.State(); s.Mode != ModeAdjustment {
			t.Fatalf("mode %v, want adjustment", s.Mode)
		}
		h.train(h.burst(300, 10), 350, stepFor(8))
		near(t, "TxTime", h.p.TxTime(), ms(8))
	})
}

// TestBurstGrowthNeedsItsOwnTrain: the burst doubles only when the
// burst's own train (not the filter's minimum, which may be one
// compressed train) says it drained faster than the floor allows.
func TestBurstGrowthNeedsItsOwnTrain(t *testing.T) {
	h := newHarness(t, Config{})
	// a compressed train: ATD 0.5 ms → doubled, TxTime 1 ms
	h.train(h.burst(0, 10), 50, stepFor(0.5))
	if s := h.p.State(); s.BurstPackets != 20 || s.BurstGrows != 1 {
		t.Fatalf("burst %d grows %d, want 20 1", s.BurstPackets, s.BurstGrows)
	}
	// a full 20-packet burst whose own train is 3 ms: the filter still
	// says 0.5 ms per 10 packets (1 ms for 20), at the floor, but this
	// train is above it: no second doubling
	h.trainN(h.burst(10, 20), 20, 60, 3.0/10)
	s := h.p.State()
	if s.BurstPackets != 20 || s.BurstGrows != 1 {
		t.Fatalf("burst %d grows %d after a train above the floor, want 20 1", s.BurstPackets, s.BurstGrows)
	}
	near(t, "TxTime", s.TxTime, ms(1))
}

func TestATDWindowConfig(t *testing.T) {
	if _, err := New(Config{ATDWindow: -1}); err == nil {
		t.Fatal("ATDWindow -1 accepted")
	}
	if _, err := New(Config{ATDWindow: 5000}); err == nil {
		t.Fatal("ATDWindow 5000 accepted")
	}
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Config().ATDWindow != DefaultATDWindow {
		t.Fatalf("default ATDWindow %d, want %d", p.Config().ATDWindow, DefaultATDWindow)
	}
}

// TestHeldLastAckTrimmed: the receiver's every-second-packet count is one
// out of step with the bursts, so the first frame of burst A acks one
// packet and A's last packet waits for B's first: the settling frame comes
// a TxTime later (10 ms) with B's packet as its largest. The train must
// end at the frame before, or the ATD measures the pacer's own interval
// (ATD 12 ms instead of 2 ms here; on the simulated 600 → 10 ms switch
// TxTime climbed from 2.2 to 19 ms that way).
func TestHeldLastAckTrimmed(t *testing.T) {
	h := newHarness(t, Config{InitialTxTime: 5 * time.Millisecond}) // B opens its own window
	a := h.burst(0, 10)                                             // pn 0..9
	b := h.burst(10, 10)                                            // pn 10..19
	h.ackUpTo(50, a)                                                // pn 0 alone
	for i := int64(1); i <= 4; i++ {
		h.ackUpTo(50+0.4*float64(i), a+2*i) // 2, 4, 6, 8: 0.2 ms per packet
	}
	h.ackUpTo(60, b) // A's 9 held until B's 10 arrived
	s := h.p.State()
	if s.BurstsMeasured != 1 || s.TrainsTrimmed != 1 {
		t.Fatalf("measured %d trimmed %d, want 1 1", s.BurstsMeasured, s.TrainsTrimmed)
	}
	// 1.6 ms from the first frame to the one before the held one, over
	// the 8 packets acked after the first frame: 0.2 ms per packet
	near(t, "ATD", s.ATD, ms(2))
	near(t, "TxTime", s.TxTime, ms(2))
}

// TestATDFilterIgnoresTwoCompressedTrains: once the filter holds 8 or
// more trains it uses the third smallest, so one or two compressed trains
// (ACK frames handled as a batch) do not speed the pacer past the path;
// a third one does (three in 16 is no longer an outlier).
func TestATDFilterIgnoresTwoCompressedTrains(t *testing.T) {
	for _, tc := range []struct {
		compressed int
		want       float64 // TxTime (ms)
	}{{0, 2}, {1, 2}, {2, 2}, {3, 0.5}} {
		h := newHarness(t, Config{MaxBurstPackets: DefaultBurstPackets})
		at := 0.0
		for i := range 12 {
			atd := 2.0
			if i >= 12-tc.compressed {
				atd = 0.5
			}
			h.train(h.burst(at, 10), at+50, stepFor(atd))
			at += 100
		}
		want := max(ms(tc.want), DefaultMinTxTime)
		near(t, "TxTime", h.p.TxTime(), want)
	}
}
