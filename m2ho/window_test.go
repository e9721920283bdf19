package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// No window leaves the phone above the clamp from the prediction to the
// end of Smoothing: random access does not lift it, for a flow whose ACKs
// Smoothing releases, for a flow it never held, for ACKs with data. The
// clamp goes with Smoothing (rule b here, rule c below).
func TestClampHeldThroughSmoothing(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	g := attach(fx, 0)
	toSmoothing(fx, f, 1000, 1000) // prediction at 0, command 100, RA 130
	// ŝ_max(A) = 100000 B. f is active: its share is all of it,
	// ceil(100000/128) = 782; idle g shares with f: ceil(50000/128) = 391.
	tests := []struct {
		name string
		flow *Flow
		p    *Packet
		want Verdict
	}{
		{"ACK covering all (releases f)", f, upACK(2000, 65535, 7), rewrite(782, ReasonPreparation)},
		{"f after release", f, upACK(2000, 65535, 7), rewrite(782, ReasonPreparation)},
		{"ACK with data", f, &Packet{Dir: Uplink, Flags: FlagACK | FlagPSH, Ack: 2000, PayloadLen: 10, Window: 65535, WScale: 7}, rewrite(782, ReasonPreparation)},
		{"flow without data at the command", g, upACK(1, 65535, 7), rewrite(391, ReasonPreparation)},
		{"window already under the clamp", f, upACK(2000, 500, 7), pass},
	}
	for i, tc := range tests {
		check(t, tc.name, fx.pkt(131+i, tc.flow, tc.p), tc.want)
	}
	fx.want(Smoothing)
	// The first burst in the target ends Smoothing and the clamp.
	fx.ev(140, slotEv(0.99, 8000))
	fx.ev(141, slotEv(0.2, 100))
	fx.ev(142, slotEv(0, 0))
	fx.want(Stable)
	check(t, "after Smoothing", fx.pkt(143, f, upACK(2000, 65535, 7)), pass)

	// A command without prediction clamps from the command; the
	// smoothing bound (150 ms after it) ends the clamp.
	fx = newFixture(t, nil)
	f = attach(fx, 0)
	fx.ev(0, slotEv(0, 0))
	fx.pkt(50, f, down(1000, 1000))
	fx.ev(100, command(signaling.HOIntraNR, sub6, "B"))
	fx.ev(130, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.want(Smoothing)
	// ŝ_max(B) = 60000 B: ceil(60000/128) = 469.
	check(t, "in Smoothing, no prediction", fx.pkt(131, f, upACK(2000, 65535, 7)), rewrite(469, ReasonPreparation))
	check(t, "just before the bound", fx.pkt(249, f, upACK(2000, 65535, 7)), rewrite(469, ReasonPreparation))
	check(t, "at the bound", fx.pkt(250, f, upACK(2000, 65535, 7)), rewrite(469, ReasonRelease)) // opening (Controller.release)
	fx.want(Stable)
}

// eqn2Fixture brings a controller through mmWave M1 to sub-6 cell C
// (Eqn 2 armed) and gives flow f two 50 ms RTT samples and c_est = 200000
// B/s in C, as tsFlow does, from t=1300.
func eqn2Fixture(t *testing.T, sMaxC int) (*fixture, *Flow) {
	fx := newFixture(t, nil)
	fx.db.Observe(cell(sub6, "C"), sMaxC)
	f := attach(fx, 0)
	fx.ev(0, command(signaling.HOIntraNR, mmw, "M1"))
	fx.ev(60, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(200))
	fx.ev(1000, command(signaling.HOIntraNR, sub6, "C"))
	fx.ev(1060, raEv(signaling.RASuccess, signaling.RAHandover))
	fx.c.Tick(at(1200))
	fx.want(Stable)
	ack := func(ms int, tsval uint32) {
		fx.pkt(ms, f, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1 << 30, Window: 65535, WScale: 7, HasTS: true, TSval: tsval})
	}
	data := func(ms int, seq, ecr uint32) {
		fx.pkt(ms, f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: seq, PayloadLen: 10000, WScale: 7, HasTS: true, TSval: 9, TSecr: ecr})
	}
	ack(1300, 1)
	data(1350, 0, 1)
	ack(1350, 2)
	data(1400, 10000, 2)
	if h := fx.c.Hint(); h.CEst != 200000 {
		t.Fatalf("c_est %v, want 200000 B/s", h.CEst)
	}
	return fx, f
}

