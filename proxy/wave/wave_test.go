package wave

import (
	"errors"
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// harness drives a Pacer on virtual time with 1250-byte packets, one
// datagram per QUIC packet, packet numbers from 0.
type harness struct {
	t  *testing.T
	p  *Pacer
	pn int64
}

// The harness's trains are short against its RTTs by construction (10 ms
// trains at 100 ms): the train-resolution floor (min_rtt/8) would grow
// every burst. It is off here unless a test sets it; its own tests do.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.TrainRTTDivisor == 0 {
		cfg.TrainRTTDivisor = -1
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, p: p}
}

const size = 1250

// burst releases and sends n packets at ms `at`; returns the first pn.
func (h *harness) burst(at float64, n int) int64 {
	now := t0.Add(ms(at))
	first := h.pn
	h.p.OnRelease(now, n, n*size)
	for i := 0; i < n; i++ {
		h.p.OnSent(now, h.pn, size, 1)
		h.pn++
	}
	return first
}

// ackUpTo sends one cumulative ACK frame [0, largest] at ms `at`.
func (h *harness) ackUpTo(at float64, largest int64) {
	h.p.OnAck(t0.Add(ms(at)), []AckRange{{0, largest}})
}

// train acks a 10-packet burst starting at pn first with 5 frames, two
// packets each, at at, at+step, ... (the quic-go receiver acks every
// second ack-eliciting packet).
func (h *harness) train(first int64, at, step float64) {
	for i := int64(0); i < 5; i++ {
		h.ackUpTo(at+float64(i)*step, first+2*i+1)
	}
}

