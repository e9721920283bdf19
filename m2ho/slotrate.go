package m2ho

import "time"

// slotRate is the serving cell's downlink rate at full allocation as the
// UE's own MAC slots show it: a slot that gave this UE a share rb of its
// resource blocks and carried b bytes says the whole slot would have
// carried b/rb at the same modulation and coding, and the slots come one
// slot length apart. It is the physical-layer capacity PBE-CC (Xie et
// al., SIGCOMM 2020) reads from the control channel, restricted to what
// a UE decodes of its own grants.
//
// What it is for: a flow that meets no standing queue has all of its
// window in the pipe, and its delivery rate says only that the cell
// carries at least as much; c_est, counted over an RTT, learns the rest
// one RTT late, so Eqn 2's window can grow no faster than doubling every
// two RTTs. The slots say at once how far the pipe goes (see
// Controller.stableRwnd, Config.SlotPipe).
//
// What it is not: the rate this UE will get. Other UEs share a sub-6
// cell's resource blocks, so b/rb is an upper bound of it; the rule that
// reads it grows a window at most by doubling per RTT, as TCP's slow
// start would, and stops when a queue shows. The bench's emulator has no
// other UEs, and there the bound is the capacity.
type slotRate struct {
	slot   time.Duration // the least gap between consecutive slots in the cell (0: not seen)
	lastAt time.Time     // the last slot's time
	full   float64       // b/rb of the slots with rb ≥ slotRateMinRB, smoothed (gain 1/8)
	n      int           // those slots so far in the cell
	at     time.Time     // the last of them, on the controller's clock
}

const (
	// slotRateMinRB is the least RB share a slot must have to count: a
	// grant of a few resource blocks carries a rounded transport block
	// and a larger share of the slot's fixed overhead. Not more: a flow
	// whose window is far under the pipe (the very one the rule is
	// for) gets a segment or two per slot, a few percent of a 100 MHz
	// carrier's 273 blocks, one or two resource block groups.
	slotRateMinRB = 0.02
	// slotRateMinSlots is how many such slots the cell must have shown
	// for its rate to count. Few: a window far under the pipe fills one
	// or two slots per RTT (64 KB in a 500 Mbit/s cell's 31 KB slots),
	// and the rate it needs is the one right after random access.
	slotRateMinSlots = 4
	// NR's slot lengths run from 1 ms (15 kHz) to 125 µs (120 kHz,
	// mmWave); a gap outside them is a feed that does not report every
	// slot, and the slot length stays unknown.
	slotMin = 62500 * time.Nanosecond
	slotMax = time.Millisecond
)

// reset forgets the cell: a new serving cell has its own slots and rate.
func (s *slotRate) reset() { *s = slotRate{} }

// add takes one MAC slot stamped ts (the slot's own clock) that reached
// the controller at now.
func (s *slotRate) add(now, ts time.Time, rb float64, bytes int) {
	if !s.lastAt.IsZero() {
		if g := ts.Sub(s.lastAt); g >= slotMin && g <= slotMax && (s.slot == 0 || g < s.slot) {
			s.slot = g
		}
	}
	s.lastAt = ts
	if !(rb >= slotRateMinRB && rb <= 1) || bytes <= 0 {
		return
	}
	x := float64(bytes) / rb
	if s.n == 0 {
		s.full = x
	} else {
		s.full += (x - s.full) / 8
	}
	s.n++
	s.at = now
}

// get is the cell's rate at full allocation, bytes/s, if its last slot
// that showed it came within maxAge of now (the controller's clock).
func (s *slotRate) get(now time.Time, maxAge time.Duration) (float64, bool) {
	if s.n < slotRateMinSlots || s.slot == 0 || now.Sub(s.at) > maxAge {
		return 0, false
	}
	return s.full / s.slot.Seconds(), true
}