// Eqn 2 never builds a standing queue the serving cell can't hold: rwnd
// ≤ rate·RTT_min + ŝ_max (one BDP plus the buffer estimate). Here rate
// 200000 B/s, RTT = RTT_min = 50 ms: BDP 10000 B, Eqn 2 = 2·10000 =
// 20000 B (a standing queue of 10000 B).
func TestEqn2CappedByBuffer(t *testing.T) {
	up := func(fx *fixture, f *Flow, ms int) Verdict {
		return fx.pkt(ms, f, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1 << 30, Window: 65535, WScale: 7, HasTS: true, TSval: 3})
	}
	// ŝ_max(C) = 4000 B: the cap 10000 + 4000 = 14000 B binds,
	// ceil(14000/128) = 110 (Eqn 2 alone: ceil(20000/128) = 157).
	fx, f := eqn2Fixture(t, 4000)
	// The pace: the limit was ŝ_max(C) = 4000 B until the RTT was known
	// (last set at 1350 ms); it rises by ŝ_max per srtt (50 ms):
	// 4000 + 4000·51/50 = 8080 B at 1401 ms, ceil(8080/128) = 64.
	check(t, "paced after the clamp", up(fx, f, 1401), rewrite(64, ReasonStableRate))
	// At 1600 ms the pace allows 8080 + 4000·199/50 > 14000 B: the cap.
	check(t, "capped by BDP + ŝ_max", up(fx, f, 1600), rewrite(110, ReasonStableRate))
	// A burst in C raises ŝ_max(C), and the cap follows: slots from
	// t=1610, S = 9001 B in D = 2 ms. The window is the RTT (50 ms), cut
	// to the 13 ms of history since the first slot: 9001 B / 13 ms =
	// 692385 B/s exceeds c_est, so ŝ_b = 9001 − 692385·0.002 = 7616.2 →
	// 7616; cap 10000 + 7616 = 17616 B, ceil(17616/128) = 138, which the
	// pace allows at 1700 ms (14000 + 7616·100/50).
	Cc := cell(sub6, "C")
	for _, s := range []struct {
		ms    int
		rb    float64
		bytes int
	}{{1610, 0, 0}, {1620, 0.95, 9000}, {1621, 0.1, 1}, {1622, 0, 0}} {
		fx.ev(s.ms, &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: s.rb, Bytes: s.bytes, Serving: Cc})
	}
	if v, _ := fx.db.Get(Cc); v != 7616 {
		t.Fatalf("ŝ_max(C) %d, want 7616", v)
	}
	check(t, "cap follows ŝ_max", up(fx, f, 1700), rewrite(138, ReasonStableRate))

	// ŝ_max(C) = 15000 B: Eqn 2's 20000 B lies between the floor (15000)
	// and the cap (25000) and governs: ceil(20000/128) = 157 (the pace
	// allows 15000 + 15000·51/50 at 1401 ms).
	fx, f = eqn2Fixture(t, 15000)
	check(t, "Eqn 2 between floor and cap", up(fx, f, 1401), rewrite(157, ReasonStableRate))
	// ŝ_max(C) = 60000 B: Eqn 2's 20000 B is under the floor, ŝ_max:
	// in flight ≤ ŝ_max cannot overflow. ceil(60000/128) = 469.
	fx, f = eqn2Fixture(t, 60000)
	check(t, "floor at ŝ_max", up(fx, f, 1401), rewrite(469, ReasonStableRate))
}

