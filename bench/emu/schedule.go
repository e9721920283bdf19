package emu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Handover is one scheduled handover. At is the time of the handover
// command (from the start of the run); the measurement report precedes it
// by Lead, the interruption follows it (DESIGN.md "Why": report→command
// ~146 ms, command→execution ~33 ms, interruption ~27 ms).
type Handover struct {
	At     time.Duration
	To     string             // target cell id
	ToType signaling.CellType // used when To is not a declared cell
	// Report is the measurement event of the report before the command;
	// MeasUnknown picks the one Algorithm 1 expects for the handover's type
	// (A3 horizontal, B1 or A5 sub-6→mmWave, A2 mmWave→sub-6).
	Report signaling.MeasEvent
	// Lead is report→command; 0 draws it from the scenario's distribution.
	Lead time.Duration
	// NoReport: the model synthesizes no report (a replayed log carries
	// its own reports in Schedule.Replay); Lead then only places the
	// report in handovers.tsv.
	NoReport bool
	// Reports, when set, are the reports published before the command
	// instead of the single one (a measured report pattern, earliest
	// first); the one with Lead 0 takes Lead (or the scenario's draw).
	// One that would come before the previous handover completes is not
	// published (the reconfiguration ended its reporting).
	Reports []PreReport
	// RA, when after At, is the logged completion of random access to the
	// target: the interruption ends there.
	RA time.Duration
	// Command and RAEvent, when set, are the logged events published for
	// the command and the random access instead of synthesized ones.
	Command, RAEvent *signaling.Event

	keep bool // a pause (Schedule.Pauses): the data stays on the serving cell
}

// ReplayEvent is a logged signalling event published at its logged time,
// as it is (reports, re-sent reports, commands that move no data, failed
// random access attempts, A1s).
type ReplayEvent struct {
	At    time.Duration
	Event signaling.Event
}

// FalseAlarm is a measurement report that no handover follows. By
// default an A1 withdraws it; with Silent, as the artifact's XCAL logs
// show (CALIBRATION.md: no unanswered report there ends in an A1), it is
// re-sent Resends times every ResendEvery and then nothing follows.
type FalseAlarm struct {
	At       time.Duration       // time of the report
	Neighbor string              // cell the report names ("" = pick one)
	Report   signaling.MeasEvent // MeasUnknown = pick by the serving type
	A1After  time.Duration       // 0 = scenario default
	Silent   bool                // no A1: re-sends, then silence
	Resends  int                 // re-sends of the report (Silent only)
	// ResendEvery is the gap between re-sends (the report interval).
	ResendEvery time.Duration
}

// End is when the false alarm's last event (its A1, or its last re-send)
// is published, with a1After the scenario's default.
func (fa FalseAlarm) End(a1After time.Duration) time.Duration {
	if fa.Silent {
		return fa.At + time.Duration(fa.Resends)*fa.ResendEvery
	}
	if fa.A1After > 0 {
		a1After = fa.A1After
	}
	return fa.At + a1After
}

// Schedule is the mobility of one run: the first serving cell, then
// handovers and false alarms.
type Schedule struct {
	Start     string
	StartType signaling.CellType // used when Start is not a declared cell
	Handovers []Handover
	// Pauses are commands that keep the data on the serving cell: an
	// EN-DC LTE anchor handover that keeps the NR cell (XCAL's "ENDC LTE
	// HO Request (DiffLTE-SameNR)"). TS 37.340 §10.7: the source MN asks
	// the SN to stop providing user data, and the UE synchronises to the
	// same SN again after the MN handover, so the NR leg carries nothing
	// from the command to that random access, and its data waits in the
	// same cell's buffer. To names the kept cell; with Config.AnchorPause
	// off they are replayed as signalling only.
	Pauses      []Handover
	FalseAlarms []FalseAlarm
	// Replay holds the logged events of a replayed drive that are not a
	// handover's (or pause's) command or random access, in time order.
	Replay []ReplayEvent
}

