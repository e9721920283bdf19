package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A synthetic run, written in exactly the formats `m2ho emulate` and the
// bench's own iperf3 plumbing produce, so the readers, the analysis and
// the outputs are tested together without namespaces.

const (
	synthEmuStart = int64(1_750_000_000_000_000_000)
	synthOffsetS  = 0.55 // iperf3's test start on the emulator clock
	synthSecs     = 20
)

type synthOpts struct {
	rampS float64 // time after RA to climb to 95 % of capacity; 0 = 1 s
	valid *bool
}

type synthCell struct {
	id, typ string
	mbps    float64
}

var (
	synthCells = []synthCell{{"n77-a", "sub6", 250}, {"n261-a", "mmwave", 900}, {"n77-b", "sub6", 220}, {"n77-a", "sub6", 250}}
	synthHOs   = []HandoverRow{
		{Report: 4.854, Command: 5.0, RA: 5.06, From: "n77-a", To: "n261-a", Type: "sub6-to-mmwave"},
		{Report: 9.854, Command: 10.0, RA: 10.06, From: "n261-a", To: "n77-b", Type: "mmwave-to-sub6"},
		{Report: 14.854, Command: 15.0, RA: 15.06, From: "n77-b", To: "n77-a", Type: "horizontal"},
	}
)

// synthCellAt is the index of the serving cell at emulator time t.
func synthCellAt(t float64) int {
	i := 0
	for _, h := range synthHOs {
		if t >= h.Command {
			i++
		}
	}
	return i
}

func synthRun(variant string, idx int, o synthOpts) RunData {
	if o.rampS == 0 {
		o.rampS = 1
	}
	d := RunData{Variant: variant, Index: idx, Handovers: append([]HandoverRow(nil), synthHOs...),
		FalseAlarms: []FalseAlarmRow{{Report: 7.5, A1: 7.62}}}
	total := float64(synthSecs) + 3
	for k := 0; k < int(total*10); k++ {
		t := float64(k) / 10
		c := synthCells[synthCellAt(t+0.05)]
		m := c.mbps
		for _, h := range synthHOs {
			if t >= h.Command-1e-9 && t < h.Command+0.1-1e-9 {
				m = 0 // the interruption falls in this bin
			}
		}
		d.Capacity = append(d.Capacity, CapacityBin{T: t, Mbps: m, Cell: c.id, Type: c.typ})
	}
	testStart := synthEmuStart + int64(synthOffsetS*1e9)
	for k := 0; k < synthSecs*10; k++ {
		s, e := float64(k)/10, float64(k+1)/10
		te := s + synthOffsetS // emulator time of the bin's start
		since := te - synthOffsetS
		for _, h := range synthHOs {
			if te >= h.RA {
				since = te - h.RA
			}
		}
		frac := math.Min(0.95, 0.2+0.75*since/o.rampS) - 0.01*float64(k%7)
		capMbps := synthCells[synthCellAt(te+0.05)].mbps
		bytes := int64(capMbps * frac * 1e6 / 8 * 0.1)
		d.Recv = append(d.Recv, RecvInterval{Start: s, End: e, Bytes: bytes, ArrivalNs: testStart + int64(math.Round(e*1e9)) + 200_000})
		retx := int64(0)
		if k%13 == 0 {
			retx = 3
		}
		d.Sender.Intervals = append(d.Sender.Intervals, SenderInterval{Start: s, End: e, Bytes: bytes,
			Retransmits: retx, RTTus: 70_000 + int64(k%10)*1000, CwndBytes: 1 << 20})
	}
	d.Sender.TimeSecs = testStart / 1e9
	d.LaunchNs = testStart - 250_000_000
	valid := o.valid == nil || *o.valid
	d.Emu = EmulatorSummary{Scenario: "synth", Scale: 1, StartUnixNS: synthEmuStart, DurationS: total, Valid: valid,
		LatePct: 0.1, MaxLateMs: 2, DeliveredPackets: 100000, OverflowDrops: 10, ReorderFlushes: 1,
		FalseAlarms: 1, Handovers: int64(len(synthHOs)), DupAcksUp: 7}
	return d
}

// iperfUnits formats like iperf3's unit_snprintf for -f k transfers.
func iperfKBytes(b int64) string {
	v := float64(b) / 1024
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%4.0f KBytes", v)
	case v >= 9.995:
		return fmt.Sprintf("%4.1f KBytes", v)
	}
	return fmt.Sprintf("%4.2f KBytes", v)
}

