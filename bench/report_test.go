package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
)

// Convergence over a 1 s window: ten 0.1 s bins from RA at 1.0 s,
// capacity 100 Mbps. Bins 1.0–1.5 carry 100 Mbps, 1.5–2.0 carry 50: no
// single bin after 1.5 reaches 75, but every 1 s window starting at or
// before 1.5 averages ≥ 75 ... the first, [1.0, 2.0), averages 75
// exactly and converges at 2.0 − 1.0 = 1.0 s. With one bin the first
// bin (1.0–1.1) converges at 0.1 s.
func TestConvergeWindow(t *testing.T) {
	var bins []Bin
	for k := 0; k < 30; k++ {
		mbps := 100.0
		if k >= 15 {
			mbps = 50
		}
		t0 := float64(k) / 10
		bins = append(bins, Bin{T0: t0, T1: t0 + 0.1, Bits: mbps * 1e6 * 0.1})
	}
	caps := []CapacityBin{{T: 0, Mbps: 100}}
	hos := []HandoverRow{{Report: 0.8, Command: 0.95, RA: 1.0, Type: "horizontal"}}
	c1 := ConvergeWindow(bins, caps, hos, 0.75, 1)
	c10 := ConvergeWindow(bins, caps, hos, 0.75, 10)
	if !c1[0].Converged || math.Abs(c1[0].Seconds-0.1) > 1e-9 {
		t.Fatalf("0.1 s window: %+v", c1[0])
	}
	if !c10[0].Converged || math.Abs(c10[0].Seconds-1.0) > 1e-9 {
		t.Fatalf("1 s window: %+v", c10[0])
	}
	// RA at 1.5: only 50 Mbps bins follow, no window reaches 75: the
	// dwell (1.5 s to the end of the data at 3.0).
	hos[0].RA = 1.5
	c10 = ConvergeWindow(bins, caps, hos, 0.75, 10)
	if c10[0].Converged || math.Abs(c10[0].Seconds-1.5) > 1e-9 || !c10[0].Analyzed {
		t.Fatalf("1 s window, not converged: %+v", c10[0])
	}
}

func TestPairedRatio(t *testing.T) {
	// Ratios 2 and 2: ratio 2, no spread.
	r, lo, hi, per := PairedRatio([]float64{2, 4}, []float64{1, 2})
	if math.Abs(r-2) > 1e-12 || math.Abs(lo-2) > 1e-12 || math.Abs(hi-2) > 1e-12 || len(per) != 2 {
		t.Fatalf("ratio %v [%v, %v] %v", r, lo, hi, per)
	}
	// Ratios 2 and 4: log-ratios ln 2, ln 4; mean 1.5·ln 2 → 2^1.5 =
	// 2.8284; s = ln 2/√2; half-width t(1) = 12.706 × s/√2 = 12.706 ×
	// ln 2 / 2 = 4.4035; CI exp(1.0397 ± 4.4035) = [0.0346, 231.1].
	r, lo, hi, _ = PairedRatio([]float64{2, 8}, []float64{1, 2})
	if math.Abs(r-math.Pow(2, 1.5)) > 1e-9 {
		t.Fatalf("ratio %v", r)
	}
	h := 12.706 * math.Ln2 / 2
	if math.Abs(lo-math.Exp(1.5*math.Ln2-h)) > 1e-9 || math.Abs(hi-math.Exp(1.5*math.Ln2+h)) > 1e-9 {
		t.Fatalf("CI [%v, %v]", lo, hi)
	}
	// One pair: no interval; a zero value is left out.
	if r, lo, hi, per := PairedRatio([]float64{3, 0}, []float64{2, 5}); r != 1.5 || lo != 0 || hi != 0 || len(per) != 1 {
		t.Fatalf("one pair: %v [%v, %v] %v", r, lo, hi, per)
	}
}

