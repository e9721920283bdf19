package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/m2ho/score"
	"github.com/m2ho/m2ho/m2ho/smaxfile"
	"github.com/m2ho/m2ho/signaling"
)

// runCLI runs the m2ho command in-process and returns stdout, stderr and
// the exit code main would use.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err := root.Execute()
	code := 0
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
		} else {
			errb.WriteString(err.Error())
			code = 2
		}
	}
	return out.String(), errb.String(), code
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func TestReplayExampleJSON(t *testing.T) {
	example := filepath.Join(repoRoot(t), "configs", "example-drive.jsonl")
	out, errs, code := runCLI(t, "replay", "--json", example)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var rep struct {
		Files      int `json:"files"`
		Handovers  int `json:"handovers"`
		Predictors []struct {
			Name        string   `json:"name"`
			Recall      *float64 `json:"recall"`
			Precision   *float64 `json:"precision"`
			FalseAlarms *int     `json:"false_alarms"`
			LeadP50     *float64 `json:"lead_ms_p50"`
			LeadP90     *float64 `json:"lead_ms_p90"`
			TimePct     *float64 `json:"predicted_time_pct"`
			TypeAcc     *float64 `json:"type_accuracy"`
			ByType      map[string]struct {
				Handovers int `json:"handovers"`
			} `json:"by_type"`
		} `json:"predictors"`
		DistinctFiles int `json:"distinct_files"`
		Distinct      []struct {
			Name string `json:"name"`
		} `json:"predictors_distinct"`
		PerFile []struct {
			File      string `json:"file"`
			Handovers int    `json:"handovers"`
		} `json:"per_file"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if rep.Files != 1 || len(rep.PerFile) != 1 || rep.PerFile[0].Handovers != rep.Handovers || rep.Handovers == 0 {
		t.Fatalf("files %d handovers %d per_file %+v", rep.Files, rep.Handovers, rep.PerFile)
	}
	if len(rep.Predictors) != 3 || rep.Predictors[0].Name != "streams" || rep.Predictors[1].Name != "alg1" || rep.Predictors[2].Name != "a3-only" {
		t.Fatalf("predictors %+v", rep.Predictors)
	}
	if rep.DistinctFiles != 1 || len(rep.Distinct) != 3 {
		t.Fatalf("distinct files %d, distinct predictors %+v", rep.DistinctFiles, rep.Distinct)
	}
	for _, p := range rep.Predictors {
		if p.Recall == nil || p.Precision == nil || p.FalseAlarms == nil || p.LeadP50 == nil || p.LeadP90 == nil || p.TimePct == nil || p.TypeAcc == nil {
			t.Fatalf("%s: a required figure is missing or null: %s", p.Name, out)
		}
		sum := 0
		for _, tr := range p.ByType {
			sum += tr.Handovers
		}
		if sum != rep.Handovers {
			t.Errorf("%s: by-type handovers sum to %d, want %d", p.Name, sum, rep.Handovers)
		}
	}
	// The example has vertical handovers that only Algorithm 1 foresees.
	if *rep.Predictors[1].Recall <= *rep.Predictors[2].Recall {
		t.Errorf("alg1 recall %v not above a3-only %v", *rep.Predictors[1].Recall, *rep.Predictors[2].Recall)
	}
}

func TestReplayBadFilesReportedOthersRun(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(repoRoot(t), "configs", "example-drive.jsonl")
	missing := filepath.Join(dir, "missing.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	good, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	// Line 3 gets a report with a bad event name.
	lines[2] = `{"t":"2026-01-15T09:00:07.5Z","kind":"report","event":"Z9","serving":{"id":"1","type":"sub6"}}` + "\n"
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCLI(t, "replay", "--json", missing, bad, example)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (some files failed); stderr %s", code, errs)
	}
	if !strings.Contains(errs, "missing.jsonl") {
		t.Errorf("stderr does not name the unreadable file: %s", errs)
	}
	if !strings.Contains(errs, "bad.jsonl:3: event") {
		t.Errorf("stderr does not name file:line and field of the bad line: %s", errs)
	}
	var rep struct {
		Files   int `json:"files"`
		Failed  int `json:"failed"`
		PerFile []struct {
			File     string `json:"file"`
			Error    string `json:"error"`
			BadLines int    `json:"bad_lines"`
			Events   int    `json:"events"`
		} `json:"per_file"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Files != 2 || rep.Failed != 2 || len(rep.PerFile) != 3 {
		t.Fatalf("files %d failed %d per_file %d: %s", rep.Files, rep.Failed, len(rep.PerFile), out)
	}
	if rep.PerFile[0].Error == "" || rep.PerFile[1].BadLines != 1 || rep.PerFile[1].Events == 0 || rep.PerFile[2].Error != "" {
		t.Errorf("per-file results wrong: %+v", rep.PerFile)
	}
}

func TestReplayUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"replay"}, {"replay", "--format", "pcap", "x"}, {"replay", "--t2", "-1s", "x"}} {
		_, errs, code := runCLI(t, args...)
		if code != 2 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a message", args, code, errs)
		}
	}
}

