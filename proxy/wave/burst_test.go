package wave

import (
	"testing"
	"time"
)

// trainN acks a burst of n packets from pn first with n/2 frames of two
// packets each at at, at+step, ...
func (h *harness) trainN(first int64, n int, at, step float64) {
	for i := int64(0); i < int64(n/2); i++ {
		h.ackUpTo(at+float64(i)*step, first+2*i+1)
	}
}

// grown returns a harness whose burst size has doubled once: a 10-packet
// burst at 0 acked over 0.4 ms (ATD 0.5 ms, below the 1 ms floor) with
// min_rtt 50 ms; TxTime = 2·0.5 = 1 ms.
func grown(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := newHarness(t, cfg)
	h.train(h.burst(0, 10), 50, 0.1)
	s := h.p.State()
	if s.BurstPackets != 20 || s.BurstGrows != 1 || s.Mode != ModeTracking {
		t.Fatalf("burst %d grows %d mode %v, want 20 1 tracking", s.BurstPackets, s.BurstGrows, s.Mode)
	}
	near(t, "TxTime", s.TxTime, ms(1))
	return h
}

// The burst-size tests below that follow TxTime burst by burst use
// ATDWindow 1 (Wave's published rule: the last train alone), so that each
// train's ATD is the one tracking uses; the ATD filter has its own tests.

func TestBurstGrowsAtFloor(t *testing.T) {
	h := grown(t, Config{ATDWindow: 1})
	// the next window allows the grown burst
	if n, _ := h.p.Budget(t0.Add(ms(10))); n != 20 {
		t.Fatalf("Budget = %d packets, want 20", n)
	}
	// a full 20-packet burst drained in 0.45 ms (ATD 0.45·10/9 = 0.5 ms):
	// doubled again, TxTime 1 ms
	h.trainN(h.burst(10, 20), 20, 60, 0.05)
	s := h.p.State()
	if s.BurstPackets != 40 || s.BurstGrows != 2 {
		t.Fatalf("burst %d grows %d, want 40 2", s.BurstPackets, s.BurstGrows)
	}
	near(t, "TxTime", s.TxTime, ms(1))
	// 20 frames 0.06 ms apart: ATD = 20·0.06 = 1.2 ms, above the floor:
	// the size stays
	h.trainN(h.burst(20, 40), 40, 70, 0.06)
	if s := h.p.State(); s.BurstPackets != 40 || s.BurstGrows != 2 {
		t.Fatalf("burst %d grows %d after a train above the floor, want 40 2", s.BurstPackets, s.BurstGrows)
	}
	near(t, "TxTime", h.p.TxTime(), ms(1.2))
}

func TestBurstGrowthNeedsFullCurrentBurst(t *testing.T) {
	t.Run("partial", func(t *testing.T) {
		h := grown(t, Config{})
		// 10 of the 20 released: ATD 0.5 ms scaled to 20 packets = 1 ms
		h.train(h.burst(10, 10), 60, 0.1)
		s := h.p.State()
		if s.BurstPackets != 20 || s.BurstGrows != 1 || s.BurstsPartial != 1 {
			t.Fatalf("burst %d grows %d partial %d, want 20 1 1", s.BurstPackets, s.BurstGrows, s.BurstsPartial)
		}
		near(t, "ATD", s.ATD, ms(1))
	})
	t.Run("older size", func(t *testing.T) {
		// two 10-packet bursts in flight; the first one's train doubles
		// the size, the second (opened at size 10) must not double it again
		h := newHarness(t, Config{InitialTxTime: time.Millisecond})
		a := h.burst(0, 10)
		b := h.burst(1, 10)
		h.train(a, 50, 0.1)
		h.train(b, 51, 0.1)
		s := h.p.State()
		if s.BurstPackets != 20 || s.BurstGrows != 1 || s.BurstsMeasured != 2 {
			t.Fatalf("burst %d grows %d measured %d, want 20 1 2", s.BurstPackets, s.BurstGrows, s.BurstsMeasured)
		}
	})
	t.Run("max", func(t *testing.T) {
		h := newHarness(t, Config{MaxBurstPackets: 15})
		h.train(h.burst(0, 10), 50, 0.1) // 0.5 ms · 15/10 = 0.75 → floor
		h.trainN(h.burst(10, 15), 14, 60, 0.01)
		s := h.p.State()
		if s.BurstPackets != 15 || s.BurstGrows != 1 {
			t.Fatalf("burst %d grows %d, want the 15 cap reached once", s.BurstPackets, s.BurstGrows)
		}
		near(t, "TxTime", s.TxTime, ms(1))
	})
}

