package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

func TestPredictorFlag(t *testing.T) {
	yaml := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(yaml, []byte("predictor: a3-only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "streams"},
		{[]string{"--predictor", "alg1"}, "alg1"},
		{[]string{"--predictor", "a3-only"}, "a3-only"},
		{[]string{"--predictor", "streams"}, "streams"},
		{[]string{"--config", yaml}, "a3-only"},
		{[]string{"--config", yaml, "--predictor", "alg1"}, "alg1"},
	} {
		c, err := resolveRun(t, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		r, err := c.predictorRules()
		if err != nil || r.Name() != tc.want {
			t.Fatalf("%v: rules %v, %v; want %s", tc.args, r, err, tc.want)
		}
	}
	c := defaultRunConfig()
	c.NoRouting, c.TetherNets = true, []string{"10.0.0.0/24"}
	c.Predictor = "m2ho"
	if _, _, _, err := c.check(); err == nil || !strings.Contains(err.Error(), `--predictor "m2ho"`) {
		t.Fatalf("bad name: %v", err)
	}
}

// feedFixture is the socket's sink as runDaemon builds it, around a real
// controller and observer, with a mutex standing in for the engine's lock.
func feedFixture() (*eventFeed, *m2ho.Controller) {
	ctrl := m2ho.New(m2ho.Config{Observer: newObserver(zap.NewNop()), SMaxDB: m2ho.NewSMaxDB()})
	var mu sync.Mutex
	do := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	f := newEventFeed(do, ctrl.OnSourceEvent)
	var ms int64
	f.clock = func() time.Time { ms++; return time.Unix(0, ms*int64(time.Millisecond)) }
	return f, ctrl
}

// The callback gives the controller each event, and the reused Event does
// not carry one event's fields into the next.
func TestEventFeedDelivers(t *testing.T) {
	f, ctrl := feedFixture()
	f.sink(signaling.Event{Kind: signaling.KindMACSlot, Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}, RBRatio: 0.2})
	f.sink(signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasA3,
		Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}, Neighbor: signaling.Cell{ID: "B", Type: signaling.CellSub6}})
	if ctrl.State() != m2ho.Preparation || ctrl.Hint().Target.ID != "B" {
		t.Fatalf("after A3: %v %+v", ctrl.State(), ctrl.Hint())
	}
	f.sink(signaling.Event{Kind: signaling.KindHOCommand, HO: signaling.HOSNChange, Target: signaling.Cell{ID: "B", Type: signaling.CellSub6}})
	f.sink(signaling.Event{Kind: signaling.KindRandomAccess, RAResult: signaling.RASuccess, RAReason: signaling.RAHandover})
	if ctrl.State() != m2ho.Smoothing {
		t.Fatalf("after random access: %v", ctrl.State())
	}
	if f.ev.Target.ID != "" || f.ev.HO != 0 {
		t.Fatalf("stale fields in the reused event: %+v", f.ev)
	}
}

// The socket path's callback allocates nothing per event: MAC slots, and
// the re-sends of a multi-shot report.
func TestEventFeedAllocs(t *testing.T) {
	f, _ := feedFixture()
	cellA := signaling.Cell{ID: "A", Type: signaling.CellSub6}
	slot := signaling.Event{Kind: signaling.KindMACSlot, Serving: cellA, RBRatio: 0.5, Bytes: 1200}
	rep := signaling.Event{Kind: signaling.KindReport, Meas: signaling.MeasB1, Serving: signaling.Cell{ID: "L", Type: signaling.CellLTE},
		Neighbor: signaling.Cell{ID: "M", Type: signaling.CellMmWave}}
	f.sink(slot)
	if n := testing.AllocsPerRun(1000, func() { f.sink(slot) }); n != 0 {
		t.Fatalf("MAC slot: %v allocations per event", n)
	}
	f.sink(rep) // the prediction (logged); its re-sends extend it
	if n := testing.AllocsPerRun(1000, func() { f.sink(rep) }); n != 0 {
		t.Fatalf("report: %v allocations per event", n)
	}
}

func BenchmarkEventFeed(b *testing.B) {
	f, _ := feedFixture()
	slot := signaling.Event{Kind: signaling.KindMACSlot, Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}, RBRatio: 0.5, Bytes: 1200}
	b.ReportAllocs()
	for b.Loop() {
		f.sink(slot)
	}
}

