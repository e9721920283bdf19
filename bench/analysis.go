package bench

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
)

// ConvergenceFraction is the share of the new cell's capacity the
// throughput of a 0.1 s bin must reach for the flow to count as converged
// after a handover (issue 4, after the M2HO paper's convergence metric).
const ConvergenceFraction = 0.75

// SettleFraction is the share of the new capacity QUIC Wave's switch
// target asks for (issue 10: "within 10 % of the new capacity in ≤ 0.5
// s" after a switch): a handover settles when a window reaches 90 % of
// the capacity, scanned as convergence is (ConvergeWindow, the same
// windows). It is stricter than the M2HO paper's 75 %, and for a
// tunnelled flow the 10 % also has to cover the tunnel's overhead: on
// the bench's low-bdp link quic-go's own controller carries 91 % of the
// capacity as inner goodput, Wave 85-86 %.
const SettleFraction = 0.9

// RunData is everything one run left behind, parsed.
type RunData struct {
	Variant string
	Index   int // repetition, from 0

	Emu         EmulatorSummary
	Capacity    []CapacityBin
	Handovers   []HandoverRow
	FalseAlarms []FalseAlarmRow
	// KeptCell are the run's anchor handovers that kept the data cell
	// (from emu/events.jsonl; nil when it is absent).
	KeptCell []KeptCellCommand
	Sender   Iperf3Sender
	Recv     []RecvInterval
	// LaunchNs is the wall time (Unix ns) the bench started the iperf3
	// client at; 0 if unknown.
	LaunchNs int64
	Seed     uint64 // the emulator's seed (0: not recorded)

	Sysctls Sysctls
	Kernel  map[string]int64 // the server's TcpExt counters at the run's end (KernelCounters)
	// KernelLog is the same counters sampled during the download (nil:
	// not recorded).
	KernelLog []KernelSample
	SMax      map[string]int // the proxy's final ŝ_max per cell ID
	// SMaxRises is the proxy's --smax-log (nil: not recorded).
	SMaxRises []SMaxRise
	Cells     []emu.CellInfo // the cells' configured (scaled) buffers
	// Verdicts are the proxy's verdict counters over time (nil: not
	// recorded).
	Verdicts []VerdictSample
	// Episodes are the proxy's --prediction-log (nil: not recorded).
	Episodes []Episode
	// TunnelRTTms are the tunnel's own RTT samples (quic-go's latest RTT,
	// every 0.1 s; tunnel variants only).
	TunnelRTTms []float64
	// HostCPU is the host's CPU share over the run (host_cpu.json; nil:
	// not recorded).
	HostCPU *HostCPU
}

// Alignment places iperf3's intervals on the emulator's clock.
//
// iperf3 numbers its intervals from its own test start, and writes that
// start's wall time only to the second (start.timestamp.timesecs). The
// bench therefore timestamps every interval line of the receiving server
// as it reads it (the server runs with --forceflush, so a line is written
// when its interval ends). A line cannot be read before its interval ends,
// so arrival - end >= test start for every line, and
//
//	TestStartNs = min over lines of (arrival - end)
//
// overestimates the true start by the smallest print-to-read delay among
// all lines (scheduling, well under 1 ms on an idle core), and is off by
// at most ±5 ms more because the text output rounds interval ends to
// 0.01 s. Both clocks are CLOCK_REALTIME of the same kernel (network
// namespaces do not virtualise time), so OffsetS = TestStart - emulator
// start needs no further correction. The error is small against the
// 100 ms bins; LagP50S (the typical extra delay of a line) shows how
// loaded the machine was.
type Alignment struct {
	TestStartNs int64
	// OffsetS is the test start on the emulator's clock (seconds since the
	// emulator's start_unix_ns).
	OffsetS float64
	// SetupS is the time from launching the client to the test start
	// (connection set-up); negative would mean the estimate is wrong.
	SetupS float64
	// LagP50S is the median over lines of arrival - end - TestStart.
	LagP50S float64
	// CoarseDiffS is TestStart - start.timestamp.timesecs: within (-1, 2]
	// when the estimate agrees with iperf3's own 1 s timestamp.
	CoarseDiffS float64
}

// SetupToleranceS is how far before the client's launch Align accepts the
// estimated test start: the launch time and the arrival times are taken by
// different processes, so the estimate may come out a little early.
const SetupToleranceS = 0.01

