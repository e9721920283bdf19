package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Summary is summary.json. The names of issue 4's schema are kept; the
// fields after them are additions.
type Summary struct {
	Scenario string  `json:"scenario"`
	Scale    float64 `json:"scale"`
	// Handovers is the number of handovers of the schedule (one run's
	// handovers.tsv; every run has the same schedule).
	Handovers int              `json:"handovers"`
	Valid     bool             `json:"valid"`
	Variants  []VariantSummary `json:"variants"`
	Emulator  EmulatorBlock    `json:"emulator"`

	Seed        uint64   `json:"seed"`
	DurationS   float64  `json:"duration_s"`
	Repeat      int      `json:"repeat"`
	CommandLine string   `json:"command_line"`
	Problems    []string `json:"problems,omitempty"`
	// AlignmentLagP50Ms is the largest per-run median print delay of the
	// receiver lines (see Alignment): the alignment's quality.
	AlignmentLagP50Ms float64 `json:"alignment_lag_p50_ms"`
	// Calibration is the baseline against the measurements (calibration.go).
	Calibration *Calibration `json:"calibration,omitempty"`
}

// VariantSummary is one variant's numbers over all its runs.
type VariantSummary struct {
	Name string `json:"name"`
	Runs int    `json:"runs"`
	// GoodputMbps is received bits over measured seconds, all runs pooled.
	GoodputMbps       float64            `json:"goodput_mbps"`
	GoodputMbpsByType map[string]float64 `json:"goodput_mbps_by_type"`
	// ConvergenceSMean/P50 over every analyzed handover of every run,
	// non-converged ones counted with their dwell (0 when none).
	ConvergenceSMean float64 `json:"convergence_s_mean"`
	ConvergenceSP50  float64 `json:"convergence_s_p50"`
	// Retransmits is the total over the variant's runs.
	Retransmits int64   `json:"retransmits"`
	RTTMsP50    float64 `json:"rtt_ms_p50"`
	RTTMsP95    float64 `json:"rtt_ms_p95"`

	Args              []string  `json:"args"`
	GoodputMbpsRuns   []float64 `json:"goodput_mbps_runs"`
	ConvergenceN      int       `json:"convergence_n"`
	NonConverged      int       `json:"non_converged"`
	ConvergenceS      []float64 `json:"convergence_s"`
	RetransmitsPerRun float64   `json:"retransmits_per_run"`
	// DupAcks is the total of the emulator's dup_acks_up (duplicate ACKs
	// that reached the sender) over the runs.
	DupAcks        int64 `json:"dup_acks"`
	OverflowDrops  int64 `json:"overflow_drops"`
	ReorderFlushes int64 `json:"reorder_flushes"`
	Valid          bool  `json:"valid"`
}

// EmulatorBlock is the emulator's health over all runs: the worst
// lateness, totals of drops and flushes over all runs, and the false
// alarms of the schedule (per run, like handovers).
type EmulatorBlock struct {
	LatePct        float64 `json:"late_pct"`
	OverflowDrops  int64   `json:"overflow_drops"`
	ReorderFlushes int64   `json:"reorder_flushes"`
	FalseAlarms    int64   `json:"false_alarms"`
	MaxLateMs      float64 `json:"max_late_ms"`
	EventsDropped  int64   `json:"events_dropped"`
}

// Meta describes the bench invocation for the summary.
type Meta struct {
	Scenario    string
	Scale       float64
	Seed        uint64
	DurationS   float64
	Repeat      int
	CommandLine string
	Variants    []Variant // order of the summary; variants without runs still appear
	DataDir     string    // shared data for the calibration's reference ("" = the default)
}

