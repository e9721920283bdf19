package emu

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/m2ho/score"
	"github.com/m2ho/m2ho/signaling"
)

// The recorded patterns are what PatternTable gives on the XCAL logs of
// the artifact's 10 drives.
func TestReportPatternsFromData(t *testing.T) {
	_, logs := measuredDrives(t)
	var pt PatternTable
	for _, evs := range logs {
		pt.Add(HandoverReports(evs, 3*time.Second))
	}
	t.Log("\n" + pt.String())
	count := func(ty, prefix string) (n int, ps []*PatternStat) {
		for _, p := range pt.Patterns[ty] {
			if strings.HasPrefix(p.Pattern, prefix) {
				n += p.Count
				ps = append(ps, p)
			}
		}
		return n, ps
	}
	if n, _ := count("sub6>sub6", "NR A3"); n != 26 || pt.Total["sub6>sub6"] != 28 {
		t.Errorf("sub6>sub6: %d NR A3 of %d", n, pt.Total["sub6>sub6"])
	}
	if n, _ := count("sub6>mmwave", "NR A5"); n != 9 || pt.Total["sub6>mmwave"] != 9 {
		t.Errorf("sub6>mmwave: %d NR A5 of %d", n, pt.Total["sub6>mmwave"])
	}
	lteA3 := 0
	for _, p := range pt.Patterns["mmwave>mmwave"] {
		if p.Pattern == "LTE A3 (other cell)" {
			lteA3 = p.Count
		}
	}
	if r := float64(lteA3) / float64(pt.Total["mmwave>mmwave"]); math.Abs(r-MeasuredLTEA3Share) > 1e-9 {
		t.Errorf("mmwave>mmwave: LTE A3 alone %d of %d, recorded %.3f", lteA3, pt.Total["mmwave>mmwave"], MeasuredLTEA3Share)
	}
	n, ps := count("mmwave>sub6", "NR A2")
	if r := float64(n) / float64(pt.Total["mmwave>sub6"]); math.Abs(r-MeasuredEarlyA2Share) > 1e-9 {
		t.Errorf("mmwave>sub6: early NR A2 in %d of %d, recorded %.3f", n, pt.Total["mmwave>sub6"], MeasuredEarlyA2Share)
	}
	var leads, gaps []time.Duration
	resent := 0
	for _, p := range ps {
		leads = append(leads, p.Leads[0]...)
		gaps = append(gaps, p.ResendGaps[0]...)
		for _, c := range p.Resends[0] {
			resent += min(c, 1)
		}
	}
	med, sigma, err := FitLogNormal(leads)
	if err != nil {
		t.Fatal(err)
	}
	if g := DurationQuantile(leads, .5); absDur(g-MeasuredEarlyA2Median) > time.Millisecond {
		t.Errorf("early A2 median lead %v, recorded %v (log-normal median %v)", g, MeasuredEarlyA2Median, med)
	}
	if math.Abs(sigma-MeasuredEarlyA2Sigma) > 0.005 {
		t.Errorf("early A2 lead sigma %.4f, recorded %.3f", sigma, MeasuredEarlyA2Sigma)
	}
	if r := float64(resent) / float64(n); math.Abs(r-MeasuredEarlyA2Resend) > 1e-9 || len(gaps) != 1 || absDur(gaps[0]-MeasuredEarlyA2Gap) > time.Millisecond {
		t.Errorf("early A2 re-sent in %d of %d, gaps %v; recorded %.3f, %v", resent, n, gaps, MeasuredEarlyA2Resend, MeasuredEarlyA2Gap)
	}
	// every mmWave -> sub-6 handover's last report is an LTE B1 naming
	// the target, at the usual lead
	for _, p := range pt.Patterns["mmwave>sub6"] {
		if !strings.HasSuffix(p.Pattern, "LTE B1") {
			t.Errorf("mmwave>sub6 pattern %q does not end in an LTE B1", p.Pattern)
		}
		if l := p.Leads[len(p.Leads)-1]; DurationQuantile(l, 1) > 100*time.Millisecond {
			t.Errorf("mmwave>sub6 pattern %q: B1 leads %v", p.Pattern, l)
		}
	}
	t.Logf("early A2 leads %v: log-normal median %v sigma %.4f", leads, med, sigma)
}

func mixedCells() []CellRef {
	return []CellRef{{"a", signaling.CellSub6}, {"b", signaling.CellSub6}, {"m", signaling.CellMmWave}, {"n", signaling.CellMmWave}}
}