// Align computes the alignment of one run (see Alignment).
func Align(recv []RecvInterval, launchNs, emuStartNs, timeSecs int64) (Alignment, error) {
	if len(recv) == 0 {
		return Alignment{}, errors.New("align: no receiver interval lines")
	}
	var a Alignment
	a.TestStartNs = math.MaxInt64
	for _, iv := range recv {
		if s := iv.ArrivalNs - int64(math.Round(iv.End*1e9)); s < a.TestStartNs {
			a.TestStartNs = s
		}
	}
	lags := make([]float64, len(recv))
	for i, iv := range recv {
		lags[i] = float64(iv.ArrivalNs-int64(math.Round(iv.End*1e9))-a.TestStartNs) / 1e9
	}
	a.LagP50S = Percentile(lags, 50)
	a.OffsetS = float64(a.TestStartNs-emuStartNs) / 1e9
	if launchNs > 0 {
		a.SetupS = float64(a.TestStartNs-launchNs) / 1e9
		if a.SetupS < -SetupToleranceS {
			return a, fmt.Errorf("align: test start %.3fs before the client was launched", -a.SetupS)
		}
	}
	if timeSecs > 0 {
		a.CoarseDiffS = float64(a.TestStartNs)/1e9 - float64(timeSecs)
	}
	return a, nil
}

// Bin is one receiver interval on the emulator's clock.
type Bin struct {
	T0, T1 float64 // seconds since the emulator started
	Bits   float64
}

// Mbps is the bin's goodput.
func (b Bin) Mbps() float64 { return b.Bits / (b.T1 - b.T0) / 1e6 }

// Bins shifts the receiver intervals by offset seconds onto the
// emulator's clock; zero-length intervals (iperf3's trailing 0.00 s line)
// are left out.
func Bins(recv []RecvInterval, offsetS float64) []Bin {
	out := make([]Bin, 0, len(recv))
	for _, iv := range recv {
		if iv.End-iv.Start <= 1e-9 {
			continue
		}
		out = append(out, Bin{T0: iv.Start + offsetS, T1: iv.End + offsetS, Bits: float64(iv.Bytes) * 8})
	}
	return out
}

// Goodput is total bits over total time, in Mbps (0 without bins).
func Goodput(bins []Bin) float64 {
	var bits, secs float64
	for _, b := range bins {
		bits += b.Bits
		secs += b.T1 - b.T0
	}
	if secs <= 0 {
		return 0
	}
	return bits / secs / 1e6
}

// TypeTally is the bits and seconds attributed to one handover type.
type TypeTally struct{ Bits, Secs float64 }

// Mbps is the tally's goodput (0 for an empty tally).
func (t TypeTally) Mbps() float64 {
	if t.Secs <= 0 {
		return 0
	}
	return t.Bits / t.Secs / 1e6
}

// ByType attributes each bin to the type of the last handover whose
// command came at or before the bin's midpoint (TypeNone before the
// first): the time after a handover's command is that handover's, until
// the next command. hos must be in command order.
func ByType(bins []Bin, hos []HandoverRow) map[string]TypeTally {
	out := map[string]TypeTally{}
	for _, b := range bins {
		mid := (b.T0 + b.T1) / 2
		k := sort.Search(len(hos), func(i int) bool { return hos[i].Command > mid })
		typ := TypeNone
		if k > 0 {
			typ = hos[k-1].Type
		}
		t := out[typ]
		t.Bits += b.Bits
		t.Secs += b.T1 - b.T0
		out[typ] = t
	}
	return out
}

// Convergence is the outcome for one handover.
type Convergence struct {
	Handover HandoverRow
	// Analyzed is false when random access completed outside the measured
	// bins (before iperf3 started or after it ended); such a handover has
	// no convergence value.
	Analyzed bool
	// Converged: some bin within the dwell reached ConvergenceFraction of
	// the new cell's capacity.
	Converged bool
	// Seconds from random-access completion to the end of the first bin
	// that reached the threshold; the dwell (RA to the next command, or to
	// the end of the data) when none did.
	Seconds float64
	Dwell   float64
}

// CapacityAt is the capacity.tsv row in force at emulator time t (the last
// row with T <= t), ok false before the first row.
func CapacityAt(caps []CapacityBin, t float64) (CapacityBin, bool) {
	k := sort.Search(len(caps), func(i int) bool { return caps[i].T > t })
	if k == 0 {
		return CapacityBin{}, false
	}
	return caps[k-1], true
}

