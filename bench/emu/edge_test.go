package emu

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// udpDrives are the four 2023-02-16 drives with a 0.1 s UDP saturation
// log, each with its aligned serving timeline (skips without the data).
func udpDrives(t *testing.T) []EdgeDrive {
	t.Helper()
	root := filepath.Join(testDataDir(), "m2ho-mobicom24", "measurements")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("shared data absent (%s): the recorded constants stand in", root)
	}
	var ds []EdgeDrive
	for i := 1; i <= 4; i++ {
		logs, _ := filepath.Glob(filepath.Join(root, "202302", "16", "udp-bw-jitter-"+string(rune('0'+i))+"-*.log"))
		if len(logs) != 1 {
			t.Fatalf("udp-bw-jitter-%d: %d logs", i, len(logs))
		}
		f, err := os.Open(logs[0])
		if err != nil {
			t.Fatal(err)
		}
		ip, err := ParseIperf3UDP(logs[0], f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		evs := xcalEvents(t, filepath.Join(root, "202302", "16", "bw-"+string(rune('0'+i))+"-ho.csv"))
		since, _ := AlignDrive(evs, ip)
		ds = append(ds, EdgeDrive{Capacity: ip.Series, Timeline: NewServingTimeline(evs, since)})
	}
	return ds
}

// The recorded MeasuredMmWaveEdge is what FitMmWaveEdge finds in the
// four UDP logs.
func TestMeasuredMmWaveEdgeFromData(t *testing.T) {
	ds := udpDrives(t)
	want := MeasuredMmWaveEdge
	got, err := FitMmWaveEdge(ds, want.Span(), want.Bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fitted over %d handovers: %.3f", got.N, got.Factors)
	if got.N != want.N || len(got.Factors) != len(want.Factors) {
		t.Fatalf("fitted %d handovers, %d bins; recorded %d, %d", got.N, len(got.Factors), want.N, len(want.Factors))
	}
	for k := range want.Factors {
		if math.Abs(got.Factors[k]-want.Factors[k]) > 0.001 {
			t.Fatalf("bin %d: %.4f, recorded %.3f", k, got.Factors[k], want.Factors[k])
		}
	}
}

// testEdge is a short profile for the unit tests: half, then a tenth.
var testEdge = EdgeProfile{Bin: 500 * time.Millisecond, Factors: []float64{0.5, 0.1}}

// edged keeps Bytes additive (any split of a span sums to the whole, so a
// slot-by-slot service never gains or loses a byte) and cum never falls.
func TestEdgedAdditive(t *testing.T) {
	base := Mbps(123.456)
	e := newEdged(base, MeasuredMmWaveEdge, []time.Duration{7 * time.Second, 20 * time.Second}, []time.Duration{0, 16 * time.Second})
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		a := time.Duration(r.Int64N(int64(25 * time.Second)))
		b := a + time.Duration(r.Int64N(int64(3*time.Second)))
		whole := e.Bytes(a, b)
		var sum int64
		for x := a; x < b; {
			y := min(b, x+time.Duration(r.Int64N(int64(40*time.Millisecond)))+1)
			got := e.Bytes(x, y)
			if got < 0 {
				t.Fatalf("Bytes(%v, %v) = %d", x, y, got)
			}
			sum += got
			x = y
		}
		if sum != whole {
			t.Fatalf("[%v, %v): pieces sum to %d, whole %d", a, b, sum, whole)
		}
	}
}

// Each bin of the span before a command carries its factor of the base,
// nothing else changes, and a span longer than the dwell starts at the
// dwell's start.
func TestEdgedFollowsProfile(t *testing.T) {
	base := Mbps(800)
	cmd1, cmd2, dwell2 := 10*time.Second, 30*time.Second, 29200*time.Millisecond
	e := newEdged(base, testEdge, []time.Duration{cmd1, cmd2}, []time.Duration{0, dwell2})
	ms := time.Millisecond
	for _, tc := range []struct {
		from, to time.Duration
		f        float64
	}{
		{0, 9 * time.Second, 1},
		{9 * time.Second, 9500 * ms, 0.5},
		{9500 * ms, cmd1, 0.1},
		{cmd1, 29 * time.Second, 1},   // after the command: the base again
		{29 * time.Second, dwell2, 1}, // before the second dwell began
		{dwell2, 29500 * ms, 0.5},     // the first bin, clipped
		{29500 * ms, cmd2, 0.1},
		{cmd2, 40 * time.Second, 1},
	} {
		want := tc.f * float64(base.Bytes(tc.from, tc.to))
		if got := float64(e.Bytes(tc.from, tc.to)); math.Abs(got-want) > 1 {
			t.Errorf("[%v, %v): %.0f bytes, want %.0f (factor %v)", tc.from, tc.to, got, want, tc.f)
		}
	}
}

