package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// Summary is summary.json. The names of issue 4's schema are kept; the
// fields after them are additions.
type Summary struct {
	Scenario string  `json:"scenario"`
	Scale    float64 `json:"scale"`
	// Handovers is the number of handovers of the first run's schedule
	// (its handovers.tsv; the runs of one seed share the schedule, and
	// each seed draws its own).
	Handovers int              `json:"handovers"`
	Valid     bool             `json:"valid"`
	Variants  []VariantSummary `json:"variants"`
	Emulator  EmulatorBlock    `json:"emulator"`

	Seed        uint64  `json:"seed"`
	DurationS   float64 `json:"duration_s"`
	Repeat      int     `json:"repeat"`
	CommandLine string  `json:"command_line"`
	// SeedDB: the database every run's proxy started from (bench
	// --seed-db), with its SHA-256; absent when the runs started empty.
	SeedDB       string   `json:"seed_db,omitempty"`
	SeedDBSHA256 string   `json:"seed_db_sha256,omitempty"`
	Problems     []string `json:"problems,omitempty"`
	// AlignmentLagP50Ms is the largest per-run median print delay of the
	// receiver lines (see Alignment): the alignment's quality.
	AlignmentLagP50Ms float64 `json:"alignment_lag_p50_ms"`
	// Calibration is the baseline against the measurements (calibration.go).
	Calibration *Calibration `json:"calibration,omitempty"`

	Seeds []uint64 `json:"seeds"`
	// Sysctls are the TCP settings of every namespace (first run; a run
	// that differs is a Problem).
	Sysctls Sysctls `json:"sysctls,omitempty"`
	// SenderCongestion lists the congestion control iperf3 reported for
	// the sender (end.sender_tcp_congestion), each value once.
	SenderCongestion []string `json:"sender_congestion"`
	// ConvergenceFraction and the windows state the convergence metric.
	ConvergenceFraction float64      `json:"convergence_fraction"`
	ConvergenceWindowsS []string     `json:"convergence_windows"`
	Comparisons         []Comparison `json:"comparisons"`
	// Phases is where each variant's bytes went against the baseline's,
	// by phase of the drive (phases.go).
	Phases []PhaseGap `json:"phases,omitempty"`
	// Episodes is what each kind of prediction episode cost or saved each
	// variant against the baseline (from the proxy's --prediction-log).
	Episodes []EpisodeGap `json:"episodes,omitempty"`
	// KeptCell tallies each variant's LTE anchor handovers that kept the
	// data cell (phases.go's PhaseAnchor*), where the link pauses.
	KeptCell      []KeptCellTally `json:"kept_cell,omitempty"`
	Cells         []CellSMax      `json:"cells,omitempty"`
	HandoverTable []HandoverStat  `json:"handover_table"`
	// Sequences is issue 9's measured requirement per variant (sequence.go).
	Sequences []SequenceSummary `json:"sequences"`
	// RetryInvalid is --retry-invalid; Retried lists the runs of the
	// repetitions that were set aside and made again (retry.go).
	RetryInvalid int          `json:"retry_invalid,omitempty"`
	Retried      []RetriedRun `json:"retried,omitempty"`
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
	// TunnelRTTMs*: the QUIC tunnel's own RTT (quic-go, tunnel variants;
	// 0 otherwise), next to the inner TCP's RTT above.
	TunnelRTTMsMean float64 `json:"tunnel_rtt_ms_mean"`
	TunnelRTTMsP50  float64 `json:"tunnel_rtt_ms_p50"`
	TunnelRTTMsP95  float64 `json:"tunnel_rtt_ms_p95"`
	// Tunnel: the variant carries its flow through the QUIC tunnel.
	Tunnel bool `json:"tunnel,omitempty"`

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

	// ConvergenceSMeanByWindow is ConvergenceSMean for each averaging
	// window ("0.1s" is ConvergenceSMean itself).
	ConvergenceSMeanByWindow map[string]float64 `json:"convergence_s_mean_by_window"`
	// SettleSMeanByWindow is the mean time to SettleFraction (90 % of the
	// new capacity: Wave's switch target) per window, a handover that
	// never got there counting with its dwell; NotSettledByWindow counts
	// those.
	SettleSMeanByWindow map[string]float64 `json:"settle_s_mean_by_window"`
	NotSettledByWindow  map[string]int     `json:"not_settled_by_window"`
	// Kernel sums the server's TcpExt recovery counters over the runs
	// (each run has a fresh namespace, so its counters are its own).
	Kernel map[string]int64 `json:"kernel_counters"`
}