func TestBurstShrinks(t *testing.T) {
	t.Run("well above the floor", func(t *testing.T) {
		h := grown(t, Config{ATDWindow: 1})
		// 20 packets over 9 ms of frames: ATD 10 ms ≥ 4·floor: halved to
		// 10 at the same rate, TxTime 5 ms
		h.trainN(h.burst(10, 20), 20, 60, 1)
		s := h.p.State()
		if s.BurstPackets != 10 || s.BurstShrinks != 1 {
			t.Fatalf("burst %d shrinks %d, want 10 1", s.BurstPackets, s.BurstShrinks)
		}
		near(t, "TxTime", s.TxTime, ms(5))
	})
	t.Run("inside the band", func(t *testing.T) {
		h := grown(t, Config{ATDWindow: 1})
		// ATD 3 ms: between the floor and 4·floor, the size stays
		h.trainN(h.burst(10, 20), 20, 60, 2.7/9)
		if s := h.p.State(); s.BurstPackets != 20 || s.BurstShrinks != 0 {
			t.Fatalf("burst %d shrinks %d, want 20 0", s.BurstPackets, s.BurstShrinks)
		}
		near(t, "TxTime", h.p.TxTime(), ms(3))
	})
	t.Run("lossy", func(t *testing.T) {
		h := grown(t, Config{})
		first := h.burst(10, 20)
		h.p.OnLost(t0.Add(ms(70)), first+7)
		h.trainN(first, 20, 60, 0.05)
		s := h.p.State()
		if s.BurstsLossy != 1 || s.BurstPackets != 10 || s.BurstShrinks != 1 || s.BurstsMeasured != 1 {
			t.Fatalf("lossy %d burst %d shrinks %d measured %d, want 1 10 1 1", s.BurstsLossy, s.BurstPackets, s.BurstShrinks, s.BurstsMeasured)
		}
		near(t, "TxTime", s.TxTime, ms(1)) // 1 ms · 10/20, floored
	})
	t.Run("adjustment", func(t *testing.T) {
		h := grown(t, Config{Beta: 10 * time.Millisecond})
		// pilot 200 ms against min_rtt 50: ΔRTT > β
		h.trainN(h.burst(10, 20), 20, 210, 0.05)
		s := h.p.State()
		if s.Mode != ModeAdjustment || s.BurstPackets != 10 || s.TxTime != DefaultInitialTxTime {
			t.Fatalf("mode %v burst %d TxTime %v, want adjustment 10 200ms", s.Mode, s.BurstPackets, s.TxTime)
		}
	})
}

func TestNoGrowthInRecovery(t *testing.T) {
	h := newHarness(t, Config{})
	for i := 0; i < 10; i++ {
		at := float64(300 * i)
		first := h.burst(at, 10)
		h.ackUpTo(at+100, first+9) // one frame: recovery
	}
	s := h.p.State()
	if s.RecoveryUpdates != 10 || s.BurstPackets != 10 || s.BurstGrows != 0 || s.Mode != ModeRecovery {
		t.Fatalf("recovery %d burst %d grows %d mode %v", s.RecoveryUpdates, s.BurstPackets, s.BurstGrows, s.Mode)
	}
	near(t, "TxTime", s.TxTime, ms(1)) // 0.4^k·200 ms reached the floor
}

func TestPartialBurstMeasured(t *testing.T) {
	// 6 of 10 released at once (the whole queue): frames at 100, 101, 102
	// ms: ATD = 2·3/2 = 3 ms for 6 packets, 5 ms for a burst of 10.
	h := newHarness(t, Config{})
	h.trainN(h.burst(0, 6), 6, 100, 1)
	s := h.p.State()
	if s.Mode != ModeTracking || s.BurstsPartial != 1 || s.BurstsMeasured != 1 {
		t.Fatalf("mode %v partial %d measured %d", s.Mode, s.BurstsPartial, s.BurstsMeasured)
	}
	near(t, "ATD", s.ATD, ms(5))
	near(t, "TxTime", s.TxTime, ms(5))
}

