package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Stale signalling. A controller that acts on events seconds after they
// happened predicts handovers that are over and clamps windows at the
// wrong time: worse than no signalling, which the controller already
// meets with pass-through (SignalLoss). Events that keep coming but come
// late get the same answer.
//
// Late compared with what: a modem stamps its events on its own clock,
// whose offset from the phone's is unknown and constant but for drift
// (crystals are within ±200 ppm). So the controller compares each event's
// lag (arrival on the phone's clock less the event's own timestamp) with
// the least lag its writer has shown, the offset plus the writer's least
// delay, and judges the excess. That least lag is kept since the writer
// connected, not over a sliding window: a window as long as a backlog
// lasts takes the backlog for the offset (the bench's run stayed 3-5 s
// behind for 170 s). It is aged by the greatest drift instead:
//
//	base(t) = min over events i of (lag_i + maxDrift·(t − t_i))
//
// Since the true offset moves by at most maxDrift·(t − t_i) between
// t_i and t, and lag_i ≥ offset(t_i), base(t) ≥ offset(t): the judged
// lateness lag − base never exceeds the event's true delay, so drift
// alone never sends the controller to pass-through, however long the
// writer stays connected; and it falls short of the true delay by at
// most the least delay plus maxDrift times the age of the best event
// (0.2 ms per second since it; MAC slots renew it many times a second).
// What this cannot see: a backlog the proxy already had when the writer
// connected (it is in the baseline), and a writer's clock stepped back
// (its events look late until it reconnects or drift ages the step out).
//
// The phone's side of the lag is its monotonic clock (now.Sub of two
// readings that carry one, as time.Now's do), so a step of the phone's
// wall clock (NTP, NITZ) is not taken for lateness either.

// maxClockDrift is the drift allowed between a writer's clock and the
// phone's, as a divisor: 1/5000 = 200 ppm.
const maxClockDrift = 5000

// SignalSource is one writer of signalling events as the controller
// judges their lateness. The zero value is a writer not heard from yet;
// a caller with several writers keeps one per writer and zeroes it when a
// new writer takes its place (OnSourceEvent).
type SignalSource struct {
	on bool
	// ref is the arrival of the writer's first timed event, tsRef its
	// timestamp: lags are measured from there, on the phone's monotonic
	// clock and the writer's own.
	ref, tsRef time.Time
	// base is the least lag seen (relative to ref), baseAt its arrival;
	// it ages by maxClockDrift from there.
	base   time.Duration
	baseAt time.Time
}

// late records an event stamped ts arriving at now and returns how much
// later than the writer's least lag (aged) it came; 0 when it is the
// least lag so far.
func (s *SignalSource) late(now, ts time.Time) time.Duration {
	if !s.on {
		*s = SignalSource{on: true, ref: now, tsRef: ts, baseAt: now}
		return 0
	}
	lag := now.Sub(s.ref) - ts.Sub(s.tsRef)
	aged := s.base + max(now.Sub(s.baseAt), 0)/maxClockDrift
	if lag <= aged {
		s.base, s.baseAt = lag, now
		return 0
	}
	return lag - aged
}

// staleState is the controller's pass-through for stale signalling.
type staleState struct {
	on     bool
	lastAt time.Time // arrival of the last stale event
	events uint64    // events judged stale
	spells uint64    // entries into pass-through for staleness
}

// judge records ev's lateness and reports whether the controller is to
// ignore it: it is stale, or stale events came less than SignalStale
// ago (a backlog drains through events less and less late, and the
// controller comes back only once they have been fresh for the bound).
// Events without a timestamp cannot be judged; while the controller is
// in pass-through for staleness they are ignored too, as they come
// through the same late path.
func (c *Controller) judge(now time.Time, src *SignalSource, ev *signaling.Event) bool {
	if src == nil || ev.Time.IsZero() {
		return c.stale.on
	}
	late := src.late(now, ev.Time)
	switch {
	case late > c.cfg.SignalStale:
		c.stale.events++
		c.stale.lastAt = now
		if !c.stale.on {
			c.stale.on = true
			c.stale.spells++
			c.setState(now, Stable, "signal stale")
			c.obs.SignalStale(now, late)
		}
	case c.stale.on && now.Sub(c.stale.lastAt) >= c.cfg.SignalStale:
		c.stale.on = false
		c.obs.SignalFresh(now)
	}
	return c.stale.on
}

// StaleSignal reports whether the controller is in pass-through because
// its events come late, how many events it judged stale and how many
// times it went to pass-through for it.
func (c *Controller) StaleSignal() (on bool, events, spells uint64) {
	return c.stale.on, c.stale.events, c.stale.spells
}
