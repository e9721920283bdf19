package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

func TestDeliveryLogSince(t *testing.T) {
	var l deliveryLog
	if got := l.since(t0); got != 0 {
		t.Fatalf("empty log: %d", got)
	}
	ms := func(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Millisecond))) }
	l.add(ms(0), 100)
	l.add(ms(0.5), 10)
	l.add(ms(3.2), 200)
	l.add(ms(7), 300)
	tests := []struct {
		from float64
		want int64
	}{
		{-5, 610},  // before the log: everything
		{0, 500},   // ms 0's own bytes do not count
		{0.9, 500}, // the same millisecond
		{1, 500},   // ms 1 and 2 had nothing
		{3, 300},   // ms 3's bytes do not count
		{6.5, 300}, // ms 7 is after ms 6
		{7, 0},     // the last millisecond itself
		{9, 0},     // the future
	}
	for _, tc := range tests {
		if got := l.since(ms(tc.from)); got != tc.want {
			t.Errorf("since(%v ms) = %d, want %d", tc.from, got, tc.want)
		}
	}
	// A clock that steps back counts in the latest millisecond.
	l.add(ms(5), 1)
	if got := l.since(ms(6)); got != 301 {
		t.Fatalf("after a step back: since(6 ms) = %d, want 301", got)
	}
	// Beyond the history, the oldest millisecond kept stands in: less.
	l.add(ms(7+deliveryHistory+10), 1000)
	if got, all := l.since(ms(0)), l.total; got >= all-100 || got < 1000 {
		t.Fatalf("since(0) after the history wrapped = %d of %d: want the kept part only", got, all)
	}
}

// owdFeed sends a flow's segments every 1 ms of the phone's clock for d,
// with a sender clock of hz ticks per second running fast by ppm, a fixed
// one-way delay of 20 ms and no queue; it returns the last wait and
// whether it was usable.
func owdFeed(o *owdState, hz float64, ppm float64, d time.Duration) (time.Duration, bool) {
	var w time.Duration
	var ok bool
	for t := time.Duration(0); t < d; t += time.Millisecond {
		send := t - 20*time.Millisecond
		ts := uint32(int64(send.Seconds()*hz*(1+ppm*1e-6)) + 7_000_000)
		w, ok = o.wait(t0.Add(t), ts, time.Time{})
	}
	return w, ok
}

// The sender's timestamp clock must tick at 1 ms for a wait to count: on
// a slower one (older kernels' HZ) or a faster one the offset runs away
// and the flow measures nothing; a 1 kHz clock that drifts by 200 ppm
// counts after two buckets, with no wait where there is no queue.
func TestOneWayDelayClockCheck(t *testing.T) {
	tests := []struct {
		name   string
		hz     float64
		ppm    float64
		wantOK bool
	}{
		{"1 kHz", 1000, 0, true},
		{"1 kHz, fast 200 ppm", 1000, 200, true},
		{"1 kHz, slow 200 ppm", 1000, -200, true},
		{"HZ 250", 250, 0, false},
		{"HZ 100", 100, 0, false},
		{"1 MHz", 1e6, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o owdState
			if _, ok := owdFeed(&o, tc.hz, tc.ppm, 2*owdBucket-10*time.Millisecond); ok {
				t.Fatalf("usable before two buckets")
			}
			o = owdState{}
			w, ok := owdFeed(&o, tc.hz, tc.ppm, 5*owdBucket)
			if ok != tc.wantOK {
				t.Fatalf("usable %v, want %v (wait %v)", ok, tc.wantOK, w)
			}
			// No queue: the wait is the margin's negative, give or take
			// the tick and the drift.
			if ok && (w > -owdMargin+2*tsTick || w < -owdMargin-2*tsTick) {
				t.Fatalf("wait %v without a queue, want about %v", w, -owdMargin)
			}
		})
	}
}

