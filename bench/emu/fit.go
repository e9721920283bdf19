package emu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Fitted figures of the calibration (bench/emu/CALIBRATION.md gives the
// sources and the commands; the tests refit them from the shared data when
// it is present and check these constants).
const (
	// LeadMedian and LeadSigma: log-normal fit (median, σ of ln) of the
	// report→command intervals of the M2HO artifact's XCAL logs, by
	// quantiles (FitLogNormalQuantiles: the sample median, σ from the
	// p10-p90 range), because a few outliers (a 457 ms lead, leads of a
	// few ms) inflate the maximum-likelihood σ to 0.77 and push its p90 to
	// 144 ms against the measured 102 ms.
	LeadMedian = 56 * time.Millisecond
	LeadSigma  = 0.48
)

// LeadSamples are the report→command intervals of one signalling log: for
// every handover command, the time since the last measurement report
// before it (A1 and periodic reports excluded: they do not trigger a
// handover) when that report is at most maxLead old. A report answers at
// most one command.
func LeadSamples(evs []signaling.Event, maxLead time.Duration) []time.Duration {
	var out []time.Duration
	var last time.Time
	for _, e := range evs {
		switch e.Kind {
		case signaling.KindReport:
			if e.Meas != signaling.MeasA1 && e.Meas != signaling.MeasPeriodic && e.Meas != signaling.MeasUnknown {
				last = e.Time
			}
		case signaling.KindHOCommand:
			// An inferred handover (signaling/XCAL.md) carries the time of
			// the evidence that revealed it, not of a command: no lead.
			if !last.IsZero() && !e.Inferred {
				if d := e.Time.Sub(last); d >= 0 && d <= maxLead {
					out = append(out, d)
				}
			}
			last = time.Time{}
		}
	}
	return out
}

// FitLogNormal returns the median and the σ of ln of positive samples
// (maximum likelihood: the mean and standard deviation of the logs).
func FitLogNormal(xs []time.Duration) (median time.Duration, sigma float64, err error) {
	var s, s2 float64
	n := 0
	for _, x := range xs {
		if x <= 0 {
			continue
		}
		l := math.Log(float64(x))
		s += l
		s2 += l * l
		n++
	}
	if n < 2 {
		return 0, 0, errors.New("lognormal fit: fewer than 2 positive samples")
	}
	mu := s / float64(n)
	v := (s2 - float64(n)*mu*mu) / float64(n-1)
	return time.Duration(math.Exp(mu)), math.Sqrt(math.Max(v, 0)), nil
}

// FitLogNormalQuantiles is a robust log-normal fit: the sample median, and
// σ = (ln p90 - ln p10) / (2 · 1.2816), which matches the p10 and p90 of a
// log-normal exactly.
func FitLogNormalQuantiles(xs []time.Duration) (median time.Duration, sigma float64, err error) {
	if len(xs) < 10 {
		return 0, 0, errors.New("lognormal quantile fit: fewer than 10 samples")
	}
	p10, p50, p90 := DurationQuantile(xs, 0.1), DurationQuantile(xs, 0.5), DurationQuantile(xs, 0.9)
	if p10 <= 0 {
		return 0, 0, errors.New("lognormal quantile fit: p10 is not positive")
	}
	z90 := math.Sqrt2 * math.Erfinv(0.8)
	return p50, (math.Log(float64(p90)) - math.Log(float64(p10))) / (2 * z90), nil
}

// DurationQuantile is the p-quantile (0..1, linear interpolation) of xs.
func DurationQuantile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	f := p * float64(len(s)-1)
	lo := int(math.Floor(f))
	hi := min(lo+1, len(s)-1)
	return s[lo] + time.Duration(float64(s[hi]-s[lo])*(f-float64(lo)))
}

// ServingTimeline is the serving cell type over a run's time, from a
// signalling log's handover commands (LTE targets count as sub-6: the
// data then rides the LTE anchor or the sub-6 cell).
type ServingTimeline struct {
	at    []time.Duration
	types []signaling.CellType
	first signaling.CellType
}

