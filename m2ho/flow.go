package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/proxy/packet"
)

// tsRing is how many uplink TSvals a flow remembers for RTT matching. The
// server echoes the TSval of the latest ACK it took (RFC 7323 ts_recent),
// so the echo of a TSval reaches the phone one RTT after the ACK left it;
// at Linux's 1 ms timestamp clock a flow sends up to one new TSval per
// millisecond, 70 per RTT on 5G. Recording every one would push the
// matching one out of the ring before its echo comes back; once the RTT
// is known a new TSval is recorded only tsRing/2 times per smoothed RTT
// (see recordTSval), so the ring spans two RTTs, and before the first
// sample every tsSpacingNoRTT.
const tsRing = 8

// tsSpacingNoRTT spaces the recorded TSvals before the first RTT sample:
// the ring then spans 200 ms, more than any 5G round trip.
const tsSpacingNoRTT = 25 * time.Millisecond

// tsKeep is the least time an entry of the ring waits for its echo before
// a new TSval may take its place (see recordTSval): longer than any round
// trip the controller means to measure, short enough that a TSval the
// server never echoed (it had nothing to send in that tick) blocks its
// slot for at most that.
const tsKeep = time.Second

// Flow is the controller's per-flow state. The packet path owns the memory
// (one Flow embedded in each flow-table entry, so a new flow allocates
// nothing here) and hands it to the controller with every packet. Its zero
// value is a flow the controller does not know: Attach makes it live, and
// until then every packet of it passes. The packet path never reads or
// writes the fields; the pointer must stay valid from Attach to Detach.
type Flow struct {
	attached bool

	// Highest downlink sequence number seen, as seq+len of the segment
	// (the next byte expected), for Smoothing's release rule (a).
	high    uint32
	hasHigh bool

	// Smoothing (§4.4) for the command episode `episode`: snap is high as
	// it was at that handover command; released means this flow's ACKs
	// pass again (it acknowledged past snap, or had no data at the
	// command).
	episode  uint32
	snap     uint32
	released bool

	// lastEpoch is the active-flow epoch of the flow's last downlink
	// payload (0: never). See Controller.activeFlows.
	lastEpoch int64

	// RTT from TCP timestamps, measured on the phone: an uplink ACK
	// carrying TSval=X leaves at ts[i].at; the first downlink segment
	// echoing TSecr=X closes the phone→server→phone round trip.
	ts     [tsRing]tsSent
	tsNext uint8
	// The server's echoes (noteEcho): ecrPassed was echoed at least
	// tsPassed ago, so ring entries older than it are dead; ecrMark, seen
	// at ecrMarkAt, is the next.
	ecrPassed, ecrMark     uint32
	ecrMarkAt              time.Time
	ecrPassedOK, ecrMarkOK bool

	srtt time.Duration // smoothed, gain 1/8 (RFC 6298), of the median of three
	// rttMed is the latest median of three (a raw sample until the path
	// has three): the RTT now, without srtt's lag of a few round trips.
	rttMed time.Duration
	rttMin time.Duration // 0: not known on this path (see newPath)
	// rttMinPrev is RTT_min on the path before the last handover (0:
	// none): the in-flight bound's floor for RTT_min while the new
	// cell's first samples still carry the forwarded queue.
	rttMinPrev time.Duration
	rttN       uint32
	// rttLast are the last three samples, rttI the next slot; rttPathN
	// counts the samples since newPath up to 3 (RTT_min waits for three).
	rttLast  [3]time.Duration
	rttI     uint8
	rttPathN uint8
	// rttNext is the least sample since rttMinAt; each rttMinWindow it
	// becomes rttMin (see addRTT).
	rttNext  time.Duration
	rttMinAt time.Time

	// Eqn 2's last limit for this flow (bytes) and when it was set, in
	// command episode eq2Episode: the limit rises at a bounded pace (see
	// Controller.stableRwnd).
	eq2Last    float64
	eq2At      time.Time
	eq2Episode uint32
	// eq2Loss: the sender retransmitted while Eqn 2 held it in command
	// episode eq2LossEpisode (see eqn2PipeQueue).
	eq2Loss        bool
	eq2LossEpisode uint32

	// rampFree is the ramp (Controller.rampGen) this flow was let go
	// from: its sender retransmitted during it, or it started in it.
	rampFree uint32
	// rampFresh is the ramp during which this flow's sender retransmitted
	// (its CUBIC epoch restarted); it is let go once it also leaves the
	// ramp's window unused (see Controller.stableRwnd).
	rampFresh uint32
	// offered is the right edge of the uplink ACK being recorded (see
	// recordTSval), echoEdge that of the last one echoed and prevEdge of
	// the one before; unused is how far below prevEdge the sender's data
	// stayed (the window it left unused: 0 when it sent up to the edge),
	// unusedOK that it was measured (see Controller.downlink).
	offered, echoEdge, prevEdge uint32
	prevEdgeOK                  bool
	unused                      uint32
	unusedOK                    bool

	// held: the flow's last forwarded ACK carried a window the proxy
	// lowered, or its release is still opening it (Controller.release).
	held bool
	// relSince: when the release began (zero: none under way); unused
	// counts the echoes of ACKs forwarded since.
	relSince time.Time

	// The sender's right edge (see Controller.edgeFloor): edge is the
	// highest sequence number the sender may have sent, as far as the
	// phone can tell (hasEdge: known); inflight is the sender's bytes in
	// flight, measured at the last echo of a recorded ACK (0: unknown).
	edge     uint32
	hasEdge  bool
	inflight uint32

	// Loss recovery of the flow's sender, as the phone can tell (see
	// Controller.noteRecovery): highTS is the TSval of the segment that
	// set high; lastAck and dupN count the duplicate ACKs forwarded to
	// the sender; while recovering, until the laptop acknowledges
	// recoverPt, no ACK of the flow is suppressed.
	highTS     uint32
	lastAck    uint32
	hasLastAck bool
	dupN       uint8
	recovering bool
	recoverPt  uint32

	// owd is the one-way delay offset of the flow's downlink segments
	// (queue.go).
	owd owdState
	// lastWait is the last wait owd measured (its margin taken off), at
	// waitAt (see queueDelay).
	lastWait time.Duration
	waitAt   time.Time
}

