package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/signaling"
)

// ŝ_max from one-way delay.
//
// §4.3 learns ŝ_max from scheduling bursts: the bytes a burst of full
// slots serves. burst.backlog corrects that for the bytes that arrive
// while the burst lasts, but the UE cannot see arrivals and has to assume
// them, and the assumption fails whenever the sender's rate rises within
// an RTT (CUBIC's growth, a capacity step, a window the proxy opens).
// Replayed against the emulator's own queue (the bench's mixed drive,
// scale 0.3, seed 2, 2026-12-01), the estimates the burst rule kept as
// each cell's maximum were bursts whose backlog at the start had been
// 0–80 KB: they measured arrivals, not the buffer, and on one mmWave
// cell the maximum exceeded the buffer (717 501 B against 695 400 B),
// while the sub-6 ones stayed 3–6 times below theirs.
//
// What the phone can measure instead is how long each downlink segment
// waited. A segment carries its sender's clock (TSval, milliseconds on
// Linux, FreeBSD and macOS); the phone's receive time minus that clock is
// the one-way delay plus a constant offset, and its minimum over a few
// seconds is the delay with no queue. What a segment X waited beyond it
// began when X reached the cell's queue; the cell serves its queue in
// order (one bearer), so every byte the phone received from that moment
// until X was ahead of X in the queue when X joined it, and that many
// bytes plus X's own were in the buffer at once: a lower bound of the
// buffer that needs no assumption about arrivals. Replayed the same way
// (the emulator's per-packet delay at 1 ms resolution, 2 ms margin), the
// maximum per cell is 97–100 % of each buffer and never above it.
//
// Where it errs, and the guards:
//   - The sender's clock ticks at 1 ms (tsTick): a segment's TSval is its
//     send time rounded down, so the arrival it gives is early by up to a
//     tick, and the minimum's own segment may be late by up to a tick.
//     Clocks drift (≤ 200 ppm: < 1 ms over the base's window). owdMargin
//     (2 ticks) moves the start later by more than all of that, and by a
//     few milliseconds of the phone's own read delay (bytes it read just
//     after the start but received just before).
//   - A sender clock of another rate (older Linux kernels tick at HZ:
//     100, 250 or 300 per second; a microsecond clock) makes the offset
//     run away: a flow's measurements count only while the minimum of
//     its latest owdBucket has moved less than owdMaxSlope of the time
//     since its first (a queue changes the minimum by at most its
//     delay, a wrong clock without bound), and never in the first two
//     buckets.
//   - A queue elsewhere on the path (a second bottleneck) would count as
//     the cell's: bytes count only while the MAC slots show the cell
//     serving this UE back to back (a burst in progress), and only since
//     that burst began. A hop before the cell that holds segments back
//     for a while (a stall, not a queue) is heldFor's.
//   - A segment the link layer delivered late (HARQ) waited for reasons
//     other than the queue, with later bytes delivered before it: only
//     segments at or above the highest sequence seen count.
//   - Late deliveries: bytes the phone received after the start but
//     that left the cell before it (a link or a host that stalls and
//     then delivers a bunch; the bench's emulator on a loaded machine)
//     would count as ahead of the segment. The MAC slots carry their own
//     timestamps, so the bytes served after the start by the slots' clock
//     (slotOffset puts it on the phone's) bound the count too: the estimate
//     is the smaller of the two. Each errs high for another reason (the
//     received count when the start's bytes came late, the served count
//     when the segment itself did, by the slots served after it), so the
//     smaller is off only when both are. A slot event that reaches the
//     controller after the segment leaves its bytes out: errs low.
//     Measured: on the bench's mixed drive (2026-12-02, run E) the
//     received count alone put ŝ_max 2–37 % above five of six buffers.
//   - A packet loop that lags behind the signalling (a loaded phone)
//     reads a segment after the slots' events for the bytes behind it:
//     both counts err high by what the cell serves in the lag beyond the
//     least one. owdMargin absorbs a few milliseconds of it; a lag held
//     longer than that and than heldFor is not corrected (see
//     TestSMaxOneWayDelayPacketLoopBehind: 7 % above the buffer at
//     12 ms; the bench's crossings of ≤ 1 % on mmWave are of that kind).
//   - Payload bytes only, and only of the flows the controller sees: the
//     estimate errs low, never high.
//   - A handover changes the path, and the least offset with it: a
//     new cell's radio may add or take off delay (a 0.125 ms mmWave slot
//     against a 0.5 ms sub-6 one, its HARQ round, another gNB's
//     backhaul). A base that goes on holding the faster path's least
//     offset makes every segment of a slower one look queued by the
//     difference (the queue over-measured, a window that the queue
//     check keeps from filling); the base of a faster one only falls.
//     So after random access the flow keeps the least offset of the new
//     path apart (owdState.newPath), and the base becomes it once the
//     MAC slots have shown the cell drained (an empty slot after one of
//     under burstEndRB, §4.3's end of a burst; Controller.drainedAt) and
//     a segment arrived after that, which met no queue: until then the
//     forwarded queue and the first round trips' queue sit in every
//     offset of the new path, and the old base stands (a path of the
//     same delay, the bench's, reads right from its first segment).
//     Without MAC slots the old base stays until its buckets age out.
const (
	// owdBucket is the period of the minimum one-way offset; the base is
	// the least of the current and the previous bucket's minimum (4–8 s).
	owdBucket = 4 * time.Second
	// owdMaxSlope bounds how far the bucket minimum may move per unit of
	// time since the flow's first bucket for its clock to count as 1 ms.
	owdMaxSlope = 0.1
	// owdMargin is subtracted from every wait (see above).
	owdMargin = 2*tsTick + 3*time.Millisecond
	// owdLive: while a flow's wait was measured this recently, the burst
	// rule's estimate is not recorded (see Controller.onSlot).
	owdLive = 10 * time.Second
)

