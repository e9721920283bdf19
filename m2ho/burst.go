package m2ho

import (
	"math"
	"time"
)

// Burst detection thresholds (§4.3, Fig. 7).
const (
	burstStartRB = 0.9 // a slot with more than this RB share starts a burst
	burstEndRB   = 0.4 // a slot with less than this, then an empty slot, ends it
	// burstMaxGap aborts a burst when MAC slots stop arriving (a gap in the
	// log or the feed): the bytes of an interrupted burst are not the
	// drained queue, so they must not raise ŝ_max.
	burstMaxGap = 20 * time.Millisecond
	// burstMaxLen discards bursts that last longer: a queue drains in
	// about the time its bytes take at the cell's rate (a buffer of one
	// bandwidth-delay product, ~70 ms); a burst that goes on for longer
	// is a busy period of a sender that keeps the cell saturated, and its
	// bytes are mostly new arrivals. Counting it would over-estimate
	// ŝ_max, the one error the clamp cannot afford (Finding 3).
	burstMaxLen = 100 * time.Millisecond
)

// burst is one scheduling burst as the UE sees it: the bytes the cell
// served in it (S), its length (D: from the end of its first slot to the
// end of the empty slot that closed it, i.e. its slots' air time when
// slots are contiguous), and the cycle it closes: the bytes served and
// the time since the previous burst ended (or since the detector started
// seeing slots), the burst included.
type burst struct {
	bytes      int64
	dur        time.Duration
	cycleBytes int64
	cycleDur   time.Duration
}

// backlog is the lower bound of the cell's buffer that this burst proves
// (§4.3's s_b, corrected), given arrival, an upper estimate of the rate in
// bytes/s at which data reached the cell while the burst lasted.
//
// A burst of full slots is the cell draining this UE's queue; it ends when
// the queue is empty. With Q0 the backlog at the burst's start and A the
// bytes that arrived during it, what was served is S = Q0 + A, so
//
//	Q0 = S − A ≤ s_max.
//
// The paper's s_b = S counts A as if it had been queued, and A is large
// exactly when it matters: a window-limited sender is ACK-clocked, so data
// keeps arriving at about the delivery rate while the cell drains, and S
// exceeds the buffer (estimates of 0.8–1.1 MB against 600 KB buffers on
// the bench). The UE cannot see A, but between two drained queues
// (the previous burst's end and this one's) everything that arrived was
// served, so the cycle's delivery rate is the cycle's mean arrival rate;
// assuming arrivals during the burst are no denser than the larger of
// that mean and the current delivery estimate c_est (the rate the ACK
// clock runs at), A ≤ arrival·D and
//
//	ŝ_b = S − arrival·D ≤ Q0 ≤ s_max.
//
// The assumption fails for a sender that dumps a whole window at once
// (a window opened by a released clamp); such a burst is mostly
// overflow-limited, and S − arrival·D then errs high by at most what the
// cell served while the window was arriving. A burst that is the whole
// cycle (no earlier drained queue seen) proves nothing: ŝ_b = 0.
func (b burst) backlog(arrival float64) int {
	if b.cycleDur > 0 {
		arrival = math.Max(arrival, float64(b.cycleBytes)/b.cycleDur.Seconds())
	}
	if b.cycleDur <= b.dur {
		return 0
	}
	q := float64(b.bytes) - arrival*b.dur.Seconds()
	if !(q >= 1) {
		return 0
	}
	return int(q)
}

// burstDetector finds scheduling bursts in the serving cell's MAC slots:
// a burst starts at a slot with RBRatio > 0.9 and ends at a slot with
// RBRatio < 0.4 that is followed by an empty slot (RBRatio == 0 or no
// bytes). Between bursts it counts the bytes served, for the cycle's mean
// rate (see burst.backlog).
type burstDetector struct {
	in       bool
	tail     bool // the last slot was < 0.4: an empty one now ends the burst
	bytes    int64
	start    time.Time
	lastSlot time.Time

	// The cycle: since the previous burst ended (or the first slot).
	cycleOn    bool
	cycleStart time.Time
	cycleBytes int64
}

func (d *burstDetector) reset() { *d = burstDetector{} }

// slot feeds one MAC slot; it returns the burst when the slot ends one.
func (d *burstDetector) slot(now time.Time, rb float64, bytes int) (b burst, ended bool) {
	if d.in && now.Sub(d.lastSlot) > burstMaxGap {
		d.reset()
	}
	if !d.cycleOn {
		// The first slot's bytes were served before now: the cycle
		// starts with it, not at its end.
		d.cycleOn, d.cycleStart = true, now
	}
	d.lastSlot = now
	empty := !(rb > 0) || bytes <= 0 // NaN and negative count as empty
	if bytes < 0 {
		bytes = 0
	}
	d.cycleBytes += int64(bytes)
	if !d.in {
		if !empty && rb > burstStartRB {
			d.in, d.tail, d.bytes, d.start = true, false, int64(bytes), now
		}
		return burst{}, false
	}
	if empty && d.tail {
		b = burst{bytes: d.bytes, dur: now.Sub(d.start), cycleBytes: d.cycleBytes, cycleDur: now.Sub(d.cycleStart)}
		long := b.dur > burstMaxLen
		d.in, d.tail, d.bytes = false, false, 0
		d.cycleStart, d.cycleBytes = now, 0
		if long {
			return burst{}, false
		}
		return b, true
	}
	d.bytes += int64(bytes)
	d.tail = empty || rb < burstEndRB
	return burst{}, false
}
