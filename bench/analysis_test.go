package bench

import (
	"math"
	"strings"
	"testing"
)

const tol = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// convFixture: cell a (100 Mbps) until the command at 2.0 s, interrupted
// 2.0-2.1, cell b (200 Mbps) until the command at 6.0, interrupted
// 6.0-6.1, cell c (100 Mbps) to the end. Bins are 0.1 s long starting at
// 0.03 s (the iperf3 start is not on the emulator's 0.1 s grid).
func convFixture(mbps func(t0 float64) float64) ([]Bin, []CapacityBin, []HandoverRow) {
	var caps []CapacityBin
	for k := 0; k < 100; k++ {
		t := float64(k) / 10
		c := CapacityBin{T: t, Mbps: 100, Cell: "a", Type: "sub6"}
		switch {
		case k == 20 || k == 60:
			c.Mbps = 0
		case k > 20 && k < 60:
			c = CapacityBin{T: t, Mbps: 200, Cell: "b", Type: "mmwave"}
		case k > 60:
			c.Cell = "c"
		}
		caps = append(caps, c)
	}
	hos := []HandoverRow{
		{Report: 1.8, Command: 2.0, RA: 2.06, From: "a", To: "b", Type: "sub6-to-mmwave"},
		{Report: 5.85, Command: 6.0, RA: 6.06, From: "b", To: "c", Type: "mmwave-to-sub6"},
	}
	var bins []Bin
	for k := 0; k < 95; k++ {
		t0 := 0.03 + float64(k)/10
		bins = append(bins, Bin{T0: t0, T1: t0 + 0.1, Bits: mbps(t0) * 1e6 * 0.1})
	}
	return bins, caps, hos
}

func TestConverge(t *testing.T) {
	tests := []struct {
		name string
		mbps func(t0 float64) float64
		// want per handover: converged, seconds
		conv [2]bool
		secs [2]float64
	}{
		{
			// h1: the first bin wholly after RA 2.06 is [2.13, 2.23);
			// 2.33-2.43 is the first at >= 150 (75 % of 200): 2.43-2.06.
			// h2: [6.13, 6.23) reaches 75 (75 % of 100) at once.
			name: "both converge",
			mbps: func(t0 float64) float64 {
				switch {
				case t0 > 2.3 && t0 < 6:
					return 150
				case t0 > 2 && t0 < 2.3:
					return 149
				}
				return 80
			},
			conv: [2]bool{true, true}, secs: [2]float64{2.43 - 2.06, 6.23 - 6.06},
		},
		{
			// h1 never reaches 150 before the next command: its dwell
			// 6.0-2.06 counts, even though the bin [5.93, 6.03) that
			// straddles the next command is fast. h2 never reaches 75
			// before the data ends at 9.53.
			name: "dwell cap, straddling bin ignored",
			mbps: func(t0 float64) float64 {
				if t0 > 5.9 && t0 < 6.0 {
					return 1000
				}
				return 70
			},
			conv: [2]bool{false, false}, secs: [2]float64{6.0 - 2.06, 9.53 - 6.06},
		},
		{
			// Exactly 75 % counts as reached.
			name: "threshold inclusive",
			mbps: func(t0 float64) float64 {
				if t0 > 2 && t0 < 6 {
					return 150
				}
				return 75
			},
			conv: [2]bool{true, true}, secs: [2]float64{2.23 - 2.06, 6.23 - 6.06},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bins, caps, hos := convFixture(tc.mbps)
			got := Converge(bins, caps, hos, ConvergenceFraction)
			if len(got) != 2 {
				t.Fatalf("%d results, want 2", len(got))
			}
			for i, c := range got {
				if !c.Analyzed || c.Converged != tc.conv[i] || !near(c.Seconds, tc.secs[i]) {
					t.Errorf("handover %d: analyzed %v converged %v after %.4fs, want converged %v after %.4fs",
						i, c.Analyzed, c.Converged, c.Seconds, tc.conv[i], tc.secs[i])
				}
				if c.Seconds > c.Dwell+tol {
					t.Errorf("handover %d: %.4fs exceeds its dwell %.4fs", i, c.Seconds, c.Dwell)
				}
			}
		})
	}
}