// A handover to a path of another one-way delay: until the MAC slots
// show the new cell drained the old base stands (the forwarded queue sits
// in every offset of the new path, and on a path of the same delay the
// old base is the right one); once a segment arrives after the drain the
// base is the new path's least offset. A slower path then reads no queue
// where the old base read one of the paths' difference; a faster one
// lowers the base at once, with no drain needed.
func TestOneWayBasePerPath(t *testing.T) {
	const oldWay = 6 * time.Millisecond
	hist := func(o *owdState) time.Duration {
		// 9 s on the old path, every 10 ms, no queue.
		var end time.Duration
		for d := time.Duration(0); d < 9*time.Second; d += 10 * time.Millisecond {
			o.wait(t0.Add(d+oldWay), uint32(d/time.Millisecond)+1000, time.Time{})
			end = d
		}
		return end + 10*time.Millisecond
	}
	// seg is the wait of a segment sent at d (sender clock) and received
	// oneWay+queue later.
	seg := func(o *owdState, d, oneWay, queue time.Duration, drained time.Time) time.Duration {
		w, ok := o.wait(t0.Add(d+oneWay+queue), uint32(d/time.Millisecond)+1000, drained)
		if !ok {
			t.Fatalf("no wait at %v", d)
		}
		return w
	}
	noQueue := func(w time.Duration) bool { return w <= -owdMargin+tsTick && w >= -owdMargin-tsTick }

	t.Run("slower path", func(t *testing.T) {
		var o owdState
		ra := hist(&o)
		o.newPath(t0.Add(ra))
		const newWay = 14 * time.Millisecond
		// The forwarded queue, 20 ms, draining at 1 ms per segment;
		// nothing drained yet: the old base.
		for i := 0; i < 20; i++ {
			d := ra + time.Duration(i)*time.Millisecond
			q := time.Duration(20-i) * time.Millisecond
			if w, want := seg(&o, d, newWay, q, time.Time{}), newWay+q-oldWay-owdMargin; w != want {
				t.Fatalf("before the drain, queue %v: wait %v, want %v (the old base)", q, w, want)
			}
		}
		// A drain in the old cell, before random access, does not count.
		d := ra + 25*time.Millisecond
		if w := seg(&o, d, newWay, 0, t0.Add(ra-time.Millisecond)); noQueue(w) {
			t.Fatalf("a drain before random access settled the path: wait %v", w)
		}
		// The cell drains; a segment that arrives too soon after it may
		// be the packet loop behind the slots: still the old base.
		drained := t0.Add(ra + 30*time.Millisecond)
		d = ra + 30*time.Millisecond - newWay + owdMargin - time.Millisecond
		if w := seg(&o, d, newWay, 0, drained); noQueue(w) {
			t.Fatalf("a segment %v after the drain settled the path: wait %v", owdMargin-time.Millisecond, w)
		}
		d = ra + 40*time.Millisecond
		if w := seg(&o, d, newWay, 0, drained); !noQueue(w) {
			t.Fatalf("after the drain, no queue: wait %v, want about %v", w, -owdMargin)
		}
		// And a queue on the new path reads as itself.
		d = ra + 50*time.Millisecond
		if w := seg(&o, d, newWay, 9*time.Millisecond, drained); w < 9*time.Millisecond-owdMargin-tsTick || w > 9*time.Millisecond-owdMargin+tsTick {
			t.Fatalf("a 9 ms queue on the new path: wait %v", w)
		}
	})
	t.Run("faster path", func(t *testing.T) {
		var o owdState
		ra := hist(&o)
		o.newPath(t0.Add(ra))
		const newWay = 2 * time.Millisecond
		if w := seg(&o, ra+5*time.Millisecond, newWay, 0, time.Time{}); !noQueue(w) {
			t.Fatalf("a faster path without a drain: wait %v, want about %v", w, -owdMargin)
		}
	})
	t.Run("same path, backlog", func(t *testing.T) {
		// The bench's case: the same delay; the forwarded queue reads as
		// queue from the first segment.
		var o owdState
		ra := hist(&o)
		o.newPath(t0.Add(ra))
		if w := seg(&o, ra, oldWay, 15*time.Millisecond, time.Time{}); w != 15*time.Millisecond-owdMargin {
			t.Fatalf("forwarded queue of 15 ms: wait %v", w)
		}
	})
}

