package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/bench/emu/driver"
)

// The calibration report: the baseline (plain CUBIC through the emulator,
// the pass variant) side by side with what the measured networks did to
// CUBIC, each figure with its tolerance from issue 9 and a verdict. The
// emulator is calibrated to these measurements, never to what M2HO should
// reach.

// Tolerances of issue 9.
const (
	CalConvergenceRel = 0.25 // convergence within ±25 %
	CalGoodputPoints  = 10   // goodput/capacity within ±10 points
	CalFindingPoints  = 5    // finding frequencies within ±5 points
	// CwndCutDrop is what counts as a cwnd cut between two consecutive
	// sender intervals: snd_cwnd falling by more than 20 %.
	CwndCutDrop = 0.20
)

// Measured reference figures, recorded for machines without the shared
// data; MeasuredReference recomputes them from the data when present.
var (
	// RefConvergence: mean CUBIC convergence by handover type (s), the
	// CUBIC blocks of the artifact's results/conv-spd-{i}-{j}.txt
	// (0 = sub-6, 1 = mmWave).
	RefConvergence = map[string]float64{"sub6-sub6": 13.7, "sub6-mmwave": 15.9, "mmwave-sub6": 19.9, "mmwave-mmwave": 21.3}
	// RefConvergencePaper: the paper's measurement study (M2HO
	// MobiCom'24 §3.2): 6.7 s over all handovers, 17.2 s sub-6→mmWave.
	RefConvergencePaperAll = 6.7
	RefConvergencePaperS2M = 17.2
	RefGoodputRatioPaper   = 468.4 / 993.1 // M2HO §3.2: TCP 468.4 vs UDP 993.1 Mbit/s
	RefFlushHoles          = 0.184         // Finding 2 (§3.3)
	RefOverflow            = 0.177         // Finding 3 (§3.3)
	RefOverflowFromMmWave  = 0.687         // Finding 3, mmWave source
	// RefGoodputRatioSub6/MmWave and RefCwndCutsPerMin: what
	// MeasuredReference computes from the shared data (recorded here).
	RefGoodputRatioSub6   = 0.680 // TCP 116.8 / UDP 171.7 Mbit/s
	RefGoodputRatioMmWave = 0.554 // TCP 564.7 / UDP 1018.8 Mbit/s
	RefCwndCutsPerMin     = 7.00  // 35 cuts in 5.0 min of iperf-sender-tcp-{1..4}
)

// CalReference are the measured figures and where each came from.
type CalReference struct {
	// GoodputRatio is the measured drives' TCP/UDP ratio: the time-weighted
	// mean goodput of the artifact's TCP CUBIC logs over the mean capacity
	// of its UDP saturation logs.
	GoodputRatio       float64 `json:"goodput_ratio"`
	GoodputRatioSource string  `json:"goodput_ratio_source"`
	// GoodputRatioByType is the same per serving cell type (sub6,
	// mmwave): each log's 0.1 s intervals typed by the XCAL log of its
	// drive (AlignDrive), TCP over UDP.
	GoodputRatioByType       map[string]float64 `json:"goodput_ratio_by_type"`
	GoodputRatioByTypeSource string             `json:"goodput_ratio_by_type_source"`
	Convergence              map[string]float64 `json:"convergence_s"`
	ConvergenceSource        string             `json:"convergence_source"`
	CwndCutsPerMin           float64            `json:"cwnd_cuts_per_min"`
	CwndCutsSource           string             `json:"cwnd_cuts_source"`
	FromData                 bool               `json:"from_data"`
}

