// Package score measures a handover predictor on a signalling trace: how
// many of the actual handovers it predicted (recall), how many of its
// predictions were followed by a handover (precision), its false alarms and
// how early it warned (lead time, prediction → handover command). It is what
// `m2ho replay` reports, for M2HO's Algorithm 1 and for baselines.
package score

import (
	"math"
	"sort"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

// Predictor names a rule set to score.
type Predictor struct {
	Name  string
	Rules m2ho.Rules
}

// Predictors are the rule sets `m2ho replay` compares: the stream rule
// set, M2HO's Algorithm 1 and an A3-only baseline (what a 4G-era
// predictor such as LTE-VR keys on).
var Predictors = []Predictor{
	{Name: "streams", Rules: m2ho.Streams},
	{Name: "alg1", Rules: m2ho.Algorithm1},
	{Name: "a3-only", Rules: m2ho.A3Only},
}

// Counts is the tally of one predictor over one or more traces. Leads keeps
// every lead time so that pooled percentiles are exact.
type Counts struct {
	Handovers   int // actual handovers: commands, and handovers the reader inferred
	Predicted   int // handovers a live prediction preceded
	Predictions int // predictions made (episodes)
	// Inferred counts the handovers the reader inferred (no command row;
	// XCAL.md), InferredPredicted those of them predicted. They are in
	// Handovers and Predicted too.
	Inferred          int
	InferredPredicted int
	// A prediction that no command followed is a false alarm; it ends
	// withdrawn by an A1, withdrawn by its timeout, or still live when
	// the trace ends.
	WithdrawnA1      int
	WithdrawnTimeout int
	OpenAtEnd        int
	Leads            []time.Duration
	ByType           map[signaling.HOType]*TypeCounts
	// Of the predicted handovers: how many had the predicted type
	// (horizontal, to mmWave, to sub-6) right, the predicted target's cell
	// type right, and both.
	TypeRight, TargetTypeRight, BothRight int
	// PredictedTime is the time a prediction was live (the controller's
	// clamp on), TraceTime the time from the first event to the last.
	PredictedTime, TraceTime time.Duration
	// Records lists every handover and false alarm, in time order.
	Records []Record
}

// Record is one handover or false alarm of a scored trace.
type Record struct {
	At          time.Time // the command (or inferred handover); a false alarm's end
	HO          signaling.HOKind
	Inferred    bool
	Actual      signaling.HOType
	Target      signaling.CellType
	Predicted   bool // a handover a prediction preceded
	FalseAlarm  bool // a prediction no handover followed
	PredictedAt time.Time
	PredType    signaling.HOType
	PredTarget  signaling.CellType
	Lead        time.Duration
	Reason      m2ho.WithdrawReason
}

// TypeCounts is the tally of one handover type.
type TypeCounts struct {
	Handovers int
	Predicted int
	Leads     []time.Duration
}

// NewCounts returns an empty tally.
func NewCounts() *Counts { return &Counts{ByType: map[signaling.HOType]*TypeCounts{}} }

func (c *Counts) typ(t signaling.HOType) *TypeCounts {
	tc := c.ByType[t]
	if tc == nil {
		tc = &TypeCounts{}
		c.ByType[t] = tc
	}
	return tc
}

// FalseAlarms is every prediction no handover command followed.
func (c *Counts) FalseAlarms() int { return c.WithdrawnA1 + c.WithdrawnTimeout + c.OpenAtEnd }

// Add pools o into c (Records are not pooled).
func (c *Counts) Add(o *Counts) {
	c.Handovers += o.Handovers
	c.Predicted += o.Predicted
	c.Predictions += o.Predictions
	c.Inferred += o.Inferred
	c.InferredPredicted += o.InferredPredicted
	c.WithdrawnA1 += o.WithdrawnA1
	c.WithdrawnTimeout += o.WithdrawnTimeout
	c.OpenAtEnd += o.OpenAtEnd
	c.Leads = append(c.Leads, o.Leads...)
	c.TypeRight += o.TypeRight
	c.TargetTypeRight += o.TargetTypeRight
	c.BothRight += o.BothRight
	c.PredictedTime += o.PredictedTime
	c.TraceTime += o.TraceTime
	for t, tc := range o.ByType {
		d := c.typ(t)
		d.Handovers += tc.Handovers
		d.Predicted += tc.Predicted
		d.Leads = append(d.Leads, tc.Leads...)
	}
}

// Run scores one predictor on one trace. Events must be in time order; the
// timeout withdrawal is evaluated before each event, as the controller does.
// a2Hold is the stream rule set's hold of an mmWave A2
// (Predictor.SetMmWaveA2Hold; 0: none), as `m2ho run` sets it.
func Run(events []signaling.Event, rules m2ho.Rules, defaultT2, a2Hold time.Duration) *Counts {
	c := NewCounts()
	p := m2ho.NewPredictor(rules, defaultT2)
	p.SetMmWaveA2Hold(a2Hold)
	for i := range events {
		ev := &events[i]
		c.record(p.Tick(ev.Time), ev)
		c.record(p.OnEvent(ev.Time, ev), ev)
	}
	if len(events) > 0 {
		end := events[len(events)-1].Time
		c.TraceTime = end.Sub(events[0].Time)
		if at, typ, target, live := p.Live(); live {
			c.OpenAtEnd++
			until := end
			if d, ok := p.Deadline(); ok && d.Before(end) {
				until = d
			}
			c.PredictedTime += until.Sub(at)
			c.Records = append(c.Records, Record{At: until, FalseAlarm: true, PredictedAt: at, PredType: typ, PredTarget: target.Type})
		}
	}
	return c
}

func (c *Counts) record(o m2ho.Outcome, ev *signaling.Event) {
	switch o.Kind {
	case m2ho.OutcomePredicted:
		c.Predictions++
	case m2ho.OutcomeWithdrawn:
		if o.Reason == m2ho.WithdrawA1 {
			c.WithdrawnA1++
		} else {
			c.WithdrawnTimeout++
		}
		c.PredictedTime += o.At.Sub(o.PredictedAt)
		c.Records = append(c.Records, Record{At: o.At, FalseAlarm: true, PredictedAt: o.PredictedAt, PredType: o.Predicted, PredTarget: o.Target.Type, Reason: o.Reason})
	case m2ho.OutcomeConfirmed:
		c.Handovers++
		c.Predicted++
		if o.Inferred {
			c.Inferred++
			c.InferredPredicted++
		}
		if o.Chained {
			// The episode's timeout withdrawal, counted as a false alarm
			// with its live time, was this handover's prediction.
			c.WithdrawnTimeout--
			for i := len(c.Records) - 1; i >= 0; i-- {
				if r := c.Records[i]; r.FalseAlarm && r.PredictedAt.Equal(o.PredictedAt) {
					c.Records = append(c.Records[:i], c.Records[i+1:]...)
					break
				}
			}
		} else {
			c.PredictedTime += o.At.Sub(o.PredictedAt)
		}
		c.Leads = append(c.Leads, o.Lead)
		tc := c.typ(o.Actual)
		tc.Handovers++
		tc.Predicted++
		tc.Leads = append(tc.Leads, o.Lead)
		typeOK := o.Predicted == o.Actual
		targetOK := o.PredictedTarget.Type == o.Target.Type
		if typeOK {
			c.TypeRight++
		}
		if targetOK {
			c.TargetTypeRight++
		}
		if typeOK && targetOK {
			c.BothRight++
		}
		c.Records = append(c.Records, Record{At: o.At, HO: ev.HO, Inferred: o.Inferred, Actual: o.Actual, Target: o.Target.Type,
			Predicted: true, PredictedAt: o.PredictedAt, PredType: o.Predicted, PredTarget: o.PredictedTarget.Type, Lead: o.Lead})
	case m2ho.OutcomeUnpredicted:
		c.Handovers++
		if o.Inferred {
			c.Inferred++
		}
		c.typ(o.Actual).Handovers++
		c.Records = append(c.Records, Record{At: o.At, HO: ev.HO, Inferred: o.Inferred, Actual: o.Actual, Target: o.Target.Type})
	}
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds, in
// milliseconds; NaN when ds is empty.
func Percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	if rank < 1 {
		rank = 1
	}
	return float64(s[rank-1]) / float64(time.Millisecond)
}

// ratio is a/b, NaN when b is 0 (undefined, not zero).
func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// Recall is predicted handovers over actual handovers.
func (c *Counts) Recall() float64 { return ratio(c.Predicted, c.Handovers) }

// Precision is confirmed predictions over predictions.
func (c *Counts) Precision() float64 { return ratio(c.Predicted, c.Predictions) }

// PredictedTimeShare is the share of trace time a prediction was live.
func (c *Counts) PredictedTimeShare() float64 {
	if c.TraceTime <= 0 {
		return math.NaN()
	}
	return float64(c.PredictedTime) / float64(c.TraceTime)
}

// TypeAccuracy is the share of predicted handovers whose predicted type
// and predicted target cell type were both right.
func (c *Counts) TypeAccuracy() float64 { return ratio(c.BothRight, c.Predicted) }