// queueDelay is how long the flow's last downlink segment waited in the
// queue, as an estimate rather than queue.go's lower bound: owd's wait
// with its margin given back, less half a tick (a TSval is its send
// time rounded down, so a segment looks up to a tick later than it was,
// half a tick on average; the base's own segment, the least of seconds
// of them, rounds by about nothing). ok is false when no wait was
// measured within maxAge (the sender's clock unchecked, no timestamps,
// no data lately).
func (f *Flow) queueDelay(now time.Time, maxAge time.Duration) (time.Duration, bool) {
	if f.waitAt.IsZero() || now.Sub(f.waitAt) > maxAge {
		return 0, false
	}
	return max(f.lastWait+owdMargin-tsTick/2, 0), true
}

// isDupACK reports whether a pure ACK tells the sender nothing the last
// forwarded one did not, as far as the cumulative ACK goes: it does not
// advance lastAck (the highest cumulative ACK that left the phone; see
// noteRecovery). §4.4 suppresses the duplicate ACKs of the flush; an ACK
// that advances the cumulative ACK is not one, and dropping it stalls a
// sender that is repairing a real loss: in fast recovery Linux sends no
// loss probe (tcp_schedule_loss_probe: only in the Open state) and
// clocks its retransmissions by ACKs, so the ACKs of the forwarded queue
// can be the last it gets (the bench: measured drive bw-1, 9.13 s; see
// also Controller.inRecovery and lastNews, the other two exceptions).
func (f *Flow) isDupACK(p *Packet) bool {
	return p.IsPureACK() && f.hasLastAck && !packet.SeqLess(f.lastAck, p.Ack)
}

type tsSent struct {
	val   uint32
	ack   uint32 // the ACK's cumulative acknowledgment
	edge  uint32 // the right edge it offered the sender (ack + window as sent)
	at    time.Time
	valid bool // set, and not yet echoed
}

// recordTSval remembers when an uplink segment first carried val. Later
// ACKs carrying the same value keep the first time: the echo answers the
// earliest one the server took.
func (f *Flow) recordTSval(now time.Time, val, ack uint32) {
	last := &f.ts[(f.tsNext+tsRing-1)%tsRing]
	if last.val == val && !last.at.IsZero() {
		return
	}
	spacing := tsSpacingNoRTT
	if f.srtt > 0 {
		spacing = f.srtt / (tsRing / 2)
	}
	if last.valid && now.Sub(last.at) < spacing {
		return // the ring would not outlive the echo (tsRing)
	}
	if old := &f.ts[f.tsNext]; old.valid && now.Sub(old.at) < max(4*f.srtt, tsKeep) && !f.passed(now, old.val) {
		// The oldest entry's echo has not come yet: the round trip is
		// longer than the ring spans (2·srtt, or 200 ms before the first
		// sample). Overwriting it would lose every sample for as long as
		// that lasts, and srtt could never catch up: a path above 200 ms
		// from the start (LTE, a queue of seconds), or the RTT after a
		// capacity outage (on the bench 98 → 494 ms), left the flow with
		// no RTT, and its sender's right edge unknown (see noteEdge).
		// Keeping it, the next echo is of the oldest entry, and the ring
		// adapts to the measured srtt from there.
		return
	}
	f.ts[f.tsNext] = tsSent{val: val, ack: ack, edge: f.offered, at: now, valid: true}
	f.tsNext = (f.tsNext + 1) % tsRing
}

