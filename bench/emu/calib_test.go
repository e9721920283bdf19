package emu

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// A varying capacity delivers, interval by interval, exactly the trace's
// bytes while the cell is saturated: at every interval boundary the bytes
// of the packets delivered by then are the trace's cumulative bytes less
// the part of one packet still on the air.
func TestVaryingCapacityDeliversTheTrace(t *testing.T) {
	tr, err := MeasuredVariability[signaling.CellSub6].Trace(40, 5*time.Second, 7)
	if err != nil {
		t.Fatal(err)
	}
	c := oneMs()
	c.Cells = []CellSpec{{ID: "A", Type: signaling.CellSub6, Capacity: tr, Buffer: 1 << 30}}
	r := newRun(t, c)
	for i := range 30000 { // 45 MB at t=0: more than 5 s of the trace can carry
		r.m.Enqueue(t0, Down, uint64(i), 1500)
	}
	r.until(5 * time.Second)
	var cum int64
	k := 0
	for b := 100 * time.Millisecond; b <= 5*time.Second; b += 100 * time.Millisecond {
		for k < len(r.out) && r.out[k].Due.Sub(t0) <= b {
			if r.out[k].Dir == Down && !r.out[k].Dropped {
				cum += int64(r.out[k].Size)
			}
			k++
		}
		want := tr.Bytes(0, b)
		if cum > want || cum <= want-1500 {
			t.Fatalf("by %v: %d bytes delivered, trace %d (must be within one packet below)", b, cum, want)
		}
	}
	// and the trace varies as fitted: not a constant in disguise
	lo, hi := math.Inf(1), 0.0
	for b := time.Duration(0); b < 5*time.Second; b += 100 * time.Millisecond {
		v := float64(tr.Bytes(b, b+100*time.Millisecond))
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi < 2*lo {
		t.Fatalf("trace from %v to %v bytes per 0.1 s: no variation", lo, hi)
	}
}

// The base RTT follows the serving cell's type: the wired delay is the
// smallest (mmWave, 30 ms), a sub-6 cell adds its 10 ms on the downlink.
func TestRTTByType(t *testing.T) {
	for _, tc := range []struct {
		typ  signaling.CellType
		slot time.Duration
		down time.Duration // one packet enqueued at 0
	}{
		// wire 15 ms, first slot ending after it at 15.5 ms, + 10 ms
		{signaling.CellSub6, 500 * time.Microsecond, 25500 * time.Microsecond},
		// wire 15 ms, slot 125 us grid: 15.125 ms, no extra
		{signaling.CellMmWave, 125 * time.Microsecond, 15125 * time.Microsecond},
	} {
		c := DefaultConfig()
		c.SlotEvents = SlotEventsNone
		c.RTTByType = map[signaling.CellType]time.Duration{signaling.CellSub6: 40 * time.Millisecond, signaling.CellMmWave: 30 * time.Millisecond}
		c.Cells = []CellSpec{{ID: "A", Type: tc.typ, Capacity: Mbps(1000), Buffer: 1 << 20}}
		r := newRun(t, c)
		r.m.Enqueue(t0, Down, 1, 1500)
		r.m.Enqueue(t0, Up, 2, 1500)
		r.until(time.Second)
		g := r.got(Down)
		// uplink: 1500 B at 100 Mbit/s = 120 us on the air + 15 ms
		if u := r.got(Up); len(g) != 1 || g[0].at != tc.down || len(u) != 1 || u[0].at != 15120*time.Microsecond {
			t.Fatalf("%v: down %+v up %+v, want down at %v and up at 15.12ms", tc.typ, g, u, tc.down)
		}
	}
}

// The per-handover flush-hole model: over many handovers with a fixed
// seed the share of handovers whose flush has holes is the configured
// probability, and the same at every --scale (the decision is per
// handover, not per packet), while the per-packet model's rate moves with
// the packet rate.
func TestFlushHolesPerHandoverIndependentOfScale(t *testing.T) {
	const n = 600
	sim := func(scale float64, perPacket bool) Counters {
		c := DefaultConfig()
		c.RTT = 2 * time.Millisecond
		c.SlotEvents = SlotEventsNone
		c.Scale = scale
		if perPacket {
			c.HARQFraction = 0.0005
		} else {
			c.FlushHoles = 0.184
		}
		c.Cells = []CellSpec{{ID: "A", Type: signaling.CellSub6, Capacity: Mbps(40), Buffer: 200_000},
			{ID: "B", Type: signaling.CellSub6, Capacity: Mbps(40), Buffer: 200_000}}
		c.Schedule.Start = "A"
		for i := range n {
			to := "B"
			if i%2 == 1 {
				to = "A"
			}
			c.Schedule.Handovers = append(c.Schedule.Handovers, Handover{At: time.Duration(i+1) * 500 * time.Millisecond, To: to})
		}
		m, err := New(c, t0, 3)
		if err != nil {
			t.Fatal(err)
		}
		var out []Delivery
		var ev []signaling.Event
		// a sender that keeps the link full: 1.5x the cell's rate
		gap := time.Duration(1500 * 8 / (60e6 * scale) * 1e9)
		id := uint64(0)
		end := time.Duration(n+1) * 500 * time.Millisecond
		for t := time.Duration(0); t < end; t += gap {
			m.Enqueue(t0.Add(t), Down, id, 1500)
			id++
			m.Step(t0.Add(t), &out, &ev)
			out, ev = out[:0], ev[:0]
		}
		return m.Counters()
	}
	a, b := sim(0.3, false), sim(1, false)
	if a.ReorderFlushes != b.ReorderFlushes || a.HolesPlanned != b.HolesPlanned {
		t.Fatalf("per-handover model: flushes with holes %d at scale 0.3, %d at 1.0 (planned %d, %d)", a.ReorderFlushes, b.ReorderFlushes, a.HolesPlanned, b.HolesPlanned)
	}
	// binomial(600, 0.184): sd 9.5; within 4 sd
	if got := float64(b.ReorderFlushes); math.Abs(got-0.184*n) > 4*math.Sqrt(n*0.184*0.816) {
		t.Fatalf("flushes with holes %v of %d handovers, want ~%.0f", got, n, 0.184*n)
	}
	if b.Handovers[0][0] != n {
		t.Fatalf("%d handovers", b.Handovers[0][0])
	}
	pa, pb := sim(0.3, true), sim(1, true)
	if pb.ReorderFlushes < pa.ReorderFlushes*2 {
		t.Fatalf("per-packet model: %d flushes with holes at 0.3, %d at 1.0: expected to grow with the packet rate", pa.ReorderFlushes, pb.ReorderFlushes)
	}
	t.Logf("per-handover %d/%d at both scales; per-packet %d at 0.3, %d at 1.0", b.ReorderFlushes, n, pa.ReorderFlushes, pb.ReorderFlushes)
}

// The uplink during a handover (TS 38.300 §9.2.3.2, TS 38.321 §5.1): the
// UE stops transmitting on the source at the command, sends nothing until
// random access on the target completes, then sends what it buffered, in
// order, at the uplink rate.
func TestUplinkFrozenFromCommandToRandomAccess(t *testing.T) {
	c := oneMs()
	c.UplinkMbps = 12 // 1 ms per 1500-byte packet
	c.Schedule.Handovers = []Handover{{At: 100 * time.Millisecond, To: "B", Lead: 10 * time.Millisecond}}
	r := newRun(t, c)
	// RA = command + 33 ms + 27 ms = 160 ms
	r.m.Enqueue(t0.Add(99500*time.Microsecond), Up, 1, 1500) // would end at 100.5 ms: spans the command
	r.m.Enqueue(t0.Add(120*time.Millisecond), Up, 2, 1500)   // during the interruption
	r.m.Enqueue(t0.Add(121*time.Millisecond), Up, 3, 1500)
	r.m.Enqueue(t0.Add(200*time.Millisecond), Up, 4, 1500) // after: unaffected
	r.until(time.Second)
	want := []got{{1, 161 * time.Millisecond, false}, {2, 162 * time.Millisecond, false}, {3, 163 * time.Millisecond, false}, {4, 201 * time.Millisecond, false}}
	g := r.got(Up)
	if len(g) != len(want) {
		t.Fatalf("up %+v", g)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Fatalf("up %+v, want %+v", g, want)
		}
	}
}