// The cell counts as drained at an empty slot after one of under
// burstEndRB or after another empty one (§4.3's end of a burst), not at
// an empty slot after a fuller one (a gap in the scheduling), and a new
// serving cell forgets the last drain.
func TestDrainedFromSlots(t *testing.T) {
	c := New(Config{SMaxDB: NewSMaxDB(), SignalLoss: time.Hour})
	a, b := cell(sub6, "A"), cell(sub6, "B")
	slot := func(ms float64, rb float64, bytes int, s signaling.Cell) time.Time {
		now := t0.Add(time.Duration(ms * float64(time.Millisecond)))
		c.OnEvent(now, &signaling.Event{Time: now, Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: bytes, Serving: s})
		return now
	}
	slot(0, 1, 10_000, a)
	slot(0.5, 0.7, 7_000, a)
	slot(1, 0, 0, a)
	if !c.drainedAt.IsZero() {
		t.Fatalf("an empty slot after one of RB 0.7: drained at %v", c.drainedAt)
	}
	want := slot(1.5, 0, 0, a)
	if !c.drainedAt.Equal(want) {
		t.Fatalf("a second empty slot: drained at %v, want %v", c.drainedAt, want)
	}
	slot(2, 1, 10_000, a)
	slot(2.5, 0.3, 3_000, a)
	want = slot(3, 0, 0, a)
	if !c.drainedAt.Equal(want) {
		t.Fatalf("an empty slot after one of RB 0.3: drained at %v, want %v", c.drainedAt, want)
	}
	slot(3.5, 0.3, 3_000, b)
	if !c.drainedAt.IsZero() {
		t.Fatalf("a new serving cell kept the old cell's drain (%v)", c.drainedAt)
	}
}

// queueCell simulates one UE's queue in cell A at 0.5 ms slots: segments
// of seg bytes sent at the times send gives, a one-way wire delay of 10
// ms to the cell, service of capB bytes per slot in order, tail drop at
// buf bytes. Each delivered segment goes to the controller as new data of
// flow f with its sender's TSval (1 ms clock, tsHz ticks per second) at
// the slot's end, after the slot's MAC event. It returns the paper's s_b
// and the corrected burst estimate (with the RTT given, no c_est) of the
// bursts those slots contain, and the drops.
//
// read, when not nil, is when the phone reads what the cell delivered at
// t (a stalled host delivers in bunches): the slot's event, stamped with
// the slot's time when stamped is true, and its segments reach the
// controller then.
func queueCell(c *Controller, f *Flow, A signaling.Cell, capB, buf, seg int, dur time.Duration, tsHz float64, rtt time.Duration, send func(t time.Duration) int) (paper, burstEst []int, drops int) {
	return queueCellOpts(c, f, A, capB, buf, seg, dur, tsHz, rtt, send, cellOpts{})
}

// cellOpts are queueCell's faults: read (above), stamped, and arrive,
// when not nil, the time a segment sent at t reaches the cell (a wired
// hop that stalls), at least t plus the wire delay.
type cellOpts struct {
	read    func(t time.Duration) time.Duration
	stamped bool
	arrive  func(t time.Duration) time.Duration
	lose    func(t time.Duration) bool // a segment sent at t is lost before the cell
	// readPkt, when not nil, is when the phone's packet path reads the
	// segments the cell delivered at t, while its signalling takes each
	// slot's event at once (a packet loop behind the modem's events).
	readPkt func(t time.Duration) time.Duration
}