// MeasuredReference computes the reference figures from the shared data
// directory (dataDir/m2ho-mobicom24); what is absent keeps the recorded
// constants, and the sources say which.
func MeasuredReference(dataDir string) CalReference {
	ref := CalReference{GoodputRatio: RefGoodputRatioPaper, GoodputRatioSource: "M2HO MobiCom'24 §3.2: TCP 468.4 / UDP 993.1 Mbit/s (recorded)",
		GoodputRatioByType:       map[string]float64{"sub6": RefGoodputRatioSub6, "mmwave": RefGoodputRatioMmWave},
		GoodputRatioByTypeSource: "artifact tcp-recv vs udp-bw logs typed by their XCAL logs (recorded)",
		Convergence:              map[string]float64{}, ConvergenceSource: "artifact results/conv-spd-*, CUBIC blocks (recorded)",
		CwndCutsSource: "none (shared data absent)"}
	for k, v := range RefConvergence {
		ref.Convergence[k] = v
	}
	root := filepath.Join(dataDir, "m2ho-mobicom24")
	if _, err := os.Stat(root); err != nil {
		return ref
	}
	ref.FromData = true
	names := map[string]string{"0-0": "sub6-sub6", "0-1": "sub6-mmwave", "1-0": "mmwave-sub6", "1-1": "mmwave-mmwave"}
	got := 0
	for f, k := range names {
		p := filepath.Join(root, "results", "conv-spd-"+f+".txt")
		if vs, err := readResultBlock(p, "CUBIC"); err == nil && len(vs) > 0 {
			ref.Convergence[k] = Mean(vs)
			got++
		}
	}
	if got == len(names) {
		ref.ConvergenceSource = "artifact results/conv-spd-*.txt, CUBIC blocks (computed)"
	}
	tcp, _ := filepath.Glob(filepath.Join(root, "measurements", "*", "*", "tcp-recv-*.log"))
	udp, _ := filepath.Glob(filepath.Join(root, "measurements", "*", "*", "udp-bw-*.log"))
	tt, nt := typedThroughput(tcp)
	ut, nu := typedThroughput(udp)
	var parts []string
	for _, k := range []string{"sub6", "mmwave"} {
		if tt[k][1] > 0 && ut[k][1] > 0 && ut[k][0] > 0 {
			tm, um := tt[k][0]*8/tt[k][1]/1e6, ut[k][0]*8/ut[k][1]/1e6
			ref.GoodputRatioByType[k] = tm / um
			parts = append(parts, fmt.Sprintf("%s TCP %.1f Mbit/s (%.0f s) / UDP %.1f Mbit/s (%.0f s)", k, tm, tt[k][1], um, ut[k][1]))
		}
	}
	if len(parts) == 2 {
		ref.GoodputRatioByTypeSource = fmt.Sprintf("artifact measurements/*/*: %d tcp-recv and %d udp-bw logs with an XCAL log of the same drive, 0.1 s intervals typed by it: %s (computed)",
			nt, nu, strings.Join(parts, "; "))
	}
	snd, _ := filepath.Glob(filepath.Join(root, "measurements", "*", "*", "iperf-sender-tcp-*.log"))
	var cuts int
	var mins float64
	for _, p := range snd {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cw, dur, err := senderCwnd(b)
		if err != nil || dur <= 0 {
			continue
		}
		cuts += CwndCuts(cw)
		mins += dur / 60
	}
	if mins > 0 {
		ref.CwndCutsPerMin = float64(cuts) / mins
		ref.CwndCutsSource = fmt.Sprintf("artifact measurements/*/*/iperf-sender-tcp-*.log: %d cuts (snd_cwnd -%.0f %% between 0.1 s intervals) in %.1f min (computed)",
			cuts, CwndCutDrop*100, mins)
	}
	return ref
}

// readResultBlock reads the values of one algorithm's block in an artifact
// results file (a name line, then one number per line).
func readResultBlock(path, algo string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []float64
	in := false
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		v, err := strconv.ParseFloat(t, 64)
		if err != nil {
			in = t == algo
			continue
		}
		if in {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s:%d: %q is not a number", path, line, t)
			}
			out = append(out, v)
		}
	}
	return out, sc.Err()
}

// typedThroughput sums, per serving cell type, the bytes and seconds of
// the 0.1 s intervals of iperf3 -J receiver logs that have an XCAL log of
// the same drive in their directory (AlignDrive by timestamps; of several,
// the one starting closest to the log). It returns how many logs it used.
func typedThroughput(paths []string) (map[string][2]float64, int) {
	out := map[string][2]float64{}
	used := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		ip, err := emu.ParseIperf3UDP(p, f)
		f.Close()
		if err != nil {
			continue
		}
		xs, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "*.csv"))
		var best *emu.ServingTimeline
		bestStart := math.Inf(1)
		for _, x := range xs {
			evs, err := readXCAL(x)
			if err != nil || len(evs) == 0 {
				continue
			}
			since, a := emu.AlignDrive(evs, ip)
			if a.Mode != emu.AlignTimestamps || math.Abs(a.XCALStartS) >= bestStart {
				continue
			}
			tl := emu.NewServingTimeline(evs, since)
			best, bestStart = &tl, math.Abs(a.XCALStartS)
		}
		if best == nil {
			continue
		}
		used++
		const iv = 100 * time.Millisecond
		for t := time.Duration(0); t+iv <= ip.Period(); t += iv {
			k := emu.CellTypeName(best.At(t))
			v := out[k]
			v[0] += float64(ip.Bytes(t, t+iv))
			v[1] += iv.Seconds()
			out[k] = v
		}
	}
	return out, used
}