// Dist is a distribution of durations, clamped to [Min, Max] when set.
// Kind: "fixed" (Mean), "uniform" (Min..Max), "normal" (Mean, SD),
// "exponential" (Mean), "lognormal" (Median, Sigma: the median and the
// standard deviation of the natural log).
type Dist struct {
	Kind   string        `yaml:"dist"`
	Mean   time.Duration `yaml:"mean"`
	SD     time.Duration `yaml:"sd"`
	Median time.Duration `yaml:"median"`
	Sigma  float64       `yaml:"sigma"`
	Min    time.Duration `yaml:"min"`
	Max    time.Duration `yaml:"max"`
}

// DefaultLead is the report→command lead time measured in the M2HO
// artifact's XCAL logs (MobiCom'24 data, 11 files, 120 commands preceded
// by a report within 1 s; see bench/emu/CALIBRATION.md): a log-normal
// fitted by quantiles (LeadMedian 56 ms, LeadSigma 0.48), so p10 30 ms,
// p50 56 ms, p90 103 ms against the measured 29.9 / 56 / 102 ms. Clamped
// to the measured range.
var DefaultLead = Dist{Kind: "lognormal", Median: LeadMedian, Sigma: LeadSigma,
	Min: 5 * time.Millisecond, Max: 460 * time.Millisecond}

// PaperLead is the M2HO paper's report→execution figure (MobiCom'24 §3:
// ~146 ms on average, at most 310 ms), usable as report→command with
// `report_lead: {dist: paper}`. It measures to the execution, 33 ms after
// the command, so it overstates the warning the command gives.
var PaperLead = Dist{Kind: "normal", Mean: 146 * time.Millisecond, SD: 50 * time.Millisecond,
	Min: 20 * time.Millisecond, Max: 277 * time.Millisecond}

func (d Dist) validate(field string) error {
	switch d.Kind {
	case "fixed", "normal", "exponential":
		if d.Mean <= 0 {
			return fmt.Errorf("%s.mean: must be > 0 for dist %q", field, d.Kind)
		}
	case "uniform":
		if d.Max <= d.Min {
			return fmt.Errorf("%s.max: %v must be above min %v for dist uniform", field, d.Max, d.Min)
		}
	case "lognormal":
		if d.Median <= 0 {
			return fmt.Errorf("%s.median: must be > 0 for dist lognormal", field)
		}
		if !(d.Sigma >= 0 && d.Sigma < 10) {
			return fmt.Errorf("%s.sigma: %v must be in [0, 10) for dist lognormal", field, d.Sigma)
		}
	default:
		return fmt.Errorf("%s.dist: %q is not fixed, uniform, normal, exponential or lognormal", field, d.Kind)
	}
	if d.SD < 0 {
		return fmt.Errorf("%s.sd: negative", field)
	}
	if d.Min < 0 {
		return fmt.Errorf("%s.min: negative", field)
	}
	if d.Max != 0 && d.Max < d.Min {
		return fmt.Errorf("%s.max: %v below min %v", field, d.Max, d.Min)
	}
	return nil
}

// survival is the chance that a draw is at least x, clamping included.
func (d Dist) survival(x time.Duration) float64 {
	if x <= d.Min {
		return 1
	}
	if d.Max > 0 && x > d.Max {
		return 0
	}
	xf := float64(x)
	switch d.Kind {
	case "uniform":
		return (float64(d.Max) - xf) / float64(d.Max-d.Min)
	case "normal":
		if d.SD == 0 {
			return step(xf <= float64(d.Mean))
		}
		return 0.5 * math.Erfc((xf-float64(d.Mean))/(float64(d.SD)*math.Sqrt2))
	case "exponential":
		return math.Exp(-xf / float64(d.Mean))
	case "lognormal":
		if d.Sigma == 0 {
			return step(xf <= float64(d.Median))
		}
		return 0.5 * math.Erfc(math.Log(xf/float64(d.Median))/(d.Sigma*math.Sqrt2))
	}
	return step(xf <= float64(d.Mean))
}

