package bench

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// checkOutputs asserts what every bench output directory must satisfy:
// the files exist, summary.json has the schema's names, and summary.md
// shows the same numbers. It returns the decoded summary.
func checkOutputs(t *testing.T, dir string, repeat int) Summary {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "scale", "handovers", "valid", "variants", "emulator"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary.json lacks %q", k)
		}
	}
	for _, v := range m["variants"].([]any) {
		for _, k := range []string{"name", "runs", "goodput_mbps", "goodput_mbps_by_type", "convergence_s_mean",
			"convergence_s_p50", "retransmits", "rtt_ms_p50", "rtt_ms_p95"} {
			if _, ok := v.(map[string]any)[k]; !ok {
				t.Errorf("summary.json variant lacks %q", k)
			}
		}
	}
	for _, k := range []string{"late_pct", "overflow_drops", "reorder_flushes", "false_alarms"} {
		if _, ok := m["emulator"].(map[string]any)[k]; !ok {
			t.Errorf("summary.json emulator lacks %q", k)
		}
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Variants {
		if v.Runs != repeat {
			t.Errorf("%s: %d runs, want %d", v.Name, v.Runs, repeat)
		}
	}
	// handovers == rows of every run's handovers.tsv.
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*", emuSubdir, "handovers.tsv"))
	if len(runs) != repeat*len(s.Variants) {
		t.Errorf("%d run directories, want %d", len(runs), repeat*len(s.Variants))
	}
	for _, p := range runs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		hos, err := ReadHandovers(f, p)
		f.Close()
		if err != nil || len(hos) != s.Handovers {
			t.Errorf("%s: %d rows (%v), summary says %d handovers", p, len(hos), err, s.Handovers)
		}
	}
	checkMarkdown(t, dir, s)
	for _, p := range []string{PlotThroughput, PlotConvergence, PlotByType} {
		checkPNG(t, filepath.Join(dir, p))
	}
	return s
}

// checkMarkdown reads the table of summary.md back and compares every
// cell with summary.json at the table's precision.
func checkMarkdown(t *testing.T, dir string, s Summary) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(md)
	if !strings.Contains(text, "scale: "+strconv.FormatFloat(s.Scale, 'g', -1, 64)) {
		t.Errorf("summary.md does not print the scale %v", s.Scale)
	}
	if strings.Contains(text, "INVALID") == s.Valid {
		t.Errorf("summary.md validity disagrees with valid=%v", s.Valid)
	}
	if !strings.Contains(text, s.CommandLine) {
		t.Error("summary.md lacks the command line")
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells[1:]
	}
	base := baseline(s)
	checked := 0
	for _, r := range mdRows(s) {
		cells, ok := rows[r.label]
		if !slices.ContainsFunc(s.Variants, r.has) {
			if ok {
				t.Errorf("summary.md has row %q, which applies to no variant", r.label)
			}
			continue
		}
		if !ok {
			t.Errorf("summary.md lacks row %q", r.label)
			continue
		}
		if len(cells) != 2*len(s.Variants)-1 {
			t.Errorf("row %q has %d cells, want %d", r.label, len(cells), 2*len(s.Variants)-1)
			continue
		}
		for i, v := range s.Variants {
			if !r.has(v) {
				if cells[i] != "-" {
					t.Errorf("row %q %s: md %q, want - (does not apply)", r.label, v.Name, cells[i])
				}
				continue
			}
			got, err := strconv.ParseFloat(cells[i], 64)
			if err != nil || math.Abs(got-r.get(v)) > 0.5*math.Pow10(-r.dec)+1e-9 {
				t.Errorf("row %q %s: md %q, json %v", r.label, v.Name, cells[i], r.get(v))
			}
			checked++
		}
		k := len(s.Variants)
		for i := range s.Variants {
			if i == base {
				continue
			}
			want := RelChange(r.get(s.Variants[i]), r.get(s.Variants[base]))
			c := strings.TrimSuffix(cells[k], " %")
			k++
			if math.IsNaN(want) {
				if c != "-" {
					t.Errorf("row %q: change %q, want -", r.label, c)
				}
				continue
			}
			got, err := strconv.ParseFloat(c, 64)
			if err != nil || math.Abs(got-want) > 0.05+1e-9 {
				t.Errorf("row %q: change %q, want %.2f", r.label, c, want)
			}
		}
	}
	if checked == 0 {
		t.Error("no table cells checked")
	}
}

// checkPNG decodes a plot and checks it is a real picture: big enough and
// not one flat colour.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r := img.Bounds()
	if r.Dx() < 400 || r.Dy() < 300 {
		t.Errorf("%s: %dx%d, too small", path, r.Dx(), r.Dy())
	}
	colours := map[[4]uint32]bool{}
	for y := r.Min.Y; y < r.Max.Y; y += 3 {
		for x := r.Min.X; x < r.Max.X; x += 3 {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			colours[[4]uint32{cr, cg, cb, ca}] = true
		}
	}
	if len(colours) < 4 {
		t.Errorf("%s: only %d colours: blank plot", path, len(colours))
	}
}