func TestParseNetstat(t *testing.T) {
	in := "TcpExt: SyncookiesSent TCPLossUndo TCPDSACKUndo TCPTimeouts\nTcpExt: 0 3 7 1\nIpExt: InNoRoutes\nIpExt: 5\n"
	m, err := ParseNetstat(strings.NewReader(in), "n", KernelCounters)
	if err != nil || m["TCPLossUndo"] != 3 || m["TCPDSACKUndo"] != 7 || m["TCPTimeouts"] != 1 || len(m) != 3 {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseNetstat(strings.NewReader("TcpExt: A B\nTcpExt: 1\n"), "n", KernelCounters); err == nil || !strings.Contains(err.Error(), "n:2") {
		t.Fatalf("short line: %v", err)
	}
}

// The per-handover row: cwnd at the last sender interval ending by the
// command and at the first ending 1 s after RA, on the emulator's clock
// (sender time + offset 2.0 s).
func TestHandoverStats(t *testing.T) {
	var ivs []SenderInterval
	for k := range 40 {
		ivs = append(ivs, SenderInterval{Start: float64(k) / 10, End: float64(k+1) / 10, CwndBytes: int64(1000 * (k + 1))})
	}
	d := RunData{Variant: "m2ho", Index: 1, Seed: 7, Sender: Iperf3Sender{Intervals: ivs},
		Handovers: []HandoverRow{{Report: 2.9, Command: 3.0, RA: 3.06, From: "a", To: "b", Type: "horizontal", OverflowDrops: 12, FlushedHoles: 2}}}
	r := RunResult{Align: Alignment{OffsetS: 2.0}}
	hs := handoverStats(r, d)
	// Command 3.0 = sender 1.0: interval ending at 1.0 is k=9 → 10000.
	// RA + 1 = 4.06 = sender 2.06: first end ≥ 2.06 is 2.1, k=20 → 21000.
	if len(hs) != 1 || hs[0].CwndBefore != 10000 || hs[0].CwndAfter1s != 21000 || hs[0].OverflowDrops != 12 || hs[0].FlushedHoles != 2 || hs[0].Run != 2 || hs[0].Seed != 7 {
		t.Fatalf("%+v", hs)
	}
	if hs[0].Actions != nil {
		t.Fatalf("actions without a verdict log: %+v", hs[0].Actions)
	}
	// The verdict log, emulator start at 1e9 ns: counters (clamp, eqn2,
	// suppressed) 5/0/1 at 2.0 s (before the report at 2.9: not this
	// handover's), 25/0/4 at 3.1 s, 40/0/9 at 3.2 s (RA 3.06 + 0.2 =
	// 3.26 closes the span), 40/300/9 at 8 s. Clamp 40 − 5 = 35,
	// suppressed 9 − 1 = 8, Eqn 2 (to the end: no next report) 300.
	d.Emu.StartUnixNS = 1e9
	d.Verdicts = []VerdictSample{
		{UnixNs: 3e9, Clamp: 5, Suppressions: 1},
		{UnixNs: 4.1e9, Clamp: 25, Suppressions: 4},
		{UnixNs: 4.2e9, Clamp: 40, Suppressions: 9},
		{UnixNs: 9e9, Clamp: 40, Eqn2: 300, Suppressions: 9, Release: 12},
	}
	hs = handoverStats(r, d)
	if a := hs[0].Actions; a == nil || *a != (HandoverActions{Clamp: 35, Suppressions: 8, Eqn2: 300, Release: 12}) || a.Fired() != "clamp+suppression+eqn2+release" {
		t.Fatalf("actions %+v", a)
	}
}

func TestReadVerdictLog(t *testing.T) {
	vs, err := ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\n17\t1\t2\t3\n"), "v")
	if err != nil || len(vs) != 1 || vs[0] != (VerdictSample{UnixNs: 17, Clamp: 1, Eqn2: 2, Suppressions: 3}) {
		t.Fatalf("%+v %v", vs, err)
	}
	if _, err := ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\n17\tx\t2\t3\n"), "v"); err == nil || !strings.Contains(err.Error(), "v:2") {
		t.Fatalf("bad count: %v", err)
	}
	// Today's log has the release column.
	vs, err = ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\n17\t1\t2\t3\t4\n"), "v")
	if err != nil || len(vs) != 1 || vs[0] != (VerdictSample{UnixNs: 17, Clamp: 1, Eqn2: 2, Suppressions: 3, Release: 4}) {
		t.Fatalf("with release: %+v %v", vs, err)
	}
	if _, err := ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\n17\t1\t2\t3\n"), "v"); err == nil || !strings.Contains(err.Error(), "v:2") {
		t.Fatalf("a row short of the release column: %v", err)
	}
	// And the signalling lag, which is no counter: it may fall.
	vs, err = ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\tsignal_lag_us\n17\t1\t2\t3\t4\t90000\n18\t1\t2\t3\t4\t12\n"), "v")
	if err != nil || len(vs) != 2 || vs[0] != (VerdictSample{UnixNs: 17, Clamp: 1, Eqn2: 2, Suppressions: 3, Release: 4, SignalLagUs: 90000}) || vs[1].SignalLagUs != 12 {
		t.Fatalf("with the signalling lag: %+v %v", vs, err)
	}
	// Two logs in one file (a proxy restarted onto the same path): the
	// counters start again.
	if _, err := ReadVerdictLog(strings.NewReader("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\n17\t5\t2\t3\n18\t1\t0\t0\n"), "v"); err == nil || !strings.Contains(err.Error(), "v:3") {
		t.Fatalf("counters going back: %v", err)
	}
}