func queueCellOpts(c *Controller, f *Flow, A signaling.Cell, capB, buf, seg int, dur time.Duration, tsHz float64, rtt time.Duration, send func(t time.Duration) int, o cellOpts) (paper, burstEst []int, drops int) {
	read, stamped := o.read, o.stamped
	const slot = 500 * time.Microsecond
	const wire = 10 * time.Millisecond
	type inSeg struct {
		at  time.Duration // arrival at the cell
		ts  uint32
		seq uint32
	}
	var wireQ, q []inSeg
	type readSeg struct {
		at time.Duration // when the phone's packet path reads it
		s  inSeg
	}
	var unread []readSeg
	pkt := func(s inSeg) *Packet {
		return &Packet{Dir: Downlink, Flags: FlagACK, Seq: s.seq, PayloadLen: seg, HasTS: true, TSval: s.ts}
	}
	readUpTo := func(now time.Duration) {
		for len(unread) > 0 && unread[0].at <= now {
			r := unread[0]
			unread = unread[1:]
			c.OnPacket(t0.Add(r.at), f, pkt(r.s))
		}
	}
	var qBytes int
	var seq uint32 = 1
	var d burstDetector
	sendT := time.Duration(0)
	for now := slot; now <= dur; now += slot {
		// The sender: what it sends in this slot enters the wire.
		for ; sendT < now; sendT += 100 * time.Microsecond {
			for range send(sendT) {
				if o.lose != nil && o.lose(sendT) {
					seq += uint32(seg)
					continue
				}
				at := sendT + wire
				if o.arrive != nil {
					at = max(o.arrive(sendT), at)
				}
				wireQ = append(wireQ, inSeg{at: at, ts: uint32(sendT.Seconds() * tsHz), seq: seq})
				seq += uint32(seg)
			}
		}
		for len(wireQ) > 0 && wireQ[0].at <= now {
			if qBytes+seg > buf {
				drops++
			} else {
				q = append(q, wireQ[0])
				qBytes += seg
			}
			wireQ = wireQ[1:]
		}
		readUpTo(now - 1)
		var out []inSeg
		for budget := capB; len(q) > 0 && budget >= seg; budget -= seg {
			out = append(out, q[0])
			q = q[1:]
			qBytes -= seg
		}
		served := len(out) * seg
		rb := float64(served) / float64(capB)
		at := t0.Add(now)
		if b, ok := d.slot(at, rb, served, rtt); ok {
			paper = append(paper, int(b.bytes))
			burstEst = append(burstEst, b.backlog(0))
		}
		ev := &signaling.Event{Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: served, Serving: A}
		if stamped {
			ev.Time = at
		}
		if read != nil {
			at = t0.Add(read(now))
		}
		c.OnEvent(at, ev)
		if o.readPkt != nil {
			for _, s := range out {
				unread = append(unread, readSeg{at: max(o.readPkt(now), now), s: s})
			}
			readUpTo(now)
			continue
		}
		for _, s := range out {
			c.OnPacket(at, f, pkt(s))
		}
	}
	return paper, burstEst, drops
}

// floods is a sender that keeps the cell half busy for warm (its clock
// gets checked, the queue stays empty), then every 400 ms sends at twice
// the cell's rate for 40 ms after 360 ms of silence: the queue fills to
// the buffer and overflows, and drains within the burst.
func floods(capB, seg int, warm time.Duration) func(t time.Duration) int {
	perTick := float64(capB) / 5 / float64(seg) // segments per 0.1 ms at the cell's rate
	var acc float64
	return func(t time.Duration) int {
		rate := 0.0
		switch {
		case t < warm:
			rate = 0.5
		case (t-warm)%(400*time.Millisecond) >= 360*time.Millisecond:
			rate = 2
		}
		acc += rate * perTick
		n := int(acc)
		acc -= float64(n)
		return n
	}
}

// ŝ_max is a lower bound of the buffer (§4.3), also for a sender whose
// rate jumps: after silence, a flood at twice the cell's rate fills the
// buffer; the burst of full slots that drains it serves far more than
// the buffer, and over an RTT-long window (a bloated 300 ms RTT) the
// delivery rate is low, so the burst rule's S − arrival·D is above the
// buffer. The queue measured from each segment's one-way delay is not,
// and it finds most of the buffer.
func TestSMaxFromOneWayDelayNotAboveBuffer(t *testing.T) {
	const capB, buf, seg = 5600, 300_000, 1400 // 11.2 MB/s, a 27 ms buffer
	const rtt = floodRTT
	c, db, f, A := floodController()
	warm := 3 * owdBucket
	paper, est, drops := queueCell(c, f, A, capB, buf, seg, warm+4*time.Second, 1000, rtt, floods(capB, seg, warm))
	c.OnEvent(t0.Add(warm+5*time.Second), slotEv(0, 0)) // a last event saves the measurement
	pMax, eMax := 0, 0
	for i := range est {
		pMax, eMax = max(pMax, paper[i]), max(eMax, est[i])
	}
	got, _ := db.Get(A)
	t.Logf("bursts %d, drops %d; paper s_b max %d, burst rule max %d, ŝ_max %d, buffer %d", len(est), drops, pMax, eMax, got, buf)
	if drops == 0 || eMax <= buf {
		t.Fatalf("the case tests nothing: drops %d, burst rule max %d vs buffer %d", drops, eMax, buf)
	}
	if got > buf {
		t.Fatalf("ŝ_max(A) %d exceeds the buffer %d", got, buf)
	}
	// The margin (5 ms at 10 MB/s: 50 KB) and a segment of rounding.
	if got < buf*3/4 {
		t.Fatalf("ŝ_max(A) %d: less than 3/4 of the buffer %d", got, buf)
	}
	if !f.owd.clockOK {
		t.Fatalf("the flow's clock was never accepted")
	}

	// The measurement allocates nothing (the packet path).
	at := t0.Add(warm + 6*time.Second)
	c.OnEvent(at, slotEv(1, capB))
	p := &Packet{Dir: Downlink, Flags: FlagACK, Seq: f.high, PayloadLen: seg, HasTS: true}
	if n := testing.AllocsPerRun(1000, func() {
		at = at.Add(50 * time.Microsecond)
		p.Seq += seg
		p.TSval = uint32(at.Sub(t0)/time.Millisecond) - 20
		c.OnPacket(at, f, p)
	}); n != 0 {
		t.Fatalf("%v allocations per downlink segment", n)
	}
}

