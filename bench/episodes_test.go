package bench

import (
	"math"
	"strings"
	"testing"
)

// The proxy's --prediction-log as cmd/m2ho writes it, and every kind of
// bad line with the file, line and column named.
func TestReadPredLog(t *testing.T) {
	const head = "start_unix_ns\tend_unix_ns\tcommand_unix_ns\toutcome\ttype\ttarget\tserving\tclamp_B\treports\n"
	log := head +
		"1000000000\t1900000000\t1100000000\tconfirmed\thorizontal\tB\tsub6\t300000\tnr-a3a5\n" +
		"3000000000\t3500000000\t0\twithdrawn-timeout\tmmwave-to-sub6\t\tmmwave\t65536\tlte-b1+nr-a2\n"
	eps, err := ReadPredLog(strings.NewReader(log), "predictions.tsv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Episode{
		{StartNs: 1e9, EndNs: 1.9e9, CommandNs: 1.1e9, Outcome: "confirmed", Type: "horizontal", Target: "B", Serving: "sub6", Clamp: 300000, Reports: "nr-a3a5"},
		{StartNs: 3e9, EndNs: 3.5e9, Outcome: "withdrawn-timeout", Type: "mmwave-to-sub6", Serving: "mmwave", Clamp: 65536, Reports: "lte-b1+nr-a2"},
	}
	if len(eps) != len(want) || eps[0] != want[0] || eps[1] != want[1] {
		t.Fatalf("read %+v, want %+v", eps, want)
	}
	// A log from before the reports column (a bench re-read with
	// --reanalyze): the same episodes, reports unknown.
	const headV1 = "start_unix_ns\tend_unix_ns\tcommand_unix_ns\toutcome\ttype\ttarget\tserving\tclamp_B\n"
	old, err := ReadPredLog(strings.NewReader(headV1+"1000000000\t1900000000\t1100000000\tconfirmed\thorizontal\tB\tsub6\t300000\n"), "old.tsv")
	if w := want[0]; err != nil || len(old) != 1 || old[0].Reports != "" || old[0].Clamp != w.Clamp || old[0].Outcome != w.Outcome {
		t.Errorf("old header: %+v %v", old, err)
	}
	if eps, err := ReadPredLog(strings.NewReader(head), "p.tsv"); err != nil || eps == nil || len(eps) != 0 {
		t.Errorf("header only: %v %v, want no episodes, not nil", eps, err)
	}
	for _, tc := range []struct{ line, want string }{
		{"x\t2\t0\tconfirmed\th\tB\tsub6\t1\t-", "p.tsv:2: start_unix_ns"},
		{"1\t2\t-3\tconfirmed\th\tB\tsub6\t1\t-", "p.tsv:2: command_unix_ns"},
		{"1\t2\t0\tconfirmed\th\tB\tsub6\t1.5\t-", "p.tsv:2: clamp_B"},
		{"5\t2\t0\tconfirmed\th\tB\tsub6\t1\t-", "p.tsv:2: the episode ends"},
		{"5\t9\t3\tconfirmed\th\tB\tsub6\t1\t-", "p.tsv:2: the episode ends"},
		{"1\t2\t0\t\th\tB\tsub6\t1\t-", "p.tsv:2: outcome is empty"},
		{"1\t2\t0\tconfirmed\th\tB\tsub6\t1\t", "p.tsv:2: reports is empty"},
		{"1\t2\t0\tconfirmed\th\tB\tsub6\t1", "p.tsv:2: 8 fields"},
		{"1\t2\t0\tconfirmed", "p.tsv:2: 4 fields"},
	} {
		if _, err := ReadPredLog(strings.NewReader(head+tc.line+"\n"), "p.tsv"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.line, err, tc.want)
		}
	}
}