// EmulatorBlock is the emulator's health over all runs: the worst
// lateness, totals of drops and flushes over all runs, and the false
// alarms of the schedule (per run, like handovers).
type EmulatorBlock struct {
	LatePct        float64 `json:"late_pct"`
	OverflowDrops  int64   `json:"overflow_drops"`
	ReorderFlushes int64   `json:"reorder_flushes"`
	FalseAlarms    int64   `json:"false_alarms"`
	// AnchorPauses: the link's pauses at LTE anchor handovers that keep
	// the NR cell, per run (the most of any run).
	AnchorPauses int64 `json:"anchor_pauses"`
	// MmWaveEdges: the mmWave -> sub-6 handovers whose source cell's
	// capacity fell before them (the scenario's mmwave_edge), per run
	// (the most of any run).
	MmWaveEdges   int64   `json:"mmwave_edges"`
	MaxLateMs     float64 `json:"max_late_ms"`
	EventsDropped int64   `json:"events_dropped"`
	// LateCauses: the late deliveries of all runs by the part of the
	// emulator's loop that dominated their lateness (emulator.json
	// loop.late_by_cause: wake, write_down, events, ...).
	LateCauses map[string]int64 `json:"late_causes,omitempty"`
	// HostStealPct is the host's CPU time stolen by the hypervisor over
	// the HostStealRuns runs that recorded it (host_cpu.json): the mean
	// and the worst run.
	HostStealRuns    int     `json:"host_steal_runs"`
	HostStealPctMean float64 `json:"host_steal_pct_mean"`
	HostStealPctMax  float64 `json:"host_steal_pct_max"`
}

// Meta describes the bench invocation for the summary.
type Meta struct {
	Scenario    string
	Scale       float64
	Seed        uint64
	Seeds       []uint64 // per repetition (nil: all Seed)
	DurationS   float64
	Repeat      int
	CommandLine string
	Variants    []Variant // order of the summary; variants without runs still appear
	DataDir     string    // shared data for the calibration's reference ("" = the default)
	// SeedDB and its SHA-256: the database every run's proxy started
	// from (Config.SeedDB); "" = none.
	SeedDB, SeedDBSHA256 string
}

