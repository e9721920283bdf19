package score

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// Builders for the failure-mode traces. LTE reports name their serving
// cell type LTE; NR reports name a PCI.
func lteRep(ms int, m signaling.MeasEvent, nb signaling.Cell) signaling.Event {
	return signaling.Event{Time: at(ms), Kind: signaling.KindReport, Meas: m, Serving: signaling.Cell{Type: signaling.CellLTE}, Neighbor: nb}
}

func nrRep(ms int, m signaling.MeasEvent, serving signaling.Cell, nb signaling.Cell) signaling.Event {
	return signaling.Event{Time: at(ms), Kind: signaling.KindReport, Meas: m, Serving: serving, Neighbor: nb}
}

func ho(ms int, kind signaling.HOKind, from, to signaling.Cell) signaling.Event {
	return signaling.Event{Time: at(ms), Kind: signaling.KindHOCommand, HO: kind, Serving: from, Target: to}
}

func inferredHO(ms int, kind signaling.HOKind, from signaling.Cell) signaling.Event {
	e := ho(ms, kind, from, signaling.Cell{Type: signaling.CellLTE})
	e.Inferred = true
	return e
}

var (
	mm500   = signaling.Cell{ID: "500", Type: signaling.CellMmWave}
	mm501   = signaling.Cell{ID: "501", Type: signaling.CellMmWave}
	n88     = signaling.Cell{ID: "88", Type: signaling.CellSub6}
	n89     = signaling.Cell{ID: "89", Type: signaling.CellSub6}
	lteCell = signaling.Cell{Type: signaling.CellLTE}
)

// fastSNChanges teaches a learned T2 of 50 ms, as the February logs do
// (~55 ms): NR A3 answered by an SN change 50 ms later, n times, starting
// at ms, alternating between two sub-6 cells. It ends on n89 when n is odd.
func fastSNChanges(ms, n int) []signaling.Event {
	var evs []signaling.Event
	from, to := n88, n89
	for i := 0; i < n; i++ {
		t := ms + i*1000
		evs = append(evs, nrRep(t, signaling.MeasA3, from, to), ho(t+50, signaling.HOSNChange, from, to))
		from, to = to, from
	}
	return evs
}

func concat(parts ...[]signaling.Event) []signaling.Event {
	var evs []signaling.Event
	for _, p := range parts {
		evs = append(evs, p...)
	}
	return evs
}

// want is a predictor's tally on a failure-mode trace.
type want struct{ handovers, predicted, predictions int }

func (w want) of(c *Counts) want { return want{c.Handovers, c.Predicted, c.Predictions} }

