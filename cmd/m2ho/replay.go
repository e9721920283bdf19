package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/m2ho/score"
	"github.com/m2ho/m2ho/m2ho/smaxfile"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

type replayFlags struct {
	json      bool
	format    string
	defaultT2 time.Duration
	a2Hold    time.Duration
	maxErrors int
	list      string
	learn     string
}

func newReplayCmd(g *globalFlags) *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE...",
		Short: "Score the handover predictor on signalling traces (XCAL CSV or JSON lines)",
		Long: `replay runs signalling traces through the handover predictor and reports,
side by side, the stream rule set (streams), M2HO's Algorithm 1 (alg1) and
an A3-only baseline (what a 4G-era predictor such as LTE-VR keys on):

  handovers   actual handovers: every handover command in the trace, and
              the handovers the XCAL reader infers (SN releases and LTE
              handovers without SCG configuration, which XCAL does not
              export; signaling/XCAL.md), these also counted apart
  recall      handovers that a live prediction preceded / handovers
  precision   predictions followed by a handover / predictions
  false alarms  predictions with no handover: withdrawn (an A1, or the
              rule set's timeout: 2*T2 for alg1 and a3-only, T2 being the
              running mean of the report-to-command interval; the stream's
              answer time for streams) or still live at the end
  lead        time from the first prediction to the handover, p50 and p90
              in milliseconds
  predicted time  share of trace time a prediction was live (the
              controller's clamp is on): always predicting has recall 1
  type accuracy  predicted handovers whose predicted type (horizontal, to
              mmWave, to sub-6) and target cell type were both right

per file, pooled over all files and pooled over distinct files (files
with the same content, by SHA-256, count once), and split by handover
type (horizontal, sub-6 to mmWave, mmWave to sub-6).

Formats: XCAL CSV exports (7 columns: device_time, pc_time, direction,
channel, RAT, message, info) and m2ho's JSON lines (signaling/FORMAT.md),
detected from the content unless --format says. A file that cannot be read
is reported with the reason and the others still run; malformed lines are
reported by file:line and skipped (report kinds the reader does not know
are not malformed: they are counted as unknown events). The exit code is 0
when every file was read cleanly, 1 when any file failed or had malformed
lines, 2 on bad usage.

Examples:
  m2ho replay configs/example-drive.jsonl
  m2ho replay $(find ../shared/data/m2ho-mobicom24 -iname '*.csv' | sort)
  m2ho replay --list streams --json ../shared/data/m2ho-mobicom24/measurements/*/*/*.csv
  m2ho replay --learn-answers seed.json drive-1.csv drive-2.csv

--learn-answers FILE also teaches the stream rule set's answer rates (how
often the network answers each kind of report before its deadline, which
m2ho run --answer-rates acts on) from the files in the order given, copies
counted once, and stores them in FILE, an ŝ_max database as m2ho run
--smax-db keeps it: an existing FILE is read and learning carries on from
it, as a phone's would; a new one holds the rates alone. m2ho bench
--seed-db FILE starts every run from it.`,
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
			if f.list != "" {
				found := false
				for _, p := range score.Predictors {
					found = found || p.Name == f.list
				}
				if !found {
					return fmt.Errorf("--list %q: not a predictor (streams, alg1, a3-only)", f.list)
				}
			}
			var book *m2ho.SMaxDB
			if f.learn != "" {
				var err error
				if book, err = smaxfile.Open(f.learn); err != nil {
					return fmt.Errorf("--learn-answers: %w", err)
				}
			}
			if f.a2Hold < 0 {
				return fmt.Errorf("--mmwave-a2-hold %v: must be >= 0 (0: off)", f.a2Hold)
			}
			rep, failed := replay(args, format, f.defaultT2, f.a2Hold, cmd.ErrOrStderr(), f.maxErrors, f.list, book)
			if book != nil {
				if err := smaxfile.SaveDB(f.learn, book); err != nil {
					return fmt.Errorf("--learn-answers: %w", err)
				}
			}
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
	cmd.Flags().StringVar(&f.list, "list", "", "also list every handover and false alarm of this predictor per file")
	cmd.Flags().DurationVar(&f.a2Hold, "mmwave-a2-hold", m2ho.DefaultMmWaveA2Hold, "an NR A2 on the mmWave data cell keeps the stream rule set's prediction at least this long, as m2ho run --mmwave-a2-hold does (use the same value, so that what --learn-answers learns is what run will see); 0: off")
	cmd.Flags().StringVar(&f.learn, "learn-answers", "", "also learn how often the network answers each kind of report in time (streams) and store it in this ŝ_max database file, carrying on from what it holds")
	return cmd
}

