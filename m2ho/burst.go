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
// slots are contiguous), and the cell's delivery rate over the window of
// max(D, RTT) that ends with it (see burstDetector.rateOver), the stand-in
// for the rate data arrived at while it lasted.
type burst struct {
	bytes  int64
	dur    time.Duration
	window float64 // bytes/s delivered over the window; 0: unknown
}

// backlog is the lower bound of the cell's buffer that this burst proves
// (§4.3's s_b, corrected), given cEst, the current delivery estimate in
// bytes/s (0: none).
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
// the bench). The UE cannot see A. What reaches the cell now was sent for
// the ACKs of what the UE received one RTT ago, so over a window of at
// least an RTT the arrivals are about the deliveries: the arrival rate
// during the burst is taken as the larger of the delivery rate over the
// window of max(D, RTT) ending with the burst and c_est, and
//
//	ŝ_b = S − arrival·D ≤ Q0 ≤ s_max
//
// as long as arrivals during the burst are no denser than that. A burst
// at least an RTT long has arrival ≥ S/D and proves nothing (ŝ_b = 0): a
// sender that keeps the cell busy is not showing a drained queue. The
// assumption fails for a sender that grows faster than the ACK clock (slow
// start's doubling, a window opened at once by a released clamp): the
// estimate then errs high by at most the excess arrivals, which is why a
// larger estimate is recorded only as the maximum over many bursts of a
// cell, never as a sum, and why the clamp still shares it between flows.
func (b burst) backlog(cEst float64) int {
	arrival := math.Max(b.window, cEst)
	if !(arrival > 0) || b.dur <= 0 {
		return 0
	}
	q := float64(b.bytes) - arrival*b.dur.Seconds()
	if !(q >= 1) {
		return 0
	}
	return int(q)
}

// rateBuckets is the delivery history the detector keeps: bytes per
// millisecond over the last rateBuckets ms (longer windows are cut).
const rateBuckets = 256

// burstDetector finds scheduling bursts in the serving cell's MAC slots:
// a burst starts at a slot with RBRatio > 0.9 and ends at a slot with
// RBRatio < 0.4 that is followed by an empty slot (RBRatio == 0 or no
// bytes). It keeps the bytes served per millisecond (a fixed ring: no
// allocation) for the delivery rate around each burst.
type burstDetector struct {
	in       bool
	tail     bool // the last slot was < 0.4: an empty one now ends the burst
	bytes    int64
	start    time.Time
	lastSlot time.Time

	// low: the last slot was empty or under burstEndRB, in a burst or
	// not; drained: this slot was empty after such a one, the end rule
	// applied to every slot (the UE's queue seen empty; queue.go's
	// per-path base waits for it).
	low, drained bool

	// History: hist[ms%rateBuckets] holds the bytes of millisecond ms
	// (counted from origin) when histMs[...] == ms.
	origin  time.Time
	histOn  bool
	firstMs int64 // the first millisecond with history
	hist    [rateBuckets]int64
	histMs  [rateBuckets]int64
}

func (d *burstDetector) reset() { *d = burstDetector{} }

func (d *burstDetector) record(now time.Time, bytes int64) {
	if !d.histOn {
		d.histOn, d.origin = true, now
	}
	ms := int64(now.Sub(d.origin) / time.Millisecond)
	if ms < 0 {
		return
	}
	i := ms % rateBuckets
	if d.histMs[i] != ms {
		d.histMs[i], d.hist[i] = ms, 0
	}
	d.hist[i] += bytes
}

// rateOver is the bytes/s served in the window w ending at now, cut to
// the history kept (since the last reset, at most rateBuckets ms): a
// shorter window is closer to the burst's own rate, so it errs towards a
// smaller ŝ_b.
func (d *burstDetector) rateOver(now time.Time, w time.Duration) float64 {
	if !d.histOn || w <= 0 {
		return 0
	}
	end := int64(now.Sub(d.origin) / time.Millisecond)
	n := int64(w / time.Millisecond)
	if n < 1 {
		n = 1
	}
	if n > rateBuckets {
		n = rateBuckets
	}
	if have := end - d.firstMs + 1; n > have {
		n = max(have, 1) // what history there is: at least the burst itself
	}
	var sum int64
	for ms := end - n + 1; ms <= end; ms++ {
		if i := ((ms % rateBuckets) + rateBuckets) % rateBuckets; d.histMs[i] == ms {
			sum += d.hist[i]
		}
	}
	return float64(sum) / (float64(n) / 1000)
}

// slot feeds one MAC slot; rtt is the current RTT estimate (0: none). It
// returns the burst when the slot ends one.
func (d *burstDetector) slot(now time.Time, rb float64, bytes int, rtt time.Duration) (b burst, ended bool) {
	if d.in && now.Sub(d.lastSlot) > burstMaxGap {
		d.reset()
	}
	d.lastSlot = now
	empty := !(rb > 0) || bytes <= 0 // NaN and negative count as empty
	d.drained, d.low = empty && d.low, empty || rb < burstEndRB
	if bytes < 0 {
		bytes = 0
	}
	d.record(now, int64(bytes))
	if !d.in {
		if !empty && rb > burstStartRB {
			d.in, d.tail, d.bytes, d.start = true, false, int64(bytes), now
		}
		return burst{}, false
	}
	if empty && d.tail {
		b = burst{bytes: d.bytes, dur: now.Sub(d.start)}
		b.window = d.rateOver(now, max(b.dur, rtt))
		long := b.dur > burstMaxLen
		d.in, d.tail, d.bytes = false, false, 0
		if long {
			return burst{}, false
		}
		return b, true
	}
	d.bytes += int64(bytes)
	d.tail = empty || rb < burstEndRB
	return burst{}, false
}
