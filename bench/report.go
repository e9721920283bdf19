package bench

import (
	"fmt"
	"math"
	"strings"
)

// ConvergenceWindows are the averaging windows convergence is reported
// for, in 0.1 s bins: 0.1 s (one bin, the bench's original metric) and
// 1 s (ten bins).
var ConvergenceWindows = []int{1, 10}

// ConvergeWindow is Converge with throughput and capacity averaged over
// n consecutive bins (n·0.1 s): the paper's convergence, "throughput
// reaches 75 % of the UDP capacity", over a stated window. For handover h
// the candidate windows are runs of n adjacent bins lying wholly in the
// dwell (from RA to the next command or the end of the data); the first
// whose bits/seconds reach frac × the mean capacity over its bins
// (capacity.tsv at each bin's midpoint) converges h at the window's end −
// RA. Windows with a bin whose capacity is 0 or unknown are skipped. No
// such window: the dwell, not converged.
func ConvergeWindow(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac float64, n int) []Convergence {
	n = max(n, 1)
	return convergeScan(bins, hos,
		func(first, e int, _ float64) (int, bool) { return e - n + 1, e-n+1 >= first },
		func(HandoverRow, float64) func([]Bin) bool {
			return func(win []Bin) bool {
				var capSum float64
				for _, b := range win {
					cb, ok := CapacityAt(caps, (b.T0+b.T1)/2)
					if !ok || cb.Mbps <= 0 {
						return false
					}
					capSum += cb.Mbps
				}
				// The relative slack absorbs float error in bin
				// widths, so exactly frac x capacity counts as reached.
				return windowMbps(win) >= frac*capSum/float64(n)*(1-1e-9)
			}
		})
}

