package m2ho

import "time"

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

// burstDetector finds scheduling bursts in the serving cell's MAC slots:
// a burst starts at a slot with RBRatio > 0.9 and ends at a slot with
// RBRatio < 0.4 that is followed by an empty slot (RBRatio == 0 or no
// bytes). The bytes of the burst (s_b, the empty slot excluded) were the
// cell's queue for this UE: a lower bound of its buffer s_max.
type burstDetector struct {
	in       bool
	tail     bool // the last slot was < 0.4: an empty one now ends the burst
	bytes    int
	start    time.Time
	lastSlot time.Time
}

func (d *burstDetector) reset() { *d = burstDetector{} }

// slot feeds one MAC slot; it returns s_b when the slot ends a burst.
func (d *burstDetector) slot(now time.Time, rb float64, bytes int) (sb int, ended bool) {
	if d.in && now.Sub(d.lastSlot) > burstMaxGap {
		d.reset()
	}
	d.lastSlot = now
	empty := !(rb > 0) || bytes <= 0 // NaN and negative count as empty
	if bytes < 0 {
		bytes = 0
	}
	if !d.in {
		if !empty && rb > burstStartRB {
			d.in, d.tail, d.bytes, d.start = true, false, bytes, now
		}
		return 0, false
	}
	if empty && d.tail {
		sb, long := d.bytes, now.Sub(d.start) > burstMaxLen
		d.reset()
		d.lastSlot = now
		if long {
			return 0, false
		}
		return sb, true
	}
	d.bytes += bytes
	d.tail = empty || rb < burstEndRB
	return 0, false
}
