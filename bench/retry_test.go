package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRetryRepetition(t *testing.T) {
	ok := RunResult{Variant: "quic"}
	bad := RunResult{Variant: "quic-wave", Problems: []string{"emulator marked the run invalid (late_pct 1.40)", "second"}}
	for _, c := range []struct {
		name             string
		rep              []RunResult
		attempt, retries int
		want             bool
		reason           string
	}{
		{"all valid", []RunResult{ok, ok}, 1, 3, false, ""},
		{"no retries asked", []RunResult{ok, bad}, 1, 0, false, ""},
		{"first of two retries", []RunResult{ok, bad}, 1, 2, true, "quic-wave (emulator marked the run invalid (late_pct 1.40))"},
		{"last retry", []RunResult{bad, ok}, 2, 2, true, "quic-wave (emulator marked the run invalid (late_pct 1.40))"},
		{"retries used up", []RunResult{ok, bad}, 3, 2, false, ""},
		{"both invalid", []RunResult{bad, bad}, 1, 1, true, "quic-wave (emulator marked the run invalid (late_pct 1.40)); quic-wave (emulator marked the run invalid (late_pct 1.40))"},
	} {
		got, why := retryRepetition(c.rep, c.attempt, c.retries)
		if got != c.want || why != c.reason {
			t.Errorf("%s: retry %v %q, want %v %q", c.name, got, why, c.want, c.reason)
		}
	}
}

// A repetition set aside leaves runs/ with the attempt that counts, and
// its files under runs-retried/, where the summary lists them and
// Reanalyze does not pool them; the next bench into the same --out
// removes them with the runs.
func TestRetriedRunsSetAside(t *testing.T) {
	dir := t.TempDir()
	m := synthBench(t, dir, 1)
	// Attempt 1 of repetition 1: m2ho invalid, pass valid but made
	// again with it.
	no := false
	tmp := filepath.Join(dir, "attempt1")
	writeRunDir(t, filepath.Join(tmp, "pass-1"), synthRun("pass", 0, synthOpts{rampS: 3}))
	writeRunDir(t, filepath.Join(tmp, "m2ho-1"), synthRun("m2ho", 0, synthOpts{rampS: 0.1, valid: &no}))
	if err := setAside(dir, []string{filepath.Join(tmp, "pass-1"), filepath.Join(tmp, "m2ho-1")}, 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"runs-retried/pass-1-try1/run.json", "runs-retried/m2ho-1-try1/emu/emulator.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("set aside: %v", err)
		}
	}
	s, err := Reanalyze(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Valid || s.Variants[1].Runs != 1 {
		t.Fatalf("the kept repetition: valid %v, m2ho runs %d (problems %v)", s.Valid, s.Variants[1].Runs, s.Problems)
	}
	// The set-aside m2ho ramps in 0.1 s, the kept one in 0.5 s: pooling it
	// would have shortened the convergence.
	ref := t.TempDir()
	mr := synthBench(t, ref, 1)
	sr, err := Reanalyze(ref, mr)
	if err != nil {
		t.Fatal(err)
	}
	if s.Variants[1].ConvergenceSMean != sr.Variants[1].ConvergenceSMean {
		t.Errorf("m2ho convergence %v with a set-aside attempt, %v without: the attempt was pooled", s.Variants[1].ConvergenceSMean, sr.Variants[1].ConvergenceSMean)
	}
	if len(s.Retried) != 2 || s.Retried[0].Variant != "pass" || len(s.Retried[0].Problems) != 0 ||
		s.Retried[1].Variant != "m2ho" || s.Retried[1].Attempt != 1 || s.Retried[1].Repetition != 1 ||
		len(s.Retried[1].Problems) == 0 || !strings.Contains(s.Retried[1].Problems[0], "emulator marked the run invalid") {
		t.Fatalf("retried %+v", s.Retried)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "repetition 1 (seed 0) attempt 1: m2ho emulator marked the run invalid") {
		t.Errorf("summary.md does not list the set-aside attempt:\n%s", md)
	}
	if n, err := clearRuns(dir); n != 2 || err != nil {
		t.Fatalf("clearRuns: %d %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(dir, retriedDir)); !os.IsNotExist(err) {
		t.Errorf("an earlier bench's set-aside attempts survived clearRuns: %v", err)
	}
}

func TestReadRetriedRejectsStrangers(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, retriedDir, "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := readRetried(dir, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, retriedDir, "ab")) {
		t.Errorf("a directory not named VARIANT-N-tryK: %v, want an error naming it", err)
	}
}