func TestSpreadBurstTolerated(t *testing.T) {
	// released over 1 ms (as a TUN hands packets over one by one), acked
	// over 8 ms: the path's dispersion dominates, the burst is measured
	h := newHarness(t, Config{})
	first := h.burst(0, 5)
	h.burst(1, 5)
	h.train(first, 100, 2)
	s := h.p.State()
	if s.Mode != ModeTracking || s.BurstsAppLimited != 0 || s.BurstsMeasured != 1 {
		t.Fatalf("mode %v app-limited %d measured %d", s.Mode, s.BurstsAppLimited, s.BurstsMeasured)
	}
	near(t, "TxTime", s.TxTime, ms(10))
}

func TestAckDelaySubtracted(t *testing.T) {
	// frames at 100..103 ms and a last one at 129 ms that the receiver
	// held 25 ms (the odd packet's delayed ACK): the train ends at 104.
	for _, viaEvents := range []bool{false, true} {
		h := newHarness(t, Config{})
		ev := NewEvents(0)
		first := h.burst(0, 10)
		for i := int64(0); i < 5; i++ {
			at, d := ms(100+float64(i)), time.Duration(0)
			if i == 4 {
				at, d = ms(129), ms(25)
			}
			r := []AckRange{{0, first + 2*i + 1}}
			if viaEvents {
				ev.AckedDelayed(t0.Add(at), d, r)
			} else {
				h.p.OnAckDelayed(t0.Add(at), d, r)
			}
		}
		ev.DrainInto(h.p)
		s := h.p.State()
		near(t, "ATD", s.ATD, ms(5)) // 4·5/4; 36.25 without the ack delay
		near(t, "PilotRTT", s.PilotRTT, ms(100))
	}
}

func TestHintExecutedSizesBurst(t *testing.T) {
	h := newHarness(t, Config{})
	now := t0.Add(ms(5))
	first := h.burst(0, 10) // on the old cell
	// 1 Gbit/s: ⌈125e6·1 ms / 1350⌉ = 93 packets, TxTime 93·1350/125e6 s
	if err := h.p.OnHandoverExecuted(now, "mmWave", 125e6); err != nil {
		t.Fatal(err)
	}
	s := h.p.State()
	if s.BurstPackets != 93 {
		t.Fatalf("burst %d, want 93", s.BurstPackets)
	}
	near(t, "TxTime", s.TxTime, time.Duration(93*1350*1e9/125e6))
	if n, _ := h.p.Budget(now); n != 93 {
		t.Fatalf("Budget %d, want 93", n)
	}
	// the old cell's packets, acked after the handover, give no RTT
	// sample: min_rtt is the new cell's to learn
	h.ackUpTo(100, first+9)
	if s := h.p.State(); s.MinRTT != 0 || s.LatestRTT != 0 || s.PacketsAcked != 10 {
		t.Fatalf("min %v latest %v acked %d: the old path seeded the new estimate", s.MinRTT, s.LatestRTT, s.PacketsAcked)
	}
	// a slow cell keeps the smallest burst
	if err := h.p.OnHandoverExecuted(now, "sub6", 6.75e6); err != nil {
		t.Fatal(err)
	}
	if s := h.p.State(); s.BurstPackets != 10 || s.TxTime != 2*time.Millisecond {
		t.Fatalf("burst %d TxTime %v, want 10 2ms", s.BurstPackets, s.TxTime)
	}
	// an unknown c_est keeps the rate: burst size and TxTime stay
	h.p.OnHandoverExecuted(now, "mmWave", 125e6)
	n := h.p.State().BurstPackets
	if err := h.p.OnHandoverExecuted(now, "sub6", 0); err != nil || h.p.State().BurstPackets != n {
		t.Fatalf("c_est 0: err %v burst %d, want nil %d", err, h.p.State().BurstPackets, n)
	}
}

func TestMaxBurstPacketsConfig(t *testing.T) {
	if _, err := New(Config{MaxBurstPackets: 5}); err == nil {
		t.Fatal("MaxBurstPackets below BurstPackets accepted")
	}
	p, err := New(Config{BurstPackets: 200})
	if err != nil || p.Config().MaxBurstPackets != 200 {
		t.Fatalf("BurstPackets 200: max %d err %v, want 200", p.Config().MaxBurstPackets, err)
	}
	if p, _ := New(Config{}); p.Config().MaxBurstPackets != DefaultMaxBurstPackets {
		t.Fatalf("default max %d", p.Config().MaxBurstPackets)
	}
}

