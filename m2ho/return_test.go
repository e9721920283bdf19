package m2ho

import (
	"math"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho/bwe"
	"github.com/m2ho/m2ho/signaling"
)

// returnCase is a closed loop of one flow through the return sub-6 →
// mmWave after a sub-6 dwell under Eqn 2, on virtual time in mmWave
// slots: a sender with Linux CUBIC's stale-epoch growth, an mmWave
// bottleneck that serves slots as the emulator does (full slots, a
// partial one under 40 %, then an empty one) and reports them to the
// controller as MAC slot events, tail drop at its buffer, the laptop
// ACKing every segment at once, and the controller rewriting those ACKs.
//
// The sender: its cwnd is the window carried from mmWave (Linux CUBIC
// does not grow it while rwnd-limited, tcp_is_cwnd_limited), and its
// epoch is as old as the dwell, so whenever it is cwnd-limited it grows
// at CUBIC's cnt floor, one segment per two acknowledged (×1.5 per RTT).
// At the first duplicate ACK (the laptop's SACK of a hole) it enters
// recovery: cwnd ×0.7, its lost segments retransmitted at once, and the
// epoch is fresh from then on (bictcp_recalc_ssthresh), which the model
// takes as one segment per RTT (CUBIC's concave plateau near W_max).
type returnCase struct {
	rate   func(t time.Duration) float64 // B/s of the mmWave cell at t since random access
	base   time.Duration                 // the mmWave base RTT
	buffer int                           // the mmWave buffer, bytes
	cwnd   int                           // the window carried through the sub-6 dwell
	sMaxM  int                           // ŝ_max learned for the mmWave cell before (0: unknown)
	sMaxC  int                           // ŝ_max of the sub-6 cell: the fallback for an unknown mmWave cell
	// measured: sMaxM is a measured queue (SMaxDB.ObserveQueue), not a
	// burst estimate; rampQueue is Config.RampQueue (0: the default).
	measured  bool
	rampQueue float64
	dur       time.Duration
	// reorderAt > 0: from then on, every reorderEvery the link layer
	// delivers one segment after the next (a HARQ retransmission on the
	// air, RLC reordering): the laptop's duplicate ACK shows no loss.
	reorderAt, reorderEvery time.Duration
	// dwell is the sub-6 dwell (0: 2 s); from 8 s the flow's one-way
	// delay is measured (its sender's clock checked over two owdBuckets).
	dwell time.Duration
	// swing > 0: c_est's per-RTT samples alternate between 1 − swing
	// and 1 + swing times the bytes delivered (swingingRate).
	swing, swingCeil float64
	// lastRate: the ramp reads the last per-RTT sample alone
	// (Config.RampPairRate off).
	lastRate bool
	slotPipe Toggle // Config.SlotPipe
}

// swingingRate is M2HO's per-RTT estimator whose samples alternate
// between 1 − swing and 1 + swing times what was delivered: the bench's
// phone on its mixed drive (2026-12-05, run E, m2ho seed 3, the return at
// 181.30 s) measured 325, 685, 359, 514, 316, 594 Mbit/s in consecutive
// RTTs of a flow that received ~500 Mbit/s on a steady 1.1 Gbit/s cell:
// a window-limited flow arrives in one burst per RTT, and RTT-long
// intervals that close at the first segment after an srtt catch one
// burst and part of the next, then the rest.
//
// A sample is never above ceil, the cell's capacity: a flow that fills
// the cell arrives back to back, and there is no burst to alias.
type swingingRate struct {
	bwe.PerRTT
	swing, ceil float64
	last        float64
	odd         bool
}

func (e *swingingRate) Sample(now time.Time, bytes int, rtt time.Duration) {
	e.PerRTT.Sample(now, bytes, rtt)
	if r := e.PerRTT.Rate(); r != e.last {
		e.last, e.odd = r, !e.odd
	}
}

func (e *swingingRate) Rate() float64 {
	if e.odd {
		return e.last * (1 - e.swing)
	}
	return min(e.last*(1+e.swing), max(e.ceil, e.last))
}

func (e *swingingRate) Reset() { *e = swingingRate{swing: e.swing, ceil: e.ceil} }

