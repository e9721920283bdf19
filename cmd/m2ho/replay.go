package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/m2ho/score"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

type replayFlags struct {
	json      bool
	format    string
	defaultT2 time.Duration
	maxErrors int
}

func newReplayCmd(g *globalFlags) *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE...",
		Short: "Score the handover predictor on signalling traces (XCAL CSV or JSON lines)",
		Long: `replay runs signalling traces through the handover predictor and reports,
side by side, M2HO's Algorithm 1 and an A3-only baseline (what a 4G-era
predictor such as LTE-VR keys on):

  handovers   actual handovers: every handover command in the trace
  recall      handovers that a live prediction preceded / handovers
  precision   predictions followed by a handover command / predictions
  false alarms  predictions with no command: withdrawn (an A1 after the
              prediction, or no command within 2*T2, T2 being the running
              mean of the report-to-command interval) or still live at the
              end of the trace
  lead        time from the first prediction to the handover command, p50
              and p90 in milliseconds

per file and pooled over all files, and split by handover type (horizontal,
sub-6 to mmWave, mmWave to sub-6).

Formats: XCAL CSV exports (7 columns: device_time, pc_time, direction,
channel, RAT, message, info) and m2ho's JSON lines (signaling/FORMAT.md),
detected from the content unless --format says. A file that cannot be read
is reported with the reason and the others still run; malformed lines are
reported by file:line and skipped. The exit code is 0 when every file was
read cleanly, 1 when any file failed or had malformed lines, 2 on bad usage.

Examples:
  m2ho replay configs/example-drive.jsonl
  m2ho replay --json ../shared/data/m2ho-mobicom24/measurements/*/*/*.csv`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("replay needs at least one FILE (XCAL CSV or JSON lines)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			format, ok := signaling.ParseFormat(f.format)
			if !ok {
				return fmt.Errorf("--format %q: want auto, json or xcal", f.format)
			}
			if f.defaultT2 <= 0 {
				return fmt.Errorf("--t2 %v: must be positive", f.defaultT2)
			}
			rep, failed := replay(args, format, f.defaultT2, cmd.ErrOrStderr(), f.maxErrors)
			var err error
			if f.json {
				err = writeReplayJSON(cmd.OutOrStdout(), rep)
			} else {
				err = writeReplayText(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if failed {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print one JSON object instead of tables")
	cmd.Flags().StringVar(&f.format, "format", "auto", "input format: auto, xcal or json")
	cmd.Flags().DurationVar(&f.defaultT2, "t2", m2ho.DefaultT2, "report-to-command interval T2 assumed until one is measured")
	cmd.Flags().IntVar(&f.maxErrors, "max-errors", 10, "malformed lines to print per file (all are counted)")
	return cmd
}

// replayReport is `m2ho replay --json`'s object.
type replayReport struct {
	Files      int                     `json:"files"`
	Failed     int                     `json:"failed"`
	Handovers  int                     `json:"handovers"`
	Predictors []score.PredictorReport `json:"predictors"`
	PerFile    []fileReport            `json:"per_file"`
}

type fileReport struct {
	File       string                  `json:"file"`
	Error      string                  `json:"error,omitempty"`
	BadLines   int                     `json:"bad_lines"`
	Events     int                     `json:"events"`
	Handovers  int                     `json:"handovers"`
	Predictors []score.PredictorReport `json:"predictors,omitempty"`
}

// replay scores every predictor on every file. Problems with a file are
// written to errw as they are met; failed says whether any file had one.
func replay(paths []string, format signaling.Format, t2 time.Duration, errw io.Writer, maxErrors int) (rep replayReport, failed bool) {
	pooled := make([]*score.Counts, len(score.Predictors))
	for i := range pooled {
		pooled[i] = &score.Counts{ByType: map[m2ho.HOType]*score.TypeCounts{}}
	}
	for _, path := range paths {
		fr := fileReport{File: path}
		events, _, errs := sigio.ReadAll(path, format)
		if len(errs) > 0 && len(events) == 0 && !isLineError(errs[0]) {
			fr.Error = errs[0].Error()
			fmt.Fprintf(errw, "m2ho replay: %s: %v\n", path, errs[0])
			rep.Failed++
			failed = true
			rep.PerFile = append(rep.PerFile, fr)
			continue
		}
		for i, err := range errs {
			if i < maxErrors {
				fmt.Fprintf(errw, "m2ho replay: %v\n", err)
			}
		}
		if len(errs) > maxErrors {
			fmt.Fprintf(errw, "m2ho replay: %s: %d more malformed lines\n", path, len(errs)-maxErrors)
		}
		if len(errs) > 0 {
			fr.BadLines = len(errs)
			rep.Failed++
			failed = true
		}
		fr.Events = len(events)
		for i, p := range score.Predictors {
			c := score.Run(events, p.Rules, t2)
			fr.Handovers = c.Handovers
			fr.Predictors = append(fr.Predictors, c.Report(p.Name))
			pooled[i].Add(c)
		}
		rep.Files++
		rep.Handovers += fr.Handovers
		rep.PerFile = append(rep.PerFile, fr)
	}
	for i, p := range score.Predictors {
		rep.Predictors = append(rep.Predictors, pooled[i].Report(p.Name))
	}
	return rep, failed
}

// isLineError tells a malformed line (the file was read) from a file that
// could not be read at all.
func isLineError(err error) bool {
	_, ok := err.(*signaling.ParseError)
	return ok
}

func writeReplayJSON(w io.Writer, rep replayReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeReplayText(w io.Writer, rep replayReport) error {
	fmt.Fprintf(w, "%d file(s) read, %d with problems, %d handovers\n\n", rep.Files, rep.Failed, rep.Handovers)
	fmt.Fprintln(w, "Pooled:")
	writeTable(w, rep.Predictors)
	for _, fr := range rep.PerFile {
		fmt.Fprintf(w, "\n%s", fr.File)
		if fr.Error != "" {
			fmt.Fprintf(w, ": FAILED: %s\n", fr.Error)
			continue
		}
		fmt.Fprintf(w, " (%d events, %d handovers", fr.Events, fr.Handovers)
		if fr.BadLines > 0 {
			fmt.Fprintf(w, ", %d malformed lines", fr.BadLines)
		}
		fmt.Fprintln(w, "):")
		writeTable(w, fr.Predictors)
	}
	return nil
}

// writeTable prints predictors side by side, one column each.
func writeTable(w io.Writer, ps []score.PredictorReport) {
	// Labels left, figures right: the label column is padded by hand
	// because tabwriter aligns every column the same way.
	const labelWidth = 34
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(p score.PredictorReport) string) {
		cells := []string{fmt.Sprintf("  %-*s", labelWidth, label)}
		for _, p := range ps {
			cells = append(cells, cell(p))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	row("", func(p score.PredictorReport) string { return p.Name })
	row("handovers", func(p score.PredictorReport) string { return fmt.Sprint(p.Handovers) })
	row("predicted", func(p score.PredictorReport) string { return fmt.Sprint(p.Predicted) })
	row("recall", func(p score.PredictorReport) string { return pct(p.Recall) })
	row("precision", func(p score.PredictorReport) string { return pct(p.Precision) })
	row("false alarms", func(p score.PredictorReport) string { return fmt.Sprint(p.FalseAlarms) })
	row("  withdrawn (A1/timeout)", func(p score.PredictorReport) string {
		return fmt.Sprintf("%d/%d", p.WithdrawnA1, p.WithdrawnTimeout)
	})
	row("  not withdrawn", func(p score.PredictorReport) string { return fmt.Sprint(p.FalseAlarmsOpen) })
	row("lead ms p50", func(p score.PredictorReport) string { return ms(p.LeadMsP50) })
	row("lead ms p90", func(p score.PredictorReport) string { return ms(p.LeadMsP90) })
	for _, t := range []string{"horizontal", "sub6-to-mmwave", "mmwave-to-sub6", "unknown"} {
		if _, ok := ps[0].ByType[t]; !ok {
			continue
		}
		row(t+" recall", func(p score.PredictorReport) string {
			tr := p.ByType[t]
			return fmt.Sprintf("%s (%d/%d)", pct(tr.Recall), tr.Predicted, tr.Handovers)
		})
		row(t+" lead ms p50/p90", func(p score.PredictorReport) string {
			tr := p.ByType[t]
			return ms(tr.LeadMsP50) + "/" + ms(tr.LeadMsP90)
		})
	}
	tw.Flush()
}

func pct(m score.Metric) string {
	if !m.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(m))
}

func ms(m score.Metric) string {
	if !m.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(m))
}
