package bench

import (
	"fmt"
	"math"
	"strings"
)

// Issue 9's measured requirement, over mmWave → sub-6 → mmWave sequences:
// the server's cwnd stays at or above SequenceCwndKeep of its mmWave value
// through the sub-6 dwell, and throughput reaches ConvergenceFraction of
// the mmWave capacity within SequenceReturnS of the return (M2HO
// MobiCom'24 §4.5: Eqn 2 carries the mmWave window through the sub-6
// dwell so that the flow is at full speed as soon as it is back).
const (
	SequenceCwndKeep = 0.9
	SequenceReturnS  = 1.0
)

// CwndPoint is the sender's snd_cwnd at the end of one iperf3 interval, on
// the emulator's clock (seconds since it started).
type CwndPoint struct {
	T     float64
	Bytes int64
}

// Sequence is one mmWave → sub-6 → mmWave sequence of a run: a handover
// from mmWave to sub-6 (Down), any horizontal handovers between sub-6
// cells, and the next handover back to mmWave (Up).
type Sequence struct {
	Down, Up int     // indices into the run's handover rows
	Hops     int     // horizontal sub-6 handovers in between
	CommandS float64 // Down's command
	ReturnS  float64 // Up's random access
	// MmWaveCwnd is the snd_cwnd of the last interval ending at or before
	// Down's command; MinCwnd the least snd_cwnd of the intervals ending
	// after it and at or before Up's command (the handover into sub-6 and
	// the whole dwell). CwndJudged is false when either has no interval.
	MmWaveCwnd, MinCwnd int64
	// CutS is the end of the first interval in the dwell whose snd_cwnd
	// was under SequenceCwndKeep × MmWaveCwnd (0: none), where a miss on
	// the cwnd is to be looked for.
	CutS       float64
	CwndJudged bool
	CwndKept   bool // MinCwnd ≥ SequenceCwndKeep × MmWaveCwnd
	// ConvergenceS is Up's convergence at the 0.1 s window (Converge:
	// from its random access to the first 0.1 s bin at ConvergenceFraction
	// of the capacity of the mmWave cell); Recovered is whether it came
	// within SequenceReturnS. ReturnJudged is false when Up's dwell has
	// no data, or when it ends (the next command) less than
	// SequenceReturnS after the return without having converged: the
	// requirement allows a second, and a dwell of 0.94 s that never
	// reached 75 % was given less (Converge counts it with its dwell,
	// which is no convergence time).
	ConvergenceS float64
	ReturnJudged bool
	Recovered    bool
	// Met: judged on both counts and both hold.
	Met bool
	// Reached: in the mmWave dwell before Down (from the random access
	// of the handover into that cell, or the data's start, to Down's
	// command) some 0.1 s bin reached ConvergenceFraction of the serving
	// cell's capacity. A flow that never got there on mmWave had not
	// built the window for it, and a receiver window can only lower a
	// sender's limit: keeping the cwnd through the sub-6 dwell brings it
	// there after the return only if the return cell is slower or the
	// sender grows in the second. The requirement is judged over all
	// sequences; Reached tells the misses a window proxy could have
	// prevented from those it mostly could not.
	Reached bool
}

// Judged reports whether both halves of the requirement could be judged.
func (s Sequence) Judged() bool { return s.CwndJudged && s.ReturnJudged }

