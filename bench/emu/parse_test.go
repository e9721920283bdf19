package emu

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// testDataDir is $M2HO_SHARED_DATA, else the repository's ../shared/data
// (these tests run in bench/emu; bench/emu/driver.DataDir is the loader's).
func testDataDir() string {
	if d := os.Getenv("M2HO_SHARED_DATA"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "..", "shared", "data")
}

// osOpts reads the files a scenario refers to from the file system, as
// bench/emu/driver's loaders do.
func osOpts(o LoadOptions) LoadOptions {
	o.Open = func(p string) (io.ReadCloser, error) { return os.Open(p) }
	if o.DataDir == "" {
		o.DataDir = testDataDir()
	}
	return o
}

func dataDir(t testing.TB) string {
	d := testDataDir()
	if _, err := os.Stat(d); err != nil {
		t.Skipf("shared data not found at %s (set M2HO_SHARED_DATA): %v", d, err)
	}
	return d
}

func TestParseMahimahi(t *testing.T) {
	m, err := ParseMahimahi("x", strings.NewReader("1\n1\n2\n4\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     int64
	}{
		{0, time.Millisecond, 0},
		{0, 2 * time.Millisecond, 3000},
		{0, 4 * time.Millisecond, 4500},
		{4 * time.Millisecond, 8 * time.Millisecond, 6000}, // op at 4 and the repeat's 5,5,6
		{0, 40 * time.Millisecond, 39 * 1500},              // 40 ms itself is the next period's
	} {
		if g := m.Bytes(tc.from, tc.to); g != tc.want {
			t.Errorf("Bytes(%v,%v) = %d want %d", tc.from, tc.to, g, tc.want)
		}
	}
	for in, want := range map[string]string{
		"1\n\n2\n": "x:2: empty line",
		"3\n2\n":   "x:2: timestamp 2 goes back",
		"0\n0\n":   "x:2: trace must last",
		"1\nabc\n": `x:2: "abc" is not`,
		"":         "x: no timestamps",
		"-1\n":     "x:1:",
	} {
		if _, err := ParseMahimahi("x", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestParseMbpsTrace(t *testing.T) {
	s, err := ParseMbpsTrace("x", strings.NewReader("1.0\t8\n2.0\t16\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := s.Bytes(0, time.Second); g != 1e6 {
		t.Errorf("first second %d", g)
	}
	if g := s.Bytes(time.Second, 2*time.Second); g != 2e6 {
		t.Errorf("second second %d", g)
	}
	if g := s.Bytes(500*time.Millisecond, 1500*time.Millisecond); g != 1.5e6 {
		t.Errorf("straddling %d", g)
	}
	if g := s.Bytes(2*time.Second, 3*time.Second); g != 1e6 {
		t.Errorf("repeat %d", g)
	}
	for in, want := range map[string]string{
		"1.0\t8\n1.0\t8\n": "x:2: time",
		"1.0\n":            "x:1: want",
		"1.0\tfast\n":      "x:1: Mbps",
		"# nothing\n":      "x: no samples",
	} {
		if _, err := ParseMbpsTrace("x", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

const iperfSnippet = `{
 "start": {"timestamp": {"time": "Fri, 17 Feb 2023 06:44:49 GMT", "timesecs": 1676616289}},
 "intervals": [
  {"sum": {"start": 0, "end": 0.1, "bytes": 1000}},
  {"sum": {"start": 0.1, "end": 0.2, "bytes": 3000}}
 ]
}`

func TestParseIperf3UDP(t *testing.T) {
	ip, err := ParseIperf3UDP("x", strings.NewReader(iperfSnippet))
	if err != nil {
		t.Fatal(err)
	}
	if !ip.Start.Equal(time.Unix(1676616289, 0)) {
		t.Errorf("start %v", ip.Start)
	}
	if g := ip.Bytes(0, 100*time.Millisecond); g != 1000 {
		t.Errorf("first interval %d", g)
	}
	if g := ip.Bytes(150*time.Millisecond, 200*time.Millisecond); g != 1500 {
		t.Errorf("half of second %d", g)
	}
	for in, want := range map[string]string{
		"{\n\"intervals\": [\n,]}":                                      "x:3:",
		`{"intervals": []}`:                                             "intervals: none",
		`{"intervals": [{"sum": {"end": 0.1, "bytes": -1}}]}`:           "intervals[0].sum",
		`{"intervals": [{}]}`:                                           "intervals[0].sum: missing",
		"{\n\"intervals\": [{\"sum\": {\"end\": \"a\"}}]}":              "x:2: field",
		`{"intervals": [{"sum": {"end": 0.2}}, {"sum": {"end": 0.1}}]}`: "intervals[1].sum.end",
	} {
		if _, err := ParseIperf3UDP("x", strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestRealCapacityFiles(t *testing.T) {
	d := dataDir(t)
	for _, tc := range []struct {
		kind, path string
		lo, hi     float64 // plausible mean Mbps
	}{
		{"iperf3", "m2ho-mobicom24/sample_iperf3_traces/udp-bw-jitter-1-2023-02-16-224449.log", 20, 2000},
		{"mahimahi", "throughput-traces/Verizon-LTE-short.down", 1, 100},
		{"mbps-trace", "throughput-traces/5g_trace_103_driving", 50, 2000},
	} {
		f, err := os.Open(filepath.Join(d, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseCapacity(tc.kind, tc.path, f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		var mean float64
		switch c := c.(type) {
		case *IperfUDP:
			mean = c.MeanMbps()
			if c.Start.IsZero() || c.Period() < 50*time.Second {
				t.Errorf("%s: start %v period %v", tc.path, c.Start, c.Period())
			}
		case *Mahimahi:
			mean = c.MeanMbps()
		case *Series:
			mean = c.MeanMbps()
		}
		if mean < tc.lo || mean > tc.hi {
			t.Errorf("%s: mean %.1f Mbps outside [%v,%v]", tc.path, mean, tc.lo, tc.hi)
		}
		var sum int64
		for s := time.Duration(0); s < 3*time.Second; s += 125 * time.Microsecond {
			sum += c.Bytes(s, s+125*time.Microsecond)
		}
		if sum != c.Bytes(0, 3*time.Second) {
			t.Errorf("%s: slot sums %d != %d", tc.path, sum, c.Bytes(0, 3*time.Second))
		}
	}
}

func TestCapacityAdditive(t *testing.T) {
	ser, _ := NewSeries([]time.Duration{time.Second, 1500 * time.Millisecond}, []int64{1234567, 89})
	for _, c := range []Capacity{Mbps(333.3), Mbps(250), ser, Scaled{Mbps(250), 0.37}, Scaled{ser, 3}} {
		var sum int64
		for s := time.Duration(0); s < 5*time.Second; s += 125 * time.Microsecond {
			b := c.Bytes(s, s+125*time.Microsecond)
			if b < 0 {
				t.Fatalf("%T negative", c)
			}
			sum += b
		}
		if sum != c.Bytes(0, 5*time.Second) {
			t.Errorf("%T: %d != %d", c, sum, c.Bytes(0, 5*time.Second))
		}
	}
	if g := Mbps(8).Bytes(0, time.Second); g != 1e6 {
		t.Errorf("8 Mbps for 1 s = %d", g)
	}
}

func refs() []CellRef {
	return []CellRef{{"s1", signaling.CellSub6}, {"s2", signaling.CellSub6}, {"m1", signaling.CellMmWave}, {"m2", signaling.CellMmWave}}
}

func TestSynthesizeReproducible(t *testing.T) {
	p := Synthetic{Dwell: Dist{Kind: "exponential", Mean: 9 * time.Second}, Vertical: 0.5, FalseAlarms: 0.2}
	a, err := Synthesize(refs(), p, 20000*time.Second, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Synthesize(refs(), p, 20000*time.Second, 7)
	c, _ := Synthesize(refs(), p, 20000*time.Second, 8)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same schedule")
	}
	mean := a.Handovers[len(a.Handovers)-1].At / time.Duration(len(a.Handovers))
	if mean < 8500*time.Millisecond || mean > 10*time.Second { // min dwell 1 s nudges the mean up
		t.Errorf("mean dwell %v", mean)
	}
	typ := map[string]signaling.CellType{}
	for _, r := range refs() {
		typ[r.ID] = r.Type
	}
	vert, cur := 0, a.Start
	for _, h := range a.Handovers {
		if h.To == cur {
			t.Fatal("handover to the serving cell")
		}
		if typ[h.To] != typ[cur] {
			vert++
		}
		cur = h.To
	}
	if f := float64(vert) / float64(len(a.Handovers)); f < 0.45 || f > 0.55 {
		t.Errorf("vertical fraction %.2f", f)
	}
	if f := float64(len(a.FalseAlarms)) / float64(len(a.Handovers)); f < 0.15 || f > 0.25 {
		t.Errorf("false alarms per handover %.2f", f)
	}
}

func TestFromEvents(t *testing.T) {
	day := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s string) time.Time {
		d, _ := time.ParseDuration(s)
		return day.Add(22*time.Hour + 44*time.Minute + d)
	}
	start := time.Date(2023, 2, 17, 6, 44, 49, 0, time.UTC) // iperf3, UTC; the log is PST
	evs := []signaling.Event{
		{Time: at("53.1s"), Kind: signaling.KindReport, Meas: signaling.MeasB1, Serving: signaling.Cell{Type: signaling.CellLTE}},
		{Time: at("53.17s"), Kind: signaling.KindHOCommand, Target: signaling.Cell{Type: signaling.CellSub6}},
		{Time: at("53.23s"), Kind: signaling.KindRandomAccess},
		{Time: at("59.886s"), Kind: signaling.KindReport, Meas: signaling.MeasA3},
		{Time: at("59.928s"), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "393", Type: signaling.CellSub6}},
		{Time: at("64s"), Kind: signaling.KindReport, Meas: signaling.MeasA2, Serving: signaling.Cell{Type: signaling.CellSub6}},
		{Time: at("71.254s"), Kind: signaling.KindReport, Meas: signaling.MeasA5},
		{Time: at("71.3s"), Kind: signaling.KindHOCommand, Target: signaling.Cell{Type: signaling.CellMmWave}},
	}
	s := FromEvents(evs, SinceTimeOfDay(evs[0].Time, start), time.Second)
	want := []Handover{
		{At: 4170 * time.Millisecond, To: "sub6-1", ToType: signaling.CellSub6, Report: signaling.MeasB1, Lead: 70 * time.Millisecond},
		{At: 10928 * time.Millisecond, To: "393", ToType: signaling.CellSub6, Report: signaling.MeasA3, Lead: 42 * time.Millisecond},
		{At: 22300 * time.Millisecond, To: "mmwave-1", ToType: signaling.CellMmWave, Report: signaling.MeasA5, Lead: 46 * time.Millisecond},
	}
	if !reflect.DeepEqual(s.Handovers, want) {
		t.Fatalf("handovers\n got %+v\nwant %+v", s.Handovers, want)
	}
	if len(s.FalseAlarms) != 1 || s.FalseAlarms[0].At != 15*time.Second || s.FalseAlarms[0].Report != signaling.MeasA2 {
		t.Fatalf("false alarms %+v", s.FalseAlarms)
	}
	if s.StartType != signaling.CellLTE && s.StartType != signaling.CellSub6 {
		t.Fatalf("start %v", s.StartType)
	}
}

func TestBuiltinScenarios(t *testing.T) {
	if g := BuiltinNames(); !reflect.DeepEqual(g, []string{"bdp-switch", "high-bdp", "low-bdp", "measured", "mixed-drive", "steady"}) {
		t.Fatalf("builtins %v", g)
	}
	md, err := Builtin("mixed-drive", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Config.Cells) != 6 || len(md.Config.Schedule.Handovers) < 15 || md.Config.Duration != 300*time.Second {
		t.Fatalf("mixed-drive: %d cells, %d handovers", len(md.Config.Cells), len(md.Config.Schedule.Handovers))
	}
	st, err := Builtin("steady", LoadOptions{})
	if err != nil || len(st.Config.Schedule.Handovers) != 0 {
		t.Fatalf("steady: %v", err)
	}
	// Without an XCAL reader the measured drive cannot load; without
	// ../shared/data it fails earlier, naming the missing capacity log.
	want := "schedule.xcal"
	if _, err := Builtin("measured", osOpts(LoadOptions{})); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("measured without an XCAL reader: %v (want an error naming %s)", err, want)
	}
	// Without a file opener it fails naming the file it needs.
	if _, err := Builtin("measured", LoadOptions{XCAL: func(string) ([]signaling.Event, error) { return nil, nil }}); err == nil ||
		!strings.Contains(err.Error(), "m2ho-mobicom24/") || !strings.Contains(err.Error(), "LoadOptions.Open") {
		t.Fatalf("measured without a file opener: %v", err)
	}
	if sc := md.Scaled(0.5); sc.Config.Scale != 0.5 || md.Config.Scale != 1 {
		t.Fatal("Scaled must copy")
	}
	// The files on disk are the embedded ones.
	data, err := os.ReadFile("scenarios/mixed-drive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	disk, err := ParseScenario("scenarios/mixed-drive.yaml", "scenarios", data, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(disk.Config.Schedule, md.Config.Schedule) {
		t.Fatal("disk and builtin differ")
	}
}

func TestMeasuredScenario(t *testing.T) {
	dataDir(t)
	var asked string
	fake := func(path string) ([]signaling.Event, error) {
		asked = path
		d := time.Date(0, 1, 1, 22, 44, 53, 0, time.UTC)
		return []signaling.Event{
			{Time: d, Kind: signaling.KindReport, Meas: signaling.MeasB1, Serving: signaling.Cell{Type: signaling.CellLTE}},
			{Time: d.Add(70 * time.Millisecond), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "88", Type: signaling.CellSub6}},
			{Time: d.Add(18 * time.Second), Kind: signaling.KindReport, Meas: signaling.MeasA5, Serving: signaling.Cell{ID: "88", Type: signaling.CellSub6}},
			{Time: d.Add(18*time.Second + 46*time.Millisecond), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "522", Type: signaling.CellMmWave}},
		}, nil
	}
	scn, err := Builtin("measured", osOpts(LoadOptions{XCAL: fake}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(asked, "sample_link_layer_traces/bw-1-ho.csv") {
		t.Fatalf("asked %q", asked)
	}
	// The capacity log has the mmWave edges of its drive: no model's on top.
	if scn.Config.MmWaveEdge != nil {
		t.Fatalf("a replay with a capacity log has the model's mmWave edge too: %+v", scn.Config.MmWaveEdge)
	}
	// Aligned by timestamps (the fake log starts 4.07 s into the UDP
	// log), then refined against the capacity log's mmWave step.
	dr := scn.Drive
	if dr == nil || dr.Alignment.Mode != AlignTimestamps || dr.Alignment.ShiftS < -3 || dr.Alignment.ShiftS > 3 || dr.Replay != "log" {
		t.Fatalf("drive %+v", dr)
	}
	shift := time.Duration(math.Round(dr.Alignment.ShiftS*10)) * 100 * time.Millisecond
	h := scn.Config.Schedule.Handovers
	if len(h) != 2 || h[0].At != 4070*time.Millisecond+shift || h[1].To != "522" || h[1].Lead != 46*time.Millisecond ||
		!h[0].NoReport || h[0].Command == nil || h[0].Command.Target.ID != "88" {
		t.Fatalf("handovers %+v (shift %v)", h, shift)
	}
	// The two reports are replayed as they are.
	if r := scn.Config.Schedule.Replay; len(r) != 2 || r[0].Event.Meas != signaling.MeasB1 || r[0].At != 4*time.Second+shift {
		t.Fatalf("replay %+v", r)
	}
	m, err := New(scn.Config, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Delivery
	var ev []signaling.Event
	m.Step(t0.Add(30*time.Second), &out, &ev)
	if m.Serving().ID != "522" || m.Counters().Handovers[0][1] != 1 {
		t.Fatalf("serving %v counters %+v", m.Serving(), m.Counters())
	}
}

func TestScenarioErrorsNameTheField(t *testing.T) {
	base := "duration: 10s\ncells:\n  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 100}}\n"
	for in, want := range map[string]string{
		base + "  - {id: b, type: sub6, capacity: {mbps: 100}}\n":              "cells[1].buffer",
		base + "  - {id: b, type: wifi, buffer: 1MB, capacity: {mbps: 100}}\n": "cells[1].type",
		base + "  - {id: b, type: sub6, buffer: 1MB, capacity: {}}\n":          "cells[1].capacity: give exactly one",
		base + "  - {id: b, type: sub6, buffer: lots, capacity: {mbps: 1}}\n":  "not a byte size",
		base + "  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 1}}\n":   "declared twice",
		base + "colour: red\n": "colour",
		base + "schedule:\n  handovers:\n    - {at: 1s, to: zz}\n":                  "schedule.handovers[0].to",
		base + "schedule:\n  handovers:\n    - {at: 1s, to: a}\n":                   "already serving",
		base + "schedule:\n  handovers:\n    - {at: 1s, to: a, report: C7}\n":       "schedule.handovers[0].report",
		base + "handover:\n  report_lead: {dist: zipf, mean: 1s}\n":                 "handover.report_lead.dist",
		base + "slots: {events: some}\n":                                            "slots.events",
		base + "errors: {harq_fraction: 2}\n":                                       "errors.harq_fraction",
		"cells: []\n":                                                               "duration",
		base + "  - {id: b, type: sub6, buffer: 1MB, capacity: {mahimahi: nope}}\n": "cells[1].capacity",
	} {
		_, err := ParseScenario("s.yaml", "", []byte(in), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "s.yaml") {
			t.Errorf("%q:\n error %v\n want %q", in, err, want)
		}
	}
}

// TestScenarioValidationNamesEachField: every validation error starts
// with the YAML path of the one field that is wrong.
func TestScenarioValidationNamesEachField(t *testing.T) {
	base := "duration: 10s\ncells:\n  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 100}}\n"
	cell := func(s string) string { return base + "  - {" + s + "}\n" }
	sched := func(s string) string { return base + "schedule:\n" + s }
	const dwell = "{dist: fixed, mean: 1s}"
	for _, tc := range []struct{ field, in string }{
		{"duration", "cells: []\n"},
		{"duration", "duration: 25h\n"},
		{"scale", base + "scale: -1\n"},
		{"rtt", base + "rtt: -1ms\n"},
		{"uplink.mbps", base + "uplink: {mbps: -1}\n"},
		{"uplink.mbps", base + "uplink: {mbps: 2e6}\n"},
		{"slots.sub6", base + "slots: {sub6: -1ms}\n"},
		{"slots.mmwave", base + "slots: {mmwave: -1ms}\n"},
		{"slots.events", base + "slots: {events: some}\n"},
		{"slots.background_load", base + "slots: {background_load: 1}\n"},
		{"errors.harq_fraction", base + "errors: {harq_fraction: 2}\n"},
		{"errors.retx_delay.dist", base + "errors: {harq_fraction: 0.1, retx_delay: {dist: zipf, mean: 1ms}}\n"},
		{"handover.report_lead.mean", base + "handover:\n  report_lead: {dist: fixed}\n"},
		{"handover.report_lead.max", base + "handover:\n  report_lead: {dist: uniform, min: 10ms, max: 5ms}\n"},
		{"handover.report_lead.min", base + "handover:\n  report_lead: {dist: uniform, min: -10ms, max: 5ms}\n"},
		{"handover.report_lead.sd", base + "handover:\n  report_lead: {dist: normal, mean: 1s, sd: -1ms}\n"},
		{"handover.report_lead.max", base + "handover:\n  report_lead: {dist: normal, mean: 1s, min: 10ms, max: 5ms}\n"},
		{"handover.interruption", base + "handover: {interruption: -1ms}\n"},
		{"handover.command_to_exec", base + "handover: {command_to_exec: -1ms}\n"},
		{"handover.flush_delay", base + "handover: {flush_delay: 1s}\n"},
		{"cells[1].id", cell("type: sub6, buffer: 1MB, capacity: {mbps: 1}")},
		{"cells[1].id", cell("id: a, type: sub6, buffer: 1MB, capacity: {mbps: 1}")},
		{"cells[1].type", cell("id: b, type: wifi, buffer: 1MB, capacity: {mbps: 1}")},
		{"cells[1].buffer", cell("id: b, type: sub6, capacity: {mbps: 1}")},
		{"cells[1].slot", cell("id: b, type: sub6, buffer: 1MB, slot: -1ms, capacity: {mbps: 1}")},
		{"cells[1].capacity", cell("id: b, type: sub6, buffer: 1MB, capacity: {}")},
		{"cells[1].capacity.mbps", cell("id: b, type: sub6, buffer: 1MB, capacity: {mbps: -5}")},
		{"cells[1].capacity.iperf3", cell("id: b, type: sub6, buffer: 1MB, capacity: {mbps: 1, iperf3: x.log}")},
		{"cells[1].capacity.mahimahi", cell("id: b, type: sub6, buffer: 1MB, capacity: {mahimahi: nope}")},
		{"cell_defaults.mmwave.buffer", base + "cell_defaults:\n  mmwave: {capacity: {mbps: 1}}\n"},
		{"schedule.xcal", sched("  synthetic: {dwell: " + dwell + "}\n  xcal: x.csv\n")},
		{"schedule.handovers", sched("  synthetic: {dwell: " + dwell + "}\n  handovers:\n    - {at: 1s, to: a}\n")},
		{"schedule.capacity", sched("  xcal: x.csv\n  iperf3: a.log\n  capacity: b.log\n")},
		{"schedule.replay", sched("  xcal: x.csv\n  replay: some\n")},
		{"errors.flush_holes", base + "errors: {flush_holes: 1.5}\n"},
		{"rtt_by_type.wifi", base + "rtt_by_type: {wifi: 10ms}\n"},
		{"capacity_variation", base + "capacity_variation: wild\n"},
		{"schedule.synthetic.vertical", sched("  synthetic: {dwell: " + dwell + ", vertical: 2}\n")},
		{"schedule.synthetic.false_alarms", sched("  synthetic: {dwell: " + dwell + ", false_alarms: -1}\n")},
		{"schedule.synthetic.dwell.dist", sched("  synthetic: {dwell: {dist: zipf}}\n")},
		{"schedule.handovers[0].to", sched("  handovers:\n    - {at: 1s}\n")},
		{"schedule.handovers[0].to", sched("  handovers:\n    - {at: 1s, to: zz}\n")},
		{"schedule.handovers[0].at", sched("  handovers:\n    - {at: -1s, to: a}\n")},
		{"schedule.handovers[0].lead", sched("  handovers:\n    - {at: 1s, to: a, lead: -1ms}\n")},
		{"schedule.handovers[0].report", sched("  handovers:\n    - {at: 1s, to: a, report: C7}\n")},
		{"schedule.handovers[0].type", sched("  handovers:\n    - {at: 1s, to: a, type: wifi}\n")},
		{"schedule.false_alarms[0].at", sched("  false_alarms:\n    - {at: -1s, report: A3}\n")},
		{"schedule.false_alarms[0].a1_after", sched("  false_alarms:\n    - {at: 1s, report: A3, a1_after: -1s}\n")},
		{"schedule.false_alarms[0].report", sched("  false_alarms:\n    - {at: 1s, report: A1}\n")},
	} {
		_, err := ParseScenario("s.yaml", "", []byte(tc.in), LoadOptions{})
		prefix := "s.yaml: " + tc.field
		if err == nil {
			t.Errorf("%s: no error for\n%s", tc.field, tc.in)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, prefix) || len(msg) == len(prefix) || (msg[len(prefix)] != ':' && msg[len(prefix)] != ' ') {
			t.Errorf("%s: error %q does not name the field first", tc.field, msg)
		}
	}
}

func TestMMLog(t *testing.T) {
	var buf bytes.Buffer
	c := oneMs()
	c.Cells[1].Buffer = 1500
	c.Cells[0].Capacity = Mbps(0)
	c.Schedule.Handovers = []Handover{{At: 3 * time.Millisecond, To: "B"}}
	r := newRun(t, c)
	l := NewMMLog(&buf, "down", "test")
	r.m.SetLog(Down, l)
	r.m.Enqueue(t0, Down, 1, 1500)
	r.m.Enqueue(t0, Down, 2, 1000)
	r.until(70 * time.Millisecond)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "# mahimahi mm-link (down) [test] (m2ho emu)\n# base timestamp: 0\n0 + 1500\n0 + 1000\n3 d 1 1000\n63 # 1500\n64 - 1500 64\n64 # 1500\n65 # 1500\n66 # 1500\n67 # 1500\n68 # 1500\n69 # 1500\n"
	if buf.String() != want {
		t.Fatalf("log\n%s\nwant\n%s", buf.String(), want)
	}
}

func FuzzParseMahimahi(f *testing.F) {
	for _, s := range []string{"1\n1\n2\n4\n", "0\n0\n", "", "5\n3\n", "18446744073709551615\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseMahimahi("f", strings.NewReader(in))
		if err != nil {
			return
		}
		checkCapacity(t, m)
	})
}

func FuzzParseMbpsTrace(f *testing.F) {
	for _, s := range []string{"1.0\t8\n2.0\t16\n", "1e308\t1\n", "0.0000001\t1000\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseMbpsTrace("f", strings.NewReader(in))
		if err != nil {
			return
		}
		checkCapacity(t, s)
	})
}

func FuzzParseIperf3UDP(f *testing.F) {
	f.Add(iperfSnippet)
	f.Add(`{"intervals": [{"sum": {"end": 1e-9, "bytes": 1e14}}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseIperf3UDP("f", strings.NewReader(in))
		if err != nil {
			return
		}
		checkCapacity(t, s.Series)
	})
}

func FuzzParseScenario(f *testing.F) {
	for _, n := range BuiltinNames() {
		b, _ := builtinFS.ReadFile("scenarios/" + n + ".yaml")
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		scn, err := ParseScenario("f", "", []byte(in), LoadOptions{})
		if err != nil {
			return
		}
		if scn.Config.Duration > time.Hour {
			return
		}
		m, err := New(scn.Config, t0, 1)
		if err != nil {
			t.Fatalf("loaded but New fails: %v", err)
		}
		var out []Delivery
		var ev []signaling.Event
		m.Enqueue(t0, Down, 1, 1500)
		m.Step(t0.Add(time.Second), &out, &ev)
	})
}

func checkCapacity(t *testing.T, c Capacity) {
	var sum int64
	for s := time.Duration(0); s < 50*time.Millisecond; s += time.Millisecond {
		b := c.Bytes(s, s+time.Millisecond)
		if b < 0 {
			t.Fatalf("negative bytes at %v", s)
		}
		sum += b
	}
	if sum != c.Bytes(0, 50*time.Millisecond) {
		t.Fatalf("not additive")
	}
}

// The QUIC Wave scenarios: low BDP, high BDP (RTT >= 500 ms) and a switch
// between the two by handovers between cells of different RTT.
func TestWaveScenarios(t *testing.T) {
	for _, tc := range []struct {
		name      string
		handovers int
		minRTT    time.Duration
	}{{"low-bdp", 0, 0}, {"high-bdp", 0, 500 * time.Millisecond}, {"bdp-switch", 2, 500 * time.Millisecond}} {
		sc, err := Builtin(tc.name, LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := len(sc.Config.Schedule.Handovers); n != tc.handovers {
			t.Errorf("%s: %d handovers, want %d", tc.name, n, tc.handovers)
		}
		// The model keys RTTs by sub6 / mmwave (lte counts as sub6): two
		// cells meant to differ must use those two types.
		var maxRTT time.Duration
		rtts := map[time.Duration]bool{}
		for _, c := range sc.Config.Cells {
			r := sc.Config.RTTByType[dataType(c.Type)]
			rtts[r] = true
			maxRTT = max(maxRTT, r)
		}
		if maxRTT < tc.minRTT {
			t.Errorf("%s: longest RTT %v, want >= %v", tc.name, maxRTT, tc.minRTT)
		}
		if tc.name == "bdp-switch" && len(rtts) != 2 {
			t.Errorf("bdp-switch: the cells' RTTs %v, want two different ones", rtts)
		}
	}
}