// Summarize pools the runs per variant. The summary is valid only when
// every run is valid, every variant has Repeat runs and all runs saw the
// same number of handovers.
func Summarize(runs []RunResult, m Meta) Summary {
	s := Summary{Scenario: m.Scenario, Scale: m.Scale, Seed: m.Seed, DurationS: m.DurationS,
		Repeat: m.Repeat, CommandLine: m.CommandLine, SeedDB: m.SeedDB, SeedDBSHA256: m.SeedDBSHA256, Valid: true}
	hoSeen := -1
	for _, r := range runs {
		for _, p := range r.Problems {
			s.Problems = append(s.Problems, fmt.Sprintf("%s run %d: %s", r.Variant, r.Index+1, p))
		}
		n := handoversWithin(r.Handovers, m.DurationS)
		if hoSeen >= 0 && n != hoSeen && sameSeedAsFirst(runs, r) {
			s.Problems = append(s.Problems, fmt.Sprintf("%s run %d: %d handovers within %.0f s, other runs %d", r.Variant, r.Index+1, n, m.DurationS, hoSeen))
		}
		if hoSeen < 0 {
			hoSeen = n
		}
		e := &s.Emulator
		e.LatePct = math.Max(e.LatePct, r.Emu.LatePct)
		e.MaxLateMs = math.Max(e.MaxLateMs, r.Emu.MaxLateMs)
		e.OverflowDrops += r.Emu.OverflowDrops
		e.ReorderFlushes += r.Emu.ReorderFlushes
		e.EventsDropped += r.Emu.EventsDropped
		e.FalseAlarms = max(e.FalseAlarms, r.Emu.FalseAlarms)
		e.AnchorPauses = max(e.AnchorPauses, r.Emu.AnchorPauses)
		e.MmWaveEdges = max(e.MmWaveEdges, r.Emu.MmWaveEdges)
		if r.Emu.Loop != nil {
			for k, c := range r.Emu.Loop.LateByCause {
				if e.LateCauses == nil {
					e.LateCauses = map[string]int64{}
				}
				e.LateCauses[k] += c.Packets
			}
		}
		if r.HostCPU != nil {
			e.HostStealRuns++
			e.HostStealPctMean += r.HostCPU.StealPct
			e.HostStealPctMax = math.Max(e.HostStealPctMax, r.HostCPU.StealPct)
		}
		s.AlignmentLagP50Ms = math.Max(s.AlignmentLagP50Ms, r.Align.LagP50S*1000)
	}
	if e := &s.Emulator; e.HostStealRuns > 0 {
		e.HostStealPctMean /= float64(e.HostStealRuns)
	}
	s.Handovers = max(hoSeen, 0)
	s.Seeds = m.Seeds
	s.ConvergenceFraction = ConvergenceFraction
	for _, n := range ConvergenceWindows {
		s.ConvergenceWindowsS = append(s.ConvergenceWindowsS, windowName(n))
	}
	cells := map[string]*CellSMax{}
	var cellOrder []string
	for _, r := range runs {
		if s.Sysctls == nil && r.Sysctls != nil {
			s.Sysctls = r.Sysctls
		} else if r.Sysctls != nil && fmt.Sprint(r.Sysctls) != fmt.Sprint(s.Sysctls) {
			s.Problems = append(s.Problems, fmt.Sprintf("%s run %d: sysctls differ from the first run's", r.Variant, r.Index+1))
		}
		s.HandoverTable = append(s.HandoverTable, r.HandoverStats...)
		if cc := r.Congestion; cc != "" && !slices.Contains(s.SenderCongestion, cc) {
			s.SenderCongestion = append(s.SenderCongestion, cc)
		}
		for _, c := range r.Cells {
			if cells[c.ID] == nil {
				cells[c.ID] = &CellSMax{ID: c.ID, Type: c.Type, BufferBytes: c.BufferBytes, SMaxBytes: map[string]int{}, SMaxValidBytes: map[string]int{}}
				cellOrder = append(cellOrder, c.ID)
			}
		}
		for id, v := range r.SMax {
			c := cells[id]
			if c == nil {
				c = &CellSMax{ID: id, SMaxBytes: map[string]int{}, SMaxValidBytes: map[string]int{}}
				cells[id] = c
				cellOrder = append(cellOrder, id)
			}
			c.SMaxBytes[r.Variant] = max(c.SMaxBytes[r.Variant], v)
			if r.Valid() {
				c.SMaxValidBytes[r.Variant] = max(c.SMaxValidBytes[r.Variant], v)
			}
		}
		for _, o := range r.SMaxOver {
			if c := cells[o.Cell]; c != nil {
				c.Over = append(c.Over, CellSMaxOver{Variant: r.Variant, Run: r.Index + 1, Valid: r.Valid(), SMaxOver: o})
			}
		}
	}
	for _, id := range cellOrder {
		c := cells[id]
		for _, v := range m.Variants {
			if c.BufferBytes > 0 && int64(c.SMaxBytes[v.Name]) > c.BufferBytes {
				c.Exceeds = append(c.Exceeds, v.Name)
			}
			if c.BufferBytes > 0 && int64(c.SMaxValidBytes[v.Name]) > c.BufferBytes {
				c.ExceedsInValidRuns = append(c.ExceedsInValidRuns, v.Name)
			}
		}
		s.Cells = append(s.Cells, *c)
	}
	for _, v := range m.Variants {
		vs := VariantSummary{Name: v.Name, Args: v.Args, Tunnel: v.Tunnel(), GoodputMbpsByType: map[string]float64{}, Valid: true,
			GoodputMbpsRuns: []float64{}, ConvergenceS: []float64{}, ConvergenceSMeanByWindow: map[string]float64{}, Kernel: map[string]int64{},
			SettleSMeanByWindow: map[string]float64{}, NotSettledByWindow: map[string]int{}}
		byWin, settle := map[string][]float64{}, map[string][]float64{}
		var all []Bin
		byType := map[string]TypeTally{}
		var rtts, trtts []float64
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
			for w, cs := range r.ConvergenceByWindow {
				for _, c := range cs {
					if c.Analyzed {
						byWin[w] = append(byWin[w], c.Seconds)
					}
				}
			}
			for w, cs := range r.SettleByWindow {
				for _, c := range cs {
					if c.Analyzed {
						settle[w] = append(settle[w], c.Seconds)
						if !c.Converged {
							vs.NotSettledByWindow[w]++
						}
					}
				}
			}
			for k, x := range r.Kernel {
				vs.Kernel[k] += x
			}
			vs.Retransmits += r.Retransmits
			rtts = append(rtts, r.RTTms...)
			trtts = append(trtts, r.TunnelRTTms...)
			vs.DupAcks += r.Emu.DupAcksUp
			vs.OverflowDrops += r.Emu.OverflowDrops
			vs.ReorderFlushes += r.Emu.ReorderFlushes
		}
		vs.GoodputMbps = Goodput(all)
		for k, t := range byType {
			vs.GoodputMbpsByType[k] = t.Mbps()
		}
		for w, xs := range byWin {
			vs.ConvergenceSMeanByWindow[w] = zeroNaN(Mean(xs))
		}
		for w, xs := range settle {
			vs.SettleSMeanByWindow[w] = zeroNaN(Mean(xs))
		}
		vs.ConvergenceN = len(vs.ConvergenceS)
		vs.ConvergenceSMean = zeroNaN(Mean(vs.ConvergenceS))
		vs.ConvergenceSP50 = zeroNaN(Percentile(vs.ConvergenceS, 50))
		vs.RTTMsP50 = zeroNaN(Percentile(rtts, 50))
		vs.RTTMsP95 = zeroNaN(Percentile(rtts, 95))
		vs.TunnelRTTMsMean = zeroNaN(Mean(trtts))
		vs.TunnelRTTMsP50 = zeroNaN(Percentile(trtts, 50))
		vs.TunnelRTTMsP95 = zeroNaN(Percentile(trtts, 95))
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
	s.Comparisons = compare(runs, m, s)
	s.Phases = comparePhases(runs, s)
	s.Episodes = compareEpisodes(runs, s)
	s.KeptCell = tallyKeptCell(runs, variantNames(m.Variants))
	s.Sequences = summarizeSequences(runs, variantNames(m.Variants))
	s.Valid = s.Valid && len(s.Problems) == 0 && len(runs) > 0
	return s
}