// The feed keeps the largest signalling lag (arrival on the feed's clock
// less the event's own time) until takeLag, which starts it over; events
// without a time count nothing.
func TestEventFeedLag(t *testing.T) {
	f, _ := feedFixture() // the clock reads 1 ms, 2 ms, … at each event
	slot := signaling.Event{Kind: signaling.KindMACSlot, Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}}
	slot.Time = time.Unix(0, 0)
	f.sink(slot) // 1 ms late
	slot.Time = time.Unix(0, int64(2*time.Millisecond)-int64(300*time.Microsecond))
	f.sink(slot) // 0.3 ms late
	if got := f.takeLag(); got != time.Millisecond {
		t.Fatalf("lag %v, want 1ms", got)
	}
	if got := f.takeLag(); got != 0 {
		t.Fatalf("lag %v after takeLag, want 0", got)
	}
	f.sink(signaling.Event{Kind: signaling.KindMACSlot})
	if got := f.takeLag(); got != 0 {
		t.Fatalf("lag %v from an event without a time, want 0", got)
	}
}

// sinkBatch gives the controller a batch's events in order under one
// taking of the lock, all stamped with the batch's arrival, and judges
// each writer against its own clock: a writer an hour behind is not
// stale, and a new connection in a writer's slot starts over.
func TestEventFeedBatch(t *testing.T) {
	ctrl := m2ho.New(m2ho.Config{Observer: newObserver(zap.NewNop()), SMaxDB: m2ho.NewSMaxDB()})
	locks := 0
	do := func(f func()) { locks++; f() }
	type call struct {
		at  time.Time
		src *m2ho.SignalSource
		n   int
	}
	var calls []call
	f := newEventFeed(do, func(now time.Time, src *m2ho.SignalSource, ev *signaling.Event) {
		calls = append(calls, call{now, src, ev.Bytes})
		ctrl.OnSourceEvent(now, src, ev)
	})
	now := time.Unix(1000, 0)
	f.clock = func() time.Time { return now }
	slots := func(from, n int, ts time.Time) []signaling.Event {
		var evs []signaling.Event
		for i := range n {
			evs = append(evs, signaling.Event{Kind: signaling.KindMACSlot, Time: ts.Add(time.Duration(i) * 125 * time.Microsecond),
				Bytes: from + i, Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}})
		}
		return evs
	}
	f.sinkBatch(sigio.Batch{Conn: 1, Slot: 0, Events: slots(0, 64, now.Add(-10*time.Millisecond))})
	now = now.Add(10 * time.Millisecond)
	f.sinkBatch(sigio.Batch{Conn: 2, Slot: 1, Events: slots(64, 64, now.Add(-time.Hour))})
	if locks != 2 || len(calls) != 128 {
		t.Fatalf("%d lock takings for %d events, want 2 for 128", locks, len(calls))
	}
	for i, c := range calls {
		if c.n != i || c.src != &f.srcs[i/64] || !c.at.Equal(time.Unix(1000, 0).Add(time.Duration(i/64)*10*time.Millisecond)) {
			t.Fatalf("call %d: event %d from %p at %v", i, c.n, c.src, c.at)
		}
	}
	if on, n, _ := ctrl.StaleSignal(); on || n != 0 {
		t.Fatalf("a writer an hour behind judged stale (%d events)", n)
	}
	// The first writer falls 1 s behind: stale. A new writer in its slot
	// has its own clock: not stale however far off.
	now = now.Add(time.Second)
	f.sinkBatch(sigio.Batch{Conn: 1, Slot: 0, Events: slots(0, 1, now.Add(-time.Second))})
	if on, n, _ := ctrl.StaleSignal(); !on || n != 1 {
		t.Fatalf("a writer 1 s behind its usual: stale %v, %d events", on, n)
	}
	f.sinkBatch(sigio.Batch{Conn: 3, Slot: 0, Events: slots(0, 1, now.Add(-5*time.Hour))})
	if _, n, _ := ctrl.StaleSignal(); n != 1 {
		t.Fatalf("a new writer judged against the old one's clock: %d stale events", n)
	}
}

// The batch path allocates nothing per event once the writer's slot is
// known: MAC slots stamped on a clock of its own.
func TestEventFeedBatchAllocs(t *testing.T) {
	f, _ := feedFixture()
	evs := make([]signaling.Event, 64)
	ts := time.Unix(0, 0)
	for i := range evs {
		evs[i] = signaling.Event{Kind: signaling.KindMACSlot, Serving: signaling.Cell{ID: "A", Type: signaling.CellSub6}, RBRatio: 0.5, Bytes: 1200}
	}
	stamp := func() {
		for i := range evs {
			ts = ts.Add(time.Millisecond / 64) // the fixture's clock advances 1 ms a batch
			evs[i].Time = ts
		}
	}
	stamp()
	f.sinkBatch(sigio.Batch{Conn: 1, Events: evs})
	if n := testing.AllocsPerRun(1000, func() { stamp(); f.sinkBatch(sigio.Batch{Conn: 1, Events: evs}) }); n != 0 {
		t.Fatalf("%v allocations per batch of 64", n)
	}
}