func TestReanalyzeSynthetic(t *testing.T) {
	dir := t.TempDir()
	m := synthBench(t, dir, 2)
	s, err := Reanalyze(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	got := checkOutputs(t, dir, 2)
	if !s.Valid || !got.Valid {
		t.Fatalf("synthetic bench invalid: %v", s.Problems)
	}
	if got.Handovers != len(synthHOs) || got.Emulator.FalseAlarms != 1 || got.Emulator.OverflowDrops != 40 {
		t.Errorf("handovers %d false alarms %d drops %d, want %d, 1, 40 (4 runs x 10)", got.Handovers,
			got.Emulator.FalseAlarms, got.Emulator.OverflowDrops, len(synthHOs))
	}
	pass, m2 := got.Variants[0], got.Variants[1]
	if pass.Name != "pass" || m2.Name != "m2ho" {
		t.Fatalf("variant order %s, %s", pass.Name, m2.Name)
	}
	// m2ho recovers faster in the synthetic data, so every measure must
	// show it.
	if !(m2.GoodputMbps > pass.GoodputMbps && m2.ConvergenceSMean < pass.ConvergenceSMean) {
		t.Errorf("m2ho %.1f Mbps %.3f s vs pass %.1f Mbps %.3f s: the faster ramp must win",
			m2.GoodputMbps, m2.ConvergenceSMean, pass.GoodputMbps, pass.ConvergenceSMean)
	}
	if pass.ConvergenceN != 2*len(synthHOs) || len(pass.ConvergenceS) != pass.ConvergenceN {
		t.Errorf("pass: %d convergence values, want %d", pass.ConvergenceN, 2*len(synthHOs))
	}
	for _, k := range append([]string{TypeNone}, HandoverTypes...) {
		if pass.GoodputMbpsByType[k] <= 0 {
			t.Errorf("pass: no goodput for type %s", k)
		}
	}
	if pass.DupAcks != 14 || pass.RTTMsP50 < 70 || pass.RTTMsP95 > 79 || pass.RTTMsP95 < pass.RTTMsP50 {
		t.Errorf("pass: dup acks %d rtt p50 %.1f p95 %.1f", pass.DupAcks, pass.RTTMsP50, pass.RTTMsP95)
	}
	// Goodput read back through iperf3's rounded text equals the exact
	// synthetic bytes within the rounding (0.05 %).
	var bits, secs float64
	for i := range 2 {
		for _, iv := range synthRun("m2ho", i, synthOpts{rampS: 0.5}).Recv {
			bits += float64(iv.Bytes) * 8
			secs += iv.End - iv.Start
		}
	}
	if exact := bits / secs / 1e6; math.Abs(m2.GoodputMbps-exact)/exact > 5e-4 {
		t.Errorf("m2ho goodput %.3f, exact %.3f", m2.GoodputMbps, exact)
	}
}

func TestSummaryInvalid(t *testing.T) {
	dir := t.TempDir()
	m := synthBench(t, dir, 1)
	no := false
	writeRunDir(t, filepath.Join(dir, "runs", "m2ho-1"), synthRun("m2ho", 0, synthOpts{rampS: 0.5, valid: &no}))
	s, err := Reanalyze(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if s.Valid || s.Variants[1].Valid || !s.Variants[0].Valid {
		t.Errorf("one invalid m2ho run: valid %v, pass %v, m2ho %v; want false, true, false", s.Valid, s.Variants[0].Valid, s.Variants[1].Valid)
	}
	checkOutputs(t, dir, 1)

	// A missing run makes the summary invalid too.
	m.Repeat = 2
	if s, _ := Reanalyze(dir, m); s.Valid {
		t.Error("fewer runs than --repeat: want invalid")
	}
}

// The tunnel's RTT rows show only for tunnel variants: left out when no
// variant has a tunnel, "-" for the variants without one.
func TestTunnelRowsOnlyForTunnelVariants(t *testing.T) {
	md := func(vs ...VariantSummary) string {
		var b strings.Builder
		if err := (Summary{Scenario: "x", Scale: 1, Valid: true, Variants: vs}).WriteMarkdown(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	plain := md(VariantSummary{Name: "pass"}, VariantSummary{Name: "m2ho"})
	if strings.Contains(plain, "tunnel RTT") {
		t.Errorf("tunnel rows without a tunnel variant:\n%s", plain)
	}
	mixed := md(VariantSummary{Name: "pass"}, VariantSummary{Name: "quic", Tunnel: true, TunnelRTTMsMean: 31.25, TunnelRTTMsP95: 40})
	if !strings.Contains(mixed, "| tunnel RTT mean (ms) | - | 31.2 | - |") && !strings.Contains(mixed, "| tunnel RTT mean (ms) | - | 31.3 | - |") {
		t.Errorf("tunnel row, want - for pass:\n%s", mixed)
	}
	if !strings.Contains(mixed, "| RTT p50 (ms) | 0.0 | 0.0 |") {
		t.Errorf("other rows changed:\n%s", mixed)
	}
}

// Runs of one seed must see the same handovers, but only within the
// run's duration: the emulator runs on until the download has ended, and
// a handover scheduled just past the duration is logged by some runs and
// not others. One missing inside the duration still makes it invalid.
func TestSummaryHandoversWithinDuration(t *testing.T) {
	hos := []HandoverRow{{Command: 2.1}, {Command: 42.4}}
	late := append(append([]HandoverRow{}, hos...), HandoverRow{Command: 60.7})
	run := func(v string, h []HandoverRow) RunResult { return RunResult{Variant: v, Seed: 1, Handovers: h} }
	m := Meta{Scenario: "x", Repeat: 1, DurationS: 60}
	s := Summarize([]RunResult{run("pass", late), run("m2ho", hos)}, m)
	for _, p := range s.Problems {
		if strings.Contains(p, "handovers") {
			t.Errorf("a handover past the duration made a problem: %q", p)
		}
	}
	s = Summarize([]RunResult{run("pass", late), run("m2ho", hos[:1])}, m)
	found := false
	for _, p := range s.Problems {
		found = found || strings.Contains(p, "m2ho run 1: 1 handovers within 60 s, other runs 2")
	}
	if !found || s.Valid {
		t.Errorf("a handover missing within the duration: valid %v, problems %q", s.Valid, s.Problems)
	}
}