func near(t *testing.T, name string, got, want time.Duration) {
	t.Helper()
	if d := got - want; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func TestInitialState(t *testing.T) {
	h := newHarness(t, Config{})
	s := h.p.State()
	if s.Mode != ModeInitial || s.TxTime != 200*time.Millisecond {
		t.Fatalf("initial mode %v TxTime %v, want initial 200ms", s.Mode, s.TxTime)
	}
	// Nothing open: a full burst may go at once.
	if n, b := h.p.Budget(t0); n != 10 || b != math.MaxInt {
		t.Fatalf("Budget = %d, %d; want 10, MaxInt", n, b)
	}
	h.burst(0, 10)
	// The window is used up until 0 + 200 ms.
	if n, _ := h.p.Budget(t0.Add(ms(199))); n != 0 {
		t.Fatalf("Budget inside a full window = %d, want 0", n)
	}
	if at, n := h.p.Next(t0.Add(ms(1))); !at.Equal(t0.Add(ms(200))) || n != 10 {
		t.Fatalf("Next = %v, %d; want t0+200ms, 10", at.Sub(t0), n)
	}
	if n, _ := h.p.Budget(t0.Add(ms(200))); n != 10 {
		t.Fatalf("Budget at the window's end = %d, want 10", n)
	}
}

func TestInitialToTracking(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.burst(0, 10)
	// ACK frames at 100, 102, ..., 108 ms, two packets each.
	h.train(first, 100, 2)
	s := h.p.State()
	// ATD = (108 − 100)·5/4 = 10 ms; pilot = 100 ms (pn 1 sent at 0,
	// acked at 100) = min_rtt, so α = 0, avg_rtt = 100 ms, ΔRTT = 0;
	// TxTime = 10 + 0/2 = 10 ms.
	if s.Mode != ModeTracking {
		t.Fatalf("mode %v, want tracking", s.Mode)
	}
	near(t, "ATD", s.ATD, ms(10))
	near(t, "PilotRTT", s.PilotRTT, ms(100))
	near(t, "MinRTT", s.MinRTT, ms(100))
	near(t, "AvgRTT", s.AvgRTT, ms(100))
	near(t, "DeltaRTT", s.DeltaRTT, 0)
	near(t, "TxTime", s.TxTime, ms(10))
	if s.BurstsMeasured != 1 || s.BytesInFlight != 0 || s.LiveBursts != 0 {
		t.Fatalf("measured %d inflight %d live %d, want 1 0 0", s.BurstsMeasured, s.BytesInFlight, s.LiveBursts)
	}
	// The new TxTime applies to the open window: next burst at 0 + 10 ms.
	if at, _ := h.p.Next(t0.Add(ms(1))); !at.Equal(t0.Add(ms(10))) {
		t.Fatalf("Next = %v, want t0+10ms", at.Sub(t0))
	}

	// Second burst at 200 ms meets 20 ms of queue: frames at 320..328.
	first = h.burst(200, 10)
	h.train(first, 320, 2)
	s = h.p.State()
	// pilot = 120 ms; α = (120 − 100)/120 = 1/6;
	// avg_rtt = 100/6 + 120·5/6 = 116.667 ms; ΔRTT = 16.667 ms;
	// ATD = 10 ms; TxTime = 10 + 8.333 = 18.333 ms.
	near(t, "PilotRTT", s.PilotRTT, ms(120))
	if math.Abs(s.Alpha-1.0/6) > 1e-9 {
		t.Errorf("Alpha = %v, want 1/6", s.Alpha)
	}
	near(t, "AvgRTT", s.AvgRTT, ms(116.666667))
	near(t, "DeltaRTT", s.DeltaRTT, ms(16.666667))
	near(t, "TxTime", s.TxTime, ms(18.333333))
	near(t, "MinRTT", s.MinRTT, ms(100))
}

func TestTrackingFloor(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.burst(0, 10)
	// All five frames 0.1 ms apart: ATD = 0.4·5/4 = 0.5 ms < 1 ms floor.
	h.train(first, 50, 0.1)
	if s := h.p.State(); s.TxTime != time.Millisecond || s.Mode != ModeTracking {
		t.Fatalf("TxTime %v mode %v, want the 1 ms floor in tracking", s.TxTime, s.Mode)
	}
}

func TestTrackingToAdjustment(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2) // min_rtt = avg_rtt = 100 ms, TxTime 10 ms
	// A burst with pilot 800 ms (≤ 10·min_rtt: a valid sample):
	// α = 700/800 = 0.875; avg = 0.875·100 + 0.125·800 = 187.5 ms;
	// ΔRTT = 87.5 ms ≤ β; TxTime = 10 + 43.75 = 53.75 ms.
	h.train(h.burst(200, 10), 1000, 2)
	s := h.p.State()
	near(t, "AvgRTT", s.AvgRTT, ms(187.5))
	near(t, "TxTime", s.TxTime, ms(53.75))
	if s.Mode != ModeTracking {
		t.Fatalf("mode %v, want tracking", s.Mode)
	}
	late := h.burst(1001, 10)
	// Another pilot of 800 ms: avg = 0.875·187.5 + 100 = 264.0625 ms;
	// ΔRTT = 164.0625 ms > β = 150 ms: adjustment.
	before := h.p.State()
	h.train(late, 1801, 2)
	s = h.p.State()
	if s.Adjustments != 1 || s.Mode != ModeAdjustment {
		t.Fatalf("adjustments %d mode %v, want 1 adjustment (avg was %v)", s.Adjustments, s.Mode, before.AvgRTT)
	}
	if s.TxTime != 200*time.Millisecond || s.MinRTT != 0 || s.LiveBursts != 0 {
		t.Fatalf("after adjustment TxTime %v min_rtt %v live %d; want 200ms, forgotten, 0", s.TxTime, s.MinRTT, s.LiveBursts)
	}
	if s.AvgRTT != s.SmoothedRTT || s.AvgRTT == 0 {
		t.Fatalf("avg_rtt %v, want the smoothed RTT %v", s.AvgRTT, s.SmoothedRTT)
	}
}

