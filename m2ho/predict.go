package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// HOType is the kind of handover by the radio types it joins (§2.2).
type HOType uint8

const (
	HOTypeUnknown HOType = iota
	Horizontal           // same cell type (mmWave→mmWave, sub-6→sub-6)
	Sub6ToMmWave         // vertical, up (LTE anchor counts as sub-6)
	MmWaveToSub6         // vertical, down
)

func (t HOType) String() string {
	switch t {
	case Horizontal:
		return "horizontal"
	case Sub6ToMmWave:
		return "sub6-to-mmwave"
	case MmWaveToSub6:
		return "mmwave-to-sub6"
	}
	return "unknown"
}

// hoTypeOf classifies a move from one cell type to another.
func hoTypeOf(from, to signaling.CellType) HOType {
	switch {
	case from == signaling.CellUnknown || to == signaling.CellUnknown:
		return HOTypeUnknown
	case from == signaling.CellMmWave && to == signaling.CellMmWave:
		return Horizontal
	case from == signaling.CellMmWave:
		return MmWaveToSub6
	case to == signaling.CellMmWave:
		return Sub6ToMmWave
	}
	return Horizontal // both sub-6 (LTE or NR FR1)
}

// Rules decides from one measurement report whether a handover will follow
// and of which kind; serving is the serving data cell's type as tracked.
type Rules func(serving signaling.CellType, ev *signaling.Event) (predict bool, t HOType)

// Algorithm1 is M2HO's prediction rule set (§4.2, Algorithm 1):
//   - A3 with serving and neighbour of the same type → horizontal;
//   - serving sub-6 (LTE included) and B1 → vertical to mmWave;
//   - serving sub-6 and A5 with an mmWave neighbour → vertical to mmWave;
//   - serving mmWave and A2 → vertical to sub-6;
//   - anything else (A4, B2, A6, periodic, unknown types) → no handover.
func Algorithm1(serving signaling.CellType, ev *signaling.Event) (bool, HOType) {
	if ev.Kind != signaling.KindReport {
		return false, HOTypeUnknown
	}
	switch ev.Meas {
	case signaling.MeasA3:
		if serving != signaling.CellUnknown && ev.Neighbor.Type == serving {
			return true, Horizontal
		}
	case signaling.MeasB1:
		if serving.IsSub6() {
			return true, Sub6ToMmWave
		}
	case signaling.MeasA5:
		if serving.IsSub6() && ev.Neighbor.Type == signaling.CellMmWave {
			return true, Sub6ToMmWave
		}
	case signaling.MeasA2:
		if serving == signaling.CellMmWave {
			return true, MmWaveToSub6
		}
	}
	return false, HOTypeUnknown
}

// A3Only is a 4G-era baseline in the manner of LTE-VR [55]: every A3
// predicts a handover, whatever the cell types; it knows nothing of B1 or
// mmWave's A2, which is why it misses 5G's vertical handovers (§6.3).
func A3Only(serving signaling.CellType, ev *signaling.Event) (bool, HOType) {
	if ev.Kind != signaling.KindReport || ev.Meas != signaling.MeasA3 {
		return false, HOTypeUnknown
	}
	return true, hoTypeOf(serving, ev.Neighbor.Type)
}

// OutcomeKind says what a Predictor learned from one input.
type OutcomeKind uint8

const (
	OutcomeNone        OutcomeKind = iota
	OutcomePredicted               // a new prediction (none was live)
	OutcomeConfirmed               // a handover command followed a live prediction
	OutcomeWithdrawn               // a live prediction was taken back
	OutcomeUnpredicted             // a handover command came with no live prediction
)

func (k OutcomeKind) String() string {
	switch k {
	case OutcomePredicted:
		return "predicted"
	case OutcomeConfirmed:
		return "confirmed"
	case OutcomeWithdrawn:
		return "withdrawn"
	case OutcomeUnpredicted:
		return "unpredicted"
	}
	return "none"
}

// WithdrawReason says why a prediction was withdrawn (§4.2).
type WithdrawReason uint8