type returnResult struct {
	drops       int
	dropsAfter  int // drops after the first retransmission
	retransmits int
	delivered   int     // bytes in order since random access
	capacity    float64 // bytes the cell could have served
	// fillRTT is the first base-RTT bin after random access whose
	// deliveries reach 80 % of the cell's capacity in it (-1: none).
	fillRTT   int
	bins      []float64 // utilisation per base-RTT bin
	rwndMax   int
	rwndLast  int // the largest rwnd in the last 100 ms
	sMaxM     int // ŝ_max(M) at the end
	reordered int
	// reach75 is the end of the first 0.1 s bin from random access whose
	// deliveries reach 75 % of the cell's capacity in it, as the bench
	// judges a return (-1: none).
	reach75 time.Duration
}

// debugReturn logs the loop every 10 ms for its first 400 ms.
const debugReturn = false

func runReturn(t *testing.T, rc returnCase) returnResult {
	t.Helper()
	const (
		mss  = 1448 // not a divisor of the slot's bytes: a drained queue ends in a partial slot
		slot = 125 * time.Microsecond
		open = 65535 << 7 // the laptop's own window
	)
	M := cell(mmw, "M")
	db := NewSMaxDB()
	db.Observe(cell(sub6, "C"), rc.sMaxC)
	switch {
	case rc.sMaxM > 0 && rc.measured:
		db.ObserveQueue(M, rc.sMaxM)
	case rc.sMaxM > 0:
		db.Observe(M, rc.sMaxM)
	}
	cfg := Config{SMaxDB: db, SignalLoss: time.Hour, RampQueue: rc.rampQueue, SlotPipe: rc.slotPipe}
	if rc.lastRate {
		cfg.RampPairRate = ToggleOff
	}
	if rc.swing > 0 {
		cfg.Estimator = func() bwe.Estimator { return &swingingRate{swing: rc.swing, ceil: rc.swingCeil} }
	}
	c := New(cfg)
	var f Flow
	c.Attach(at(0), &f)
	// mmWave M0, then down to sub-6 C: Eqn 2 armed.
	c.OnEvent(at(0), command(signaling.HOIntraNR, mmw, "M0"))
	c.OnEvent(at(30), raEv(signaling.RASuccess, signaling.RAHandover))
	c.Tick(at(300))
	c.OnEvent(at(1000), command(signaling.HOIntraNR, sub6, "C"))
	c.OnEvent(at(1030), raEv(signaling.RASuccess, signaling.RAHandover))
	c.Tick(at(1300))
	dwell := rc.dwell
	if dwell == 0 {
		dwell = 2 * time.Second
	}
	back := int(1000 + dwell.Milliseconds())
	ts := uint32(1)
	for ms := 1300; ms < back; ms += 20 { // RTT samples on C, segments stamped by the sender's 1 ms clock
		ts++
		c.OnPacket(at(ms), &f, &Packet{Dir: Uplink, Flags: FlagACK, Window: 65535, WScale: 7, HasTS: true, TSval: ts})
		c.OnPacket(at(ms).Add(40*time.Millisecond), &f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: uint32(ms), PayloadLen: 1, WScale: 7, HasTS: true, TSval: uint32(ms), TSecr: ts})
	}
	if c.State() != Stable || !c.eqn2Armed {
		t.Fatalf("before the return: state %v armed %v", c.State(), c.eqn2Armed)
	}
	// The return: command, random access 30 ms later; the loop starts
	// there, with the flow's data on M (seq from 1<<20: above what it had).
	c.OnEvent(at(back), command(signaling.HOIntraNR, mmw, "M"))
	start := time.Duration(back+30) * time.Millisecond
	c.OnEvent(at(0).Add(start), raEv(signaling.RASuccess, signaling.RAHandover))

	type seg struct {
		seq       int
		at        time.Duration
		tsv, tsec uint32 // the sender's TSval (its 1 ms clock at sending) and echo
	}
	type ackMsg struct {
		at       time.Duration
		ack, wnd int
		dup      bool
		ts       uint32
	}
	const seq0 = 1 << 20
	var toCell, queue, toPhone []seg
	var acks []ackMsg
	var lost []int
	cwnd, stale, inRec, recEnd := rc.cwnd, true, false, 0
	// The laptop's first ACK on M reaches the sender half an RTT later;
	// until then nothing is sent.
	nextSeq, una, rwnd := seq0, seq0, 0
	first := open
	if v := c.OnPacket(at(0).Add(start), &f, &Packet{Dir: Uplink, Flags: FlagACK, Ack: seq0, Window: 65535, WScale: 7, HasTS: true, TSval: ts + 1}); v.Action == Rewrite {
		first = int(v.Window) << 7
	}
	acks = append(acks, ackMsg{at: start + rc.base/2, ack: seq0, wnd: first, ts: ts + 1})
	tsEcho := ts + 1
	r := returnResult{fillRTT: -1, reach75: -1}
	var tenthCap, tenthDel float64
	recvNext := seq0
	ooo := map[int]bool{}
	queued, headSent := 0, 0
	busy := false
	var held *seg // a segment the link layer delivers after the next
	nextReorder := rc.reorderAt
	binLen := rc.base
	var binCap, binDel float64
	for now := start; now < start+rc.dur; now += slot {
		el := now - start
		for len(acks) > 0 && acks[0].at <= now {
			a := acks[0]
			acks = acks[1:]
			rwnd, tsEcho = a.wnd, a.ts
			r.rwndMax = max(r.rwndMax, rwnd)
			if el >= rc.dur-100*time.Millisecond {
				r.rwndLast = max(r.rwndLast, rwnd)
			}
			if a.ack > una {
				acked := a.ack - una
				una = a.ack
				if cwnd <= rwnd+mss { // cwnd-limited: congestion avoidance runs
					if stale {
						cwnd += acked / 2
					} else {
						cwnd += mss * acked / cwnd
					}
				}
				if inRec && una >= recEnd {
					inRec = false
				}
			}
			if a.dup && len(lost) > 0 {
				if !inRec {
					inRec, recEnd, stale = true, nextSeq, false
					cwnd = cwnd * 7 / 10
				}
				for _, s := range lost {
					toCell = append(toCell, seg{seq: s, at: now + rc.base/4, tsv: uint32(now/time.Millisecond) + 1, tsec: tsEcho})
					r.retransmits++
				}
				lost = lost[:0]
			}
		}
		for nextSeq+mss <= una+min(cwnd, rwnd) {
			toCell = append(toCell, seg{seq: nextSeq, at: now + rc.base/4, tsv: uint32(now/time.Millisecond) + 1, tsec: tsEcho})
			nextSeq += mss
		}
		for len(toCell) > 0 && toCell[0].at <= now {
			s := toCell[0]
			toCell = toCell[1:]
			if queued+mss > rc.buffer {
				r.drops++
				if r.retransmits > 0 {
					r.dropsAfter++
				}
				lost = append(lost, s.seq)
				continue
			}
			queue = append(queue, s)
			queued += mss
		}
		// One slot [now, now+slot), as the emulator serves it.
		capB := int(rc.rate(el) * slot.Seconds())
		r.capacity += float64(capB)
		binCap += float64(capB)
		tenthCap += float64(capB)
		send, rem := 0, queued-headSent
		switch {
		case rem >= capB:
			send = capB
		case rem*10 > capB*4:
			send = rem - capB*3/10
		default:
			send = rem
		}
		sent := send
		for send > 0 && len(queue) > 0 {
			need := mss - headSent
			if send < need {
				headSent += send
				break
			}
			send -= need
			headSent = 0
			s := queue[0]
			queue = queue[1:]
			queued -= mss
			s.at = now + slot + rc.base/4
			if held != nil {
				toPhone = append(toPhone, s, *held)
				held = nil
				continue
			}
			if rc.reorderAt > 0 && el >= nextReorder {
				nextReorder = el + rc.reorderEvery
				h := s
				held = &h
				r.reordered++
				continue
			}
			toPhone = append(toPhone, s)
		}
		if sent > 0 || busy {
			c.OnEvent(at(0).Add(now+slot), &signaling.Event{Time: at(0).Add(now + slot), Kind: signaling.KindMACSlot,
				RBRatio: float64(sent) / float64(capB), Bytes: sent, Serving: M})
		}
		busy = sent > 0
		for len(toPhone) > 0 && toPhone[0].at <= now {
			s := toPhone[0]
			toPhone = toPhone[1:]
			c.OnPacket(at(0).Add(now), &f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: uint32(s.seq), PayloadLen: mss, WScale: 7, HasTS: true, TSval: s.tsv, TSecr: s.tsec})
			dup := false
			switch {
			case s.seq == recvNext:
				recvNext += mss
				binDel += mss
				tenthDel += mss
				for ooo[recvNext] {
					delete(ooo, recvNext)
					recvNext += mss
					binDel += mss
					tenthDel += mss
				}
			case s.seq > recvNext:
				ooo[s.seq], dup = true, true
			}
			tv := uint32(now/time.Millisecond) + 100
			p := &Packet{Dir: Uplink, Flags: FlagACK, Ack: uint32(recvNext), Window: 65535, WScale: 7, HasTS: true, TSval: tv}
			v := c.OnPacket(at(0).Add(now), &f, p)
			w := open
			if v.Action == Rewrite {
				w = int(v.Window) << 7
			}
			acks = append(acks, ackMsg{at: now + rc.base/2, ack: recvNext, wnd: w, dup: dup, ts: tv})
		}
		if debugReturn && el%(10*time.Millisecond) == 0 && el < 400*time.Millisecond {
			t.Logf("t=%v state %v rate %.0f srtt %v rttMin %v n %d rwnd %d cwnd %d inflight %d queued %d eq2Last %.0f cap %d", el, c.State(), c.est.Rate(), f.srtt, f.rttMin, f.rttN, rwnd, cwnd, nextSeq-una, queued, f.eq2Last, c.stableCap)
		}
		if (el+slot)%(100*time.Millisecond) == 0 {
			if r.reach75 < 0 && tenthCap > 0 && tenthDel >= 0.75*tenthCap {
				r.reach75 = el + slot
			}
			tenthCap, tenthDel = 0, 0
		}
		if (el+slot)%binLen == 0 {
			u := binDel / binCap
			r.bins = append(r.bins, u)
			if r.fillRTT < 0 && u >= 0.8 {
				r.fillRTT = len(r.bins) - 1
			}
			binCap, binDel = 0, 0
		}
	}
	r.delivered = recvNext - seq0
	r.sMaxM, _ = db.Get(M)
	return r
}

