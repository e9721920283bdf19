package bench

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// The three convergence metrics are one scan (convergeScan); their
// results are those of the three separate implementations they replaced
// (kept here as the reference) on random runs: bins of irregular widths
// with gaps, capacities with zeros and unknown stretches, handovers close
// together and outside the data.
func TestConvergeOneImplementation(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	var conv, notConv int
	for trial := range 400 {
		var bins []Bin
		x := r.Float64()
		for range 50 + r.IntN(250) {
			w := 0.1
			if r.IntN(5) == 0 {
				w = 0.05 + r.Float64()*0.2
			}
			if r.IntN(20) == 0 {
				x += r.Float64() * 0.5 // a gap
			}
			bins = append(bins, Bin{T0: x, T1: x + w, Bits: r.Float64() * 4e8 * w})
			x += w
		}
		var caps []CapacityBin
		for ct := r.Float64() * 2; ct < x+1; ct += 0.1 {
			m := 50 + r.Float64()*200
			if r.IntN(15) == 0 {
				m = 0
			}
			caps = append(caps, CapacityBin{T: ct, Mbps: m})
		}
		var hos []HandoverRow
		for ht := -1 + r.Float64()*3; ht < x+2; ht += 0.05 + r.ExpFloat64()*4 {
			hos = append(hos, HandoverRow{Command: ht, RA: ht + 0.06})
		}
		frac := 0.3 + r.Float64()*0.6
		for _, c := range append(ConvergeMeanCapacity(bins, caps, hos, frac, 1), ConvergeWindow(bins, caps, hos, frac, 10)...) {
			if c.Converged {
				conv++
			} else if c.Analyzed {
				notConv++
			}
		}
		if got, want := Converge(bins, caps, hos, frac), oldConverge(bins, caps, hos, frac); !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: Converge differs\n got %+v\nwant %+v", trial, got, want)
		}
		for _, n := range []int{1, 3, 10} {
			if got, want := ConvergeWindow(bins, caps, hos, frac, n), oldConvergeWindow(bins, caps, hos, frac, n); !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d: ConvergeWindow(%d) differs\n got %+v\nwant %+v", trial, n, got, want)
			}
		}
		for _, w := range []float64{0.5, 1} {
			if got, want := ConvergeMeanCapacity(bins, caps, hos, frac, w), oldConvergeMeanCapacity(bins, caps, hos, frac, w); !reflect.DeepEqual(got, want) {
				t.Fatalf("trial %d: ConvergeMeanCapacity(%v) differs\n got %+v\nwant %+v", trial, w, got, want)
			}
		}
	}
	if conv < 100 || notConv < 100 {
		t.Fatalf("the random runs converge %d and miss %d handovers: not both cases exercised", conv, notConv)
	}
}

// The implementations before convergeScan, for the comparison above.

func oldConverge(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac float64) []Convergence {
	out := make([]Convergence, len(hos))
	if len(bins) == 0 {
		for i, h := range hos {
			out[i] = Convergence{Handover: h}
		}
		return out
	}
	const eps = 1e-9
	dataStart, dataEnd := bins[0].T0, bins[len(bins)-1].T1
	for i, h := range hos {
		c := Convergence{Handover: h}
		next := dataEnd
		if i+1 < len(hos) && hos[i+1].Command < next {
			next = hos[i+1].Command
		}
		if h.RA < dataStart-eps || h.RA >= dataEnd {
			out[i] = c
			continue
		}
		c.Analyzed = true
		c.Dwell = math.Max(0, next-h.RA)
		c.Seconds = c.Dwell
		for _, b := range bins {
			if b.T0 < h.RA-eps {
				continue
			}
			if b.T1 > next+eps {
				break
			}
			cb, ok := CapacityAt(caps, (b.T0+b.T1)/2)
			if !ok || cb.Mbps <= 0 {
				continue
			}
			// The relative slack absorbs float error in bin widths, so
			// exactly frac x capacity counts as reached.
			if b.Mbps() >= frac*cb.Mbps*(1-1e-9) {
				c.Converged, c.Seconds = true, b.T1-h.RA
				break
			}
		}
		out[i] = c
	}
	return out
}

func oldConvergeWindow(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac float64, n int) []Convergence {
	if n <= 1 {
		return oldConverge(bins, caps, hos, frac)
	}
	out := make([]Convergence, len(hos))
	if len(bins) == 0 {
		for i, h := range hos {
			out[i] = Convergence{Handover: h}
		}
		return out
	}
	const eps = 1e-9
	dataStart, dataEnd := bins[0].T0, bins[len(bins)-1].T1
	for i, h := range hos {
		c := Convergence{Handover: h}
		next := dataEnd
		if i+1 < len(hos) && hos[i+1].Command < next {
			next = hos[i+1].Command
		}
		if h.RA < dataStart-eps || h.RA >= dataEnd {
			out[i] = c
			continue
		}
		c.Analyzed = true
		c.Dwell = math.Max(0, next-h.RA)
		c.Seconds = c.Dwell
		first := sort.Search(len(bins), func(k int) bool { return bins[k].T0 >= h.RA-eps })
	win:
		for k := first; k+n <= len(bins); k++ {
			if bins[k+n-1].T1 > next+eps {
				break
			}
			var bits, secs, capSum float64
			for _, b := range bins[k : k+n] {
				cb, ok := CapacityAt(caps, (b.T0+b.T1)/2)
				if !ok || cb.Mbps <= 0 {
					continue win
				}
				bits += b.Bits
				secs += b.T1 - b.T0
				capSum += cb.Mbps
			}
			if bits/secs/1e6 >= frac*capSum/float64(n)*(1-1e-9) {
				c.Converged, c.Seconds = true, bins[k+n-1].T1-h.RA
				break
			}
		}
		out[i] = c
	}
	return out
}

func oldConvergeMeanCapacity(bins []Bin, caps []CapacityBin, hos []HandoverRow, frac, window float64) []Convergence {
	out := oldConverge(bins, caps, hos, frac) // Analyzed and Dwell
	const eps = 1e-9
	for i := range out {
		c := &out[i]
		if !c.Analyzed {
			continue
		}
		h := c.Handover
		next := h.RA + c.Dwell
		var capSum, capN float64
		for _, cb := range caps {
			if cb.T >= h.RA-eps && cb.T < next-eps {
				capSum += cb.Mbps
				capN++
			}
		}
		c.Converged, c.Seconds = false, c.Dwell
		if capN == 0 || capSum <= 0 {
			continue
		}
		thr := frac * capSum / capN
		for k, b := range bins {
			if b.T1 < h.RA+window-eps {
				continue
			}
			if b.T1 > next+eps {
				break
			}
			var bits, secs float64
			for j := k; j >= 0 && bins[j].T0 >= b.T1-window-eps; j-- {
				bits += bins[j].Bits
				secs += bins[j].T1 - bins[j].T0
			}
			if secs > 0 && bits/secs/1e6 >= thr*(1-1e-9) {
				c.Converged, c.Seconds = true, b.T1-h.RA
				break
			}
		}
	}
	return out
}
