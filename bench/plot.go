package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot files written by WritePlots.
const (
	PlotThroughput  = "throughput.png"
	PlotConvergence = "convergence_cdf.png"
	PlotByType      = "goodput_by_type.png"
)

// variantColors are distinguishable on white and in grey print.
var variantColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
}

func variantColor(i int) color.Color { return variantColors[i%len(variantColors)] }

// hoColors mark handover types in the throughput plot.
var hoColors = map[string]color.Color{
	"horizontal":     color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
	"sub6-to-mmwave": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"mmwave-to-sub6": color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// WritePlots writes the three PNGs into dir from the analysed runs: the
// throughput over time of the first run of each variant (the schedule is
// the same in every run), the CDF of convergence times, and goodput by
// handover type.
func WritePlots(dir string, s Summary, runs []RunResult) error {
	if err := plotThroughput(filepath.Join(dir, PlotThroughput), s, runs); err != nil {
		return fmt.Errorf("%s: %w", PlotThroughput, err)
	}
	if err := plotConvergence(filepath.Join(dir, PlotConvergence), s); err != nil {
		return fmt.Errorf("%s: %w", PlotConvergence, err)
	}
	if err := plotByType(filepath.Join(dir, PlotByType), s); err != nil {
		return fmt.Errorf("%s: %w", PlotByType, err)
	}
	return nil
}

// plotThroughput is Fig. 5 of the M2HO paper per variant: one panel each,
// throughput in 0.1 s bins, the serving cell's capacity, and a vertical
// mark at every handover command coloured by type.
func plotThroughput(path string, s Summary, runs []RunResult) error {
	var panels []*plot.Plot
	ymax := 1.0
	for _, r := range runs {
		for _, c := range r.Capacity {
			ymax = math.Max(ymax, c.Mbps)
		}
		for _, b := range r.Bins {
			ymax = math.Max(ymax, b.Mbps())
		}
	}
	ymax *= 1.08
	for i, v := range s.Variants {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %s (first run, scale %g)", s.Scenario, v.Name, s.Scale)
		p.X.Label.Text = "time since emulator start (s)"
		p.Y.Label.Text = "Mbps"
		p.Y.Min, p.Y.Max = 0, ymax
		p.Add(plotter.NewGrid())
		var run *RunResult
		for k := range runs {
			if runs[k].Variant == v.Name && (run == nil || runs[k].Index < run.Index) {
				run = &runs[k]
			}
		}
		if run == nil {
			p.Title.Text += " - no run"
			panels = append(panels, p)
			continue
		}
		if len(run.Capacity) > 0 {
			xy := make(plotter.XYs, len(run.Capacity))
			for k, c := range run.Capacity {
				xy[k] = plotter.XY{X: c.T, Y: c.Mbps}
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.StepStyle = plotter.PostStep
			l.Color = color.Gray{Y: 0x90}
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add("capacity", l)
		}
		seen := map[string]bool{}
		for _, h := range run.Handovers {
			l, err := plotter.NewLine(plotter.XYs{{X: h.Command, Y: 0}, {X: h.Command, Y: ymax}})
			if err != nil {
				return err
			}
			l.Color = hoColors[h.Type]
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			if !seen[h.Type] {
				p.Legend.Add("HO "+h.Type, l)
				seen[h.Type] = true
			}
		}
		if len(run.Bins) > 0 {
			xy := make(plotter.XYs, len(run.Bins))
			for k, b := range run.Bins {
				xy[k] = plotter.XY{X: (b.T0 + b.T1) / 2, Y: b.Mbps()}
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			l.Color = variantColor(i)
			l.Width = vg.Points(1)
			p.Add(l)
			p.Legend.Add(v.Name+" goodput", l)
		}
		p.Legend.Top = true
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return fmt.Errorf("no variants")
	}
	const w, hPanel = 11 * vg.Inch, 3.2 * vg.Inch
	img := vgimg.New(w, hPanel*vg.Length(len(panels)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		grid[i] = []*plot.Plot{p}
	}
	canv := plot.Align(grid, tiles, dc)
	for i, p := range panels {
		p.Draw(canv[i][0])
	}
	return writePNG(path, img)
}

func writePNG(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotConvergence draws the empirical CDF of convergence times per
// variant (non-converged handovers at their dwell, as in the summary).
func plotConvergence(path string, s Summary) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: convergence after handover (to 75 %% of the new cell's capacity)", s.Scenario)
	p.X.Label.Text = "seconds from random access"
	p.Y.Label.Text = "fraction of handovers"
	// Head-room above 1 keeps the legend off the curves.
	p.Y.Min, p.Y.Max = 0, 1.2
	p.X.Min = 0
	xmax := 0.0
	for _, v := range s.Variants {
		for _, x := range v.ConvergenceS {
			xmax = math.Max(xmax, x)
		}
	}
	p.X.Max = math.Max(xmax*1.1, 0.5)
	p.Add(plotter.NewGrid())
	for i, v := range s.Variants {
		xs := append([]float64(nil), v.ConvergenceS...)
		if len(xs) == 0 {
			continue
		}
		sort.Float64s(xs)
		xy := plotter.XYs{{X: 0, Y: 0}}
		for k, x := range xs {
			xy = append(xy, plotter.XY{X: x, Y: float64(k+1) / float64(len(xs))})
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.StepStyle = plotter.PostStep
		l.Color = variantColor(i)
		l.Width = vg.Points(2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d, %d not converged)", v.Name, len(xs), v.NonConverged), l)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// plotByType draws grouped bars: one group per handover type (and
// "none"), one bar per variant.
func plotByType(path string, s Summary) error {
	keys := typeKeys(s)
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: goodput by the type of the last handover", s.Scenario)
	p.Y.Label.Text = "goodput (Mbps)"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	if len(keys) == 0 {
		keys = []string{TypeNone}
	}
	n := len(s.Variants)
	top := 1.0
	for _, v := range s.Variants {
		for _, x := range v.GoodputMbpsByType {
			top = math.Max(top, x)
		}
	}
	p.Y.Max = top * 1.2 // room for the legend
	width := vg.Points(float64(min(40, 240/max(1, n))))
	for i, v := range s.Variants {
		vals := make(plotter.Values, len(keys))
		for k, key := range keys {
			vals[k] = v.GoodputMbpsByType[key]
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return err
		}
		b.Color = variantColor(i)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(n-1)/2) * width
		p.Add(b)
		p.Legend.Add(v.Name, b)
	}
	p.NominalX(keys...)
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