// Converge computes each handover's convergence time.
//
// For handover h the candidate bins are those that lie wholly in its
// dwell: starting at or after h's random-access completion (RA) and ending
// at or before the next handover's command (or the end of the data). The
// first candidate whose goodput reaches frac x the capacity at the bin's
// midpoint (capacity.tsv: the serving cell, which in the dwell is h's
// target) converges h at bin end - RA. Bins where capacity.tsv says 0
// cannot be judged and are skipped. A handover with no such bin counts
// with its dwell and Converged=false. The 0.1 s binning makes every value
// a little late: by the gap from RA to the first bin start (< 0.1 s) plus
// the bin itself.
func Converge(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac float64) []Convergence {
	return ConvergeWindow(bins, caps, hos, frac, 1)
}

// convEps absorbs float error in the bins' and handovers' times.
const convEps = 1e-9

// convergeScan is the one convergence scan behind Converge,
// ConvergeWindow and ConvergeMeanCapacity. Handover h's dwell runs from
// its random access (RA) to the next command or the end of the data; a
// handover whose RA lies outside the bins is not analyzed. The candidate
// windows end at the bins from the first one starting at or after RA, in
// order, until one ends after the dwell; start gives the first bin of the
// window that ends at bin e (first: the first bin of the dwell; false: no
// window ends there). reach(h, next) returns the test of a window (nil:
// none can pass); the first window that passes converges h at its end −
// RA. None: the dwell, not converged.
func convergeScan(bins []Bin, hos []HandoverRow, start func(first, e int, ra float64) (int, bool), reach func(h HandoverRow, next float64) func([]Bin) bool) []Convergence {
	out := make([]Convergence, len(hos))
	if len(bins) == 0 {
		for i, h := range hos {
			out[i] = Convergence{Handover: h}
		}
		return out
	}
	dataStart, dataEnd := bins[0].T0, bins[len(bins)-1].T1
	for i, h := range hos {
		c := Convergence{Handover: h}
		next := dataEnd
		if i+1 < len(hos) && hos[i+1].Command < next {
			next = hos[i+1].Command
		}
		if h.RA < dataStart-convEps || h.RA >= dataEnd {
			out[i] = c
			continue
		}
		c.Analyzed = true
		c.Dwell = math.Max(0, next-h.RA)
		c.Seconds = c.Dwell
		if ok := reach(h, next); ok != nil {
			first := sort.Search(len(bins), func(k int) bool { return bins[k].T0 >= h.RA-convEps })
			for e := first; e < len(bins) && bins[e].T1 <= next+convEps; e++ {
				if s, has := start(first, e, h.RA); has && ok(bins[s:e+1]) {
					c.Converged, c.Seconds = true, bins[e].T1-h.RA
					break
				}
			}
		}
		out[i] = c
	}
	return out
}

// windowMbps is a window's goodput.
func windowMbps(win []Bin) float64 {
	var bits, secs float64
	for _, b := range win {
		bits += b.Bits
		secs += b.T1 - b.T0
	}
	return bits / secs / 1e6
}

// Percentile is the p-th percentile (0..100) of xs by linear
// interpolation between the closest ranks (numpy's default): rank
// p/100 x (n-1) of the sorted values. NaN for no values. xs is not
// modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	r := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(r))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	return s[lo] + (r-float64(lo))*(s[lo+1]-s[lo])
}

// Mean is the arithmetic mean (NaN for no values).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// RunResult is the analysis of one run.
type RunResult struct {
	Variant     string
	Index       int
	Align       Alignment
	Bins        []Bin
	GoodputMbps float64
	ByType      map[string]TypeTally
	Convergence []Convergence
	Retransmits int64
	RTTms       []float64 // per sender interval with an RTT sample
	TunnelRTTms []float64 // the QUIC tunnel's RTT samples (tunnel variants)
	HostCPU     *HostCPU  // the host's CPU over the run (nil: not recorded)
	Emu         EmulatorSummary
	Capacity    []CapacityBin
	Handovers   []HandoverRow
	KeptCell    []KeptCellCommand // RunData.KeptCell
	Episodes    []Episode         // RunData.Episodes
	// Problems make the run invalid (the emulator could not keep up, the
	// alignment failed its checks...).
	Problems []string

	Seed uint64
	// ConvergenceByWindow is the convergence per handover for each of
	// ConvergenceWindows, keyed "0.1s", "1s".
	ConvergenceByWindow map[string][]Convergence
	// SettleByWindow is the same scan at SettleFraction (Wave's switch
	// target), keyed like ConvergenceByWindow.
	SettleByWindow map[string][]Convergence
	HandoverStats  []HandoverStat
	Sysctls        Sysctls
	Kernel         map[string]int64
	SMax           map[string]int
	// SMaxOver is, per cell whose ŝ_max rose above its buffer, the rise
	// that first did (from the proxy's --smax-log).
	SMaxOver   []SMaxOver
	Cells      []emu.CellInfo
	Congestion string      // the sender's congestion control, from iperf3
	Cwnd       []CwndPoint // snd_cwnd per sender interval, emulator clock (sequence.go)
}

