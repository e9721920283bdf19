package emu

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// An mmWave cell at its edge. A handover from mmWave down to sub-6 is the
// network's answer to the mmWave link getting worse (an NR A2, the SCG
// failing or released, an LTE B1 then adding a sub-6 cell: TS 37.340
// §10.3-10.5), so in the seconds before it the mmWave cell carries less
// and less. In the artifact's 0.1 s UDP logs of 2023-02-16, whose drives
// all have such a handover, the capacity falls from ~1.3 Gbit/s 6 s
// before the command to ~0.1 Gbit/s in its last 2.5 s, in each of the
// four (CALIBRATION.md, "The mmWave edge"); the TCP senders of 2023-02-13
// slowed down 1-5 s before it in four of five. The mmWave → mmWave and
// sub-6 → mmWave handovers of the same logs show no such decline (only
// the interruption). A synthetic drive whose capacity ignores the
// handover schedule would move a flow from mmWave to sub-6 at full
// mmWave rate, which the measured flows never did.

// EdgeProfile is the mean capacity of an mmWave cell before a handover
// down to sub-6, as a fraction of the cell's mean, per Bin: Factors[0] is
// the bin starting Span before the command, the last one ends at it.
type EdgeProfile struct {
	Bin     time.Duration
	Factors []float64
	N       int // handovers fitted (informational)
}

// Span is how long before the command the profile starts.
func (e EdgeProfile) Span() time.Duration { return e.Bin * time.Duration(len(e.Factors)) }

func (e EdgeProfile) validate(field string) error {
	if e.Bin <= 0 || len(e.Factors) == 0 {
		return fmt.Errorf("%s: needs a bin > 0 and at least one factor", field)
	}
	for i, f := range e.Factors {
		if !(f >= 0 && f <= 1) {
			return fmt.Errorf("%s: factor[%d] = %v, want 0..1 (the edge only lowers a cell's capacity)", field, i, f)
		}
	}
	return nil
}

// MeasuredMmWaveEdge is FitMmWaveEdge over the four 0.1 s UDP saturation
// logs of 2023-02-16 (udp-bw-jitter-{1..4} with bw-{1..4}-ho.csv, aligned
// as MeasuredVariability's), 0.5 s bins over the 5 s before each mmWave
// → sub-6 command, against each drive's mmWave mean outside those 5 s.
// The bins before that are at the mean (1.09, 1.02, 1.02, 1.29, 1.20,
// 1.09 over the 3 s before; CALIBRATION.md): the fall starts 5 s before
// the command and ends at ~10 % of the mean 2.5 s before it.
var MeasuredMmWaveEdge = EdgeProfile{Bin: 500 * time.Millisecond, N: 4,
	Factors: []float64{0.810, 0.545, 0.531, 0.303, 0.201, 0.058, 0.080, 0.121, 0.122, 0.110}}

// DownTransitions lists the times at which tl goes from mmWave to sub-6.
func (tl ServingTimeline) DownTransitions() []time.Duration {
	var out []time.Duration
	prev := tl.first
	for i, t := range tl.at {
		if prev == signaling.CellMmWave && tl.types[i] != signaling.CellMmWave {
			out = append(out, t)
		}
		prev = tl.types[i]
	}
	return out
}