// Sequences finds every mmWave → sub-6 → mmWave sequence in a run's
// handover rows (in command order) and judges it against the cwnd series
// and the receiver's 0.1 s bins with the capacity of the serving cell.
// Pure: the same inputs give the same sequences.
func Sequences(hos []HandoverRow, cwnd []CwndPoint, bins []Bin, caps []CapacityBin) []Sequence {
	var out []Sequence
	var conv []Convergence
	for i := 0; i < len(hos); i++ {
		if hos[i].Type != "mmwave-to-sub6" {
			continue
		}
		j, hops := i+1, 0
		for j < len(hos) && hos[j].Type == "horizontal" {
			j, hops = j+1, hops+1
		}
		if j >= len(hos) || hos[j].Type != "sub6-to-mmwave" {
			continue // the run ends on sub-6, or the next leaves sub-6 otherwise
		}
		if conv == nil {
			conv = Converge(bins, caps, hos, ConvergenceFraction)
		}
		s := Sequence{Down: i, Up: j, Hops: hops, CommandS: hos[i].Command, ReturnS: hos[j].RA}
		const eps = 1e-9
		haveBefore, haveDwell := false, false
		for _, p := range cwnd {
			switch {
			case p.T <= hos[i].Command+eps:
				s.MmWaveCwnd, haveBefore = p.Bytes, true
			case p.T <= hos[j].Command+eps:
				if !haveDwell || p.Bytes < s.MinCwnd {
					s.MinCwnd = p.Bytes
				}
				haveDwell = true
			}
		}
		s.CwndJudged = haveBefore && haveDwell && s.MmWaveCwnd > 0
		for _, p := range cwnd {
			if s.CwndJudged && p.T > hos[i].Command+eps && p.T <= hos[j].Command+eps && float64(p.Bytes) < SequenceCwndKeep*float64(s.MmWaveCwnd) {
				s.CutS = p.T
				break
			}
		}
		s.CwndKept = s.CwndJudged && float64(s.MinCwnd) >= SequenceCwndKeep*float64(s.MmWaveCwnd)
		if c := conv[j]; c.Analyzed {
			s.ConvergenceS = c.Seconds
			s.Recovered = c.Converged && c.Seconds <= SequenceReturnS+eps
			s.ReturnJudged = s.Recovered || c.Dwell >= SequenceReturnS-eps
		}
		s.Met = s.Judged() && s.CwndKept && s.Recovered
		from := math.Inf(-1)
		if i > 0 {
			from = hos[i-1].RA
		}
		s.Reached = reachedBefore(bins, caps, from, hos[i].Command)
		out = append(out, s)
	}
	return out
}

// reachedBefore reports whether a 0.1 s bin lying wholly in [from, to]
// carried ConvergenceFraction of the capacity at its midpoint (bins at
// capacity 0 cannot count).
func reachedBefore(bins []Bin, caps []CapacityBin, from, to float64) bool {
	const eps = 1e-9
	for _, b := range bins {
		if b.T0 < from-eps || b.T1 > to+eps {
			continue
		}
		if c, ok := CapacityAt(caps, (b.T0+b.T1)/2); ok && c.Mbps > 0 && b.Mbps() >= ConvergenceFraction*c.Mbps {
			return true
		}
	}
	return false
}

// SequenceSummary is a variant's tally of the requirement over its runs:
// Fraction = Met / Judged (0 when none was judged).
type SequenceSummary struct {
	Variant   string  `json:"variant"`
	Sequences int     `json:"sequences"`
	Judged    int     `json:"judged"`
	CwndKept  int     `json:"cwnd_kept"`
	Recovered int     `json:"recovered"`
	Met       int     `json:"met"`
	Fraction  float64 `json:"fraction"`
	// Reached counts the judged sequences whose flow had reached 75 %
	// of the mmWave capacity before leaving it (Sequence.Reached), and
	// MetReached those of them that met the requirement.
	Reached    int `json:"reached_before"`
	MetReached int `json:"met_of_reached"`
	// Rows are the sequences, with the run (1-based) each is from.
	Rows []SequenceRow `json:"rows,omitempty"`
}

// SequenceRow is one judged sequence in summary.json.
type SequenceRow struct {
	Run        int     `json:"run"`
	CommandS   float64 `json:"command_s"`
	ReturnS    float64 `json:"return_s"`
	Hops       int     `json:"hops"`
	MmWaveCwnd int64   `json:"mmwave_cwnd_bytes"`
	MinCwnd    int64   `json:"min_cwnd_bytes"`
	CutS       float64 `json:"first_cut_s,omitempty"`
	ConvS      float64 `json:"return_convergence_s"`
	CwndKept   bool    `json:"cwnd_kept"`
	Recovered  bool    `json:"recovered"`
	Met        bool    `json:"met"`
	Reached    bool    `json:"reached_before"`
	// Judged: both halves could be judged (only judged rows count).
	Judged bool `json:"judged"`
}