// Valid is true when nothing made the run invalid.
func (r RunResult) Valid() bool { return len(r.Problems) == 0 }

// AnalyzeRun turns one run's files into numbers. It fails only when the
// data cannot be placed in time at all; everything else that makes the
// run unusable is a Problem.
func AnalyzeRun(d RunData) (RunResult, error) {
	r := RunResult{Variant: d.Variant, Index: d.Index, Emu: d.Emu, Capacity: d.Capacity, Handovers: d.Handovers, KeptCell: d.KeptCell, Episodes: d.Episodes, TunnelRTTms: d.TunnelRTTms, HostCPU: d.HostCPU}
	a, err := Align(d.Recv, d.LaunchNs, d.Emu.StartUnixNS, d.Sender.TimeSecs)
	if err != nil {
		return r, fmt.Errorf("%s run %d: %w", d.Variant, d.Index+1, err)
	}
	r.Align = a
	r.Bins = Bins(d.Recv, a.OffsetS)
	r.GoodputMbps = Goodput(r.Bins)
	r.ByType = ByType(r.Bins, d.Handovers)
	r.Convergence = Converge(r.Bins, d.Capacity, d.Handovers, ConvergenceFraction)
	r.Seed, r.Sysctls, r.Kernel, r.SMax, r.Cells, r.Congestion = d.Seed, d.Sysctls, d.Kernel, d.SMax, d.Cells, d.Sender.Congestion
	r.ConvergenceByWindow = map[string][]Convergence{}
	r.SettleByWindow = map[string][]Convergence{}
	for _, n := range ConvergenceWindows {
		r.ConvergenceByWindow[windowName(n)] = ConvergeWindow(r.Bins, d.Capacity, d.Handovers, ConvergenceFraction, n)
		r.SettleByWindow[windowName(n)] = ConvergeWindow(r.Bins, d.Capacity, d.Handovers, SettleFraction, n)
	}
	r.HandoverStats = handoverStats(r, d)
	r.SMaxOver = smaxOver(d)
	for _, iv := range d.Sender.Intervals {
		r.Cwnd = append(r.Cwnd, CwndPoint{T: iv.End + a.OffsetS, Bytes: iv.CwndBytes})
		r.Retransmits += iv.Retransmits
		if iv.RTTus > 0 {
			r.RTTms = append(r.RTTms, float64(iv.RTTus)/1000)
		}
	}
	if !d.Emu.Valid {
		host := ""
		if d.HostCPU != nil {
			host = fmt.Sprintf(", host CPU stolen %.1f %%", d.HostCPU.StealPct)
		}
		r.Problems = append(r.Problems, fmt.Sprintf("emulator marked the run invalid (late_pct %.2f, max_late_ms %.1f%s)", d.Emu.LatePct, d.Emu.MaxLateMs, host))
	}
	if late, worst := signalLate(d.Verdicts); d.Emu.DurationS > 0 && late > MaxSignalLateShare*d.Emu.DurationS {
		r.Problems = append(r.Problems, fmt.Sprintf("the proxy saw its signalling more than %v late for %.1f s of the run (%.1f %%; worst %.0f ms): the controller acted on stale events",
			MaxSignalLag, late, 100*late/d.Emu.DurationS, worst))
	}
	if int64(len(d.Handovers)) != d.Emu.Handovers {
		r.Problems = append(r.Problems, fmt.Sprintf("handovers.tsv has %d rows, emulator.json says %d", len(d.Handovers), d.Emu.Handovers))
	}
	if a.OffsetS < 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("iperf3 started %.3fs before the emulator", -a.OffsetS))
	}
	if d.Sender.TimeSecs > 0 && (a.CoarseDiffS < -1.5 || a.CoarseDiffS > 3) {
		r.Problems = append(r.Problems, fmt.Sprintf("alignment disagrees with iperf3's timesecs by %.1fs", a.CoarseDiffS))
	}
	if len(r.Bins) == 0 {
		r.Problems = append(r.Problems, "no receiver intervals")
	} else if over := r.Bins[len(r.Bins)-1].T1 - d.Emu.DurationS; d.Emu.DurationS > 0 && over > OutlivedToleranceS {
		r.Problems = append(r.Problems, fmt.Sprintf("the download outlived the emulated link by %.2fs (the emulator ran %.2fs): what the receiver counted after that did not cross it", over, d.Emu.DurationS))
	}
	return r, nil
}

