package emu

import (
	"hash/fnv"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// goldenRun drives the built-in mixed drive with a constant load (a
// 1500-byte packet down every 50 µs, 240 Mbit/s, more than a sub-6 cell
// carries, so its buffer stays full and drops; an ACK up every 100 µs)
// for dur of virtual time, stepping at every wake-up and every arrival,
// and hashes every delivery (id, direction, due time, dropped) and event
// (kind, time, serving cell, bytes).
func goldenRun(t *testing.T, dur time.Duration, edit func(*Config)) (uint64, Counters) {
	t.Helper()
	// seed 2: its first minute has a handover each way between sub-6 and
	// mmWave (seed 1's stays on sub-6 since vertical handovers end long
	// dwells only).
	scn, err := Builtin("mixed-drive", LoadOptions{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	cfg := scn.Config
	if edit != nil {
		edit(&cfg)
	}
	m, err := New(cfg, t0, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		h.Write(b[:])
	}
	out := make([]Delivery, 0, 4096)
	ev := make([]signaling.Event, 0, 4096)
	drain := func() {
		for _, d := range out {
			put(d.ID)
			put(uint64(d.Dir))
			put(uint64(d.Due.Sub(t0)))
			if d.Dropped {
				put(1)
			}
		}
		for _, e := range ev {
			put(uint64(e.Kind))
			put(uint64(e.Time.Sub(t0)))
			h.Write([]byte(e.Serving.ID))
			put(uint64(e.Bytes))
		}
		out, ev = out[:0], ev[:0]
	}
	var id uint64
	const arrive = 50 * time.Microsecond
	for now := time.Duration(0); now < dur; {
		next := now + arrive
		if w, ok := m.NextWake(); ok && w.Sub(t0) < next {
			next = max(w.Sub(t0), now)
		}
		now = next
		if now%arrive == 0 {
			id++
			m.Enqueue(t0.Add(now), Down, id, 1500)
			if now%(2*arrive) == 0 {
				id++
				m.Enqueue(t0.Add(now), Up, id, 60)
			}
		}
		m.Step(t0.Add(now), &out, &ev)
		drain()
	}
	return h.Sum64(), m.Counters()
}

// The model's behaviour on a seed is pinned: the same deliveries at the
// same virtual times, the same drops and events as the model of the day
// this test was written (the emulator's lateness work, issue 9, changed
// the driver, not the model). A change to the model that changes what a
// seed does must change this hash on purpose, saying why. Changed once
// since, on purpose: the built-in drive's sub-6 buffer went from 968 to
// 1387 KB (the queue at the measured tail drops, CALIBRATION.md); the
// model's code did not change. And once more: the drive's vertical
// handovers end dwells of at least the measured minimum
// (vertical_min_dwell_by_type), which left seed 1's first minute on
// sub-6 alone; the test moved to seed 2.
func TestGoldenMixedDrive(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want uint64
	}{
		{"as built in", nil, 0x6a7beef6ce5da469},
		{"no mmwave edge", func(c *Config) { c.MmWaveEdge = nil }, 0xce3a139aabff038a},
		// every handover with a flush hole, and the per-packet HARQ model
		{"holes and harq", func(c *Config) { c.FlushHoles, c.HARQFraction = 1, 0.02 }, 0x19db430eb720b8b5},
	} {
		got, c := goldenRun(t, 60*time.Second, tc.edit)
		if c.OverflowDrops == 0 || c.Delivered[Down] == 0 || totalHandovers(c) < 3 || c.Delivered[Up] == 0 {
			t.Fatalf("%s: the load does not exercise the model: %+v", tc.name, c)
		}
		if tc.name == "as built in" && c.MmWaveEdges == 0 {
			t.Fatalf("%s: no mmWave edge: %+v", tc.name, c)
		}
		if tc.name == "holes and harq" && (c.HolesPlanned == 0 || c.HARQRetx == 0 || c.ReorderFlushes == 0) {
			t.Fatalf("%s: no holes or retransmissions: %+v", tc.name, c)
		}
		if got != tc.want {
			t.Errorf("%s: hash %#x, want %#x (counters %+v)", tc.name, got, tc.want, c)
		}
	}
}

func totalHandovers(c Counters) int64 {
	return c.Handovers[0][0] + c.Handovers[0][1] + c.Handovers[1][0] + c.Handovers[1][1]
}