// deliveryHistory is how many milliseconds of delivery deliveryLog keeps;
// a wait longer than that counts from its oldest millisecond (errs low).
const deliveryHistory = 2048

// deliveryLog counts the downlink payload bytes the phone received, per
// millisecond, in a fixed ring (no allocation).
type deliveryLog struct {
	on     bool
	origin time.Time
	total  int64 // bytes received so far
	lastMs int64 // the latest millisecond recorded
	// cum[ms%deliveryHistory] is total at the end of millisecond ms when
	// at[...] == ms.
	cum [deliveryHistory]int64
	at  [deliveryHistory]int64
}

func (l *deliveryLog) ms(t time.Time) int64 {
	d := t.Sub(l.origin)
	if d < 0 {
		return -1
	}
	return int64(d / time.Millisecond)
}

// add records n bytes received at now.
func (l *deliveryLog) add(now time.Time, n int) {
	if !l.on {
		l.on, l.origin, l.lastMs = true, now, 0
		l.cum[0], l.at[0] = 0, 0
	}
	m := max(l.ms(now), l.lastMs) // a clock that steps back counts in the latest ms
	for k := max(l.lastMs+1, m-deliveryHistory+1); k <= m; k++ {
		i := k % deliveryHistory
		l.cum[i], l.at[i] = l.total, k
	}
	l.lastMs = m
	l.total += int64(max(n, 0))
	i := m % deliveryHistory
	l.cum[i], l.at[i] = l.total, m
}

// since is the bytes received after the end of t's millisecond, up to the
// last add: at most what was received from t on (the bytes of t's own
// millisecond do not count), from the oldest millisecond kept when t is
// older.
func (l *deliveryLog) since(t time.Time) int64 {
	if !l.on {
		return 0
	}
	m := l.ms(t)
	if m >= l.lastMs {
		return 0
	}
	if oldest := l.lastMs - deliveryHistory + 1; m < oldest {
		m = oldest
	}
	if m < 0 {
		return l.total
	}
	if i := m % deliveryHistory; l.at[i] == m {
		return l.total - l.cum[i]
	}
	return 0 // not reached: every millisecond up to lastMs is written
}

// owdState is a flow's one-way delay offset: the phone's receive time
// minus the sender's clock, both counted from the flow's first segment.
type owdState struct {
	on      bool
	t0      time.Time
	ts0     uint32
	base    runMin        // the least offset per owdBucket
	first   time.Duration // least offset of the first bucket
	firstAt time.Time
	firstOK bool
	clockOK bool // the sender's clock passed the slope check
	// A path not yet settled (see "A handover changes the path" above):
	// pathAt is when the flow's data took it, pathMin the least offset
	// measured on it (pathMinOK: any).
	pathPending bool
	pathAt      time.Time
	pathMin     time.Duration
	pathMinOK   bool
}

// newPath starts the flow's one-way delay on a path its data took at
// at (random access): the base becomes the new path's own least offset
// once wait sees the cell drained after at.
func (o *owdState) newPath(at time.Time) {
	if !o.on {
		return
	}
	o.pathPending, o.pathAt, o.pathMin, o.pathMinOK = true, at, 0, false
}