// The lead distribution: the log-normal's quantiles by formula, and the
// draws follow them.
func TestLeadQuantiles(t *testing.T) {
	d := DefaultLead
	if q := d.Quantile(0.5); q != 56*time.Millisecond {
		t.Fatalf("median %v", q)
	}
	if q := d.Quantile(0.9); q < 103*time.Millisecond || q > 104*time.Millisecond { // 56 ms x e^(0.48 x 1.2816)
		t.Fatalf("p90 %v", q)
	}
	if q := d.Quantile(0.1); q < 30*time.Millisecond || q > 31*time.Millisecond {
		t.Fatalf("p10 %v", q)
	}
	if q := PaperLead.Quantile(0.5); q != 146*time.Millisecond {
		t.Fatalf("paper median %v", q)
	}
	r := newRun(t, oneMs()).m.rng
	xs := make([]time.Duration, 20000)
	for i := range xs {
		xs[i] = d.Draw(r)
	}
	for _, p := range []float64{0.1, 0.5, 0.9} {
		if got, want := DurationQuantile(xs, p), d.Quantile(p); math.Abs(float64(got-want)) > 0.04*float64(want) {
			t.Errorf("p%.0f of draws %v, formula %v", p*100, got, want)
		}
	}
}

// FitVariability recovers what Trace was drawn with.
func TestVariabilityRefit(t *testing.T) {
	v := MeasuredVariability[signaling.CellMmWave]
	tr, err := v.Trace(500, 2000*time.Second, 11)
	if err != nil {
		t.Fatal(err)
	}
	var seg []float64
	for b := time.Duration(0); b < 2000*time.Second; b += v.Interval {
		seg = append(seg, float64(tr.Bytes(b, b+v.Interval))*8/v.Interval.Seconds()/1e6)
	}
	f, err := FitVariability([][]float64{seg}, v.Interval, len(v.Quantiles))
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range ACFLags {
		if want := v.ModelACF(k); math.Abs(f.ACF[i]-want) > 0.08 {
			t.Errorf("ACF at lag %d: %.3f, drawn with %.3f", k, f.ACF[i], want)
		}
	}
	// the refit normalises by the sample mean, which Trace set to 500
	var sum float64
	for _, x := range seg {
		sum += x
	}
	if m := sum / float64(len(seg)); math.Abs(m-500) > 15 {
		t.Errorf("trace mean %.1f Mbit/s, asked 500", m)
	}
	for i := 1; i < len(v.Quantiles)-1; i++ {
		if want := v.Quantiles[i] / v.Mean(); math.Abs(f.Quantiles[i]-want) > 0.04 {
			t.Errorf("quantile %d: %.3f, drawn with %.3f", i, f.Quantiles[i], want)
		}
	}
}

