package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	sub6 = signaling.CellSub6
	mmw  = signaling.CellMmWave
	lte  = signaling.CellLTE
	unk  = signaling.CellUnknown
)

func report(m signaling.MeasEvent, serving signaling.CellType, nb signaling.CellType, nbID string) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindReport, Meas: m,
		Serving:  signaling.Cell{Type: serving},
		Neighbor: signaling.Cell{ID: nbID, Type: nb}}
}

func command(kind signaling.HOKind, t signaling.CellType, id string) *signaling.Event {
	return &signaling.Event{Kind: signaling.KindHOCommand, HO: kind, Target: signaling.Cell{ID: id, Type: t}}
}

func TestAlgorithm1Rules(t *testing.T) {
	tests := []struct {
		name    string
		serving signaling.CellType
		m       signaling.MeasEvent
		nb      signaling.CellType
		want    bool
		typ     signaling.HOType
	}{
		{"A3 sub6→sub6", sub6, signaling.MeasA3, sub6, true, signaling.HOHorizontal},
		{"A3 mmw→mmw", mmw, signaling.MeasA3, mmw, true, signaling.HOHorizontal},
		{"A3 lte→lte", lte, signaling.MeasA3, lte, true, signaling.HOHorizontal},
		{"A3 sub6→mmw (types differ)", sub6, signaling.MeasA3, mmw, false, signaling.HOTypeUnknown},
		{"A3 mmw→sub6 (types differ)", mmw, signaling.MeasA3, sub6, false, signaling.HOTypeUnknown},
		{"A3 serving unknown", unk, signaling.MeasA3, unk, false, signaling.HOTypeUnknown},
		{"A3 neighbour unknown", sub6, signaling.MeasA3, unk, false, signaling.HOTypeUnknown},
		{"B1 from lte", lte, signaling.MeasB1, unk, true, signaling.HOSub6ToMmWave},
		{"B1 from sub6", sub6, signaling.MeasB1, mmw, true, signaling.HOSub6ToMmWave},
		{"B1 from mmw", mmw, signaling.MeasB1, mmw, false, signaling.HOTypeUnknown},
		{"B1 serving unknown", unk, signaling.MeasB1, mmw, false, signaling.HOTypeUnknown},
		{"A5 sub6 + mmw neighbour", sub6, signaling.MeasA5, mmw, true, signaling.HOSub6ToMmWave},
		{"A5 lte + mmw neighbour", lte, signaling.MeasA5, mmw, true, signaling.HOSub6ToMmWave},
		{"A5 sub6 + sub6 neighbour", sub6, signaling.MeasA5, sub6, false, signaling.HOTypeUnknown},
		{"A5 mmw + mmw neighbour", mmw, signaling.MeasA5, mmw, false, signaling.HOTypeUnknown},
		{"A2 mmw", mmw, signaling.MeasA2, unk, true, signaling.HOMmWaveToSub6},
		{"A2 sub6", sub6, signaling.MeasA2, unk, false, signaling.HOTypeUnknown},
		{"A2 lte", lte, signaling.MeasA2, unk, false, signaling.HOTypeUnknown},
		{"A1", mmw, signaling.MeasA1, unk, false, signaling.HOTypeUnknown},
		{"A4", sub6, signaling.MeasA4, mmw, false, signaling.HOTypeUnknown},
		{"A6", sub6, signaling.MeasA6, sub6, false, signaling.HOTypeUnknown},
		{"B2", lte, signaling.MeasB2, mmw, false, signaling.HOTypeUnknown},
		{"periodic", sub6, signaling.MeasPeriodic, sub6, false, signaling.HOTypeUnknown},
		{"unknown event", sub6, signaling.MeasUnknown, sub6, false, signaling.HOTypeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, typ := JudgeAlgorithm1(tc.serving, report(tc.m, tc.serving, tc.nb, "n"))
			if ok != tc.want || typ != tc.typ {
				t.Fatalf("got (%v, %v), want (%v, %v)", ok, typ, tc.want, tc.typ)
			}
		})
	}
	// Not a report: never a prediction.
	if ok, _ := JudgeAlgorithm1(sub6, command(signaling.HOIntraNR, sub6, "x")); ok {
		t.Fatal("a command predicted a handover")
	}
}