// tsPassed is how long after the server first echoed a later TSval an
// entry of the ring still waits for its own echo: the server echoes the
// latest TSval it took (ts_recent only moves forward), so once it echoed
// a later one it echoes this one only on a segment it had sent before,
// which the link layer may deliver late (HARQ's reordering: a few ms, a
// few tens at worst). Past that the entry is dead. Without it the ring
// stayed full of such entries for tsKeep: at a handover the uplink is
// frozen until random access and its ACKs reach the server together,
// the server echoes the last of them, which the ring had not recorded,
// and on the bench (mixed drive, scale 1.0, seed 1, 2026-12-04, 60.0 s)
// the flow had no RTT sample and no bytes-in-flight measure for 0.9 s
// while Eqn 2 sized its window from an RTT_min of 143 ms.
const tsPassed = 50 * time.Millisecond

// passed reports whether the server had echoed a TSval later than val
// at least tsPassed before now (see tsPassed, noteEcho).
func (f *Flow) passed(now time.Time, val uint32) bool {
	f.promoteEcho(now)
	return f.ecrPassedOK && tsNewer(f.ecrPassed, val)
}

// noteEcho takes a downlink segment's TSecr: ecrMark is an echo seen at
// ecrMarkAt, which tsPassed later becomes ecrPassed; the next echo is the
// next mark. So ecrPassed was seen at least tsPassed ago, and at most
// about twice that while echoes come.
func (f *Flow) noteEcho(now time.Time, ecr uint32) {
	f.promoteEcho(now)
	if !f.ecrMarkOK && (!f.ecrPassedOK || tsNewer(ecr, f.ecrPassed)) {
		f.ecrMark, f.ecrMarkAt, f.ecrMarkOK = ecr, now, true
	}
}

func (f *Flow) promoteEcho(now time.Time) {
	if f.ecrMarkOK && now.Sub(f.ecrMarkAt) >= tsPassed {
		f.ecrPassed, f.ecrPassedOK = f.ecrMark, true
		f.ecrMarkOK = false
	}
}

// matchTSecr returns the round trip closed by a downlink segment echoing
// ecr. Each TSval yields one sample only: later segments echoing it were
// sent later (a window's worth of data carries the same echo), and would
// inflate the RTT by the sender's own pacing.
//
// It also returns the cumulative ACK of the echoed segment: the sender sent
// this segment after it took that ACK, so a new segment's end minus that
// ACK is what the sender had in flight then.
func (f *Flow) matchTSecr(now time.Time, ecr uint32) (time.Duration, uint32, bool) {
	for i := range f.ts {
		e := &f.ts[i]
		if e.valid && e.val == ecr {
			e.valid = false
			// The server echoes the latest TSval it took (ts_recent
			// moves forward only): entries recorded before this one
			// will never be echoed, and must not hold their slots
			// (see recordTSval).
			for j := range f.ts {
				if o := &f.ts[j]; o.valid && o.at.Before(e.at) {
					o.valid = false
				}
			}
			d := now.Sub(e.at)
			if d < 0 {
				return 0, 0, false
			}
			f.echoEdge = e.edge
			return d, e.ack, true
		}
	}
	return 0, 0, false
}

// rttMinWindow is the window of the RTT_min filter (BBR's min_rtt filter
// is 10 s too): RTT_min is the least filtered sample of the last one to
// two windows, so a path that really got slower is followed, and a sample
// that was too small ages out.
const rttMinWindow = 10 * time.Second

