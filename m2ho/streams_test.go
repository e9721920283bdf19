package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

func nrReport(m signaling.MeasEvent, serving signaling.Cell, nb signaling.Cell) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: m, Serving: serving, Neighbor: nb}
}

func lteReport(m signaling.MeasEvent, nb signaling.Cell) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: m, Serving: signaling.Cell{Type: lte}, Neighbor: nb}
}

var (
	cMM1 = signaling.Cell{ID: "500", Type: mmw}
	cMM2 = signaling.Cell{ID: "501", Type: mmw}
	cS1  = signaling.Cell{ID: "88", Type: sub6}
	cS2  = signaling.Cell{ID: "89", Type: sub6}
)

// An A1 withdraws only streams of its own RAT and serving cell whose
// trigger was the serving cell getting worse.
func TestStreamsA1Scope(t *testing.T) {
	tests := []struct {
		name      string
		report    *signaling.Event
		a1        *signaling.Event
		withdrawn bool
	}{
		{"NR A1 on the A2's cell withdraws it", nrReport(signaling.MeasA2, cMM1, signaling.Cell{}), nrReport(signaling.MeasA1, cMM1, signaling.Cell{}), true},
		{"NR A1 on the A5's cell withdraws it", nrReport(signaling.MeasA5, cS1, cMM1), nrReport(signaling.MeasA1, cS1, signaling.Cell{}), true},
		{"NR A1 on another cell does not", nrReport(signaling.MeasA2, cMM1, signaling.Cell{}), nrReport(signaling.MeasA1, cMM2, signaling.Cell{}), false},
		{"LTE A1 does not withdraw an NR A2", nrReport(signaling.MeasA2, cMM1, signaling.Cell{}), lteReport(signaling.MeasA1, signaling.Cell{}), false},
		{"LTE A1 does not withdraw a B1", lteReport(signaling.MeasB1, cMM1), lteReport(signaling.MeasA1, signaling.Cell{}), false},
		{"LTE A1 withdraws an LTE A5", lteReport(signaling.MeasA5, signaling.Cell{Type: lte}), lteReport(signaling.MeasA1, signaling.Cell{}), true},
		{"NR A1 does not withdraw an NR A3 (relative to a neighbour)", nrReport(signaling.MeasA3, cS1, cS2), nrReport(signaling.MeasA1, cS1, signaling.Cell{}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPredictor(Streams, 0)
			if o := p.OnEvent(at(0), tc.report); o.Kind != OutcomePredicted {
				t.Fatalf("report: %v", o.Kind)
			}
			o := p.OnEvent(at(10), tc.a1)
			if got := o.Kind == OutcomeWithdrawn && o.Reason == WithdrawA1; got != tc.withdrawn {
				t.Fatalf("withdrawn %v (%+v), want %v", got, o, tc.withdrawn)
			}
			if _, _, _, live := p.Live(); live == tc.withdrawn {
				t.Fatalf("live %v after the A1", live)
			}
		})
	}
}

// Of two streams, the A1 withdraws one and the prediction stays on the
// other.
func TestStreamsA1KeepsOtherStreams(t *testing.T) {
	p := NewPredictor(Streams, 0)
	p.OnEvent(at(0), lteReport(signaling.MeasB1, cMM1))
	p.OnEvent(at(5), nrReport(signaling.MeasA2, cS1, signaling.Cell{}))
	if o := p.OnEvent(at(10), nrReport(signaling.MeasA1, cS1, signaling.Cell{})); o.Kind != OutcomeNone {
		t.Fatalf("A1: %v, want none (the B1 stream is live)", o.Kind)
	}
	if _, typ, target, live := p.Live(); !live || target.ID != "500" || typ != signaling.HOSub6ToMmWave {
		t.Fatalf("live %v %v %+v, want the B1's", live, typ, target)
	}
}