// The capacity model keeps the measured time scales: a long trace of each
// type has, at 0.1, 0.5, 1, 2 and 5 s, the autocorrelation of the normal
// scores measured in the UDP logs (within 0.1; the model is two AR(1)
// components, so it cannot follow mmWave's negative 5 s value, -0.09,
// which it meets at +0.02), and the same seed gives the same trace.
func TestVariabilityKeepsMeasuredTimeScales(t *testing.T) {
	for typ, v := range MeasuredVariability {
		tr, err := v.Trace(100, 20000*time.Second, 5)
		if err != nil {
			t.Fatal(err)
		}
		var seg []float64
		for b := time.Duration(0); b < 20000*time.Second; b += v.Interval {
			seg = append(seg, float64(tr.Bytes(b, b+v.Interval)))
		}
		got := ScoreACF([][]float64{seg}, ACFLags)
		for i, k := range ACFLags {
			if math.Abs(got[i]-v.ACF[i]) > 0.12 {
				t.Errorf("%v: ACF at %v: trace %.3f, measured %.3f", typ, time.Duration(k)*v.Interval, got[i], v.ACF[i])
			}
		}
		again, _ := v.Trace(100, 20000*time.Second, 5)
		if again.Bytes(0, 20000*time.Second) != tr.Bytes(0, 20000*time.Second) || again.Bytes(1234*time.Second, 1300*time.Second) != tr.Bytes(1234*time.Second, 1300*time.Second) {
			t.Errorf("%v: same seed, different trace", typ)
		}
	}
}

// FitTwoAR recovers the components of a known sum of two AR(1).
func TestFitTwoAR(t *testing.T) {
	v := Variability{Rho: 0.3, RhoSlow: 0.98, SlowWeight: 0.6}
	acf := make([]float64, len(ACFLags))
	for i, k := range ACFLags {
		acf[i] = v.ModelACF(k)
	}
	rf, rs, w, err := FitTwoAR(ACFLags, acf)
	if err != nil || math.Abs(rf-0.3) > 0.01 || math.Abs(rs-0.98) > 0.001 || math.Abs(w-0.6) > 0.01 {
		t.Fatalf("fit %.3f %.4f %.3f (%v), want 0.3 0.98 0.6", rf, rs, w, err)
	}
	if _, _, _, err := FitTwoAR([]int{1, 5}, []float64{0.5, 0.2}); err == nil {
		t.Fatal("two lags fitted three parameters")
	}
}

