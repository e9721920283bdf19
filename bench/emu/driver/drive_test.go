package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/signaling"
)

func readXCAL(path string) ([]signaling.Event, error) {
	evs, _, _, err := ReadXCAL(path)
	return evs, err
}

func loadDrive(t *testing.T, xcal, capLog string) *emu.Scenario {
	t.Helper()
	s, err := Builtin("mixed-drive", emu.LoadOptions{XCAL: readXCAL, XCALPath: xcal, CapacityPath: capLog, Duration: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDriveAlignedByTimestamps: the synthetic drive's XCAL log starts 3 s
// into its UDP log (10:00:05 local against 18:00:02 UTC: -8 h of zone);
// the capacity steps to mmWave 0.5 s before the logged command, so the
// refinement moves every event by -0.5 s.
func TestDriveAlignedByTimestamps(t *testing.T) {
	s := loadDrive(t, "testdata/drive-ho.csv", "testdata/drive-udp.log")
	a := s.Drive.Alignment
	if a.Mode != emu.AlignTimestamps || a.ZoneS != 8*3600 && a.ZoneS != -8*3600 || a.ShiftS != -0.5 || s.Drive.Replay != "log" {
		t.Fatalf("alignment %+v", a)
	}
	if !strings.Contains(a.Text, "aligned by timestamps") || !strings.Contains(a.Text, "-0.5 s") {
		t.Fatalf("text %q", a.Text)
	}
	ms := time.Millisecond
	h := s.Config.Schedule.Handovers
	// LTE -> n77 (3.05 s), n77 -> n261 (7.0 s), n261 -> n77 (13.0 s), each
	// minus 0.5 s, with the logged random access that completed it.
	if len(h) != 3 || h[0].At != 2550*ms || h[1].At != 6500*ms || h[2].At != 12500*ms {
		t.Fatalf("handovers %+v", h)
	}
	if h[1].RA != 6570*ms || h[1].RAEvent == nil || h[1].RAEvent.RAResult != signaling.RASuccess || h[1].Command == nil || h[1].Command.Target.Type != signaling.CellMmWave || !h[1].NoReport {
		t.Fatalf("handover 1: %+v", h[1])
	}
	// Everything else is replayed as logged: B1, both A5 (the re-send
	// too), the failed attempt, the A2.
	var kinds []string
	for _, r := range s.Config.Schedule.Replay {
		kinds = append(kinds, r.Event.Kind.String()+"@"+r.At.String())
	}
	want := []string{"report@2.5s", "report@6.45s", "report@6.49s", "ra@6.54s", "report@12.4s"}
	if strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Fatalf("replayed %v, want %v", kinds, want)
	}
	// Every cell takes the capacity log: 800 Mbit/s between 6.5 s and 12.5 s.
	for _, typ := range []signaling.CellType{signaling.CellSub6, signaling.CellMmWave} {
		c := s.Config.CellDefaults[typ].Capacity
		if b := c.Bytes(7*time.Second, 8*time.Second); b != 100e6 {
			t.Fatalf("%v capacity 7-8 s: %d bytes, want 1e8", typ, b)
		}
	}
	// The model publishes every logged event once, at its time.
	m, err := emu.New(s.Config, time.Unix(0, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []emu.Delivery
	var ev []signaling.Event
	m.Step(time.Unix(20, 0), &out, &ev)
	n := map[signaling.Kind]int{}
	for _, e := range ev {
		n[e.Kind]++
	}
	if n[signaling.KindReport] != 4 || n[signaling.KindHOCommand] != 3 || n[signaling.KindRandomAccess] != 4 {
		t.Fatalf("published %v; want 4 reports, 3 commands, 4 random access (as logged)", n)
	}
}

// TestDriveFromBothStarts: a capacity log whose timestamp is 2 h 20 min
// away does not overlap the XCAL log: both start at 0, and it says so.
func TestDriveFromBothStarts(t *testing.T) {
	b, err := os.ReadFile("testdata/drive-udp.log")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-udp.log")
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "1676570402", "1676562002", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := loadDrive(t, "testdata/drive-ho.csv", p)
	if a := s.Drive.Alignment; a.Mode != emu.AlignStarts || !strings.Contains(a.Text, "from both starts") {
		t.Fatalf("alignment %+v", a)
	}
	if h := s.Config.Schedule.Handovers; len(h) != 3 || h[0].At != 50*time.Millisecond || h[1].At != 4*time.Second {
		t.Fatalf("handovers %+v", h)
	}
}

// TestDriveWithoutCapacity: the cells take the scenario's per-type
// capacities (mixed-drive: its first cell of each type).
func TestDriveWithoutCapacity(t *testing.T) {
	s := loadDrive(t, "testdata/drive-ho.csv", "")
	if s.Drive.Alignment.Mode != emu.AlignXCALOnly || s.Drive.Capacity != "" {
		t.Fatalf("drive %+v", s.Drive)
	}
	if d := s.Config.CellDefaults[signaling.CellMmWave]; d.Buffer != 2318000 || d.Capacity == nil {
		t.Fatalf("mmwave defaults %+v", d)
	}
}

func TestDriveErrorsNameTheFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad-udp.log")
	os.WriteFile(bad, []byte("{\n \"start\": {},\n \"intervals\": [oops]\n}\n"), 0o644)
	for _, tc := range []struct{ xcal, capLog, want string }{
		{"testdata/drive-ho.csv", bad, "--capacity: " + bad + ":3"},
		{"testdata/none.csv", "", "--xcal: open testdata/none.csv"},
		{"testdata/drive-ho.csv", "testdata/none.log", "--capacity: open testdata/none.log"},
	} {
		_, err := Builtin("measured", emu.LoadOptions{XCAL: readXCAL, XCALPath: tc.xcal, CapacityPath: tc.capLog})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error containing %q", tc.xcal, tc.capLog, err, tc.want)
		}
	}
}

// TestDriveRealFiles replays the artifact's drive 1 of 2023-02-16 when
// the shared data is present.
func TestDriveRealFiles(t *testing.T) {
	root := filepath.Join(DataDir(""), "m2ho-mobicom24", "measurements", "202302", "16")
	xcal, capLog := filepath.Join(root, "bw-1-ho.csv"), filepath.Join(root, "udp-bw-jitter-1-2023-02-16-224449.log")
	if _, err := os.Stat(xcal); err != nil {
		t.Skipf("shared data absent (%s)", root)
	}
	s := loadDrive(t, xcal, capLog)
	a := s.Drive.Alignment
	if a.Mode != emu.AlignTimestamps || a.ShiftS != -1.8 {
		t.Fatalf("alignment %+v", a)
	}
	evs, err := readXCAL(xcal)
	if err != nil {
		t.Fatal(err)
	}
	// Every logged event is published: as a handover's or a pause's
	// command or random access, or replayed.
	n := len(s.Config.Schedule.Replay)
	sc := s.Config.Schedule
	for _, h := range append(append([]emu.Handover(nil), sc.Handovers...), sc.Pauses...) {
		if h.Command != nil {
			n++
		}
		if h.RAEvent != nil {
			n++
		}
	}
	if n != len(evs) {
		t.Fatalf("%d of %d logged events published", n, len(evs))
	}
	// The drive's two "ENDC LTE HO Request (DiffLTE-SameNR)" commands
	// are pauses, each with its logged NR random access; the SN addition
	// to the serving cell after an aborted SN change (20.276 s) is not.
	if len(sc.Pauses) != 2 {
		t.Fatalf("%d pauses, want the log's 2 anchor handovers that keep the NR cell", len(sc.Pauses))
	}
	for _, p := range sc.Pauses {
		if p.Command == nil || p.Command.HO != signaling.HOLTEAnchor || p.RAEvent == nil || p.RA <= p.At {
			t.Errorf("pause %+v: want its logged anchor command and random access", p)
		}
	}
	t.Logf("%d handovers, %d pauses, %d replayed events; %s", len(sc.Handovers), len(sc.Pauses), len(sc.Replay), a.Text)
}

// The older keys still load: schedule.xcal with schedule.iperf3 aligns by
// timestamps (no refinement) and the cells keep the scenario's
// capacities; schedule.replay: synthesized synthesizes one report per
// handover.
func TestDriveOlderKeys(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	yaml := "duration: 20s\ncell_defaults:\n  sub6: {buffer: 1MB, capacity: {mbps: 50}}\n  mmwave: {buffer: 2MB, capacity: {mbps: 400}}\n" +
		"schedule:\n  xcal: " + abs("testdata/drive-ho.csv") + "\n  iperf3: " + abs("testdata/drive-udp.log") + "\n  replay: synthesized\n"
	p := filepath.Join(t.TempDir(), "old.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScenario(p, emu.LoadOptions{XCAL: readXCAL})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Drive.Alignment.Text, "schedule.iperf3") || s.Drive.Replay != "synthesized" || len(s.Config.Schedule.Replay) != 0 {
		t.Fatalf("drive %+v, %d replayed", s.Drive, len(s.Config.Schedule.Replay))
	}
	h := s.Config.Schedule.Handovers
	if len(h) != 3 || h[1].At != 7*time.Second || h[1].NoReport || h[1].Lead != 10*time.Millisecond {
		t.Fatalf("handovers %+v", h)
	}
	if c := s.Config.CellDefaults[signaling.CellMmWave].Capacity; c.Bytes(0, time.Second) != 50e6 {
		t.Fatalf("mmwave capacity %d bytes/s, want the scenario's 400 Mbit/s", c.Bytes(0, time.Second))
	}
}