// A sender whose timestamp clock is not 1 ms (HZ 250 on an old kernel)
// measures no queue: its offsets run away, and the waits they would give
// (seconds) would count every byte of a burst.
func TestSMaxOneWayDelayIgnoresOtherClocks(t *testing.T) {
	const capB, buf, seg = 5600, 300_000, 1400
	c := New(Config{SMaxDB: NewSMaxDB()})
	A := cell(sub6, "A")
	var f Flow
	c.Attach(t0, &f)
	warm := 3 * owdBucket
	queueCell(c, &f, A, capB, buf, seg, warm+2*time.Second, 250, 20*time.Millisecond, floods(capB, seg, warm))
	if f.owd.clockOK || !c.owdAt.IsZero() || c.qMax != 0 {
		t.Fatalf("a 250 Hz clock was used: clockOK %v, owdAt %v, qMax %d", f.owd.clockOK, c.owdAt, c.qMax)
	}
}

// stalls is a phone that reads nothing for the first l of every period p
// and then all that waited at once.
func stalls(p, l time.Duration) func(t time.Duration) time.Duration {
	return func(t time.Duration) time.Duration {
		if r := t % p; r < l {
			return t - r + l
		}
		return t
	}
}

// A phone that reads in bunches (here nothing for 30 ms of every 67,
// longer than heldFor) receives bytes that left the cell before a
// segment joined its queue after the segment joined it, and counting by
// receive time puts them ahead of it: ŝ_max above the buffer. Counting
// also by the MAC slots' own timestamps, it stays under the buffer; with
// slot events that carry no timestamp (the served count on the receive
// clock too) the same run exceeds it, which shows the case tests the
// timestamps.
func TestSMaxOneWayDelayLateDelivery(t *testing.T) {
	const buf = 300_000
	run := func(stamped bool) int {
		r := floodQueue(t, buf, cellOpts{read: stalls(67*time.Millisecond, 30*time.Millisecond), stamped: stamped})
		if r.drops == 0 {
			t.Fatalf("the buffer never filled")
		}
		return r.sMax
	}
	unstamped, stamped := run(false), run(true)
	t.Logf("ŝ_max: receive clock only %d, with the slots' clock %d, buffer %d", unstamped, stamped, buf)
	if unstamped <= buf {
		t.Fatalf("the case tests nothing: counted by receive time ŝ_max %d does not exceed the buffer %d", unstamped, buf)
	}
	if stamped > buf {
		t.Fatalf("ŝ_max %d exceeds the buffer %d", stamped, buf)
	}
	if stamped < buf/2 {
		t.Fatalf("ŝ_max %d: less than half the buffer %d", stamped, buf)
	}
}

// A wired hop before the cell that stalls (here 15 ms of every 53) holds
// segments back and then hands them to the cell together: each is
// counted from when it would have arrived, so the bytes the cell served
// meanwhile count as queued with it, and single samples exceed the
// buffer. The least sample over heldFor of the burst does not.
func TestSMaxOneWayDelayUpstreamStall(t *testing.T) {
	const buf = 300_000
	stall := stalls(53*time.Millisecond, 15*time.Millisecond)
	r := floodQueue(t, buf, cellOpts{arrive: func(t time.Duration) time.Duration { return stall(t) + 10*time.Millisecond }, stamped: true})
	drops, raw, got := r.drops, r.raw, r.sMax
	t.Logf("drops %d; largest single sample %d, ŝ_max %d, buffer %d", drops, raw, got, buf)
	if drops == 0 || raw <= buf {
		t.Fatalf("the case tests nothing: drops %d, largest sample %d vs buffer %d", drops, raw, buf)
	}
	if got > buf {
		t.Fatalf("ŝ_max %d exceeds the buffer %d", got, buf)
	}
	if got < buf/2 {
		t.Fatalf("ŝ_max %d: less than half the buffer %d", got, buf)
	}
}