// summarizeSequences tallies each variant's runs (order of variants).
func summarizeSequences(runs []RunResult, variants []string) []SequenceSummary {
	var out []SequenceSummary
	for _, v := range variants {
		ss := SequenceSummary{Variant: v}
		for _, r := range runs {
			if r.Variant != v {
				continue
			}
			for _, s := range Sequences(r.Handovers, r.Cwnd, r.Bins, r.Capacity) {
				ss.Sequences++
				ss.Rows = append(ss.Rows, SequenceRow{Run: r.Index + 1, CommandS: s.CommandS, ReturnS: s.ReturnS, Hops: s.Hops,
					MmWaveCwnd: s.MmWaveCwnd, MinCwnd: s.MinCwnd, CutS: s.CutS, ConvS: s.ConvergenceS, CwndKept: s.CwndKept, Recovered: s.Recovered, Met: s.Met, Reached: s.Reached, Judged: s.Judged()})
				if !s.Judged() {
					continue
				}
				ss.Judged++
				ss.CwndKept += b2i(s.CwndKept)
				ss.Recovered += b2i(s.Recovered)
				ss.Met += b2i(s.Met)
				ss.Reached += b2i(s.Reached)
				ss.MetReached += b2i(s.Met && s.Reached)
			}
		}
		if ss.Judged > 0 {
			ss.Fraction = float64(ss.Met) / float64(ss.Judged)
		}
		out = append(out, ss)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeSequences is summary.md's section on the requirement.
func writeSequences(b *strings.Builder, ss []SequenceSummary) {
	if len(ss) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## mmWave → sub-6 → mmWave sequences (issue 9's requirement: ≥ 80 %%)\n\n"+
		"Met: the sender's snd_cwnd stayed ≥ %.0f %% of its value before the command into sub-6 in every interval up to the command back, "+
		"and a 0.1 s bin reached %.0f %% of the mmWave capacity within %.0f s of the return's random access. "+
		"Reached before: the judged sequences whose flow had a 0.1 s bin at %.0f %% of the capacity in the mmWave dwell before it left "+
		"(the others had not built the window for it, which a receiver window cannot raise); met of them in the last column.\n\n",
		SequenceCwndKeep*100, ConvergenceFraction*100, SequenceReturnS, ConvergenceFraction*100)
	b.WriteString("| variant | sequences | judged | cwnd kept | recovered ≤ 1 s | met | fraction | reached before | met of reached |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range ss {
		frac := "-"
		if s.Judged > 0 && !math.IsNaN(s.Fraction) {
			frac = fmt.Sprintf("%.0f %%", s.Fraction*100)
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %s | %d | %d |\n", s.Variant, s.Sequences, s.Judged, s.CwndKept, s.Recovered, s.Met, frac, s.Reached, s.MetReached)
	}
	var missed strings.Builder
	for _, s := range ss {
		for _, r := range s.Rows {
			if !r.Judged || r.Met {
				continue
			}
			cut := "-"
			if r.CutS > 0 {
				cut = fmt.Sprintf("%.1f", r.CutS)
			}
			fmt.Fprintf(&missed, "| %s | %d | %.2f | %.2f | %d | %d | %d | %s | %.2f | %s |\n", s.Variant, r.Run, r.CommandS, r.ReturnS, r.Hops,
				r.MmWaveCwnd/1000, r.MinCwnd/1000, cut, r.ConvS, yesNo(r.Reached))
		}
	}
	if missed.Len() > 0 {
		b.WriteString("\nThe judged sequences that missed: into sub-6 at the command, back at the return's random access (s, emulator clock); " +
			"horizontal hops between; snd_cwnd before the command and its least in the dwell (KB); the first 0.1 s interval under 90 % of it; " +
			"the return's convergence (0.1 s window); reached 75 % on mmWave before.\n\n" +
			"| variant | run | command (s) | return (s) | hops | cwnd (KB) | least (KB) | first under 90 % (s) | return conv (s) | reached before |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		b.WriteString(missed.String())
	}
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

func variantNames(vs []Variant) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}