// Eqn 2 has no way back from a small window when RTT > λ·RTT_min; the
// floor at ŝ_max stops the fall. One RTT interval with a gap: the 10000
// B that opened it at 1400 ms over 200 ms → c_est = 50000 B/s, Eqn 2 =
// 2·50000·0.05 = 5000 B; the floor keeps ŝ_max(C) = 30000 B,
// ceil(30000/128) = 235.
func TestEqn2FloorAtSMax(t *testing.T) {
	fx, f := eqn2Fixture(t, 30000)
	fx.pkt(1600, f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: 20000, PayloadLen: 2000, WScale: 7})
	if h := fx.c.Hint(); h.CEst != 50000 {
		t.Fatalf("c_est %v, want 50000 B/s", h.CEst)
	}
	check(t, "floor", fx.pkt(1601, f, &Packet{Dir: Uplink, Flags: FlagACK, Ack: 1 << 30, Window: 65535, WScale: 7, HasTS: true, TSval: 3}), rewrite(235, ReasonStableRate))
}

// A flow carried through a sub-6 dwell by Eqn 2 loses nothing there: a
// closed loop of a sender whose cwnd is frozen at its mmWave size (CUBIC
// does not grow it while rwnd-limited), a sub-6 bottleneck with a buffer
// of 0.8 BDP, and the controller rewriting the laptop's ACKs. The loop
// counts tail drops at the bottleneck.
func TestEqn2DwellLosesNothing(t *testing.T) {
	const (
		rate   = 5_000_000 // B/s, the sub-6 cell
		base   = 40 * time.Millisecond
		bdp    = rate / 25 // 200000 B at 40 ms
		buffer = bdp * 8 / 10
		cwnd   = 2_000_000 // the mmWave window
		mss    = 1000
		step   = 200 * time.Microsecond // one segment per step at 5 MB/s
	)
	run := func(sMax int) (drops, rwndMax, delivered int) {
		db := testDB()
		db.Observe(cell(sub6, "C"), sMax)
		// No signalling during the dwell: keep it from counting as lost.
		c := New(Config{SMaxDB: db, SignalLoss: time.Hour})
		var f Flow
		c.Attach(at(0), &f)
		c.OnEvent(at(0), command(signaling.HOIntraNR, mmw, "M"))
		c.OnEvent(at(30), raEv(signaling.RASuccess, signaling.RAHandover))
		c.Tick(at(300))
		c.OnEvent(at(1000), command(signaling.HOIntraNR, sub6, "C"))
		c.OnEvent(at(1030), raEv(signaling.RASuccess, signaling.RAHandover))
		c.Tick(at(1300))
		if c.State() != Stable || !c.eqn2Armed {
			t.Fatalf("state %v armed %v", c.State(), c.eqn2Armed)
		}
		// The loop: segments leave the server when una+rwnd allows,
		// queue at the cell (FIFO, tail drop at buffer), are served at
		// rate, reach the phone base/2 after leaving the server plus
		// queueing; the phone's ACK (with TSval) reaches the server
		// base/2 later carrying the controller's window.
		type seg struct {
			seq  int
			at   time.Duration // arrival at the cell
			tsec uint32
		}
		type ackMsg struct {
			at   time.Duration
			ack  int
			rwnd int
			ts   uint32
		}
		var toCell, queue []seg // on the way to the cell, at the cell
		var acks []ackMsg
		var toPhone []seg // served, on their way to the phone
		start := 1300 * time.Millisecond
		// The flow enters the dwell as Smoothing leaves it: with the
		// window the controller gives its first ACK in C.
		nextSeq, una, rwnd := 0, 0, 65535<<7
		if v := c.OnPacket(at(0).Add(start), &f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: 1}); v.Action == Rewrite {
			rwnd = int(v.Window) << 7
		}
		recvNext := 0
		var tsEcho uint32
		var lastServe time.Duration
		ooo := map[int]bool{}
		for now := start; now < start+5*time.Second; now += step {
			// Server: ACKs arrive.
			for len(acks) > 0 && acks[0].at <= now {
				a := acks[0]
				acks = acks[1:]
				if a.ack > una {
					una = a.ack
				}
				rwnd = a.rwnd
				tsEcho = a.ts
				rwndMax = max(rwndMax, rwnd)
			}
			// Server sends what cwnd and rwnd allow (no growth, no loss
			// response: the test counts the drops that would cut it).
			for nextSeq+mss <= una+min(cwnd, rwnd) {
				toCell = append(toCell, seg{seq: nextSeq, at: now + base/4, tsec: tsEcho})
				nextSeq += mss
			}
			// Arrivals at the cell: FIFO, tail drop at the buffer.
			for len(toCell) > 0 && toCell[0].at <= now {
				s := toCell[0]
				toCell = toCell[1:]
				if len(queue)*mss+mss > buffer {
					drops++
					continue
				}
				queue = append(queue, s)
			}
			// The cell serves one segment per step.
			if len(queue) > 0 && now-lastServe >= step {
				lastServe = now
				s := queue[0]
				queue = queue[1:]
				s.at = now + base/4
				toPhone = append(toPhone, s)
			}
			// The phone: data arrives, the laptop ACKs at once.
			for len(toPhone) > 0 && toPhone[0].at <= now {
				s := toPhone[0]
				toPhone = toPhone[1:]
				c.OnPacket(at(0).Add(now), &f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: uint32(s.seq), PayloadLen: mss, WScale: 7, HasTS: true, TSval: 1, TSecr: s.tsec})
				if s.seq == recvNext {
					recvNext += mss
					for ooo[recvNext] {
						delete(ooo, recvNext)
						recvNext += mss
					}
				} else {
					ooo[s.seq] = true
				}
				ts := uint32(now / time.Millisecond)
				p := &Packet{Dir: Uplink, Flags: FlagACK, Ack: uint32(recvNext), Window: 65535, WScale: 7, HasTS: true, TSval: ts}
				v := c.OnPacket(at(0).Add(now), &f, p)
				w := 65535 << 7
				if v.Action == Rewrite {
					w = int(v.Window) << 7
				}
				acks = append(acks, ackMsg{at: now + base/2, ack: recvNext, rwnd: w, ts: ts})
			}
		}
		return drops, rwndMax, recvNext
	}
	// ŝ_max(C) is a lower bound of the buffer: 0.9 of it.
	drops, rwndMax, delivered := run(buffer * 9 / 10)
	t.Logf("drops %d, largest rwnd %d B, delivered %d B in 5 s (capacity %d B)", drops, rwndMax, delivered, rate*5)
	if drops != 0 {
		t.Fatalf("%d segments dropped at the sub-6 buffer while Eqn 2 was armed", drops)
	}
	// Not by starving the link: the cell stays busy.
	if delivered < rate*5*95/100 {
		t.Fatalf("delivered %d B, under 95 %% of the capacity %d B", delivered, rate*5)
	}
}