// MaxSignalLag and MaxSignalLateShare make a run invalid whose proxy saw
// its signalling events late (the verdict log's signal_lag_us: arrival
// less the emulator's own timestamp, same clock): more than MaxSignalLag
// for more than MaxSignalLateShare of the run. A report leads its command
// by 54 ms at the median (the XCAL logs), so an event 50 ms late is about
// a handover the controller can no longer prepare for. Found on the mixed
// drive at scale 1.0 (2026-12-04, m2ho seed 2): from 128 s on the proxy
// handled every event 3-5 s after the emulator sent it, the run was
// valid by every other check, and no clamp fired at any later handover.
// The emulator sends a burst's MAC slots when the burst ends, so lags of
// a burst's length are normal (a 30 s run of the same drive: at most
// 19 ms, 25 ticks at 10 ms or more).
const (
	MaxSignalLag       = 50 * time.Millisecond
	MaxSignalLateShare = 0.01
)

// signalLate is how long (seconds) the proxy's signalling lag stayed
// above MaxSignalLag, by its verdict log (each line's lag covers the time
// since the line before, at most a second), and the worst lag (ms).
func signalLate(vs []VerdictSample) (lateS, worstMs float64) {
	for i, v := range vs {
		worstMs = max(worstMs, float64(v.SignalLagUs)/1000)
		if i == 0 || time.Duration(v.SignalLagUs)*time.Microsecond <= MaxSignalLag {
			continue
		}
		lateS += min(float64(v.UnixNs-vs[i-1].UnixNs)/1e9, 1)
	}
	return lateS, worstMs
}

// OutlivedToleranceS is how far past the emulator's end AnalyzeRun lets
// the receiver's last interval end: the alignment's own error (a few
// milliseconds, see Alignment) with room to spare, far below a bin.
//
// Until 2026-12-03 the emulator ran a fixed 3 s past the download's -t
// and a bare veth took over when it ended: on high-bdp (600 ms RTT, a
// tunnel restart and iperf3's set-up taking ~4 s) the last ~2 s of every
// run crossed unshaped, the sender's queued megabytes at 300-700 Mbit/s.
const OutlivedToleranceS = 0.05

// SMaxOver is the rise that first put a cell's ŝ_max above its configured
// buffer, with the emulator's late deliveries in that second and the one
// before (late deliveries and input read late make the estimate err high:
// m2ho/queue.go).
type SMaxOver struct {
	SMaxRise
	BufferBytes int64 `json:"buffer_bytes"`
	EmuLate     int64 `json:"emu_late_near"`
}

// smaxOver finds, per cell with a configured buffer, the first logged
// rise of ŝ_max above it.
func smaxOver(d RunData) []SMaxOver {
	var out []SMaxOver
	seen := map[string]bool{}
	for _, x := range d.SMaxRises {
		if seen[x.Cell] {
			continue
		}
		var buf int64
		for _, c := range d.Cells {
			if c.ID == x.Cell {
				buf = c.BufferBytes
			}
		}
		if buf <= 0 || x.SMax <= buf {
			continue
		}
		seen[x.Cell] = true
		x.AtS = float64(x.UnixNs-d.Emu.StartUnixNS) / 1e9
		o := SMaxOver{SMaxRise: x, BufferBytes: buf}
		if lp := d.Emu.Loop; lp != nil {
			for _, ls := range lp.LateSeconds {
				if s := int(math.Floor(x.AtS)); ls.Second == s || ls.Second == s-1 {
					o.EmuLate += ls.Late
				}
			}
		}
		out = append(out, o)
	}
	return out
}
