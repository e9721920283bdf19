package emu

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// A replayed handover takes its logged random access as the end of the
// interruption, unless it came more than MaxLoggedInterruption after the
// command (a failed or aborted attempt: the data fell back to LTE); that
// one is replayed as a logged event and the handover keeps the nominal
// interruption.
func TestReplayLogRandomAccess(t *testing.T) {
	d := time.Date(2023, 2, 16, 10, 0, 0, 0, time.UTC)
	mm := signaling.Cell{ID: "522", Type: signaling.CellMmWave}
	mm2 := signaling.Cell{ID: "524", Type: signaling.CellMmWave}
	evs := []signaling.Event{
		{Time: d, Kind: signaling.KindReport, Meas: signaling.MeasA5, Serving: signaling.Cell{ID: "88", Type: signaling.CellSub6}, Neighbor: mm},
		{Time: d.Add(50 * time.Millisecond), Kind: signaling.KindHOCommand, Serving: signaling.Cell{ID: "88", Type: signaling.CellSub6}, Target: mm},
		{Time: d.Add(220 * time.Millisecond), Kind: signaling.KindRandomAccess, RAResult: signaling.RASuccess},
		{Time: d.Add(5 * time.Second), Kind: signaling.KindHOCommand, Serving: mm, Target: mm2},
		{Time: d.Add(5*time.Second + 40*time.Millisecond), Kind: signaling.KindRandomAccess, RAResult: signaling.RAAborted},
		{Time: d.Add(6*time.Second + 250*time.Millisecond), Kind: signaling.KindRandomAccess, RAResult: signaling.RASuccess},
	}
	s := ReplayLog(evs, SinceOrigin(d), time.Second)
	h := s.Handovers
	if len(h) != 2 || h[0].RA != 220*time.Millisecond || h[0].RAEvent == nil || h[1].RA != 0 || h[1].RAEvent != nil {
		t.Fatalf("handovers %+v", h)
	}
	if len(s.Replay) != 3 || s.Replay[0].Event.Kind != signaling.KindReport || s.Replay[2].At != 6250*time.Millisecond {
		t.Fatalf("replay %+v", s.Replay)
	}
	c := DefaultConfig()
	c.CellDefaults = map[signaling.CellType]CellSpec{
		signaling.CellSub6:   {Capacity: Mbps(100), Buffer: 1 << 20},
		signaling.CellMmWave: {Capacity: Mbps(100), Buffer: 1 << 20}}
	c.Schedule = s
	m, err := New(c, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	recs := m.HandoverRecords(time.Hour)
	// the logged 170 ms; the nominal 33 + 27 ms
	if recs[0].RA != 220*time.Millisecond || recs[1].RA != 5*time.Second+60*time.Millisecond {
		t.Fatalf("records %+v", recs)
	}
}