// replayReport is `m2ho replay --json`'s object. Predictors pools every
// file given; PredictorsDistinct pools each content (SHA-256) once.
type replayReport struct {
	Files              int                     `json:"files"`
	Failed             int                     `json:"failed"`
	Handovers          int                     `json:"handovers"`
	Predictors         []score.PredictorReport `json:"predictors"`
	DistinctFiles      int                     `json:"distinct_files"`
	DistinctHandovers  int                     `json:"distinct_handovers"`
	PredictorsDistinct []score.PredictorReport `json:"predictors_distinct"`
	PerFile            []fileReport            `json:"per_file"`
	// Answers: the answer rates learned (--learn-answers), after every
	// file.
	Answers []answerReport `json:"answers,omitempty"`
}

// answerReport is one kind's learned answer rate.
type answerReport struct {
	Report     string  `json:"report"`
	Serving    string  `json:"serving"`
	Answered   float64 `json:"answered"`
	Unanswered float64 `json:"unanswered"`
	Rare       bool    `json:"rare"`
}

type fileReport struct {
	File        string `json:"file"`
	Error       string `json:"error,omitempty"`
	SHA256      string `json:"sha256,omitempty"`
	DuplicateOf string `json:"duplicate_of,omitempty"`
	BadLines    int    `json:"bad_lines"`
	Events      int    `json:"events"`
	// UnknownReports are reports of an event the reader does not know
	// (signaling.MeasUnknown): read, counted, not malformed.
	UnknownReports int                     `json:"unknown_reports"`
	Handovers      int                     `json:"handovers"`
	Predictors     []score.PredictorReport `json:"predictors,omitempty"`
	List           []listEntry             `json:"list,omitempty"`
}

// listEntry is one handover or false alarm of the --list predictor.
type listEntry struct {
	At          string  `json:"at"`
	What        string  `json:"what"` // handover kind, "inferred " prefixed, or "false-alarm"
	Actual      string  `json:"actual,omitempty"`
	Target      string  `json:"target,omitempty"`
	Predicted   bool    `json:"predicted"`
	PredictedAt string  `json:"predicted_at,omitempty"`
	PredType    string  `json:"predicted_type,omitempty"`
	PredTarget  string  `json:"predicted_target,omitempty"`
	LeadMs      float64 `json:"lead_ms,omitempty"`
	Reason      string  `json:"withdrawn,omitempty"`
}

func listOf(c *score.Counts) []listEntry {
	const tf = "15:04:05.000"
	var l []listEntry
	for _, r := range c.Records {
		e := listEntry{At: r.At.Format(tf), Predicted: r.Predicted}
		if r.FalseAlarm {
			e.What = "false-alarm"
			e.Reason = r.Reason.String()
		} else {
			e.What = r.HO.String()
			if r.Inferred {
				e.What = "inferred " + e.What
			}
			e.Actual, e.Target = r.Actual.String(), r.Target.String()
		}
		if r.Predicted || r.FalseAlarm {
			e.PredictedAt, e.PredType, e.PredTarget = r.PredictedAt.Format(tf), r.PredType.String(), r.PredTarget.String()
			e.LeadMs = float64(r.Lead) / float64(time.Millisecond)
		}
		l = append(l, e)
	}
	return l
}

// replay scores every predictor on every file. Problems with a file are
// written to errw as they are met; failed says whether any file had one.
func replay(paths []string, format signaling.Format, t2, a2Hold time.Duration, errw io.Writer, maxErrors int, list string, book *m2ho.SMaxDB) (rep replayReport, failed bool) {
	pooled := make([]*score.Counts, len(score.Predictors))
	distinct := make([]*score.Counts, len(score.Predictors))
	for i := range pooled {
		pooled[i], distinct[i] = score.NewCounts(), score.NewCounts()
	}
	seen := map[string]string{} // content hash → first file with it
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
		if h, err := hashFile(path); err == nil {
			fr.SHA256 = h
			if first, ok := seen[h]; ok {
				fr.DuplicateOf = first
			} else {
				seen[h] = path
			}
		}
		fr.Events = len(events)
		for i := range events {
			if events[i].Kind == signaling.KindReport && events[i].Meas == signaling.MeasUnknown {
				fr.UnknownReports++
			}
		}
		if book != nil && fr.DuplicateOf == "" {
			learnAnswers(events, t2, a2Hold, book)
		}
		for i, p := range score.Predictors {
			c := score.Run(events, p.Rules, t2, a2Hold)
			fr.Handovers = c.Handovers
			fr.Predictors = append(fr.Predictors, c.Report(p.Name))
			pooled[i].Add(c)
			if fr.DuplicateOf == "" {
				distinct[i].Add(c)
			}
			if p.Name == list {
				fr.List = listOf(c)
			}
		}
		rep.Files++
		rep.Handovers += fr.Handovers
		if fr.DuplicateOf == "" {
			rep.DistinctFiles++
			rep.DistinctHandovers += fr.Handovers
		}
		rep.PerFile = append(rep.PerFile, fr)
	}
	for i, p := range score.Predictors {
		rep.Predictors = append(rep.Predictors, pooled[i].Report(p.Name))
		rep.PredictorsDistinct = append(rep.PredictorsDistinct, distinct[i].Report(p.Name))
	}
	for _, a := range book.AnswerCounts() {
		rep.Answers = append(rep.Answers, answerReport{Report: a.Report.String(), Serving: a.Serving.String(), Answered: a.Answered, Unanswered: a.Unanswered, Rare: a.Rare})
	}
	return rep, failed
}