// NewServingTimeline reads the commands of evs, placed by since.
func NewServingTimeline(evs []signaling.Event, since func(time.Time) time.Duration) ServingTimeline {
	tl := ServingTimeline{first: signaling.CellUnknown}
	for _, e := range evs {
		if e.Kind != signaling.KindHOCommand {
			continue
		}
		if tl.first == signaling.CellUnknown {
			tl.first = dataType(e.Serving.Type)
		}
		tl.at = append(tl.at, since(e.Time))
		tl.types = append(tl.types, dataType(e.Target.Type))
	}
	if tl.first == signaling.CellUnknown {
		tl.first = signaling.CellSub6
	}
	return tl
}

func dataType(t signaling.CellType) signaling.CellType {
	if t == signaling.CellMmWave {
		return t
	}
	return signaling.CellSub6
}

// At is the type serving at t.
func (tl ServingTimeline) At(t time.Duration) signaling.CellType {
	k := sort.Search(len(tl.at), func(i int) bool { return tl.at[i] > t })
	if k == 0 {
		return tl.first
	}
	return tl.types[k-1]
}

// Variability is a per-cell-type model of how a cell's capacity varies
// around its mean, every Interval: the marginal distribution of the
// normalised capacity (capacity / the type's mean) as quantiles, and the
// autocorrelation of its normal scores (a Gaussian copula) as the sum of
// two AR(1) components, a fast one (fading, scheduling) and a slow one
// (load and shadowing that hold for seconds):
// ACF(k) = (1-SlowWeight)·Rho^k + SlowWeight·RhoSlow^k. Trace draws a
// capacity series with both, so a synthetic cell varies as the measured
// cells of its type did, at 0.1 s and at 5 s alike.
type Variability struct {
	Interval time.Duration
	// Quantiles[i] is the normalised capacity at probability
	// i/(len(Quantiles)-1); non-decreasing, mean ~1.
	Quantiles []float64
	// Rho is the fast component's autocorrelation at one Interval (with
	// SlowWeight 0, the lag-1 autocorrelation of the normal scores).
	Rho float64
	// RhoSlow and SlowWeight are the slow component's autocorrelation at
	// one Interval and its share of the variance (0: one AR(1)).
	RhoSlow    float64
	SlowWeight float64
	// N is the number of samples fitted and ACF the measured
	// autocorrelation of the normal scores at ACFLags (informational).
	N   int
	ACF []float64
}

// ModelACF is the model's autocorrelation of the normal scores at lag k
// intervals.
func (v Variability) ModelACF(k int) float64 {
	return (1-v.SlowWeight)*math.Pow(v.Rho, float64(k)) + v.SlowWeight*math.Pow(v.RhoSlow, float64(k))
}

// FitTwoAR fits ACF(k) = (1-w)·rf^k + w·rs^k (0 <= rf <= rs < 1, 0 <= w
// <= 1) to measured autocorrelations acf at lags (in intervals) by least
// squares: a grid over rf (step 0.005) and rs (step 0.0005), w in closed
// form for each pair. Deterministic. NaN lags are skipped.
func FitTwoAR(lags []int, acf []float64) (rf, rs, w float64, err error) {
	if len(lags) != len(acf) {
		return 0, 0, 0, errors.New("two-AR fit: one autocorrelation per lag")
	}
	var ks []float64
	var ys []float64
	for i, k := range lags {
		if !math.IsNaN(acf[i]) && k > 0 {
			ks = append(ks, float64(k))
			ys = append(ys, acf[i])
		}
	}
	if len(ks) < 3 {
		return 0, 0, 0, fmt.Errorf("two-AR fit: %d usable lags, need 3", len(ks))
	}
	best := math.Inf(1)
	for i := 0; i <= 198; i++ {
		f := float64(i) * 0.005
		for j := 0; j < 2000; j++ {
			sl := float64(j) * 0.0005
			if sl < f {
				continue
			}
			// y - f^k = w (s^k - f^k): w by least squares, clamped
			var num, den float64
			for n, k := range ks {
				a, b := math.Pow(f, k), math.Pow(sl, k)
				num += (ys[n] - a) * (b - a)
				den += (b - a) * (b - a)
			}
			ww := 0.0
			if den > 0 {
				ww = math.Min(1, math.Max(0, num/den))
			}
			var sse float64
			for n, k := range ks {
				e := ys[n] - ((1-ww)*math.Pow(f, k) + ww*math.Pow(sl, k))
				sse += e * e
			}
			if sse < best-1e-15 {
				best, rf, rs, w = sse, f, sl, ww
			}
		}
	}
	return rf, rs, w, nil
}