// addRTT takes one round trip measured on the phone. Every sample first
// goes through a median of the last three: the phone's errors come one at
// a time and both ways. On a loaded phone the proxy can stall for a few
// hundred ms; an ACK it then reads is stamped late, and one matched
// against an echo seen just after gives a round trip of a few ms on a
// 27 ms path (on the bench: RTT_min 9.5 ms, and 19.7–24.3 ms later, on a
// 27.1 ms base, from single samples). A minimum filter keeps such a
// sample for 10–20 s, and Eqn 2's pipe rate·RTT_min with it: the window
// sat at the ŝ_max floor for the 7 s after mmWave → sub-6. The median
// drops a lone outlier, low or high, and follows a real change after two
// samples. (The rule it replaces rejected samples under srtt/4: after a
// queueing spike, srtt 164.8 ms, it rejected every true 28 ms sample
// for 2 s, and srtt stayed at the spike.)
func (f *Flow) addRTT(now time.Time, d time.Duration) {
	if d <= 0 {
		d = time.Microsecond // a same-instant echo (virtual time): still a sample
	}
	f.rttLast[f.rttI] = d
	f.rttI = (f.rttI + 1) % 3
	f.rttN++
	if f.rttPathN < 3 {
		f.rttPathN++
	}
	m := d
	if f.rttPathN == 3 {
		a, b, c := f.rttLast[0], f.rttLast[1], f.rttLast[2]
		m = max(min(a, b), min(max(a, b), c))
	}
	f.rttMed = m
	if f.rttN == 1 {
		f.srtt = m
	} else {
		f.srtt += (m - f.srtt) / 8
	}
	if f.rttMin == 0 {
		f.rttMin, f.rttNext, f.rttMinAt = m, m, now
		return
	}
	f.rttMin, f.rttNext = min(f.rttMin, m), min(f.rttNext, m)
	if now.Sub(f.rttMinAt) >= rttMinWindow {
		// RTT_min is the least sample of the last one to two windows.
		f.rttMin, f.rttNext, f.rttMinAt = f.rttNext, m, now
	}
}

// newPath forgets RTT_min: the flow's data now takes another cell, whose
// base RTT need not be the old one's (10 ms on mmWave, 600 ms on a
// satellite-like LTE cell). The next filtered sample starts it again;
// srtt goes on, and Eqn 2 waits for RTT_min (see Controller.stableRwnd),
// which comes from medians of three samples of the new path.
func (f *Flow) newPath() {
	if f.rttMin > 0 {
		f.rttMinPrev = f.rttMin
	}
	f.rttMin, f.rttNext, f.rttPathN = 0, 0, 0
}

// boundRTTMin is the RTT_min the in-flight bound reads the pipe with
// (eqn2InFlightBound): rttMin, or the previous path's when that is less,
// not under floor.
func (f *Flow) boundRTTMin(rttMin, floor time.Duration) time.Duration {
	if f.rttMinPrev > 0 && f.rttMinPrev < rttMin {
		return max(f.rttMinPrev, floor)
	}
	return rttMin
}

// RTT reports the flow's smoothed and minimum RTT and the number of
// samples (for tests, metrics and the Wave hint).
func (f *Flow) RTT() (srtt, min time.Duration, samples int) {
	return f.srtt, f.rttMin, int(f.rttN)
}

// queueEmpty reports whether the flow's segments meet no standing queue
// at the bottleneck now: its last one-way wait (queue.go, a lower bound)
// when one was measured within maxAge, else its latest RTT against
// rttMin; at most emptyQueueDelay(rttMin) counts as none. ok is false
// when it has neither.
func (f *Flow) queueEmpty(now time.Time, maxAge, rttMin time.Duration) (empty, ok bool) {
	thr := emptyQueueDelay(rttMin)
	if _, ok := f.queueDelay(now, maxAge); ok {
		return f.lastWait <= thr, true
	}
	if f.rttMed <= 0 || rttMin <= 0 {
		return false, false
	}
	return f.rttMed-rttMin <= thr, true
}

// emptyQueueDelay is the queueing delay under which a flow's path counts
// as having no standing queue: an eighth of RTT_min, within [4 ms,
// 16 ms], the delay increase at which Linux's HyStart ends slow start
// (tcp_cubic.c, HYSTART_DELAY_MIN/MAX), for the same reason: a window
// that doubles per RTT must stop as soon as the bottleneck queues, and
// a few milliseconds are the clocks' and the schedulers' own noise.
func emptyQueueDelay(rttMin time.Duration) time.Duration {
	return min(max(rttMin/8, 4*time.Millisecond), 16*time.Millisecond)
}

// open ends a hold: the flow's windows go to the sender as the laptop
// wrote them (Controller.release).
func (f *Flow) open() { f.held, f.relSince = false, time.Time{} }
