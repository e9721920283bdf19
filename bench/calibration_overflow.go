package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/signaling"
)

// Target overflow (Finding 3) per handover type, and what the paper's two
// figures mean for a drive with another mix of handover types.
//
// M2HO MobiCom'24 §3.3 counts a handover as a target overflow when the
// transport layer misses packets that the target delivers right after the
// handover's execution while the link layer's sequence is continuous:
// newly sent data (sent after the handover began) dropped before the
// target served it. The model counts the same thing: a tail drop at the
// target from the command to one base RTT after random access (the
// forwarded queue included; in the mixed drive every such drop falls
// between the command and random access, i.e. is data that arrived during
// the interruption). The window is not where the calibration differs from
// the paper; the aggregation is. The paper gives 17.7 % of all handovers
// and 68.7 % of those from mmWave, and says (§4.3) that mmWave → mmWave
// handovers showed no overflow while mmWave → sub-6 ones often did. Then:
//   - mmWave → mmWave: ~0;
//   - mmWave → sub-6: 68.7 % / (the paper's share of vertical handovers
//     among those from mmWave), so at least 68.7 %;
//   - from sub-6: (17.7 - 68.7·x) / (1 - x) with x the paper's share of
//     handovers from mmWave, so at most 17.7 % (and x ≤ 25.8 %).
// The artifact's XCAL logs have 38 of 75 handovers from mmWave, 12 of them
// vertical (CALIBRATION.md, dwells): with that mix the paper's per-type
// rates give 68.7 % from mmWave only if mmWave → mmWave overflowed at
// 54 %, which §4.3 rules out. So the two figures are held against the
// run's own mix (the ranges below), and each type against its bound.

// Per-type bounds implied by §3.3 with §4.3 (percent).
const (
	OverflowMmToMmMax  = 0.0   // §4.3: none observed
	OverflowMmToSub6Lo = 68.7  // 68.7 % of mmWave sources, all of them vertical at most
	OverflowSub6SrcMax = 17.7  // the overall rate bounds the sub-6 sources' rate
	OverflowWindowRA   = 0.027 // s: the window ends one base RTT after random access (the model's cfg.RTT in the mixed drive, 26.8-27.1 ms)
)

// ReadDropTimes reads the tail drops of a mahimahi-style emulator log
// (mm-down.log: "<ms> d <packets> <bytes>") as seconds, one per line.
// Other lines are skipped; a drop line whose time is not a number is an
// error naming file:line.
func ReadDropTimes(r io.Reader, name string) ([]float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []float64
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		i := bytes.IndexByte(b, ' ')
		if i <= 0 || i+2 >= len(b) || b[i+1] != 'd' || b[i+2] != ' ' || b[0] == '#' {
			continue
		}
		ms, err := strconv.ParseInt(string(b[:i]), 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s:%d: drop time %q is not a millisecond count", name, line, b[:i])
		}
		out = append(out, float64(ms)/1000)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	slices.Sort(out)
	return out, nil
}

func readDropFile(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadDropTimes(f, path)
}

// OverflowTally counts handovers and target overflows per type key
// (sub6-sub6, sub6-mmwave, mmwave-sub6, mmwave-mmwave).
type OverflowTally map[string][2]int // key -> {overflows, handovers}

// TallyOverflows adds a run's handovers to t: a handover overflows when a
// drop falls in [command, RA + OverflowWindowRA] (drop times are whole
// milliseconds, so the window opens at the command's millisecond). drops
// nil: only the handovers are counted (no overflows known).
func (t OverflowTally) TallyOverflows(hos []HandoverRow, types map[string]string, drops []float64) {
	for _, h := range hos {
		k := convKey(h, types)
		v := t[k]
		v[1]++
		if drops != nil {
			lo, hi := math.Floor(h.Command*1000)/1000, h.RA+OverflowWindowRA
			i, _ := slices.BinarySearch(drops, lo)
			if i < len(drops) && drops[i] <= hi {
				v[0]++
			}
		}
		t[k] = v
	}
}