func FuzzReadVerdictLog(f *testing.F) {
	f.Add("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\n17\t1\t2\t3\n18\t1\t3\t3\n")
	f.Add("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\n17\t1\t2\t3\t4\n")
	f.Add("unix_ns\tclamp_rewrites\teqn2_rewrites\tsuppressed_acks\trelease_rewrites\tsignal_lag_us\n17\t1\t2\t3\t4\t5\n")
	f.Fuzz(func(t *testing.T, s string) {
		vs, err := ReadVerdictLog(strings.NewReader(s), "v")
		if err != nil {
			return
		}
		for i := 1; i < len(vs); i++ {
			a, b := vs[i-1], vs[i]
			if b.UnixNs < a.UnixNs || b.Clamp < a.Clamp || b.Eqn2 < a.Eqn2 || b.Suppressions < a.Suppressions || b.Release < a.Release {
				t.Fatalf("accepted a log going back: %+v then %+v", a, b)
			}
		}
	})
}

// A cell's ŝ_max is judged as a lower bound on the valid runs too: an
// estimate above the buffer from a run the emulator marked late is listed
// apart (exceeds, not exceeds_in_valid_runs) and starred in summary.md with
// the valid runs' largest beside it.
func TestCellSMaxValidRuns(t *testing.T) {
	cells := []emu.CellInfo{{ID: "n261-b", Type: "mmwave", BufferBytes: 695_400}, {ID: "n77-a", Type: "sub6", BufferBytes: 416_100}}
	runs := []RunResult{
		{Variant: "m2ho", Index: 0, Cells: cells, SMax: map[string]int{"n261-b": 718_208, "n77-a": 390_000}, Problems: []string{"emulator marked the run invalid (late_pct 1.05)"}},
		{Variant: "m2ho", Index: 1, Cells: cells, SMax: map[string]int{"n261-b": 661_832, "n77-a": 420_000}},
	}
	s := Summarize(runs, Meta{Scenario: "x", Repeat: 2, Variants: []Variant{{Name: "m2ho"}}})
	byID := map[string]CellSMax{}
	for _, c := range s.Cells {
		byID[c.ID] = c
	}
	b, a := byID["n261-b"], byID["n77-a"]
	if b.SMaxBytes["m2ho"] != 718_208 || b.SMaxValidBytes["m2ho"] != 661_832 || len(b.Exceeds) != 1 || len(b.ExceedsInValidRuns) != 0 {
		t.Errorf("n261-b: %+v: want 718 208 over all runs (exceeds), 661 832 over the valid one (no exceedance)", b)
	}
	if a.SMaxValidBytes["m2ho"] != 420_000 || len(a.ExceedsInValidRuns) != 1 {
		t.Errorf("n77-a: %+v: the valid run's 420 000 exceeds 416 100", a)
	}
	var md strings.Builder
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| n261-b | mmwave | 695400 | 718208* (661832) |") || !strings.Contains(md.String(), "| n77-a | sub6 | 416100 | 420000 |") {
		t.Errorf("summary.md cells:\n%s", md.String())
	}
	// Only the invalid run estimated the cell: no valid figure, not 0.
	runs[1].SMax = map[string]int{"n77-a": 400_000}
	md.Reset()
	if err := Summarize(runs, Meta{Scenario: "x", Repeat: 2, Variants: []Variant{{Name: "m2ho"}}}).WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| n261-b | mmwave | 695400 | 718208* (–) |") {
		t.Errorf("summary.md cells, no valid estimate:\n%s", md.String())
	}
}

// signalLate adds up the time the proxy's signalling lag stayed above
// MaxSignalLag (each line covering the time since the one before, at most
// a second) and keeps the worst lag: 3 s late for 20 ms of ticks, then a
// line after a 5 s gap counts 1 s; lags at or under the limit count
// nothing.
func TestSignalLate(t *testing.T) {
	ms := func(v int64) int64 { return v * 1e6 }
	lagUs := uint64(3_000_000)
	vs := []VerdictSample{
		{UnixNs: ms(0)},
		{UnixNs: ms(10), SignalLagUs: lagUs},
		{UnixNs: ms(20), SignalLagUs: lagUs},
		{UnixNs: ms(30), SignalLagUs: uint64(MaxSignalLag / time.Microsecond)},
		{UnixNs: ms(5030), SignalLagUs: 4_000_000},
	}
	late, worst := signalLate(vs)
	if math.Abs(late-1.02) > 1e-9 || worst != 4000 {
		t.Errorf("late %.3f s, worst %.0f ms; want 1.020 s, 4000 ms", late, worst)
	}
	if late, worst := signalLate(vs[:1]); late != 0 || worst != 0 {
		t.Errorf("one line: late %v, worst %v", late, worst)
	}
}