func TestConvergeSkipsZeroCapacityAndOutsideData(t *testing.T) {
	bins, caps, hos := convFixture(func(float64) float64 { return 0 })
	// Capacity 0 for the whole second dwell: nothing can be judged, so
	// h2 does not converge (0 >= 0.75*0 must not count).
	for i := range caps {
		if caps[i].T > 6 {
			caps[i].Mbps = 0
		}
	}
	hos = append(hos, HandoverRow{Report: 9.8, Command: 9.9, RA: 9.96, From: "c", To: "a", Type: "horizontal"})
	got := Converge(bins, caps, hos, ConvergenceFraction)
	if got[1].Converged || !got[1].Analyzed {
		t.Errorf("h2 over zero capacity: %+v, want analyzed and not converged", got[1])
	}
	// h3's command 9.9 is after the data's end 9.53, which bounds h2's dwell.
	if !near(got[1].Seconds, 9.53-6.06) {
		t.Errorf("h2 dwell %.4f, want %.4f", got[1].Seconds, 9.53-6.06)
	}
	if got[2].Analyzed {
		t.Errorf("h3 with RA 9.96 after the data's end 9.53 was analyzed: %+v", got[2])
	}
	if g := Converge(nil, caps, hos, ConvergenceFraction); g[0].Analyzed {
		t.Error("analyzed without bins")
	}
}

func TestByType(t *testing.T) {
	// Ten bins of 0.1 s; bin k carries (k+1) Mbit. Commands at 0.34 and
	// 0.69: midpoints 0.05-0.25 are none, 0.35-0.65 horizontal,
	// 0.75-0.95 sub6-to-mmwave.
	var bins []Bin
	for k := range 10 {
		bins = append(bins, Bin{T0: float64(k) / 10, T1: float64(k+1) / 10, Bits: float64(k+1) * 1e6})
	}
	hos := []HandoverRow{
		{Command: 0.34, RA: 0.4, Type: "horizontal"},
		{Command: 0.69, RA: 0.75, Type: "sub6-to-mmwave"},
	}
	got := ByType(bins, hos)
	want := map[string]float64{TypeNone: 6.0 / 0.3, "horizontal": 22.0 / 0.4, "sub6-to-mmwave": 27.0 / 0.3}
	if len(got) != len(want) {
		t.Fatalf("types %v, want %v", got, want)
	}
	for k, w := range want {
		if !near(got[k].Mbps(), w) {
			t.Errorf("%s: %.4f Mbps, want %.4f", k, got[k].Mbps(), w)
		}
	}
	if g := Goodput(bins); !near(g, 55.0/1.0) {
		t.Errorf("goodput %.4f, want 55", g)
	}
	if g := (TypeTally{}).Mbps(); g != 0 {
		t.Errorf("empty tally %v", g)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {50, 2.5}, {95, 3.85}, {100, 4}, {25, 1.75}} {
		if g := Percentile(xs, tc.p); !near(g, tc.want) {
			t.Errorf("p%v = %v, want %v", tc.p, g, tc.want)
		}
	}
	if xs[0] != 4 {
		t.Error("Percentile sorted its input")
	}
	if g := Percentile([]float64{7}, 95); g != 7 {
		t.Errorf("single value: %v", g)
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Mean(nil)) {
		t.Error("empty input must give NaN")
	}
	if g := Mean(xs); g != 2.5 {
		t.Errorf("mean %v", g)
	}
}