// FitVariability fits a Variability to segments of consecutive capacity
// samples (Mbps, one per interval) of one cell type: each segment is a
// stretch of one log under one serving type, so no lag pair spans a
// handover or two logs. nq quantiles (>= 2).
func FitVariability(segs [][]float64, interval time.Duration, nq int) (Variability, error) {
	if nq < 2 {
		return Variability{}, errors.New("variability fit: need at least 2 quantiles")
	}
	var all []float64
	for _, s := range segs {
		all = append(all, s...)
	}
	if len(all) < 10 {
		return Variability{}, fmt.Errorf("variability fit: %d samples, need at least 10", len(all))
	}
	var mean float64
	for _, x := range all {
		mean += x
	}
	mean /= float64(len(all))
	if !(mean > 0) {
		return Variability{}, errors.New("variability fit: mean capacity is 0")
	}
	sorted := append([]float64(nil), all...)
	sort.Float64s(sorted)
	v := Variability{Interval: interval, Quantiles: make([]float64, nq), N: len(all)}
	for i := range v.Quantiles {
		f := float64(i) / float64(nq-1) * float64(len(sorted)-1)
		lo := int(math.Floor(f))
		hi := min(lo+1, len(sorted)-1)
		v.Quantiles[i] = (sorted[lo] + (sorted[hi]-sorted[lo])*(f-float64(lo))) / mean
	}
	// The autocorrelation of the normal scores at ACFLags, and the two
	// AR(1) components fitted to it; a set too short for the lags keeps
	// one AR(1) at its lag-1 autocorrelation.
	v.ACF = scoreACF(segs, sorted, ACFLags)
	if rf, rs, w, err := FitTwoAR(ACFLags, v.ACF); err == nil {
		v.Rho, v.RhoSlow, v.SlowWeight = rf, rs, w
	} else if !math.IsNaN(v.ACF[0]) {
		v.Rho = v.ACF[0]
	}
	return v, nil
}

// ACFLags are the lags, in 0.1 s intervals, at which the calibration
// compares the measured and the modelled autocorrelation of the normal
// scores: 0.1, 0.5, 1, 2 and 5 s.
var ACFLags = []int{1, 5, 10, 20, 50}

// ScoreACF is the autocorrelation of the normal scores of segs (ranked
// over all their samples, mid-ranks for ties) at each lag, in intervals,
// over the pairs inside one segment: a lag no segment is long enough for
// gives NaN.
func ScoreACF(segs [][]float64, lags []int) []float64 {
	var all []float64
	for _, s := range segs {
		all = append(all, s...)
	}
	sort.Float64s(all)
	return scoreACF(segs, all, lags)
}

func scoreACF(segs [][]float64, sorted []float64, lags []int) []float64 {
	score := func(x float64) float64 {
		lo := sort.SearchFloat64s(sorted, x)
		hi := sort.Search(len(sorted), func(i int) bool { return sorted[i] > x })
		p := (float64(lo+hi)/2 + 0.5) / float64(len(sorted)+1)
		return math.Sqrt2 * math.Erfinv(2*p-1)
	}
	z := make([][]float64, len(segs))
	for i, s := range segs {
		z[i] = make([]float64, len(s))
		for j, x := range s {
			z[i][j] = score(x)
		}
	}
	out := make([]float64, len(lags))
	for li, lag := range lags {
		var sxy, sxx, syy, sx, sy float64
		n := 0
		for _, s := range z {
			for i := lag; i < len(s); i++ {
				a, b := s[i-lag], s[i]
				sx += a
				sy += b
				sxy += a * b
				sxx += a * a
				syy += b * b
				n++
			}
		}
		out[li] = math.NaN()
		if n >= 2 {
			fn := float64(n)
			cov := sxy/fn - sx/fn*sy/fn
			if den := math.Sqrt((sxx/fn - sx*sx/fn/fn) * (syy/fn - sy*sy/fn/fn)); den > 0 {
				out[li] = cov / den
			}
		}
	}
	return out
}