func (r returnResult) util() float64 { return float64(r.delivered) / r.capacity }

// The return to mmWave (§4.5) carries the window and fills the cell
// without overflowing its buffer: released at once, a window carried at
// a quarter of the mmWave pipe grows ×1.5 per RTT at the stale epoch's
// cnt floor and overflows the buffer by thousands of segments (the bench:
// 7014 drops at one return at scale 1), and a carried window above pipe plus
// buffer overflows it at once; the ramp (rwnd ≤ rate·RTT_min + ŝ_max,
// rising ŝ_max per RTT) fills the cell within a few RTTs and drops
// nothing, with the cell's own ŝ_max (learned on an earlier visit) or
// with the sub-6 fallback for a cell never seen (then in tens of RTTs).
func TestReturnToMmWaveNoOverflow(t *testing.T) {
	const rate = 40_000_000 // B/s: the bench's n261 at scale 0.3
	base := 27 * time.Millisecond
	bdp := int(rate * base.Seconds()) // 1080000 B
	buffer := 650_000                 // 0.6 BDP, as the bench's n261
	constant := func(time.Duration) float64 { return rate }
	// fillMax counts base-RTT bins from random access: the first ACK's
	// half RTT, Smoothing's clamp until the first burst ends, c_est's
	// first complete interval (one srtt, still the sub-6 one), then
	// ŝ_max per RTT.
	for _, tc := range []struct {
		name    string
		rc      returnCase
		fillMax int // base RTTs from random access to a bin at ≥ 80 %
	}{
		{"carried a quarter of the pipe, ŝ_max(M) known", returnCase{rate: constant, base: base, buffer: buffer, cwnd: bdp / 4,
			sMaxM: buffer / 2, sMaxC: 60_000, dur: 2 * time.Second}, 8},
		{"carried above pipe plus buffer, ŝ_max(M) known", returnCase{rate: constant, base: base, buffer: buffer, cwnd: 2 * (bdp + buffer),
			sMaxM: buffer / 2, sMaxC: 60_000, dur: 2 * time.Second}, 8},
		{"carried half the pipe, M unknown: the sub-6 fallback", returnCase{rate: constant, base: base, buffer: buffer, cwnd: bdp / 2,
			sMaxC: 60_000, dur: 2 * time.Second}, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runReturn(t, tc.rc)
			t.Logf("drops %d, retransmits %d, filled (≥ 80 %%) in RTT bin %d, delivered %d B, %.1f %% of capacity, largest rwnd %d B, ŝ_max(M) at the end %d B",
				r.drops, r.retransmits, r.fillRTT, r.delivered, 100*r.util(), r.rwndMax, r.sMaxM)
			if r.drops != 0 {
				t.Errorf("%d drops at the mmWave buffer after the return", r.drops)
			}
			if r.fillRTT < 0 || r.fillRTT > tc.fillMax {
				t.Errorf("the cell reached 80 %% in RTT bin %d, want ≤ %d (bins %.2f)", r.fillRTT, tc.fillMax, r.bins[:min(len(r.bins), 12)])
			}
			// After the fill it stays full.
			if r.fillRTT >= 0 {
				var s float64
				tail := r.bins[r.fillRTT+1:]
				for _, u := range tail {
					s += u
				}
				if m := s / float64(len(tail)); m < 0.9 {
					t.Errorf("after the fill the cell carried %.1f %% of its capacity, want ≥ 90 %%", 100*m)
				}
			}
			if r.sMaxM > buffer {
				t.Errorf("ŝ_max(M) %d above the buffer %d", r.sMaxM, buffer)
			}
			if tc.rc.sMaxM == 0 && r.sMaxM == 0 {
				t.Errorf("ŝ_max(M) not learned from the bursts on M")
			}
		})
	}
}

