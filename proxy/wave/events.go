package wave

import (
	"sync"
	"time"
)

// MaxAckRanges is the most ranges of one ACK frame an Events buffer keeps
// (quic-go sends at most 32, protocol.MaxNumAckRanges); more are counted in
// EventsStats.RangesTruncated and the oldest ranges are lost.
const MaxAckRanges = 32

type eventKind uint8

const (
	evSent eventKind = iota + 1
	evAck
	evLost
)

type event struct {
	kind      eventKind
	at        time.Time
	pn        int64
	bytes     int
	datagrams int
	rOff      int // first range in the ranges ring
	rN        int
	delay     time.Duration // ACK Delay of an ACK frame
}

// EventsStats counts what an Events buffer dropped.
type EventsStats struct {
	Recorded        uint64
	Dropped         uint64 // events refused because the buffer (events or ranges) was full
	RangesTruncated uint64
}

// Events is a bounded, allocation-free buffer of transport events between
// the transport's goroutine (which produces them, e.g. quic-go's tracer
// callback) and the Pump (which feeds them to the Pacer under its own
// lock). It decouples the two so that the transport never waits for the
// Pump's lock: the Pump may be blocked inside SendDatagram, waiting for
// the very goroutine that records the events.
type Events struct {
	mu     sync.Mutex
	ev     []event
	head   int
	n      int
	ranges []AckRange
	rHead  int // next free range slot
	rUsed  int // range slots held by buffered events
	st     EventsStats
	notify chan struct{}
}

// NewEvents returns a buffer for capacity events (default 4096 when <= 0).
func NewEvents(capacity int) *Events {
	if capacity <= 0 {
		capacity = 4096
	}
	return &Events{
		ev:     make([]event, capacity),
		ranges: make([]AckRange, capacity*4),
		notify: make(chan struct{}, 1),
	}
}

// Notify is signalled (level-triggered, capacity 1) when events arrive.
func (e *Events) Notify() <-chan struct{} { return e.notify }

func (e *Events) push(ev event) {
	if e.n == len(e.ev) {
		e.st.Dropped++
		return
	}
	e.ev[(e.head+e.n)%len(e.ev)] = ev
	e.n++
	e.st.Recorded++
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// Sent records a packet sent at now: see Pacer.OnSent.
func (e *Events) Sent(now time.Time, pn int64, bytes, datagrams int) {
	e.mu.Lock()
	e.push(event{kind: evSent, at: now, pn: pn, bytes: bytes, datagrams: datagrams})
	e.mu.Unlock()
}

// Lost records a packet declared lost: see Pacer.OnLost.
func (e *Events) Lost(now time.Time, pn int64) {
	e.mu.Lock()
	e.push(event{kind: evLost, at: now, pn: pn})
	e.mu.Unlock()
}

// Acked records one ACK frame received at now: see Pacer.OnAck. The
// ranges are copied.
func (e *Events) Acked(now time.Time, ranges []AckRange) { e.AckedDelayed(now, 0, ranges) }

// AckedDelayed records one ACK frame with its ACK Delay field: see
// Pacer.OnAckDelayed. The ranges are copied.
func (e *Events) AckedDelayed(now time.Time, ackDelay time.Duration, ranges []AckRange) {
	e.mu.Lock()
	if len(ranges) > MaxAckRanges {
		e.st.RangesTruncated++
		ranges = ranges[:MaxAckRanges] // QUIC lists the highest ranges first
	}
	if e.n == len(e.ev) || e.rUsed+len(ranges) > len(e.ranges) {
		e.st.Dropped++
		e.mu.Unlock()
		return
	}
	off := e.rHead
	for _, r := range ranges {
		e.ranges[e.rHead] = r
		e.rHead = (e.rHead + 1) % len(e.ranges)
	}
	e.rUsed += len(ranges)
	e.push(event{kind: evAck, at: now, rOff: off, rN: len(ranges), delay: ackDelay})
	e.mu.Unlock()
}

// Stats returns the counters.
func (e *Events) Stats() EventsStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.st
}

// DrainInto feeds every buffered event to p in order and returns how many.
func (e *Events) DrainInto(p *Pacer) int {
	var buf [MaxAckRanges]AckRange
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.n
	for e.n > 0 {
		ev := e.ev[e.head]
		e.head = (e.head + 1) % len(e.ev)
		e.n--
		switch ev.kind {
		case evSent:
			p.OnSent(ev.at, ev.pn, ev.bytes, ev.datagrams)
		case evLost:
			p.OnLost(ev.at, ev.pn)
		case evAck:
			for i := 0; i < ev.rN; i++ {
				buf[i] = e.ranges[(ev.rOff+i)%len(e.ranges)]
			}
			e.rUsed -= ev.rN
			p.OnAckDelayed(ev.at, ev.delay, buf[:ev.rN])
		}
	}
	return n
}
