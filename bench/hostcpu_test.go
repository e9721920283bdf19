package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const procStat = `cpu  1000 50 300 8000 100 20 30 500 0 0
cpu0 500 25 150 4000 50 10 15 250 0 0
intr 123
`

func TestReadProcStat(t *testing.T) {
	c, err := ReadProcStat(strings.NewReader(procStat), "stat")
	if err != nil {
		t.Fatal(err)
	}
	if c != (CPUTimes{Busy: 1000 + 50 + 300 + 20 + 30, Idle: 8000 + 100, Steal: 500}) {
		t.Errorf("%+v", c)
	}
	for _, bad := range []struct{ in, want string }{
		{"intr 1\ncpu  1 2 3 4 5 6 7\n", "stat:2: cpu line has 7 fields"},
		{"cpu  1 2 3 4 x 6 7 8\n", `stat:1: cpu field 5 "x"`},
		{"cpu0 1 2 3 4 5 6 7 8\n", "stat: no aggregate cpu line"},
	} {
		if _, err := ReadProcStat(strings.NewReader(bad.in), "stat"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.in, err, bad.want)
		}
	}
}

func TestHostCPUBetween(t *testing.T) {
	a := CPUTimes{Busy: 100, Idle: 800, Steal: 100}
	b := CPUTimes{Busy: 400, Idle: 1300, Steal: 300} // +300 busy, +500 idle, +200 steal
	h := hostCPUBetween(a, b)
	if math.Abs(h.StealPct-20) > 1e-9 || math.Abs(h.BusyPct-30) > 1e-9 || math.Abs(h.IdlePct-50) > 1e-9 {
		t.Errorf("%+v, want steal 20, busy 30, idle 50", h)
	}
	if h := hostCPUBetween(b, a); h != (HostCPU{}) {
		t.Errorf("counters backwards: %+v, want zero", h)
	}
	if h := hostCPUBetween(a, a); h != (HostCPU{}) {
		t.Errorf("no time: %+v, want zero", h)
	}
}

// The summary pools the runs' host CPU records, says so in summary.md and
// names the steal in an invalid run's problem.
func TestHostCPUInSummary(t *testing.T) {
	dir := t.TempDir()
	m := synthBench(t, dir, 1)
	no := false
	writeRunDir(t, filepath.Join(dir, "runs", "m2ho-1"), synthRun("m2ho", 0, synthOpts{rampS: 0.5, valid: &no}))
	for run, steal := range map[string]string{"pass-1": "4", "m2ho-1": "36"} {
		if err := os.WriteFile(filepath.Join(dir, "runs", run, hostCPUFile), []byte(`{"steal_pct": `+steal+`, "busy_pct": 50, "idle_pct": 10}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Reanalyze(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Emulator; e.HostStealRuns != 2 || e.HostStealPctMean != 20 || e.HostStealPctMax != 36 {
		t.Errorf("host steal: %d runs, mean %v, max %v; want 2, 20, 36", e.HostStealRuns, e.HostStealPctMean, e.HostStealPctMax)
	}
	if len(s.Problems) == 0 || !strings.Contains(s.Problems[0], "host CPU stolen 36.0 %") {
		t.Errorf("problems %q: want the invalid run's steal named", s.Problems)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "2 runs): mean 20.0 %, worst run 36.0 %") {
		t.Errorf("summary.md lacks the host CPU line:\n%s", md)
	}
	// Runs made before the record have none, and say nothing.
	os.Remove(filepath.Join(dir, "runs", "pass-1", hostCPUFile))
	os.Remove(filepath.Join(dir, "runs", "m2ho-1", hostCPUFile))
	if s, err := Reanalyze(dir, m); err != nil || s.Emulator.HostStealRuns != 0 || strings.Contains(s.Problems[0], "stolen") {
		t.Errorf("without records: %v, %+v", err, s.Emulator)
	}
}

func FuzzReadProcStat(f *testing.F) {
	f.Add([]byte(procStat))
	f.Add([]byte("cpu  1 2 3\n"))
	f.Add([]byte("cpu 18446744073709551615 1 1 1 1 1 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ReadProcStat(strings.NewReader(string(b)), "fuzz")
		if err == nil {
			_ = hostCPUBetween(CPUTimes{}, c)
		} else if !strings.HasPrefix(err.Error(), "fuzz") {
			t.Errorf("error %q does not name the input", err)
		}
	})
}