// HandoverStat is one row of the per-handover table: what happened at a
// handover of one run and what it cost.
type HandoverStat struct {
	Variant string  `json:"variant"`
	Run     int     `json:"run"`
	Seed    uint64  `json:"seed"`
	Command float64 `json:"command_s"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Type    string  `json:"type"`
	// OverflowDrops are the emulator's tail drops from this command to the
	// next; FlushedHoles the packets missing at its flush (-1: the
	// emulator did not record them).
	OverflowDrops int64 `json:"overflow_drops"`
	FlushedHoles  int64 `json:"flushed_holes"`
	// CwndBefore is the sender's snd_cwnd at the end of the last 0.1 s
	// interval before the command; CwndAfter1s at the end of the first
	// interval ending 1 s or more after random access (0: no interval).
	CwndBefore  int64 `json:"cwnd_before_bytes"`
	CwndAfter1s int64 `json:"cwnd_after_1s_bytes"`
	// The proxy's verdicts attributed to this handover (nil: the proxy
	// wrote no verdict log): clamp rewrites (§4.3, Preparation and
	// Smoothing) and suppressed ACKs (§4.4) from its report to its random
	// access plus SmoothingWindowS, Eqn 2 rewrites (§4.5) from its random
	// access to the next handover's report.
	Actions *HandoverActions `json:"actions,omitempty"`
	// Kernel is how much each of the server's recovery counters
	// (KernelCounters: undo, spurious RTOs, timeouts, ...) grew from this
	// command to the next handover's (those that grew; nil: the run has
	// no sampled counters). Samples are KernelSampleEvery apart, so an
	// event up to that long before the command can count here.
	Kernel map[string]int64 `json:"kernel"`
	// KernelAfterS is, for each counter in Kernel, when it first grew:
	// seconds from this command to the first sample that shows it (so a
	// timeout 7 s into a dwell is not read as the handover's).
	KernelAfterS map[string]float64 `json:"kernel_after_s,omitempty"`
	// Convergence by window ("0.1s", "1s"), seconds from RA; Converged
	// false means the value is the dwell.
	ConvergenceS map[string]float64 `json:"convergence_s"`
	Converged    map[string]bool    `json:"converged"`
	// SettleS and Settled are the same at SettleFraction (90 %: Wave's
	// switch target).
	SettleS map[string]float64 `json:"settle_s"`
	Settled map[string]bool    `json:"settled"`
}

// HandoverActions counts the verdicts of one handover.
type HandoverActions struct {
	Clamp        uint64 `json:"clamp_rewrites"`
	Suppressions uint64 `json:"suppressed_acks"`
	Eqn2         uint64 `json:"eqn2_rewrites"`
	// Release: rewrites that opened a held window gradually, from the
	// report to the next report.
	Release uint64 `json:"release_rewrites"`
}

// Fired names the actions with a non-zero count ("-" for none).
func (a HandoverActions) Fired() string {
	var out []string
	if a.Clamp > 0 {
		out = append(out, "clamp")
	}
	if a.Suppressions > 0 {
		out = append(out, "suppression")
	}
	if a.Eqn2 > 0 {
		out = append(out, "eqn2")
	}
	if a.Release > 0 {
		out = append(out, "release")
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "+")
}

// SmoothingWindowS is how long after random access the clamp and the
// suppression still count for the handover: the controller's 150 ms
// smoothing bound runs from the command, so 0.2 s after RA covers it.
const SmoothingWindowS = 0.2

func windowName(n int) string { return strings.TrimSuffix(fmt.Sprintf("%gs", float64(n)/10), ".0s") }

// handoverStats builds the per-handover rows of one run.
func handoverStats(r RunResult, d RunData) []HandoverStat {
	out := make([]HandoverStat, 0, len(d.Handovers))
	for i, h := range d.Handovers {
		hs := HandoverStat{Variant: d.Variant, Run: d.Index + 1, Seed: d.Seed, Command: h.Command, From: h.From, To: h.To, Type: h.Type,
			OverflowDrops: h.OverflowDrops, FlushedHoles: h.FlushedHoles,
			ConvergenceS: map[string]float64{}, Converged: map[string]bool{}, SettleS: map[string]float64{}, Settled: map[string]bool{}}
		for _, iv := range d.Sender.Intervals {
			end := iv.End + r.Align.OffsetS
			if end <= h.Command {
				hs.CwndBefore = iv.CwndBytes
			}
			if end >= h.RA+1 && hs.CwndAfter1s == 0 {
				hs.CwndAfter1s = iv.CwndBytes
			}
		}
		if d.KernelLog != nil {
			next := math.Inf(1)
			if i+1 < len(d.Handovers) {
				next = d.Handovers[i+1].Command
			}
			hs.Kernel, hs.KernelAfterS = kernelDelta(d.KernelLog, d.Emu.StartUnixNS, h.Command, next)
		}
		if d.Verdicts != nil {
			st := d.Emu.StartUnixNS
			nextReport := math.Inf(1)
			if i+1 < len(d.Handovers) {
				nextReport = d.Handovers[i+1].Report
			}
			endSmooth := math.Min(h.RA+SmoothingWindowS, nextReport)
			a0, a1 := verdictsAt(d.Verdicts, st, h.Report-1e-6), verdictsAt(d.Verdicts, st, endSmooth)
			a2 := verdictsAt(d.Verdicts, st, nextReport)
			hs.Actions = &HandoverActions{Clamp: a1.Clamp - a0.Clamp, Suppressions: a1.Suppressions - a0.Suppressions, Eqn2: a2.Eqn2 - a1.Eqn2,
				Release: a2.Release - a0.Release}
		}
		for _, n := range ConvergenceWindows {
			w := windowName(n)
			if cs := r.ConvergenceByWindow[w]; i < len(cs) && cs[i].Analyzed {
				hs.ConvergenceS[w], hs.Converged[w] = cs[i].Seconds, cs[i].Converged
			}
			if cs := r.SettleByWindow[w]; i < len(cs) && cs[i].Analyzed {
				hs.SettleS[w], hs.Settled[w] = cs[i].Seconds, cs[i].Converged
			}
		}
		out = append(out, hs)
	}
	return out
}

// Comparison is a variant against the baseline over paired repetitions
// (the same seed, so the same schedule): the ratio of the variant's value
// to the baseline's, with a 95 % confidence interval.
//
// Method: per repetition i the log-ratio x_i = ln(v_i / b_i); the ratio
// is exp(mean x), the interval exp(mean x ± t_{0.975, n−1} · s/√n) with s
// the sample standard deviation of the x_i (a paired t interval on
// log-ratios: ratios are multiplicative, and the log makes 0.5× and 2×
// symmetric). With one repetition there is no interval (CI fields 0).
type Comparison struct {
	Variant  string    `json:"variant"`
	Baseline string    `json:"baseline"`
	Metric   string    `json:"metric"` // goodput, convergence_0.1s, convergence_1s
	N        int       `json:"n"`
	Ratio    float64   `json:"ratio"`
	CILow    float64   `json:"ci95_low"`
	CIHigh   float64   `json:"ci95_high"`
	PerSeed  []float64 `json:"per_seed_ratio"`
	Method   string    `json:"method"`
}

// tQuantile975 is Student's t 0.975 quantile for df degrees of freedom
// (tables to 30, the normal's 1.96 beyond).
func tQuantile975(df int) float64 {
	t := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	if df < 1 {
		return math.NaN()
	}
	if df < len(t) {
		return t[df]
	}
	return 1.96
}

// PairedRatio is the Comparison's estimate from paired values; pairs with
// a non-positive value are left out.
func PairedRatio(v, b []float64) (ratio, lo, hi float64, per []float64) {
	var xs []float64
	for i := range min(len(v), len(b)) {
		if v[i] > 0 && b[i] > 0 {
			xs = append(xs, math.Log(v[i]/b[i]))
			per = append(per, v[i]/b[i])
		}
	}
	if len(xs) == 0 {
		return 0, 0, 0, per
	}
	m := Mean(xs)
	ratio = math.Exp(m)
	if len(xs) < 2 {
		return ratio, 0, 0, per
	}
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss / float64(len(xs)-1))
	h := tQuantile975(len(xs)-1) * sd / math.Sqrt(float64(len(xs)))
	return ratio, math.Exp(m - h), math.Exp(m + h), per
}

const pairedMethod = "paired by seed: t interval on per-seed log-ratios, exponentiated"

// CellSMax is a cell's configured buffer next to the controller's final
// buffer estimate, per variant: the largest over the variant's runs (each
// run starts with an empty database), 0 when never estimated.
type CellSMax struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	BufferBytes int64          `json:"buffer_bytes"`
	SMaxBytes   map[string]int `json:"smax_bytes"`
	// SMaxValidBytes is the same over the variant's valid runs only: a run
	// the emulator marked invalid delivered late, which is what makes an
	// estimate err high (m2ho/queue.go, "Late deliveries").
	SMaxValidBytes map[string]int `json:"smax_valid_bytes"`
	// Exceeds lists the variants whose estimate is above the buffer (an
	// estimate that is no lower bound); ExceedsInValidRuns those whose
	// estimate from a valid run is.
	Exceeds            []string `json:"exceeds,omitempty"`
	ExceedsInValidRuns []string `json:"exceeds_in_valid_runs,omitempty"`
	// Over is, per run whose estimate rose above the buffer, the rise
	// that first did, from the proxy's --smax-log.
	Over []CellSMaxOver `json:"over,omitempty"`
}

// CellSMaxOver is one run's first rise of a cell's ŝ_max above its buffer.
type CellSMaxOver struct {
	Variant string `json:"variant"`
	Run     int    `json:"run"` // from 1
	Valid   bool   `json:"valid"`
	SMaxOver
}