func (t OverflowTally) sum(keys ...string) (k, n int) {
	for _, key := range keys {
		k += t[key][0]
		n += t[key][1]
	}
	return k, n
}

// OverflowRanges are the rates the paper's figures allow for a drive with
// the tally's mix of handovers (percent): from mmWave, [v·68.7, v·100]
// with v the vertical share of the mmWave sources (mmWave → mmWave at 0,
// mmWave → sub-6 in [68.7, 100]); overall, the same plus the sub-6
// sources in [0, 17.7]. ok is false without handovers of that kind.
func (t OverflowTally) OverflowRanges() (all [2]float64, okAll bool, fromMm [2]float64, okMm bool) {
	_, nMS := t.sum("mmwave-sub6")
	_, nMm := t.sum("mmwave-sub6", "mmwave-mmwave")
	_, nS := t.sum("sub6-sub6", "sub6-mmwave")
	if nMm > 0 {
		v := float64(nMS) / float64(nMm)
		fromMm, okMm = [2]float64{v * OverflowMmToSub6Lo, v * 100}, true
	}
	if n := nMm + nS; n > 0 {
		all = [2]float64{float64(nMS) * OverflowMmToSub6Lo / float64(n), (float64(nMS)*100 + float64(nS)*OverflowSub6SrcMax) / float64(n)}
		okAll = true
	}
	return all, okAll, fromMm, okMm
}

// rangeRow is a finding row held against [lo, hi] ± CalFindingPoints.
func (c *Calibration) rangeRow(label string, k, n int, measured float64, lo, hi float64, source string) {
	row := CalRow{Metric: label, Measured: measured, Target: (lo + hi) / 2, TargetRange: &[2]float64{lo, hi},
		Tolerance: fmt.Sprintf("range ±%d points", CalFindingPoints), N: n, Source: source}
	if n == 0 {
		row.Verdict = "-"
		c.Rows = append(c.Rows, row)
		return
	}
	row.Emulated = float64(k) / float64(n) * 100
	c.add(row, row.Emulated >= lo-CalFindingPoints && row.Emulated <= hi+CalFindingPoints)
}

// srttRows adds the sender's sRTT on each cell type against the artifact's
// TCP sender logs (emu.MeasuredTCP): quantiles and the share of intervals
// without a standing queue. Reported, no verdict: --scale keeps the
// queueing delay (buffers and capacity scale together) but the proxy and
// the namespaces add their own.
func (c *Calibration) srttRows(sel []CalRun) {
	byType := map[string][]float64{}
	for _, r := range sel {
		for i, ms := range r.RTTms {
			if ms <= 0 || i >= len(r.RTTAt) {
				continue
			}
			if cb, ok := CapacityAt(r.Result.Capacity, r.RTTAt[i]); ok {
				byType[cb.Type] = append(byType[cb.Type], ms)
			}
		}
	}
	for _, k := range []string{"sub6", "mmwave"} {
		xs := byType[k]
		ty := signaling.CellSub6
		if k == "mmwave" {
			ty = signaling.CellMmWave
		}
		m := emu.MeasuredTCP[ty]
		src := "artifact iperf-sender-tcp-{1..4} (2023-02-13) and iperf-server-tcp-2 (2023-02-06), 0.1 s intervals typed by their XCAL logs (emu.TCPSenderStats, recorded in emu.MeasuredTCP)"
		if len(xs) == 0 {
			c.Rows = append(c.Rows, CalRow{Metric: "sRTT p50 on " + k + " (ms)", Measured: m.RTTP50, Target: m.RTTP50, Tolerance: "none (reported)", Verdict: "-", Source: src})
			continue
		}
		slices.Sort(xs)
		q := func(p float64) float64 { return xs[int(p*float64(len(xs)-1)+0.5)] }
		empty := 0
		base := float64(emu.BaseRTTByType[ty]+emu.EmptyQueueSlack) / 1e6
		for _, x := range xs {
			if x <= base {
				empty++
			}
		}
		for _, r := range []struct {
			label     string
			e, target float64
		}{
			{"sRTT p10 on " + k + " (ms)", q(0.1), m.RTTP10},
			{"sRTT p50 on " + k + " (ms)", q(0.5), m.RTTP50},
			{"sRTT p90 on " + k + " (ms)", q(0.9), m.RTTP90},
			{"intervals without a standing queue on " + k + " (%)", float64(empty) / float64(len(xs)) * 100, m.EmptyQueueShare * 100},
		} {
			c.Rows = append(c.Rows, CalRow{Metric: r.label, Emulated: r.e, Measured: r.target, Target: r.target, Tolerance: "none (reported)",
				N: len(xs), Verdict: "-", Source: src})
		}
	}
}