func TestGate(t *testing.T) {
	p, _ := New(Config{TrainRTTDivisor: -1}) // a 10 ms train at 100 ms: no resolution growth here
	ev := NewEvents(0)
	g := NewGate(p, ev)
	now := t0
	if n, w := g.Budget(now, 0); n != 0 || w != 0 {
		t.Fatalf("empty queue: %d %v", n, w)
	}
	// 3 queued: all go; the next 7 of the window go on a later answer
	if n, _ := g.Budget(now, 3); n != 3 {
		t.Fatalf("Budget = %d, want 3", n)
	}
	for i := 0; i < 3; i++ {
		g.Sent(now.Add(time.Duration(i)*time.Microsecond), 1250) // recorded at the answer's instant
	}
	later := now.Add(10 * time.Microsecond)
	if n, _ := g.Budget(later, 50); n != 7 {
		t.Fatalf("Budget = %d, want the 7 left in the window", n)
	}
	for i := 0; i < 7; i++ {
		g.Sent(later, 1250)
	}
	n, w := g.Budget(later, 50)
	if n != 0 || w != DefaultInitialTxTime-10*time.Microsecond {
		t.Fatalf("window used: %d %v, want 0 and the rest of 200 ms", n, w)
	}
	for pn := int64(0); pn < 10; pn++ {
		ev.Sent(later, pn, 1250, 1)
	}
	for i := int64(0); i < 5; i++ {
		ev.Acked(t0.Add(ms(100+2*float64(i))), []AckRange{{0, 2*i + 1}})
	}
	g.Budget(t0.Add(ms(110)), 1) // drains the events
	s := g.State()
	if s.BurstsMeasured != 1 || s.Bursts != 1 {
		t.Fatalf("measured %d bursts %d: the two answers' releases should be one burst", s.BurstsMeasured, s.Bursts)
	}
	// spread 10 µs against an 8 ms train: ATD 10 ms, pilot 100 ms
	near(t, "TxTime", s.TxTime, ms(10))
	if b := g.BDPPackets(); b != 100 {
		t.Fatalf("BDPPackets %d, want 100 (100 ms / 10 ms · 10)", b)
	}
	if l := g.QueueLimit(); l != 200+QueueLimitBatch {
		t.Fatalf("QueueLimit %d, want 2·100 + %d (as of the last Budget)", l, QueueLimitBatch)
	}
	// a queue standing at 2·BDP still takes one 64 KB offload batch of
	// 1240-byte segments (the tunnel's MSS clamp at MTU 1280) whole
	if l, batch := g.QueueLimit(), (64<<10+1239)/1240; l-2*g.BDPPackets() < batch {
		t.Fatalf("QueueLimit %d leaves %d packets above 2·BDP, want room for a %d-packet offload batch", l, l-2*g.BDPPackets(), batch)
	}

	// the ŝ_max cap holds the pipe (100 packets) and 2000 bytes: the
	// window's 10 packets fit under it (TestHintCapWhilePredicted has the
	// cap reached, with no pipe known)
	at := t0.Add(ms(200))
	if err := g.HandoverPredicted(at, 2000); err != nil {
		t.Fatal(err)
	}
	if c := g.State().CapBytes; c != 100*DefaultNominalPacketBytes+2000 {
		t.Fatalf("cap %d bytes, want 100·%d + 2000", c, DefaultNominalPacketBytes)
	}
	if n, _ := g.Budget(at, 10); n != 10 {
		t.Fatalf("capped Budget = %d, want the window's 10", n)
	}
	g.Sent(at, 1250)
	g.Sent(at, 1250)
	g.PredictionWithdrawn(at)
	if n, _ := g.Budget(at, 10); n != 8 {
		t.Fatalf("withdrawn: Budget %d, want the 8 left in the window", n)
	}
	if err := g.HandoverExecuted(at, "mmWave", 125e6); err != nil || g.State().BurstPackets != 93 {
		t.Fatalf("executed: %v burst %d", err, g.State().BurstPackets)
	}
	if NewGate(p, nil).QueueLimit() != 0 {
		t.Fatal("QueueLimit with no min_rtt should be 0")
	}
}