// On the M2HO artifact's real XCAL logs, Algorithm 1 must foresee the
// vertical handovers an A3-only predictor cannot.
func TestReplayRealXCAL(t *testing.T) {
	data := os.Getenv("M2HO_SHARED_DATA")
	if data == "" {
		data = filepath.Join(repoRoot(t), "..", "shared", "data")
	}
	var files []string
	filepath.Walk(filepath.Join(data, "m2ho-mobicom24"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(strings.ToLower(p), ".csv") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skipf("no XCAL files under %s (../shared/data is absent; set M2HO_SHARED_DATA)", data)
	}
	out, errs, code := runCLI(t, append([]string{"replay", "--json"}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Files      int `json:"files"`
		Handovers  int `json:"handovers"`
		Predictors []struct {
			Name   string  `json:"name"`
			Recall float64 `json:"recall"`
			ByType map[string]struct {
				Handovers, Predicted int
			} `json:"by_type"`
		} `json:"predictors"`
		DistinctFiles int `json:"distinct_files"`
		Distinct      []struct {
			Name      string  `json:"name"`
			Recall    float64 `json:"recall"`
			Precision float64 `json:"precision"`
			LeadP50   float64 `json:"lead_ms_p50"`
			TimePct   float64 `json:"predicted_time_pct"`
		} `json:"predictors_distinct"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Files != len(files) || rep.Handovers == 0 {
		t.Fatalf("files %d of %d, handovers %d", rep.Files, len(files), rep.Handovers)
	}
	m, a3 := rep.Predictors[1], rep.Predictors[2]
	if m.Recall <= a3.Recall {
		t.Errorf("alg1 recall %.3f not above a3-only %.3f", m.Recall, a3.Recall)
	}
	// 6 of the 17 files are byte-identical copies.
	if len(files) == 17 && rep.DistinctFiles != 11 {
		t.Errorf("distinct files %d, want 11", rep.DistinctFiles)
	}
	// The targets for the stream rule set, on the distinct files
	// (a regression guard: the rules are not fitted to these files).
	if s := rep.Distinct[0]; s.Name != "streams" || s.Recall < 0.95 || s.Precision < 0.9 || s.LeadP50 < 50 || s.TimePct > 3 {
		t.Errorf("streams on distinct files: %+v, want recall >= 0.95, precision >= 0.9, lead p50 >= 50 ms, predicted time <= 3 %%", s)
	}
	if v := a3.ByType["sub6-to-mmwave"]; v.Predicted != 0 {
		t.Errorf("a3-only predicted %d sub-6→mmWave handovers; it has no rule for them", v.Predicted)
	}
	if v := m.ByType["sub6-to-mmwave"]; v.Handovers == 0 || v.Predicted == 0 {
		t.Errorf("alg1 sub-6→mmWave: %+v", v)
	}
}

// replayJSON is the part of `m2ho replay --json` the failure-mode tests read.
type replayJSON struct {
	Files             int `json:"files"`
	Failed            int `json:"failed"`
	Handovers         int `json:"handovers"`
	DistinctFiles     int `json:"distinct_files"`
	DistinctHandovers int `json:"distinct_handovers"`
	PerFile           []struct {
		File        string `json:"file"`
		BadLines    int    `json:"bad_lines"`
		Events      int    `json:"events"`
		Unknown     int    `json:"unknown_reports"`
		DuplicateOf string `json:"duplicate_of"`
	} `json:"per_file"`
}

func replayJSONOf(t *testing.T, files ...string) (replayJSON, int, string) {
	t.Helper()
	out, errs, code := runCLI(t, append([]string{"replay", "--json"}, files...)...)
	var rep replayJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON (exit %d, %s): %v\n%s", code, errs, err, out)
	}
	return rep, code, errs
}

// Failure mode 7: report kinds the reader does not know are reports, not
// malformed lines, and replay does not fail on them; a broken row still
// makes it exit 1.
func TestReplayUnknownReportKindsAreNotMalformed(t *testing.T) {
	dir := t.TempDir()
	rows := []string{
		"10:00:00.000,,--->,UL DCCH,LTE,LTE measurementReport,Event : A6-r10 / Serving(-95, -19.0)",
		"10:00:00.100,,--->,UL DCCH,LTE,LTE measurementReport,Event :  / Serving(-95, -19.0)",
		"10:00:00.200,,--->,UL DCCH,5GNR,5GNR measurementReport,Event: Unknown / Serving(pci 88, ss-rsrp -96.0, ss-rsrq -15.5)",
	}
	good := filepath.Join(dir, "unknown.csv")
	if err := os.WriteFile(good, []byte(strings.Join(rows, "\r\n")+"\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code, errs := replayJSONOf(t, good)
	if code != 0 || rep.Failed != 0 || rep.PerFile[0].BadLines != 0 || rep.PerFile[0].Events != 3 || rep.PerFile[0].Unknown != 2 {
		t.Fatalf("exit %d (%s), %+v", code, errs, rep)
	}
	broken := filepath.Join(dir, "broken.csv")
	if err := os.WriteFile(broken, []byte("10:00:00.000,,--->,UL DCCH,LTE\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code, _ := replayJSONOf(t, broken); code != 1 {
		t.Fatalf("a row with 5 columns: exit %d, want 1", code)
	}
}

// Failure mode 7 on the real files: with the unknown kinds spliced in
// after every report (LTE ones after LTE reports, NR "Unknown" after NR
// reports on the same cell), every file still reads cleanly and scores the
// same handovers.
func TestReplayRealXCALWithUnknownKinds(t *testing.T) {
	data := os.Getenv("M2HO_SHARED_DATA")
	if data == "" {
		data = filepath.Join(repoRoot(t), "..", "shared", "data")
	}
	var files []string
	filepath.Walk(filepath.Join(data, "m2ho-mobicom24"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(strings.ToLower(p), ".csv") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skipf("no XCAL files under %s (../shared/data is absent; set M2HO_SHARED_DATA)", data)
	}
	dir := t.TempDir()
	var spliced []string
	added := 0
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(string(b), "\n") {
			out = append(out, line)
			cols := strings.SplitN(line, ",", 7)
			switch {
			case len(cols) < 7:
			case cols[5] == "LTE measurementReport":
				for _, info := range []string{"Event : A6-r10 / Serving(-95, -19.0)", "Event :  / Serving(-95, -19.0)"} {
					out = append(out, cols[0]+","+cols[1]+",--->,UL DCCH,LTE,LTE measurementReport,"+info+"\r")
					added++
				}
			case cols[5] == "5GNR measurementReport":
				// On the same serving cell: an NR report proves the SCG.
				if i := strings.Index(cols[6], "Serving("); i >= 0 {
					sv := cols[6][i:]
					sv = sv[:strings.IndexByte(sv, ')')+1]
					out = append(out, cols[0]+","+cols[1]+",--->,UL DCCH,5GNR,5GNR measurementReport,Event: Unknown / "+sv+"\r")
					added++
				}
			}
		}
		// Keep the date-bearing path components: the reader dates rows by them.
		p := filepath.Join(dir, fmt.Sprint(i), strings.TrimPrefix(f, data))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		spliced = append(spliced, p)
	}
	orig, code, errs := replayJSONOf(t, files...)
	if code != 0 {
		t.Fatalf("original files: exit %d: %s", code, errs)
	}
	rep, code, errs := replayJSONOf(t, spliced...)
	if code != 0 || rep.Failed != 0 {
		t.Fatalf("with unknown kinds: exit %d, failed %d: %s", code, rep.Failed, errs)
	}
	events := 0
	for i, fr := range rep.PerFile {
		if fr.BadLines != 0 {
			t.Errorf("%s: %d bad lines", fr.File, fr.BadLines)
		}
		events += fr.Events - orig.PerFile[i].Events
	}
	if rep.Handovers != orig.Handovers || events != added {
		t.Errorf("handovers %d, want %d; %d more events, want %d", rep.Handovers, orig.Handovers, events, added)
	}
}

// Failure mode 8: copies of a file are scored once in the distinct pool.
func TestReplayDistinctByContent(t *testing.T) {
	dir := t.TempDir()
	example := filepath.Join(repoRoot(t), "configs", "example-drive.jsonl")
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "copy.jsonl")
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, code, errs := replayJSONOf(t, example, cp)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if rep.Files != 2 || rep.DistinctFiles != 1 || rep.Handovers != 2*rep.DistinctHandovers || rep.PerFile[1].DuplicateOf != example {
		t.Fatalf("%+v", rep)
	}
}

// a2Trace is a JSON-lines trace of n mmWave A2s, each followed 150 ms
// later by an SN release that is logged (answered) or inferred (which a
// phone's feed does not show: unanswered to the learner), then an SN
// addition back to mmWave 2 s later.
func a2Trace(n int, inferred bool) string { return a2TraceAfter(n, inferred, 150) }

// a2TraceAfter is a2Trace with the release releaseMs after each A2.
func a2TraceAfter(n int, inferred bool, releaseMs int) string {
	var b strings.Builder
	inf := ""
	if inferred {
		inf = `,"inferred":true`
	}
	for i := range n {
		t := func(ms int) string {
			return fmt.Sprintf("2026-01-15T09:%02d:%02d.%03dZ", i, ms/1000, ms%1000)
		}
		fmt.Fprintf(&b, `{"t":"%s","kind":"report","event":"A2","serving":{"id":"501","type":"mmwave","rsrp":-116}}`+"\n", t(0))
		fmt.Fprintf(&b, `{"t":"%s","kind":"ho","ho":"sn-release","serving":{"id":"501","type":"mmwave"},"target":{"type":"lte"}%s}`+"\n", t(releaseMs), inf)
		fmt.Fprintf(&b, `{"t":"%s","kind":"ho","ho":"sn-addition","serving":{"type":"lte"},"target":{"id":"501","type":"mmwave"}}`+"\n", t(releaseMs+2000))
		fmt.Fprintf(&b, `{"t":"%s","kind":"ra","reason":"handover","result":"success"}`+"\n", t(releaseMs+2030))
	}
	return b.String()
}

// --learn-answers learns from the recorded signalling only (an inferred
// release does not answer), stores the rates in the database file, and
// carries on from a file that exists.
func TestReplayLearnAnswers(t *testing.T) {
	dir := t.TempDir()
	unanswered := filepath.Join(dir, "unanswered.jsonl")
	answered := filepath.Join(dir, "answered.jsonl")
	if err := os.WriteFile(unanswered, []byte(a2Trace(4, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(answered, []byte(a2Trace(2, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "db.json")
	a2 := func() (m2ho.AnswerCount, bool) {
		t.Helper()
		got, err := smaxfile.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.AnswerCounts() {
			if c.Report == m2ho.ReportsNRA2 && c.Serving == signaling.CellMmWave {
				return c, true
			}
		}
		return m2ho.AnswerCount{}, false
	}
	// without the A2 hold: held, each A2 would still be live at the SN
	// addition 2 s later, which ends it neither answered nor unanswered
	out, errs, code := runCLI(t, "replay", "--mmwave-a2-hold", "0s", "--learn-answers", db, unanswered)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	c, ok := a2()
	if !ok || c.Answered != 0 || !c.Rare {
		t.Fatalf("after four A2s whose release the reader inferred: %+v (found %v), want rare and none answered", c, ok)
	}
	if !strings.Contains(out, "nr-a2") || !strings.Contains(out, "rare") {
		t.Fatalf("the text output does not show the learned rate:\n%s", out)
	}
	// Carried on: two logged releases within the deadline, and the kind
	// is no longer rare.
	if _, errs, code := runCLI(t, "replay", "--learn-answers", db, answered); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	c, _ = a2()
	if c.Answered < 1.9 || c.Unanswered < 3 || c.Rare {
		t.Fatalf("after two answered A2s on top: %+v, want about 2 answered, the 4 unanswered decayed, not rare", c)
	}
	// A file that is not a database is an error naming the flag.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version":2}`), 0o644)
	if _, errs, code := runCLI(t, "replay", "--learn-answers", bad, answered); code == 0 || !strings.Contains(errs, "--learn-answers") || !strings.Contains(errs, "version 2") {
		t.Fatalf("bad database: exit %d, stderr %q", code, errs)
	}
}

// replay learns and scores with the A2 hold m2ho run uses: an mmWave A2
// the network answers 1.5 s later (as on the February 2023 drives) is
// answered while held, so --learn-answers does not mark the kind rare
// (which would make run --answer-rates skip the clamp the hold keeps);
// with --mmwave-a2-hold 0 the A2's own deadline expires first.
func TestReplayMmWaveA2Hold(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "late.jsonl")
	if err := os.WriteFile(trace, []byte(a2TraceAfter(4, false, 1500)), 0o644); err != nil {
		t.Fatal(err)
	}
	learn := func(args ...string) (m2ho.AnswerCount, replayReport) {
		t.Helper()
		db := filepath.Join(t.TempDir(), "db.json")
		out, errs, code := runCLI(t, append(append([]string{"replay", "--json", "--learn-answers", db}, args...), trace)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var rep replayReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		got, err := smaxfile.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range got.AnswerCounts() {
			if c.Report == m2ho.ReportsNRA2 && c.Serving == signaling.CellMmWave {
				return c, rep
			}
		}
		t.Fatalf("%v: no mmWave A2 learned", args)
		return m2ho.AnswerCount{}, rep
	}
	streams := func(rep replayReport) score.PredictorReport {
		for _, p := range rep.Predictors {
			if p.Name == "streams" {
				return p
			}
		}
		t.Fatal("no streams predictor in the report")
		return score.PredictorReport{}
	}
	held, heldRep := learn()
	off, offRep := learn("--mmwave-a2-hold", "0s")
	if held.Answered < 3.5 || held.Unanswered != 0 || held.Rare {
		t.Errorf("with the hold: %+v, want the 4 answered (decayed), none unanswered, not rare", held)
	}
	if off.Unanswered < 1 || off.Answered >= held.Answered {
		t.Errorf("without the hold: %+v, want some unanswered and fewer answered than held (%+v)", off, held)
	}
	if h, o := streams(heldRep), streams(offRep); h.Predicted <= o.Predicted {
		t.Errorf("streams predicted %d handovers with the hold, %d without: want more with it", h.Predicted, o.Predicted)
	}
	if _, errs, code := runCLI(t, "replay", "--mmwave-a2-hold", "-1s", trace); code != 2 || !strings.Contains(errs, "--mmwave-a2-hold") {
		t.Errorf("negative hold: exit %d, stderr %q", code, errs)
	}
}