func TestA3OnlyRules(t *testing.T) {
	tests := []struct {
		serving, nb signaling.CellType
		m           signaling.MeasEvent
		want        bool
		typ         signaling.HOType
	}{
		{sub6, sub6, signaling.MeasA3, true, signaling.HOHorizontal},
		{sub6, mmw, signaling.MeasA3, true, signaling.HOSub6ToMmWave},
		{mmw, sub6, signaling.MeasA3, true, signaling.HOMmWaveToSub6},
		{unk, sub6, signaling.MeasA3, true, signaling.HOTypeUnknown},
		{lte, unk, signaling.MeasB1, false, signaling.HOTypeUnknown},
		{mmw, unk, signaling.MeasA2, false, signaling.HOTypeUnknown},
		{sub6, mmw, signaling.MeasA5, false, signaling.HOTypeUnknown},
	}
	for i, tc := range tests {
		ok, typ := JudgeA3Only(tc.serving, report(tc.m, tc.serving, tc.nb, ""))
		if ok != tc.want || typ != tc.typ {
			t.Fatalf("%d: got (%v, %v), want (%v, %v)", i, ok, typ, tc.want, tc.typ)
		}
	}
}

func TestHOTypeString(t *testing.T) {
	for typ, want := range map[signaling.HOType]string{signaling.HOHorizontal: "horizontal", signaling.HOSub6ToMmWave: "sub6-to-mmwave", signaling.HOMmWaveToSub6: "mmwave-to-sub6", signaling.HOTypeUnknown: "unknown"} {
		if typ.String() != want {
			t.Fatalf("%d: %q, want %q", typ, typ.String(), want)
		}
	}
}

// step is one input to a Predictor and the outcome it must give.
type step struct {
	ms   int
	ev   *signaling.Event // nil: Tick
	kind OutcomeKind
	// checked when non-zero
	lead      time.Duration
	predicted signaling.HOType
	actual    signaling.HOType
	reason    WithdrawReason
	atMs      int // Outcome.At, -1 to skip
}

func runSteps(t *testing.T, p *Predictor, steps []step) {
	t.Helper()
	for i, s := range steps {
		var o Outcome
		if s.ev == nil {
			o = p.Tick(at(s.ms))
		} else {
			o = p.OnEvent(at(s.ms), s.ev)
		}
		if o.Kind != s.kind {
			t.Fatalf("step %d (t=%d): kind %v, want %v (%+v)", i, s.ms, o.Kind, s.kind, o)
		}
		if s.lead != 0 && o.Lead != s.lead {
			t.Fatalf("step %d: lead %v, want %v", i, o.Lead, s.lead)
		}
		if s.predicted != 0 && o.Predicted != s.predicted {
			t.Fatalf("step %d: predicted %v, want %v", i, o.Predicted, s.predicted)
		}
		if s.actual != 0 && o.Actual != s.actual {
			t.Fatalf("step %d: actual %v, want %v", i, o.Actual, s.actual)
		}
		if s.reason != 0 && o.Reason != s.reason {
			t.Fatalf("step %d: reason %v, want %v", i, o.Reason, s.reason)
		}
		if s.atMs > 0 && !o.At.Equal(at(s.atMs)) {
			t.Fatalf("step %d: at %v, want t=%dms", i, o.At.Sub(t0), s.atMs)
		}
	}
}

