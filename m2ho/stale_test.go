package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// stamped is e as sent at ts by its source.
func stamped(e *signaling.Event, ts time.Time) *signaling.Event {
	e.Time = ts
	return e
}

// The modem's clock is 3 h behind the phone's: a lag of 3 h is its usual
// and nothing is stale; lag growing to 300 ms beyond it sends the
// controller to Stable and pass-through (the clamp is gone), stale events
// are not acted on, events fresh again bring it back after SignalStale,
// and it predicts again.
func TestStaleSignalPassThroughAndBack(t *testing.T) {
	fx := newFixture(t, nil)
	f := attach(fx, 0)
	const offset = 3 * time.Hour
	ts := func(ms int) time.Time { return at(ms).Add(-offset) }
	// Normal lag: the slots of a burst sent at its end, up to 20 ms late.
	for ms := 0; ms < 100; ms++ {
		fx.ev(ms+20-ms%20, stamped(slotEv(0.5, 1000), ts(ms)))
	}
	fx.ev(100, stamped(a3(sub6, "A"), ts(100)))
	fx.want(Preparation)
	check(t, "clamp", fx.pkt(101, f, upACK(1, 65535, 7)), rewrite(782, ReasonPreparation))
	if fx.obs.stale != 0 {
		t.Fatalf("normal lag judged stale %d times", fx.obs.stale)
	}

	// The feed falls behind: events stamped 1 ms apart from 110 ms
	// arrive 2 ms apart from 120 ms, each 1 ms later than the one before.
	// The least lag was 0 (the report), so the first judged stale is
	// the one 201 ms late.
	ms, now := 110, 120
	for ; fx.obs.stale == 0; ms, now = ms+1, now+2 {
		if now > 10000 {
			t.Fatal("never judged stale")
		}
		if fx.want(Preparation); fx.c.Hint().PassThrough {
			t.Fatalf("pass-through at %d ms late", now-ms)
		}
		fx.ev(now, stamped(slotEv(0.5, 1000), ts(ms)))
	}
	ms, now = ms-1, now-2 // the stale event's
	if late := now - ms; late != 201 {
		t.Fatalf("stale at %d ms late, want 201", late)
	}
	fx.want(Stable)
	if !fx.c.Hint().PassThrough || fx.obs.last() != "preparation>stable:signal stale" {
		t.Fatalf("hint %+v last %q", fx.c.Hint(), fx.obs.last())
	}
	check(t, "no clamp while stale", fx.pkt(now, f, upACK(1, 65535, 7)), pass)
	// A stale prediction is not acted on.
	fx.ev(now+1, stamped(a3(sub6, "B"), ts(ms)))
	fx.want(Stable)
	if on, events, spells := fx.c.StaleSignal(); !on || events != 2 || spells != 1 {
		t.Fatalf("StaleSignal %v %d %d, want on, 2 events, 1 spell", on, events, spells)
	}

	// Fresh again (a lag of 5 ms): the controller waits SignalStale
	// after the last stale event before acting on them.
	last := now + 1
	fx.ev(last+1, stamped(slotEv(0.5, 1000), ts(last-4)))
	fx.ev(last+150, stamped(a3(sub6, "B"), ts(last+145)))
	fx.want(Stable)
	if !fx.c.Hint().PassThrough || fx.obs.fresh != 0 {
		t.Fatalf("back after 150 ms of fresh events: hint %+v", fx.c.Hint())
	}
	fx.ev(last+200, stamped(a3(sub6, "B"), ts(last+195)))
	fx.want(Preparation)
	if fx.c.Hint().PassThrough || fx.obs.fresh != 1 || fx.obs.stale != 1 {
		t.Fatalf("hint %+v fresh %d stale %d", fx.c.Hint(), fx.obs.fresh, fx.obs.stale)
	}
	if v := fx.pkt(last+201, f, upACK(1, 65535, 7)); v.Action != Rewrite {
		t.Fatalf("no clamp after the return: %+v", v)
	}
}

// A modem clock with any constant offset, and one drifting by up to
// 200 ppm either way for two hours, is never judged stale; without the
// aging of the least lag, one running slow by 200 ppm would be after
// 1000 s (200 ms of drift).
func TestStaleSignalOffsetAndDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		ppm    float64 // the modem's clock rate less the phone's
	}{
		{"ahead 1h", -time.Hour, 0},
		{"behind 3 days", 72 * time.Hour, 0},
		{"slow 200ppm", 5 * time.Second, -200},
		{"fast 200ppm", -5 * time.Second, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, nil)
			const every = 10 // ms between events
			for ms := 0; ms < 2*3600*1000; ms += every {
				// The modem's clock: offset and drift; the event reaches
				// the controller 0-20 ms after it was stamped.
				own := at(ms).Add(-tc.offset).Add(time.Duration(float64(ms) * tc.ppm * 1e-6 * float64(time.Millisecond)))
				fx.ev(ms+(ms/every)%21, stamped(slotEv(0.5, 1000), own))
			}
			if on, events, _ := fx.c.StaleSignal(); on || events != 0 || fx.obs.stale != 0 {
				t.Fatalf("judged stale: %d events", events)
			}
		})
	}
}

// Events without a timestamp cannot be judged: they never send the
// controller to pass-through, and do not bring it back either.
func TestStaleSignalUntimedEvents(t *testing.T) {
	fx := newFixture(t, nil)
	fx.ev(0, stamped(slotEv(0.5, 1000), at(0)))
	for ms := 1; ms < 1000; ms++ {
		fx.ev(ms, slotEv(0.5, 1000)) // no Time
	}
	fx.ev(1000, a3(sub6, "A"))
	fx.want(Preparation)
	if fx.obs.stale != 0 {
		t.Fatal("an untimed event judged stale")
	}
	fx.ev(1001, stamped(slotEv(0.5, 1000), at(500))) // 500 ms late
	fx.want(Stable)
	for ms := 1002; ms < 2000; ms++ {
		fx.ev(ms, slotEv(0.5, 1000))
	}
	fx.ev(2000, a3(sub6, "A"))
	if fx.want(Stable); !fx.c.Hint().PassThrough || fx.obs.fresh != 0 {
		t.Fatalf("untimed events ended the stale spell: %+v", fx.c.Hint())
	}
	fx.ev(2001, stamped(a3(sub6, "A"), at(2000)))
	fx.want(Preparation)
}

// Each writer has its own clock: two sources an hour apart are both
// fresh, and one of them falling behind is judged on its own lag.
func TestStaleSignalPerSource(t *testing.T) {
	fx := newFixture(t, nil)
	var modem, feed SignalSource
	for ms := 0; ms < 1000; ms++ {
		fx.c.OnSourceEvent(at(ms), &modem, stamped(slotEv(0.5, 1000), at(ms).Add(-time.Hour)))
		fx.c.OnSourceEvent(at(ms), &feed, stamped(slotEv(0.5, 1000), at(ms).Add(time.Hour)))
	}
	if fx.obs.stale != 0 {
		t.Fatal("two clocks an hour apart judged stale")
	}
	fx.c.OnSourceEvent(at(1000), &feed, stamped(slotEv(0.5, 1000), at(700).Add(time.Hour)))
	if fx.obs.stale != 1 || !fx.c.Hint().PassThrough {
		t.Fatalf("a source 300 ms behind: stale %d", fx.obs.stale)
	}
}
