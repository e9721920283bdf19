package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// predictorUsage is --predictor's help: which rule set turns the UE's
// measurement reports into the predictions the Preparation clamp acts on.
const predictorUsage = `handover prediction rule set the controller acts on (the Preparation clamp): ` +
	`streams (default: report streams with per-kind deadlines, multi-shot re-sends kept as one prediction, A1 withdrawing only its own RAT's A2/A5, inferred releases; ` +
	`the best recall and precision on the February 2023 logs, see the README's replay table), ` +
	`alg1 (M2HO MobiCom'24 Algorithm 1: one live prediction, any A1 or 2·T2 withdraws it), ` +
	`a3-only (4G-era baseline: every A3 predicts, no B1/A2)`

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
// the engine's lock, so that events and packets are seen in one order. It
// owns the one Event the controller is given, reused for every event: the
// server runs its sink one event at a time (sigio.Server), and a copy of
// each on the heap would be garbage at a MAC slot's rate (8000/s on
// mmWave). deliver is made once, so a call allocates nothing.
type eventFeed struct {
	do      func(func()) // the engine's Do: runs f under its lock
	onEvent func(time.Time, *signaling.Event)
	clock   func() time.Time
	ev      signaling.Event
	at      time.Time
	deliver func()
	// lagMax is the largest signalling lag seen since takeLag (ns): the
	// time an event reached the proxy less its own timestamp, where the
	// source stamps events on this machine's clock (the bench's emulator;
	// a modem's clock may be off by any constant, so the figure is for
	// the bench's validity, not for the controller).
	lagMax atomic.Int64
}

// takeLag returns the largest lag since the last call and starts over.
func (f *eventFeed) takeLag() time.Duration { return time.Duration(f.lagMax.Swap(0)) }

func newEventFeed(do func(func()), onEvent func(time.Time, *signaling.Event)) *eventFeed {
	f := &eventFeed{do: do, onEvent: onEvent, clock: time.Now}
	f.deliver = func() { f.onEvent(f.at, &f.ev) }
	return f
}

// sink is the sigio.Listen callback.
func (f *eventFeed) sink(ev signaling.Event) {
	f.ev, f.at = ev, f.clock()
	if !ev.Time.IsZero() {
		if lag := int64(f.at.Sub(ev.Time)); lag > f.lagMax.Load() {
			f.lagMax.Store(lag) // one writer: the server runs the sink one event at a time
		}
	}
	f.do(f.deliver)
}