// Summarize pools the runs per variant. The summary is valid only when
// every run is valid, every variant has Repeat runs and all runs saw the
// same number of handovers.
func Summarize(runs []RunResult, m Meta) Summary {
	s := Summary{Scenario: m.Scenario, Scale: m.Scale, Seed: m.Seed, DurationS: m.DurationS,
		Repeat: m.Repeat, CommandLine: m.CommandLine, Valid: true}
	hoSeen := -1
	for _, r := range runs {
		for _, p := range r.Problems {
			s.Problems = append(s.Problems, fmt.Sprintf("%s run %d: %s", r.Variant, r.Index+1, p))
		}
		if hoSeen >= 0 && len(r.Handovers) != hoSeen {
			s.Problems = append(s.Problems, fmt.Sprintf("%s run %d: %d handovers, other runs %d", r.Variant, r.Index+1, len(r.Handovers), hoSeen))
		}
		if hoSeen < 0 {
			hoSeen = len(r.Handovers)
		}
		e := &s.Emulator
		e.LatePct = math.Max(e.LatePct, r.Emu.LatePct)
		e.MaxLateMs = math.Max(e.MaxLateMs, r.Emu.MaxLateMs)
		e.OverflowDrops += r.Emu.OverflowDrops
		e.ReorderFlushes += r.Emu.ReorderFlushes
		e.EventsDropped += r.Emu.EventsDropped
		e.FalseAlarms = max(e.FalseAlarms, r.Emu.FalseAlarms)
		s.AlignmentLagP50Ms = math.Max(s.AlignmentLagP50Ms, r.Align.LagP50S*1000)
	}
	s.Handovers = max(hoSeen, 0)
	for _, v := range m.Variants {
		vs := VariantSummary{Name: v.Name, Args: v.Args, GoodputMbpsByType: map[string]float64{}, Valid: true,
			GoodputMbpsRuns: []float64{}, ConvergenceS: []float64{}}
		var all []Bin
		byType := map[string]TypeTally{}
		var rtts []float64
		for _, r := range runs {
			if r.Variant != v.Name {
				continue
			}
			vs.Runs++
			vs.Valid = vs.Valid && r.Valid()
			all = append(all, r.Bins...)
			vs.GoodputMbpsRuns = append(vs.GoodputMbpsRuns, r.GoodputMbps)
			for k, t := range r.ByType {
				bt := byType[k]
				bt.Bits += t.Bits
				bt.Secs += t.Secs
				byType[k] = bt
			}
			for _, c := range r.Convergence {
				if !c.Analyzed {
					continue
				}
				vs.ConvergenceS = append(vs.ConvergenceS, c.Seconds)
				if !c.Converged {
					vs.NonConverged++
				}
			}
			vs.Retransmits += r.Retransmits
			rtts = append(rtts, r.RTTms...)
			vs.DupAcks += r.Emu.DupAcksUp
			vs.OverflowDrops += r.Emu.OverflowDrops
			vs.ReorderFlushes += r.Emu.ReorderFlushes
		}
		vs.GoodputMbps = Goodput(all)
		for k, t := range byType {
			vs.GoodputMbpsByType[k] = t.Mbps()
		}
		vs.ConvergenceN = len(vs.ConvergenceS)
		vs.ConvergenceSMean = zeroNaN(Mean(vs.ConvergenceS))
		vs.ConvergenceSP50 = zeroNaN(Percentile(vs.ConvergenceS, 50))
		vs.RTTMsP50 = zeroNaN(Percentile(rtts, 50))
		vs.RTTMsP95 = zeroNaN(Percentile(rtts, 95))
		if vs.Runs > 0 {
			vs.RetransmitsPerRun = float64(vs.Retransmits) / float64(vs.Runs)
		}
		if vs.Runs != m.Repeat {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %d runs, want %d", v.Name, vs.Runs, m.Repeat))
			vs.Valid = false
		}
		s.Valid = s.Valid && vs.Valid
		s.Variants = append(s.Variants, vs)
	}
	s.Valid = s.Valid && len(s.Problems) == 0 && len(runs) > 0
	return s
}

