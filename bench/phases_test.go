package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/bench/emu"
)

// A drive A (sub-6) → M (mmWave) → N (mmWave) → A → B (sub-6, Eqn 2
// armed) → X (not a listed cell) → M; commands at 2, 5, 8, 11, 14, 17 s.
func phaseDrive() ([]HandoverRow, []emu.CellInfo) {
	hos := []HandoverRow{
		{Command: 8, From: "N", To: "A", Type: "mmwave-to-sub6"}, // out of order on purpose
		{Command: 2, From: "A", To: "M", Type: "sub6-to-mmwave"},
		{Command: 5, From: "M", To: "N", Type: "horizontal"},
		{Command: 11, From: "A", To: "B", Type: "horizontal"},
		{Command: 14, From: "B", To: "X", Type: "horizontal"},
		{Command: 17, From: "X", To: "M", Type: "sub6-to-mmwave"},
	}
	cells := []emu.CellInfo{{ID: "A", Type: "sub6"}, {ID: "B", Type: "sub6"}, {ID: "M", Type: "mmwave"}, {ID: "N", Type: "mmwave"}}
	return hos, cells
}

func TestPhaseOf(t *testing.T) {
	hos, cells := phaseDrive()
	types := map[string]string{}
	for _, c := range cells {
		types[c.ID] = c.Type
	}
	p := newPhaser(hos, nil, types)
	for _, tc := range []struct {
		t    float64
		want string
	}{
		{1.9, PhaseStart},
		{2, "sub-6 → mmWave, first 1 s"},
		{2.95, "sub-6 → mmWave, first 1 s"},
		{3.5, "sub-6 → mmWave, rest of the dwell"},
		{4.35, PhasePreCommand},
		{5.05, "mmWave → mmWave, first 1 s"},
		{8.5, "mmWave → sub-6, first 1 s"},
		{11.2, "sub-6 → sub-6 after mmWave, first 1 s"},
		{12.0, "sub-6 → sub-6 after mmWave, rest of the dwell"},
		{13.5, PhasePreCommand},
		{15, "horizontal (cell type unknown), rest of the dwell"},
		{17.5, "sub-6 → mmWave, first 1 s"},
		{30, "sub-6 → mmWave, rest of the dwell"}, // no next command: no pre-command phase
	} {
		if got := p.phase(tc.t); got != tc.want {
			t.Errorf("phase(%.2f) = %q, want %q", tc.t, got, tc.want)
		}
	}
	// A horizontal sub-6 handover before any mmWave is not "after mmWave".
	p2 := newPhaser([]HandoverRow{{Command: 1, To: "B", Type: "horizontal"}}, nil, types)
	if got := p2.phase(1.5); got != "sub-6 → sub-6, first 1 s" {
		t.Errorf("sub-6 horizontal without mmWave before: %q", got)
	}
}

// The variant loses half its bits in the first second after the mmWave →
// mmWave handover and nothing elsewhere: that phase carries the whole
// change, the others none, and the shares add up to the goodput change.
// A repetition only one variant ran is left out.
func TestComparePhases(t *testing.T) {
	hos, cells := phaseDrive()
	bins := func(lose func(mid float64) bool) []Bin {
		var out []Bin
		for i := range 200 { // 0-20 s
			b := Bin{T0: float64(i) / 10, T1: float64(i+1) / 10, Bits: 100}
			if lose((b.T0 + b.T1) / 2) {
				b.Bits = 50
			}
			out = append(out, b)
		}
		return out
	}
	none := func(float64) bool { return false }
	mm := func(m float64) bool { return m >= 5 && m < 6 }
	runs := []RunResult{
		{Variant: "pass", Index: 0, Bins: bins(none), Handovers: hos, Cells: cells},
		{Variant: "m2ho", Index: 0, Bins: bins(mm), Handovers: hos, Cells: cells},
		{Variant: "m2ho", Index: 1, Bins: bins(func(float64) bool { return true }), Handovers: hos, Cells: cells},
	}
	s := Summary{Variants: []VariantSummary{{Name: "m2ho"}, {Name: "pass"}}}
	gaps := comparePhases(runs, s)
	if len(gaps) == 0 {
		t.Fatal("no phases")
	}
	var sum float64
	for _, g := range gaps {
		if g.Variant != "m2ho" || g.Baseline != "pass" || g.Pairs != 1 {
			t.Fatalf("gap %+v: want m2ho against pass over 1 pair", g)
		}
		sum += g.SharePct
		want := 0.0
		if g.Phase == "mmWave → mmWave, first 1 s" {
			want = -10 * 50.0 / (200 * 100) * 100 // -2.5 %
			if g.SecondsPerRun < 0.99 || g.SecondsPerRun > 1.01 || math.Abs(g.BaselineMbps-1e-3) > 1e-9 || math.Abs(g.VariantMbps-0.5e-3) > 1e-9 {
				t.Errorf("mmWave → mmWave first 1 s: %+v", g)
			}
		}
		if math.Abs(g.SharePct-want) > 1e-9 {
			t.Errorf("%s: share %.4f %%, want %.4f %%", g.Phase, g.SharePct, want)
		}
	}
	if math.Abs(sum+2.5) > 1e-9 {
		t.Errorf("shares add up to %.4f %%, want -2.5 %% (the goodput change)", sum)
	}
	var b strings.Builder
	writePhases(&b, gaps)
	if !strings.Contains(b.String(), "| m2ho vs pass | mmWave → mmWave, first 1 s | 1.0 | 0.0 | 0.0 | -2.50 % |") ||
		!strings.Contains(b.String(), "| m2ho vs pass | all | | | | -2.50 % |") {
		t.Errorf("summary.md table:\n%s", b.String())
	}
}

