package m2ho

import (
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Rules is a prediction rule set. The classic ones (Algorithm1, A3Only)
// are a RuleFunc judged per report, with one live prediction and the
// paper's 2·T2 deadline; Streams is the stream rule set of streams.go.
type Rules interface {
	// Name is the rule set's name in `m2ho replay` and configuration.
	Name() string
}

// RuleFunc decides from one measurement report whether a handover will
// follow and of which type; serving is the report's serving cell type (the
// data cell's when the report does not say). Its predictor keeps one live
// prediction, withdrawn by any A1 or 2·T2 after its first report (§4.2).
type RuleFunc func(serving signaling.CellType, ev *signaling.Event) (predict bool, t signaling.HOType)

// namedRules is a RuleFunc with its name.
type namedRules struct {
	name  string
	judge RuleFunc
}

func (r namedRules) Name() string { return r.name }

// Classic returns a classic rule set of the given name.
func Classic(name string, judge RuleFunc) Rules { return namedRules{name: name, judge: judge} }

// Algorithm1 is M2HO's prediction rule set (§4.2, Algorithm 1):
//   - A3 with serving and neighbour of the same type → horizontal;
//   - serving sub-6 (LTE included) and B1 → vertical to mmWave;
//   - serving sub-6 and A5 with an mmWave neighbour → vertical to mmWave;
//   - serving mmWave and A2 → vertical to sub-6;
//   - anything else (A4, B2, A6, periodic, unknown types) → no handover.
var Algorithm1 = Classic("alg1", JudgeAlgorithm1)

// A3Only is a 4G-era baseline in the manner of LTE-VR [55]: every A3
// predicts a handover, whatever the cell types; it knows nothing of B1 or
// mmWave's A2, which is why it misses 5G's vertical handovers (§6.3).
var A3Only = Classic("a3-only", JudgeA3Only)

// JudgeAlgorithm1 is Algorithm 1's per-report decision.
func JudgeAlgorithm1(serving signaling.CellType, ev *signaling.Event) (bool, signaling.HOType) {
	if ev.Kind != signaling.KindReport {
		return false, signaling.HOTypeUnknown
	}
	switch ev.Meas {
	case signaling.MeasA3:
		if serving != signaling.CellUnknown && ev.Neighbor.Type == serving {
			return true, signaling.HOHorizontal
		}
	case signaling.MeasB1:
		if serving.IsSub6() {
			return true, signaling.HOSub6ToMmWave
		}
	case signaling.MeasA5:
		if serving.IsSub6() && ev.Neighbor.Type == signaling.CellMmWave {
			return true, signaling.HOSub6ToMmWave
		}
	case signaling.MeasA2:
		if serving == signaling.CellMmWave {
			return true, signaling.HOMmWaveToSub6
		}
	}
	return false, signaling.HOTypeUnknown
}

// JudgeA3Only is the A3-only baseline's per-report decision.
func JudgeA3Only(serving signaling.CellType, ev *signaling.Event) (bool, signaling.HOType) {
	if ev.Kind != signaling.KindReport || ev.Meas != signaling.MeasA3 {
		return false, signaling.HOTypeUnknown
	}
	return true, signaling.ClassifyHO(serving, ev.Neighbor.Type)
}

// RulesByName finds a rule set by its name; "m2ho" is Algorithm 1's old
// name.
func RulesByName(name string) (Rules, bool) {
	switch name {
	case "alg1", "m2ho", "algorithm1":
		return Algorithm1, true
	case "a3-only":
		return A3Only, true
	case "streams":
		return Streams, true
	}
	return nil, false
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
	Predicted   signaling.HOType // the predicted type (latest report's)
	Actual      signaling.HOType // Confirmed, Unpredicted: from serving before the command and the target
	Lead        time.Duration    // Confirmed: command time - PredictedAt
	Reason      WithdrawReason   // Withdrawn
	// Target is the predicted target (the report's neighbour; Type set from
	// the predicted type when the report left it unknown) or, for a
	// command, the command's target.
	Target signaling.Cell
	// PredictedTarget is, for Confirmed, the target the prediction named
	// (Target is then the command's), so that the predicted target type
	// can be checked.
	PredictedTarget signaling.Cell
	// Inferred marks a Confirmed or Unpredicted handover that the reader
	// inferred (signaling.Event.Inferred) rather than read from a command.
	Inferred bool
	// Reports is what the episode's predictions rested on (Predicted:
	// the first report's kind; Confirmed, Withdrawn: every kind the
	// episode gathered). Streams only.
	Reports Reports
	// Chained marks a Confirmed inferred handover whose episode had been
	// withdrawn by its timeout before the evidence came (Streams only):
	// that Withdrawn outcome was not a false alarm after all. No
	// prediction was live at At; Lead counts from the episode's start.
	Chained bool

	// Expired reports a live prediction whose deadline had passed before
	// the event given to OnEvent, when Tick was not called in between; the
	// Controller always calls Tick first, so it never sees it.
	Expired Expiry
}

// Expiry is a timeout withdrawal folded into another outcome.
type Expiry struct {
	Valid       bool
	At          time.Time // the deadline
	PredictedAt time.Time
	Predicted   signaling.HOType
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
	judge     RuleFunc // classic rule sets; nil for Streams
	defaultT2 time.Duration

	serving signaling.CellType // the data cell's type
	lastNR  signaling.CellType // the type of the last NR cell data was on

	t2      time.Duration // running mean of report→command
	t2n     int
	live    bool
	predAt  time.Time // first prediction of the live episode
	predTyp signaling.HOType
	target  signaling.Cell

	st streamState // Streams only
	// a2Hold: an NR A2 from an mmWave data cell keeps its stream live at
	// least this long (SetMmWaveA2Hold; 0: its kind's deadline alone).
	a2Hold time.Duration
}

// NewPredictor returns a predictor with the given rules (Algorithm1 when
// nil); defaultT2 is T2 until a report→command interval was measured (the
// classic rule sets' deadline is 2·T2).
func NewPredictor(rules Rules, defaultT2 time.Duration) *Predictor {
	if rules == nil {
		rules = Algorithm1
	}
	if defaultT2 <= 0 {
		defaultT2 = DefaultT2
	}
	p := &Predictor{rules: rules, defaultT2: defaultT2}
	switch r := rules.(type) {
	case namedRules:
		p.judge = r.judge
	case streamRules:
		p.st.init(r)
	default:
		p.judge = JudgeAlgorithm1
	}
	return p
}

// Rules is the predictor's rule set.
func (p *Predictor) Rules() Rules { return p.rules }

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
func (p *Predictor) Live() (at time.Time, t signaling.HOType, target signaling.Cell, ok bool) {
	return p.predAt, p.predTyp, p.target, p.live
}

// Deadline is when the live prediction is withdrawn for want of a command.
func (p *Predictor) Deadline() (time.Time, bool) {
	if !p.live {
		return time.Time{}, false
	}
	if p.judge == nil {
		return p.st.deadline(), true
	}
	return p.predAt.Add(2 * p.T2()), true
}

// Tick withdraws a live prediction whose deadline is not after now.
func (p *Predictor) Tick(now time.Time) Outcome {
	if p.judge == nil {
		return p.tickStreams(now)
	}
	d, ok := p.Deadline()
	if !ok || now.Before(d) {
		return Outcome{}
	}
	return p.withdraw(d, WithdrawTimeout)
}

func (p *Predictor) withdraw(at time.Time, why WithdrawReason) Outcome {
	p.live = false
	return Outcome{Kind: OutcomeWithdrawn, At: at, PredictedAt: p.predAt, Predicted: p.predTyp, Reason: why, Target: p.target, Reports: Reports(p.st.kinds)}
}

// OnEvent feeds one signalling event. A prediction whose deadline had
// already passed is withdrawn first and reported in Outcome.Expired (call
// Tick before OnEvent to get it as an outcome of its own).
func (p *Predictor) OnEvent(now time.Time, ev *signaling.Event) Outcome {
	var exp Expiry
	if w := p.Tick(now); w.Kind == OutcomeWithdrawn {
		exp = Expiry{Valid: true, At: w.At, PredictedAt: w.PredictedAt, Predicted: w.Predicted}
	}
	var o Outcome
	switch ev.Kind {
	case signaling.KindReport:
		rs := p.trackReport(ev)
		if p.judge == nil {
			o = p.reportStreams(now, rs, ev)
		} else {
			o = p.reportClassic(now, rs, ev)
		}
	case signaling.KindHOCommand:
		o = p.command(now, ev)
	}
	o.Expired = exp
	return o
}

// trackReport returns the report's serving cell type and moves the data
// cell: the rules judge a report by the serving cell it measured (an LTE
// report's serving cell is the LTE anchor even while data flows on an NR
// leg); the data cell, which classifies the handover that follows, moves
// only with NR reports and commands.
func (p *Predictor) trackReport(ev *signaling.Event) signaling.CellType {
	rs := ev.Serving.Type
	if rs == signaling.CellUnknown {
		rs = p.serving
	}
	if t := ev.Serving.Type; t != signaling.CellUnknown && (t != signaling.CellLTE || !isNR(p.serving)) {
		p.setServing(t)
	}
	return rs
}

func (p *Predictor) setServing(t signaling.CellType) {
	p.serving = t
	if isNR(t) {
		p.lastNR = t
	}
}

func (p *Predictor) reportClassic(now time.Time, rs signaling.CellType, ev *signaling.Event) Outcome {
	if ev.Meas == signaling.MeasA1 && p.live {
		return p.withdraw(now, WithdrawA1)
	}
	ok, t := p.judge(rs, ev)
	if !ok {
		return Outcome{}
	}
	target := impliedTarget(ev.Neighbor, t, rs)
	p.predTyp, p.target = t, target
	if p.live {
		// A repeated prediction keeps the first time: lead time and
		// the 2·T2 deadline count from the first report.
		return Outcome{}
	}
	p.live, p.predAt = true, now
	return Outcome{Kind: OutcomePredicted, At: now, PredictedAt: now, Predicted: t, Target: target}
}

// impliedTarget is the report's neighbour with the type the predicted
// handover type implies when the report left it unknown.
func impliedTarget(nb signaling.Cell, t signaling.HOType, serving signaling.CellType) signaling.Cell {
	if nb.Type == signaling.CellUnknown {
		switch t {
		case signaling.HOSub6ToMmWave:
			nb.Type = signaling.CellMmWave
		case signaling.HOMmWaveToSub6:
			nb.Type = signaling.CellSub6
		case signaling.HOHorizontal:
			nb.Type = serving
		}
	}
	return nb
}

func (p *Predictor) command(now time.Time, ev *signaling.Event) Outcome {
	// A command that names its source cell (the XCAL reader does)
	// is typed by it; otherwise by the data cell as tracked.
	from := p.serving
	if ev.Serving.Type != signaling.CellUnknown {
		from = ev.Serving.Type
	}
	to := commandTargetType(from, ev)
	o := Outcome{At: now, Actual: signaling.ClassifyHO(from, to), Target: ev.Target, Inferred: ev.Inferred}
	if o.Target.Type == signaling.CellUnknown {
		o.Target.Type = to
	}
	switch {
	case p.live:
		o.Kind, o.PredictedAt, o.Predicted, o.PredictedTarget = OutcomeConfirmed, p.predAt, p.predTyp, p.target
		o.Reports = Reports(p.st.kinds)
		o.Lead = now.Sub(p.predAt)
		p.addT2(o.Lead)
		p.live = false
	case p.judge == nil && ev.Inferred && p.st.chained(ev.HO):
		// The evidence of an unexported handover came after the episode
		// announcing it timed out (XCAL.md: no system-information read,
		// the release shows only at the next B1).
		c := &p.st.chain
		o.Kind, o.Chained, o.PredictedAt, o.Predicted, o.PredictedTarget = OutcomeConfirmed, true, c.at, c.typ, c.target
		o.Reports = Reports(c.kinds)
		o.Lead = now.Sub(c.at)
	default:
		o.Kind = OutcomeUnpredicted
	}
	if p.judge == nil {
		p.st.answered(now, ev.HO)
	}
	if p.judge == nil {
		// Every handover ends the episode: the reports before it
		// describe the old serving cells, and a reconfiguration with
		// sync removes the UE's reporting entries (TS 38.331 and 36.331
		// §5.5.6.1), so re-sends stop and a new report is needed.
		p.st.clear()
	}
	if to != signaling.CellUnknown {
		p.setServing(to)
	}
	return o
}

// commandTargetType is the serving data cell's type after a command: SN
// release falls back to LTE; an LTE anchor handover keeps an NR leg's type
// (the data cell did not change) unless it was inferred (one without SCG
// configuration), and otherwise makes LTE the data cell.
func commandTargetType(from signaling.CellType, ev *signaling.Event) signaling.CellType {
	switch ev.HO {
	case signaling.HOSNRelease:
		return signaling.CellLTE
	case signaling.HOLTEAnchor:
		if ev.Inferred {
			// Inferred anchor handovers are those without an SCG
			// configuration (XCAL.md): the NR leg is gone.
			return signaling.CellLTE
		}
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