// learnAnswers runs the stream rule set over one trace, as the controller
// is fed (Tick before each event), learning its answer rates in book.
// The handovers the XCAL reader inferred are left out: they are the
// reader's reading of later evidence (a system-information read, a B1),
// which a phone's own feed does not give, and what is learned is to act
// on that feed (the bench replays the same, bench/emu.Recorded).
func learnAnswers(events []signaling.Event, t2, a2Hold time.Duration, book *m2ho.SMaxDB) {
	p := m2ho.NewPredictor(m2ho.Streams, t2)
	p.SetMmWaveA2Hold(a2Hold)
	p.SetAnswerBook(book)
	for i := range events {
		if events[i].Inferred {
			continue
		}
		p.Tick(events[i].Time)
		p.OnEvent(events[i].Time, &events[i])
	}
}

// hashFile is the SHA-256 of a file's content, to tell copies apart.
func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
	fmt.Fprintf(w, "%d file(s) read, %d with problems, %d handovers; %d distinct by content (SHA-256), %d handovers\n\n",
		rep.Files, rep.Failed, rep.Handovers, rep.DistinctFiles, rep.DistinctHandovers)
	fmt.Fprintln(w, "Pooled, all files:")
	writeTable(w, rep.Predictors)
	fmt.Fprintf(w, "\nPooled, distinct files (%d; copies counted once):\n", rep.DistinctFiles)
	writeTable(w, rep.PredictorsDistinct)
	if len(rep.Answers) > 0 {
		fmt.Fprintln(w, "\nAnswer rates learned (streams; decayed counts, rare: no clamp with m2ho run --answer-rates):")
		for _, a := range rep.Answers {
			rare := ""
			if a.Rare {
				rare = "  rare"
			}
			fmt.Fprintf(w, "  %-9s from %-7s answered %5.2f  unanswered %5.2f%s\n", a.Report, a.Serving, a.Answered, a.Unanswered, rare)
		}
	}
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
		if fr.UnknownReports > 0 {
			fmt.Fprintf(w, ", %d reports of unknown kind", fr.UnknownReports)
		}
		if fr.DuplicateOf != "" {
			fmt.Fprintf(w, ", same content as %s", fr.DuplicateOf)
		}
		fmt.Fprintln(w, "):")
		writeTable(w, fr.Predictors)
		for _, e := range fr.List {
			switch {
			case e.What == "false-alarm":
				fmt.Fprintf(w, "    %s false alarm: predicted %s at %s (target %s), withdrawn %s\n", e.At, e.PredType, e.PredictedAt, e.PredTarget, e.Reason)
			case e.Predicted:
				fmt.Fprintf(w, "    %s %s %s to %s: predicted at %s, lead %.0f ms, as %s to %s\n", e.At, e.What, e.Actual, e.Target, e.PredictedAt, e.LeadMs, e.PredType, e.PredTarget)
			default:
				fmt.Fprintf(w, "    %s %s %s to %s: MISSED\n", e.At, e.What, e.Actual, e.Target)
			}
		}
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
	row("handovers (inferred)", func(p score.PredictorReport) string {
		return fmt.Sprintf("%d (%d)", p.Handovers, p.InferredHandovers)
	})
	row("predicted (inferred)", func(p score.PredictorReport) string {
		return fmt.Sprintf("%d (%d)", p.Predicted, p.InferredPredicted)
	})
	row("recall", func(p score.PredictorReport) string { return pct(p.Recall) })
	row("precision", func(p score.PredictorReport) string { return pct(p.Precision) })
	row("false alarms", func(p score.PredictorReport) string { return fmt.Sprint(p.FalseAlarms) })
	row("  withdrawn (A1/timeout)", func(p score.PredictorReport) string {
		return fmt.Sprintf("%d/%d", p.WithdrawnA1, p.WithdrawnTimeout)
	})
	row("  not withdrawn", func(p score.PredictorReport) string { return fmt.Sprint(p.FalseAlarmsOpen) })
	row("lead ms p50", func(p score.PredictorReport) string { return ms(p.LeadMsP50) })
	row("lead ms p90", func(p score.PredictorReport) string { return ms(p.LeadMsP90) })
	row("predicted time", func(p score.PredictorReport) string { return pctOf(p.PredictedTimePct) })
	row("type accuracy (type/target)", func(p score.PredictorReport) string {
		return fmt.Sprintf("%s (%s/%s)", pct(p.TypeAccuracy), pct(p.KindAccuracy), pct(p.TargetTypeAccuracy))
	})
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

// pctOf prints a metric that already is a percentage.
func pctOf(m score.Metric) string {
	if !m.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", float64(m))
}

func ms(m score.Metric) string {
	if !m.Defined() {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(m))
}
