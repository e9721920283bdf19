package driver

import (
	"github.com/m2ho/m2ho/bench/emu"
	"testing"
	"time"
)

const us = int64(time.Microsecond)

// A late delivery's span is split over the phases it overlaps, and it
// counts for the phase with the largest share.
func TestProfileAttributesLateTime(t *testing.T) {
	p := newProfile(10 * time.Second)
	// 0-100 µs model, then a sleep with deadline 1000 µs that returns at
	// 4000 µs (3 ms late), then the model to 4100 and a TUN write to 4600
	p.mark(phStep, 0)
	p.slept(100*us, 1000*us, 4000*us)
	p.mark(phStep, 4000*us)
	p.mark(phWriteUp, 4100*us)
	// due at 1000 µs, written at 4600: 3 ms wake, 0.1 ms model, 0.5 ms write
	p.late(1000*us, 4600*us)
	// due at 3900, written at 4600 after a 2 ms write: write dominates
	p.mark(phWriteDown, 4600*us)
	p.late(3900*us, 6600*us)
	r := p.result(emuGC())
	wake, write, down := r.LateByCause["wake"], r.LateByCause["write_up"], r.LateByCause["write_down"]
	if wake.Packets != 1 || wake.Ms != 3.1 {
		t.Errorf("wake: %+v, want 1 packet, 3.1 ms (3 ms past the deadline + 0.1 of the second packet)", wake)
	}
	if write.Packets != 0 || write.Ms != 1.0 {
		t.Errorf("write_up: %+v, want 0 packets, 0.5+0.5 ms", write)
	}
	if down.Packets != 1 || down.Ms != 2 {
		t.Errorf("write_down: %+v, want 1 packet, 2 ms", down)
	}
	if m := r.LateByCause["model"]; m.Packets != 0 || m.Ms != 0.2 {
		t.Errorf("model: %+v, want 0.1+0.1 ms", m)
	}
	if s := r.Phases["sleep"]; s.Calls != 1 || s.MaxMs != 0.9 {
		t.Errorf("sleep phase %+v: want one 0.9 ms sleep", s)
	}
	if w := r.Phases["wake"]; w.Calls != 1 || w.Hist[6] != 1 {
		t.Errorf("wake phase %+v: want one in the 3-10 ms bucket", w)
	}
	if len(r.LateSeconds) != 1 || r.LateSeconds[0].Late != 2 {
		t.Errorf("late seconds %+v", r.LateSeconds)
	}
}

// Late time older than the ring's memory counts as unknown, not as
// some phase.
func TestProfileForgetsOldPhases(t *testing.T) {
	p := newProfile(time.Second)
	for i := range int64(2 * lateWalk) {
		p.mark(phStep, i*us)
	}
	p.late(0, int64(2*lateWalk)*us)
	r := p.result(emuGC())
	if u, m := r.LateByCause["unknown"], r.LateByCause["model"]; u.Ms < float64(lateWalk-2)/1000 || m.Ms > float64(lateWalk+2)/1000 {
		t.Errorf("unknown %+v, model %+v, want about %d µs each", u, m, lateWalk)
	}
}

// Marking phases allocates nothing.
func TestProfileAllocatesNothing(t *testing.T) {
	p := newProfile(time.Second)
	var now int64
	if a := testing.AllocsPerRun(1000, func() {
		now += 10 * us
		p.mark(phStep, now)
		p.mark(phWriteDown, now+us)
		p.slept(now+2*us, now+5*us, now+8*us)
		p.late(now-2000*us, now+9*us)
		p.delivered(now, 3)
		p.tick(now)
	}); a != 0 {
		t.Errorf("%v allocations", a)
	}
}

func emuGC() emu.GCStat { return emu.GCStat{} }

// Every late delivery the driver counts is attributed to exactly one
// cause in emulator.json's loop profile: here the model's clock is years
// behind the wall clock, so every delivery is late.
func TestDriverAttributesEveryLateDelivery(t *testing.T) {
	r := newLoopRigAt(t, 100, t0) // deliveries due in 2024
	for range 500 {
		r.tick()
	}
	lp := r.d.prof.result(emu.GCStat{})
	var n int64
	for _, c := range lp.LateByCause {
		n += c.Packets
	}
	if r.d.st.Late == 0 || r.d.st.Late != r.d.st.Delivered || n != r.d.st.Late {
		t.Fatalf("late %d of %d delivered, %d attributed (%v)", r.d.st.Late, r.d.st.Delivered, n, lp.LateByCause)
	}
}