func mixedSynthetic(pattern string) Synthetic {
	return Synthetic{
		DwellByType: map[string]Dist{
			"sub6":   {Kind: "exponential", Mean: MeasuredDwellSub6, Min: time.Second, Max: 45 * time.Second},
			"mmwave": {Kind: "exponential", Mean: MeasuredDwellMmWave, Min: time.Second, Max: 29 * time.Second},
		},
		VerticalByType: map[string]float64{"sub6": 0.4, "mmwave": 0.4},
		FalseAlarms:    0.04, FalseAlarmEnd: "silence", FalseAlarmResends: 1, FalseAlarmResendEvery: MeasuredResendEvery,
		ReportPattern: pattern,
	}
}

// The measured patterns are drawn per handover type with the measured
// frequencies and leads, from their own seeded stream: the drive (its
// handovers and false alarms) is the one the single pattern gives.
func TestSynthesizeMeasuredReportPatterns(t *testing.T) {
	cells := mixedCells()
	const dur = 40000 * time.Second
	single, err := Synthesize(cells, mixedSynthetic(""), dur, 7)
	if err != nil {
		t.Fatal(err)
	}
	meas, err := Synthesize(cells, mixedSynthetic(PatternMeasured), dur, 7)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Synthesize(cells, mixedSynthetic(PatternMeasured), dur, 7)
	other, _ := Synthesize(cells, mixedSynthetic(PatternMeasured), dur, 8)
	if len(single.Handovers) != len(meas.Handovers) || len(single.FalseAlarms) != len(meas.FalseAlarms) {
		t.Fatalf("%d/%d handovers, %d/%d false alarms", len(single.Handovers), len(meas.Handovers), len(single.FalseAlarms), len(meas.FalseAlarms))
	}
	typeOf := map[string]signaling.CellType{}
	for _, c := range cells {
		typeOf[c.ID] = c.Type
	}
	type tally struct{ n, early, lteA3 int }
	by := map[string]*tally{}
	from := typeOf[meas.Start]
	for i, h := range meas.Handovers {
		s := single.Handovers[i]
		if h.At != s.At || h.To != s.To || len(s.Reports) != 0 {
			t.Fatalf("handover %d: %+v, single pattern %+v", i, h, s)
		}
		if !equalReports(h.Reports, again.Handovers[i].Reports) {
			t.Fatalf("handover %d: same seed, reports %+v then %+v", i, h.Reports, again.Handovers[i].Reports)
		}
		ty := hoTypeName(from, typeOf[h.To])
		from = typeOf[h.To]
		tl := by[ty]
		if tl == nil {
			tl = &tally{}
			by[ty] = tl
		}
		tl.n++
		n := len(h.Reports)
		if n == 0 || h.Reports[n-1].Lead != 0 || h.Report != h.Reports[n-1].Meas {
			t.Fatalf("handover %d (%s): reports %+v, report %v", i, ty, h.Reports, h.Report)
		}
		last := h.Reports[n-1]
		switch ty {
		case "mmwave>sub6":
			if last.Meas != signaling.MeasB1 || !last.LTE || last.Neighbor != NbTarget {
				t.Fatalf("handover %d: last report %+v, want an LTE B1 naming the target", i, last)
			}
			if n > 1 {
				tl.early++
				a2 := h.Reports[0]
				if a2.Meas != signaling.MeasA2 || a2.LTE || a2.Lead < 1400*time.Millisecond || a2.Lead > 2150*time.Millisecond {
					t.Fatalf("handover %d: early report %+v", i, a2)
				}
				if n == 3 && h.Reports[1].Lead != a2.Lead-MeasuredEarlyA2Gap {
					t.Fatalf("handover %d: re-send %+v", i, h.Reports[1])
				}
			}
		case "sub6>mmwave":
			if n != 1 || last.Meas != signaling.MeasA5 || last.LTE {
				t.Fatalf("handover %d: %+v, want one NR A5", i, h.Reports)
			}
		case "mmwave>mmwave":
			if last.LTE {
				tl.lteA3++
			}
		case "sub6>sub6":
			if n != 1 || last.Meas != signaling.MeasA3 || last.LTE {
				t.Fatalf("handover %d: %+v, want one NR A3", i, h.Reports)
			}
		}
	}
	ms := by["mmwave>sub6"]
	if r := float64(ms.early) / float64(ms.n); ms.n < 300 || math.Abs(r-MeasuredEarlyA2Share) > 0.05 {
		t.Errorf("early A2 before %d of %d mmWave -> sub-6 handovers (%.3f), measured %.3f", ms.early, ms.n, r, MeasuredEarlyA2Share)
	}
	mm := by["mmwave>mmwave"]
	if r := float64(mm.lteA3) / float64(mm.n); math.Abs(r-MeasuredLTEA3Share) > 0.05 {
		t.Errorf("LTE A3 before %d of %d mmWave handovers (%.3f), measured %.3f", mm.lteA3, mm.n, r, MeasuredLTEA3Share)
	}
	same := true
	for i := range other.Handovers {
		if i < len(meas.Handovers) && !equalReports(other.Handovers[i].Reports, meas.Handovers[i].Reports) {
			same = false
		}
	}
	if same {
		t.Error("seeds 7 and 8 drew the same reports")
	}
	if _, err := Synthesize(cells, mixedSynthetic("replayed"), dur, 7); err == nil || !strings.Contains(err.Error(), "synthetic.report_pattern") {
		t.Errorf("bad report_pattern: %v", err)
	}
}