// runsByRep indexes runs by variant, then repetition.
func runsByRep(runs []RunResult) map[string]map[int]RunResult {
	byRep := map[string]map[int]RunResult{}
	for _, r := range runs {
		if byRep[r.Variant] == nil {
			byRep[r.Variant] = map[int]RunResult{}
		}
		byRep[r.Variant][r.Index] = r
	}
	return byRep
}

// compare pairs each variant's runs with the baseline's of the same
// repetition (the same seed) for the goodput and convergence ratios.
func compare(runs []RunResult, m Meta, s Summary) []Comparison {
	if len(s.Variants) < 2 {
		return nil
	}
	base := s.Variants[baseline(s)].Name
	byRep := runsByRep(runs)
	meanConv := func(r RunResult, w string) float64 {
		var xs []float64
		for _, c := range r.ConvergenceByWindow[w] {
			if c.Analyzed {
				xs = append(xs, c.Seconds)
			}
		}
		return zeroNaN(Mean(xs))
	}
	var out []Comparison
	for _, v := range s.Variants {
		if v.Name == base {
			continue
		}
		metrics := []string{"goodput"}
		for _, w := range s.ConvergenceWindowsS {
			metrics = append(metrics, "convergence_"+w)
		}
		for _, metric := range metrics {
			var xv, xb []float64
			for i := range m.Repeat {
				rv, ok1 := byRep[v.Name][i]
				rb, ok2 := byRep[base][i]
				if !ok1 || !ok2 {
					continue
				}
				if metric == "goodput" {
					xv, xb = append(xv, rv.GoodputMbps), append(xb, rb.GoodputMbps)
				} else {
					w := strings.TrimPrefix(metric, "convergence_")
					xv, xb = append(xv, meanConv(rv, w)), append(xb, meanConv(rb, w))
				}
			}
			ratio, lo, hi, per := PairedRatio(xv, xb)
			out = append(out, Comparison{Variant: v.Name, Baseline: base, Metric: metric, N: len(per),
				Ratio: ratio, CILow: lo, CIHigh: hi, PerSeed: per, Method: pairedMethod})
		}
	}
	return out
}