// The recorded figures are what the fits give on the shared data.
func TestFittedConstantsFromData(t *testing.T) {
	root := filepath.Join(testDataDir(), "m2ho-mobicom24", "measurements")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("shared data absent (%s): the recorded constants stand in", root)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*.csv"))
	seen := map[[32]byte]bool{}
	var leads []time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); !seen[h] {
			seen[h] = true
			leads = append(leads, LeadSamples(xcalEvents(t, f), time.Second)...)
		}
	}
	med, sigma, err := FitLogNormalQuantiles(leads)
	if err != nil || math.Abs(float64(med-LeadMedian)) > float64(time.Millisecond) || math.Abs(sigma-LeadSigma) > 0.01 {
		t.Fatalf("lead fit over %d samples: median %v sigma %.3f (%v); recorded %v, %.2f", len(leads), med, sigma, err, LeadMedian, LeadSigma)
	}
	if mm, ms, err := FitLogNormal(leads); err != nil || math.Abs(ms-0.77) > 0.01 || math.Abs(float64(mm-54*time.Millisecond)) > float64(time.Millisecond) {
		t.Fatalf("maximum-likelihood fit: median %v sigma %.3f (%v); CALIBRATION.md says 54.1 ms, 0.770", mm, ms, err)
	}
	segs := map[signaling.CellType][][]float64{}
	for _, d := range udpDrives(t) {
		// the mmWave edge is modelled on its own (MeasuredMmWaveEdge)
		tl := d.Timeline.WithoutEdges(MeasuredMmWaveEdge.Span())
		for k, v := range TypeSegments(d.Capacity, tl, 100*time.Millisecond) {
			segs[k] = append(segs[k], v...)
		}
	}
	for typ, want := range MeasuredVariability {
		got, err := FitVariability(segs[typ], 100*time.Millisecond, len(want.Quantiles))
		var sum float64
		for _, sg := range segs[typ] {
			for _, x := range sg {
				sum += x
			}
		}
		t.Logf("%v: n %d mean %.1f Mbit/s rho %.4f / %.4f w %.4f ACF %.3f quantiles %.3f", typ, got.N, sum/float64(got.N), got.Rho, got.RhoSlow, got.SlowWeight, got.ACF, got.Quantiles)
		if err != nil || got.N != want.N || math.Abs(got.Rho-want.Rho) > 0.001 || math.Abs(got.RhoSlow-want.RhoSlow) > 0.001 || math.Abs(got.SlowWeight-want.SlowWeight) > 0.001 {
			t.Fatalf("%v: n %d rho %.4f / %.4f w %.4f (%v); recorded n %d rho %.3f / %.3f w %.3f", typ, got.N, got.Rho, got.RhoSlow, got.SlowWeight, err, want.N, want.Rho, want.RhoSlow, want.SlowWeight)
		}
		for i := range want.ACF {
			if math.Abs(got.ACF[i]-want.ACF[i]) > 0.001 {
				t.Fatalf("%v ACF at lag %d: %.4f, recorded %.3f", typ, ACFLags[i], got.ACF[i], want.ACF[i])
			}
		}
		for i := range want.Quantiles {
			if math.Abs(got.Quantiles[i]-want.Quantiles[i]) > 0.001 {
				t.Fatalf("%v quantile %d: %.4f, recorded %.3f", typ, i, got.Quantiles[i], want.Quantiles[i])
			}
		}
	}
	t.Logf("lead n=%d median %v sigma %.3f p50 %v p90 %v", len(leads), med, sigma, DurationQuantile(leads, 0.5), DurationQuantile(leads, 0.9))
}

func xcalEvents(t *testing.T, path string) []signaling.Event {
	t.Helper()
	evs, _, errs := sigio.ReadAll(path, signaling.FormatXCAL)
	for _, e := range errs {
		var pe *signaling.ParseError
		if !errors.As(e, &pe) {
			t.Fatal(e)
		}
	}
	return Recorded(evs)
}