// Budget, Sent (Gate) and OnSent, OnAck, Budget (Pacer) allocate nothing.
func TestGatePerCallAllocsNothing(t *testing.T) {
	p, _ := New(Config{InitialTxTime: time.Millisecond})
	ev := NewEvents(0)
	g := NewGate(p, ev)
	now := t0
	var pn int64
	var r [1]AckRange
	step := func() {
		n, _ := g.Budget(now, 10)
		for i := 0; i < n; i++ {
			g.Sent(now, 1250)
			ev.Sent(now, pn, 1250, 1)
			pn++
		}
		for i := 0; i < n/2; i++ {
			r[0] = AckRange{0, pn - int64(n) + int64(2*i) + 1}
			ev.AckedDelayed(now.Add(20*time.Millisecond+time.Duration(i)*100*time.Microsecond), time.Duration(i), r[:])
		}
		now = now.Add(2 * time.Millisecond)
	}
	for i := 0; i < 100; i++ {
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("%v allocations per burst through the Gate", a)
	}
	if p.State().BurstsMeasured < 1000 {
		t.Fatalf("measured %d: the loop did not exercise tracking", p.State().BurstsMeasured)
	}
	for name, f := range map[string]func(){
		"Pacer.Budget": func() { p.Budget(now) },
		"Pacer.OnSent": func() { p.OnRelease(now, 1, 1250); p.OnSent(now, pn, 1250, 1); pn++ },
		"Pacer.OnAck":  func() { r[0] = AckRange{0, pn - 1}; p.OnAck(now, r[:]) },
		"Gate.Budget":  func() { g.Budget(now, 10) },
		"Gate.Sent":    func() { g.Sent(now, 1250) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocations per call", name, a)
		}
	}
}

func TestTrackingRecoveryTransitions(t *testing.T) {
	h := newHarness(t, Config{})
	h.train(h.burst(0, 10), 100, 2) // tracking: TxTime 10 ms, min_rtt 100
	first := h.burst(300, 10)
	h.ackUpTo(400, first+9) // one frame: recovery, 0.4·10 + 0.2·0 = 4 ms
	s := h.p.State()
	if s.Mode != ModeRecovery {
		t.Fatalf("mode %v, want recovery", s.Mode)
	}
	near(t, "TxTime", s.TxTime, ms(4))
	h.train(h.burst(600, 10), 700, 1) // a train again: ATD 5 ms
	s = h.p.State()
	if s.Mode != ModeTracking {
		t.Fatalf("mode %v, want tracking", s.Mode)
	}
	near(t, "TxTime", s.TxTime, ms(5))
}

// Gate has the shape of proxy/tunnel's Pacer seam (Budget, Sent; Hint is
// the caller's, translating tunnel.Hint to the Gate's hint methods).
var _ interface {
	Budget(now time.Time, queued int) (int, time.Duration)
	Sent(now time.Time, size int)
} = (*Gate)(nil)

func TestSpreadBySender(t *testing.T) {
	// released at once, but the transport sent the packets over 6 ms (as
	// quic-go's pacer may): against an 8 ms train that is too spread
	h := newHarness(t, Config{})
	now := t0
	h.p.OnRelease(now, 10, 10*size)
	for i := int64(0); i < 10; i++ {
		h.p.OnSent(now.Add(time.Duration(i)*ms(6)/9), i, size, 1)
	}
	h.train(0, 100, 2)
	if s := h.p.State(); s.BurstsAppLimited != 1 || s.BurstsMeasured != 0 {
		t.Fatalf("app-limited %d measured %d, want the sender-spread burst refused", s.BurstsAppLimited, s.BurstsMeasured)
	}
}