func TestAdjustmentDropsBurstRecords(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2)
	h.train(h.burst(200, 10), 1000, 2) // avg 187.5 ms
	a := h.burst(1001, 10)             // pilot 800 → adjustment
	b := h.burst(1060, 10)             // in flight during the adjustment
	h.train(a, 1801, 2)
	if s := h.p.State(); s.Adjustments != 1 || s.BurstsDropped != 1 || s.BytesInFlight != 10*size {
		t.Fatalf("adjustments %d dropped %d inflight %d; want 1, 1 (burst b), %d", s.Adjustments, s.BurstsDropped, s.BytesInFlight, 10*size)
	}
	// b's ACK train arrives: its packets leave the flight but give no sample.
	h.train(b, 1900, 2)
	s := h.p.State()
	if s.BytesInFlight != 0 || s.BurstsMeasured != 3 || s.Mode != ModeAdjustment || s.TxTime != 200*time.Millisecond {
		t.Fatalf("inflight %d measured %d mode %v TxTime %v; want 0, 3, adjustment, 200ms", s.BytesInFlight, s.BurstsMeasured, s.Mode, s.TxTime)
	}
	// min_rtt was forgotten: b's samples (840..848 ms) set it anew although
	// they are far above the 100 ms known before.
	near(t, "MinRTT", s.MinRTT, ms(840))
}

func TestMinRTTForgottenThenRelearned(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2)
	h.train(h.burst(200, 10), 1000, 2)
	h.train(h.burst(1001, 10), 1801, 2) // adjustment
	// The path now has a 300 ms RTT. First burst after: frames 300..308.
	h.train(h.burst(2000, 10), 2300, 2)
	s := h.p.State()
	// min_rtt = 300 ms (not the old 100); pilot 300: α = 0, avg = 300,
	// ΔRTT = 0; TxTime = ATD = 10 ms.
	near(t, "MinRTT", s.MinRTT, ms(300))
	near(t, "AvgRTT", s.AvgRTT, ms(300))
	near(t, "TxTime", s.TxTime, ms(10))
	if s.Mode != ModeTracking {
		t.Fatalf("mode %v, want tracking", s.Mode)
	}
}

func TestRTTSampleFilter(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2) // min_rtt 100 ms
	srtt := h.p.State().SmoothedRTT
	// One lone packet acked after 1001 ms > 10·100 ms: ignored for min_rtt,
	// the smoothed RTT and latest RTT, but the packet is acknowledged.
	pn := h.burst(2000, 1)
	h.ackUpTo(3001, pn)
	s := h.p.State()
	if s.SamplesFiltered != 1 || s.BytesInFlight != 0 {
		t.Fatalf("filtered %d inflight %d, want 1, 0", s.SamplesFiltered, s.BytesInFlight)
	}
	near(t, "MinRTT", s.MinRTT, ms(100))
	near(t, "LatestRTT", s.LatestRTT, ms(108)) // the last accepted sample
	if s.SmoothedRTT != srtt {
		t.Fatalf("smoothed RTT moved to %v on a filtered sample", s.SmoothedRTT)
	}
	// Exactly 10·min_rtt is accepted.
	pn = h.burst(4000, 1)
	h.ackUpTo(5000, pn)
	if s := h.p.State(); s.SamplesFiltered != 1 || s.LatestRTT != time.Second {
		t.Fatalf("filtered %d latest %v, want 1, 1s", s.SamplesFiltered, s.LatestRTT)
	}
}

func TestRecoveryMode(t *testing.T) {
	h := newHarness(t, Config{})
	// One ACK frame covers the whole first burst: no dispersion.
	h.ackUpTo(100, h.burst(0, 10)+9)
	s := h.p.State()
	// rtt = 100 ms = min_rtt: α = 0, avg = 100, ΔRTT = 0, d_rtt = 0;
	// TxTime = 0.4·200 + 0.2·0 = 80 ms.
	if s.Mode != ModeRecovery || s.RecoveryUpdates != 1 {
		t.Fatalf("mode %v recoveries %d, want recovery, 1", s.Mode, s.RecoveryUpdates)
	}
	near(t, "TxTime", s.TxTime, ms(80))
	// Next burst at 200 ms, acked whole at 330 ms: rtt 130 ms, d_rtt 30;
	// α = 30/130; avg = (30/130)·100 + (100/130)·130 = 123.077 ms;
	// TxTime = 0.4·80 + 0.2·30 = 38 ms.
	h.ackUpTo(330, h.burst(200, 10)+9)
	s = h.p.State()
	near(t, "TxTime", s.TxTime, ms(38))
	near(t, "AvgRTT", s.AvgRTT, ms(123.076923))
	near(t, "DeltaRTT", s.DeltaRTT, ms(23.076923))
	// Two bursts covered by one frame: one recovery update per frame.
	h.burst(400, 10)
	h.burst(440, 10) // the window is 38 ms: a new burst
	h.ackUpTo(540, h.pn-1)
	s = h.p.State()
	// rtt = 540 − 440 = 100 ms (largest packet): d_rtt = 0;
	// TxTime = 0.4·38 = 15.2 ms.
	if s.RecoveryUpdates != 3 {
		t.Fatalf("recoveries %d, want 3 (one per frame)", s.RecoveryUpdates)
	}
	near(t, "TxTime", s.TxTime, ms(15.2))
}