// The rule table's types and targets.
func TestStreamsTyping(t *testing.T) {
	tests := []struct {
		name   string
		setup  []*signaling.Event // commands before the report
		report *signaling.Event
		typ    signaling.HOType
		target signaling.CellType
	}{
		{"NR A3 sub-6", nil, nrReport(signaling.MeasA3, cS1, cS2), signaling.HOHorizontal, sub6},
		{"NR A3 before the PSCell type is known", nil, nrReport(signaling.MeasA3, signaling.Cell{ID: "88"}, signaling.Cell{ID: "89"}), signaling.HOHorizontal, unk},
		{"NR A5 on mmWave, neighbour unknown: same frequency", nil, nrReport(signaling.MeasA5, cMM1, signaling.Cell{ID: "9"}), signaling.HOHorizontal, mmw},
		{"NR A5 sub-6 to mmWave", nil, nrReport(signaling.MeasA5, cS1, cMM1), signaling.HOSub6ToMmWave, mmw},
		{"NR A2 on mmWave: release to LTE", nil, nrReport(signaling.MeasA2, cMM1, signaling.Cell{}), signaling.HOMmWaveToSub6, lte},
		{"NR A2 on sub-6: release to LTE", nil, nrReport(signaling.MeasA2, cS1, signaling.Cell{}), signaling.HOHorizontal, lte},
		{"B1 at the start: from LTE", nil, lteReport(signaling.MeasB1, cMM1), signaling.HOSub6ToMmWave, mmw},
		{"B1 after mmWave: from the last NR cell", []*signaling.Event{
			{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1},
			{Kind: signaling.KindHOCommand, HO: signaling.HOSNRelease, Inferred: true, Target: signaling.Cell{Type: lte}},
		}, lteReport(signaling.MeasB1, cS1), signaling.HOMmWaveToSub6, sub6},
		{"LTE A3 with an NR leg: anchor handover keeps it", []*signaling.Event{
			{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1},
		}, lteReport(signaling.MeasA3, signaling.Cell{Type: lte}), signaling.HOHorizontal, mmw},
		{"LTE A3 without NR leg", nil, lteReport(signaling.MeasA3, signaling.Cell{Type: lte}), signaling.HOHorizontal, lte},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPredictor(Streams, 0)
			for i, ev := range tc.setup {
				p.OnEvent(at(i*10), ev)
			}
			o := p.OnEvent(at(1000), tc.report)
			if o.Kind != OutcomePredicted || o.Predicted != tc.typ || o.Target.Type != tc.target {
				t.Fatalf("got %v %v target %v, want predicted %v target %v", o.Kind, o.Predicted, o.Target.Type, tc.typ, tc.target)
			}
		})
	}
	for _, m := range []signaling.MeasEvent{signaling.MeasA1, signaling.MeasA4, signaling.MeasA6, signaling.MeasB2, signaling.MeasPeriodic, signaling.MeasUnknown} {
		p := NewPredictor(Streams, 0)
		if o := p.OnEvent(at(0), nrReport(m, cS1, cS2)); o.Kind != OutcomeNone {
			t.Errorf("NR %v predicted", m)
		}
		if o := p.OnEvent(at(0), lteReport(m, cS1)); o.Kind != OutcomeNone {
			t.Errorf("LTE %v predicted", m)
		}
	}
	// An LTE A2 predicts nothing (it starts inter-frequency measurements).
	if o := NewPredictor(Streams, 0).OnEvent(at(0), lteReport(signaling.MeasA2, signaling.Cell{})); o.Kind != OutcomeNone {
		t.Errorf("LTE A2 predicted")
	}
}

// Answer times are learned per kind: slow SN additions widen the B1
// deadline, and fast ones never take it below its floor.
func TestStreamsLearnAnswerTimes(t *testing.T) {
	p := NewPredictor(Streams, 0)
	_, m0 := p.AnswerTimes()
	if m0[answerAddition] != 500*time.Millisecond || m0[answerChange] != 500*time.Millisecond {
		t.Fatalf("prior margins %v", m0)
	}
	ms := 0
	for i := 0; i < 20; i++ {
		p.OnEvent(at(ms), lteReport(signaling.MeasB1, cMM1))
		p.OnEvent(at(ms+1200), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1})
		p.OnEvent(at(ms+1300), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNRelease, Target: signaling.Cell{Type: lte}})
		ms += 5000
	}
	mean, margin := p.AnswerTimes()
	if mean[answerAddition] < 1000*time.Millisecond || margin[answerAddition] < 1200*time.Millisecond || margin[answerAddition] > maxAnswer {
		t.Fatalf("after 20 additions 1.2 s after B1: mean %v margin %v", mean[answerAddition], margin[answerAddition])
	}
	// Other kinds learned nothing.
	if margin[answerChange] != m0[answerChange] || margin[answerAnchor] != m0[answerAnchor] {
		t.Fatalf("margins %v, others changed from %v", margin, m0)
	}
	// A B1 now predicts, and the addition 1.2 s later confirms it.
	p.OnEvent(at(ms), lteReport(signaling.MeasB1, cMM1))
	if o := p.OnEvent(at(ms+1200), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1}); o.Kind != OutcomeConfirmed {
		t.Fatalf("addition 1.2 s after B1: %v", o.Kind)
	}
	// Fast answers keep the floor.
	q := NewPredictor(Streams, 0)
	for i := 0; i < 50; i++ {
		q.OnEvent(at(i*1000), nrReport(signaling.MeasA3, cS1, cS2))
		q.OnEvent(at(i*1000+10), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNChange, Target: cS2})
	}
	if _, m := q.AnswerTimes(); m[answerChange] != resendFloor {
		t.Fatalf("after fast SN changes margin %v, want the floor %v", m[answerChange], resendFloor)
	}
}

