package emu

import (
	"fmt"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// depthRun is a model whose serving cell holds exactly depth 1500-byte
// packets when full and serves one per 1 ms slot: each tick lets one
// packet leave (dequeue, the UE, the delivery), enqueues two (one takes
// its place, one is tail-dropped) and an uplink ACK, so the queue stays
// at depth whatever the number of ticks.
type depthRun struct {
	m   *Model
	out []Delivery
	ev  []signaling.Event
	now time.Duration
	id  uint64
}

func newDepthRun(tb testing.TB, depth int, harq float64) *depthRun {
	tb.Helper()
	c := oneMs()
	c.RTT = 20 * time.Millisecond
	c.SlotEvents = SlotEventsBursts
	c.HARQFraction = harq
	for i := range c.Cells {
		c.Cells[i].Buffer = int64(max(depth, 1)) * 1500
	}
	m, err := New(c, t0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	r := &depthRun{m: m, out: make([]Delivery, 0, 1024), ev: make([]signaling.Event, 0, 1024)}
	// fill the queue: packets leave the wire at 10 ms
	for range depth {
		r.id++
		m.Enqueue(t0, Down, r.id, 1500)
	}
	r.now = 10 * time.Millisecond
	m.Step(t0.Add(r.now), &r.out, &r.ev)
	r.out, r.ev = r.out[:0], r.ev[:0]
	return r
}

// tick is one slot: enqueue + dequeue + drop at the queue's depth.
func (r *depthRun) tick() {
	r.now += time.Millisecond
	at := t0.Add(r.now)
	r.id++
	r.m.Enqueue(at, Down, r.id, 1500)
	r.id++
	r.m.Enqueue(at, Down, r.id, 1500)
	r.id++
	r.m.Enqueue(at, Up, r.id, 60)
	r.out, r.ev = r.out[:0], r.ev[:0]
	r.m.Step(at, &r.out, &r.ev)
}

// The per-packet cost (enqueue + dequeue + drop) against the depth of
// the cell's queue: it must not grow with the depth.
func BenchmarkModelDepth(b *testing.B) {
	for _, depth := range []int{0, 100, 1000, 3000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			r := newDepthRun(b, depth, 0.1)
			for range 1000 {
				r.tick()
			}
			b.ReportAllocs()
			for b.Loop() {
				r.tick()
			}
		})
	}
}

// At any depth the per-packet path allocates nothing, and the queue
// stays at that depth (the drop accounting runs on every tick).
func TestDepthAllocatesNothing(t *testing.T) {
	for _, depth := range []int{0, 100, 1000, 3000} {
		r := newDepthRun(t, depth, 0.1)
		for range 3000 {
			r.tick()
		}
		drops := r.m.Counters().OverflowDrops
		if a := testing.AllocsPerRun(2000, r.tick); a != 0 {
			t.Errorf("depth %d: %v allocations per tick", depth, a)
		}
		if depth > 0 {
			if got := r.m.Counters().OverflowDrops - drops; got < 2000 {
				t.Errorf("depth %d: %d drops in 2001 ticks: the queue is not full", depth, got)
			}
		}
	}
}
