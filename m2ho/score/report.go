package score

import (
	"math"
	"strconv"

	"github.com/m2ho/m2ho/signaling"
)

// Metric is a ratio or a percentile that may be undefined (no handover, no
// prediction, no lead): it encodes as JSON null rather than a made-up 0.
type Metric float64

// MarshalJSON writes null for an undefined value.
func (m Metric) MarshalJSON() ([]byte, error) {
	f := float64(m)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return []byte(formatFloat(f)), nil
}

// Defined reports whether the metric has a value.
func (m Metric) Defined() bool { return !math.IsNaN(float64(m)) }

// PredictorReport is one predictor's figures, the shape of `m2ho replay
// --json`'s "predictors" entries.
type PredictorReport struct {
	Name                 string                `json:"name"`
	Handovers            int                   `json:"handovers"`
	Predicted            int                   `json:"predicted"`
	Predictions          int                   `json:"predictions"`
	Recall               Metric                `json:"recall"`
	Precision            Metric                `json:"precision"`
	FalseAlarms          int                   `json:"false_alarms"`
	FalseAlarmsWithdrawn int                   `json:"false_alarms_withdrawn"`
	FalseAlarmsOpen      int                   `json:"false_alarms_not_withdrawn"`
	WithdrawnA1          int                   `json:"withdrawn_a1"`
	WithdrawnTimeout     int                   `json:"withdrawn_timeout"`
	LeadMsP50            Metric                `json:"lead_ms_p50"`
	LeadMsP90            Metric                `json:"lead_ms_p90"`
	ByType               map[string]TypeReport `json:"by_type"`
	// PredictedTimePct is the percentage of trace time a prediction was
	// live: the time the controller's clamp is on.
	PredictedTimePct Metric `json:"predicted_time_pct"`
	// TypeAccuracy is the share of predicted handovers whose predicted
	// type (horizontal, to mmWave, to sub-6) and target cell type were
	// both right (the controller acts on them: the target's ŝ_max).
	TypeAccuracy       Metric `json:"type_accuracy"`
	KindAccuracy       Metric `json:"type_accuracy_kind"`
	TargetTypeAccuracy Metric `json:"type_accuracy_target"`
	// Inferred handovers (no command row, XCAL.md), in Handovers too.
	InferredHandovers int `json:"inferred_handovers"`
	InferredPredicted int `json:"inferred_predicted"`
}

// TypeReport is a predictor's figures for one handover type.
type TypeReport struct {
	Handovers int    `json:"handovers"`
	Predicted int    `json:"predicted"`
	Recall    Metric `json:"recall"`
	LeadMsP50 Metric `json:"lead_ms_p50"`
	LeadMsP90 Metric `json:"lead_ms_p90"`
}

// reportTypes are the handover types reported, always all of them so that
// a table has the same columns for every file.
var reportTypes = []signaling.HOType{signaling.HOHorizontal, signaling.HOSub6ToMmWave, signaling.HOMmWaveToSub6, signaling.HOTypeUnknown}

// Report turns counts into the reported figures.
func (c *Counts) Report(name string) PredictorReport {
	r := PredictorReport{
		Name:                 name,
		Handovers:            c.Handovers,
		Predicted:            c.Predicted,
		Predictions:          c.Predictions,
		Recall:               Metric(c.Recall()),
		Precision:            Metric(c.Precision()),
		FalseAlarms:          c.FalseAlarms(),
		FalseAlarmsWithdrawn: c.WithdrawnA1 + c.WithdrawnTimeout,
		FalseAlarmsOpen:      c.OpenAtEnd,
		WithdrawnA1:          c.WithdrawnA1,
		WithdrawnTimeout:     c.WithdrawnTimeout,
		LeadMsP50:            Metric(Percentile(c.Leads, 50)),
		LeadMsP90:            Metric(Percentile(c.Leads, 90)),
		ByType:               map[string]TypeReport{},
		PredictedTimePct:     Metric(100 * c.PredictedTimeShare()),
		TypeAccuracy:         Metric(c.TypeAccuracy()),
		KindAccuracy:         Metric(ratio(c.TypeRight, c.Predicted)),
		TargetTypeAccuracy:   Metric(ratio(c.TargetTypeRight, c.Predicted)),
		InferredHandovers:    c.Inferred,
		InferredPredicted:    c.InferredPredicted,
	}
	for _, t := range reportTypes {
		tc := c.ByType[t]
		if tc == nil {
			if t == signaling.HOTypeUnknown {
				continue // only shown when some handover could not be typed
			}
			tc = &TypeCounts{}
		}
		r.ByType[t.String()] = TypeReport{
			Handovers: tc.Handovers,
			Predicted: tc.Predicted,
			Recall:    Metric(ratio(tc.Predicted, tc.Handovers)),
			LeadMsP50: Metric(Percentile(tc.Leads, 50)),
			LeadMsP90: Metric(Percentile(tc.Leads, 90)),
		}
	}
	return r
}

func formatFloat(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