// A loss on mmWave after the return (the cell's capacity halves for
// 100 ms, as the measured mmWave cells do) makes the sender retransmit:
// its CUBIC epoch starts over, and the ramp lets the flow go; what the
// drop cost is bounded by the dip, and the flow is then plain CUBIC on
// mmWave (§4.5).
func TestReturnToMmWaveLetsGoAfterLoss(t *testing.T) {
	base := 27 * time.Millisecond
	rate := func(el time.Duration) float64 {
		if el >= 1000*time.Millisecond && el < 1100*time.Millisecond {
			return 10_000_000
		}
		return 40_000_000
	}
	r := runReturn(t, returnCase{rate: rate, base: base, buffer: 650_000, cwnd: 540_000,
		sMaxM: 325_000, sMaxC: 60_000, dur: 3 * time.Second})
	t.Logf("drops %d (%d after the first retransmission), retransmits %d, delivered %.1f %%, rwnd in the last 100 ms %d B",
		r.drops, r.dropsAfter, r.retransmits, 100*r.util(), r.rwndLast)
	if r.retransmits == 0 {
		t.Fatal("no loss: the case tests nothing")
	}
	if r.rwndLast != 65535<<7 {
		t.Errorf("rwnd %d in the last 100 ms: the ramp did not let go after the sender's recovery", r.rwndLast)
	}
}