const (
	WithdrawNone    WithdrawReason = iota
	WithdrawA1                     // the serving cell recovered (A1 after the prediction)
	WithdrawTimeout                // no handover command within 2·T2
)

func (r WithdrawReason) String() string {
	switch r {
	case WithdrawA1:
		return "a1"
	case WithdrawTimeout:
		return "timeout"
	}
	return "none"
}

// Outcome is one prediction result, for the controller and for replay
// statistics (precision, recall, lead time).
type Outcome struct {
	Kind OutcomeKind
	At   time.Time // when it happened (a timeout: the deadline, not the call)

	// PredictedAt is the time of the first prediction of the episode
	// (Predicted, Confirmed, Withdrawn).
	PredictedAt time.Time
	Predicted   HOType         // the predicted type (latest report's)
	Actual      HOType         // Confirmed, Unpredicted: from serving before the command and the target
	Lead        time.Duration  // Confirmed: command time - PredictedAt
	Reason      WithdrawReason // Withdrawn
	// Target is the predicted target (the report's neighbour; Type set from
	// the predicted HOType when the report left it unknown) or, for a
	// command, the command's target.
	Target signaling.Cell

	// Expired reports a live prediction whose 2·T2 deadline had passed
	// before the event given to OnEvent, when Tick was not called in
	// between; the Controller always calls Tick first, so it never sees it.
	Expired Expiry
}

// Expiry is a timeout withdrawal folded into another outcome.
type Expiry struct {
	Valid       bool
	At          time.Time // the deadline
	PredictedAt time.Time
	Predicted   HOType
}

// PredictionOutcome is what Observer.Prediction receives.
type PredictionOutcome = Outcome

// t2MaxSamples bounds the weight of history in the running mean of T2:
// past this many samples it becomes an exponential mean with gain 1/64,
// so T2 still follows a change of operator or area.
const t2MaxSamples = 64

// Predictor implements §4.2: it turns measurement reports and handover
// commands into predictions, confirmations and withdrawals. It is pure
// (time comes in with every call) and allocates nothing.
type Predictor struct {
	rules     Rules
	defaultT2 time.Duration

	serving signaling.CellType

	t2      time.Duration // running mean of report→command
	t2n     int
	live    bool
	predAt  time.Time // first prediction of the live episode
	predTyp HOType
	target  signaling.Cell
}

// NewPredictor returns a predictor with the given rules (Algorithm1 when
// nil); defaultT2 is T2 until a report→command interval was measured.
func NewPredictor(rules Rules, defaultT2 time.Duration) *Predictor {
	if rules == nil {
		rules = Algorithm1
	}
	if defaultT2 <= 0 {
		defaultT2 = DefaultT2
	}
	return &Predictor{rules: rules, defaultT2: defaultT2}
}

// T2 is the current mean report→command interval (defaultT2 before any).
func (p *Predictor) T2() time.Duration {
	if p.t2n == 0 {
		return p.defaultT2
	}
	return p.t2
}

// Serving is the tracked serving data cell type.
func (p *Predictor) Serving() signaling.CellType { return p.serving }

// Live reports the live prediction, if any: when it was first made, its
// type and predicted target.
func (p *Predictor) Live() (at time.Time, t HOType, target signaling.Cell, ok bool) {
	return p.predAt, p.predTyp, p.target, p.live
}

// Deadline is when the live prediction is withdrawn for want of a command.
func (p *Predictor) Deadline() (time.Time, bool) {
	if !p.live {
		return time.Time{}, false
	}
	return p.predAt.Add(2 * p.T2()), true
}

// Tick withdraws a live prediction whose 2·T2 deadline is not after now.
func (p *Predictor) Tick(now time.Time) Outcome {
	d, ok := p.Deadline()
	if !ok || now.Before(d) {
		return Outcome{}
	}
	o := Outcome{Kind: OutcomeWithdrawn, At: d, PredictedAt: p.predAt, Predicted: p.predTyp, Reason: WithdrawTimeout, Target: p.target}
	p.live = false
	return o
}