// The proxy's --smax-log says when and from what a cell's ŝ_max rose
// above its buffer: the first such rise per cell and run, on the
// emulator's clock, with the emulator's late deliveries of that second
// and the one before, in summary.json and summary.md; rises under the
// buffer and later ones of the same cell are not listed.
func TestSMaxOverFromLog(t *testing.T) {
	const start = int64(1_800_000_000_000_000_000)
	log := "unix_ns\tcell\ttype\tsmax_B\twait_us\treceived_B\tserved_B\tbusy_us\traw_B\n" +
		fmt.Sprintf("%d\tn261-b\tmmwave\t600000\t5000\t600000\t610000\t30000\t650000\n", start+10_500_000_000) +
		fmt.Sprintf("%d\tn261-b\tmmwave\t700000\t5600\t710000\t700000\t41500\t800000\n", start+12_250_000_000) +
		fmt.Sprintf("%d\tn261-b\tmmwave\t720000\t5700\t730000\t720000\t42000\t800000\n", start+12_260_000_000) +
		fmt.Sprintf("%d\tn77-a\tsub6\t400000\t30000\t400000\t400000\t50000\t410000\n", start+20_000_000_000)
	rises, err := ReadSMaxLog(strings.NewReader(log), "smax.tsv")
	if err != nil || len(rises) != 4 {
		t.Fatalf("ReadSMaxLog: %d rises, %v", len(rises), err)
	}
	cells := []emu.CellInfo{{ID: "n261-b", Type: "mmwave", BufferBytes: 695_400}, {ID: "n77-a", Type: "sub6", BufferBytes: 416_100}}
	d := RunData{Variant: "m2ho", Cells: cells, SMaxRises: rises, Emu: EmulatorSummary{StartUnixNS: start,
		Loop: &emu.LoopProfile{LateSeconds: []emu.LateSecond{{Second: 11, Late: 7}, {Second: 12, Late: 5}, {Second: 13, Late: 100}}}}}
	over := smaxOver(d)
	if len(over) != 1 {
		t.Fatalf("smaxOver: %+v, want n261-b's first rise above 695 400 alone", over)
	}
	if o := over[0]; o.Cell != "n261-b" || o.SMax != 700_000 || o.BufferBytes != 695_400 || math.Abs(o.AtS-12.25) > 1e-9 || o.EmuLate != 12 || o.WaitUs != 5600 || o.BusyUs != 41_500 {
		t.Fatalf("smaxOver: %+v", o)
	}
	runs := []RunResult{{Variant: "m2ho", Index: 1, Cells: cells, SMax: map[string]int{"n261-b": 720_000}, SMaxOver: over}}
	s := Summarize(runs, Meta{Scenario: "x", Repeat: 1, Variants: []Variant{{Name: "m2ho"}}})
	var b CellSMax
	for _, c := range s.Cells {
		if c.ID == "n261-b" {
			b = c
		}
	}
	if len(b.Over) != 1 || b.Over[0].Run != 2 || !b.Over[0].Valid || b.Over[0].SMax != 700_000 {
		t.Fatalf("summary cell: %+v", b)
	}
	js, err := json.Marshal(b)
	if err != nil || !strings.Contains(string(js), `"over":[{"variant":"m2ho","run":2,"valid":true,"at_s":12.25,"cell":"n261-b","type":"mmwave","smax_bytes":700000,`) {
		t.Fatalf("summary.json cell: %s (%v)", js, err)
	}
	var md strings.Builder
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "- n261-b rose above its buffer in m2ho run 2 at 12.25 s: ŝ_max 700000 of 695400 B, from a segment that waited 5.6 ms (received 710000, served 700000 B since it joined the queue; the cell busy for 41.5 ms; largest single sample 800000 B); emulator late deliveries in that second and the one before: 12.") {
		t.Fatalf("summary.md:\n%s", md.String())
	}
	// Bad input names the file, line and column.
	if _, err := ReadSMaxLog(strings.NewReader(strings.Replace(log, "700000\t5600", "7e5\t5600", 1)), "smax.tsv"); err == nil || !strings.Contains(err.Error(), "smax.tsv:3: smax_B") {
		t.Fatalf("bad smax_B: %v", err)
	}
}

// ReadSMaxLog never panics, and what it accepts has the header's columns.
func FuzzReadSMaxLog(f *testing.F) {
	f.Add("unix_ns\tcell\ttype\tsmax_B\twait_us\treceived_B\tserved_B\tbusy_us\traw_B\n17\tn77-a\tsub6\t1\t2\t3\t4\t5\t6\n")
	f.Add("unix_ns\tcell\ttype\tsmax_B\twait_us\treceived_B\tserved_B\tbusy_us\traw_B\n17\t\t\t-1\t2\t3\n")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ReadSMaxLog(strings.NewReader(s), "s")
		if err != nil {
			return
		}
		for _, r := range rs {
			if strings.ContainsAny(r.Cell+r.Type, "\t\n") {
				t.Fatalf("a field with a separator: %+v", r)
			}
		}
	})
}
