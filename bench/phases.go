package bench

import (
	"fmt"
	"sort"
	"strings"
)

// PhaseGap is where a variant's bytes went against the baseline's over one
// phase of the drive (Summary.Phases): the bits each received in the
// phase's 0.1 s bins, summed over the repetitions both have. A variant
// that loses on the whole often loses in one kind of dwell and gains in
// another; the goodput ratio alone does not say which, and a change to
// the controller is judged by the phase it was for.
type PhaseGap struct {
	Variant  string `json:"variant"`
	Baseline string `json:"baseline"`
	Phase    string `json:"phase"`
	// Pairs is the number of repetitions both variants ran.
	Pairs int `json:"pairs"`
	// SecondsPerRun is the phase's length in the baseline's runs, per run.
	SecondsPerRun float64 `json:"seconds_per_run"`
	// BaselineMbps and VariantMbps are each one's goodput in the phase.
	BaselineMbps float64 `json:"baseline_mbps"`
	VariantMbps  float64 `json:"variant_mbps"`
	// SharePct is the variant's bits less the baseline's in the phase, in
	// percent of the baseline's bits over its whole runs: the phases'
	// shares add up to the variant's goodput change.
	SharePct float64 `json:"share_pct"`
}

// Phases, in the order the summary lists them. A bin belongs to the phase
// of its midpoint: before the first handover command; the last
// phaseBefore seconds before a command, once the dwell is at least
// phaseFirst old (where a prediction's clamp acts: reports come 30-150 ms
// before the command, predictions withdrawn later up to a few hundred ms);
// else the dwell the last command began, by its handover's kind, its
// first phaseFirst seconds apart from the rest. A sub-6 → sub-6 handover
// after mmWave → sub-6 with no return to mmWave between is a kind of its
// own: M2HO's Eqn 2 is armed in those dwells.
//
// The time around an LTE anchor handover that keeps the data cell
// (KeptCellCommand), from anchorBefore before its command to anchorAfter
// after, is a phase of its own by the cell's type, whatever else it
// overlaps: the LTE report before it comes tens of ms ahead, the link
// pauses for ~50 ms, and M2HO's clamp is held until random access.
const (
	phaseBefore  = 0.7 // s
	phaseFirst   = 1.0 // s
	anchorBefore = 0.3 // s
	anchorAfter  = 1.0 // s

	PhaseStart        = "before the first handover"
	PhasePreCommand   = "0.7 s before a command"
	PhaseAnchorMmWave = "anchor handover keeping an mmWave cell, 0.3 s before to 1 s after"
	PhaseAnchorSub6   = "anchor handover keeping a sub-6 cell, 0.3 s before to 1 s after"
)

// Handover kinds of the phases (phaseKind).
var phaseKinds = []string{"sub-6 → sub-6", "sub-6 → sub-6 after mmWave", "mmWave → mmWave", "horizontal (cell type unknown)", "sub-6 → mmWave", "mmWave → sub-6"}

// phaseNames lists every phase in the summary's order.
func phaseNames() []string {
	out := []string{PhaseStart}
	for _, k := range phaseKinds {
		out = append(out, k+", first 1 s", k+", rest of the dwell")
	}
	return append(out, PhaseAnchorMmWave, PhaseAnchorSub6, PhasePreCommand)
}

// phaser classifies times of one run's schedule.
type phaser struct {
	cmd  []float64 // command times, ascending
	kind []string  // the kind of each handover
	kept []KeptCellCommand
}

// newPhaser reads a run's handovers and kept-cell commands (any order)
// and its cells' types (cell ID → "mmwave" or "sub6"; a horizontal
// handover to a cell not listed is of unknown type).
func newPhaser(hos []HandoverRow, kept []KeptCellCommand, cellType map[string]string) phaser {
	hs := append([]HandoverRow(nil), hos...)
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].Command < hs[j].Command })
	var p phaser
	p.kept = append([]KeptCellCommand(nil), kept...)
	sort.SliceStable(p.kept, func(i, j int) bool { return p.kept[i].T < p.kept[j].T })
	armed := false
	for _, h := range hs {
		k := "horizontal (cell type unknown)"
		switch h.Type {
		case "sub6-to-mmwave":
			k, armed = "sub-6 → mmWave", false
		case "mmwave-to-sub6":
			k, armed = "mmWave → sub-6", true
		default:
			switch cellType[h.To] {
			case "mmwave":
				k = "mmWave → mmWave"
			case "sub6":
				k = "sub-6 → sub-6"
				if armed {
					k = "sub-6 → sub-6 after mmWave"
				}
			}
		}
		p.cmd, p.kind = append(p.cmd, h.Command), append(p.kind, k)
	}
	return p
}