// wait is how long the segment carrying ts, received at now, waited
// beyond the least one-way delay, less owdMargin; ok is false until the
// flow's clock has been checked (two buckets) and while it fails.
// drained is the last time the cell was seen drained (zero: never).
func (o *owdState) wait(now time.Time, ts uint32, drained time.Time) (time.Duration, bool) {
	if !o.on {
		*o = owdState{on: true, t0: now, ts0: ts}
		o.base.add(now, 0, owdBucket)
		return 0, false
	}
	off := now.Sub(o.t0) - time.Duration(int32(ts-o.ts0))*tsTick
	if o.pathPending {
		if !o.pathMinOK || off < o.pathMin {
			o.pathMin, o.pathMinOK = off, true
		}
		if !drained.IsZero() && !drained.Before(o.pathAt) && now.Sub(drained) >= owdMargin {
			// This segment reached the cell after it drained: the new
			// path's least offset is the base from here.
			o.pathPending = false
			o.base = runMin{on: true, at: now, cur: o.pathMin}
		}
	}
	if ended, endedAt, rolled := o.base.add(now, off, owdBucket); rolled {
		if !o.firstOK {
			o.first, o.firstAt, o.firstOK = ended, endedAt, true
		} else {
			moved := ended - o.first
			if moved < 0 {
				moved = -moved
			}
			o.clockOK = float64(moved) <= owdMaxSlope*float64(endedAt.Sub(o.firstAt))
		}
	}
	if !o.clockOK {
		return 0, false
	}
	return off - o.base.least() - owdMargin, true
}

// runMin is the least of a duration over the current and the previous
// period: a minimum that forgets what is older than two periods.
type runMin struct {
	on     bool
	at     time.Time // start of the current period
	cur    time.Duration
	prev   time.Duration
	prevOK bool
}

// add records d at now; rolled reports that now began a new period, and
// ended and endedAt are then the finished period's minimum and start.
func (r *runMin) add(now time.Time, d, period time.Duration) (ended time.Duration, endedAt time.Time, rolled bool) {
	switch {
	case !r.on:
		*r = runMin{on: true, at: now, cur: d}
	case now.Sub(r.at) >= period:
		ended, endedAt, rolled = r.cur, r.at, true
		r.prev, r.prevOK = r.cur, true
		r.at, r.cur = now, d
	case d < r.cur:
		r.cur = d
	}
	return ended, endedAt, rolled
}

// least is the minimum over the current and the previous period.
func (r *runMin) least() time.Duration {
	if r.prevOK && r.prev < r.cur {
		return r.prev
	}
	return r.cur
}

// queueSample measures the queue ahead of downlink segment p (new data of
// f, carrying a timestamp), before its bytes are added to the delivery
// log, and keeps the serving cell's largest in qMax.
func (c *Controller) queueSample(now time.Time, f *Flow, p *Packet) {
	wait, ok := f.owd.wait(now, p.TSval, c.drainedAt)
	if !ok {
		return
	}
	f.lastWait, f.waitAt = wait, now
	c.owdAt = now
	if wait <= 0 || !c.busy(now) {
		return
	}
	from := now.Add(-wait)
	if from.Before(c.busySince) {
		from = c.busySince
	}
	// Received since, or served since by the slots' clock, whichever is
	// less (see "Late deliveries" above): the served count includes p's
	// own slot when its event came first, and headers, as the buffer does.
	recv, served := c.deliv.since(from)+int64(p.PayloadLen), c.served.since(from)
	q := min(recv, served)
	c.qRaw = max(c.qRaw, q)
	held, ok := c.held.add(now, c.busySince, q)
	if ok && held > int64(c.qMax) {
		c.qMax = int(min(held, 1<<40))
		c.qMaxStep = SMaxStep{SampleAt: now, Wait: wait, Received: recv, Served: served, Busy: now.Sub(c.busySince)}
	}
	// A hole ahead of this segment (bytes sent before it not come), with
	// the queue held for heldFor as deep as it is now and as anything
	// measured in the cell: the buffer was full and dropped them (see
	// fullLevel).
	ref := int64(max(c.qMax, c.servingQ))
	if ok && !c.cellFull && f.hasHigh && packet.SeqLess(f.high, p.Seq) && c.state == Stable &&
		now.Sub(c.episodeAt) >= eqn2LossGrace && held*100 >= q*fullLevel && held*100 >= ref*fullLevel {
		c.cellFull = true
	}
}