func TestPredictorSequences(t *testing.T) {
	a3 := report(signaling.MeasA3, sub6, sub6, "201")
	a1 := report(signaling.MeasA1, sub6, unk, "")
	toSub6 := command(signaling.HOIntraNR, sub6, "201")
	tests := []struct {
		name  string
		steps []step
		t2    time.Duration
	}{
		{"confirmed, lead from first prediction, T2 learned", []step{
			{ms: 1000, ev: a3, kind: OutcomePredicted, predicted: signaling.HOHorizontal},
			{ms: 1050, ev: a3, kind: OutcomeNone}, // repeated: keeps t=1000
			{ms: 1120, ev: toSub6, kind: OutcomeConfirmed, lead: 120 * time.Millisecond, predicted: signaling.HOHorizontal, actual: signaling.HOHorizontal},
		}, 120 * time.Millisecond},
		{"withdrawn by A1", []step{
			{ms: 0, ev: a3, kind: OutcomePredicted},
			{ms: 50, ev: a1, kind: OutcomeWithdrawn, reason: WithdrawA1, atMs: 50},
			{ms: 60, ev: toSub6, kind: OutcomeUnpredicted, actual: signaling.HOHorizontal},
		}, DefaultT2},
		{"A1 without prediction is nothing", []step{
			{ms: 0, ev: a1, kind: OutcomeNone},
		}, DefaultT2},
		{"withdrawn at 2·default T2", []step{
			{ms: 0, ev: a3, kind: OutcomePredicted},
			{ms: 359, kind: OutcomeNone},
			{ms: 360, kind: OutcomeWithdrawn, reason: WithdrawTimeout, atMs: 360},
			{ms: 400, ev: toSub6, kind: OutcomeUnpredicted},
		}, DefaultT2},
		{"withdrawn at 2·learned T2 (mean of 100 and 180 ms)", []step{
			{ms: 0, ev: a3, kind: OutcomePredicted},
			{ms: 100, ev: toSub6, kind: OutcomeConfirmed, lead: 100 * time.Millisecond},
			{ms: 1000, ev: a3, kind: OutcomePredicted},
			// T2 = 100 ms: the deadline is 1200, the command at 1180 is in time.
			{ms: 1180, ev: toSub6, kind: OutcomeConfirmed, lead: 180 * time.Millisecond},
			// T2 = (100+180)/2 = 140 ms: a prediction at 2000 expires at 2280.
			{ms: 2000, ev: a3, kind: OutcomePredicted},
			{ms: 2279, kind: OutcomeNone},
			{ms: 2280, kind: OutcomeWithdrawn, reason: WithdrawTimeout, atMs: 2280},
		}, 140 * time.Millisecond},
		{"unpredicted command does not teach T2", []step{
			{ms: 0, ev: toSub6, kind: OutcomeUnpredicted},
		}, DefaultT2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPredictor(Algorithm1, 0)
			runSteps(t, p, tc.steps)
			if p.T2() != tc.t2 {
				t.Fatalf("T2 %v, want %v", p.T2(), tc.t2)
			}
		})
	}
}

// A command arriving after the deadline without a Tick in between still
// reports the expiry, folded into the command's outcome.
func TestPredictorExpiredFoldedIntoEvent(t *testing.T) {
	p := NewPredictor(Algorithm1, 100*time.Millisecond)
	p.OnEvent(at(0), report(signaling.MeasA3, mmw, mmw, "7"))
	o := p.OnEvent(at(500), command(signaling.HOIntraNR, mmw, "7"))
	if o.Kind != OutcomeUnpredicted || !o.Expired.Valid || !o.Expired.At.Equal(at(200)) || o.Expired.Predicted != signaling.HOHorizontal {
		t.Fatalf("got %+v", o)
	}
}