func zeroNaN(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// WriteJSON writes summary.json, indented.
func (s Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// Decimal places of each number in summary.md; the consistency test reads
// the table back with the same precision.
const (
	mdMbpsDec = 1
	mdSecDec  = 3
	mdMsDec   = 1
	mdPctDec  = 1
)

// mdRow is one metric row of the table: its label, decimals, and how to
// read the value from a variant; lowerBetter orients the relative change.
type mdRow struct {
	label string
	dec   int
	get   func(VariantSummary) float64
}

func mdRows(s Summary) []mdRow {
	rows := []mdRow{
		{"goodput (Mbps)", mdMbpsDec, func(v VariantSummary) float64 { return v.GoodputMbps }},
	}
	for _, t := range typeKeys(s) {
		rows = append(rows, mdRow{"goodput " + t + " (Mbps)", mdMbpsDec, func(v VariantSummary) float64 { return v.GoodputMbpsByType[t] }})
	}
	rows = append(rows,
		mdRow{"convergence mean (s)", mdSecDec, func(v VariantSummary) float64 { return v.ConvergenceSMean }},
		mdRow{"convergence p50 (s)", mdSecDec, func(v VariantSummary) float64 { return v.ConvergenceSP50 }},
		mdRow{"handovers analyzed", 0, func(v VariantSummary) float64 { return float64(v.ConvergenceN) }},
		mdRow{"not converged", 0, func(v VariantSummary) float64 { return float64(v.NonConverged) }},
		mdRow{"retransmits (total)", 0, func(v VariantSummary) float64 { return float64(v.Retransmits) }},
		mdRow{"dup ACKs at sender (total)", 0, func(v VariantSummary) float64 { return float64(v.DupAcks) }},
		mdRow{"RTT p50 (ms)", mdMsDec, func(v VariantSummary) float64 { return v.RTTMsP50 }},
		mdRow{"RTT p95 (ms)", mdMsDec, func(v VariantSummary) float64 { return v.RTTMsP95 }},
		mdRow{"runs", 0, func(v VariantSummary) float64 { return float64(v.Runs) }},
	)
	return rows
}

// typeKeys are the goodput-by-type keys present in any variant: none
// first, then the handover types in their fixed order.
func typeKeys(s Summary) []string {
	seen := map[string]bool{}
	for _, v := range s.Variants {
		for k := range v.GoodputMbpsByType {
			seen[k] = true
		}
	}
	var out []string
	for _, k := range append([]string{TypeNone}, HandoverTypes...) {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	var rest []string
	for k := range seen {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// baseline is the variant others are compared with: "pass" if present,
// else the first.
func baseline(s Summary) int {
	for i, v := range s.Variants {
		if v.Name == "pass" {
			return i
		}
	}
	return 0
}

// RelChange is (x-base)/base in percent; NaN when base is 0.
func RelChange(x, base float64) float64 {
	if base == 0 {
		return math.NaN()
	}
	return (x - base) / base * 100
}

// WriteMarkdown writes summary.md: validity and set-up first, then the
// variants side by side with the change of each against the baseline.
func (s Summary) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# m2ho bench: %s\n\n", s.Scenario)
	if s.Valid {
		b.WriteString("**valid**: every run kept up (emulator lateness within its threshold).\n\n")
	} else {
		b.WriteString("**INVALID: not a result.** Problems:\n\n")
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "- %s\n", p)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- scale: %g (capacities and buffers x%g)\n", s.Scale, s.Scale)
	fmt.Fprintf(&b, "- handovers per run: %d, false alarms per run: %d, runs per variant: %d, %.0f s each, seed %d\n",
		s.Handovers, s.Emulator.FalseAlarms, s.Repeat, s.DurationS, s.Seed)
	fmt.Fprintf(&b, "- emulator: late %.2f %% (worst run), max late %.1f ms, overflow drops %d, reorder flushes %d, events dropped %d\n",
		s.Emulator.LatePct, s.Emulator.MaxLateMs, s.Emulator.OverflowDrops, s.Emulator.ReorderFlushes, s.Emulator.EventsDropped)
	fmt.Fprintf(&b, "- command: `%s`\n\n", s.CommandLine)

	base := baseline(s)
	b.WriteString("| metric |")
	for _, v := range s.Variants {
		fmt.Fprintf(&b, " %s |", v.Name)
	}
	var others []int
	for i := range s.Variants {
		if i != base {
			others = append(others, i)
			fmt.Fprintf(&b, " %s vs %s |", s.Variants[i].Name, s.Variants[base].Name)
		}
	}
	b.WriteString("\n|---|")
	for range len(s.Variants) + len(others) {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, r := range mdRows(s) {
		fmt.Fprintf(&b, "| %s |", r.label)
		for _, v := range s.Variants {
			fmt.Fprintf(&b, " %.*f |", r.dec, r.get(v))
		}
		for _, i := range others {
			c := RelChange(r.get(s.Variants[i]), r.get(s.Variants[base]))
			if math.IsNaN(c) {
				b.WriteString(" - |")
			} else {
				fmt.Fprintf(&b, " %+.*f %% |", mdPctDec, c)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(`
Goodput is received bits over measured time (iperf3 receiver, 0.1 s bins),
all runs pooled; by type, each bin counts for the last handover commanded
before its midpoint ("none" before the first). Convergence is from random
access until a 0.1 s bin reaches 75 % of the new cell's capacity; a
handover that does not get there before the next command counts with its
dwell and as "not converged". RTT is the sender's smoothed RTT per 0.1 s
interval. Plots: throughput.png, convergence_cdf.png, goodput_by_type.png.
`)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return WriteCalibrationMarkdown(w, s.Calibration)
}
