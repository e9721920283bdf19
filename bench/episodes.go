package bench

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// predLogFile is the proxy's --prediction-log: one line per episode of a
// prediction's or a command's clamp.
const predLogFile = "predictions.tsv"

// predLogColumns is the --prediction-log header (cmd/m2ho predHeader);
// predLogColumnsV1 the one before the reports column (2026-12-07), which
// a bench re-read with --reanalyze may hold.
var (
	predLogColumns   = []string{"start_unix_ns", "end_unix_ns", "command_unix_ns", "outcome", "type", "target", "serving", "clamp_B", "reports"}
	predLogColumnsV1 = predLogColumns[:8]
)

// Episode is one episode of the controller outside Stable as the proxy
// logged it: from the prediction (or the unpredicted command) that
// entered Preparation to the return to Stable.
type Episode struct {
	StartNs, EndNs int64
	CommandNs      int64  // 0: no command came
	Outcome        string // confirmed, unpredicted, withdrawn-timeout, withdrawn-a1, ended
	Type           string // the predicted handover type (the command's when unpredicted)
	Target         string
	Serving        string // the data cell's type when it began
	Clamp          int64  // ŝ_max the flows shared when it began (0: none)
	// Reports: the kinds of report the predictions rested on (lte-a3a5,
	// nr-a3a5, lte-b1, nr-a2 joined by '+'; "-" none; "" a log without
	// the column).
	Reports string
}