// fullLevel is how deep, in percent of the deepest queue measured in the
// cell, a segment that follows a hole must have queued for the buffer to
// count as seen full (Controller.cellFull).
//
// Why: a measured ŝ_max is a floor of the buffer that rises only as deeper
// queues are seen, and a window held at it queues no deeper, so it can sit
// far under the buffer for a whole dwell (the bench's mixed drive,
// 2026-12-05, m2ho run 1: 363 KB against a 1387 KB buffer for 130 s, the
// in-flight bound held the window there with the queue measured empty in
// 74 % of its steps, 10-15 % of the goodput lost against the cap alone).
// A buffer that overflows drops at its full level and stays there while
// the sender overshoots (about an RTT): the segment after the hole queued
// behind a full buffer, and the queue held that level for heldFor. A loss
// at a shallower queue, or on a queue still rising (the first one a cell
// builds is the deepest measured there so far, at every level it passes),
// is the link's (a HARQ failure) or the handover's (Finding 2's flush,
// the forwarded queue: excluded for eqn2LossGrace after each handover)
// and says nothing of the buffer. What it cannot tell: a loss that is not
// the buffer's while a queue sits flat at its deepest level; RLC's
// acknowledged mode repairs the radio's losses below TCP, so on 5G those
// are rare, and the mark then holds the bound at a floor of the buffer
// (the cost this rule removes, in that cell only).
const fullLevel = 90

// heldFor is how long a queue must be measured for its level to count: a
// cell's sample is the least queue its segments measured over the last
// heldFor of the burst (heldWindow), the largest of those its ŝ_max.
//
// Why: a segment held back before the cell (a wired hop that stalls; the
// bench's emulator reading its input late on a loaded machine) is
// counted from when it would have arrived, so the segments held with it
// and ahead of it count as well as the queue it would have joined, which
// the cell drained meanwhile: up to what the sender sent during the
// stall, less the margin, too much. The held segments then reach the
// cell together and leave it back to back, their error growing from the
// first to the last, and the first segment sent after the stall has
// none; a sender that keeps a queue sends at about the cell's rate, so
// they take about as long to leave as the stall lasted, and a window of
// heldFor passes stalls up to about heldFor (longer ones err by the part
// beyond it). A full buffer lasts about an RTT (the sender overshoots
// until the loss reaches it), so 10 ms still sees its level. On the
// queueCell model (queue_test.go) a 15 ms stall put single samples 7 %
// above the buffer and the held level 12 % below it, and it costs 4 % of
// the level without stalls. In the bench's mixed drive before it (run F,
// 2026-12-02) one mmWave cell's ŝ_max came out 24 % above its buffer in
// a run the emulator marked late (1.82 %, up to 17.6 ms), the other
// cells at 96-99 % of theirs, and one 1 % above in a valid run.
const heldFor = 10 * time.Millisecond

// heldBuckets splits heldFor into 1 ms buckets, one spare.
const heldBuckets = int(heldFor/time.Millisecond) + 1

// heldWindow keeps the least queue sample of each millisecond of the
// current burst, in a fixed ring (no allocation).
type heldWindow struct {
	burst time.Time // the burst the samples belong to
	first time.Time // the first sample of that burst
	ms    [heldBuckets]int64
	min   [heldBuckets]int64
	used  [heldBuckets]bool
}

// add records queue sample q taken at now in the burst that began at
// burst, and returns the least sample of the last heldFor once the burst
// has been sampled that long.
func (h *heldWindow) add(now, burst time.Time, q int64) (int64, bool) {
	if !burst.Equal(h.burst) {
		*h = heldWindow{burst: burst, first: now}
	}
	m := now.Sub(h.first).Milliseconds()
	i := int(m % int64(heldBuckets))
	if !h.used[i] || h.ms[i] != m {
		h.ms[i], h.min[i], h.used[i] = m, q, true
	} else if q < h.min[i] {
		h.min[i] = q
	}
	if now.Sub(h.first) < heldFor {
		return 0, false
	}
	least := q
	for j := range h.ms {
		if h.used[j] && h.ms[j] > m-int64(heldBuckets) && h.min[j] < least {
			least = h.min[j]
		}
	}
	return least, true
}