type floodResult struct {
	sMax  int   // ŝ_max(A) saved in the database
	raw   int64 // the largest single queue sample (Controller.qRaw)
	drops int
}

// floodRTT is the flood tests' bloated RTT: over an RTT-long window the
// delivery rate is low, so the burst rule's estimate overshoots.
const floodRTT = 300 * time.Millisecond

// floodController is the controller, database, flow and sub-6 cell the
// flood tests share, the flow attached at t0.
func floodController() (*Controller, *SMaxDB, *Flow, signaling.Cell) {
	db := NewSMaxDB()
	c := New(Config{SMaxDB: db})
	c.lastRTT = floodRTT
	f := &Flow{}
	c.Attach(t0, f)
	return c, db, f, cell(sub6, "A")
}

// floodQueue runs floods on queueCell (5600 B per 0.5 ms slot, 1400 B
// segments, a bloated 300 ms RTT) with the buffer and faults given, and
// saves the measurement with a last event.
func floodQueue(t *testing.T, buf int, o cellOpts) floodResult {
	t.Helper()
	const capB, seg = 5600, 1400
	warm := 3 * owdBucket
	c, db, f, A := floodController()
	_, _, drops := queueCellOpts(c, f, A, capB, buf, seg, warm+4*time.Second, 1000, floodRTT, floods(capB, seg, warm), o)
	raw := c.qRaw
	c.OnEvent(t0.Add(warm+5*time.Second), slotEv(0, 0))
	got, _ := db.Get(A)
	return floodResult{sMax: got, raw: raw, drops: drops}
}

// Config.SMaxTrace reports every rise of the cell's ŝ_max with the
// sample that completed it: the values rise, the last is the database's,
// and the held window's least is at most the completing sample's count.
func TestSMaxTraceReportsEachRise(t *testing.T) {
	const capB, buf, seg = 5600, 300_000, 1400
	db := NewSMaxDB()
	var steps []SMaxStep
	c := New(Config{SMaxDB: db, SMaxTrace: func(s SMaxStep) { steps = append(steps, s) }})
	c.lastRTT = floodRTT
	f := &Flow{}
	c.Attach(t0, f)
	A := cell(sub6, "A")
	warm := 3 * owdBucket
	end := warm + 2*time.Second
	queueCell(c, f, A, capB, buf, seg, end, 1000, floodRTT, floods(capB, seg, warm))
	c.OnEvent(t0.Add(end+time.Second), slotEv(0, 0))
	got, _ := db.Get(A)
	if len(steps) == 0 || got == 0 {
		t.Fatalf("no rise traced (%d steps), ŝ_max %d", len(steps), got)
	}
	for i, s := range steps {
		if s.Cell != A {
			t.Fatalf("step %d: cell %v, want %v", i, s.Cell, A)
		}
		if i > 0 && s.SMax <= steps[i-1].SMax {
			t.Fatalf("step %d: ŝ_max %d after %d: a trace line that is no rise", i, s.SMax, steps[i-1].SMax)
		}
		if s.SampleAt.Before(t0.Add(warm)) || s.SampleAt.After(t0.Add(end)) || s.Wait <= 0 || s.Busy <= 0 {
			t.Fatalf("step %d: sample at %v, wait %v, busy %v: not a sample of the floods", i, s.SampleAt.Sub(t0), s.Wait, s.Busy)
		}
		if int64(s.SMax) > min(s.Received, s.Served) || int64(s.SMax) > s.Raw {
			t.Fatalf("step %d: ŝ_max %d above its completing sample (received %d, served %d) or the largest sample %d", i, s.SMax, s.Received, s.Served, s.Raw)
		}
	}
	if last := steps[len(steps)-1].SMax; last != got {
		t.Fatalf("last traced ŝ_max %d, database %d", last, got)
	}
}

