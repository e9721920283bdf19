package driver

import (
	"fmt"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/signaling"
)

// loopRig is the driver's loop body (ingest, Step, flush) on the
// in-memory device, on made-up times: a cell serving one 1500-byte packet
// per 1 ms slot with depth packets queued; each tick reads one downlink
// packet (which takes the place of the one served) and one ACK, and
// writes what is due.
type loopRig struct {
	d     *Driver
	io    *memIO
	m     *emu.Model
	ms    int
	start time.Time
	down  []byte
	up    []byte
}

func newLoopRig(tb testing.TB, depth int) *loopRig {
	tb.Helper()
	// the model's clock starts an hour ahead of the wall clock, so
	// nothing is written late: the profile's late-time attribution, which
	// runs only for late deliveries, is not what this measures
	return newLoopRigAt(tb, depth, time.Now().Add(time.Hour))
}

// newLoopRigAt starts the model's clock at start.
func newLoopRigAt(tb testing.TB, depth int, start time.Time) *loopRig {
	tb.Helper()
	cfg := emu.DefaultConfig()
	cfg.RTT = 10 * time.Millisecond
	cfg.SlotSub6 = time.Millisecond
	cfg.Cells = []emu.CellSpec{{ID: "c1", Type: signaling.CellSub6, Capacity: emu.Mbps(12), Buffer: int64(depth+2) * 1500}}
	cfg.Schedule = emu.Schedule{Start: "c1"}
	cfg.Duration = time.Hour
	ue, _ := emu.ParsePrefixes([]string{"10.77.1.0/24"})
	io := &memIO{}
	d, err := newDriver(DriverConfig{Scenario: &emu.Scenario{Name: "mem", Config: cfg}, OutDir: tb.TempDir(), UENets: ue}, io)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.closeFiles() })
	m, err := emu.New(cfg, start, 1)
	if err != nil {
		tb.Fatal(err)
	}
	d.m = m
	r := &loopRig{d: d, io: io, m: m, start: start, down: seg("10.77.3.2:5201", "10.77.1.2:40000", 1460-40), up: seg("10.77.1.2:40000", "10.77.3.2:5201", 0)}
	for range depth {
		io.rx = append(io.rx, r.down)
	}
	if err := d.ingest(start); err != nil {
		tb.Fatal(err)
	}
	io.wb = make([][]byte, 0, 8192)
	for range 8192 {
		io.wb = append(io.wb, make([]byte, 0, 2048))
	}
	io.tx = make([][]byte, 0, 8192)
	return r
}

func (r *loopRig) tick() {
	r.ms++
	now := r.start.Add(time.Duration(r.ms) * time.Millisecond)
	r.io.rx = append(r.io.rx, r.down, r.up)
	if err := r.d.ingest(now); err != nil {
		panic(err)
	}
	r.m.Step(now, &r.d.out, &r.d.ev)
	r.d.flush()
	r.io.wb = append(r.io.wb, r.io.tx...)
	r.io.tx = r.io.tx[:0]
}

// The driver's loop per tick (two packets in, two out) against the depth
// of the cell's queue.
func BenchmarkDriverLoop(b *testing.B) {
	for _, depth := range []int{0, 100, 1000, 3000} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			r := newLoopRig(b, depth)
			for range 2000 {
				r.tick()
			}
			b.ReportAllocs()
			for b.Loop() {
				r.tick()
			}
		})
	}
}

// At any queue depth, the loop's per-packet path allocates nothing (the
// profile and the per-direction writes included).
func TestDriverLoopDepthAllocatesNothing(t *testing.T) {
	for _, depth := range []int{0, 1000, 3000} {
		r := newLoopRig(t, depth)
		for range 3000 {
			r.tick()
		}
		if a := testing.AllocsPerRun(1000, r.tick); a != 0 {
			t.Errorf("depth %d: %v allocations per tick", depth, a)
		}
		if q := r.m.Counters().Delivered[emu.Down]; q < 3000 {
			t.Errorf("depth %d: %d delivered", depth, q)
		}
		if r.d.st.Late != 0 {
			t.Errorf("depth %d: %d late: the rig's clock is off", depth, r.d.st.Late)
		}
	}
}
