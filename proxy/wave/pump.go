package wave

import (
	"context"
	"sync"
	"time"
)

// Pump is the thin, goroutine-owning part of the pacer: it serialises a
// Pacer and a Queue under one lock, feeds the Pacer the transport's events
// (from an Events buffer), and releases the Queue when a timer says the
// next burst may go. Everything it decides comes from the Pacer; only the
// Pump reads the clock and owns a timer.
type Pump struct {
	mu     sync.Mutex
	pacer  *Pacer
	queue  *Queue
	events *Events
	send   func([]byte) error
	clock  func() time.Time
	kick   chan struct{}
}

// NewPump wires a pacer and a queue in front of send (e.g. a quic-go
// Conn.SendDatagram). events may be nil when no transport feedback exists
// (the pacer then stays at its initial TxTime). clock nil means time.Now.
func NewPump(p *Pacer, q *Queue, events *Events, send func([]byte) error, clock func() time.Time) *Pump {
	if clock == nil {
		clock = time.Now
	}
	return &Pump{pacer: p, queue: q, events: events, send: send, clock: clock, kick: make(chan struct{}, 1)}
}

func (m *Pump) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Push queues one packet (copied) and releases at once what the pacer
// allows, so a packet arriving at an empty queue in an open window waits
// for no goroutine switch. It reports false for a packet the queue can
// never hold (counted in QueueStats.DroppedOversize).
func (m *Pump) Push(pkt []byte) bool {
	m.mu.Lock()
	ok := m.queue.Push(pkt)
	m.step(m.clock())
	more := m.queue.Len() > 0
	m.mu.Unlock()
	if more {
		m.wake()
	}
	return ok
}

// step drains events and releases; m.mu held.
func (m *Pump) step(now time.Time) {
	if m.events != nil {
		m.events.DrainInto(m.pacer)
	}
	if m.queue.Len() > 0 {
		m.queue.Release(now, m.pacer, m.send)
	}
}

// Run releases bursts until ctx ends. Call it once, in its own goroutine.
func (m *Pump) Run(ctx context.Context) error {
	t := time.NewTimer(time.Hour)
	t.Stop()
	var evc <-chan struct{}
	if m.events != nil {
		evc = m.events.Notify()
	}
	for {
		m.mu.Lock()
		now := m.clock()
		m.step(now)
		wait := time.Duration(-1)
		if m.queue.Len() > 0 {
			if at, n := m.pacer.Next(now); n > 0 && at.After(now) {
				wait = at.Sub(now)
			}
			// n > 0 at now: the bytes budget of the ŝ_max cap stopped the
			// release; n == 0: cap blocked. Both wait for an event.
		}
		m.mu.Unlock()
		if wait >= 0 {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-m.kick:
		case <-evc:
		case <-t.C:
		}
		t.Stop()
	}
}

// Locked runs f with the pacer and queue under the pump's lock, at the
// pump's now, and wakes the pump afterwards. Use it for hints and for
// reading State/Stats consistently.
func (m *Pump) Locked(f func(now time.Time, p *Pacer, q *Queue)) {
	m.mu.Lock()
	f(m.clock(), m.pacer, m.queue)
	m.mu.Unlock()
	m.wake()
}

// HandoverPredicted forwards the hint: see Pacer.OnHandoverPredicted.
func (m *Pump) HandoverPredicted(sMaxBytes int) (err error) {
	m.Locked(func(now time.Time, p *Pacer, _ *Queue) { err = p.OnHandoverPredicted(now, sMaxBytes) })
	return err
}

// HandoverExecuted forwards the hint: see Pacer.OnHandoverExecuted.
func (m *Pump) HandoverExecuted(cellType string, cEstBytesPerSec float64) (err error) {
	m.Locked(func(now time.Time, p *Pacer, _ *Queue) { err = p.OnHandoverExecuted(now, cellType, cEstBytesPerSec) })
	return err
}

// PredictionWithdrawn forwards the hint: see Pacer.OnPredictionWithdrawn.
func (m *Pump) PredictionWithdrawn() {
	m.Locked(func(now time.Time, p *Pacer, _ *Queue) { p.OnPredictionWithdrawn(now) })
}

// State returns the pacer's state and the queue's counters together.
func (m *Pump) State() (State, QueueStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pacer.State(), m.queue.Stats()
}