// sameSeedAsFirst: r's schedule should match the first run's (the same
// seed, or seeds not recorded).
// handoversWithin counts the handovers commanded within the run's
// duration (all of them when it is not known). The emulator stops when
// the download has ended, a few hundred ms after the duration, so a
// handover scheduled just past it is in some runs' logs and not in
// others' (the measured drive bw-2 at 60 s: one at 60.715 s, in every
// pass run and no m2ho run, 2026-12-05): that says nothing of the runs.
func handoversWithin(hos []HandoverRow, durS float64) int {
	if !(durS > 0) {
		return len(hos)
	}
	n := 0
	for _, h := range hos {
		if h.Command <= durS {
			n++
		}
	}
	return n
}

func sameSeedAsFirst(runs []RunResult, r RunResult) bool {
	return len(runs) == 0 || runs[0].Seed == r.Seed
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
	// get is NaN for a variant the row does not apply to: "-" in its
	// cell, and a row that applies to no variant is left out.
	get func(VariantSummary) float64
}

func (r mdRow) has(v VariantSummary) bool { return !math.IsNaN(r.get(v)) }

// tunnelOnly applies a row to the tunnel variants only.
func tunnelOnly(get func(VariantSummary) float64) func(VariantSummary) float64 {
	return func(v VariantSummary) float64 {
		if !v.Tunnel {
			return math.NaN()
		}
		return get(v)
	}
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
		mdRow{"convergence mean, 1 s window (s)", mdSecDec, func(v VariantSummary) float64 { return v.ConvergenceSMeanByWindow["1s"] }},
		mdRow{"handovers analyzed", 0, func(v VariantSummary) float64 { return float64(v.ConvergenceN) }},
		mdRow{"not converged", 0, func(v VariantSummary) float64 { return float64(v.NonConverged) }},
		mdRow{"within 10 % of capacity, mean (s)", mdSecDec, func(v VariantSummary) float64 { return v.SettleSMeanByWindow["0.1s"] }},
		mdRow{"within 10 % of capacity, mean, 1 s window (s)", mdSecDec, func(v VariantSummary) float64 { return v.SettleSMeanByWindow["1s"] }},
		mdRow{"never within 10 % of capacity", 0, func(v VariantSummary) float64 { return float64(v.NotSettledByWindow["0.1s"]) }},
		mdRow{"retransmits (total)", 0, func(v VariantSummary) float64 { return float64(v.Retransmits) }},
		mdRow{"dup ACKs at sender (total)", 0, func(v VariantSummary) float64 { return float64(v.DupAcks) }},
		mdRow{"RTT p50 (ms)", mdMsDec, func(v VariantSummary) float64 { return v.RTTMsP50 }},
		mdRow{"RTT p95 (ms)", mdMsDec, func(v VariantSummary) float64 { return v.RTTMsP95 }},
		mdRow{"tunnel RTT mean (ms)", mdMsDec, tunnelOnly(func(v VariantSummary) float64 { return v.TunnelRTTMsMean })},
		mdRow{"tunnel RTT p95 (ms)", mdMsDec, tunnelOnly(func(v VariantSummary) float64 { return v.TunnelRTTMsP95 })},
		mdRow{"runs", 0, func(v VariantSummary) float64 { return float64(v.Runs) }},
	)
	for _, k := range KernelCounters {
		rows = append(rows, mdRow{"server " + k + " (total)", 0, func(v VariantSummary) float64 { return float64(v.Kernel[k]) }})
	}
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
	fmt.Fprintf(&b, "- handovers in the first run: %d, false alarms (most in a run): %d, runs per variant: %d, %.0f s each, seed %d (each seed draws its own synthetic drive; the variants of a repetition share it)\n",
		s.Handovers, s.Emulator.FalseAlarms, s.Repeat, s.DurationS, s.Seed)
	if s.Emulator.MmWaveEdges > 0 {
		fmt.Fprintf(&b, "- mmWave edges: the source cell's capacity fell in the 5 s before %d mmWave -> sub-6 handovers per run, as measured (mmwave_edge; --mmwave-edge=false for none)\n", s.Emulator.MmWaveEdges)
	}
	if s.Emulator.AnchorPauses > 0 {
		fmt.Fprintf(&b, "- link pauses at LTE anchor handovers that keep the NR cell (not counted as handovers; command to the logged random access, queue kept): %d per run\n", s.Emulator.AnchorPauses)
	}
	fmt.Fprintf(&b, "- emulator: late %.2f %% (worst run), max late %.1f ms, overflow drops %d, reorder flushes %d, events dropped %d\n",
		s.Emulator.LatePct, s.Emulator.MaxLateMs, s.Emulator.OverflowDrops, s.Emulator.ReorderFlushes, s.Emulator.EventsDropped)
	if e := s.Emulator; e.HostStealRuns > 0 {
		fmt.Fprintf(&b, "- host CPU stolen by the hypervisor (/proc/stat steal, each run from its start to the download's end; %d runs): mean %.1f %%, worst run %.1f %%\n",
			e.HostStealRuns, e.HostStealPctMean, e.HostStealPctMax)
	}
	if lc := lateCauses(s.Emulator.LateCauses); lc != "" {
		fmt.Fprintf(&b, "- emulator's late deliveries by cause (all runs; emulator.json loop): %s\n", lc)
	}
	fmt.Fprintf(&b, "- sender congestion control (iperf3): %s; seeds: %v; convergence: %.0f %% of the capacity, averaged over %s windows\n",
		strings.Join(s.SenderCongestion, ", "), s.Seeds, s.ConvergenceFraction*100, strings.Join(s.ConvergenceWindowsS, " and "))
	if len(s.Retried) > 0 {
		b.WriteString(retriedMarkdown(s.Retried))
	}
	if s.SeedDB != "" {
		fmt.Fprintf(&b, "- every run's proxy started from the database %s (sha256 %s), the same for every variant\n", s.SeedDB, s.SeedDBSHA256)
	}
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
		if !slices.ContainsFunc(s.Variants, r.has) {
			continue
		}
		fmt.Fprintf(&b, "| %s |", r.label)
		for _, v := range s.Variants {
			if !r.has(v) {
				b.WriteString(" - |")
				continue
			}
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
dwell and as "not converged". "Within 10 % of capacity" is the same
scan at 90 % (QUIC Wave's switch target); a tunnelled flow's goodput
carries the tunnel's overhead inside those 10 %. RTT is the sender's
smoothed RTT per 0.1 s interval. Plots: throughput.png, convergence_cdf.png, goodput_by_type.png.
`)
	s.writeMarkdownDetails(&b)
	writeSequences(&b, s.Sequences)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	return WriteCalibrationMarkdown(w, s.Calibration)
}

func (s Summary) writeMarkdownDetails(b *strings.Builder) {
	if len(s.Comparisons) > 0 {
		b.WriteString("\n## Ratios against the baseline (95 % CI)\n\n")
		b.WriteString("Paired by seed (the variants of one repetition share its schedule): a t interval on the per-seed log-ratios, exponentiated; convergence is the mean over a run's analyzed handovers, and a ratio under 1 is faster.\n\n")
		b.WriteString("| variant | metric | seeds | ratio | 95 % CI |\n|---|---|---:|---:|---|\n")
		for _, c := range s.Comparisons {
			ci := "-"
			if c.N >= 2 {
				ci = fmt.Sprintf("[%.3f, %.3f]", c.CILow, c.CIHigh)
			}
			fmt.Fprintf(b, "| %s vs %s | %s | %d | %.3f | %s |\n", c.Variant, c.Baseline, c.Metric, c.N, c.Ratio, ci)
		}
	}
	writePhases(b, s.Phases)
	writeEpisodes(b, s.Episodes)
	writeKeptCell(b, s.KeptCell, s.Emulator.AnchorPauses > 0)
	if len(s.Cells) > 0 {
		b.WriteString("\n## Buffer estimates (ŝ_max) against the configured buffers\n\nThe largest over each variant's runs; * = it came from a run marked invalid (late deliveries make the estimate err high), the largest over the valid runs in brackets (– none estimated it).\n\n| cell | type | buffer (B) |")
		var names []string
		for _, v := range s.Variants {
			names = append(names, v.Name)
			fmt.Fprintf(b, " ŝ_max %s (B) |", v.Name)
		}
		b.WriteString("\n|---|---|---:|" + strings.Repeat("---:|", len(names)) + "\n")
		for _, c := range s.Cells {
			fmt.Fprintf(b, "| %s | %s | %d |", c.ID, c.Type, c.BufferBytes)
			for _, n := range names {
				all := c.SMaxBytes[n]
				switch valid, ok := c.SMaxValidBytes[n]; {
				case !ok && all > 0:
					fmt.Fprintf(b, " %d* (–) |", all) // no valid run estimated it
				case all != valid:
					fmt.Fprintf(b, " %d* (%d) |", all, valid)
				default:
					fmt.Fprintf(b, " %d |", all)
				}
			}
			b.WriteString("\n")
		}
		for _, c := range s.Cells {
			for _, o := range c.Over {
				valid := ""
				if !o.Valid {
					valid = ", a run marked invalid"
				}
				fmt.Fprintf(b, "\n- %s rose above its buffer in %s run %d%s at %.2f s: ŝ_max %d of %d B, from a segment that waited %.1f ms (received %d, served %d B since it joined the queue; the cell busy for %.1f ms; largest single sample %d B); emulator late deliveries in that second and the one before: %d.",
					c.ID, o.Variant, o.Run, valid, o.AtS, o.SMax, o.BufferBytes, float64(o.WaitUs)/1000, o.Received, o.Served, float64(o.BusyUs)/1000, o.Raw, o.EmuLate)
			}
		}
	}
	if len(s.HandoverTable) > 0 {
		b.WriteString("\n## Per handover\n\nOverflow drops: the emulator's tail drops from this command to the next; holes: packets missing at the flush (-1: not recorded); cwnd: the sender's snd_cwnd at the last 0.1 s interval before the command and 1 s after random access; convergence from random access to 75 % of the capacity averaged over 0.1 s and 1 s (* = not converged: the dwell); 90 % 0.1 s: the same to 90 % of the capacity (QUIC Wave's switch target, within 10 %). Actions: the proxy's verdicts in the handover's span (clamp = window rewrites to ŝ_max from the report to 0.2 s after random access, suppression = dropped duplicate ACKs in the same span, eqn2 = Eqn 2 rewrites from random access to the next report), with their counts. Kernel: the server's recovery counters that grew from this command to the next (sampled every 0.1 s; (+x s): when the first sample showing it came, after the command; DSACKUndo, PartialUndo, LossUndo, FullUndo, SpuriousRTOs, Timeouts, LostRetransmit, SACKReorder, DSACKRecv; - none, blank: not sampled).\n\n")
		b.WriteString("| variant | run | command (s) | type | from → to | actions (clamp/suppr./eqn2/release) | overflow drops | holes | cwnd before (KB) | cwnd +1 s (KB) | conv 0.1 s | conv 1 s | 90 % 0.1 s | kernel |\n|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
		cell := func(xs map[string]float64, ok map[string]bool, w string) string {
			x, has := xs[w]
			if !has {
				return "-"
			}
			star := ""
			if !ok[w] {
				star = "*"
			}
			return fmt.Sprintf("%.2f%s", x, star)
		}
		for _, h := range s.HandoverTable {
			act := "not logged"
			if a := h.Actions; a != nil {
				act = fmt.Sprintf("%s (%d/%d/%d/%d)", a.Fired(), a.Clamp, a.Suppressions, a.Eqn2, a.Release)
			}
			fmt.Fprintf(b, "| %s | %d | %.2f | %s | %s → %s | %s | %d | %d | %.0f | %.0f | %s | %s | %s | %s |\n", h.Variant, h.Run, h.Command, h.Type, h.From, h.To,
				act, h.OverflowDrops, h.FlushedHoles, float64(h.CwndBefore)/1024, float64(h.CwndAfter1s)/1024, cell(h.ConvergenceS, h.Converged, "0.1s"),
				cell(h.ConvergenceS, h.Converged, "1s"), cell(h.SettleS, h.Settled, "0.1s"), kernelCell(h.Kernel, h.KernelAfterS))
		}
	}
	if len(s.Sysctls) > 0 {
		b.WriteString("\n## TCP settings per namespace\n\n")
		var nss []string
		for n := range s.Sysctls {
			nss = append(nss, n)
		}
		sort.Strings(nss)
		for _, n := range nss {
			var kv []string
			for k, v := range s.Sysctls[n] {
				kv = append(kv, k+"="+v)
			}
			sort.Strings(kv)
			fmt.Fprintf(b, "- %s: %s\n", n, strings.Join(kv, ", "))
		}
	}
}

// kernelCell is a per-handover table's kernel column: the counters that
// grew, in KernelCounters order, without their "TCP" prefix.
func kernelCell(k map[string]int64, after map[string]float64) string {
	if k == nil {
		return ""
	}
	var out []string
	for _, name := range KernelCounters {
		v := k[name]
		if v <= 0 {
			continue
		}
		cell := fmt.Sprintf("%s %d", strings.TrimPrefix(name, "TCP"), v)
		if s, ok := after[name]; ok {
			cell += fmt.Sprintf(" (+%.1f s)", s)
		}
		out = append(out, cell)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}