func step(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Draw returns one sample.
func (d Dist) Draw(r *rand.Rand) time.Duration {
	var v float64
	switch d.Kind {
	case "uniform":
		v = float64(d.Min) + r.Float64()*float64(d.Max-d.Min)
	case "normal":
		v = float64(d.Mean) + r.NormFloat64()*float64(d.SD)
	case "exponential":
		v = r.ExpFloat64() * float64(d.Mean)
	case "lognormal":
		v = float64(d.Median) * math.Exp(d.Sigma*r.NormFloat64())
	default:
		v = float64(d.Mean)
	}
	if v < float64(d.Min) {
		v = float64(d.Min)
	}
	if d.Max > 0 && v > float64(d.Max) {
		v = float64(d.Max)
	}
	if v < 0 || math.IsNaN(v) {
		v = 0
	}
	return time.Duration(v)
}

// Synthetic parameterises a generated drive.
type Synthetic struct {
	Dwell Dist `yaml:"dwell"` // time between handovers, e.g. exponential mean 9 s
	// DwellByType, when it has the serving cell's type (sub6, mmwave),
	// replaces Dwell for the dwells on a cell of that type.
	DwellByType map[string]Dist `yaml:"dwell_by_type"`
	// Vertical is the probability that a handover changes the cell type
	// (when cells of the other type exist); the rest are horizontal.
	Vertical float64 `yaml:"vertical"`
	// VerticalByType, when it has the source cell's type, replaces
	// Vertical for handovers from a cell of that type.
	VerticalByType map[string]float64 `yaml:"vertical_by_type"`
	// VerticalMinDwellByType, when it has the source cell's type, keeps
	// a handover after a shorter dwell on a cell of that type horizontal
	// (the measured drives' short dwells are ping-pongs within a layer:
	// MeasuredVerticalMinDwellSub6, MeasuredVerticalMinDwellMmWave); a
	// longer dwell ends vertical with the type's vertical share divided by
	// the chance of a dwell that long, so the share holds over a drive
	// (capped at 1, when the share can't be held).
	VerticalMinDwellByType map[string]time.Duration `yaml:"vertical_min_dwell_by_type"`
	// FalseAlarms is the probability that a dwell contains one false alarm.
	FalseAlarms float64 `yaml:"false_alarms"`
	// FalseAlarmEnd is how a false alarm ends: "a1" (the default: an A1
	// a1_after the report) or "silence" (FalseAlarmResends re-sends
	// FalseAlarmResendEvery apart, then nothing), as measured.
	FalseAlarmEnd         string        `yaml:"false_alarm_end"`
	FalseAlarmResends     int           `yaml:"false_alarm_resends"`
	FalseAlarmResendEvery time.Duration `yaml:"false_alarm_resend_every"`
	Start                 string        `yaml:"start"` // first serving cell ("" = the first cell)
	// ReportPattern is which reports precede a handover: "single" (the
	// default: one report of the kind Algorithm 1 expects for the type)
	// or "measured" (MeasuredPatterns: e.g. before 9 in 12 mmWave →
	// sub-6 handovers an NR A2 ~1.5 s early, then an LTE B1).
	ReportPattern string `yaml:"report_pattern"`
}

// CellRef names a cell and its type for schedule generation.
type CellRef struct {
	ID   string
	Type signaling.CellType
}

// minGap is a synthetic dwell's floor: it keeps one handover's report
// after the previous one's end.
const minGap = time.Second

// Synthesize generates a schedule over [0, duration) from a seeded RNG:
// the same seed always gives the same schedule.
func Synthesize(cells []CellRef, p Synthetic, duration time.Duration, seed uint64) (Schedule, error) {
	if len(cells) == 0 {
		return Schedule{}, fmt.Errorf("synthetic: no cells")
	}
	dwells := map[bool]Dist{}       // by IsSub6 of the serving type
	verticals := map[bool]float64{} // by IsSub6 of the source type
	byType := map[bool]bool{}       // types dwell_by_type gives
	if !(p.Vertical >= 0 && p.Vertical <= 1) {
		return Schedule{}, fmt.Errorf("synthetic.vertical: %v is not a probability in [0,1]", p.Vertical)
	}
	for _, sub6 := range []bool{true, false} {
		dwells[sub6], verticals[sub6] = p.Dwell, p.Vertical
	}
	for _, k := range sortedKeys(p.DwellByType) {
		t, ok := parseType(k)
		if !ok || t == signaling.CellLTE {
			return Schedule{}, fmt.Errorf("synthetic.dwell_by_type.%s: not sub6 or mmwave", k)
		}
		d := p.DwellByType[k]
		if err := d.validate("synthetic.dwell_by_type." + k); err != nil {
			return Schedule{}, err
		}
		dwells[t.IsSub6()] = d
		byType[t.IsSub6()] = true
	}
	if !byType[true] || !byType[false] { // the old key serves a type
		if err := p.Dwell.validate("synthetic.dwell"); err != nil {
			return Schedule{}, err
		}
	}
	for _, k := range sortedKeys(p.VerticalByType) {
		t, ok := parseType(k)
		if !ok || t == signaling.CellLTE {
			return Schedule{}, fmt.Errorf("synthetic.vertical_by_type.%s: not sub6 or mmwave", k)
		}
		v := p.VerticalByType[k]
		if !(v >= 0 && v <= 1) {
			return Schedule{}, fmt.Errorf("synthetic.vertical_by_type.%s: %v is not a probability in [0,1]", k, v)
		}
		verticals[t.IsSub6()] = v
	}
	minVertical := map[bool]time.Duration{} // by IsSub6 of the source type
	for _, k := range sortedKeys(p.VerticalMinDwellByType) {
		t, ok := parseType(k)
		if !ok || t == signaling.CellLTE {
			return Schedule{}, fmt.Errorf("synthetic.vertical_min_dwell_by_type.%s: not sub6 or mmwave", k)
		}
		d := p.VerticalMinDwellByType[k]
		if d < 0 {
			return Schedule{}, fmt.Errorf("synthetic.vertical_min_dwell_by_type.%s: %v is negative", k, d)
		}
		sub6 := t.IsSub6()
		minVertical[sub6] = d
		long := 1.0 // every dwell is at least minGap
		if d > minGap {
			long = dwells[sub6].survival(d)
		}
		if long <= 0 {
			return Schedule{}, fmt.Errorf("synthetic.vertical_min_dwell_by_type.%s: %v is above every dwell the type draws", k, d)
		}
		verticals[sub6] = min(1, verticals[sub6]/long)
	}
	if !(p.FalseAlarms >= 0 && p.FalseAlarms <= 1) {
		return Schedule{}, fmt.Errorf("synthetic.false_alarms: %v is not a probability in [0,1]", p.FalseAlarms)
	}
	var silent bool
	switch p.FalseAlarmEnd {
	case "", "a1":
		if p.FalseAlarmResends != 0 {
			return Schedule{}, fmt.Errorf("synthetic.false_alarm_resends: needs false_alarm_end: silence")
		}
	case "silence":
		silent = true
		if p.FalseAlarmResends < 0 || p.FalseAlarmResends > 100 {
			return Schedule{}, fmt.Errorf("synthetic.false_alarm_resends: %d is not in [0, 100]", p.FalseAlarmResends)
		}
		if p.FalseAlarmResends > 0 && p.FalseAlarmResendEvery <= 0 {
			return Schedule{}, fmt.Errorf("synthetic.false_alarm_resend_every: must be > 0 with re-sends")
		}
	default:
		return Schedule{}, fmt.Errorf("synthetic.false_alarm_end: %q is not a1 or silence", p.FalseAlarmEnd)
	}
	measured := false
	switch p.ReportPattern {
	case "", PatternSingle:
	case PatternMeasured:
		measured = true
	default:
		return Schedule{}, fmt.Errorf("synthetic.report_pattern: %q is not %s or %s", p.ReportPattern, PatternSingle, PatternMeasured)
	}
	r := rand.New(rand.NewPCG(seed, 0x6d32686f))
	// The patterns have their own stream, so that turning them on keeps
	// the drive's handovers, dwells and false alarms.
	rp := rand.New(rand.NewPCG(seed, 0x72657073))
	cur := 0
	if p.Start != "" {
		cur = -1
		for i, c := range cells {
			if c.ID == p.Start {
				cur = i
			}
		}
		if cur < 0 {
			return Schedule{}, fmt.Errorf("synthetic.start: no cell %q", p.Start)
		}
	}
	s := Schedule{Start: cells[cur].ID, StartType: cells[cur].Type}
	t := time.Duration(0)
	for {
		dwell := dwells[cells[cur].Type.IsSub6()].Draw(r)
		if dwell < minGap {
			dwell = minGap
		}
		if p.FalseAlarms > 0 && r.Float64() < p.FalseAlarms && dwell > 2*minGap {
			at := t + minGap/2 + time.Duration(r.Float64()*float64(dwell-2*minGap))
			if at < duration {
				fa := FalseAlarm{At: at}
				if silent {
					fa.Silent, fa.Resends, fa.ResendEvery = true, p.FalseAlarmResends, p.FalseAlarmResendEvery
				}
				s.FalseAlarms = append(s.FalseAlarms, fa)
			}
		}
		t += dwell
		if t >= duration {
			break
		}
		sub6 := cells[cur].Type.IsSub6()
		vertical := verticals[sub6]
		if dwell < minVertical[sub6] {
			vertical = 0 // a ping-pong within the layer
		}
		next := pickTarget(cells, cur, vertical, r)
		if next < 0 {
			continue
		}
		h := Handover{At: t, To: cells[next].ID, ToType: cells[next].Type}
		if measured {
			h.Reports = drawReports(cells[cur].Type, cells[next].Type, rp)
			if n := len(h.Reports); n > 0 {
				h.Report = h.Reports[n-1].Meas
			}
		}
		s.Handovers = append(s.Handovers, h)
		cur = next
	}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sameKind(a, b signaling.CellType) bool { return a.IsSub6() == b.IsSub6() }

func pickTarget(cells []CellRef, cur int, vertical float64, r *rand.Rand) int {
	var same, other []int
	for i, c := range cells {
		if i == cur {
			continue
		}
		if sameKind(c.Type, cells[cur].Type) {
			same = append(same, i)
		} else {
			other = append(other, i)
		}
	}
	wantOther := r.Float64() < vertical
	switch {
	case wantOther && len(other) > 0, len(same) == 0 && len(other) > 0:
		return other[r.IntN(len(other))]
	case len(same) > 0:
		return same[r.IntN(len(same))]
	}
	return -1
}

// FromEvents derives a schedule from a real signalling log (e.g. what
// signaling.NewXCALReader reads): each KindHOCommand is a handover at its
// time, with the report that preceded it (within maxLead) giving the
// report kind and the lead time; a report with no command within maxLead is
// a false alarm. since maps an event time to the run's timeline (e.g.
// SinceTimeOfDay with the iperf3 log's start); events before 0 are ignored.
// minHOGap is the shortest command-to-command gap FromEvents keeps: the
// model needs the previous handover (33 ms to execution + 27 ms
// interruption by default) complete before the next command.
const minHOGap = 100 * time.Millisecond

func FromEvents(evs []signaling.Event, since func(time.Time) time.Duration, maxLead time.Duration) Schedule {
	var s Schedule
	type rep struct {
		t time.Duration
		e signaling.Event
	}
	var pending []rep
	anon := map[signaling.CellType]int{}
	serving := signaling.CellUnknown
	servingID := ""
	lastCmd := time.Duration(-1 << 62)
	for _, e := range evs {
		t := since(e.Time)
		switch e.Kind {
		case signaling.KindReport:
			if serving == signaling.CellUnknown && e.Serving.Type != signaling.CellUnknown {
				serving = e.Serving.Type
			}
			if e.Meas == signaling.MeasA1 {
				continue
			}
			pending = append(pending, rep{t, e})
		case signaling.KindHOCommand:
			// Reports older than maxLead were not answered: false alarms.
			var lead rep
			found := false
			for _, p := range pending {
				if t-p.t <= maxLead && t >= p.t {
					lead, found = p, true
				} else if t-p.t > maxLead && p.t >= 0 {
					s.FalseAlarms = append(s.FalseAlarms, FalseAlarm{At: p.t, Report: p.e.Meas, Neighbor: p.e.Neighbor.ID})
				}
			}
			pending = pending[:0]
			tt := e.Target.Type
			if tt == signaling.CellUnknown {
				tt = signaling.CellSub6
			}
			if tt == signaling.CellLTE {
				tt = signaling.CellSub6
			}
			id := e.Target.ID
			if id == "" {
				anon[tt]++
				id = fmt.Sprintf("%s-%d", typeName(tt), anon[tt])
			}
			if serving == signaling.CellUnknown {
				serving = signaling.CellSub6
				if tt == signaling.CellSub6 {
					serving = signaling.CellMmWave
				}
			}
			if t < 0 {
				serving = tt
				continue
			}
			// A command that comes before the previous handover could
			// complete, or that keeps the data on the same cell, is not
			// a handover of the emulated link. Of the latter, an LTE
			// anchor handover under the same NR cell pauses it (an SN
			// addition naming the serving cell, after an SN change
			// whose random access aborted, does not: the data rode the
			// LTE leg meanwhile, as the capacity log shows).
			if t-lastCmd < minHOGap {
				continue
			}
			if id == servingID {
				if e.HO == signaling.HOLTEAnchor {
					s.Pauses = append(s.Pauses, Handover{At: t, To: id, ToType: tt, NoReport: true})
				}
				continue
			}
			h := Handover{At: t, To: id, ToType: tt}
			if found {
				h.Report = lead.e.Meas
				h.Lead = t - lead.t
				if h.Lead <= 0 {
					h.Lead = time.Millisecond
				}
			}
			if len(s.Handovers) == 0 && s.StartType == signaling.CellUnknown {
				s.StartType = serving
			}
			s.Handovers = append(s.Handovers, h)
			serving, servingID, lastCmd = tt, id, t
		}
	}
	for _, p := range pending {
		if p.t >= 0 {
			s.FalseAlarms = append(s.FalseAlarms, FalseAlarm{At: p.t, Report: p.e.Meas, Neighbor: p.e.Neighbor.ID})
		}
	}
	if s.StartType == signaling.CellUnknown {
		s.StartType = serving
		if serving == signaling.CellUnknown {
			s.StartType = signaling.CellSub6
		}
	}
	s.Start = typeName(s.StartType) + "-0"
	sort.SliceStable(s.FalseAlarms, func(i, j int) bool { return s.FalseAlarms[i].At < s.FalseAlarms[j].At })
	return s
}

// SinceTimeOfDay maps a signalling log that carries only local time of
// day (XCAL, in an unknown time zone and without a reliable date) onto the
// timeline of a measurement that started at start: the clocks' difference
// at the log's first event, modulo 24 h, is rounded to whole quarter hours
// (time zones) and removed. It assumes the log begins within ±7.5 min of
// start.
func SinceTimeOfDay(first, start time.Time) func(time.Time) time.Duration {
	return sinceTimeOfDay(first, start, 15*time.Minute)
}

// sinceTimeOfDay is SinceTimeOfDay with the zone rounded to multiples of q.
func sinceTimeOfDay(first, start time.Time, q time.Duration) func(time.Time) time.Duration {
	const day = 24 * time.Hour
	tod := func(t time.Time) time.Duration {
		h, m, s := t.Clock()
		return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second + time.Duration(t.Nanosecond())
	}
	wrap := func(d time.Duration) time.Duration { // into [-12h, 12h)
		d = ((d % day) + day) % day
		if d >= day/2 {
			d -= day
		}
		return d
	}
	d := wrap(tod(first) - tod(start))
	zone := time.Duration(math.Round(float64(d)/float64(q))) * q
	t0 := tod(start) + zone
	return func(t time.Time) time.Duration { return wrap(tod(t) - t0) }
}

// SinceOrigin maps absolute event times onto a run that started at origin.
func SinceOrigin(origin time.Time) func(time.Time) time.Duration {
	return func(t time.Time) time.Duration { return t.Sub(origin) }
}

func typeName(t signaling.CellType) string {
	switch t {
	case signaling.CellMmWave:
		return "mmwave"
	case signaling.CellLTE:
		return "lte"
	case signaling.CellSub6:
		return "sub6"
	}
	return "unknown"
}

// Quantile is the p-quantile (0 < p < 1) of the distribution before the
// clamp is applied, then clamped like Draw; for "uniform", "normal",
// "exponential", "lognormal" and "fixed".
func (d Dist) Quantile(p float64) time.Duration {
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	var v float64
	switch d.Kind {
	case "uniform":
		v = float64(d.Min) + p*float64(d.Max-d.Min)
	case "normal":
		v = float64(d.Mean) + z*float64(d.SD)
	case "exponential":
		v = -math.Log(1-p) * float64(d.Mean)
	case "lognormal":
		v = float64(d.Median) * math.Exp(d.Sigma*z)
	default:
		v = float64(d.Mean)
	}
	v = max(v, float64(d.Min))
	if d.Max > 0 {
		v = min(v, float64(d.Max))
	}
	return time.Duration(v)
}