// WithoutEdges is tl with the span before each mmWave → sub-6 transition
// typed as neither (CellUnknown), so that TypeSegments leaves the edges out
// of the per-type samples: the edge is modelled on its own (EdgeProfile)
// and must not count again as mmWave's ordinary variability.
func (tl ServingTimeline) WithoutEdges(span time.Duration) ServingTimeline {
	downs := tl.DownTransitions()
	if len(downs) == 0 || span <= 0 {
		return tl
	}
	c := ServingTimeline{first: tl.first}
	type ev struct {
		t   time.Duration
		typ signaling.CellType
	}
	var evs []ev
	for i, t := range tl.at {
		evs = append(evs, ev{t, tl.types[i]})
	}
	for _, d := range downs {
		evs = append(evs, ev{d - span, signaling.CellUnknown})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	for _, e := range evs {
		c.at = append(c.at, e.t)
		c.types = append(c.types, e.typ)
	}
	return c
}

// EdgeDrive is one capacity log with the serving timeline of its drive.
type EdgeDrive struct {
	Capacity *Series
	Timeline ServingTimeline
}

// FitMmWaveEdge averages, over every mmWave → sub-6 transition whose
// whole span was served by mmWave, the capacity per bin over the drive's
// mmWave mean outside the spans.
func FitMmWaveEdge(drives []EdgeDrive, span, bin time.Duration) (EdgeProfile, error) {
	if bin <= 0 || span < bin {
		return EdgeProfile{}, errors.New("edge fit: need span >= bin > 0")
	}
	nb := int(span / bin)
	sum := make([]float64, nb)
	n := 0
	const iv = 100 * time.Millisecond
	for _, d := range drives {
		masked := d.Timeline.WithoutEdges(span)
		var mmB int64
		var mmT time.Duration
		for t := time.Duration(0); t+iv <= d.Capacity.Period(); t += iv {
			if masked.At(t) == signaling.CellMmWave {
				mmB += d.Capacity.Bytes(t, t+iv)
				mmT += iv
			}
		}
		if mmT == 0 {
			continue
		}
		mean := float64(mmB) / mmT.Seconds()
		for _, at := range d.Timeline.DownTransitions() {
			from := at - span
			if from < 0 || at > d.Capacity.Period() || !servedThroughout(d.Timeline, from, at, signaling.CellMmWave) {
				continue
			}
			for k := range nb {
				a := from + time.Duration(k)*bin
				sum[k] += float64(d.Capacity.Bytes(a, a+bin)) / bin.Seconds() / mean
			}
			n++
		}
	}
	if n == 0 {
		return EdgeProfile{}, errors.New("edge fit: no mmWave -> sub-6 transition with a whole span of mmWave before it")
	}
	p := EdgeProfile{Bin: bin, Factors: make([]float64, nb), N: n}
	for k := range sum {
		p.Factors[k] = math.Min(1, sum[k]/float64(n))
	}
	return p, nil
}

// servedThroughout reports whether tl is typ over all of [from, to).
func servedThroughout(tl ServingTimeline, from, to time.Duration, typ signaling.CellType) bool {
	if tl.At(from) != typ {
		return false
	}
	for _, t := range tl.at {
		if t > from && t < to {
			return false
		}
	}
	return true
}

// edged is a cell's capacity lowered by an EdgeProfile in the span before
// each of its handovers down to sub-6. Bytes stays additive: the bytes up
// to t are the base's minus what the bins before t took away, each bin's
// own part floored once (cum is non-decreasing, so no slot gains a byte).
type edged struct {
	base Capacity
	bins []edgeBin
}

type edgeBin struct {
	from, to time.Duration
	f        float64
	before   int64 // bytes the earlier bins took away
	took     int64 // bytes this bin takes away over its whole length
}

// newEdged lowers base by p in the span before each end (sorted, and
// clipped at starts[i]: the span never reaches back before the dwell
// began). Bins of zero length are skipped.
func newEdged(base Capacity, p EdgeProfile, ends, starts []time.Duration) *edged {
	e := &edged{base: base}
	var before int64
	for i, end := range ends {
		from := end - p.Span()
		for k, f := range p.Factors {
			a := max(from+time.Duration(k)*p.Bin, starts[i], 0)
			b := from + time.Duration(k+1)*p.Bin
			if b <= a {
				continue
			}
			x := base.Bytes(a, b)
			took := x - int64(math.Floor(f*float64(x)))
			e.bins = append(e.bins, edgeBin{from: a, to: b, f: f, before: before, took: took})
			before += took
		}
	}
	return e
}

func (e *edged) cum(t time.Duration) int64 {
	if t <= 0 {
		return 0
	}
	k := sort.Search(len(e.bins), func(i int) bool { return e.bins[i].from >= t }) - 1
	if k < 0 {
		return e.base.Bytes(0, t)
	}
	b := &e.bins[k]
	if t >= b.to {
		return e.base.Bytes(0, t) - b.before - b.took
	}
	return e.base.Bytes(0, b.from) - b.before + int64(math.Floor(b.f*float64(e.base.Bytes(b.from, t))))
}

// Bytes implements Capacity.
func (e *edged) Bytes(from, to time.Duration) int64 { return e.cum(to) - e.cum(from) }
