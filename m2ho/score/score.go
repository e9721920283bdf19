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

// Predictors are the rule sets `m2ho replay` compares: M2HO's Algorithm 1
// and an A3-only baseline (what a 4G-era predictor such as LTE-VR keys on).
var Predictors = []Predictor{
	{Name: "m2ho", Rules: m2ho.Algorithm1},
	{Name: "a3-only", Rules: m2ho.A3Only},
}

// Counts is the tally of one predictor over one or more traces. Leads keeps
// every lead time so that pooled percentiles are exact.
type Counts struct {
	Handovers   int // actual handovers (handover commands)
	Predicted   int // handovers a live prediction preceded
	Predictions int // predictions made (episodes)
	// A prediction that no command followed is a false alarm; it ends
	// withdrawn by an A1, withdrawn by the 2·T2 timeout, or still live
	// when the trace ends.
	WithdrawnA1      int
	WithdrawnTimeout int
	OpenAtEnd        int
	Leads            []time.Duration
	ByType           map[m2ho.HOType]*TypeCounts
}

// TypeCounts is the tally of one handover type.
type TypeCounts struct {
	Handovers int
	Predicted int
	Leads     []time.Duration
}

func newCounts() *Counts { return &Counts{ByType: map[m2ho.HOType]*TypeCounts{}} }

func (c *Counts) typ(t m2ho.HOType) *TypeCounts {
	tc := c.ByType[t]
	if tc == nil {
		tc = &TypeCounts{}
		c.ByType[t] = tc
	}
	return tc
}

// FalseAlarms is every prediction no handover command followed.
func (c *Counts) FalseAlarms() int { return c.WithdrawnA1 + c.WithdrawnTimeout + c.OpenAtEnd }

// Add pools o into c.
func (c *Counts) Add(o *Counts) {
	c.Handovers += o.Handovers
	c.Predicted += o.Predicted
	c.Predictions += o.Predictions
	c.WithdrawnA1 += o.WithdrawnA1
	c.WithdrawnTimeout += o.WithdrawnTimeout
	c.OpenAtEnd += o.OpenAtEnd
	c.Leads = append(c.Leads, o.Leads...)
	for t, tc := range o.ByType {
		d := c.typ(t)
		d.Handovers += tc.Handovers
		d.Predicted += tc.Predicted
		d.Leads = append(d.Leads, tc.Leads...)
	}
}

// Run scores one predictor on one trace. Events must be in time order; the
// timeout withdrawal is evaluated before each event, as the controller does.
func Run(events []signaling.Event, rules m2ho.Rules, defaultT2 time.Duration) *Counts {
	c := newCounts()
	p := m2ho.NewPredictor(rules, defaultT2)
	for i := range events {
		ev := &events[i]
		c.record(p.Tick(ev.Time))
		c.record(p.OnEvent(ev.Time, ev))
	}
	if _, _, _, live := p.Live(); live {
		c.OpenAtEnd++
	}
	return c
}

func (c *Counts) record(o m2ho.Outcome) {
	switch o.Kind {
	case m2ho.OutcomePredicted:
		c.Predictions++
	case m2ho.OutcomeWithdrawn:
		if o.Reason == m2ho.WithdrawA1 {
			c.WithdrawnA1++
		} else {
			c.WithdrawnTimeout++
		}
	case m2ho.OutcomeConfirmed:
		c.Handovers++
		c.Predicted++
		c.Leads = append(c.Leads, o.Lead)
		tc := c.typ(o.Actual)
		tc.Handovers++
		tc.Predicted++
		tc.Leads = append(tc.Leads, o.Lead)
	case m2ho.OutcomeUnpredicted:
		c.Handovers++
		c.typ(o.Actual).Handovers++
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
