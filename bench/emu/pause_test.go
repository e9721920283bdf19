package emu

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// pauseAt is an LTE anchor handover that keeps cell A, with its logged
// command at at and its NR random access at ra.
func pauseAt(at, ra time.Duration) Handover {
	a := signaling.Cell{ID: "A", Type: signaling.CellSub6}
	return Handover{At: at, To: "A", NoReport: true, RA: ra,
		Command: &signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOLTEAnchor, Serving: a, Target: a},
		RAEvent: &signaling.Event{Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess, Serving: a}}
}

// runPause queues 300 downlink packets at 0 on a one-packet-per-ms cell,
// one uplink packet at 120 ms, and pauses the link at 100-146 ms.
func runPause(t *testing.T, on bool) *run {
	c := oneMs()
	c.UplinkMbps = 12
	c.AnchorPause = on
	c.Schedule.Pauses = []Handover{pauseAt(100*time.Millisecond, 146*time.Millisecond)}
	r := newRun(t, c)
	for id := uint64(1); id <= 300; id++ {
		r.m.Enqueue(t0, Down, id, 1500)
	}
	r.until(120 * time.Millisecond)
	r.m.Enqueue(t0.Add(120*time.Millisecond), Up, 1000, 1500)
	r.until(time.Second)
	return r
}

// An anchor handover that keeps the NR cell stops the link from its
// command to the random access, both ways, and keeps the cell's queue:
// nothing is lost or reordered, and the transfer ends exactly the pause
// later than without it. It is no handover of the records.
func TestAnchorPauseStopsTheLinkKeepsTheQueue(t *testing.T) {
	on, off := runPause(t, true), runPause(t, false)
	last := func(r *run) time.Duration {
		g := r.got(Down)
		if len(g) != 300 {
			t.Fatalf("%d of 300 downlink packets came back", len(g))
		}
		for i, x := range g {
			if x.drp || x.id != uint64(i+1) {
				t.Fatalf("downlink %d: %+v (want id %d, delivered)", i, x, i+1)
			}
		}
		return g[len(g)-1].at
	}
	if d := last(on) - last(off); d != 46*time.Millisecond {
		t.Fatalf("the pause delayed the queue's end by %v (%v vs %v), want its 46 ms", d, last(on), last(off))
	}
	for _, x := range on.got(Down) {
		if x.at > 100*time.Millisecond && x.at <= 146*time.Millisecond {
			t.Fatalf("downlink %d delivered at %v, inside the pause", x.id, x.at)
		}
	}
	if up := on.got(Up); len(up) != 1 || up[0].at <= 146*time.Millisecond {
		t.Fatalf("uplink %+v: the UE's uplink waits for the random access", up)
	}
	if up := off.got(Up); len(up) != 1 || up[0].at > 146*time.Millisecond {
		t.Fatalf("uplink without the pause %+v", up)
	}
	c := on.m.Counters()
	if c.AnchorPauses != 1 || c.Handovers != [2][2]int64{} || c.FromMmWave != 0 {
		t.Fatalf("counters %+v: one pause, no handover", c)
	}
	if hs := on.m.HandoverRecords(time.Second); len(hs) != 0 {
		t.Fatalf("handover records %+v", hs)
	}
	if s := on.m.Serving(); s.ID != "A" {
		t.Fatalf("serving %v", s)
	}
	bins := on.m.CapacityBins(10*time.Millisecond, 200*time.Millisecond)
	if bins[10].Mbps != 0 || bins[16].Mbps != 12 || bins[16].Cell.ID != "A" {
		t.Fatalf("capacity bins %+v %+v: 0 during the pause, the cell's after", bins[10], bins[16])
	}
	// The logged command and random access are published at their times,
	// with or without the pause.
	for _, r := range []*run{on, off} {
		if len(r.ev) != 2 || r.ev[0].HO != signaling.HOLTEAnchor || !r.ev[0].Time.Equal(t0.Add(100*time.Millisecond)) ||
			r.ev[1].Kind != signaling.KindRandomAccess || !r.ev[1].Time.Equal(t0.Add(146*time.Millisecond)) {
			t.Fatalf("events %+v", r.ev)
		}
	}
	if c := off.m.Counters(); c.AnchorPauses != 0 || c.ReplayedEvents != 2 {
		t.Fatalf("without the pause: counters %+v, want its two events replayed", c)
	}
}

// A pause draws nothing from the model's random stream: the handovers'
// leads and flush holes are the same with and without it.
func TestAnchorPauseLeavesHandoverDrawsAlone(t *testing.T) {
	plans := func(on bool) []hoPlan {
		c := oneMs()
		c.AnchorPause = on
		c.FlushHoles = 0.5
		c.Lead = DefaultLead
		c.Schedule.Handovers = []Handover{{At: time.Second, To: "B"}, {At: 3 * time.Second, To: "A"}, {At: 5 * time.Second, To: "B"}}
		c.Schedule.Pauses = []Handover{pauseAt(2*time.Second, 2046*time.Millisecond), pauseAt(4*time.Second, 4046*time.Millisecond)}
		r := newRun(t, c)
		var out []hoPlan
		for _, p := range r.m.plans {
			if !p.keep {
				out = append(out, p)
			}
		}
		if n := len(r.m.plans) - len(out); on && n != 2 {
			t.Fatalf("%d pauses planned, want 2", n)
		}
		return out
	}
	on, off := plans(true), plans(false)
	if len(on) != 3 || len(off) != 3 {
		t.Fatalf("%d and %d handovers", len(on), len(off))
	}
	holes := 0
	for i := range on {
		if on[i].report != off[i].report || on[i].holeAt != off[i].holeAt {
			t.Fatalf("handover %d: report %v hole %v with pauses, %v %v without", i, on[i].report, on[i].holeAt, off[i].report, off[i].holeAt)
		}
		if on[i].holeAt >= 0 {
			holes++
		}
	}
	if on[0].report == time.Second-time.Millisecond || holes == 0 {
		t.Fatalf("lead not drawn or no hole (%d): the test proves nothing", holes)
	}
}

// A pause that would overlap a handover (its random access after the
// next command) is left out: its events are published as signalling only.
func TestAnchorPauseOverlappingAHandoverIsSignallingOnly(t *testing.T) {
	c := oneMs()
	c.Schedule.Pauses = []Handover{pauseAt(100*time.Millisecond, 146*time.Millisecond)}
	c.Schedule.Handovers = []Handover{{At: 130 * time.Millisecond, To: "B", NoReport: true}}
	r := newRun(t, c)
	r.until(time.Second)
	if cn := r.m.Counters(); cn.AnchorPauses != 0 || cn.ReplayedEvents != 2 || cn.Handovers[0][0] != 1 {
		t.Fatalf("counters %+v", cn)
	}
	if len(r.ev) != 4 || r.ev[0].HO != signaling.HOLTEAnchor || r.ev[1].Target.ID != "B" {
		t.Fatalf("events %+v", r.ev)
	}
}