func (v Variability) validate(field string) error {
	if v.Interval <= 0 {
		return fmt.Errorf("%s.interval: must be > 0", field)
	}
	if len(v.Quantiles) < 2 {
		return fmt.Errorf("%s.quantiles: need at least 2", field)
	}
	for i, q := range v.Quantiles {
		if !(q >= 0) || (i > 0 && q < v.Quantiles[i-1]) {
			return fmt.Errorf("%s.quantiles[%d]: must be >= 0 and non-decreasing", field, i)
		}
	}
	if !(v.Rho > -1 && v.Rho < 1) {
		return fmt.Errorf("%s.rho: %v must be in (-1, 1)", field, v.Rho)
	}
	if !(v.SlowWeight >= 0 && v.SlowWeight <= 1) {
		return fmt.Errorf("%s.slow_weight: %v must be in [0, 1]", field, v.SlowWeight)
	}
	if v.SlowWeight > 0 && !(v.RhoSlow > -1 && v.RhoSlow < 1) {
		return fmt.Errorf("%s.rho_slow: %v must be in (-1, 1)", field, v.RhoSlow)
	}
	return nil
}

// Mean is the mean of the interpolated quantile function (what Trace's
// draws average to before it rescales them to exactly the mean asked for).
func (v Variability) Mean() float64 {
	var s float64
	for i := 1; i < len(v.Quantiles); i++ {
		s += (v.Quantiles[i-1] + v.Quantiles[i]) / 2
	}
	return s / float64(len(v.Quantiles)-1)
}

// quantile maps a probability to a normalised capacity.
func (v Variability) quantile(p float64) float64 {
	f := p * float64(len(v.Quantiles)-1)
	lo := int(math.Floor(f))
	if lo >= len(v.Quantiles)-1 {
		return v.Quantiles[len(v.Quantiles)-1]
	}
	if lo < 0 {
		return v.Quantiles[0]
	}
	return v.Quantiles[lo] + (v.Quantiles[lo+1]-v.Quantiles[lo])*(f-float64(lo))
}

// Trace draws a capacity of mean meanMbps over [0, length), one value per
// Interval: two unit AR(1) processes a_k = ρ·a_{k-1} + √(1-ρ²)·ε_k and
// b_k = ρ_s·b_{k-1} + √(1-ρ_s²)·η_k, z_k = √(1-w)·a_k + √w·b_k (a unit
// normal with the model's autocorrelation), capacity_k = mean ·
// Q(Φ(z_k)) / v.Mean() (Q interpolates the quantiles linearly; the
// division makes the expected mean exactly meanMbps). With w = 0 the slow
// component draws nothing, so a one-AR(1) model keeps its old traces.
// The same seed gives the same trace. The Series repeats after length.
func (v Variability) Trace(meanMbps float64, length time.Duration, seed uint64) (*Series, error) {
	if err := v.validate("variability"); err != nil {
		return nil, err
	}
	if !(meanMbps > 0) || length < v.Interval {
		return nil, fmt.Errorf("variability trace: mean %v Mbps and length %v (need > 0 and >= one interval)", meanMbps, length)
	}
	n := int(length / v.Interval)
	r := rand.New(rand.NewPCG(seed, 0x766172))
	ends := make([]time.Duration, n)
	segs := make([]int64, n)
	a := r.NormFloat64()
	c := math.Sqrt(1 - v.Rho*v.Rho)
	var b, cs float64
	slow := v.SlowWeight > 0
	if slow {
		b = r.NormFloat64()
		cs = math.Sqrt(1 - v.RhoSlow*v.RhoSlow)
	}
	wf, ws := math.Sqrt(1-v.SlowWeight), math.Sqrt(v.SlowWeight)
	bytesPer := meanMbps * 1e6 / 8 * v.Interval.Seconds() / v.Mean()
	for k := range n {
		if k > 0 {
			a = v.Rho*a + c*r.NormFloat64()
			if slow {
				b = v.RhoSlow*b + cs*r.NormFloat64()
			}
		}
		z := a
		if slow {
			z = wf*a + ws*b
		}
		p := 0.5 * (1 + math.Erf(z/math.Sqrt2))
		ends[k] = time.Duration(k+1) * v.Interval
		segs[k] = int64(bytesPer * v.quantile(p))
	}
	return NewSeries(ends, segs)
}