// Link-layer reordering on mmWave (a HARQ retransmission on the air, RLC
// reordering) is not the sender's retransmission: a segment that arrives
// after the next one carries an older TSval (or the same one, within a
// tick's worth of data of the highest), its duplicate ACK shows no loss,
// the sender's CUBIC epoch is as stale as before, and the ramp goes on
// holding the flow. Let go at the late segment (data below the highest
// seen), the stale window replaced the ramp's at once: on the bench's
// mixed drive (rate bound, seed 1, the return at 207.15 s) the ramp ended
// with no retransmission, the sender's 1.9 MB cwnd replaced a 0.7 MB rwnd
// and the mmWave buffer dropped 740 segments within 0.1 s.
func TestReturnToMmWaveReorderingHolds(t *testing.T) {
	const rate = 40_000_000
	base := 27 * time.Millisecond
	bdp := int(rate * base.Seconds())
	buffer := 650_000
	r := runReturn(t, returnCase{rate: func(time.Duration) float64 { return rate }, base: base, buffer: buffer,
		cwnd: 2 * (bdp + buffer), sMaxM: buffer / 2, sMaxC: 60_000, dur: 2 * time.Second,
		reorderAt: 300 * time.Millisecond, reorderEvery: 50 * time.Millisecond})
	t.Logf("reordered %d, drops %d, retransmits %d, filled in RTT bin %d, %.1f %% of capacity, rwnd in the last 100 ms %d B",
		r.reordered, r.drops, r.retransmits, r.fillRTT, 100*r.util(), r.rwndLast)
	if r.reordered == 0 {
		t.Fatal("nothing reordered: the case tests nothing")
	}
	if r.drops != 0 {
		t.Errorf("%d drops at the mmWave buffer: the ramp let go of a stale epoch at a reordered segment", r.drops)
	}
	if r.rwndLast >= 65535<<7 {
		t.Errorf("rwnd %d in the last 100 ms: the ramp let go without a retransmission", r.rwndLast)
	}
}

