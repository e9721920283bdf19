package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Retrying invalid repetitions (--retry-invalid). On a shared machine the
// emulator sometimes cannot keep up for a few seconds (a stolen CPU), and
// marks that run invalid: its figures are not a result. Rerunning only the
// invalid run would pair it with variants measured at another time, so the
// unit of a retry is the whole repetition: every variant again, in the same
// order, with the same seed. The attempts set aside keep every raw file, in
// DIR/runs-retried/VARIANT-N-tryK (K = the attempt, from 1), where the
// summary lists them and why; Reanalyze reads only DIR/runs. What is
// selected on is the emulator's own validity verdict, never a figure of the
// variants, and the set-aside attempts stay on disk for anyone to check.

// retriedDir is where the attempts that were set aside go.
const retriedDir = "runs-retried"

// RetriedRun is one run of a repetition that was set aside and made again.
type RetriedRun struct {
	Variant string `json:"variant"`
	// Repetition is 1-based, as in the run directories' names.
	Repetition int    `json:"repetition"`
	Seed       uint64 `json:"seed"`
	// Attempt is the 1-based attempt this run belonged to.
	Attempt  int      `json:"attempt"`
	Dir      string   `json:"dir"`
	Problems []string `json:"problems,omitempty"` // empty: this run was valid, another of its repetition was not
}

// retryRepetition decides whether a repetition's runs are set aside and
// made again: when one of them is invalid and fewer than retries retries
// have been made (attempt is the 1-based attempt just finished). reason
// names the invalid runs and their first problem.
func retryRepetition(rep []RunResult, attempt, retries int) (retry bool, reason string) {
	var bad []string
	for _, r := range rep {
		if !r.Valid() {
			bad = append(bad, fmt.Sprintf("%s (%s)", r.Variant, r.Problems[0]))
		}
	}
	if len(bad) == 0 || attempt > retries {
		return false, ""
	}
	return true, strings.Join(bad, "; ")
}

// setAside moves the run directories of one attempt into
// dir/runs-retried, named VARIANT-N-tryK.
func setAside(dir string, runDirs []string, attempt int) error {
	to := filepath.Join(dir, retriedDir)
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, rd := range runDirs {
		dst := filepath.Join(to, fmt.Sprintf("%s-try%d", filepath.Base(rd), attempt))
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		if err := os.Rename(rd, dst); err != nil {
			return fmt.Errorf("setting aside %s: %w", rd, err)
		}
	}
	return nil
}

// readRetried lists the runs set aside under dir/runs-retried, each
// analysed again for its problems, in repetition, attempt and variant
// order (vs). No such directory: none.
func readRetried(dir string, vs []Variant) ([]RetriedRun, error) {
	root := filepath.Join(dir, retriedDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []RetriedRun
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		attempt := 0
		if i := strings.LastIndex(name, "-try"); i > 0 {
			attempt, _ = strconv.Atoi(name[i+len("-try"):])
		}
		if attempt < 1 {
			return nil, fmt.Errorf("%s: not a set-aside run (want VARIANT-N-tryK)", filepath.Join(root, name))
		}
		d, err := LoadRun(filepath.Join(root, name))
		if err != nil {
			return nil, err
		}
		rr := RetriedRun{Variant: d.Variant, Repetition: d.Index + 1, Seed: d.Seed, Attempt: attempt, Dir: filepath.Join(retriedDir, name)}
		res, err := AnalyzeRun(d)
		if err != nil {
			rr.Problems = []string{err.Error()}
		} else {
			rr.Problems = res.Problems
		}
		out = append(out, rr)
	}
	order := func(name string) int {
		return slices.IndexFunc(vs, func(v Variant) bool { return v.Name == name })
	}
	slices.SortFunc(out, func(a, b RetriedRun) int {
		if a.Repetition != b.Repetition {
			return a.Repetition - b.Repetition
		}
		if a.Attempt != b.Attempt {
			return a.Attempt - b.Attempt
		}
		return order(a.Variant) - order(b.Variant)
	})
	return out, nil
}

// retriedMarkdown is summary.md's line on the attempts set aside: per
// repetition, each attempt's invalid runs and their first problem.
func retriedMarkdown(rs []RetriedRun) string {
	var b strings.Builder
	b.WriteString("- repetitions made again because a run was invalid (--retry-invalid; the attempts set aside are in " + retriedDir + "/, not in these figures):")
	sep := ""
	for _, r := range rs {
		if len(r.Problems) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s repetition %d (seed %d) attempt %d: %s %s", sep, r.Repetition, r.Seed, r.Attempt, r.Variant, r.Problems[0])
		sep = ";"
	}
	b.WriteString("\n")
	return b.String()
}