// slotLag is how far the phone's clock runs ahead of the MAC slots'
// timestamps (the modem's clock, or the emulator's): the least of now −
// ts over the current and the previous owdBucket (Controller.slotLag),
// i.e. the clocks' offset plus the quickest a slot's event reached the
// controller. ts plus it is the slot on the phone's clock, late by at
// most that quickest delivery (which moves the served count's start
// later: errs low). It returns the offset to add to slot timestamps.
func (c *Controller) slotOffset(now, ts time.Time) time.Duration {
	c.slotLag.add(now, now.Sub(ts), owdBucket)
	return c.slotLag.least()
}

// busy reports whether the MAC slots show a burst in progress in the
// serving cell: its queue for this UE is being served back to back.
func (c *Controller) busy(now time.Time) bool {
	return !c.busySince.IsZero() && now.Sub(c.lastSlotAt) <= burstMaxGap
}

// resetBurst ends any burst in progress: a burst, and the queue
// measurement's count of bytes ahead, never span two cells or a handover.
func (c *Controller) resetBurst() {
	c.burst.reset()
	c.busySince = time.Time{}
}

// setServing names the serving data cell. A new cell ends any burst (a
// burst never spans two cells), and the queue measured in the previous
// one is saved for it first.
func (c *Controller) setServing(s signaling.Cell) {
	if s.ID != c.serving.ID {
		c.flushQueue()
		c.qMax, c.qSaved, c.qRaw = 0, 0, 0
		c.resetBurst()
		c.slots.reset()
		c.drainedAt = time.Time{}
		c.servingQ = 0
		if v, src, m := c.cfg.SMaxDB.LookupMeasured(s); src == SMaxKnown && m {
			c.servingQ = v
		}
		_, c.cellFull = c.cfg.SMaxDB.Full(s)
		c.fullSaved = c.cellFull
		c.typeFull, _ = c.cfg.SMaxDB.MinFull(s.Type)
	}
	c.serving = s
}

// flushQueue records the queue measured in the serving cell in the ŝ_max
// database (off the packet path: from signalling events only).
func (c *Controller) flushQueue() {
	if c.serving.ID == "" {
		return
	}
	if c.qMax > c.qSaved {
		c.qSaved = c.qMax
		if c.cfg.SMaxDB.ObserveQueue(c.serving, c.qMax) {
			if c.cfg.SMaxTrace != nil {
				st := c.qMaxStep
				st.Cell, st.SMax, st.Raw = c.serving, c.qMax, c.qRaw
				c.cfg.SMaxTrace(st)
			}
			if c.eqn2Armed || c.ramp {
				c.stableCap, _, c.stableMeasured = c.lookupSMax(c.serving)
			}
		}
	}
	if c.cellFull && !c.fullSaved {
		// Not news only when the database had it already, and then
		// setServing set fullSaved; else it lacks the measured queue
		// yet and the next flush tries again.
		c.fullSaved = c.cfg.SMaxDB.MarkFull(c.serving)
		c.typeFull, _ = c.cfg.SMaxDB.MinFull(c.serving.Type)
	}
}

// measuredUse is the share of a measured ŝ_max (SMaxDB.ObserveQueue) the
// controller uses as ŝ_max: for the Preparation clamp, Eqn 2's floor and
// the ramp. A measured queue is the buffer within a few percent, counted
// in payload bytes, so a window at it leaves nothing for what the count
// misses: the headers (3.6 % of a 1448-byte segment), a phone that reads
// its packets later than the margin allows (estimates up to 5 % above a
// buffer on the bench in valid runs, 25 % in runs the emulator marked
// late), and the data a sender had already sent beyond the right edge
// when the clamp came (edgeFloor keeps it). The first bench run with the
// whole measured value (mixed drive, 2026-12-02) cut the carried cwnd at
// most mmWave → sub-6 handovers (median 0.72 of it 1 s after random
// access) where a third of the buffer, the burst rule's, had kept it
// (1.00). Two thirds is chosen, not fitted: still 2-4 times what the
// burst rule learned.
const measuredUse = 2.0 / 3

// DefaultRampQueue is Config.RampQueue's default: the share the
// controller uses of a measured ŝ_max elsewhere.
const DefaultRampQueue = measuredUse

// lookupSMax is SMaxDB.LookupMeasured with a measured value scaled to
// the share the controller uses (measuredUse).
func (c *Controller) lookupSMax(target signaling.Cell) (int, SMaxSource, bool) {
	v, src, measured := c.cfg.SMaxDB.LookupMeasured(target)
	if measured {
		v = max(int(float64(v)*measuredUse), 1)
	}
	return v, src, measured
}