// writeRunDir writes d as a run directory, as Run leaves it.
func writeRunDir(t testing.TB, dir string, d RunData) {
	t.Helper()
	ed := filepath.Join(dir, emuSubdir)
	if err := os.MkdirAll(ed, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString("t_s\tmbps\tcell\ttype\n")
	for _, c := range d.Capacity {
		fmt.Fprintf(&b, "%.1f\t%.3f\t%s\t%s\n", c.T, c.Mbps, c.Cell, c.Type)
	}
	put(filepath.Join(ed, "capacity.tsv"), b.String())
	b.Reset()
	b.WriteString("report_s\tcommand_s\tra_s\tfrom\tto\ttype\n")
	for _, h := range d.Handovers {
		fmt.Fprintf(&b, "%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", h.Report, h.Command, h.RA, h.From, h.To, h.Type)
	}
	put(filepath.Join(ed, "handovers.tsv"), b.String())
	b.Reset()
	b.WriteString("report_s\ta1_s\n")
	for _, f := range d.FalseAlarms {
		fmt.Fprintf(&b, "%.3f\t%.3f\n", f.Report, f.A1)
	}
	put(filepath.Join(ed, "falsealarms.tsv"), b.String())
	ej, _ := json.Marshal(d.Emu)
	put(filepath.Join(ed, "emulator.json"), string(ej))
	mj, _ := json.Marshal(runMeta{Variant: d.Variant, Index: d.Index, LaunchNs: d.LaunchNs})
	put(filepath.Join(dir, runMetaFile), string(mj))

	type stream struct {
		Socket      int     `json:"socket"`
		Start       float64 `json:"start"`
		End         float64 `json:"end"`
		Seconds     float64 `json:"seconds"`
		Bytes       int64   `json:"bytes"`
		Retransmits int64   `json:"retransmits"`
		SndCwnd     int64   `json:"snd_cwnd"`
		RTT         int64   `json:"rtt"`
		Sender      bool    `json:"sender"`
	}
	var ivs []map[string]any
	for _, iv := range d.Sender.Intervals {
		s := stream{Socket: 5, Start: iv.Start, End: iv.End, Seconds: iv.End - iv.Start, Bytes: iv.Bytes,
			Retransmits: iv.Retransmits, SndCwnd: iv.CwndBytes, RTT: iv.RTTus, Sender: true}
		ivs = append(ivs, map[string]any{"streams": []stream{s}, "sum": s})
	}
	cj, _ := json.Marshal(map[string]any{
		"start":     map[string]any{"timestamp": map[string]any{"time": "x", "timesecs": d.Sender.TimeSecs}},
		"intervals": ivs,
		"end":       map[string]any{},
	})
	put(filepath.Join(dir, clientJSONFile), string(cj))

	b.Reset()
	first := d.LaunchNs + 1
	fmt.Fprintf(&b, "%d\t-----------------------------------------------------------\n", first)
	fmt.Fprintf(&b, "%d\tServer listening on 5201 (test #1)\n", first)
	fmt.Fprintf(&b, "%d\t[ ID] Interval           Transfer     Bitrate\n", first)
	var sum int64
	for _, iv := range d.Recv {
		sum += iv.Bytes
		fmt.Fprintf(&b, "%d\t[  5] %6.2f-%-6.2f  sec  %s  %.0f Kbits/sec                  \n", iv.ArrivalNs, iv.Start, iv.End,
			iperfKBytes(iv.Bytes), float64(iv.Bytes)*8/(iv.End-iv.Start)/1000)
	}
	last := d.Recv[len(d.Recv)-1]
	fmt.Fprintf(&b, "%d\t[  5] %6.2f-%-6.2f  sec  0.00 KBytes  0.00 Kbits/sec\n", last.ArrivalNs+1, last.End, last.End)
	fmt.Fprintf(&b, "%d\t- - - - - - - - - - - - - - - - - - - - - - - - -\n", last.ArrivalNs+2)
	fmt.Fprintf(&b, "%d\t[  5]   0.00-%.2f  sec  %s  1000 Kbits/sec                  receiver\n", last.ArrivalNs+3, last.End, iperfKBytes(sum))
	put(filepath.Join(dir, serverLogFile), b.String())
}

// synthBench writes a whole bench output directory: repeat runs of pass
// (slow recovery) and m2ho (fast recovery), alternating.
func synthBench(t testing.TB, dir string, repeat int) Meta {
	for i := range repeat {
		writeRunDir(t, filepath.Join(dir, "runs", fmt.Sprintf("pass-%d", i+1)), synthRun("pass", i, synthOpts{rampS: 3}))
		writeRunDir(t, filepath.Join(dir, "runs", fmt.Sprintf("m2ho-%d", i+1)), synthRun("m2ho", i, synthOpts{rampS: 0.5}))
	}
	return Meta{Scenario: "synth", Scale: 1, Seed: 1, DurationS: synthSecs, Repeat: repeat, CommandLine: "m2ho bench --scenario synth",
		Variants: []Variant{{Name: "pass", Args: BuiltinVariants["pass"]}, {Name: "m2ho", Args: BuiltinVariants["m2ho"]}}}
}