// RTT_min (Eqn 2's RTT_min and the cap's pipe) is robust: a lone sample
// far under the path's (a stalled proxy stamps an ACK late) or far over
// it moves neither srtt much nor RTT_min; two in a row are a change and
// are followed; a sample that was too small ages out after one to two
// 10 s windows, and a path that got slower is followed.
func TestRTTMinFilter(t *testing.T) {
	var f Flow
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	f.addRTT(at(0), ms(70))
	f.addRTT(at(100), ms(72))
	f.addRTT(at(200), ms(8)) // lone low sample: the median is 70
	if s, m, n := f.RTT(); n != 3 || m != ms(70) || s < ms(70) || s > ms(71) {
		t.Fatalf("srtt %v min %v n %d after a lone low sample", s, m, n)
	}
	f.addRTT(at(300), ms(71))
	f.addRTT(at(400), ms(71))
	f.addRTT(at(500), ms(9)) // another lone one
	if _, m, _ := f.RTT(); m != ms(70) {
		t.Fatalf("min %v after two lone samples, want 70ms", m)
	}
	f.addRTT(at(600), ms(20)) // with the 9: two low of three, the path changed
	if _, m, _ := f.RTT(); m != ms(20) {
		t.Fatalf("min %v, want 20ms", m)
	}
	// The path is 70 ms again; the 20 ms sample is in the first window
	// (from 0) and the next (from 10 s, its own window's min is 70).
	f.addRTT(at(9_000), ms(70))
	f.addRTT(at(9_500), ms(70))
	f.addRTT(at(10_000), ms(70)) // window change: min = least of [0,10 s) = 20, next = 70
	if _, m, _ := f.RTT(); m != ms(20) {
		t.Fatalf("min %v at 10 s, want 20ms still", m)
	}
	f.addRTT(at(15_000), ms(71))
	f.addRTT(at(20_000), ms(72)) // window change: min = least of [10 s, 20 s) = 70
	if _, m, _ := f.RTT(); m != ms(70) {
		t.Fatalf("min %v at 20 s, want 70ms (the 20 ms sample aged out)", m)
	}
}