// overflowRows adds the target-overflow rows: overall and from mmWave held
// against the ranges the paper's figures allow for the run's mix, and
// each type against its bound (with drops logged); the artifact's TCP
// sender logs' cuts at handovers are reported beside them.
func (c *Calibration) overflowRows(sel []CalRun) {
	t := OverflowTally{}
	haveDrops := true
	var ovf, hos, ovfMm, fromMm int
	for _, r := range sel {
		types := map[string]string{}
		for _, cb := range r.Result.Capacity {
			types[cb.Cell] = cb.Type
		}
		t.TallyOverflows(r.Result.Handovers, types, r.Drops)
		if r.Drops == nil {
			haveDrops = false
		}
		e := r.Result.Emu
		ovf += int(e.OverflowHandovers)
		hos += int(e.Handovers)
		ovfMm += int(e.OverflowFromMmWave)
		fromMm += int(e.FromMmWave)
	}
	paper := "M2HO MobiCom'24 §3.3 (17.7 % of all handovers, 68.7 % from mmWave) with §4.3 (no overflow seen mmWave → mmWave), held against this run's mix of handover types"
	all, okAll, mm, okMm := t.OverflowRanges()
	if !okAll {
		all = [2]float64{RefOverflow * 100, RefOverflow * 100}
	}
	if !okMm {
		mm = [2]float64{RefOverflowFromMmWave * 100, RefOverflowFromMmWave * 100}
	}
	c.rangeRow("target overflow (% of handovers)", ovf, hos, RefOverflow*100, all[0], all[1], paper)
	c.rangeRow("target overflow, mmWave source (%)", ovfMm, fromMm, RefOverflowFromMmWave*100, mm[0], mm[1], paper)
	if !haveDrops {
		return
	}
	cuts := func(keys ...string) string {
		var k, n int
		for _, key := range keys {
			k += emu.MeasuredHandoverCuts[key][0]
			n += emu.MeasuredHandoverCuts[key][1]
		}
		return fmt.Sprintf("; the artifact's TCP sender logs: a cwnd cut within 1.5 s of %d of %d such commands (Findings 2, 3 and congestion together)", k, n)
	}
	k, n := t.sum("mmwave-mmwave")
	c.rangeRow("target overflow, mmwave->mmwave (%)", k, n, OverflowMmToMmMax, 0, OverflowMmToMmMax,
		"M2HO MobiCom'24 §4.3: no overflow seen on mmWave → mmWave handovers"+cuts("mmwave-mmwave"))
	k, n = t.sum("mmwave-sub6")
	c.rangeRow("target overflow, mmwave->sub6 (%)", k, n, OverflowMmToSub6Lo, OverflowMmToSub6Lo, 100,
		"M2HO MobiCom'24 §3.3 (68.7 % from mmWave) with §4.3 (none mmWave → mmWave): at least 68.7 %"+cuts("mmwave-sub6"))
	k, n = t.sum("sub6-sub6", "sub6-mmwave")
	c.rangeRow("target overflow, sub-6 source (%)", k, n, OverflowSub6SrcMax, 0, OverflowSub6SrcMax,
		"M2HO MobiCom'24 §3.3: 17.7 % overall with 68.7 % from mmWave bounds the sub-6 sources' rate by 17.7 %"+cuts("sub6-sub6", "sub6-mmwave"))
}
