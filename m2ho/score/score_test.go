package score

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
)

var t0 = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func rep(ms int, m signaling.MeasEvent, serving, nb signaling.CellType) signaling.Event {
	return signaling.Event{Time: at(ms), Kind: signaling.KindReport, Meas: m,
		Serving: signaling.Cell{ID: "s", Type: serving}, Neighbor: signaling.Cell{ID: "n", Type: nb}}
}

func cmd(ms int, target signaling.CellType) signaling.Event {
	return signaling.Event{Time: at(ms), Kind: signaling.KindHOCommand, HO: signaling.HOSNChange,
		Target: signaling.Cell{ID: "t", Type: target}}
}

const (
	sub6 = signaling.CellSub6
	mmw  = signaling.CellMmWave
	none = signaling.CellUnknown
)

// A trace with every outcome, scored by hand:
//   - 0 ms: an unpredicted command onto sub-6; the type of the cell before
//     is unknown, so the handover is typed "unknown";
//   - A3 at 1000, command at 1100: predicted horizontal, lead 100 ms;
//   - B1 at 3000, command at 3150: predicted sub6→mmWave, lead 150 ms
//     (A3-only misses it: B1 is not an A3);
//   - A3 at 5000, A1 at 5050: false alarm withdrawn by A1;
//   - A2 at 7000 on mmWave, command to sub-6 at 7200: lead 200 ms
//     (A3-only misses it);
//   - A3 at 9000, nothing until 9000+2·T2 → timeout withdrawal; T2 is the
//     mean of the m2ho leads (100, 150, 200) = 150 ms for Algorithm 1;
//   - A3 at 20000 with no command before the end: open at end.
func trace() []signaling.Event {
	return []signaling.Event{
		cmd(0, sub6),
		rep(1000, signaling.MeasA3, sub6, sub6), cmd(1100, sub6),
		rep(3000, signaling.MeasB1, sub6, mmw), cmd(3150, mmw),
		rep(5000, signaling.MeasA3, mmw, mmw), rep(5050, signaling.MeasA1, mmw, none),
		rep(7000, signaling.MeasA2, mmw, none), cmd(7200, sub6),
		rep(9000, signaling.MeasA3, sub6, sub6),
		rep(12000, signaling.MeasPeriodic, sub6, none),
		rep(20000, signaling.MeasA3, sub6, sub6),
	}
}

func TestRunAlgorithm1(t *testing.T) {
	c := Run(trace(), m2ho.Algorithm1, 0, 0)
	want := Counts{Handovers: 4, Predicted: 3, Predictions: 6, WithdrawnA1: 1, WithdrawnTimeout: 1, OpenAtEnd: 1}
	if c.Handovers != want.Handovers || c.Predicted != want.Predicted || c.Predictions != want.Predictions ||
		c.WithdrawnA1 != want.WithdrawnA1 || c.WithdrawnTimeout != want.WithdrawnTimeout || c.OpenAtEnd != want.OpenAtEnd {
		t.Fatalf("counts %+v, want %+v", *c, want)
	}
	if got := c.Recall(); got != 0.75 {
		t.Errorf("recall %v, want 3/4", got)
	}
	if got := c.Precision(); got != 0.5 {
		t.Errorf("precision %v, want 3/6", got)
	}
	// Nearest rank over {100, 150, 200}: p50 = 150, p90 = 200.
	if p := Percentile(c.Leads, 50); p != 150 {
		t.Errorf("lead p50 %v, want 150", p)
	}
	if p := Percentile(c.Leads, 90); p != 200 {
		t.Errorf("lead p90 %v, want 200", p)
	}
	r := c.Report("m2ho")
	for typ, w := range map[string][2]int{"horizontal": {1, 1}, "sub6-to-mmwave": {1, 1}, "mmwave-to-sub6": {1, 1}, "unknown": {1, 0}} {
		got := r.ByType[typ]
		if got.Handovers != w[0] || got.Predicted != w[1] {
			t.Errorf("%s: %d/%d, want %d/%d", typ, got.Predicted, got.Handovers, w[1], w[0])
		}
	}
	if r.FalseAlarms != 3 || r.FalseAlarmsWithdrawn != 2 || r.FalseAlarmsOpen != 1 {
		t.Errorf("false alarms %d (withdrawn %d, open %d), want 3 (2, 1)", r.FalseAlarms, r.FalseAlarmsWithdrawn, r.FalseAlarmsOpen)
	}
}

func TestRunA3OnlyMissesVertical(t *testing.T) {
	c := Run(trace(), m2ho.A3Only, 0, 0)
	// A3-only predicts at 1000 (confirmed), 5000 (A1), 9000 (timeout),
	// 20000 (open) and misses the B1 and A2 handovers.
	if c.Handovers != 4 || c.Predicted != 1 || c.Predictions != 4 {
		t.Fatalf("a3-only: %d/%d predicted, %d predictions; want 1/4, 4", c.Predicted, c.Handovers, c.Predictions)
	}
	r := c.Report("a3-only")
	if r.ByType["sub6-to-mmwave"].Predicted != 0 || r.ByType["mmwave-to-sub6"].Predicted != 0 {
		t.Errorf("a3-only predicted a vertical handover: %+v", r.ByType)
	}
}

func TestPoolingKeepsEveryLead(t *testing.T) {
	a := Run(trace(), m2ho.Algorithm1, 0, 0)
	b := Run(trace(), m2ho.Algorithm1, 0, 0)
	pooled := &Counts{ByType: map[signaling.HOType]*TypeCounts{}}
	pooled.Add(a)
	pooled.Add(b)
	if pooled.Handovers != 8 || len(pooled.Leads) != 6 || pooled.FalseAlarms() != 6 {
		t.Fatalf("pooled %+v", *pooled)
	}
	if pooled.ByType[signaling.HOHorizontal].Handovers != 2 {
		t.Errorf("pooled horizontal %d, want 2", pooled.ByType[signaling.HOHorizontal].Handovers)
	}
}

func TestUndefinedMetricsAreNull(t *testing.T) {
	r := Run(nil, m2ho.Algorithm1, 0, 0).Report("m2ho")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"recall":null`, `"precision":null`, `"lead_ms_p50":null`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s missing in %s", k, b)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("percentile of nothing is not NaN")
	}
}