// ReadPredLog reads the proxy's --prediction-log (either header); errors
// name file:line and the column.
func ReadPredLog(r io.Reader, name string) ([]Episode, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cols := predLogColumns
	if head, _, _ := bytes.Cut(bytes.TrimLeft(b, "\r\n \t"), []byte("\n")); string(bytes.TrimRight(head, "\r")) == strings.Join(predLogColumnsV1, "\t") {
		cols = predLogColumnsV1
	}
	out := []Episode{}
	err = tsv(bytes.NewReader(b), name, cols, func(line int, f []string) error {
		var v [3]int64
		for i, c := range []int{0, 1, 2} {
			n, err := strconv.ParseInt(f[c], 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("%s:%d: %s: %q is not a time in ns", name, line, predLogColumns[c], f[c])
			}
			v[i] = n
		}
		clamp, err := strconv.ParseInt(f[7], 10, 64)
		if err != nil || clamp < 0 {
			return fmt.Errorf("%s:%d: clamp_B: %q is not a byte count", name, line, f[7])
		}
		if v[1] < v[0] || v[2] != 0 && v[2] < v[0] {
			return fmt.Errorf("%s:%d: the episode ends (%d) or its command comes (%d) before it starts (%d)", name, line, v[1], v[2], v[0])
		}
		if f[3] == "" {
			return fmt.Errorf("%s:%d: outcome is empty", name, line)
		}
		e := Episode{StartNs: v[0], EndNs: v[1], CommandNs: v[2], Outcome: f[3], Type: f[4], Target: f[5], Serving: f[6], Clamp: clamp}
		if len(f) > 8 {
			if f[8] == "" {
				return fmt.Errorf("%s:%d: reports is empty (\"-\" for none)", name, line)
			}
			e.Reports = f[8]
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// EpisodeGap is what one kind of episode cost or saved a variant against
// the baseline in the same moments (Summary.Episodes): the receiver's
// bits in the variant's episodes of the kind, and the baseline's over the
// same intervals of its run of the same repetition (the same drive, the
// same signalling), summed over the repetitions both ran, within the
// span both receivers counted. A prediction
// clamps the window from the report to the command; one withdrawn has
// clamped for nothing, and the clamp's cost is the whole gap. A confirmed
// one is split at the command: before it, the clamp's cost; after it
// (the handover's interruption, Smoothing), what the clamp bought.
type EpisodeGap struct {
	Variant  string `json:"variant"`
	Baseline string `json:"baseline"`
	Serving  string `json:"serving"`
	Type     string `json:"type"`
	Reports  string `json:"reports,omitempty"` // Episode.Reports
	Outcome  string `json:"outcome"`
	// Part: "whole" (no command), "to the command", "after the command".
	Part    string  `json:"part"`
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"`
	// MedianClampBytes is the median clamp the episodes began with.
	MedianClampBytes int64   `json:"median_clamp_bytes"`
	BaselineMbps     float64 `json:"baseline_mbps"`
	VariantMbps      float64 `json:"variant_mbps"`
	// SharePct is the variant's bits less the baseline's over these
	// intervals, in percent of the baseline's bits over its whole runs.
	SharePct float64 `json:"share_pct"`
}

// Episode parts (EpisodeGap.Part).
const (
	PartWhole     = "whole"
	PartToCommand = "to the command"
	PartAfter     = "after the command"
)

// bitsIn is the receiver's bits in [a, b) (emulator seconds), each bin's
// bits taken in proportion to its overlap.
func bitsIn(bins []Bin, a, b float64) float64 {
	i := sort.Search(len(bins), func(k int) bool { return bins[k].T1 > a })
	var sum float64
	for ; i < len(bins) && bins[i].T0 < b; i++ {
		x := bins[i]
		lo, hi := max(x.T0, a), min(x.T1, b)
		if hi > lo && x.T1 > x.T0 {
			sum += x.Bits * (hi - lo) / (x.T1 - x.T0)
		}
	}
	return sum
}

// compareEpisodes is each variant's EpisodeGap against the baseline, by
// the serving type, the predicted type, the outcome and the part.
func compareEpisodes(runs []RunResult, s Summary) []EpisodeGap {
	if len(s.Variants) < 2 {
		return nil
	}
	base := s.Variants[baseline(s)].Name
	byRep := runsByRep(runs)
	type key struct{ serving, typ, reports, outcome, part string }
	type acc struct {
		n          int
		secs, b, v float64
		clamps     []float64
	}
	var out []EpisodeGap
	for _, vr := range s.Variants {
		if vr.Name == base {
			continue
		}
		by := map[key]*acc{}
		var keys []key
		var total float64
		for i, rv := range byRep[vr.Name] {
			rb, ok := byRep[base][i]
			if !ok || rv.Episodes == nil { // no --prediction-log
				continue
			}
			for _, x := range rb.Bins {
				total += x.Bits
			}
			if len(rb.Bins) == 0 || len(rv.Bins) == 0 {
				continue
			}
			// Only the moments both receivers were counting: an episode
			// before the download began (the drive's first handover at
			// its first report) or after it ended has nothing to compare.
			lo := max(rb.Bins[0].T0, rv.Bins[0].T0)
			hi := min(rb.Bins[len(rb.Bins)-1].T1, rv.Bins[len(rv.Bins)-1].T1)
			at := func(ns int64) float64 { return float64(ns-rv.Emu.StartUnixNS) / 1e9 }
			add := func(k key, a, b float64, clamp int64) {
				a, b = max(a, lo), min(b, hi)
				if b <= a {
					return
				}
				x := by[k]
				if x == nil {
					x = &acc{}
					by[k] = x
					keys = append(keys, k)
				}
				x.n++
				x.secs += b - a
				x.b += bitsIn(rb.Bins, a, b)
				x.v += bitsIn(rv.Bins, a, b)
				x.clamps = append(x.clamps, float64(clamp))
			}
			for _, e := range rv.Episodes {
				k := key{e.Serving, e.Type, e.Reports, e.Outcome, PartWhole}
				if e.CommandNs == 0 {
					add(k, at(e.StartNs), at(e.EndNs), e.Clamp)
					continue
				}
				k.part = PartToCommand
				add(k, at(e.StartNs), at(e.CommandNs), e.Clamp)
				k.part = PartAfter
				add(k, at(e.CommandNs), at(e.EndNs), e.Clamp)
			}
		}
		if total <= 0 {
			continue
		}
		sort.SliceStable(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if a.serving != b.serving {
				return a.serving < b.serving
			}
			if a.typ != b.typ {
				return a.typ < b.typ
			}
			if a.reports != b.reports {
				return a.reports < b.reports
			}
			if a.outcome != b.outcome {
				return a.outcome < b.outcome
			}
			return a.part > b.part // "to the command" before "after the command"
		})
		for _, k := range keys {
			x := by[k]
			g := EpisodeGap{Variant: vr.Name, Baseline: base, Serving: k.serving, Type: k.typ, Reports: k.reports, Outcome: k.outcome, Part: k.part,
				Count: x.n, Seconds: x.secs, MedianClampBytes: int64(Percentile(x.clamps, 50)), SharePct: (x.v - x.b) / total * 100}
			if x.secs > 0 {
				g.BaselineMbps, g.VariantMbps = x.b/x.secs/1e6, x.v/x.secs/1e6
			}
			out = append(out, g)
		}
	}
	return out
}

// writeEpisodes is summary.md's table of Summary.Episodes.
func writeEpisodes(b *strings.Builder, gaps []EpisodeGap) {
	if len(gaps) == 0 {
		return
	}
	b.WriteString("\n## Prediction episodes\n\nEach episode of a variant's controller outside Stable (the proxy's --prediction-log: from the prediction, or the command nobody predicted, to the return to Stable), by the serving cell's type when it began, the predicted type, the reports it rested on (lte-a3a5: LTE A3/A5, nr-a3a5: NR A3/A5, lte-b1, nr-a2; - none) and the outcome, against the baseline's run of the same repetition over the same intervals (the 0.1 s bins taken in proportion). Without a command the whole episode is the clamp's cost; with one it is split at the command: before it the clamp's cost, after it the handover and Smoothing. Share: the variant's bits less the baseline's over those intervals, in % of the baseline's bits over the whole runs.\n\n")
	b.WriteString("| variant | serving | predicted | reports | outcome | part | episodes | s | median clamp (KB) | baseline Mbit/s | variant Mbit/s | share |\n|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range gaps {
		reports := g.Reports
		if reports == "" {
			reports = "?" // a log from before the column
		}
		fmt.Fprintf(b, "| %s vs %s | %s | %s | %s | %s | %s | %d | %.1f | %.0f | %.1f | %.1f | %+.2f %% |\n",
			g.Variant, g.Baseline, g.Serving, g.Type, reports, g.Outcome, g.Part, g.Count, g.Seconds, float64(g.MedianClampBytes)/1000, g.BaselineMbps, g.VariantMbps, g.SharePct)
	}
}