// An episode's gap is the variant's bits against the baseline's over the
// same intervals of the same repetition, split at the command, bins taken
// in proportion; a run without the log adds nothing.
func TestCompareEpisodes(t *testing.T) {
	const start = int64(1_000_000_000_000)
	bins := func(mbps func(t float64) float64) []Bin {
		var out []Bin
		for i := 0; i < 100; i++ { // 10 s
			t0 := float64(i) / 10
			out = append(out, Bin{T0: t0, T1: t0 + 0.1, Bits: mbps(t0) * 1e6 * 0.1})
		}
		return out
	}
	flat := bins(func(float64) float64 { return 100 })
	// The variant's clamp halves its rate from 2.0 to 2.5 s (withdrawn)
	// and from 5.0 s to its command at 5.1 s; after the command both
	// carry 100.
	held := bins(func(t float64) float64 {
		if t >= 2.0-1e-9 && t < 2.5-1e-9 || t >= 5.0-1e-9 && t < 5.1-1e-9 {
			return 50
		}
		return 100
	})
	ns := func(s float64) int64 { return start + int64(math.Round(s*1e9)) }
	eps := []Episode{
		{StartNs: ns(2.0), EndNs: ns(2.5), Outcome: "withdrawn-timeout", Type: "mmwave-to-sub6", Serving: "mmwave", Clamp: 1000, Reports: "nr-a2"},
		{StartNs: ns(5.0), EndNs: ns(5.6), CommandNs: ns(5.1), Outcome: "confirmed", Type: "mmwave-to-sub6", Serving: "mmwave", Clamp: 3000, Reports: "lte-b1"},
		// Before the download's first bin: nothing to compare, no row.
		{StartNs: start - 400_000_000, EndNs: start - 100_000_000, CommandNs: start - 300_000_000, Outcome: "confirmed", Type: "horizontal", Serving: "lte", Clamp: 65536},
		// Past its last bin: counted up to it (0.05 s).
		{StartNs: ns(9.95), EndNs: ns(10.5), Outcome: "withdrawn-a1", Type: "horizontal", Serving: "sub6", Clamp: 2000},
	}
	emu := EmulatorSummary{StartUnixNS: start}
	runs := []RunResult{
		{Variant: "pass", Index: 0, Bins: flat, Emu: emu},
		{Variant: "m2ho", Index: 0, Bins: held, Emu: emu, Episodes: eps},
		{Variant: "pass", Index: 1, Bins: flat, Emu: emu},
		{Variant: "m2ho", Index: 1, Bins: flat, Emu: emu}, // no log: not counted
	}
	s := Summary{Variants: []VariantSummary{{Name: "pass"}, {Name: "m2ho"}}}
	gaps := compareEpisodes(runs, s)
	if len(gaps) != 4 {
		t.Fatalf("%d gaps, want 4: %+v", len(gaps), gaps)
	}
	if g := gaps[3]; g.Serving != "sub6" || g.Outcome != "withdrawn-a1" || math.Abs(g.Seconds-0.05) > 1e-6 || math.Abs(g.VariantMbps-100) > 1e-6 || g.SharePct != 0 {
		t.Errorf("episode past the download's end: %+v, want 0.05 s at 100 Mbit/s in both", g)
	}
	gaps = gaps[:3]
	total := 100e6 * 10 // the baseline's bits in the one repetition with a log
	for i, w := range []struct {
		outcome, part string
		secs, vMbps   float64
		lostBits      float64
		clamp         int64
		reports       string
	}{
		{"confirmed", PartToCommand, 0.1, 50, 5e6, 3000, "lte-b1"},
		{"confirmed", PartAfter, 0.5, 100, 0, 3000, "lte-b1"},
		{"withdrawn-timeout", PartWhole, 0.5, 50, 25e6, 1000, "nr-a2"},
	} {
		g := gaps[i]
		if g.Variant != "m2ho" || g.Baseline != "pass" || g.Serving != "mmwave" || g.Type != "mmwave-to-sub6" || g.Outcome != w.outcome || g.Part != w.part || g.Count != 1 || g.MedianClampBytes != w.clamp || g.Reports != w.reports {
			t.Errorf("gap %d: %+v, want %s, %s, reports %s", i, g, w.outcome, w.part, w.reports)
			continue
		}
		if math.Abs(g.Seconds-w.secs) > 1e-6 || math.Abs(g.BaselineMbps-100) > 1e-6 || math.Abs(g.VariantMbps-w.vMbps) > 1e-6 ||
			math.Abs(g.SharePct+w.lostBits/total*100) > 1e-6 {
			t.Errorf("gap %d: %.3f s, %.2f against %.2f Mbit/s, share %.4f %%; want %.3f s, %.2f against 100, share %.4f %%",
				i, g.Seconds, g.VariantMbps, g.BaselineMbps, g.SharePct, w.secs, w.vMbps, -w.lostBits/total*100)
		}
	}
	if got := bitsIn(flat, 0.05, 0.25); math.Abs(got-20e6) > 1 {
		t.Errorf("bits in [0.05, 0.25): %.0f, want 2e7 (halves of two bins and one whole)", got)
	}
	var b strings.Builder
	writeEpisodes(&b, gaps)
	if !strings.Contains(b.String(), "| m2ho vs pass | mmwave | mmwave-to-sub6 | nr-a2 | withdrawn-timeout | whole | 1 | 0.5 | 1 | 100.0 | 50.0 | -2.50 % |") {
		t.Errorf("summary.md table:\n%s", b.String())
	}
}