// A sender that retransmitted on mmWave after the return has a fresh
// CUBIC epoch, but its cwnd, cut to 0.7 of a stale window carried at
// twice the pipe plus the buffer, still exceeds both: let go at the
// retransmission, it sends the excess at once and the buffer overflows
// again (2457 drops after the first retransmission). The ramp holds such
// a flow until it leaves the window unused (cwnd-limited).
func TestReturnToMmWaveFreshEpochHeld(t *testing.T) {
	base := 27 * time.Millisecond
	rate := func(el time.Duration) float64 {
		if el >= 1000*time.Millisecond && el < 1100*time.Millisecond {
			return 10_000_000
		}
		return 40_000_000
	}
	bdp := int(40_000_000 * base.Seconds())
	r := runReturn(t, returnCase{rate: rate, base: base, buffer: 650_000, cwnd: 2 * (bdp + 650_000),
		sMaxM: 325_000, sMaxC: 60_000, dur: 3 * time.Second})
	t.Logf("drops %d (%d after the first retransmission), retransmits %d, delivered %.1f %%, rwnd in the last 100 ms %d B",
		r.drops, r.dropsAfter, r.retransmits, 100*r.util(), r.rwndLast)
	if r.retransmits == 0 {
		t.Fatal("no loss: the case tests nothing")
	}
	// What the dip itself drops is the dip's; after the sender's recovery
	// nothing more: the dip's own drops come within one RTT of it.
	if r.dropsAfter > r.drops/2 {
		t.Errorf("%d of %d drops after the first retransmission: the ramp let go of a window above pipe plus buffer", r.dropsAfter, r.drops)
	}
	if u := r.util(); u < 0.85 {
		t.Errorf("delivered %.1f %% of the capacity, want ≥ 85 %%", 100*u)
	}
}

// A measured ŝ_max(M) is the mmWave buffer within a few percent, and the
// ramp's window is the pipe plus a standing queue of its RampQueue share:
// a capacity dip during the ramp (the measured mmWave cells lose 40-50 %
// for 0.1 s) adds (r − r')·RTT to that queue before the rate the window
// follows has fallen. On the bench's mixed drive (2026-12-02, run E, the
// return at 207.15 s of seed 1) the ramp held 1.5 MB in flight, the
// pipe plus two thirds of the 695 KB buffer, and a dip from 330 to 190
// Mbit/s dropped 149 segments and cut the carried 1.95 MB cwnd by 30 %
// before the ramp let go. A dip to a fraction d of the rate adds
// (1 − d)·rate·RTT_min to the queue, so a standing queue Q survives it
// while Q + (1 − d)·BDP fits the buffer: here (a 0.6 BDP buffer, as the
// bench's n261) a dip to 0.7 overflows two thirds of it and not a third,
// which still fills the cell within a few RTTs; a dip to 0.55 overflows
// both (445 and 112 drops), and only a window held to the dip's rate
// (the envelope, which would take the ramp tens of RTTs) survives it.
func TestReturnToMmWaveMeasuredHeadroom(t *testing.T) {
	const rate = 40_000_000
	base := 27 * time.Millisecond
	bdp := int(rate * base.Seconds())
	buffer := 650_000
	dip := func(el time.Duration) float64 {
		if el >= 600*time.Millisecond && el < 700*time.Millisecond {
			return rate * 0.7
		}
		return rate
	}
	run := func(share float64) returnResult {
		r := runReturn(t, returnCase{rate: dip, base: base, buffer: buffer, cwnd: 2 * bdp,
			sMaxM: buffer * 97 / 100, measured: true, rampQueue: share, sMaxC: 60_000, dur: 1500 * time.Millisecond})
		t.Logf("ramp queue %.2f of ŝ_max(M): drops %d, retransmits %d, filled (≥ 80 %%) in RTT bin %d, delivered %.1f %%, largest rwnd %d B",
			share, r.drops, r.retransmits, r.fillRTT, 100*r.util(), r.rwndMax)
		return r
	}
	whole, third := run(2.0/3), run(1.0/3)
	if whole.drops == 0 {
		t.Fatalf("two thirds of the buffer dropped nothing at the dip: the case tests nothing")
	}
	if third.drops != 0 {
		t.Errorf("a third of the buffer: %d drops at the dip", third.drops)
	}
	if third.fillRTT < 0 || third.fillRTT > 10 {
		t.Errorf("a third of the buffer: the cell reached 80 %% in RTT bin %d, want ≤ 10", third.fillRTT)
	}
}

// mmWaveModel is the emulator's mmWave capacity model (bench/emu
// MeasuredVariability: quantiles of capacity over the type's mean, a fast
// and a slow AR(1) component), every 0.1 s, around mean B/s.
func mmWaveModel(mean float64, dur time.Duration, seed uint64) func(time.Duration) float64 {
	q := []float64{0, 0.064, 0.149, 0.254, 0.440, 0.652, 0.803, 0.935, 1.042, 1.130, 1.212,
		1.254, 1.269, 1.282, 1.294, 1.310, 1.333, 1.378, 1.442, 1.580, 4.537}
	return capacityModel(q, 0.220, 0.933, 0.785, mean, dur, seed)
}