// OnEvent feeds one signalling event. A prediction whose deadline had
// already passed is withdrawn first and reported in Outcome.Expired (call
// Tick before OnEvent to get it as an outcome of its own).
func (p *Predictor) OnEvent(now time.Time, ev *signaling.Event) Outcome {
	var exp Expiry
	if w := p.Tick(now); w.Kind == OutcomeWithdrawn {
		exp = Expiry{Valid: true, At: w.At, PredictedAt: w.PredictedAt, Predicted: w.Predicted}
	}
	o := p.onEvent(now, ev)
	o.Expired = exp
	return o
}

func (p *Predictor) onEvent(now time.Time, ev *signaling.Event) Outcome {
	switch ev.Kind {
	case signaling.KindReport:
		// The rules judge a report by the serving cell it measured (an LTE
		// report's serving cell is the LTE anchor even while data flows
		// on an NR leg); the data cell, which classifies the handover that
		// follows, moves only with NR reports and commands.
		reportServing := ev.Serving.Type
		if reportServing == signaling.CellUnknown {
			reportServing = p.serving
		}
		if t := ev.Serving.Type; t != signaling.CellUnknown && (t != signaling.CellLTE || !isNR(p.serving)) {
			p.serving = t
		}
		if ev.Meas == signaling.MeasA1 && p.live {
			p.live = false
			return Outcome{Kind: OutcomeWithdrawn, At: now, PredictedAt: p.predAt, Predicted: p.predTyp, Reason: WithdrawA1, Target: p.target}
		}
		ok, t := p.rules(reportServing, ev)
		if !ok {
			return Outcome{}
		}
		target := ev.Neighbor
		if target.Type == signaling.CellUnknown {
			switch t {
			case Sub6ToMmWave:
				target.Type = signaling.CellMmWave
			case MmWaveToSub6:
				target.Type = signaling.CellSub6
			case Horizontal:
				target.Type = reportServing
			}
		}
		p.predTyp, p.target = t, target
		if p.live {
			// A repeated prediction keeps the first time: lead time and
			// the 2·T2 deadline count from the first report.
			return Outcome{}
		}
		p.live, p.predAt = true, now
		return Outcome{Kind: OutcomePredicted, At: now, PredictedAt: now, Predicted: t, Target: target}

	case signaling.KindHOCommand:
		// A command that names its source cell (the XCAL reader does)
		// is typed by it; otherwise by the data cell as tracked.
		from := p.serving
		if ev.Serving.Type != signaling.CellUnknown {
			from = ev.Serving.Type
		}
		to := commandTargetType(from, ev)
		o := Outcome{At: now, Actual: hoTypeOf(from, to), Target: ev.Target}
		if o.Target.Type == signaling.CellUnknown {
			o.Target.Type = to
		}
		if p.live {
			o.Kind, o.PredictedAt, o.Predicted = OutcomeConfirmed, p.predAt, p.predTyp
			o.Lead = now.Sub(p.predAt)
			p.addT2(o.Lead)
			p.live = false
		} else {
			o.Kind = OutcomeUnpredicted
		}
		if to != signaling.CellUnknown {
			p.serving = to
		}
		return o
	}
	return Outcome{}
}

// commandTargetType is the serving data cell's type after a command: SN
// release falls back to LTE; an LTE anchor handover keeps an NR leg's type
// (the data cell did not change) and otherwise makes LTE the data cell.
func commandTargetType(from signaling.CellType, ev *signaling.Event) signaling.CellType {
	switch ev.HO {
	case signaling.HOSNRelease:
		return signaling.CellLTE
	case signaling.HOLTEAnchor:
		if from == signaling.CellSub6 || from == signaling.CellMmWave {
			return from
		}
		return signaling.CellLTE
	}
	return ev.Target.Type
}

func (p *Predictor) addT2(d time.Duration) {
	if d < 0 {
		return
	}
	if p.t2n < t2MaxSamples {
		p.t2n++
	}
	p.t2 += (d - p.t2) / time.Duration(p.t2n)
}

// isNR reports whether t is an NR cell (an NSA secondary leg or SA).
func isNR(t signaling.CellType) bool {
	return t == signaling.CellSub6 || t == signaling.CellMmWave
}
