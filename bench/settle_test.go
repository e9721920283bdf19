package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// settleRun is a run on a constant 50 Mbit/s link with one handover
// (command 2.0 s, random access 2.06 s on the emulator's clock, which is
// iperf3's here: offset 0): the flow carries 40 Mbit/s (80 % of the
// capacity) from the start and 46 Mbit/s (92 %) from 4.0 s on.
func settleRun() RunData {
	const emuStart = int64(1_700_000_000_000_000_000)
	d := RunData{Variant: "quic-wave", Seed: 1,
		Capacity:  []CapacityBin{{T: 0, Mbps: 50, Cell: "a", Type: "sub6"}},
		Handovers: []HandoverRow{{Report: 1.9, Command: 2.0, RA: 2.06, From: "a", To: "b", Type: "horizontal"}}}
	d.Emu.StartUnixNS, d.Emu.Valid, d.Emu.Handovers = emuStart, true, 1
	for k := range 100 {
		t0, t1 := float64(k)/10, float64(k+1)/10
		mbps := 40.0
		if k >= 40 {
			mbps = 46
		}
		d.Recv = append(d.Recv, RecvInterval{Start: t0, End: t1, Bytes: int64(mbps * 1e6 / 8 * 0.1),
			ArrivalNs: emuStart + int64(math.Round(t1*1e9))})
	}
	return d
}

// Settling is convergence at 90 % of the capacity (QUIC Wave's switch
// target): a flow at 80 % has converged (75 %) but not settled, and
// settles when its window reaches 90 %. The run's per-handover row and
// the summary (JSON and markdown) carry it.
func TestSettleWithinTenPercent(t *testing.T) {
	r, err := AnalyzeRun(settleRun())
	if err != nil {
		t.Fatal(err)
	}
	conv, settle := r.ConvergenceByWindow["0.1s"][0], r.SettleByWindow["0.1s"][0]
	// 75 %: the first whole bin after RA, [2.1, 2.2]. 90 %: [4.0, 4.1].
	if !conv.Converged || !near(conv.Seconds, 0.14) {
		t.Errorf("convergence 0.1 s %+v, want 0.14 s", conv)
	}
	if !settle.Converged || !near(settle.Seconds, 2.04) {
		t.Errorf("settle 0.1 s %+v, want 2.04 s", settle)
	}
	// 1 s window: [3.9, 4.9] is the first to average 45 Mbit/s
	// (0.1·40 + 0.9·46 = 45.4; [3.8, 4.8] has 44.8).
	if s := r.SettleByWindow["1s"][0]; !s.Converged || !near(s.Seconds, 2.84) {
		t.Errorf("settle 1 s %+v, want 2.84 s", s)
	}
	if h := r.HandoverStats[0]; !near(h.SettleS["0.1s"], 2.04) || !h.Settled["0.1s"] || !near(h.ConvergenceS["0.1s"], 0.14) {
		t.Errorf("handover row %+v", h)
	}

	// A flow that never gets within 10 %: the dwell, not settled.
	never := settleRun()
	for i := range never.Recv {
		never.Recv[i].Bytes = int64(40e6 / 8 * 0.1)
	}
	rn, err := AnalyzeRun(never)
	if err != nil {
		t.Fatal(err)
	}
	if s := rn.SettleByWindow["0.1s"][0]; s.Converged || !near(s.Seconds, 10-2.06) {
		t.Errorf("never within 10 %%: %+v, want the dwell 7.94 s, not settled", s)
	}
	if !rn.ConvergenceByWindow["0.1s"][0].Converged {
		t.Error("at 80 % the flow has converged (75 %)")
	}

	r.Index, rn.Index = 0, 1
	s := Summarize([]RunResult{r, rn}, Meta{Scenario: "s", Repeat: 2, Variants: []Variant{{Name: "quic-wave"}}})
	v := s.Variants[0]
	if !near(v.SettleSMeanByWindow["0.1s"], (2.04+7.94)/2) || v.NotSettledByWindow["0.1s"] != 1 || v.NotSettledByWindow["1s"] != 1 {
		t.Errorf("summary settle %v, not settled %v", v.SettleSMeanByWindow, v.NotSettledByWindow)
	}
	var js bytes.Buffer
	if err := s.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Variants []struct {
			Settle map[string]float64 `json:"settle_s_mean_by_window"`
		} `json:"variants"`
		Table []struct {
			Settle map[string]float64 `json:"settle_s"`
		} `json:"handover_table"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Variants) != 1 || !near(back.Variants[0].Settle["0.1s"], 4.99) || len(back.Table) != 2 || !near(back.Table[0].Settle["0.1s"], 2.04) {
		t.Errorf("summary.json: %+v", back)
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| within 10 % of capacity, mean (s) | 4.990 |", "| never within 10 % of capacity | 1 |", "| 0.14 | 1.04 | 2.04 |", "| 7.94* |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md.String())
		}
	}
}