// TestFailureModes runs the failure modes (how real networks
// differ from the February logs) as short synthetic traces. The stream
// rule set must get each right; Algorithm 1 as the paper states it (the
// predictor before the rework) gets each wrong, which the test also checks
// so that the trace really exercises the mode.
func TestFailureModes(t *testing.T) {
	b1mm := signaling.Cell{ID: "522", Type: signaling.CellMmWave}
	tests := []struct {
		name          string
		events        []signaling.Event
		streams, alg1 want
	}{
		{
			// 1. reportAmount > 1: the UE re-sends B1 every 240 ms for
			// 2.4 s while the network waits, then the SN addition comes
			// 150 ms after the last. One prediction, not one per re-send
			// after each 2·T2.
			name: "1 multi-shot B1 re-sends are one prediction",
			events: func() []signaling.Event {
				var evs []signaling.Event
				for ms := 0; ms <= 2400; ms += 240 {
					evs = append(evs, lteRep(ms, signaling.MeasB1, b1mm))
				}
				return append(evs, ho(2550, signaling.HOSNAddition, lteCell, b1mm))
			}(),
			streams: want{1, 1, 1},
			alg1:    want{1, 1, 6},
		},
		{
			// 1b. The same with an NR A5 re-sent every 120 ms for 1 s on
			// one (serving, neighbour) pair, then the SN change.
			name: "1 multi-shot NR A5 re-sends are one prediction",
			events: func() []signaling.Event {
				var evs []signaling.Event
				for ms := 0; ms <= 1080; ms += 120 {
					evs = append(evs, nrRep(ms, signaling.MeasA5, n88, mm500))
				}
				return append(evs, ho(1150, signaling.HOSNChange, n88, mm500))
			}(),
			streams: want{1, 1, 1},
			alg1:    want{1, 1, 4},
		},
		{
			// 2. Answer time by kind: T2 learned from fast A3 → SN changes
			// (50 ms) is far too short for a B1 → SN addition 400 ms later.
			name: "2 B1 answered 400 ms later, after fast SN changes taught T2",
			events: concat(fastSNChanges(0, 4),
				[]signaling.Event{
					inferredHO(4500, signaling.HOSNRelease, n88),
					lteRep(6000, signaling.MeasB1, b1mm),
					ho(6400, signaling.HOSNAddition, n88, b1mm),
				}),
			streams: want{6, 5, 5},
			alg1:    want{6, 4, 5},
		},
		{
			// 3. An LTE A1 in the same millisecond as a B1 says nothing
			// about the NR leg; nor does one right after an NR report.
			name: "3 LTE A1 withdraws only its own RAT and measurement",
			events: []signaling.Event{
				lteRep(0, signaling.MeasB1, b1mm),
				lteRep(0, signaling.MeasA1, signaling.Cell{}),
				ho(100, signaling.HOSNAddition, lteCell, b1mm),
				nrRep(2000, signaling.MeasA3, mm500, mm501),
				lteRep(2010, signaling.MeasA1, signaling.Cell{}),
				ho(2060, signaling.HOSNChange, mm500, mm501),
			},
			streams: want{2, 2, 2},
			alg1:    want{2, 0, 2},
		},
		{
			// 4. An mmWave A2 answered by a release XCAL does not export:
			// the reader infers it (at the system-information read that
			// follows, 150 ms later); with T2 learned at 50 ms Algorithm 1
			// has withdrawn by then. The addition that follows is B1's.
			name: "4 mmWave A2 confirmed by the inferred release",
			events: concat(
				[]signaling.Event{lteRep(0, signaling.MeasB1, b1mm), ho(50, signaling.HOSNAddition, lteCell, b1mm)},
				func() []signaling.Event {
					var evs []signaling.Event
					from, to := b1mm, mm500
					for i := 0; i < 3; i++ {
						ms := 1000 + i*1000
						evs = append(evs, nrRep(ms, signaling.MeasA3, from, to), ho(ms+50, signaling.HOSNChange, from, to))
						from, to = to, from
					}
					return evs
				}(),
				[]signaling.Event{
					nrRep(5000, signaling.MeasA2, mm500, signaling.Cell{}),
					inferredHO(5150, signaling.HOSNRelease, mm500),
					lteRep(6500, signaling.MeasB1, n88),
					ho(6560, signaling.HOSNAddition, mm500, n88),
				}),
			streams: want{6, 6, 6},
			alg1:    want{6, 5, 6},
		},
		{
			// 4b. The same where no system-information read is exported:
			// the release shows only at the B1 1.5 s later, after the A2's
			// deadline. The inferred release confirms the A2's episode
			// (chained): no false alarm, no missed release.
			name: "4 mmWave A2, release seen only at the next B1: chained",
			events: concat(
				[]signaling.Event{lteRep(0, signaling.MeasB1, b1mm), ho(50, signaling.HOSNAddition, lteCell, b1mm)},
				[]signaling.Event{
					nrRep(5000, signaling.MeasA2, b1mm, signaling.Cell{}),
					inferredHO(6500, signaling.HOSNRelease, b1mm),
					lteRep(6500, signaling.MeasB1, n88),
					ho(6560, signaling.HOSNAddition, b1mm, n88),
				}),
			streams: want{3, 3, 3},
			alg1:    want{3, 2, 3},
		},
		{
			// 5. An LTE handover without SCG configuration leaves no
			// command row: the reader infers it from the system-
			// information read 350 ms after the A3; B1 and the SN
			// addition follow.
			name: "5 LTE A3 answered by an inferred anchor handover 350 ms later",
			events: concat(fastSNChanges(0, 3),
				[]signaling.Event{
					lteRep(4000, signaling.MeasA3, lteCell),
					inferredHO(4350, signaling.HOLTEAnchor, n89),
					lteRep(5500, signaling.MeasB1, n88),
					ho(5560, signaling.HOSNAddition, n89, n88),
				}),
			streams: want{5, 5, 5},
			alg1:    want{5, 4, 5},
		},
		{
			// 6a. A5 configured on an mmWave serving cell ahead of an SN
			// change: Algorithm 1 keys A5 only from sub-6.
			name: "6 A5 on an mmWave serving cell",
			events: []signaling.Event{
				nrRep(0, signaling.MeasA5, mm500, mm501),
				ho(60, signaling.HOSNChange, mm500, mm501),
			},
			streams: want{1, 1, 1},
			alg1:    want{1, 0, 0},
		},
		{
			// 6b. NR reports before any message told the PSCell's type
			// (the start of a log): A3 is intra-frequency, a handover all
			// the same.
			name: "6 NR A3 before the PSCell type is known",
			events: []signaling.Event{
				nrRep(0, signaling.MeasA3, signaling.Cell{ID: "88"}, signaling.Cell{ID: "89"}),
				ho(60, signaling.HOSNChange, signaling.Cell{ID: "88"}, n89),
			},
			streams: want{1, 1, 1},
			alg1:    want{1, 0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Run(tc.events, m2ho.Streams, 0, 0)
			if got := (want{}).of(s); got != tc.streams {
				t.Errorf("streams: got %+v, want %+v", got, tc.streams)
			}
			if s.FalseAlarms() != s.Predictions-s.Predicted || s.FalseAlarms() != 0 {
				t.Errorf("streams: false alarms %d, predictions %d, predicted %d", s.FalseAlarms(), s.Predictions, s.Predicted)
			}
			a := Run(tc.events, m2ho.Algorithm1, 0, 0)
			if got := (want{}).of(a); got != tc.alg1 {
				t.Errorf("alg1 (the mode's failure): got %+v, want %+v", got, tc.alg1)
			}
		})
	}
}

// The answer time follows the report stream: a deadline counts from the
// stream's last report, so a B1 re-sent for 10 s keeps one prediction
// live, and the prediction ends when the last re-send's deadline passes.
func TestStreamDeadlineFollowsLastReport(t *testing.T) {
	var evs []signaling.Event
	b1 := signaling.Cell{ID: "522", Type: signaling.CellMmWave}
	for ms := 0; ms <= 10000; ms += 480 {
		evs = append(evs, lteRep(ms, signaling.MeasB1, b1))
	}
	last := evs[len(evs)-1].Time
	evs = append(evs, rep(20000, signaling.MeasPeriodic, signaling.CellLTE, none))
	c := Run(evs, m2ho.Streams, 0, 0)
	if c.Predictions != 1 || c.WithdrawnTimeout != 1 {
		t.Fatalf("predictions %d, timeouts %d, want 1 and 1", c.Predictions, c.WithdrawnTimeout)
	}
	// The prediction was live from the first B1 to the last + 600 ms
	// (the re-send interval with a quarter's slack, more than the
	// addition's answer margin of 480 ms).
	if want := last.Sub(at(0)) + 600*time.Millisecond; c.PredictedTime != want {
		t.Fatalf("predicted time %v, want %v", c.PredictedTime, want)
	}
}