func TestAlign(t *testing.T) {
	const emuStart = int64(1_700_000_000_000_000_000)
	start := emuStart + 500_000_000 // the test really began 0.5 s after the emulator
	lagsNs := []int64{3_000_000, 1_000_000, 2_000_000}
	var recv []RecvInterval
	for k, lag := range lagsNs {
		end := float64(k+1) / 10
		recv = append(recv, RecvInterval{Start: end - 0.1, End: end, Bytes: 1000,
			ArrivalNs: start + int64(math.Round(end*1e9)) + lag})
	}
	launch := start - 200_000_000
	a, err := Align(recv, launch, emuStart, start/1e9)
	if err != nil {
		t.Fatal(err)
	}
	// The smallest lag (1 ms) is the estimate's error.
	if a.TestStartNs != start+1_000_000 {
		t.Errorf("test start %d, want %d", a.TestStartNs, start+1_000_000)
	}
	if !near(a.OffsetS, 0.501) || !near(a.SetupS, 0.201) || !near(a.LagP50S, 0.001) {
		t.Errorf("offset %v setup %v lag %v, want 0.501 0.201 0.001", a.OffsetS, a.SetupS, a.LagP50S)
	}
	if a.CoarseDiffS < 0 || a.CoarseDiffS > 1 {
		t.Errorf("coarse diff %v", a.CoarseDiffS)
	}
	bins := Bins(append(recv, RecvInterval{Start: 0.3, End: 0.3}), a.OffsetS)
	if len(bins) != 3 || !near(bins[0].T0, 0.501) || !near(bins[2].T1, 0.801) {
		t.Errorf("bins %+v: want 3 (zero-length dropped) from 0.501 to 0.801", bins)
	}
	if _, err := Align(recv, start+time1s, emuStart, 0); err == nil || !strings.Contains(err.Error(), "before the client was launched") {
		t.Errorf("launch after the start: %v", err)
	}
	if _, err := Align(nil, 0, emuStart, 0); err == nil {
		t.Error("no lines: want an error")
	}
}

const time1s = int64(1_000_000_000)

func TestAnalyzeRun(t *testing.T) {
	d := synthRun("m2ho", 0, synthOpts{})
	r, err := AnalyzeRun(d)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Valid() {
		t.Fatalf("problems: %v", r.Problems)
	}
	var retx int64
	for _, iv := range d.Sender.Intervals {
		retx += iv.Retransmits
	}
	if r.Retransmits != retx || retx == 0 {
		t.Errorf("retransmits %d, want %d (> 0)", r.Retransmits, retx)
	}
	if len(r.RTTms) != len(d.Sender.Intervals) || !near(r.RTTms[0], float64(d.Sender.Intervals[0].RTTus)/1000) {
		t.Errorf("rtt samples %d (first %v), want %d in ms", len(r.RTTms), r.RTTms[0], len(d.Sender.Intervals))
	}
	// The synthetic lines arrive 0.2 ms after their interval ends.
	if !near(r.Align.OffsetS, synthOffsetS+0.0002) {
		t.Errorf("offset %v, want %v", r.Align.OffsetS, synthOffsetS)
	}

	bad := synthRun("pass", 0, synthOpts{})
	bad.Emu.Valid = false
	bad.Emu.Handovers++
	r, err = AnalyzeRun(bad)
	if err != nil {
		t.Fatal(err)
	}
	if r.Valid() || len(r.Problems) != 2 {
		t.Errorf("invalid emulator and handover mismatch: problems %q", r.Problems)
	}

	// A receiver that counted past the emulator's end: its last bins did
	// not cross the emulated link (high-bdp's unshaped tail).
	long := synthRun("quic", 0, synthOpts{})
	r, _ = AnalyzeRun(long)
	end := r.Bins[len(r.Bins)-1].T1
	for _, tc := range []struct {
		emuS    float64
		outlive bool
	}{{end + 0.01, false}, {end - 0.01, false}, {end - 0.2, true}, {end - 2.1, true}} {
		d := synthRun("quic", 0, synthOpts{})
		d.Emu.DurationS = tc.emuS
		r, err := AnalyzeRun(d)
		if err != nil {
			t.Fatal(err)
		}
		got := len(r.Problems) == 1 && strings.Contains(r.Problems[0], "outlived the emulated link")
		if got != tc.outlive || (!tc.outlive && !r.Valid()) {
			t.Errorf("emulator ran %.2fs, the last bin ends at %.2fs: problems %q, want outlived %v", tc.emuS, end, r.Problems, tc.outlive)
		}
	}
}