// The predictor follows the serving data cell through commands: after a
// move to mmWave an A2 predicts the way back; after an SN release the
// serving cell is LTE, where B1 predicts and A2 does not.
func TestPredictorTracksServing(t *testing.T) {
	p := NewPredictor(Algorithm1, 0)
	noServing := func(m signaling.MeasEvent, nb signaling.CellType) *signaling.Event {
		return report(m, unk, nb, "")
	}
	runSteps(t, p, []step{
		{ms: 0, ev: report(signaling.MeasB1, lte, mmw, "m1"), kind: OutcomePredicted, predicted: signaling.HOSub6ToMmWave},
		{ms: 100, ev: command(signaling.HOSNAddition, mmw, "m1"), kind: OutcomeConfirmed, actual: signaling.HOSub6ToMmWave},
		{ms: 1000, ev: noServing(signaling.MeasA2, unk), kind: OutcomePredicted, predicted: signaling.HOMmWaveToSub6},
		{ms: 1100, ev: command(signaling.HOSNRelease, unk, ""), kind: OutcomeConfirmed, actual: signaling.HOMmWaveToSub6},
		{ms: 2000, ev: noServing(signaling.MeasA2, unk), kind: OutcomeNone},
		{ms: 2100, ev: noServing(signaling.MeasB1, mmw), kind: OutcomePredicted, predicted: signaling.HOSub6ToMmWave},
	})
	if p.Serving() != lte {
		t.Fatalf("serving %v, want LTE", p.Serving())
	}
	// An LTE anchor handover keeps the NR leg's type.
	p.OnEvent(at(2200), command(signaling.HOSNAddition, mmw, "m2"))
	o := p.OnEvent(at(3000), command(signaling.HOLTEAnchor, lte, "L9"))
	if p.Serving() != mmw || o.Actual != signaling.HOHorizontal {
		t.Fatalf("after anchor HO serving %v actual %v", p.Serving(), o.Actual)
	}
	// The predicted target gets the type the prediction implies.
	p.OnEvent(at(4000), noServing(signaling.MeasA2, unk))
	if _, typ, target, ok := p.Live(); !ok || typ != signaling.HOMmWaveToSub6 || target.Type != sub6 {
		t.Fatalf("live %v %v %+v", ok, typ, target)
	}
}

func usDur(us int) time.Duration { return time.Duration(us) * time.Microsecond }

// In NSA an LTE report names the LTE anchor as its serving cell while data
// flows on the NR leg: the report is judged by its own serving cell, but
// the data cell, which types the handover that follows, stays NR.
func TestPredictorLTEReportKeepsNRDataCell(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := NewPredictor(Algorithm1, 0)
	// Data on an mmWave leg.
	p.OnEvent(t0, &signaling.Event{Time: t0, Kind: signaling.KindHOCommand, HO: signaling.HOSNChange, Target: signaling.Cell{ID: "m1", Type: signaling.CellMmWave}})
	if p.Serving() != signaling.CellMmWave {
		t.Fatalf("serving %v, want mmwave", p.Serving())
	}
	// An LTE A3 (anchor to anchor) predicts a horizontal handover...
	t1 := t0.Add(5 * time.Second)
	o := p.OnEvent(t1, report(signaling.MeasA3, signaling.CellLTE, signaling.CellLTE, ""))
	if o.Kind != OutcomePredicted || o.Predicted != signaling.HOHorizontal {
		t.Fatalf("LTE A3: got %v %v, want predicted horizontal", o.Kind, o.Predicted)
	}
	// ...without moving the data cell off mmWave.
	if p.Serving() != signaling.CellMmWave {
		t.Fatalf("after LTE report serving %v, want mmwave kept", p.Serving())
	}
	// An anchor handover that keeps the NR leg is mmWave→mmWave.
	o = p.OnEvent(t1.Add(100*time.Millisecond), &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor})
	if o.Kind != OutcomeConfirmed || o.Actual != signaling.HOHorizontal || p.Serving() != signaling.CellMmWave {
		t.Fatalf("anchor HO: %v actual %v serving %v", o.Kind, o.Actual, p.Serving())
	}
	// An LTE A2 is not mmWave's A2: no prediction while the anchor degrades.
	if o := p.OnEvent(t1.Add(2*time.Second), report(signaling.MeasA2, signaling.CellLTE, signaling.CellUnknown, "")); o.Kind != OutcomeNone {
		t.Fatalf("LTE A2 on mmWave data: got %v, want none", o.Kind)
	}
	// An NR A2 from the mmWave leg predicts the fall to sub-6.
	if o := p.OnEvent(t1.Add(3*time.Second), report(signaling.MeasA2, signaling.CellMmWave, signaling.CellUnknown, "")); o.Kind != OutcomePredicted || o.Predicted != signaling.HOMmWaveToSub6 {
		t.Fatalf("NR A2 on mmWave: got %v %v", o.Kind, o.Predicted)
	}
}
