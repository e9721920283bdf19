package emu

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Which cell a report before a handover names.
const (
	NbTarget = "target" // the handover's target (A3, A5, B1)
	NbNone   = "none"   // no neighbour (A2)
)

// PreReport is one measurement report before a handover's command, as
// the measured report patterns place them (CALIBRATION.md, "Reports
// before a handover"): its event, whether it was measured on the LTE
// anchor (else on the serving NR cell), the cell it names and its lead.
type PreReport struct {
	Meas     signaling.MeasEvent
	LTE      bool
	Neighbor string        // NbTarget or NbNone
	Lead     time.Duration // report → command; 0: the scenario's report_lead
}

// Tag is the report's name in a pattern: "NR A2", "LTE B1".
func (r PreReport) Tag() string {
	rat := "NR"
	if r.LTE {
		rat = "LTE"
	}
	t := rat + " " + r.Meas.String()
	if r.Neighbor != NbTarget && r.Neighbor != NbNone && r.Neighbor != "" {
		t += " (other cell)"
	}
	return t
}

// HOReports is what a measured handover's command followed: the
// handover's data types and its reports in time order.
type HOReports struct {
	From, To signaling.CellType
	Reports  []PreReport
}

// Pattern is the sequence of distinct reports (re-sends folded, a copy
// within 10 ms dropped), e.g. "NR A2 > LTE B1"; Resends is how many
// re-sends each carried.
func (h HOReports) Pattern() (string, []int) {
	var tags []string
	var resends []int
	var last []PreReport
	for _, r := range h.Reports {
		found := -1
		for i, p := range last {
			if p.Meas == r.Meas && p.LTE == r.LTE && p.Neighbor == r.Neighbor {
				found = i
			}
		}
		if found >= 0 {
			resends[found]++
			continue
		}
		last = append(last, r)
		tags = append(tags, r.Tag())
		resends = append(resends, 0)
	}
	return strings.Join(tags, " > "), resends
}

// HandoverReports lists, for each handover of a measured drive as
// FromEvents reads it (a handover from LTE alone, the SN addition at a
// log's start, is left out as DwellStats leaves it), the reports in the
// window before its command and after the command before it. A1 and
// periodic reports are left out (they trigger nothing), and so is a copy
// of a report logged again within 10 ms. A report names the target when
// its neighbour is the command's target, no cell when it names none, and
// counts under the other reports' neighbour otherwise (NbNone is not used
// for it: its Neighbor is "other:<id>").
func HandoverReports(evs []signaling.Event, window time.Duration) []HOReports {
	if len(evs) == 0 {
		return nil
	}
	t0 := evs[0].Time
	s := FromEvents(evs, SinceOrigin(t0), time.Second)
	var out []HOReports
	raw := s.StartType
	for _, h := range s.Handovers {
		from, to := dataType(raw), dataType(h.ToType)
		srcLTE := raw == signaling.CellLTE
		raw = h.ToType
		if srcLTE {
			continue
		}
		cmd := t0.Add(h.At)
		var prev time.Time
		for _, e := range evs {
			if e.Kind == signaling.KindHOCommand && e.Time.Before(cmd) {
				prev = e.Time
			}
		}
		hr := HOReports{From: from, To: to}
		var lastAt time.Time
		var lastEv signaling.Event
		for _, e := range evs {
			if e.Kind != signaling.KindReport || !e.Time.After(prev) || e.Time.After(cmd) || cmd.Sub(e.Time) > window {
				continue
			}
			if e.Meas == signaling.MeasA1 || e.Meas == signaling.MeasPeriodic || e.Meas == signaling.MeasUnknown {
				continue
			}
			if !lastAt.IsZero() && e.Time.Sub(lastAt) < 10*time.Millisecond && e.Meas == lastEv.Meas && e.Neighbor.ID == lastEv.Neighbor.ID {
				continue // the same message logged twice
			}
			lastAt, lastEv = e.Time, e
			nb := NbNone
			switch {
			case e.Neighbor.ID == h.To:
				nb = NbTarget
			case e.Neighbor.ID != "" || e.Neighbor.Type != signaling.CellUnknown:
				nb = "other"
			}
			hr.Reports = append(hr.Reports, PreReport{Meas: e.Meas, LTE: e.Serving.Type == signaling.CellLTE, Neighbor: nb, Lead: cmd.Sub(e.Time)})
		}
		out = append(out, hr)
	}
	return out
}

