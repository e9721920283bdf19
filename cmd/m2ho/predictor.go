package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// predictorUsage is --predictor's help: which rule set turns the UE's
// measurement reports into the predictions the Preparation clamp acts on.
const predictorUsage = `handover prediction rule set the controller acts on (the Preparation clamp): ` +
	`streams (default: report streams with per-kind deadlines, multi-shot re-sends kept as one prediction, A1 withdrawing only its own RAT's A2/A5, inferred releases; ` +
	`the best recall and precision on the February 2023 logs, see the README's replay table), ` +
	`alg1 (M2HO MobiCom'24 Algorithm 1: one live prediction, any A1 or 2·T2 withdraws it), ` +
	`a3-only (4G-era baseline: every A3 predicts, no B1/A2)`

// signalStaleUsage is --signal-stale's help.
const signalStaleUsage = `pass-through while signalling events reach the controller more than this ` +
	`later than their writer usually does (default 200ms). Each event's lag is its arrival less its own timestamp; ` +
	`a modem's clock is off the phone's by an unknown constant, so the lag is compared with the least lag that writer showed ` +
	`since it connected (allowed to grow by 200 ppm of clock drift), not with 0. Normal lag is up to ~20ms ` +
	`(a burst's MAC slots are sent at its end); a prediction is useful only ahead of its handover ` +
	`(report to command 30-100ms, command to execution ~33ms), so an event 200ms late is history. ` +
	`The controller comes back once events have been on time for this long; events without a timestamp are not judged`

// predictorRules is the rule set --predictor names.
func (c *runConfig) predictorRules() (m2ho.Rules, error) {
	switch c.Predictor {
	case "streams", "alg1", "a3-only":
		r, _ := m2ho.RulesByName(c.Predictor)
		return r, nil
	}
	return nil, fmt.Errorf("--predictor %q: want streams, alg1 or a3-only", c.Predictor)
}

// eventFeed hands the signalling socket's events to the controller under
// the engine's lock, so that events and packets are seen in one order.
// The server hands it each writer's buffered events as one batch
// (sigio.ListenBatch), and the feed gives the controller the whole batch
// under one taking of the lock: taken once per event, at a MAC slot's
// rate (8000/s on mmWave), the lock's hand-overs with the packet pump,
// which holds it for each batch of packets, bound how fast events get
// through (BenchmarkSignalPath). Events are stamped with the batch's
// arrival: they were all waiting in the socket when it was read.
//
// Each writer's clock is judged on its own (m2ho.SignalSource, one per
// server slot, started over when a new connection takes the slot). The
// feed allocates nothing per event: deliver and deliverBatch are made
// once, and the one Event of sink is reused.
type eventFeed struct {
	do      func(func()) // the engine's Do: runs f under its lock
	onEvent func(time.Time, *m2ho.SignalSource, *signaling.Event)
	clock   func() time.Time
	ev      signaling.Event
	at      time.Time
	batch   sigio.Batch
	// srcs[slot] is the writer in server slot slot, conns[slot] its
	// connection; direct is sink's writer.
	srcs         []m2ho.SignalSource
	conns        []uint64
	direct       m2ho.SignalSource
	deliver      func()
	deliverBatch func()
	// lagMax is the largest signalling lag seen since takeLag (ns): the
	// time an event reached the proxy less its own timestamp, where the
	// source stamps events on this machine's clock (the bench's emulator;
	// a modem's clock may be off by any constant, so the figure is for
	// the bench's validity; the controller judges lateness against each
	// writer's own least lag, m2ho.SignalSource).
	lagMax atomic.Int64
}

// takeLag returns the largest lag since the last call and starts over.
func (f *eventFeed) takeLag() time.Duration { return time.Duration(f.lagMax.Swap(0)) }

func newEventFeed(do func(func()), onEvent func(time.Time, *m2ho.SignalSource, *signaling.Event)) *eventFeed {
	f := &eventFeed{do: do, onEvent: onEvent, clock: time.Now,
		srcs: make([]m2ho.SignalSource, sigio.DefaultMaxConns), conns: make([]uint64, sigio.DefaultMaxConns)}
	f.deliver = func() { f.onEvent(f.at, &f.direct, &f.ev) }
	f.deliverBatch = func() {
		src := f.source(f.batch.Conn, f.batch.Slot)
		for i := range f.batch.Events {
			f.onEvent(f.at, src, &f.batch.Events[i])
		}
	}
	return f
}

// source is the writer of connection conn in server slot slot, started
// over when the connection is new.
func (f *eventFeed) source(conn uint64, slot int) *m2ho.SignalSource {
	if slot >= len(f.srcs) {
		f.srcs = append(f.srcs, make([]m2ho.SignalSource, slot+1-len(f.srcs))...)
		f.conns = append(f.conns, make([]uint64, slot+1-len(f.conns))...)
	}
	if f.conns[slot] != conn {
		f.conns[slot], f.srcs[slot] = conn, m2ho.SignalSource{}
	}
	return &f.srcs[slot]
}

// noteLag keeps the largest lag; one writer at a time: the server runs
// the sink one batch at a time.
func (f *eventFeed) noteLag(ev *signaling.Event) {
	if !ev.Time.IsZero() {
		if lag := int64(f.at.Sub(ev.Time)); lag > f.lagMax.Load() {
			f.lagMax.Store(lag)
		}
	}
}

// sink takes one event, from a writer of its own (tests, callers
// without a server).
func (f *eventFeed) sink(ev signaling.Event) {
	f.ev, f.at = ev, f.clock()
	f.noteLag(&f.ev)
	f.do(f.deliver)
}

// sinkBatch is the sigio.ListenBatch callback.
func (f *eventFeed) sinkBatch(b sigio.Batch) {
	f.batch, f.at = b, f.clock()
	for i := range b.Events {
		f.noteLag(&b.Events[i])
	}
	f.do(f.deliverBatch)
	f.batch.Events = nil // the server reuses it
}