// Past maxStreams live streams the one closest to its deadline goes; the
// prediction stays one.
func TestStreamsBounded(t *testing.T) {
	p := NewPredictor(Streams, 0)
	n := 0
	for i := 0; i < 3*maxStreams; i++ {
		o := p.OnEvent(at(i), lteReport(signaling.MeasB1, signaling.Cell{ID: string(rune('a' + i)), Type: mmw}))
		if o.Kind == OutcomePredicted {
			n++
		}
	}
	if n != 1 || p.st.n != maxStreams {
		t.Fatalf("predictions %d, streams %d", n, p.st.n)
	}
	d, ok := p.Deadline()
	if !ok || !d.Equal(at(3*maxStreams-1).Add(500*time.Millisecond)) {
		t.Fatalf("deadline %v", d.Sub(t0))
	}
	if o := p.Tick(d); o.Kind != OutcomeWithdrawn || o.Reason != WithdrawTimeout || !o.At.Equal(d) {
		t.Fatalf("tick at the deadline: %+v", o)
	}
}

func TestStreamsAllocateNothing(t *testing.T) {
	p := NewPredictor(Streams, 0)
	evs := []*signaling.Event{
		lteReport(signaling.MeasB1, cMM1), nrReport(signaling.MeasA3, cS1, cS2), lteReport(signaling.MeasA1, signaling.Cell{}),
		{Kind: signaling.KindHOCommand, HO: signaling.HOSNChange, Target: cS2},
	}
	ms := 0
	allocs := testing.AllocsPerRun(200, func() {
		for _, ev := range evs {
			p.Tick(at(ms))
			p.OnEvent(at(ms), ev)
			ms += 100
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

// FuzzPredictorStreams feeds arbitrary reports and commands and checks the
// outcome protocol: a prediction starts only when none is live, ends
// (confirmed, withdrawn) only when one is, never ends before it started,
// and a live prediction's deadline is after its start.
func FuzzPredictorStreams(f *testing.F) {
	f.Add([]byte{0, 7, 1, 2, 3, 9, 1, 0, 0, 1})
	f.Add([]byte{0, 5, 2, 2, 1, 50, 0, 1, 1, 0, 200, 1, 3, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		next := func() byte {
			if len(in) == 0 {
				return 0
			}
			b := in[0]
			in = in[1:]
			return b
		}
		types := []signaling.CellType{unk, sub6, mmw, lte}
		ids := []string{"", "1", "2"}
		p := NewPredictor(Streams, 0)
		now := t0
		for len(in) > 0 {
			now = now.Add(time.Duration(next()) * 5 * time.Millisecond)
			_, _, _, was := p.Live()
			var o Outcome
			switch next() % 4 {
			case 0:
				o = p.Tick(now)
			case 1:
				o = p.OnEvent(now, &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOKind(next() % 6), Inferred: next()%2 == 0,
					Serving: signaling.Cell{Type: types[next()%4]}, Target: signaling.Cell{ID: ids[next()%3], Type: types[next()%4]}})
			default:
				o = p.OnEvent(now, &signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasEvent(next() % 10),
					Serving:  signaling.Cell{ID: ids[next()%3], Type: types[next()%4]},
					Neighbor: signaling.Cell{ID: ids[next()%3], Type: types[next()%4]}})
			}
			if o.Expired.Valid {
				was = false // folded withdrawal before the event
			}
			switch o.Kind {
			case OutcomePredicted:
				if was {
					t.Fatal("a new prediction while one was live")
				}
			case OutcomeConfirmed, OutcomeWithdrawn:
				if !was && !o.Chained {
					t.Fatalf("%v without a live prediction", o.Kind)
				}
				if o.At.Before(o.PredictedAt) {
					t.Fatalf("%v at %v before its prediction at %v", o.Kind, o.At, o.PredictedAt)
				}
			case OutcomeUnpredicted:
				if was {
					t.Fatal("unpredicted while a prediction was live")
				}
			}
			if at, _, _, live := p.Live(); live {
				if d, ok := p.Deadline(); !ok || !d.After(at) || p.st.n == 0 || p.st.n > maxStreams {
					t.Fatalf("live from %v, deadline %v (%v), %d streams", at, d, ok, p.st.n)
				}
			} else if p.st.n != 0 {
				t.Fatalf("%d streams without a live prediction", p.st.n)
			}
		}
	})
}

// The controller runs on the stream rule set as on Algorithm 1: a B1
// clamps (Preparation), the LTE A1 in the same millisecond does not undo
// it, the addition and its random access lead to Smoothing; a B1 nobody
// answers is withdrawn at its deadline (the last B1 + the learned answer
// time, at least 500 ms).
func TestControllerWithStreams(t *testing.T) {
	c := New(Config{Rules: Streams})
	c.OnEvent(at(0), lteReport(signaling.MeasB1, cMM1))
	c.OnEvent(at(0), lteReport(signaling.MeasA1, signaling.Cell{}))
	if c.State() != Preparation {
		t.Fatalf("after B1 and LTE A1: %v, want preparation", c.State())
	}
	c.OnEvent(at(300), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1})
	c.OnEvent(at(330), &signaling.Event{Kind: signaling.KindRandomAccess, RAResult: signaling.RASuccess})
	if c.State() != Smoothing {
		t.Fatalf("after the addition's random access: %v, want smoothing", c.State())
	}
	c.Tick(at(1000))
	c.OnEvent(at(2000), lteReport(signaling.MeasB1, cS1))
	if c.State() != Preparation {
		t.Fatalf("second B1: %v", c.State())
	}
	d, ok := c.Predictor().Deadline()
	if !ok || d.Sub(at(2000)) < resendFloor {
		t.Fatalf("deadline %v after the B1 (%v)", d.Sub(at(2000)), ok)
	}
	c.Tick(d.Add(-time.Millisecond))
	if c.State() != Preparation {
		t.Fatalf("before the B1's deadline: %v", c.State())
	}
	c.Tick(d)
	if c.State() != Stable {
		t.Fatalf("at the B1's deadline: %v, want stable", c.State())
	}
}

// Outcome.Reports names the kinds of report an episode rested on: the
// first report's at the prediction, all of them at its end, whether
// confirmed, timed out or taken back by an A1.
func TestStreamsReports(t *testing.T) {
	cmdAdd := &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cS1}

	// An mmWave A2 that times out: nr-a2 alone.
	p := NewPredictor(Streams, 0)
	if o := p.OnEvent(at(0), nrReport(signaling.MeasA2, cMM1, signaling.Cell{})); o.Kind != OutcomePredicted || o.Reports != ReportsNRA2 {
		t.Fatalf("A2: %v reports %v, want predicted nr-a2", o.Kind, o.Reports)
	}
	if o := p.Tick(at(5000)); o.Kind != OutcomeWithdrawn || o.Reason != WithdrawTimeout || o.Reports != ReportsNRA2 {
		t.Fatalf("A2 timed out: %v %v reports %v", o.Kind, o.Reason, o.Reports)
	}

	// An A2, then a B1 in the same episode, and the addition: both.
	p = NewPredictor(Streams, 0)
	p.OnEvent(at(0), nrReport(signaling.MeasA2, cMM1, signaling.Cell{}))
	p.OnEvent(at(100), lteReport(signaling.MeasB1, cS1))
	o := p.OnEvent(at(160), cmdAdd)
	if o.Kind != OutcomeConfirmed || o.Reports != ReportsNRA2|ReportsLTEB1 {
		t.Fatalf("A2 + B1, addition: %v reports %v, want confirmed lte-b1+nr-a2", o.Kind, o.Reports)
	}
	if got := o.Reports.String(); got != "lte-b1+nr-a2" {
		t.Errorf("name %q", got)
	}

	// The next episode starts afresh: a B1 alone.
	if o := p.OnEvent(at(3000), lteReport(signaling.MeasB1, cS2)); o.Reports != ReportsLTEB1 {
		t.Fatalf("next B1: reports %v", o.Reports)
	}

	// An A1 takes an A2 back: nr-a2.
	p = NewPredictor(Streams, 0)
	p.OnEvent(at(0), nrReport(signaling.MeasA2, cMM1, signaling.Cell{}))
	if o := p.OnEvent(at(50), nrReport(signaling.MeasA1, cMM1, signaling.Cell{})); o.Kind != OutcomeWithdrawn || o.Reports != ReportsNRA2 {
		t.Fatalf("A1: %v reports %v", o.Kind, o.Reports)
	}

	// The classic rule sets name none.
	q := NewPredictor(Algorithm1, 0)
	q.OnEvent(at(0), nrReport(signaling.MeasA2, cMM1, signaling.Cell{}))
	if o := q.OnEvent(at(40), cmdAdd); o.Kind != OutcomeConfirmed || o.Reports != 0 || o.Reports.String() != "-" {
		t.Fatalf("Algorithm1: %v reports %v", o.Kind, o.Reports)
	}
}