// The buffer counts as seen full (SMaxDB.Full, the in-flight bound's
// condition) when a segment that follows a hole queued as deep as the
// cell's deepest measured queue, on a queue held that deep for heldFor:
// floods that overflow a 300 KB buffer mark it, at an ŝ_max within the
// buffer. Floods that never fill a 1 MB buffer mark nothing: neither with
// a segment lost on the wire 10-13 ms into every flood (the queue still
// rising: in the first flood each level is the deepest measured so far)
// nor with losses in the warm-up, the queue empty.
func TestBufferSeenFullOnlyAtOverflow(t *testing.T) {
	const capB, seg = 5600, 1400
	warm := 3 * owdBucket
	flood := func(t time.Duration) bool {
		ph := (t - warm) % (400 * time.Millisecond)
		return t >= warm && ph >= 370*time.Millisecond && ph < 373*time.Millisecond
	}
	for _, tc := range []struct {
		name string
		buf  int
		lose func(time.Duration) bool
		full bool
	}{
		{"floods overflow a 300 KB buffer", 300_000, nil, true},
		{"floods under a 1 MB buffer", 1_000_000, nil, false},
		{"a 1 MB buffer, a loss 10 ms into each flood", 1_000_000, flood, false},
		{"a 1 MB buffer, losses in the warm-up", 1_000_000, func(t time.Duration) bool { return t < warm && t%(50*time.Millisecond) == 0 }, false},
	} {
		c, db, f, A := floodController()
		_, _, drops := queueCellOpts(c, f, A, capB, tc.buf, seg, warm+4*time.Second, 1000, floodRTT, floods(capB, seg, warm), cellOpts{lose: tc.lose})
		c.OnEvent(t0.Add(warm+5*time.Second), slotEv(0, 0))
		got, _ := db.Get(A)
		level, full := db.Full(A)
		t.Logf("%s: %d drops, ŝ_max %d, full %v", tc.name, drops, got, full)
		if full != tc.full {
			t.Errorf("%s: seen full %v, want %v (%d overflow drops, ŝ_max %d)", tc.name, full, tc.full, drops, got)
		}
		if full && (level != got || got > tc.buf) {
			t.Errorf("%s: full at %d with ŝ_max %d of a %d B buffer", tc.name, level, got, tc.buf)
		}
	}
}

// A phone whose packet loop falls behind its signalling by a steady lag
// (from after the one-way delay's base was learned, for the floods' 4 s)
// reads each segment late while the slots' events for the bytes behind
// it have come: the served count takes those as ahead of it, and the
// received count, the lag being there when the segment joined the queue
// too, errs as high. owdMargin absorbs a lag of its size: ŝ_max stays
// under the buffer at 2 and 5 ms (without the margin, 5 ms puts it
// above). A longer one does not: 12 ms gives 7 % above it, the bench's
// crossings of 0.01-0.95 % on mmWave (2026-12-05, runs D and E, valid,
// no late delivery by the emulator) are that size. Not corrected: the
// phone can tell what was served and not read yet only by comparing the
// slots' bytes with the packets' (on a modem the transport blocks carry
// headers and padding the packets do not, and a difference summed over
// seconds runs away), and the controller uses two thirds of a measured
// ŝ_max.
func TestSMaxOneWayDelayPacketLoopBehind(t *testing.T) {
	const buf = 300_000
	warm := 3 * owdBucket
	got := map[time.Duration]int{}
	for _, l := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 12 * time.Millisecond} {
		r := floodQueue(t, buf, cellOpts{stamped: true, readPkt: func(t time.Duration) time.Duration {
			if t < warm {
				return t
			}
			return t + l
		}})
		if r.drops == 0 {
			t.Fatalf("lag %v: the buffer never filled", l)
		}
		got[l] = r.sMax
		t.Logf("packet loop %v behind: ŝ_max %d, buffer %d", l, r.sMax, buf)
	}
	for _, l := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond} {
		if got[l] > buf {
			t.Errorf("packet loop %v behind (within owdMargin %v): ŝ_max %d exceeds the buffer %d", l, owdMargin, got[l], buf)
		}
	}
	if got[12*time.Millisecond] <= got[0] {
		t.Errorf("ŝ_max %d with the loop 12 ms behind, %d with none: the lag does not reach the estimate, the case tests nothing", got[12*time.Millisecond], got[0])
	}
}