// An anchor handover that keeps the data cell takes 0.3 s before its
// command to 1 s after, by the cell's type, over whatever dwell or
// pre-command phase it overlaps; the time outside it keeps its phase, and
// the baseline run's kept commands classify both runs.
func TestPhaseAroundKeptCell(t *testing.T) {
	hos, cells := phaseDrive()
	types := map[string]string{}
	for _, c := range cells {
		types[c.ID] = c.Type
	}
	kept := []KeptCellCommand{{T: 12.5, Type: "sub6"}, {T: 6, Type: "mmwave"}} // out of order on purpose
	p := newPhaser(hos, kept, types)
	for _, tc := range []struct {
		t    float64
		want string
	}{
		{5.65, "mmWave → mmWave, first 1 s"},
		{5.75, PhaseAnchorMmWave},
		{6.0, PhaseAnchorMmWave},
		{6.95, PhaseAnchorMmWave},
		{7.05, "mmWave → mmWave, rest of the dwell"},
		{12.15, "sub-6 → sub-6 after mmWave, rest of the dwell"},
		{12.25, PhaseAnchorSub6},
		{13.45, PhaseAnchorSub6}, // would be the pre-command phase
		{13.55, PhasePreCommand},
	} {
		if got := p.phase(tc.t); got != tc.want {
			t.Errorf("phase(%.2f) = %q, want %q", tc.t, got, tc.want)
		}
	}

	// A variant that loses half its bits in the mmWave one: its 13 bins
	// (5.75-6.95 s by midpoint) carry the whole change.
	bins := func(lose bool) []Bin {
		var out []Bin
		for i := range 200 {
			b := Bin{T0: float64(i) / 10, T1: float64(i+1) / 10, Bits: 100}
			if m := (b.T0 + b.T1) / 2; lose && m >= 5.7 && m < 7 {
				b.Bits = 50
			}
			out = append(out, b)
		}
		return out
	}
	runs := []RunResult{
		{Variant: "pass", Index: 0, Bins: bins(false), Handovers: hos, KeptCell: kept, Cells: cells},
		{Variant: "m2ho", Index: 0, Bins: bins(true), Handovers: hos, Cells: cells}, // its own list is not read
	}
	gaps := comparePhases(runs, Summary{Variants: []VariantSummary{{Name: "pass"}, {Name: "m2ho"}}})
	var got float64
	for _, g := range gaps {
		if g.Phase == PhaseAnchorMmWave {
			got = g.SharePct
			if math.Abs(g.SecondsPerRun-1.3) > 1e-9 {
				t.Errorf("%s: %.2f s per run, want 1.3", g.Phase, g.SecondsPerRun)
			}
		} else if g.SharePct != 0 {
			t.Errorf("%s: share %.4f %%, want 0", g.Phase, g.SharePct)
		}
	}
	if want := -13 * 50.0 / (200 * 100) * 100; math.Abs(got-want) > 1e-9 {
		t.Errorf("anchor mmWave share %.4f %%, want %.4f %%", got, want)
	}
}