// phase is the phase of time t (seconds on the emulator's clock).
func (p phaser) phase(t float64) string {
	// The last kept-cell command at or before t + anchorBefore.
	if k := sort.Search(len(p.kept), func(i int) bool { return p.kept[i].T > t+anchorBefore }); k > 0 && t < p.kept[k-1].T+anchorAfter {
		if p.kept[k-1].Type == "mmwave" {
			return PhaseAnchorMmWave
		}
		return PhaseAnchorSub6
	}
	i := sort.SearchFloat64s(p.cmd, t) // first command at or after t
	if i < len(p.cmd) && p.cmd[i] == t {
		i++
	}
	if i == 0 {
		return PhaseStart
	}
	since := t - p.cmd[i-1]
	if i < len(p.cmd) && since >= phaseFirst && p.cmd[i]-t < phaseBefore {
		return PhasePreCommand
	}
	if since < phaseFirst {
		return p.kind[i-1] + ", first 1 s"
	}
	return p.kind[i-1] + ", rest of the dwell"
}

// phaseTally is bits and seconds per phase.
type phaseTally struct{ bits, secs map[string]float64 }

func tallyPhases(r RunResult, p phaser) phaseTally {
	t := phaseTally{bits: map[string]float64{}, secs: map[string]float64{}}
	for _, b := range r.Bins {
		ph := p.phase((b.T0 + b.T1) / 2)
		t.bits[ph] += b.Bits
		t.secs[ph] += b.T1 - b.T0
	}
	return t
}

// comparePhases is each variant's PhaseGap against the baseline, by phase,
// over the repetitions both ran. Both runs of a repetition are classified
// by the baseline run's schedule (the same seed draws the same one; the
// baseline's is the reference where the logs differ at the very end).
func comparePhases(runs []RunResult, s Summary) []PhaseGap {
	if len(s.Variants) < 2 {
		return nil
	}
	base := s.Variants[baseline(s)].Name
	byRep := runsByRep(runs)
	var out []PhaseGap
	for _, v := range s.Variants {
		if v.Name == base {
			continue
		}
		bb, vb, secs := map[string]float64{}, map[string]float64{}, map[string]float64{}
		vsecs := map[string]float64{}
		var total float64
		pairs := 0
		for i, rb := range byRep[base] {
			rv, ok := byRep[v.Name][i]
			if !ok {
				continue
			}
			pairs++
			types := map[string]string{}
			for _, c := range rb.Cells {
				types[c.ID] = c.Type
			}
			p := newPhaser(rb.Handovers, rb.KeptCell, types)
			tb, tv := tallyPhases(rb, p), tallyPhases(rv, p)
			for ph, x := range tb.bits {
				bb[ph] += x
				total += x
			}
			for ph, x := range tb.secs {
				secs[ph] += x
			}
			for ph, x := range tv.bits {
				vb[ph] += x
			}
			for ph, x := range tv.secs {
				vsecs[ph] += x
			}
		}
		if pairs == 0 || total <= 0 {
			continue
		}
		for _, ph := range phaseNames() {
			if secs[ph] == 0 && vsecs[ph] == 0 {
				continue
			}
			g := PhaseGap{Variant: v.Name, Baseline: base, Phase: ph, Pairs: pairs,
				SecondsPerRun: secs[ph] / float64(pairs), SharePct: (vb[ph] - bb[ph]) / total * 100}
			if secs[ph] > 0 {
				g.BaselineMbps = bb[ph] / secs[ph] / 1e6
			}
			if vsecs[ph] > 0 {
				g.VariantMbps = vb[ph] / vsecs[ph] / 1e6
			}
			out = append(out, g)
		}
	}
	return out
}