func TestRecoveryToAdjustment(t *testing.T) {
	h := newHarness(t, Config{})
	h.ackUpTo(100, h.burst(0, 10)+9) // min = avg = 100 ms
	// rtt 900 ms: α = 800/900; avg = (8/9)·100 + (1/9)·900 = 188.9 ms;
	// ΔRTT = 88.9. Then rtt 1000 ms: α = 0.9; avg = 0.9·188.9 + 100 = 270 ms;
	// ΔRTT = 170 ms > β: adjustment.
	h.ackUpTo(1100, h.burst(200, 10)+9)
	near(t, "AvgRTT", h.p.State().AvgRTT, ms(188.888889))
	h.ackUpTo(2300, h.burst(1300, 10)+9)
	if s := h.p.State(); s.Mode != ModeAdjustment || s.TxTime != 200*time.Millisecond || s.MinRTT != 0 {
		t.Fatalf("mode %v TxTime %v min %v, want adjustment, 200ms, 0", s.Mode, s.TxTime, s.MinRTT)
	}
}

func TestNoSampleBursts(t *testing.T) {
	t.Run("two frames", func(t *testing.T) {
		h := newHarness(t, Config{})
		first := h.burst(0, 10)
		h.ackUpTo(100, first+4)
		h.ackUpTo(104, first+9)
		s := h.p.State()
		if s.BurstsShortTrain != 1 || s.Mode != ModeInitial || s.TxTime != 200*time.Millisecond {
			t.Fatalf("short %d mode %v TxTime %v", s.BurstsShortTrain, s.Mode, s.TxTime)
		}
	})
	t.Run("lossy", func(t *testing.T) {
		h := newHarness(t, Config{})
		first := h.burst(0, 10)
		h.p.OnLost(t0.Add(ms(150)), first+3)
		h.p.OnAck(t0.Add(ms(100)), []AckRange{{first, first + 1}})
		h.p.OnAck(t0.Add(ms(102)), []AckRange{{first + 4, first + 5}, {first, first + 2}})
		h.p.OnAck(t0.Add(ms(104)), []AckRange{{first + 4, first + 7}, {first, first + 2}})
		h.p.OnAck(t0.Add(ms(106)), []AckRange{{first + 4, first + 9}, {first, first + 2}})
		s := h.p.State()
		if s.BurstsLossy != 1 || s.BurstsMeasured != 0 || s.TxTime != 200*time.Millisecond || s.LiveBursts != 0 || s.BytesInFlight != 0 {
			t.Fatalf("lossy %d measured %d TxTime %v live %d inflight %d", s.BurstsLossy, s.BurstsMeasured, s.TxTime, s.LiveBursts, s.BytesInFlight)
		}
	})
	t.Run("partial in one frame", func(t *testing.T) {
		// a partial burst acked by one frame is not QUIC Wave's recovery
		// situation (the burst was not of the pacer's size)
		h := newHarness(t, Config{})
		first := h.burst(0, 6)
		h.ackUpTo(100, first+5)
		s := h.p.State()
		if s.BurstsAppLimited != 1 || s.RecoveryUpdates != 0 || s.Mode != ModeInitial {
			t.Fatalf("app-limited %d recovery %d mode %v", s.BurstsAppLimited, s.RecoveryUpdates, s.Mode)
		}
		near(t, "MinRTT", s.MinRTT, ms(100)) // still an RTT sample
	})
	t.Run("spread", func(t *testing.T) {
		// released over 5 ms, acked over 8 ms: 2·5 > 8, the train is the
		// sender's spacing more than the path's
		h := newHarness(t, Config{})
		first := h.burst(0, 5)
		h.burst(5, 5) // same window, another instant
		h.train(first, 100, 2)
		if s := h.p.State(); s.BurstsAppLimited != 1 || s.Bursts != 1 || s.Mode != ModeInitial {
			t.Fatalf("app-limited %d bursts %d mode %v", s.BurstsAppLimited, s.Bursts, s.Mode)
		}
	})
	t.Run("spread full burst in one frame", func(t *testing.T) {
		// recovery needs the burst released within a quarter of TxTime
		// (200 ms here): 60 ms is too spread
		h := newHarness(t, Config{})
		first := h.burst(0, 5)
		h.burst(60, 5)
		h.ackUpTo(200, first+9)
		if s := h.p.State(); s.BurstsAppLimited != 1 || s.RecoveryUpdates != 0 {
			t.Fatalf("app-limited %d recovery %d", s.BurstsAppLimited, s.RecoveryUpdates)
		}
	})
}

