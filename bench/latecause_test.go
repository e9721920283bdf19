package bench

import (
	"strings"
	"testing"

	"github.com/m2ho/m2ho/bench/emu"
)

// The summary sums the emulator's late deliveries by cause over the runs
// and prints them largest first.
func TestSummaryLateCauses(t *testing.T) {
	run := func(wake, write int64) RunResult {
		var r RunResult
		r.Variant = "pass"
		r.Emu.Loop = &emu.LoopProfile{LateByCause: map[string]emu.LateCause{"wake": {Packets: wake}, "write_down": {Packets: write}}}
		return r
	}
	s := Summarize([]RunResult{run(30, 10), run(30, 30)}, Meta{Scenario: "x", Repeat: 1})
	if c := s.Emulator.LateCauses; c["wake"] != 60 || c["write_down"] != 40 {
		t.Fatalf("late causes %v", c)
	}
	var b strings.Builder
	if err := s.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "by cause (all runs; emulator.json loop): wake 60.0 %, write_down 40.0 %") {
		t.Errorf("markdown lacks the causes:\n%s", b.String())
	}
	if lateCauses(nil) != "" {
		t.Error("no late deliveries: no line")
	}
}