// The return to mmWave on the emulator's mmWave capacity model at scale
// 1.0 (1018.8 Mbit/s mean, 26.8 ms base RTT, 2318 KB buffer, ŝ_max(M)
// measured at 97 % of it), a window carried at 2.5 MB (under the mean
// pipe of 3.4 MB) or 6 MB: issue 9 wants a 0.1 s bin at 75 % of the
// capacity within 1 s of random access, and the ramp gets there in every
// return (want 18 of 20: the cell is blocked, under a quarter of its
// mean, in 15 % of its 0.1 s intervals). It does not keep the buffer:
// ~750 drops per return before the sender's first retransmission (a
// fall from 1.3 Gbit/s to blockage within 0.1 s queues the whole pipe),
// ~1400 more after it lets go, what any sender meets there. And the same
// with the phone's rate samples swinging ±50 % (swingingRate, the bench's
// phone) and the flow's one-way delay measured (a 9 s dwell): the ramp
// on the pair of samples (pairRate) gets there in 19 of 20, on the last
// sample alone in 14 of 20.
func TestReturnToMmWaveVaryingCapacity(t *testing.T) {
	const buf = 2_318_000
	mean := 1018.8e6 / 8
	for _, tc := range []struct {
		name  string
		swing float64
		dwell time.Duration
	}{
		{"steady samples", 0, 0},
		{"samples swinging ±50 %, one-way delay measured", 0.5, 9 * time.Second},
	} {
		for _, cwnd := range []int{2_500_000, 6_000_000} {
			reached, n, drops, before := 0, 0, 0, 0
			var util float64
			for seed := uint64(1); seed <= 20; seed++ {
				r := runReturn(t, returnCase{rate: mmWaveModel(mean, 2*time.Second, seed), base: 26800 * time.Microsecond, buffer: buf,
					cwnd: cwnd, sMaxM: buf * 97 / 100, sMaxC: 1_300_000, measured: true, dur: 2 * time.Second,
					swing: tc.swing, swingCeil: math.Inf(1), dwell: tc.dwell})
				if r.reach75 >= 0 && r.reach75 <= time.Second {
					reached++
				}
				n++
				drops += r.drops
				before += r.drops - r.dropsAfter
				util += r.util()
			}
			t.Logf("%s, carried %d B: a 0.1 s bin at 75 %% within 1 s in %d of %d returns, %d drops (%d before the first retransmission), %.1f %% of the capacity over 2 s",
				tc.name, cwnd, reached, n, drops, before, 100*util/float64(n))
			if reached < 18 {
				t.Errorf("%s, carried %d B: a 0.1 s bin at 75 %% of the capacity within 1 s in %d of %d returns, want at least 18", tc.name, cwnd, reached, n)
			}
		}
	}
}

// A flow carried back to a steady mmWave cell (the bench's n261-b at
// 1.1 Gbit/s, 26.8 ms, 2318 KB buffer, ŝ_max measured at 97 %) with a
// window of 2.3 MB, under the pipe, as at the bench's return at 181.30 s
// (mixed drive, 2026-12-05, run E, m2ho seed 3): the phone's per-RTT rate
// samples swing ±50 % around what the flow receives (swingingRate; never
// above the cell's capacity). On the last sample alone every low one cuts
// Eqn 2's window below what the flow has in flight, and the ramp holds it
// near half the cell (58 % of the capacity over 2 s, as the bench's 489
// Mbit/s); on the pair of samples (pairRate) it fills the cell within a
// few RTTs and drops nothing. Without the slot pipe (Config.SlotPipe),
// which would fill the cell on either (94.7 % on the last sample alone):
// this is pairRate's own case.
func TestReturnToMmWaveSwingingRate(t *testing.T) {
	const buf = 2_318_000
	rate := 1100e6 / 8
	run := func(last bool) returnResult {
		r := runReturn(t, returnCase{rate: func(time.Duration) float64 { return rate }, base: 26800 * time.Microsecond, buffer: buf,
			cwnd: 2_300_000, sMaxM: buf * 97 / 100, sMaxC: 1_300_000, measured: true, dur: 2 * time.Second,
			swing: 0.5, swingCeil: rate, dwell: 9 * time.Second, lastRate: last, slotPipe: ToggleOff})
		t.Logf("last sample alone %v: 75 %% at %v, drops %d, %.1f %% of the capacity, RTT bins %.2f", last, r.reach75, r.drops, 100*r.util(), r.bins[:min(len(r.bins), 12)])
		return r
	}
	pair, last := run(false), run(true)
	if last.util() > 0.7 {
		t.Fatalf("on the last sample alone the ramp used %.1f %% of the cell: the case tests nothing", 100*last.util())
	}
	if pair.reach75 < 0 || pair.reach75 > 500*time.Millisecond {
		t.Errorf("75 %% of the capacity at %v, want within 0.5 s", pair.reach75)
	}
	if u := pair.util(); u < 0.9 {
		t.Errorf("%.1f %% of the capacity over 2 s, want ≥ 90 %%", 100*u)
	}
	if pair.drops != 0 {
		t.Errorf("%d drops at the mmWave buffer", pair.drops)
	}
}