func TestRepeatedAckRangesCountOnce(t *testing.T) {
	h := newHarness(t, Config{})
	first := h.burst(0, 10)
	h.ackUpTo(100, first+1)
	h.ackUpTo(101, first+1) // same packets again: not a new ACK of the burst
	h.ackUpTo(102, first+3)
	h.ackUpTo(104, first+5)
	h.ackUpTo(106, first+7)
	h.ackUpTo(108, first+9)
	s := h.p.State()
	// 5 frames acknowledged something new: ATD = 8·5/4 = 10 ms.
	near(t, "ATD", s.ATD, ms(10))
	if s.PacketsAcked != 10 {
		t.Fatalf("acked %d, want 10", s.PacketsAcked)
	}
}

func TestCoalescedDatagramsAndUnpaced(t *testing.T) {
	h := newHarness(t, Config{})
	now := t0
	h.p.OnRelease(now, 10, 10*100)
	// 10 small datagrams in 2 packets.
	h.p.OnSent(now, 0, 600, 5)
	h.p.OnSent(now, 1, 600, 5)
	// a third packet with a datagram the pacer did not release
	h.p.OnSent(now, 2, 600, 1)
	h.p.OnSent(now, 2, 600, 1) // pn not increasing
	s := h.p.State()
	if s.PacketsSent != 2 || s.PacketsUnpaced != 1 || s.PacketNumberBad != 1 || s.BytesInFlight != 1200 {
		t.Fatalf("sent %d unpaced %d bad %d inflight %d", s.PacketsSent, s.PacketsUnpaced, s.PacketNumberBad, s.BytesInFlight)
	}
}