// After a queueing spike srtt comes back down with the path: the true
// samples are far under the spike's srtt and must not be taken for
// mismatches (a filter that rejected samples under srtt/4 kept srtt at
// 164.8 ms for 2 s on the bench while the path was back at 28 ms).
func TestRTTFollowsAfterSpike(t *testing.T) {
	var f Flow
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	for i := range 10 {
		f.addRTT(at(i*30), ms(28))
	}
	for i := range 10 { // a capacity dip: the queue holds 200 ms
		f.addRTT(at(300+i*200), ms(200))
	}
	if s, _, _ := f.RTT(); s < ms(120) {
		t.Fatalf("srtt %v during the spike", s)
	}
	for i := range 30 {
		f.addRTT(at(2300+i*30), ms(28))
	}
	if s, m, _ := f.RTT(); s > ms(35) || m != ms(28) {
		t.Fatalf("srtt %v min %v 30 samples after the spike, want ≤ 35ms, 28ms", s, m)
	}
}

// RTT_min is the current cell's: a handover starts it over, so a flow
// that comes from a 10 ms cell to a 40 ms one does not carry 10 ms
// (Eqn 2's pipe would be a quarter of the window in flight).
func TestRTTMinNewPath(t *testing.T) {
	var f Flow
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	for i := range 5 {
		f.addRTT(at(i*10), ms(10))
	}
	f.newPath()
	if _, m, _ := f.RTT(); m != 0 {
		t.Fatalf("min %v after newPath, want unknown", m)
	}
	for i := range 3 {
		f.addRTT(at(100+i*40), ms(40))
	}
	if _, m, _ := f.RTT(); m != ms(40) {
		t.Fatalf("min %v on the new path, want 40ms", m)
	}
}

// The burst estimate runs on the slots' own times: slot events that reach
// the controller in one bunch (a loaded phone reads the socket late) give
// the same ŝ_max as when they arrive on time. Here the slots of
// TestBurstsFeedDatabase all arrive at t = 100 ms: 4100 − 4100·2/12 =
// 3416 (not S = 4100, what D = 0 would give).
func TestBurstUsesSlotTimes(t *testing.T) {
	db := testDB()
	c := New(Config{SMaxDB: db})
	c.lastRTT = 12 * time.Millisecond
	A := cell(sub6, "A")
	for _, s := range []struct {
		ms    int
		rb    float64
		bytes int
	}{{0, 0, 0}, {10, 0.95, 4000}, {11, 0.3, 100}, {12, 0, 0}} {
		c.OnEvent(at(100), &signaling.Event{Time: at(s.ms), Kind: signaling.KindMACSlot, RBRatio: s.rb, Bytes: s.bytes, Serving: A})
	}
	if v, _ := db.Get(A); v != 3416 {
		t.Fatalf("ŝ_max(A) %d, want 3416", v)
	}
}