// measuredDrives are the distinct drives of the artifact's XCAL logs
// (measurements/*/*), each as FromEvents reads it; two files with the same
// handovers are one drive.
func measuredDrives(t *testing.T) ([]Schedule, [][]signaling.Event) {
	root := filepath.Join(testDataDir(), "m2ho-mobicom24", "measurements")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("shared data absent (%s): the recorded constants stand in", root)
	}
	files, _ := filepath.Glob(filepath.Join(root, "*", "*", "*.csv"))
	seen := map[string]bool{}
	var out []Schedule
	var logs [][]signaling.Event
	for _, f := range files {
		evs := xcalEvents(t, f)
		if len(evs) == 0 {
			continue
		}
		s := FromEvents(evs, SinceOrigin(evs[0].Time), time.Second)
		key := fmt.Sprint(s.StartType)
		for _, h := range s.Handovers {
			key += fmt.Sprintf(" %v>%v", h.At, h.ToType)
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, s)
		logs = append(logs, evs)
	}
	return out, logs
}

// measuredDwellStats is DwellStats over the measured drives' schedules.
func measuredDwellStats(t *testing.T) ([]Schedule, DwellStats) {
	ds, _ := measuredDrives(t)
	var st DwellStats
	for _, s := range ds {
		st.Add(s)
	}
	return ds, st
}

// The recorded dwells and handover split are what DwellStats gives on the
// artifact's XCAL logs.
func TestMeasuredDwellsFromData(t *testing.T) {
	ds, st := measuredDwellStats(t)
	for _, c := range []struct {
		typ   signaling.CellType
		mean  time.Duration
		vert  float64
		n, nv int
	}{{signaling.CellSub6, MeasuredDwellSub6, MeasuredVerticalSub6, 37, 9}, {signaling.CellMmWave, MeasuredDwellMmWave, MeasuredVerticalMmWave, 38, 12}} {
		got := st.MeanDwell(c.typ)
		if len(ds) != 10 || len(st.Dwells[c.typ]) != c.n || st.Vertical[c.typ] != c.nv || absDur(got-c.mean) > time.Millisecond || math.Abs(st.VerticalShare(c.typ)-c.vert) > 1e-9 {
			t.Errorf("%v over %d drives: %d dwells, mean %v, %d vertical (%.3f); recorded %d, %v, %d (%.3f)", c.typ, len(ds), len(st.Dwells[c.typ]), got, st.Vertical[c.typ], st.VerticalShare(c.typ), c.n, c.mean, c.nv, c.vert)
		}
		d := st.Dwells[c.typ]
		t.Logf("%v: n %d mean %v p10 %v p50 %v p90 %v max %v; %d horizontal, %d vertical", c.typ, len(d), got, DurationQuantile(d, .1), DurationQuantile(d, .5), DurationQuantile(d, .9), DurationQuantile(d, 1), st.Horizontal[c.typ], st.Vertical[c.typ])
	}
}