func TestBoundedMemory(t *testing.T) {
	h := newHarness(t, Config{MaxBursts: 4})
	for i := 0; i < 6; i++ {
		h.burst(float64(i)*200, 10)
	}
	s := h.p.State()
	// 4 burst records, 40 packet records: the 2 oldest bursts were evicted
	// and their packets counted lost.
	if s.BurstsEvicted != 2 || s.PacketsEvicted != 20 || s.LiveBursts != 4 || s.BytesInFlight != 40*size {
		t.Fatalf("evicted bursts %d packets %d live %d inflight %d", s.BurstsEvicted, s.PacketsEvicted, s.LiveBursts, s.BytesInFlight)
	}
	// ACKs of evicted packets are ignored; the live ones still measure.
	h.train(50, 1100, 2)
	if s := h.p.State(); s.BurstsMeasured != 1 {
		t.Fatalf("measured %d, want 1", s.BurstsMeasured)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(Config{MinAcks: 1}); err == nil {
		t.Fatal("MinAcks 1 accepted")
	}
	if _, err := New(Config{BurstPackets: -1}); err == nil {
		t.Fatal("BurstPackets -1 accepted")
	}
	h := newHarness(t, Config{})
	h.burst(0, 10)
	h.p.OnAck(t0.Add(ms(100)), []AckRange{{9, 0}})
	h.p.OnAck(t0.Add(ms(100)), nil)
	h.p.OnLost(t0, 12345)
	if s := h.p.State(); s.AckRangesBad != 1 || s.PacketsAcked != 0 || s.PacketsLost != 0 {
		t.Fatalf("bad ranges %d acked %d lost %d", s.AckRangesBad, s.PacketsAcked, s.PacketsLost)
	}
}

// The cap holds the pipe and ŝ_max: in tracking at 10 packets per 5 ms
// with min_rtt 100 ms Wave's BDP estimate is 200 packets, so a 5000-byte
// ŝ_max caps bytes in flight at 200·1350 + 5000. Without it the cap was
// ŝ_max alone: four packets in flight on a 200-packet path.
func TestHintCapHoldsThePipe(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 1) // ATD 5 ms, min_rtt 100 ms
	s := h.p.State()
	if s.Mode != ModeTracking || h.p.BDPPackets() != 200 {
		t.Fatalf("mode %v TxTime %v min_rtt %v BDP %d packets, want tracking and 200", s.Mode, s.TxTime, s.MinRTT, h.p.BDPPackets())
	}
	if err := h.p.OnHandoverPredicted(t0.Add(ms(200)), 5000); err != nil {
		t.Fatal(err)
	}
	if got, want := h.p.State().CapBytes, 200*DefaultNominalPacketBytes+5000; got != want {
		t.Fatalf("cap %d bytes, want the pipe plus ŝ_max, %d", got, want)
	}
	if _, b := h.p.Budget(t0.Add(ms(200))); b != 200*DefaultNominalPacketBytes+5000 {
		t.Fatalf("budget %d bytes with nothing in flight, want the whole cap", b)
	}
}

func TestHintCapWhilePredicted(t *testing.T) {
	h := newHarness(t, Config{})
	q, _ := NewQueue(QueueConfig{})
	var sent []int
	send := func(b []byte) error { sent = append(sent, len(b)); return nil }
	for i := 0; i < 20; i++ {
		q.Push(make([]byte, size))
	}
	if err := h.p.OnHandoverPredicted(t0, 5000); err != nil {
		t.Fatal(err)
	}
	// 0, 1250, 2500, 3750 < 5000: four packets, then 5000 in flight.
	if n := q.Release(t0, h.p, send); n != 4 {
		t.Fatalf("released %d under a 5000-byte cap, want 4", n)
	}
	for i := 0; i < 4; i++ {
		h.p.OnSent(t0, h.pn, size, 1)
		h.pn++
	}
	s := h.p.State()
	if !s.Predicted || s.CapBytes != 5000 || s.BytesInFlight != 5000 {
		t.Fatalf("predicted %v cap %d inflight %d", s.Predicted, s.CapBytes, s.BytesInFlight)
	}
	if n := q.Release(t0.Add(ms(1)), h.p, send); n != 0 {
		t.Fatalf("released %d at the cap", n)
	}
	if at, n := h.p.Next(t0.Add(ms(1))); !at.IsZero() || n != 0 {
		t.Fatalf("Next at the cap = %v, %d; want zero, 0 (wait for an ACK)", at, n)
	}
	if h.p.State().CapBlocked != 1 {
		t.Fatalf("CapBlocked %d, want 1", h.p.State().CapBlocked)
	}
	// Two packets acked: 2500 in flight, budget 2500: two more, in the
	// same window (6 of 10 left).
	h.ackUpTo(50, 1)
	if n := q.Release(t0.Add(ms(50)), h.p, send); n != 2 {
		t.Fatalf("released %d after 2 ACKs, want 2", n)
	}
	// A cap smaller than a packet still lets one go when nothing is in
	// flight (never a stall).
	h2 := newHarness(t, Config{})
	h2.p.OnHandoverPredicted(t0, 100)
	if n, b := h2.p.Budget(t0); n != 10 || b != 100 {
		t.Fatalf("Budget under a 100-byte cap with nothing in flight = %d, %d", n, b)
	}
	q2, _ := NewQueue(QueueConfig{})
	q2.Push(make([]byte, size))
	q2.Push(make([]byte, size))
	if n := q2.Release(t0, h2.p, send); n != 1 {
		t.Fatalf("released %d under a 100-byte cap, want 1", n)
	}
	if err := h2.p.OnHandoverPredicted(t0, 0); !errors.Is(err, ErrHint) || h2.p.State().HintsInvalid != 1 {
		t.Fatalf("ŝ_max 0: err %v", err)
	}
}

