package m2ho

import (
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

func macEv(ts time.Time, c signaling.Cell, rb float64, bytes int) *signaling.Event {
	return &signaling.Event{Time: ts, Kind: signaling.KindMACSlot, RBRatio: rb, Bytes: bytes, Serving: c}
}

// slotRate reads the cell's rate at full allocation from the UE's own
// slots: bytes / RB share over the slot length, the slot length being the
// least gap between consecutive slots; slots with a share under
// slotRateMinRB, or no bytes, say nothing; a gap outside NR's slot
// lengths is a feed that skips slots; the rate goes stale.
func TestSlotRate(t *testing.T) {
	const slot = 500 * time.Microsecond
	var s slotRate
	t0 := at(0)
	// 3 MB/s at full allocation: 1500 B per 500 µs slot, this UE getting
	// a fifth of it, with an idle slot skipped now and then.
	ts := t0
	for i := range 12 {
		ts = ts.Add(slot)
		if i%3 == 2 {
			ts = ts.Add(slot) // a slot without this UE: no event
		}
		s.add(ts, ts, 0.2, 300)
		if i < slotRateMinSlots-1 {
			if _, ok := s.get(ts, time.Second); ok {
				t.Fatalf("a rate after %d slots", i+1)
			}
		}
	}
	r, ok := s.get(ts, time.Second)
	if !ok || r < 0.999*3e6 || r > 1.001*3e6 {
		t.Fatalf("rate %.0f B/s (%v), want 3e6; slot %v", r, ok, s.slot)
	}
	if s.slot != slot {
		t.Fatalf("slot %v, want %v", s.slot, slot)
	}
	// Tiny grants and empty slots leave it alone.
	ts = ts.Add(slot)
	s.add(ts, ts, 0.01, 1_000_000)
	ts = ts.Add(slot)
	s.add(ts, ts, 0, 0)
	if r2, _ := s.get(ts, time.Second); r2 != r {
		t.Fatalf("rate moved to %.0f by a %v grant or an empty slot", r2, slotRateMinRB/2)
	}
	// Smoothed, gain 1/8: a slot at twice the rate moves it by an eighth.
	ts = ts.Add(slot)
	s.add(ts, ts, 0.5, 1500)
	if r2, _ := s.get(ts, time.Second); r2 < 1.124*r || r2 > 1.126*r {
		t.Fatalf("after one slot at twice the rate: %.0f, want %.0f", r2, 1.125*r)
	}
	// Stale.
	if _, ok := s.get(ts.Add(2*time.Second), time.Second); ok {
		t.Fatal("a rate 2 s old with a 1 s limit")
	}
	// A feed whose slots are never closer than 2 ms has no slot length.
	var sparse slotRate
	for i := range 10 {
		tt := t0.Add(time.Duration(i) * 2 * time.Millisecond)
		sparse.add(tt, tt, 0.5, 1000)
	}
	if r, ok := sparse.get(t0.Add(20*time.Millisecond), time.Second); ok {
		t.Fatalf("a rate %.0f from slots 2 ms apart", r)
	}
	// A new cell starts over.
	s.reset()
	if _, ok := s.get(ts, time.Second); ok || s.slot != 0 {
		t.Fatal("reset kept the rate or the slot length")
	}
}

// The controller forgets the slot rate when the serving cell changes:
// the target's slots have their own rate.
func TestSlotRateResetOnCellChange(t *testing.T) {
	c := New(Config{SMaxDB: NewSMaxDB(), SignalLoss: time.Hour})
	ts := at(0)
	for range 10 {
		ts = ts.Add(500 * time.Microsecond)
		c.OnEvent(ts, macEv(ts, cell(sub6, "A"), 0.5, 1000))
	}
	if _, ok := c.slots.get(ts, time.Second); !ok {
		t.Fatal("no slot rate in A")
	}
	ts = ts.Add(500 * time.Microsecond)
	c.OnEvent(ts, macEv(ts, cell(sub6, "B"), 0.5, 1000))
	if _, ok := c.slots.get(ts, time.Second); ok {
		t.Fatal("A's slot rate kept in B")
	}
}

// A flow's queue counts as empty under emptyQueueDelay: from the one-way
// wait while one was measured lately, else from its latest RTT against
// RTT_min.
func TestFlowQueueEmpty(t *testing.T) {
	now := at(1000)
	rttMin := 40 * time.Millisecond // threshold 5 ms
	var f Flow
	if _, ok := f.queueEmpty(now, 50*time.Millisecond, rttMin); ok {
		t.Fatal("a verdict with no RTT and no wait")
	}
	f.rttMed = 44 * time.Millisecond
	if e, ok := f.queueEmpty(now, 50*time.Millisecond, rttMin); !ok || !e {
		t.Fatalf("RTT 4 ms over RTT_min 40 ms: empty %v ok %v, want empty", e, ok)
	}
	f.rttMed = 46 * time.Millisecond
	if e, _ := f.queueEmpty(now, 50*time.Millisecond, rttMin); e {
		t.Fatal("RTT 6 ms over RTT_min 40 ms counted as empty")
	}
	// A wait measured 10 ms ago decides, whatever the RTT says.
	f.lastWait, f.waitAt = 2*time.Millisecond, now.Add(-10*time.Millisecond)
	if e, _ := f.queueEmpty(now, 50*time.Millisecond, rttMin); !e {
		t.Fatal("a 2 ms wait not counted as empty")
	}
	f.rttMed = 44 * time.Millisecond
	f.lastWait = 8 * time.Millisecond
	if e, _ := f.queueEmpty(now, 50*time.Millisecond, rttMin); e {
		t.Fatal("an 8 ms wait counted as empty")
	}
	// An old wait gives way to the RTT.
	if e, _ := f.queueEmpty(now, 5*time.Millisecond, rttMin); !e {
		t.Fatal("a wait older than maxAge still decided")
	}
	for _, tc := range []struct{ rttMin, want time.Duration }{
		{10 * time.Millisecond, 4 * time.Millisecond}, {40 * time.Millisecond, 5 * time.Millisecond}, {600 * time.Millisecond, 16 * time.Millisecond},
	} {
		if got := emptyQueueDelay(tc.rttMin); got != tc.want {
			t.Errorf("emptyQueueDelay(%v) = %v, want %v", tc.rttMin, got, tc.want)
		}
	}
}
