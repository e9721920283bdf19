package main

import (
	"fmt"
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
}

func newEventFeed(do func(func()), onEvent func(time.Time, *signaling.Event)) *eventFeed {
	f := &eventFeed{do: do, onEvent: onEvent, clock: time.Now}
	f.deliver = func() { f.onEvent(f.at, &f.ev) }
	return f
}

// sink is the sigio.Listen callback.
func (f *eventFeed) sink(ev signaling.Event) {
	f.ev, f.at = ev, f.clock()
	f.do(f.deliver)
}