// A dwell always starts at a handover, and its serving type picks its
// distribution and the chance that the next handover is vertical: with
// per-type dwells of 4 s (sub-6) and 16 s (mmWave) the drawn means follow
// the type, and the vertical shares follow vertical_by_type; the old
// single dwell key still applies to a type dwell_by_type leaves out.
func TestSynthesizeDwellByType(t *testing.T) {
	p := Synthetic{Dwell: Dist{Kind: "fixed", Mean: 7 * time.Second},
		DwellByType:    map[string]Dist{"sub6": {Kind: "exponential", Mean: 4 * time.Second}, "mmwave": {Kind: "exponential", Mean: 16 * time.Second}},
		VerticalByType: map[string]float64{"sub6": 0.2, "mmwave": 0.6}}
	s, err := Synthesize(refs(), p, 100000*time.Second, 3)
	if err != nil {
		t.Fatal(err)
	}
	typ := map[string]signaling.CellType{}
	for _, r := range refs() {
		typ[r.ID] = r.Type
	}
	var st DwellStats
	st.Add(Schedule{StartType: typ[s.Start], Handovers: s.Handovers})
	for _, c := range []struct {
		t    signaling.CellType
		mean time.Duration
		vert float64
	}{{signaling.CellSub6, 4 * time.Second, 0.2}, {signaling.CellMmWave, 16 * time.Second, 0.6}} {
		// the 1 s floor of a dwell adds at most ~0.1 s to a 4 s mean
		if m := st.MeanDwell(c.t); math.Abs(float64(m-c.mean)) > 0.05*float64(c.mean)+float64(150*time.Millisecond) {
			t.Errorf("%v: mean dwell %v, want %v", c.t, m, c.mean)
		}
		if v := st.VerticalShare(c.t); math.Abs(v-c.vert) > 0.03 {
			t.Errorf("%v: vertical share %.3f, want %.2f", c.t, v, c.vert)
		}
	}
	p.DwellByType = map[string]Dist{"sub6": {Kind: "fixed", Mean: 3 * time.Second}}
	s, _ = Synthesize(refs(), p, 1000*time.Second, 3)
	st = DwellStats{}
	st.Add(Schedule{StartType: typ[s.Start], Handovers: s.Handovers})
	if st.MeanDwell(signaling.CellSub6) != 3*time.Second || st.MeanDwell(signaling.CellMmWave) != 7*time.Second {
		t.Errorf("dwells %v / %v, want 3 s on sub-6 and the old key's 7 s on mmWave", st.MeanDwell(signaling.CellSub6), st.MeanDwell(signaling.CellMmWave))
	}
	for _, bad := range []Synthetic{
		{Dwell: p.Dwell, DwellByType: map[string]Dist{"lte": {Kind: "fixed", Mean: time.Second}}},
		{Dwell: p.Dwell, DwellByType: map[string]Dist{"sub6": {Kind: "exponential"}}},
		{Dwell: p.Dwell, VerticalByType: map[string]float64{"mmwave": 1.5}},
		{Dwell: p.Dwell, FalseAlarmEnd: "a2"},
		{DwellByType: map[string]Dist{"sub6": {Kind: "fixed", Mean: time.Second}, "sub-6": {Kind: "fixed", Mean: time.Second}}}, // mmWave has no dwell
		{Dwell: p.Dwell, FalseAlarmResends: 2},
		{Dwell: p.Dwell, FalseAlarmEnd: "silence", FalseAlarmResends: 2},
	} {
		if _, err := Synthesize(refs(), bad, 100*time.Second, 1); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// The mixed drive takes the measured dwells and split: over a long
// synthetic drive its mean dwell per serving type and its vertical share
// per source type are the XCAL logs' (the clamps to [1 s, max] move the
// means by a few per cent).
func TestMixedDriveDwellsAsMeasured(t *testing.T) {
	md, err := Builtin("mixed-drive", LoadOptions{Duration: 80000 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	typ := map[string]signaling.CellType{}
	for _, c := range md.Config.Cells {
		typ[c.ID] = c.Type
	}
	var st DwellStats
	st.Add(Schedule{StartType: typ[md.Config.Schedule.Start], Handovers: md.Config.Schedule.Handovers})
	for _, c := range []struct {
		t    signaling.CellType
		mean time.Duration
		vert float64
	}{{signaling.CellSub6, MeasuredDwellSub6, MeasuredVerticalSub6}, {signaling.CellMmWave, MeasuredDwellMmWave, MeasuredVerticalMmWave}} {
		if m := st.MeanDwell(c.t); math.Abs(float64(m-c.mean)) > 0.08*float64(c.mean) {
			t.Errorf("%v: mean dwell %v, measured %v", c.t, m, c.mean)
		}
		if lo, min := DurationQuantile(st.VerticalDwells[c.t], 0), map[signaling.CellType]time.Duration{signaling.CellSub6: MeasuredVerticalMinDwellSub6, signaling.CellMmWave: MeasuredVerticalMinDwellMmWave}[c.t]; lo < min {
			t.Errorf("%v: a vertical handover after a dwell of %v, under the measured minimum %v", c.t, lo, min)
		}
		if v := st.VerticalShare(c.t); math.Abs(v-c.vert) > 0.04 {
			t.Errorf("%v: vertical share %.3f, measured %.3f", c.t, v, c.vert)
		}
	}
}

// --seed draws another drive: the mixed drive's handover times and its
// capacity traces change with the seed, the same seed gives the same
// drive (the bench pairs the variants of a repetition by it), and 0 keeps
// the file's seed.
func TestSeedDrawsTheSyntheticDrive(t *testing.T) {
	load := func(seed uint64) *Scenario {
		s, err := Builtin("mixed-drive", LoadOptions{Seed: seed, Duration: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	times := func(s *Scenario) []time.Duration {
		var out []time.Duration
		for _, h := range s.Config.Schedule.Handovers {
			out = append(out, h.At)
		}
		return out
	}
	capAt := func(s *Scenario) int64 { return s.Config.Cells[0].Capacity.Bytes(0, 30*time.Second) }
	def, one, two, three := load(0), load(1), load(2), load(3)
	if def.Config.Seed != 1 || !reflect.DeepEqual(times(def), times(one)) || capAt(def) != capAt(one) {
		t.Fatalf("seed 0 is not the file's seed 1: %v vs %v", times(def), times(one))
	}
	if reflect.DeepEqual(times(one), times(two)) || reflect.DeepEqual(times(two), times(three)) || reflect.DeepEqual(times(one), times(three)) {
		t.Fatalf("seeds 1, 2, 3 share handover times: %v / %v / %v", times(one), times(two), times(three))
	}
	if capAt(one) == capAt(two) {
		t.Fatal("seeds 1 and 2 share the capacity trace")
	}
	again := load(2)
	if !reflect.DeepEqual(again.Config.Schedule, two.Config.Schedule) || capAt(again) != capAt(two) {
		t.Fatal("seed 2 twice: different drives")
	}
}

// What follows a report that gets no command, in the artifact's XCAL logs:
// 16 episodes over the 10 drives; 13 end in a command after all, 1.3-2.6 s
// after the first report; none ends in an A1; 1 ends in silence and 2 run
// into the log's end, with 0, 0 and 3 re-sends; the re-sends are ~0.35 s
// apart. The recorded scenario figures follow.
func TestUnansweredReportsFromData(t *testing.T) {
	ds, logs := measuredDrives(t)
	var u Unanswered
	var st DwellStats
	for i, evs := range logs {
		u.Add(evs, time.Second, 2*time.Second, 3*time.Second)
		st.Add(ds[i])
	}
	if u.Episodes != 16 || u.Late != 13 || u.A1 != 0 || u.Silence != 1 || u.Censored != 2 || !reflect.DeepEqual(u.Resends, []int{0, 0, 3}) {
		t.Fatalf("%+v", u)
	}
	dwells := len(st.Dwells[signaling.CellSub6]) + len(st.Dwells[signaling.CellMmWave])
	if r := float64(u.Silence+u.Censored) / float64(dwells); math.Abs(r-MeasuredFalseAlarmRate) > 1e-9 {
		t.Errorf("false alarms per dwell %.4f, recorded %.4f", r, MeasuredFalseAlarmRate)
	}
	if g := DurationQuantile(u.ResendGaps, 0.5); absDur(g-MeasuredResendEvery) > time.Millisecond {
		t.Errorf("median re-send gap %v, recorded %v", g, MeasuredResendEvery)
	}
	t.Logf("%+v; re-send gaps p10 %v p50 %v p90 %v", u, DurationQuantile(u.ResendGaps, .1), DurationQuantile(u.ResendGaps, .5), DurationQuantile(u.ResendGaps, .9))
}

// The mixed drive's false alarms are the measured kind: re-sent, then
// silent (no A1), at the measured rate per dwell.
func TestMixedDriveFalseAlarmsAsMeasured(t *testing.T) {
	md, err := Builtin("mixed-drive", LoadOptions{Duration: 80000 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fas := md.Config.Schedule.FalseAlarms
	if len(fas) == 0 {
		t.Fatal("no false alarms")
	}
	for _, fa := range fas {
		if !fa.Silent || fa.Resends != MeasuredFalseAlarmResends || fa.ResendEvery != MeasuredResendEvery {
			t.Fatalf("false alarm %+v: want silent, %d re-sends every %v", fa, MeasuredFalseAlarmResends, MeasuredResendEvery)
		}
	}
	// dwells of 2 s or less carry none, so a little under the rate
	if r := float64(len(fas)) / float64(len(md.Config.Schedule.Handovers)); r > MeasuredFalseAlarmRate*1.15 || r < MeasuredFalseAlarmRate*0.7 {
		t.Errorf("false alarms per dwell %.3f, measured %.3f", r, MeasuredFalseAlarmRate)
	}
}

// Vertical handovers in the logs end long dwells only: the recorded
// minimum per source type is the shortest dwell a vertical handover ended,
// and every dwell shorter than it ended in a horizontal handover.
func TestMeasuredVerticalMinDwellFromData(t *testing.T) {
	_, st := measuredDwellStats(t)
	for _, c := range []struct {
		typ      signaling.CellType
		min      time.Duration
		nv, nsht int
	}{{signaling.CellSub6, MeasuredVerticalMinDwellSub6, 9, 12}, {signaling.CellMmWave, MeasuredVerticalMinDwellMmWave, 12, 9}} {
		vs := st.VerticalDwells[c.typ]
		lo := DurationQuantile(vs, 0)
		short := 0
		for _, d := range st.HorizontalDwells[c.typ] {
			if d < lo {
				short++
			}
		}
		t.Logf("%v: %d vertical dwells %v-%v; %d horizontal dwells shorter", c.typ, len(vs), lo, DurationQuantile(vs, 1), short)
		if len(vs) != c.nv || absDur(lo-c.min) > 5*time.Millisecond || short != c.nsht {
			t.Errorf("%v: %d vertical dwells from %v, %d shorter horizontal ones; recorded %d from %v, %d", c.typ, len(vs), lo, short, c.nv, c.min, c.nsht)
		}
	}
}

// A dwell's survival is what its draws show, clamps included.
func TestDistSurvival(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []Dist{
		{Kind: "exponential", Mean: 9919 * time.Millisecond, Min: time.Second, Max: 29 * time.Second},
		{Kind: "lognormal", Median: 3 * time.Second, Sigma: 0.8, Max: 20 * time.Second},
		{Kind: "normal", Mean: 5 * time.Second, SD: 2 * time.Second, Min: 2 * time.Second},
		{Kind: "uniform", Min: 2 * time.Second, Max: 8 * time.Second},
		{Kind: "fixed", Mean: 4 * time.Second},
	} {
		const n = 200000
		xs := make([]time.Duration, n)
		for i := range xs {
			xs[i] = d.Draw(r)
		}
		for _, x := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 3740 * time.Millisecond, 4 * time.Second, 12 * time.Second, 30 * time.Second} {
			k := 0
			for _, v := range xs {
				if v >= x {
					k++
				}
			}
			if got, want := d.survival(x), float64(k)/n; math.Abs(got-want) > 0.005 {
				t.Errorf("%s: survival(%v) %.4f, draws %.4f", d.Kind, x, got, want)
			}
		}
	}
}

// With a minimum dwell before a vertical handover, no vertical handover
// ends a shorter dwell, and each type's vertical share still holds (the
// longer dwells take it); the drive's dwells are the same draws.
func TestSynthesizeVerticalMinDwell(t *testing.T) {
	p := Synthetic{
		DwellByType: map[string]Dist{
			"sub6":   {Kind: "exponential", Mean: MeasuredDwellSub6, Min: time.Second, Max: 45 * time.Second},
			"mmwave": {Kind: "exponential", Mean: MeasuredDwellMmWave, Min: time.Second, Max: 29 * time.Second}},
		VerticalByType: map[string]float64{"sub6": MeasuredVerticalSub6, "mmwave": MeasuredVerticalMmWave},
	}
	typ := map[string]signaling.CellType{}
	for _, r := range refs() {
		typ[r.ID] = r.Type
	}
	stats := func(p Synthetic) DwellStats {
		s, err := Synthesize(refs(), p, 400000*time.Second, 9)
		if err != nil {
			t.Fatal(err)
		}
		var st DwellStats
		st.Add(Schedule{StartType: typ[s.Start], Handovers: s.Handovers})
		return st
	}
	off := stats(p)
	p.VerticalMinDwellByType = map[string]time.Duration{"sub6": MeasuredVerticalMinDwellSub6, "mmwave": MeasuredVerticalMinDwellMmWave}
	on := stats(p)
	for _, c := range []struct {
		typ  signaling.CellType
		min  time.Duration
		vert float64
	}{{signaling.CellSub6, MeasuredVerticalMinDwellSub6, MeasuredVerticalSub6}, {signaling.CellMmWave, MeasuredVerticalMinDwellMmWave, MeasuredVerticalMmWave}} {
		if lo := DurationQuantile(off.VerticalDwells[c.typ], 0); lo >= c.min {
			t.Errorf("%v without the rule: shortest vertical dwell %v, want some under %v", c.typ, lo, c.min)
		}
		if lo := DurationQuantile(on.VerticalDwells[c.typ], 0); lo < c.min {
			t.Errorf("%v: a vertical handover after %v, under the minimum %v", c.typ, lo, c.min)
		}
		if v := on.VerticalShare(c.typ); math.Abs(v-c.vert) > 0.01 {
			t.Errorf("%v: vertical share %.3f with the rule, want %.3f", c.typ, v, c.vert)
		}
		t.Logf("%v: vertical share %.3f (off %.3f), %d vertical", c.typ, on.VerticalShare(c.typ), off.VerticalShare(c.typ), on.Vertical[c.typ])
	}
	for _, bad := range []map[string]time.Duration{
		{"lte": time.Second},
		{"mmwave": -time.Second},
		{"mmwave": 30 * time.Second}, // above the type's 29 s maximum
	} {
		p.VerticalMinDwellByType = bad
		if _, err := Synthesize(refs(), p, time.Hour, 1); err == nil || !strings.Contains(err.Error(), "vertical_min_dwell_by_type") {
			t.Errorf("%v: error %v, want one naming vertical_min_dwell_by_type", bad, err)
		}
	}
}