// The pair of rate samples is the cell's: a handover forgets it with
// c_est, so the ramp's first windows in the new cell never read the old
// cell's rate (they hold the flow to ŝ_max until the new one is known).
func TestPairRateForgetsThePreviousCell(t *testing.T) {
	c := New(Config{SMaxDB: NewSMaxDB()})
	c.lastRTT = 10 * time.Millisecond
	var f Flow
	c.Attach(at(0), &f)
	for ms := 0; ms < 35; ms++ {
		c.OnPacket(at(ms), &f, &Packet{Dir: Downlink, Flags: FlagACK, Seq: uint32(1 + ms*1000), PayloadLen: 1000 + 100*ms})
	}
	if c.ratePrev <= 0 || c.rateLast <= 0 || c.pairRate() == c.est.Rate() {
		t.Fatalf("after 35 ms of data: samples %.0f, %.0f, pair %.0f, c_est %.0f: want two samples and their mean", c.ratePrev, c.rateLast, c.pairRate(), c.est.Rate())
	}
	c.OnEvent(at(40), command(signaling.HOIntraNR, mmw, "M"))
	c.OnEvent(at(70), raEv(signaling.RASuccess, signaling.RAHandover))
	if got := c.pairRate(); got != 0 {
		t.Fatalf("after the handover, before any data in the new cell: pair rate %.0f, want 0", got)
	}
}

// On the ramp back into an mmWave cell, the pipe its MAC slots show
// (Config.SlotPipe) lets the window grow toward it while nothing queues,
// at most doubling per RTT: where the cell's own ŝ_max is unknown and
// the sub-6 fallback (60 KB) paces the ramp, the cell fills in half the
// RTTs, with no drop; where it is known, no slower.
func TestReturnToMmWaveSlotPipe(t *testing.T) {
	const rate = 40_000_000 // B/s
	base := 27 * time.Millisecond
	bdp := int(rate * base.Seconds())
	buffer := 650_000
	constant := func(time.Duration) float64 { return rate }
	for _, tc := range []struct {
		name string
		rc   returnCase
		want int // fill RTT bin with the slot pipe, at most
	}{
		{"M unknown, carried half the pipe", returnCase{cwnd: bdp / 2, sMaxC: 60_000}, 12},
		{"M unknown, carried twice the pipe", returnCase{cwnd: 2 * bdp, sMaxC: 60_000}, 12},
		{"ŝ_max(M) known, carried a quarter of the pipe", returnCase{cwnd: bdp / 4, sMaxM: buffer / 2, sMaxC: 60_000}, 7},
	} {
		var res [2]returnResult
		for i, on := range []Toggle{ToggleOff, ToggleOn} {
			rc := tc.rc
			rc.rate, rc.base, rc.buffer, rc.dur, rc.slotPipe = constant, base, buffer, 2*time.Second, on
			res[i] = runReturn(t, rc)
		}
		t.Logf("%s: filled (≥ 80 %%) in RTT bin %d (%d without), 75 %% at %v (%v), drops %d (%d)",
			tc.name, res[1].fillRTT, res[0].fillRTT, res[1].reach75, res[0].reach75, res[1].drops, res[0].drops)
		if res[1].drops > res[0].drops {
			t.Errorf("%s: %d drops with the slot pipe, %d without", tc.name, res[1].drops, res[0].drops)
		}
		if res[1].fillRTT < 0 || res[1].fillRTT > tc.want || res[0].fillRTT >= 0 && res[1].fillRTT > res[0].fillRTT {
			t.Errorf("%s: filled in RTT bin %d (%d without), want ≤ %d", tc.name, res[1].fillRTT, res[0].fillRTT, tc.want)
		}
	}
}