// The model lowers the source cell of a handover from mmWave down to
// sub-6 by the profile, and no other: not before mmWave -> mmWave, not
// the target, and not at all without Config.MmWaveEdge. The command
// counts it.
func TestModelMmWaveEdge(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Lead = Dist{Kind: "fixed", Mean: 50 * time.Millisecond}
	cfg.Cells = []CellSpec{
		{ID: "m1", Type: signaling.CellMmWave, Capacity: Mbps(1000), Buffer: 2 << 20},
		{ID: "m2", Type: signaling.CellMmWave, Capacity: Mbps(1000), Buffer: 2 << 20},
		{ID: "s1", Type: signaling.CellSub6, Capacity: Mbps(200), Buffer: 1 << 20},
	}
	cfg.Schedule = Schedule{Start: "m1", Handovers: []Handover{{At: 10 * time.Second, To: "m2"}, {At: 20 * time.Second, To: "s1"}}}
	ms := time.Millisecond
	for _, on := range []bool{true, false} {
		c := cfg
		if on {
			c.MmWaveEdge = &testEdge
		}
		m, err := New(c, t0, 1)
		if err != nil {
			t.Fatal(err)
		}
		f := 0.1
		if !on {
			f = 1
		}
		for _, tc := range []struct {
			cell     int
			from, to time.Duration
			f        float64
		}{
			{0, 9 * time.Second, 10 * time.Second, 1}, // m1 before mmWave -> mmWave
			{1, 19500 * ms, 20 * time.Second, f},      // m2 before mmWave -> sub-6
			{2, 19500 * ms, 20 * time.Second, 1},      // the target
		} {
			base := float64(cfg.Cells[tc.cell].Capacity.Bytes(tc.from, tc.to))
			if got := float64(m.cells[tc.cell].Capacity.Bytes(tc.from, tc.to)); math.Abs(got-tc.f*base) > 1 {
				t.Errorf("edge %v, %s [%v, %v): %.0f bytes, want %.0f", on, cfg.Cells[tc.cell].ID, tc.from, tc.to, got, tc.f*base)
			}
		}
		var out []Delivery
		var ev []signaling.Event
		m.Step(t0.Add(21*time.Second), &out, &ev)
		if want := int64(map[bool]int{true: 1, false: 0}[on]); m.Counters().MmWaveEdges != want {
			t.Errorf("edge %v: MmWaveEdges %d, want %d", on, m.Counters().MmWaveEdges, want)
		}
	}
}

// mmwave_edge in a scenario: measured sets the measured profile, none or
// nothing leaves it off, anything else is an error naming the key.
func TestScenarioMmWaveEdge(t *testing.T) {
	base := "name: x\nduration: 1s\ncells:\n  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 10}}\nschedule: {start: a}\n"
	for _, tc := range []struct {
		in   string
		want bool
		err  string
	}{{"", false, ""}, {"mmwave_edge: none\n", false, ""}, {"mmwave_edge: measured\n", true, ""}, {"mmwave_edge: yes\n", false, "mmwave_edge"}} {
		sc, err := ParseScenario("s.yaml", "", []byte(base+tc.in), LoadOptions{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one naming %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := sc.Config.MmWaveEdge != nil; got != tc.want {
			t.Errorf("%q: edge %v, want %v", tc.in, got, tc.want)
		}
	}
	// A replay without a capacity log: the cells take the model's edge.
	fake := func(string) ([]signaling.Event, error) {
		d := time.Date(0, 1, 1, 22, 0, 0, 0, time.UTC)
		return []signaling.Event{
			{Time: d, Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "522", Type: signaling.CellMmWave}},
			{Time: d.Add(9 * time.Second), Kind: signaling.KindHOCommand, Target: signaling.Cell{ID: "88", Type: signaling.CellSub6}},
		}, nil
	}
	sc, err := Builtin("measured", LoadOptions{XCAL: fake, XCALPath: "drive.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Config.MmWaveEdge == nil {
		t.Error("measured, --xcal without --capacity: no mmWave edge")
	}
	for _, name := range []string{"mixed-drive"} {
		sc, err := Builtin(name, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sc.Config.MmWaveEdge == nil || len(sc.Config.MmWaveEdge.Factors) != len(MeasuredMmWaveEdge.Factors) {
			t.Errorf("%s: mmwave_edge %v, want the measured profile", name, sc.Config.MmWaveEdge)
		}
	}
}