// TypeSegments cuts a capacity log into per-interval samples (Mbps) by the
// serving type at each interval's start: one segment per stretch of one
// type. Intervals are taken over [0, period) of the series.
func TypeSegments(s *Series, tl ServingTimeline, interval time.Duration) map[signaling.CellType][][]float64 {
	out := map[signaling.CellType][][]float64{}
	var cur []float64
	curT := signaling.CellUnknown
	for t := time.Duration(0); t+interval <= s.Period(); t += interval {
		ty := tl.At(t)
		if ty != curT && len(cur) > 0 {
			out[curT] = append(out[curT], cur)
			cur = nil
		}
		curT = ty
		cur = append(cur, float64(s.Bytes(t, t+interval))*8/interval.Seconds()/1e6)
	}
	if len(cur) > 0 {
		out[curT] = append(out[curT], cur)
	}
	return out
}

// RefineShift finds the shift of a signalling log against a capacity log
// that best matches the capacity steps of the vertical handovers: the
// shift (within ±limit, in steps of step) maximising the difference
// between the mean log-capacity of the intervals served by mmWave and of
// those served by sub-6 when every event is moved by the shift. A log
// without both types gives 0, false. The timestamps of the two logs come
// from different clocks (the UE's for XCAL, the iperf3 host's, rounded
// down to the second, for the capacity); this removes what they leave.
func RefineShift(s *Series, tl ServingTimeline, limit, step time.Duration) (time.Duration, bool) {
	const iv = 100 * time.Millisecond
	n := int(s.Period() / iv)
	if n < 2 || step <= 0 {
		return 0, false
	}
	logc := make([]float64, n)
	for i := range logc {
		t := time.Duration(i) * iv
		logc[i] = math.Log(1 + float64(s.Bytes(t, t+iv))*8/iv.Seconds()/1e6)
	}
	best, bestScore, found := time.Duration(0), math.Inf(-1), false
	for sh := -limit; sh <= limit; sh += step {
		var sm, ss float64
		var nm, ns int
		for i, c := range logc {
			if tl.At(time.Duration(i)*iv-sh) == signaling.CellMmWave {
				sm += c
				nm++
			} else {
				ss += c
				ns++
			}
		}
		if nm == 0 || ns == 0 {
			continue
		}
		// ties go to the smallest |shift|: the timestamps are the prior
		if sc := sm/float64(nm) - ss/float64(ns); sc > bestScore+1e-12 || (math.Abs(sc-bestScore) <= 1e-12 && absDur(sh) < absDur(best)) {
			best, bestScore, found = sh, sc, true
		}
	}
	return best, found
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Shifted moves a ServingTimeline by d (events later by d).
func (tl ServingTimeline) Shifted(d time.Duration) ServingTimeline {
	c := tl
	c.at = make([]time.Duration, len(tl.at))
	for i, t := range tl.at {
		c.at[i] = t + d
	}
	return c
}

// MeasuredVariability is FitVariability over the M2HO artifact's four
// 0.1 s UDP saturation logs of 2023-02-16 (udp-bw-jitter-{1..4}), each
// interval typed by the serving cell of its XCAL log (bw-{1..4}-ho.csv,
// aligned by timestamps and refined by RefineShift: -1.8, -1.5, -1.2,
// -1.4 s), 21 quantiles; the 5 s before each mmWave -> sub-6 command
// left out (WithoutEdges: the edge is MeasuredMmWaveEdge, modelled on its
// own). sub-6: 1439 samples, mean 171.7 Mbps; mmWave: 761 samples, mean
// 1198.9 Mbps (1018.8 with the edges). The sub-6 normal scores
// decorrelate far slower than one AR(1) at their lag-1 value (0.70 at
// 0.1 s, still 0.50 at 5 s); mmWave's off the edge within ~1 s (0.66 at
// 0.1 s, 0.06 at 1 s): two components fitted to ACFLags (CALIBRATION.md
// has the table). With the edges counted as mmWave's own variability
// (the fit before 2026-12-07 session 31) its marginal was bimodal (15 %
// of the intervals under 0.25 of the mean) and it had a slow component
// (0.25 at 2 s): most of both was the edges.
var MeasuredVariability = map[signaling.CellType]Variability{
	signaling.CellSub6: {Interval: 100 * time.Millisecond, Rho: 0.115, RhoSlow: 0.994, SlowWeight: 0.664, N: 1439,
		ACF: []float64{0.698, 0.666, 0.624, 0.558, 0.504},
		Quantiles: []float64{
			0, 0.205, 0.384, 0.472, 0.542, 0.603, 0.667, 0.711, 0.773, 0.839, 0.909,
			1.008, 1.083, 1.195, 1.297, 1.399, 1.490, 1.580, 1.704, 1.874, 3.167}},
	signaling.CellMmWave: {Interval: 100 * time.Millisecond, Rho: 0, RhoSlow: 0.813, SlowWeight: 0.821, N: 761,
		ACF: []float64{0.660, 0.325, 0.060, 0.023, 0.003},
		Quantiles: []float64{
			0, 0.258, 0.567, 0.705, 0.798, 0.878, 0.935, 1.006, 1.043, 1.070, 1.079,
			1.088, 1.097, 1.104, 1.119, 1.133, 1.160, 1.203, 1.272, 1.456, 3.855}},
}

// Measured per-type link figures (CALIBRATION.md): base RTT is the
// minimum ping RTT (udp-ping-{1..4}, 2023-02-16, run alongside the UDP
// saturation) per serving type; the queueing delay under saturation is the
// median ping RTT minus that base; the mmWave buffer is that delay times
// the type's mean UDP capacity (MeasuredVariability's means). The sub-6
// buffer is the queue the artifact's TCP flows had in the buffer when it
// overflowed (the median over the tail drops between handovers,
// TCPSenderStats): the median ping under UDP saturation is not the full
// buffer (its p90 was 394-564 ms), and with 968 KB the emulated CUBIC's
// sRTT on sub-6 was 29 / 49 / 92 ms (p10 / p50 / p90) against the
// measured 53.5 / 75.8 / 125.2 ms (CALIBRATION.md, "Why CUBIC gets 68 %
// of sub-6").
const (
	MeasuredRTTSub6      = 27100 * time.Microsecond
	MeasuredRTTMmWave    = 26800 * time.Microsecond
	MeasuredQueueSub6    = 45100 * time.Microsecond // 72.2 - 27.1 ms
	MeasuredQueueMmWave  = 18200 * time.Microsecond // 45.0 - 26.8 ms
	MeasuredMbpsSub6     = 171.7
	MeasuredMbpsMmWave   = 1018.8    // all mmWave intervals; 1198.9 off the edge (MeasuredVariability)
	MeasuredBufferSub6   = 1_387_000 // the queue at the artifact's TCP tail drops on sub-6 (MeasuredTCP); the pings gave 968 KB = 45.1 ms x 171.7 Mbit/s
	MeasuredBufferMmWave = 2_318_000 // 18.2 ms x 1018.8 Mbit/s
	// MeasuredFlushHoles is Finding 2's share of handovers whose flush
	// has holes (M2HO MobiCom'24 §3.3: 18.4 %).
	MeasuredFlushHoles = 0.184
)

// Recorded drops the handovers the XCAL reader inferred (signaling/XCAL.md:
// SN releases and anchor handovers that the export does not show). They are
// ground truth for scoring the predictor, but they carry the time of the
// evidence that revealed them (up to a second after the fact), so as
// handovers of an emulated drive they would misplace the capacity step, the
// lead fit and the alignment; and a phone's own signalling feed shows the
// real message, never an inference. The emulator replays what the log
// records; the capacity log of a drive already shows what a release did.
func Recorded(evs []signaling.Event) []signaling.Event {
	out := evs[:0:0]
	for _, e := range evs {
		if !e.Inferred {
			out = append(out, e)
		}
	}
	return out
}

// DwellStats gathers, over the schedules of measured drives (FromEvents),
// the dwell between two consecutive handovers by the serving type during
// it, and the horizontal and vertical handovers by their source type. The
// stretch before a log's first handover and after its last are censored
// (the log starts or ends inside them) and left out. LTE counts as sub-6
// (the data rides the anchor or the sub-6 leg) in the dwells; a handover
// from LTE alone (SN addition) is neither horizontal nor vertical.
type DwellStats struct {
	Dwells     map[signaling.CellType][]time.Duration
	Horizontal map[signaling.CellType]int
	Vertical   map[signaling.CellType]int
	// VerticalDwells and HorizontalDwells split Dwells by the handover
	// that ended each.
	VerticalDwells, HorizontalDwells map[signaling.CellType][]time.Duration
}

// Add counts one drive's schedule.
func (d *DwellStats) Add(s Schedule) {
	if d.Dwells == nil {
		d.Dwells = map[signaling.CellType][]time.Duration{}
		d.Horizontal = map[signaling.CellType]int{}
		d.Vertical = map[signaling.CellType]int{}
		d.VerticalDwells = map[signaling.CellType][]time.Duration{}
		d.HorizontalDwells = map[signaling.CellType][]time.Duration{}
	}
	raw := s.StartType
	for i, h := range s.Handovers {
		cur, to := dataType(raw), dataType(h.ToType)
		var dwell time.Duration
		if i > 0 {
			dwell = h.At - s.Handovers[i-1].At
			d.Dwells[cur] = append(d.Dwells[cur], dwell)
		}
		switch {
		case raw == signaling.CellLTE:
			// an SN addition from the anchor alone: not a handover
			// between two cells of the emulated kind
		case to == cur:
			d.Horizontal[cur]++
			if i > 0 {
				d.HorizontalDwells[cur] = append(d.HorizontalDwells[cur], dwell)
			}
		default:
			d.Vertical[cur]++
			if i > 0 {
				d.VerticalDwells[cur] = append(d.VerticalDwells[cur], dwell)
			}
		}
		raw = h.ToType
	}
}

// MeanDwell is the mean of the dwells on t.
func (d DwellStats) MeanDwell(t signaling.CellType) time.Duration {
	xs := d.Dwells[t]
	if len(xs) == 0 {
		return 0
	}
	var s time.Duration
	for _, x := range xs {
		s += x
	}
	return s / time.Duration(len(xs))
}

// VerticalShare is the share of handovers from t that change the type.
func (d DwellStats) VerticalShare(t signaling.CellType) float64 {
	n := d.Horizontal[t] + d.Vertical[t]
	if n == 0 {
		return 0
	}
	return float64(d.Vertical[t]) / float64(n)
}

// Measured dwells and handover split of the M2HO artifact's XCAL logs
// (DwellStats over the 10 distinct drives of measurements/*/*: 16/2-ho.csv
// and 16/bw-2-ho.csv are one drive; CALIBRATION.md has the quantiles).
// The dwell's maximum-likelihood exponential is its mean.
const (
	MeasuredDwellSub6      = 10_768 * time.Millisecond // 37 dwells
	MeasuredDwellMmWave    = 9_919 * time.Millisecond  // 38 dwells
	MeasuredVerticalSub6   = 9.0 / 37                  // 28 horizontal, 9 vertical
	MeasuredVerticalMmWave = 12.0 / 38                 // 26 horizontal, 12 vertical
)

// Measured shortest dwell that ends in a vertical handover, per source
// type (DwellStats.VerticalDwells over the same drives). Every vertical
// handover of the logs ended a dwell of at least this (sub-6 → mmWave 9,
// 5.97-13.28 s; mmWave → sub-6 12, 3.74-26.86 s), and every shorter dwell
// ended in a horizontal one (sub-6 12 of 37 dwells, mmWave 9 of 38): the
// short dwells are ping-pongs between neighbours of one layer (an A3, or
// an anchor handover moving the SN along), while leaving a layer follows
// its coverage fading (the mmWave A2 comes ~1.5 s before the command, its
// edge 5 s before) or a search for the other layer.
const (
	MeasuredVerticalMinDwellSub6   = 5_970 * time.Millisecond
	MeasuredVerticalMinDwellMmWave = 3_740 * time.Millisecond
)

// Unanswered is what a signalling log shows after a measurement report
// that no handover command follows within maxLead (A1, periodic and
// unknown reports excluded). Such a report opens an episode; the reports
// that follow it at most resendGap apart, with no command between, belong
// to it, and those of its first report's event and neighbour are its
// re-sends (a report is re-sent every reportInterval while its condition
// holds, TS 38.331 §5.5.4). The episode then ends in one of: a command
// within horizon of its last report (Late: the handover came after all,
// typically an A2 on mmWave, then a B1 and the command 1.2-2.6 s after the
// A2), an A1 (the condition left), the log's end within horizon
// (Censored), or nothing (Silence).
type Unanswered struct {
	Episodes, Late, A1, Silence, Censored int
	// Resends counts the re-sends of the episodes that end in A1,
	// Silence or Censored (the false alarms), ResendGaps the gaps
	// between consecutive reports of every episode.
	Resends    []int
	ResendGaps []time.Duration
	// LateAfter is, for Late episodes, first report → command.
	LateAfter []time.Duration
}

// Add counts the episodes of one log.
func (u *Unanswered) Add(evs []signaling.Event, maxLead, resendGap, horizon time.Duration) {
	counted := func(e signaling.Event) bool {
		return e.Kind == signaling.KindReport && e.Meas != signaling.MeasA1 && e.Meas != signaling.MeasPeriodic && e.Meas != signaling.MeasUnknown
	}
	if len(evs) == 0 {
		return
	}
	end := evs[len(evs)-1].Time
	answered := func(i int) bool {
		for _, f := range evs[i+1:] {
			if f.Time.Sub(evs[i].Time) > maxLead {
				return false
			}
			if f.Kind == signaling.KindHOCommand && !f.Inferred {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(evs); i++ {
		if !counted(evs[i]) || answered(i) {
			continue
		}
		first, last, n := evs[i].Time, evs[i].Time, 0
		lastSame := first
		j := i + 1
		outcome := ""
		for ; j < len(evs) && outcome == ""; j++ {
			f := evs[j]
			if f.Time.Sub(last) > horizon {
				outcome = "silence"
				break
			}
			switch {
			case f.Kind == signaling.KindHOCommand && !f.Inferred:
				outcome = "late"
				u.LateAfter = append(u.LateAfter, f.Time.Sub(first))
			case f.Kind == signaling.KindReport && f.Meas == signaling.MeasA1:
				outcome = "a1"
			case counted(f) && f.Time.Sub(last) <= resendGap:
				// the same report again is a re-send (a copy within
				// 10 ms is the same message logged twice); another
				// event keeps the episode open
				if f.Meas == evs[i].Meas && f.Neighbor.ID == evs[i].Neighbor.ID {
					if g := f.Time.Sub(lastSame); g >= 10*time.Millisecond {
						u.ResendGaps = append(u.ResendGaps, g)
						n++
						lastSame = f.Time
					}
				}
				last = f.Time
			case counted(f):
				// a report after a longer gap opens the next episode
				outcome = "silence"
				j--
			}
		}
		if outcome == "" {
			outcome = "silence"
			if end.Sub(last) < horizon {
				outcome = "censored"
			}
		}
		u.Episodes++
		switch outcome {
		case "late":
			u.Late++
		case "a1":
			u.A1++
			u.Resends = append(u.Resends, n)
		case "silence":
			u.Silence++
			u.Resends = append(u.Resends, n)
		case "censored":
			u.Censored++
			u.Resends = append(u.Resends, n)
		}
		i = j - 1
	}
}

// Measured false alarms (Unanswered over the XCAL logs of the 10 drives,
// CALIBRATION.md): the episodes that end in silence or run into the
// log's end (1 + 2; none ends in an A1) per dwell (75), their mean
// re-sends (0, 0, 3), and the median gap between re-sends.
const (
	MeasuredFalseAlarmRate    = 3.0 / 75
	MeasuredFalseAlarmResends = 1
	MeasuredResendEvery       = 354 * time.Millisecond
)