// An NR A2 from an mmWave data cell holds its prediction for
// SetMmWaveA2Hold (the mmWave cell at its edge: on the February 2023
// drives the LTE B1 and the sub-6 addition came 1.4-2.1 s after it), so
// the episode is still live at the B1 and confirmed by the addition. The
// hold does not outlive itself, an A1 on the A2's cell still withdraws it,
// an A2 from a sub-6 cell is not held, and without the hold the A2 times
// out at its kind's deadline (0.5 s) as before.
func TestStreamsMmWaveA2Hold(t *testing.T) {
	const hold = 2500 * time.Millisecond
	cmdAdd := &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cS1}
	newP := func(h time.Duration) *Predictor {
		p := NewPredictor(Streams, 0)
		p.SetMmWaveA2Hold(h)
		// the data on mmWave cell 500
		p.OnEvent(at(0), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: cMM1})
		return p
	}

	p := newP(hold)
	if o := p.OnEvent(at(1000), nrReport(signaling.MeasA2, cMM1, signaling.Cell{})); o.Kind != OutcomePredicted {
		t.Fatalf("A2 on mmWave: %v", o.Kind)
	}
	if o := p.Tick(at(1000 + 1400)); o.Kind != OutcomeNone {
		t.Fatalf("held A2 at 1.4 s: %v %v, want still live", o.Kind, o.Reason)
	}
	p.OnEvent(at(1000+1450), lteReport(signaling.MeasB1, cS1))
	if o := p.OnEvent(at(1000+1510), cmdAdd); o.Kind != OutcomeConfirmed || o.Reports != ReportsNRA2|ReportsLTEB1 || o.PredictedAt != at(1000) {
		t.Fatalf("addition after the held A2: %v reports %v predicted at %v", o.Kind, o.Reports, o.PredictedAt)
	}

	p = newP(hold)
	p.OnEvent(at(1000), nrReport(signaling.MeasA2, cMM1, signaling.Cell{}))
	if o := p.Tick(at(1000 + 2499)); o.Kind != OutcomeNone {
		t.Fatalf("held A2 just before its hold ends: %v", o.Kind)
	}
	if o := p.Tick(at(1000 + 2500)); o.Kind != OutcomeWithdrawn || o.Reason != WithdrawTimeout {
		t.Fatalf("held A2 at its hold's end: %v %v, want withdrawn by timeout", o.Kind, o.Reason)
	}

	p = newP(hold)
	p.OnEvent(at(1000), nrReport(signaling.MeasA2, cMM1, signaling.Cell{}))
	if o := p.OnEvent(at(1300), nrReport(signaling.MeasA1, cMM1, signaling.Cell{})); o.Kind != OutcomeWithdrawn || o.Reason != WithdrawA1 {
		t.Fatalf("A1 on the held A2's cell: %v %v, want withdrawn", o.Kind, o.Reason)
	}

	for _, tc := range []struct {
		name string
		hold time.Duration
		data signaling.Cell
	}{{"no hold", 0, cMM1}, {"A2 from sub-6", hold, cS2}} {
		p := NewPredictor(Streams, 0)
		p.SetMmWaveA2Hold(tc.hold)
		p.OnEvent(at(0), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNAddition, Target: tc.data})
		if o := p.OnEvent(at(1000), nrReport(signaling.MeasA2, tc.data, signaling.Cell{})); o.Kind != OutcomePredicted {
			t.Fatalf("%s: A2: %v", tc.name, o.Kind)
		}
		if o := p.Tick(at(1000 + 1400)); o.Kind != OutcomeWithdrawn || o.Reason != WithdrawTimeout {
			t.Fatalf("%s: A2 at 1.4 s: %v %v, want withdrawn by its kind's deadline", tc.name, o.Kind, o.Reason)
		}
	}
}