func TestHintWithdrawn(t *testing.T) {
	h := newHarness(t, Config{})
	q, _ := NewQueue(QueueConfig{})
	send := func([]byte) error { return nil }
	for i := 0; i < 20; i++ {
		q.Push(make([]byte, size))
	}
	h.p.OnHandoverPredicted(t0, 2500)
	if n := q.Release(t0, h.p, send); n != 2 {
		t.Fatalf("released %d under a 2500-byte cap, want 2", n)
	}
	h.p.OnPredictionWithdrawn(t0.Add(ms(1)))
	s := h.p.State()
	if s.Predicted || s.CapBytes != 0 || s.HintsWithdrawn != 1 {
		t.Fatalf("after withdrawal predicted %v cap %d withdrawn %d", s.Predicted, s.CapBytes, s.HintsWithdrawn)
	}
	// The rest of the window (8 packets) goes at once, uncapped.
	if n := q.Release(t0.Add(ms(1)), h.p, send); n != 8 {
		t.Fatalf("released %d after withdrawal, want 8", n)
	}
	// Wave's TxTime was not touched by the prediction.
	if h.p.TxTime() != 200*time.Millisecond {
		t.Fatalf("TxTime %v", h.p.TxTime())
	}
}

func TestHintExecutedRestartsFromCEst(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2) // tracking, TxTime 10 ms, min 100 ms
	h.p.OnHandoverPredicted(t0.Add(ms(150)), 4000)
	old := h.burst(150, 3) // in flight on the old cell
	_ = old
	// Executed at 160 ms with c_est = 27 MB/s (216 Mbit/s):
	// TxTime = 10·1350 B / 27e6 B/s = 0.5 ms → 1 ms floor.
	// With c_est = 6.75 MB/s: 13500/6.75e6 = 2 ms.
	now := t0.Add(ms(160))
	if err := h.p.OnHandoverExecuted(now, "mmWave", 6.75e6); err != nil {
		t.Fatal(err)
	}
	s := h.p.State()
	if s.Mode != ModeHinted || s.Predicted || s.CapBytes != 0 || s.CellType != "mmWave" || s.HintRate != 6.75e6 || s.HintsExecuted != 1 {
		t.Fatalf("after execution %+v", s)
	}
	near(t, "TxTime", s.TxTime, ms(2))
	if s.MinRTT != 0 || s.AvgRTT != 0 || s.LiveBursts != 0 || s.BurstsDropped != 1 {
		t.Fatalf("estimate not restarted: min %v avg %v live %d dropped %d", s.MinRTT, s.AvgRTT, s.LiveBursts, s.BurstsDropped)
	}
	// A full burst may go now, although the window opened at 150 ms with
	// TxTime 10 ms would have ended only at 160 ms + ... (and 3 of 10 used).
	if n, b := h.p.Budget(now); n != 10 || b != math.MaxInt {
		t.Fatalf("Budget after execution = %d, %d; want a full uncapped burst", n, b)
	}
	// The first ACK train on the new cell takes over: RTT 30 ms, frames
	// 0.2 ms apart: ATD = 0.8·5/4 = 1 ms; min = pilot = 30 ms, α = 0,
	// ΔRTT = 0; TxTime = 1 ms.
	h.train(h.burst(160, 10), 190, 0.2)
	s = h.p.State()
	if s.Mode != ModeTracking {
		t.Fatalf("mode %v, want tracking after the first train", s.Mode)
	}
	near(t, "MinRTT", s.MinRTT, ms(30))
	near(t, "TxTime", s.TxTime, ms(1))

	// Clamps: a slow cell (13.5 kB/s → 1 s) is clamped to Wave's 200 ms;
	// a fast one (1e12 B/s) to the 1 ms floor; c_est 0 (unknown) keeps the
	// rate; NaN and negative ones are refused and keep it too.
	for _, c := range []struct {
		cEst float64
		want time.Duration
		err  bool
	}{{13.5e3, 200 * time.Millisecond, false}, {1e12, time.Millisecond, false}, {0, time.Millisecond, false}, {math.NaN(), time.Millisecond, true}, {-1, time.Millisecond, true}, {math.Inf(1), time.Millisecond, true}} {
		err := h.p.OnHandoverExecuted(now, "sub6", c.cEst)
		if (err != nil) != c.err || h.p.TxTime() != c.want {
			t.Errorf("c_est %v: TxTime %v err %v; want %v err %v", c.cEst, h.p.TxTime(), err, c.want, c.err)
		}
	}
}