// hoTypeName names a handover type by its data types: "sub6>mmwave".
func hoTypeName(from, to signaling.CellType) string {
	return typeName(from) + ">" + typeName(to)
}

// PatternStat is one pattern of one handover type over measured drives.
type PatternStat struct {
	Pattern string
	Count   int
	// Leads[i] are the leads of the pattern's i-th distinct report (its
	// first sending), Resends[i] its re-sends and ResendGaps[i] their gaps.
	Leads      [][]time.Duration
	Resends    [][]int
	ResendGaps [][]time.Duration
}

// PatternTable gathers the patterns per handover type ("sub6>sub6").
type PatternTable struct {
	Total    map[string]int
	Patterns map[string][]*PatternStat // by type, most frequent first after Sort
}

// Add counts one drive's handovers.
func (pt *PatternTable) Add(hs []HOReports) {
	if pt.Total == nil {
		pt.Total, pt.Patterns = map[string]int{}, map[string][]*PatternStat{}
	}
	for _, h := range hs {
		ty := hoTypeName(h.From, h.To)
		pt.Total[ty]++
		key, _ := h.Pattern()
		var ps *PatternStat
		for _, p := range pt.Patterns[ty] {
			if p.Pattern == key {
				ps = p
			}
		}
		if ps == nil {
			n := strings.Count(key, " > ") + 1
			if key == "" {
				n = 0
			}
			ps = &PatternStat{Pattern: key, Leads: make([][]time.Duration, n), Resends: make([][]int, n), ResendGaps: make([][]time.Duration, n)}
			pt.Patterns[ty] = append(pt.Patterns[ty], ps)
		}
		ps.Count++
		// the distinct reports in order; re-sends after their first
		idx := map[string]int{}
		lastAt := map[string]time.Duration{}
		counts := make([]int, len(ps.Leads))
		for _, r := range h.Reports {
			k := r.Tag() + "/" + r.Neighbor
			i, seen := idx[k]
			if !seen {
				i = len(idx)
				idx[k] = i
				ps.Leads[i] = append(ps.Leads[i], r.Lead)
			} else {
				counts[i]++
				ps.ResendGaps[i] = append(ps.ResendGaps[i], lastAt[k]-r.Lead)
			}
			lastAt[k] = r.Lead
		}
		for i, c := range counts {
			ps.Resends[i] = append(ps.Resends[i], c)
		}
	}
	for _, ps := range pt.Patterns {
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].Count > ps[j].Count })
	}
}

// String renders the table as CALIBRATION.md shows it.
func (pt PatternTable) String() string {
	var b strings.Builder
	b.WriteString("| handover type | pattern (3 s before the command) | handovers | lead of each report: median (min-max) | re-sends |\n|---|---|---:|---|---|\n")
	for _, ty := range []string{"sub6>sub6", "mmwave>mmwave", "sub6>mmwave", "mmwave>sub6"} {
		for _, p := range pt.Patterns[ty] {
			var leads, res []string
			for i := range p.Leads {
				l := p.Leads[i]
				leads = append(leads, fmt.Sprintf("%d (%d-%d) ms", DurationQuantile(l, .5).Milliseconds(), DurationQuantile(l, 0).Milliseconds(), DurationQuantile(l, 1).Milliseconds()))
				n := 0
				for _, c := range p.Resends[i] {
					n += c
				}
				res = append(res, fmt.Sprint(n))
			}
			name := p.Pattern
			if name == "" {
				name = "(none)"
			}
			fmt.Fprintf(&b, "| %s | %s | %d of %d | %s | %s |\n", ty, name, p.Count, pt.Total[ty], strings.Join(leads, "; "), strings.Join(res, "; "))
		}
	}
	return b.String()
}

// Report patterns of the synthetic drive (`synthetic.report_pattern`).
const (
	PatternSingle   = "single"   // one report per handover (Algorithm 1's kind for its type)
	PatternMeasured = "measured" // the patterns the XCAL logs show (MeasuredPatterns)
)

// ReportStep is one report of a modelled pattern. Lead zero marks the
// pattern's last report, whose lead is the scenario's report_lead; an
// earlier report has its own lead and, with probability ResendP, one
// re-send ResendEvery later.
type ReportStep struct {
	Meas        signaling.MeasEvent
	LTE         bool
	Neighbor    string
	Lead        Dist
	ResendP     float64
	ResendEvery time.Duration
}

