package m2ho

import "time"

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
	srtt   time.Duration // smoothed, gain 1/8 (RFC 6298)
	rttMin time.Duration
	rttN   uint32
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
}

type tsSent struct {
	val   uint32
	at    time.Time
	valid bool // set, and not yet echoed
}

// recordTSval remembers when an uplink segment first carried val. Later
// ACKs carrying the same value keep the first time: the echo answers the
// earliest one the server took.
func (f *Flow) recordTSval(now time.Time, val uint32) {
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
	f.ts[f.tsNext] = tsSent{val: val, at: now, valid: true}
	f.tsNext = (f.tsNext + 1) % tsRing
}

// matchTSecr returns the round trip closed by a downlink segment echoing
// ecr. Each TSval yields one sample only: later segments echoing it were
// sent later (a window's worth of data carries the same echo), and would
// inflate the RTT by the sender's own pacing.
func (f *Flow) matchTSecr(now time.Time, ecr uint32) (time.Duration, bool) {
	for i := range f.ts {
		e := &f.ts[i]
		if e.valid && e.val == ecr {
			e.valid = false
			d := now.Sub(e.at)
			if d < 0 {
				return 0, false
			}
			return d, true
		}
	}
	return 0, false
}

// rttMinWindow is the window of the RTT_min filter (BBR's min_rtt filter
// is 10 s too): RTT_min is the least sample of the last one to two
// windows, so a path that really got slower is followed, and a sample
// that was too small ages out.
const rttMinWindow = 10 * time.Second

// rttImplausible: once the RTT is known (minRTTSamples), a sample under
// this fraction of srtt is taken for a mismatch, not a measurement. On a
// loaded phone the proxy can stall for a few hundred ms; the ACKs it then
// reads are stamped late, and one matched against an echo seen just
// after gives a round trip of a few ms on a 70 ms path. A real path does
// not lose three quarters of its RTT from one sample to the next; if it
// did, srtt (gain 1/8) comes down within a few samples and they pass.
const rttImplausible = 4

func (f *Flow) addRTT(now time.Time, d time.Duration) {
	if d <= 0 {
		d = time.Microsecond // a same-instant echo (virtual time): still a sample
	}
	if f.rttN >= minRTTSamples && d < f.srtt/rttImplausible {
		return
	}
	if f.rttN == 0 {
		f.srtt, f.rttMin, f.rttNext, f.rttMinAt = d, d, d, now
		f.rttN++
		return
	}
	f.srtt += (d - f.srtt) / 8
	f.rttMin, f.rttNext = min(f.rttMin, d), min(f.rttNext, d)
	if now.Sub(f.rttMinAt) >= rttMinWindow {
		// RTT_min is the least sample of the last one to two windows.
		f.rttMin, f.rttNext, f.rttMinAt = f.rttNext, d, now
	}
	f.rttN++
}

// RTT reports the flow's smoothed and minimum RTT and the number of
// samples (for tests, metrics and the Wave hint).
func (f *Flow) RTT() (srtt, min time.Duration, samples int) {
	return f.srtt, f.rttMin, int(f.rttN)
}