// TestHintExecutedUnknownRate: an executed hint with c_est 0 (unknown:
// the phone's controller sees no rate for tunnelled flows) restarts the
// RTT estimate but keeps the rate; before, it sent Wave back to its
// 200 ms cold start for an RTT (on the 600 ms path of bench bdp-switch,
// ~0.5 Mbit/s for more than a second).
func TestHintExecutedUnknownRate(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 0.5) // ATD 2.5 ms, min 100 ms
	near(t, "TxTime", h.p.TxTime(), ms(2.5))
	old := h.burst(110, 10) // in flight on the old cell
	now := t0.Add(ms(120))
	if err := h.p.OnHandoverExecuted(now, "sub6", 0); err != nil {
		t.Fatalf("c_est 0 (unknown) refused: %v", err)
	}
	s := h.p.State()
	if s.Mode != ModeHinted || s.HintsExecuted != 1 || s.HintsNoRate != 1 || s.HintsInvalid != 0 {
		t.Fatalf("mode %v executed %d no-rate %d invalid %d", s.Mode, s.HintsExecuted, s.HintsNoRate, s.HintsInvalid)
	}
	near(t, "TxTime kept", s.TxTime, ms(2.5))
	if s.BurstPackets != 10 || s.MinRTT != 0 || s.AvgRTT != 0 || s.SmoothedRTT != 0 {
		t.Fatalf("burst %d min %v avg %v srtt %v: want 10 and the RTT estimate forgotten", s.BurstPackets, s.MinRTT, s.AvgRTT, s.SmoothedRTT)
	}
	// a full burst may go at once
	if n, _ := h.p.Budget(now); n != 10 {
		t.Fatalf("Budget after execution = %d, want 10", n)
	}
	// the old cell's ACKs give no RTT sample; the new path (600 ms) is
	// measured from scratch: no adjustment although 600 ≫ 100 + β
	h.train(old, 130, 0.5)
	if s := h.p.State(); s.MinRTT != 0 {
		t.Fatalf("old-cell ACK set min_rtt %v", s.MinRTT)
	}
	h.train(h.burst(120, 10), 720, 0.5)
	s = h.p.State()
	if s.Mode != ModeTracking || s.Adjustments != 0 {
		t.Fatalf("mode %v adjustments %d after the first new-path train, want tracking 0", s.Mode, s.Adjustments)
	}
	near(t, "MinRTT", s.MinRTT, ms(600))
	near(t, "TxTime", s.TxTime, ms(2.5))
}

func TestModeString(t *testing.T) {
	for m, s := range map[Mode]string{ModeInitial: "initial", ModeTracking: "tracking", ModeRecovery: "recovery", ModeAdjustment: "adjustment", ModeHinted: "hinted", 9: "mode(9)"} {
		if m.String() != s {
			t.Errorf("%d: %q", m, m.String())
		}
	}
}