// writePhases is summary.md's table of Summary.Phases.
func writePhases(b *strings.Builder, gaps []PhaseGap) {
	if len(gaps) == 0 {
		return
	}
	b.WriteString("\n## Where the bytes went\n\nEach variant against the baseline, summed over the repetitions both ran (both classified by the baseline run's schedule): the receiver's 0.1 s bins by the phase of their midpoint. A dwell is the time from a handover command to the next, by the handover's kind (\"sub-6 → sub-6 after mmWave\": no return to mmWave since an mmWave → sub-6, where M2HO's Eqn 2 holds the window), its first 1 s apart; \"0.7 s before a command\" takes the end of each dwell at least 1 s old, where a predicted handover's clamp acts; an LTE anchor handover that keeps the data cell (the link pauses from its command to random access) takes 0.3 s before its command to 1 s after, whatever else that overlaps. Share: the variant's bits less the baseline's in the phase, in % of the baseline's bits over the whole runs (the shares add up to the goodput change).\n\n")
	b.WriteString("| variant | phase | s per run | baseline Mbit/s | variant Mbit/s | share |\n|---|---|---:|---:|---:|---:|\n")
	sum := map[string]float64{}
	var order []string
	for _, g := range gaps {
		key := g.Variant + " vs " + g.Baseline
		if _, ok := sum[key]; !ok {
			order = append(order, key)
		}
		sum[key] += g.SharePct
		fmt.Fprintf(b, "| %s | %s | %.1f | %.1f | %.1f | %+.2f %% |\n", key, g.Phase, g.SecondsPerRun, g.BaselineMbps, g.VariantMbps, g.SharePct)
	}
	for _, k := range order {
		fmt.Fprintf(b, "| %s | all | | | | %+.2f %% |\n", k, sum[k])
	}
}

// KeptCellTally is one variant's LTE anchor handovers that kept the data
// cell of one type, over its runs: how many, and the emulator's downlink
// tail drops from anchorBefore before each command to anchorAfter after.
// Where the emulator pauses the link at them (a ~50 ms stop with the
// queue kept), a sender with more in flight than the cell's buffer
// overflows it there; M2HO clamps to the cell's own ŝ_max from the LTE
// report to random access.
type KeptCellTally struct {
	Variant   string `json:"variant"`
	Type      string `json:"type"` // "mmwave", "sub6"
	Commands  int    `json:"commands"`
	WithDrops int    `json:"with_drops"` // commands with a drop in the window
	Drops     int64  `json:"drops"`
	// Unknown counts commands whose run had no drop log.
	Unknown int `json:"unknown,omitempty"`
}

// tallyKeptCell is KeptCellTally per variant (in order) and type.
func tallyKeptCell(runs []RunResult, variants []string) []KeptCellTally {
	var out []KeptCellTally
	for _, v := range variants {
		by := map[string]*KeptCellTally{}
		for _, r := range runs {
			if r.Variant != v {
				continue
			}
			for _, k := range r.KeptCell {
				t := by[k.Type]
				if t == nil {
					t = &KeptCellTally{Variant: v, Type: k.Type}
					by[k.Type] = t
				}
				t.Commands++
				switch {
				case k.Drops < 0:
					t.Unknown++
				case k.Drops > 0:
					t.WithDrops++
					t.Drops += k.Drops
				}
			}
		}
		for _, ty := range []string{"mmwave", "sub6"} {
			if t := by[ty]; t != nil {
				out = append(out, *t)
				delete(by, ty)
			}
		}
		rest := make([]string, 0, len(by))
		for ty := range by {
			rest = append(rest, ty)
		}
		sort.Strings(rest)
		for _, ty := range rest {
			out = append(out, *by[ty])
		}
	}
	return out
}

// writeKeptCell is summary.md's table of Summary.KeptCell; paused says
// whether the emulator paused the link at them.
func writeKeptCell(b *strings.Builder, ts []KeptCellTally, paused bool) {
	if len(ts) == 0 {
		return
	}
	how := "the emulator replayed them as signalling only (--anchor-pause=false)"
	if paused {
		how = "the emulator paused the link from each command to its random access, the queue kept"
	}
	fmt.Fprintf(b, "\n## LTE anchor handovers that keep the data cell\n\nNot handovers of the data path (no row in the per-handover table); %s. Drops: the emulator's downlink tail drops from %.1f s before each command to %.0f s after, summed over the variant's runs.\n\n", how, anchorBefore, anchorAfter)
	b.WriteString("| variant | cell type | commands | with drops | drops |\n|---|---|---:|---:|---:|\n")
	for _, t := range ts {
		with := fmt.Sprintf("%d", t.WithDrops)
		if t.Unknown > 0 {
			with += fmt.Sprintf(" (%d without a drop log)", t.Unknown)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %d |\n", t.Variant, t.Type, t.Commands, with, t.Drops)
	}
}