// ReportPattern is a sequence of reports drawn with probability P among
// its handover type's patterns.
type ReportPattern struct {
	P     float64
	Steps []ReportStep
}

// Measured early NR A2 before an mmWave → sub-6 handover (PatternTable
// over the 10 drives' XCAL logs; CALIBRATION.md "Reports before a
// handover"): 9 of 12 handovers, lead median 1513 ms (1427-2111 ms),
// log-normal by maximum likelihood, one re-send in 9 (299 ms after).
const (
	MeasuredEarlyA2Share  = 9.0 / 12
	MeasuredEarlyA2Median = 1513 * time.Millisecond
	MeasuredEarlyA2Sigma  = 0.12
	MeasuredEarlyA2Resend = 1.0 / 9
	MeasuredEarlyA2Gap    = 299 * time.Millisecond
	// MeasuredLTEA3Share is the share of horizontal mmWave handovers
	// announced by an LTE A3 alone (an anchor handover that moves the SN
	// too): 5 of 26.
	MeasuredLTEA3Share = 5.0 / 26
)

// MeasuredPatterns are the modelled report patterns per handover type
// ("sub6>mmwave"): the patterns the XCAL logs of the 10 drives show twice
// or more, the rare ones (1 handover each) folded into the type's most
// common one (CALIBRATION.md has the full table).
var MeasuredPatterns = map[string][]ReportPattern{
	"sub6>sub6": {{P: 1, Steps: []ReportStep{{Meas: signaling.MeasA3, Neighbor: NbTarget}}}},
	"mmwave>mmwave": {
		{P: 1 - MeasuredLTEA3Share, Steps: []ReportStep{{Meas: signaling.MeasA3, Neighbor: NbTarget}}},
		{P: MeasuredLTEA3Share, Steps: []ReportStep{{Meas: signaling.MeasA3, LTE: true, Neighbor: NbTarget}}},
	},
	"sub6>mmwave": {{P: 1, Steps: []ReportStep{{Meas: signaling.MeasA5, Neighbor: NbTarget}}}},
	"mmwave>sub6": {
		{P: MeasuredEarlyA2Share, Steps: []ReportStep{
			{Meas: signaling.MeasA2, Neighbor: NbNone, ResendP: MeasuredEarlyA2Resend, ResendEvery: MeasuredEarlyA2Gap,
				Lead: Dist{Kind: "lognormal", Median: MeasuredEarlyA2Median, Sigma: MeasuredEarlyA2Sigma, Min: 1400 * time.Millisecond, Max: 2150 * time.Millisecond}},
			{Meas: signaling.MeasB1, LTE: true, Neighbor: NbTarget},
		}},
		{P: 1 - MeasuredEarlyA2Share, Steps: []ReportStep{{Meas: signaling.MeasB1, LTE: true, Neighbor: NbTarget}}},
	},
}

// drawReports draws one handover's reports from the patterns of its type
// (nil when the type has none): earliest first, the last with Lead 0.
func drawReports(from, to signaling.CellType, r *rand.Rand) []PreReport {
	pats := MeasuredPatterns[hoTypeName(dataType(from), dataType(to))]
	if len(pats) == 0 {
		return nil
	}
	u := r.Float64()
	pat := pats[len(pats)-1]
	for _, p := range pats {
		if u < p.P {
			pat = p
			break
		}
		u -= p.P
	}
	var out []PreReport
	for _, s := range pat.Steps {
		rep := PreReport{Meas: s.Meas, LTE: s.LTE, Neighbor: s.Neighbor}
		if s.Lead.Kind == "" {
			out = append(out, rep)
			continue
		}
		rep.Lead = s.Lead.Draw(r)
		out = append(out, rep)
		if s.ResendP > 0 && r.Float64() < s.ResendP && rep.Lead-s.ResendEvery > 0 {
			re := rep
			re.Lead -= s.ResendEvery
			out = append(out, re)
		}
	}
	return out
}

// lteAnchor is the serving cell of the reports measured on the LTE anchor
// (the emulated cells are the NR data cells).
var lteAnchor = signaling.Cell{ID: "lte-anchor", Type: signaling.CellLTE}