func equalReports(a, b []PreReport) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The model publishes a handover's pattern: the early NR A2 on the
// serving mmWave cell at its lead, its re-send, the LTE B1 naming the
// target at the drawn lead, then the command.
func TestModelPublishesReportPattern(t *testing.T) {
	c := oneMs()
	c.Cells[1].Type = signaling.CellMmWave
	c.Schedule.Start = "B"
	c.Lead = Dist{Kind: "fixed", Mean: 60 * time.Millisecond}
	c.Schedule.Handovers = []Handover{{At: 5 * time.Second, To: "A", Report: signaling.MeasB1, Reports: []PreReport{
		{Meas: signaling.MeasA2, Neighbor: NbNone, Lead: 1500 * time.Millisecond},
		{Meas: signaling.MeasA2, Neighbor: NbNone, Lead: 1201 * time.Millisecond},
		{Meas: signaling.MeasB1, LTE: true, Neighbor: NbTarget},
	}}, {At: 6 * time.Second, To: "B", Reports: []PreReport{
		// before the first handover completes: not published
		{Meas: signaling.MeasA5, Neighbor: NbTarget, Lead: 990 * time.Millisecond},
		{Meas: signaling.MeasA5, Neighbor: NbTarget},
	}}}
	r := newRun(t, c)
	r.until(7 * time.Second)
	type ev struct {
		at      time.Duration
		kind    signaling.Kind
		meas    signaling.MeasEvent
		serving signaling.CellType
		nb      string
	}
	var got []ev
	for _, e := range r.ev {
		got = append(got, ev{e.Time.Sub(t0), e.Kind, e.Meas, e.Serving.Type, e.Neighbor.ID})
	}
	want := []ev{
		{3500 * time.Millisecond, signaling.KindReport, signaling.MeasA2, signaling.CellMmWave, ""},
		{3799 * time.Millisecond, signaling.KindReport, signaling.MeasA2, signaling.CellMmWave, ""},
		{4940 * time.Millisecond, signaling.KindReport, signaling.MeasB1, signaling.CellLTE, "A"},
		{5 * time.Second, signaling.KindHOCommand, 0, signaling.CellMmWave, ""},
		{5060 * time.Millisecond, signaling.KindRandomAccess, 0, signaling.CellSub6, ""},
		{5940 * time.Millisecond, signaling.KindReport, signaling.MeasA5, signaling.CellSub6, "B"},
		{6 * time.Second, signaling.KindHOCommand, 0, signaling.CellSub6, ""},
		{6060 * time.Millisecond, signaling.KindRandomAccess, 0, signaling.CellMmWave, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if cn := r.m.Counters(); cn.Reports != 4 {
		t.Errorf("reports counted %d, want 4", cn.Reports)
	}
}

// mixedDriveEvents runs the mixed drive's model (no traffic) and returns
// the signalling it publishes, with its schedule.
func mixedDriveEvents(t *testing.T, pattern string, dur time.Duration, seed uint64) ([]signaling.Event, Schedule) {
	t.Helper()
	data, err := os.ReadFile("scenarios/mixed-drive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const key = "report_pattern: " + PatternMeasured
	if !bytes.Contains(data, []byte(key)) {
		t.Fatalf("mixed-drive.yaml has no %q", key)
	}
	data = bytes.Replace(data, []byte(key), []byte("report_pattern: "+pattern), 1)
	md, err := ParseScenario("scenarios/mixed-drive.yaml", "scenarios", data, LoadOptions{Duration: dur, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	cfg := md.Config
	r := newRun(t, cfg)
	r.until(dur)
	var evs []signaling.Event
	for _, e := range r.ev {
		if e.Kind != signaling.KindMACSlot {
			evs = append(evs, e)
		}
	}
	return evs, cfg.Schedule
}

// The mixed drive publishes the measured patterns by default: before
// most mmWave -> sub-6 commands an NR A2 1.4-2.15 s early. (Before these
// patterns, one A2 ~56 ms before the command.)
func TestMixedDrivePublishesEarlyA2(t *testing.T) {
	const dur = 1500 * time.Second
	evs, sc := mixedDriveEvents(t, PatternMeasured, dur, 3)
	cmds, early := 0, 0
	var serving signaling.CellType
	for i, e := range evs {
		if e.Kind != signaling.KindHOCommand {
			continue
		}
		serving = e.Serving.Type
		if serving != signaling.CellMmWave || e.Target.Type != signaling.CellSub6 {
			continue
		}
		cmds++
		var lastB1 time.Duration = -1
		for _, f := range evs[:i] {
			d := e.Time.Sub(f.Time)
			if f.Kind != signaling.KindReport || d > 2200*time.Millisecond {
				continue
			}
			if f.Meas == signaling.MeasA2 && f.Serving.Type == signaling.CellMmWave && d >= 1400*time.Millisecond {
				early++
				break
			}
		}
		for _, f := range evs[:i] {
			if f.Kind == signaling.KindReport && f.Meas == signaling.MeasB1 && f.Serving.Type == signaling.CellLTE && f.Neighbor.ID == e.Target.ID {
				lastB1 = e.Time.Sub(f.Time)
			}
		}
		if lastB1 < 0 || lastB1 > 460*time.Millisecond {
			t.Errorf("command at %v: last LTE B1 naming %s %v before", e.Time.Sub(t0), e.Target.ID, lastB1)
		}
	}
	if cmds < 20 {
		t.Fatalf("%d mmWave -> sub-6 commands in %v (%d handovers)", cmds, dur, len(sc.Handovers))
	}
	if r := float64(early) / float64(cmds); r < 0.55 || r > 0.85 {
		t.Errorf("early NR A2 before %d of %d mmWave -> sub-6 commands (%.2f), measured %.2f", early, cmds, r, MeasuredEarlyA2Share)
	}
	t.Logf("early NR A2 before %d of %d mmWave -> sub-6 commands", early, cmds)
}

// Replay-style check: the streams predictor (m2ho.Streams) on the mixed
// drive's signalling with one report per handover and with the measured
// patterns. The early A2 opens an episode ~1.5 s before the command that
// times out before the B1, so the measured stream has more withdrawn
// episodes and the same confirmed handovers.
func TestStreamsPredictorOnReportPatterns(t *testing.T) {
	const dur = 1500 * time.Second
	var res [2]*score.Counts
	for k, pat := range []string{PatternSingle, PatternMeasured} {
		evs, _ := mixedDriveEvents(t, pat, dur, 3)
		for _, rules := range []m2ho.Rules{m2ho.Streams, m2ho.Algorithm1} {
			c := score.Run(evs, rules, m2ho.DefaultT2, 0)
			if rules == m2ho.Streams {
				res[k] = c
			}
			v := c.ByType[signaling.HOMmWaveToSub6]
			if v == nil {
				v = &score.TypeCounts{}
			}
			t.Logf("%-8s %-10s handovers %d predicted %d (recall %.3f) predictions %d (precision %.3f) withdrawn timeout %d a1 %d; lead p10/p50/p90 %.0f/%.0f/%.0f ms; mmWave->sub-6 %d of %d predicted, lead p50 %.0f ms; predicted-time share %.4f",
				pat, rules.Name(), c.Handovers, c.Predicted, c.Recall(), c.Predictions, c.Precision(), c.WithdrawnTimeout, c.WithdrawnA1,
				score.Percentile(c.Leads, 10), score.Percentile(c.Leads, 50), score.Percentile(c.Leads, 90),
				v.Predicted, v.Handovers, score.Percentile(v.Leads, 50), c.PredictedTimeShare())
		}
	}
	if res[0].Handovers != res[1].Handovers || res[0].Handovers == 0 {
		t.Fatalf("handovers %d vs %d", res[0].Handovers, res[1].Handovers)
	}
	if res[1].WithdrawnTimeout <= res[0].WithdrawnTimeout {
		t.Errorf("withdrawn by timeout: single %d, measured %d; the early A2 should time out before the B1", res[0].WithdrawnTimeout, res[1].WithdrawnTimeout)
	}
	if res[1].PredictedTimeShare() <= res[0].PredictedTimeShare() {
		t.Errorf("predicted-time share: single %.4f, measured %.4f; the early A2 keeps a prediction live longer", res[0].PredictedTimeShare(), res[1].PredictedTimeShare())
	}
}