// senderCwnd reads the per-interval snd_cwnd of an iperf3 -J sender log
// (the artifact's logs have no "sender" member) and its length in seconds.
func senderCwnd(b []byte) ([]int64, float64, error) {
	var doc struct {
		Intervals []struct {
			Streams []struct {
				End     float64 `json:"end"`
				SndCwnd int64   `json:"snd_cwnd"`
			} `json:"streams"`
		} `json:"intervals"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, 0, err
	}
	var cw []int64
	var end float64
	for _, iv := range doc.Intervals {
		if len(iv.Streams) == 0 {
			continue
		}
		cw = append(cw, iv.Streams[0].SndCwnd)
		end = max(end, iv.Streams[0].End)
	}
	return cw, end, nil
}

// CwndCuts counts the cuts in a series of snd_cwnd samples: a sample more
// than CwndCutDrop below the one before it (zeros are no samples).
func CwndCuts(cw []int64) int {
	n := 0
	var prev int64
	for _, c := range cw {
		if c <= 0 {
			continue
		}
		if prev > 0 && float64(c) < (1-CwndCutDrop)*float64(prev) {
			n++
		}
		prev = c
	}
	return n
}

// CalRow is one line of the calibration table.
type CalRow struct {
	Metric   string  `json:"metric"`
	Emulated float64 `json:"emulated"`
	// Measured is the reference; Target is what the emulated figure is
	// held against (the reference, capped by the scenario's dwells for
	// convergence), with Tolerance in the row's unit (points) or relative.
	Measured float64 `json:"measured"`
	Target   float64 `json:"target"`
	// TargetRange, when set, is what the emulated figure is held against
	// (± the tolerance); Target is then its middle.
	TargetRange *[2]float64 `json:"target_range,omitempty"`
	Tolerance   string      `json:"tolerance"`
	N           int         `json:"n"`
	// Verdict: pass, FAIL, or "-" (no tolerance, or no sample).
	Verdict string `json:"verdict"`
	Source  string `json:"source"`
}

// Calibration is summary.json's calibration block.
type Calibration struct {
	Variant   string       `json:"variant"`
	Runs      int          `json:"runs"`
	Rows      []CalRow     `json:"rows"`
	Reference CalReference `json:"reference"`
	// Calibrated: every row with a tolerance passes.
	Calibrated bool       `json:"calibrated"`
	Drive      *emu.Drive `json:"drive,omitempty"`
	Note       string     `json:"note"`
}

// CalRun is what the calibration needs of one run besides its RunResult:
// the sender's snd_cwnd samples and the run's length in seconds.
type CalRun struct {
	Result RunResult
	Cwnd   []int64
	Secs   float64
	// Drops are the emulator's downlink tail drops (s, from
	// emu/mm-down.log; nil when the log is absent); RTTms and RTTAt the
	// sender's sRTT samples and their times on the emulator's clock.
	Drops []float64
	RTTms []float64
	RTTAt []float64
}

// Calibrate computes the calibration block from the baseline's runs
// (variant "pass", else the first variant's).
func Calibrate(runs []CalRun, ref CalReference) *Calibration {
	c := &Calibration{Variant: "pass", Reference: ref, Calibrated: true,
		Note: "pass variant = plain CUBIC through the emulator; convergence targets are the references capped per handover by its dwell (a handover that never converges before the next counts with its dwell)"}
	var sel []CalRun
	for _, r := range runs {
		if r.Result.Variant == "pass" {
			sel = append(sel, r)
		}
	}
	if len(sel) == 0 && len(runs) > 0 {
		c.Variant = runs[0].Result.Variant
		for _, r := range runs {
			if r.Result.Variant == c.Variant {
				sel = append(sel, r)
			}
		}
	}
	c.Runs = len(sel)
	if len(sel) == 0 {
		c.Calibrated = false
		return c
	}
	if d := sel[0].Result.Emu.Drive; d != nil {
		c.Drive = d
	}
	// goodput / capacity, over the measured bins of every run, overall
	// and by the serving cell's type; the overall target weighs the
	// measured per-type ratios by the run's capacity on each type.
	gBits, capMb := map[string]float64{}, map[string]float64{}
	for _, r := range sel {
		for _, b := range r.Result.Bins {
			cb, ok := CapacityAt(r.Result.Capacity, (b.T0+b.T1)/2)
			if !ok {
				continue
			}
			gBits[cb.Type] += b.Bits
			capMb[cb.Type] += cb.Mbps * (b.T1 - b.T0)
		}
	}
	var gAll, cAll, tAll float64
	for k, cm := range capMb {
		gAll += gBits[k] / 1e6
		cAll += cm
		tAll += cm * ref.GoodputRatioByType[k]
	}
	ratioRow := func(label string, g, cm, target, measured float64, source string) {
		if cm <= 0 {
			return
		}
		e := g / cm
		c.add(CalRow{Metric: label, Emulated: e * 100, Measured: measured * 100, Target: target * 100,
			Tolerance: fmt.Sprintf("±%d points", CalGoodputPoints), N: len(sel), Source: source},
			math.Abs(e-target)*100 <= CalGoodputPoints)
	}
	if cAll > 0 {
		ratioRow("goodput / capacity (%)", gAll, cAll, tAll/cAll, tAll/cAll, ref.GoodputRatioByTypeSource+"; weighted by the run's capacity per type")
		c.Rows = append(c.Rows, CalRow{Metric: "goodput / capacity vs the paper (%)", Emulated: gAll / cAll * 100, Measured: ref.GoodputRatio * 100,
			Target: ref.GoodputRatio * 100, Tolerance: "none (reported)", N: len(sel), Verdict: "-", Source: ref.GoodputRatioSource})
	}
	for _, k := range []string{"sub6", "mmwave"} {
		ratioRow("goodput / capacity on "+k+" (%)", gBits[k]/1e6, capMb[k], ref.GoodputRatioByType[k], ref.GoodputRatioByType[k], ref.GoodputRatioByTypeSource)
	}
	// convergence by handover type, targets capped by each dwell
	type acc struct {
		sum, target float64
		n           int
	}
	for _, def := range []struct {
		suffix string
		conv   func(RunResult) []Convergence
	}{
		{"", func(r RunResult) []Convergence { return r.Convergence }},
		{" [1 s, mean capacity]", func(r RunResult) []Convergence {
			return ConvergeMeanCapacity(r.Bins, r.Capacity, r.Handovers, ConvergenceFraction, 1)
		}},
	} {
		byType := map[string]*acc{}
		all, s2m := &acc{}, &acc{}
		for _, r := range sel {
			types := map[string]string{}
			for _, cb := range r.Result.Capacity {
				types[cb.Cell] = cb.Type
			}
			for _, cv := range def.conv(r.Result) {
				if !cv.Analyzed {
					continue
				}
				k := convKey(cv.Handover, types)
				a := byType[k]
				if a == nil {
					a = &acc{}
					byType[k] = a
				}
				refK, ok := ref.Convergence[k]
				if !ok {
					continue
				}
				a.sum += cv.Seconds
				a.target += math.Min(refK, cv.Dwell)
				a.n++
				all.sum += cv.Seconds
				all.target += math.Min(RefConvergencePaperAll, cv.Dwell)
				all.n++
				if k == "sub6-mmwave" {
					s2m.sum += cv.Seconds
					s2m.target += math.Min(RefConvergencePaperS2M, cv.Dwell)
					s2m.n++
				}
			}
		}
		conv := func(label string, a *acc, measured float64, source string) {
			row := CalRow{Metric: label, Measured: measured, Tolerance: fmt.Sprintf("±%.0f %%", CalConvergenceRel*100), N: a.n, Source: source}
			if a.n == 0 {
				row.Verdict = "-"
				c.Rows = append(c.Rows, row)
				return
			}
			row.Emulated, row.Target = a.sum/float64(a.n), a.target/float64(a.n)
			c.add(row, math.Abs(row.Emulated-row.Target) <= CalConvergenceRel*row.Target)
		}
		conv("convergence, all handovers"+def.suffix+" (s)", all, RefConvergencePaperAll, "M2HO MobiCom'24 §3.2 (measurement study)")
		conv("convergence, sub6->mmwave, paper"+def.suffix+" (s)", s2m, RefConvergencePaperS2M, "M2HO MobiCom'24 §3.2 (measurement study)")
		for _, k := range []string{"sub6-sub6", "sub6-mmwave", "mmwave-sub6", "mmwave-mmwave"} {
			a := byType[k]
			if a == nil {
				a = &acc{}
			}
			conv("convergence, "+strings.Replace(k, "-", "->", 1)+def.suffix+" (s)", a, ref.Convergence[k], ref.ConvergenceSource)
		}
	}
	// cwnd cuts per minute
	var cuts int
	var mins float64
	for _, r := range sel {
		cuts += CwndCuts(r.Cwnd)
		mins += r.Secs / 60
	}
	if mins > 0 {
		c.Rows = append(c.Rows, CalRow{Metric: "cwnd cuts per minute", Emulated: float64(cuts) / mins, Measured: ref.CwndCutsPerMin,
			Target: ref.CwndCutsPerMin, Tolerance: "none (reported)", N: cuts, Verdict: "-", Source: ref.CwndCutsSource})
	}
	// findings per handover
	var hos, flush int64
	for _, r := range sel {
		e := r.Result.Emu
		hos += e.Handovers
		flush += e.ReorderFlushes
	}
	finding := func(label string, k, n int64, measured float64) {
		row := CalRow{Metric: label, Measured: measured * 100, Target: measured * 100, Tolerance: fmt.Sprintf("±%d points", CalFindingPoints),
			N: int(n), Source: "M2HO MobiCom'24 §3.3 (recorded)"}
		if n == 0 {
			row.Verdict = "-"
			c.Rows = append(c.Rows, row)
			return
		}
		row.Emulated = float64(k) / float64(n) * 100
		c.add(row, math.Abs(row.Emulated-row.Target) <= CalFindingPoints)
	}
	finding("flush with holes (% of handovers)", flush, hos, RefFlushHoles)
	c.overflowRows(sel)
	c.srttRows(sel)
	return c
}

func (c *Calibration) add(r CalRow, ok bool) {
	r.Verdict = "pass"
	if !ok {
		r.Verdict = "FAIL"
		c.Calibrated = false
	}
	c.Rows = append(c.Rows, r)
}

// convKey names a handover's type from-to with the cell types of the
// run's capacity rows (horizontal handovers need them).
func convKey(h HandoverRow, types map[string]string) string {
	switch h.Type {
	case "sub6-to-mmwave":
		return "sub6-mmwave"
	case "mmwave-to-sub6":
		return "mmwave-sub6"
	}
	if types[h.To] == "mmwave" || types[h.From] == "mmwave" {
		return "mmwave-mmwave"
	}
	return "sub6-sub6"
}

// CalibrationRuns reads what Calibrate needs besides the results from the
// run directories under dir/runs (the sender's iperf3 JSON).
func CalibrationRuns(dir string, results []RunResult) []CalRun {
	out := make([]CalRun, 0, len(results))
	// the drop logs are large: read only the calibrated variant's (pass,
	// else the first, as Calibrate picks)
	calVariant := "pass"
	if len(results) > 0 && !slices.ContainsFunc(results, func(r RunResult) bool { return r.Variant == "pass" }) {
		calVariant = results[0].Variant
	}
	for _, r := range results {
		cr := CalRun{Result: r}
		p := filepath.Join(dir, "runs", fmt.Sprintf("%s-%d", r.Variant, r.Index+1), clientJSONFile)
		if b, err := os.ReadFile(p); err == nil {
			if s, err := ReadIperf3Sender(b, p); err == nil {
				for _, iv := range s.Intervals {
					cr.Cwnd = append(cr.Cwnd, iv.CwndBytes)
					cr.Secs = max(cr.Secs, iv.End)
					if iv.RTTus > 0 {
						cr.RTTms = append(cr.RTTms, float64(iv.RTTus)/1000)
						cr.RTTAt = append(cr.RTTAt, iv.End+r.Align.OffsetS)
					}
				}
			}
		}
		if r.Variant != calVariant {
			out = append(out, cr)
			continue
		}
		if d, err := readDropFile(filepath.Join(filepath.Dir(p), emuSubdir, emuDownLogFile)); err == nil {
			cr.Drops = d
			if cr.Drops == nil {
				cr.Drops = []float64{}
			}
		}
		out = append(out, cr)
	}
	return out
}

// WriteCalibrationMarkdown writes the calibration section of summary.md.
func WriteCalibrationMarkdown(w io.Writer, c *Calibration) error {
	if c == nil {
		return nil
	}
	var b strings.Builder
	verdict := "calibrated"
	if !c.Calibrated {
		verdict = "NOT calibrated"
	}
	fmt.Fprintf(&b, "\n## Calibration (%s variant, %d runs): %s\n\n", c.Variant, c.Runs, verdict)
	if c.Drive != nil {
		fmt.Fprintf(&b, "Drive: %s (capacity %s), replay %s; %s.\n\n", c.Drive.XCAL, orNone(c.Drive.Capacity), c.Drive.Replay, c.Drive.Alignment.Text)
	}
	b.WriteString("| metric | emulated | measured | target | tolerance | n | verdict |\n|---|---:|---:|---:|---|---:|---|\n")
	for _, r := range c.Rows {
		target := fmt.Sprintf("%.2f", r.Target)
		if r.TargetRange != nil {
			target = fmt.Sprintf("%.2f-%.2f", r.TargetRange[0], r.TargetRange[1])
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %s | %d | %s |\n", r.Metric, r.Emulated, r.Measured, target, r.Tolerance, r.N, r.Verdict)
	}
	b.WriteString("\nSources:\n\n")
	seen := map[string]bool{}
	var srcs []string
	for _, r := range c.Rows {
		if !seen[r.Source] {
			seen[r.Source] = true
			srcs = append(srcs, r.Source)
		}
	}
	sort.Strings(srcs)
	for _, s := range srcs {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "\n%s.\n", c.Note)
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// dataDirOr is the shared data directory: dir, else the default lookup.
func dataDirOr(dir string) string {
	if dir != "" {
		return dir
	}
	return driver.DataDir("")
}

// LoadScenarioDrive is LoadScenario with a user's own drive (--xcal FILE,
// --capacity FILE; "" = the scenario's own schedule).
func LoadScenarioDrive(name, dataDir, xcal, capLog string) (*emu.Scenario, error) {
	if capLog != "" && xcal == "" {
		return nil, errors.New("--capacity: needs --xcal (the drive it was measured on)")
	}
	opts := emu.LoadOptions{DataDir: dataDir, XCAL: readXCAL, XCALPath: xcal, CapacityPath: capLog}
	if slices.Contains(emu.BuiltinNames(), name) {
		return driver.Builtin(name, opts)
	}
	return driver.LoadScenario(name, opts)
}

// ConvergeMeanCapacity is convergence closer to the M2HO paper's metric:
// from random access until the goodput averaged over the last window
// reaches frac of the new cell's mean capacity over its dwell (the UDP
// capacity of the cell, not of the instant: with a capacity that varies
// every 0.1 s, a 0.1 s bin against the instant's capacity is reached in
// every dip). The window's end is a bin end at least one window after
// random access. A handover that does not get there counts with its
// dwell, as in Converge.
func ConvergeMeanCapacity(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac, window float64) []Convergence {
	return convergeScan(bins, hos,
		func(_, e int, ra float64) (int, bool) {
			end := bins[e].T1
			if end < ra+window-convEps {
				return 0, false
			}
			s := e
			for s > 0 && bins[s-1].T0 >= end-window-convEps {
				s--
			}
			return s, true
		},
		func(h HandoverRow, next float64) func([]Bin) bool {
			var capSum, capN float64
			for _, cb := range caps {
				if cb.T >= h.RA-convEps && cb.T < next-convEps {
					capSum += cb.Mbps
					capN++
				}
			}
			if capN == 0 || capSum <= 0 {
				return nil
			}
			thr := frac * capSum / capN
			return func(win []Bin) bool { return windowMbps(win) >= thr*(1-1e-9) }
		})
}