func TestAckDelayBounded(t *testing.T) {
	// an ACK Delay above max_ack_delay is taken off only up to 25 ms;
	// one that would put the train's end before its start gives no sample
	h := newHarness(t, Config{})
	first := h.burst(0, 10)
	for i := int64(0); i < 4; i++ {
		h.p.OnAck(t0.Add(ms(100+float64(i))), []AckRange{{0, first + 2*i + 1}})
	}
	h.p.OnAckDelayed(t0.Add(ms(130)), time.Second, []AckRange{{0, first + 9}})
	near(t, "ATD", h.p.State().ATD, ms(6.25)) // (105 − 100)·5/4
	h2 := newHarness(t, Config{})
	first = h2.burst(0, 10)
	h2.p.OnAck(t0.Add(ms(120)), []AckRange{{0, first + 1}})
	for i := int64(1); i < 5; i++ {
		h2.p.OnAckDelayed(t0.Add(ms(121)), ms(24), []AckRange{{0, first + 2*i + 1}})
	}
	if s := h2.p.State(); s.BurstsShortTrain != 1 || s.BurstsMeasured != 0 {
		t.Fatalf("short %d measured %d, want the reordered train refused", s.BurstsShortTrain, s.BurstsMeasured)
	}
	if _, err := New(Config{MaxAckDelay: -1}); err == nil {
		t.Fatal("negative MaxAckDelay accepted")
	}
}

// Config.QueueBDP sets how many bandwidth-delay estimates QueueLimit holds
// (plus the offload batch), default 2; out of 0.25..8 it is refused.
func TestQueueLimitBDPFactor(t *testing.T) {
	limit := func(q float64) (bdp, lim int) {
		return queueLimitAfterTrain(t, Config{TrainRTTDivisor: -1, QueueBDP: q}, 100)
	}
	b, l := limit(0)
	if b < 50 || l != 2*b+QueueLimitBatch {
		t.Fatalf("default: BDP %d, QueueLimit %d, want 2·BDP + %d", b, l, QueueLimitBatch)
	}
	if b2, l := limit(0.5); b2 != b || l != (b+1)/2+QueueLimitBatch {
		t.Fatalf("QueueBDP 0.5: BDP %d, QueueLimit %d, want BDP/2 + %d", b2, l, QueueLimitBatch)
	}
	for _, q := range []float64{0.2, 8.5, -1} {
		if _, err := New(Config{QueueBDP: q}); err == nil {
			t.Errorf("QueueBDP %v accepted", q)
		}
	}
}

// Config.QueueDelay caps the queue bound by delay: two estimates on a
// short path, 1.5 at 200 ms, the floor of half an estimate at 600 ms
// (two would stand 1.2 s of queue there), two again with the cap off.
func TestQueueLimitDelayCap(t *testing.T) {
	limit := func(rtt float64, d time.Duration) (bdp, lim int) {
		return queueLimitAfterTrain(t, Config{TrainRTTDivisor: -1, QueueDelay: d}, rtt)
	}
	for _, tc := range []struct {
		rtt    float64
		d      time.Duration
		factor float64
	}{{100, 0, 2}, {150, 0, 2}, {200, 0, 1.5}, {600, 0, 0.5}, {1200, 0, 0.5}, {600, -1, 2}, {600, time.Second, 1.0 / 0.6}} {
		b, l := limit(tc.rtt, tc.d)
		want := min(max(int(tc.factor*float64(b)+0.5)+QueueLimitBatch, QueueLimitMin), QueueLimitMax)
		if b < 50 || l != want {
			t.Errorf("min_rtt %v ms, QueueDelay %v: BDP %d, QueueLimit %d, want %.2f·BDP + %d = %d", tc.rtt, tc.d, b, l, tc.factor, QueueLimitBatch, want)
		}
	}
	if _, err := New(Config{QueueDelay: -2}); err == nil {
		t.Error("QueueDelay -2 accepted")
	}
}

// queueLimitAfterTrain sends one 10-packet burst through a Gate over cfg,
// acknowledges it rttMs later as a 2 ms train, and returns the BDP
// estimate and the QueueLimit that follow.
func queueLimitAfterTrain(t *testing.T, cfg Config, rttMs float64) (bdp, lim int) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvents(0)
	g := NewGate(p, ev)
	if n, _ := g.Budget(t0, 10); n != 10 {
		t.Fatalf("Budget %d, want a 10-packet window", n)
	}
	for pn := int64(0); pn < 10; pn++ {
		g.Sent(t0, 1250)
		ev.Sent(t0, pn, 1250, 1)
	}
	for i := int64(0); i < 5; i++ {
		ev.Acked(t0.Add(ms(rttMs+2*float64(i))), []AckRange{{0, 2*i + 1}})
	}
	g.Budget(t0.Add(ms(rttMs+10)), 1)
	return g.BDPPackets(), g.QueueLimit()
}
