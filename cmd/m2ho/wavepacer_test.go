package main

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/proxy/wave"
	"github.com/m2ho/m2ho/signaling"
)

func newTestWavePacer(t *testing.T) (*wavePacers, *wavePacer) {
	t.Helper()
	set, err := newWavePacers(wave.DefaultConfig(), 1280, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	p, err := wave.New(set.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return set, &wavePacer{set: set, p: p, ev: wave.NewEvents(64), id: "phone-1"}
}

// The adapter on the tunnel's Pacer seam: a burst of 10 at once, then a
// wait of the initial TxTime; a predicted handover caps what may be in
// flight, a withdrawal lifts the cap, an executed handover restarts TxTime
// from c_est; each applied hint is counted.
func TestWavePacerAdapter(t *testing.T) {
	set, w := newTestWavePacer(t)
	t0 := time.Unix(1000, 0)
	// Fewer than a burst queued: the window waits for more (burstHold),
	// then lets them go as they are.
	if n, wait := w.Budget(t0.Add(-10*time.Millisecond), 3); n != 0 || wait != burstHold {
		t.Fatalf("3 queued: %d, %v; want a hold of %v", n, wait, burstHold)
	}
	if n, wait := w.Budget(t0.Add(-8*time.Millisecond), 4); n != 0 || wait != 3*time.Millisecond {
		t.Fatalf("4 queued 2ms later: %d, %v; want the 3ms left of the hold", n, wait)
	}
	set2, w2 := newTestWavePacer(t)
	_ = set2
	if n, _ := w2.Budget(t0, 3); n != 0 {
		t.Fatal("no hold")
	}
	if n, _ := w2.Budget(t0.Add(burstHold), 3); n != 3 {
		t.Fatalf("after the hold %d, want the 3 queued", n)
	}
	n, wait := w.Budget(t0, 25)
	if n != 10 || wait != 0 {
		t.Fatalf("first budget %d, %v; want a burst of 10 now", n, wait)
	}
	for i := range n {
		// Sent comes a little later each time: the release instant is the
		// budget's, so the burst is one release, not ten.
		w.Sent(t0.Add(time.Duration(i)*time.Microsecond), 1280)
	}
	if c := w.p.State().Counters; c.Bursts != 1 || c.ReleaseOverrun != 0 {
		t.Fatalf("counters after one burst: %+v", c)
	}
	n, wait = w.Budget(t0.Add(time.Millisecond), 15)
	if n != 0 || wait != wave.DefaultInitialTxTime-time.Millisecond {
		t.Fatalf("budget inside the window: %d, %v; want 0 and the rest of 200ms", n, wait)
	}
	// Predicted: ŝ_max 3000 bytes, 12800 already released: capped.
	w.Hint(t0.Add(2*time.Millisecond), tunnel.Hint{Kind: tunnel.HintPredicted, SMax: 3000, CellType: signaling.CellMmWave})
	n, wait = w.Budget(t0.Add(300*time.Millisecond), 15)
	if n != 0 || wait != time.Millisecond {
		t.Fatalf("capped budget %d, %v; want 0 and a 1ms poll", n, wait)
	}
	w.Hint(t0.Add(301*time.Millisecond), tunnel.Hint{Kind: tunnel.HintWithdrawn})
	if n, _ = w.Budget(t0.Add(302*time.Millisecond), 15); n != 10 {
		t.Fatalf("after withdrawal %d, want a burst of 10", n)
	}
	for range n {
		w.Sent(t0.Add(303*time.Millisecond), 1280)
	}
	// Executed at 1.35 MB/s: a burst of 10 × 1350 bytes takes 10 ms.
	w.Hint(t0.Add(310*time.Millisecond), tunnel.Hint{Kind: tunnel.HintExecuted, CellType: signaling.CellMmWave, CEst: 1.35e6})
	if tx := w.p.TxTime(); tx != 10*time.Millisecond {
		t.Fatalf("TxTime after the executed hint %v, want 10ms", tx)
	}
	if n, _ = w.Budget(t0.Add(311*time.Millisecond), 15); n != 10 {
		t.Fatalf("after the executed hint %d, want a new burst at once", n)
	}
	// An invalid hint is refused and counted, not applied.
	w.Hint(t0.Add(312*time.Millisecond), tunnel.Hint{Kind: tunnel.HintPredicted, SMax: 0})
	for k, want := range map[tunnel.HintKind]uint64{tunnel.HintPredicted: 1, tunnel.HintWithdrawn: 1, tunnel.HintExecuted: 1} {
		if got := set.applied[k].Load(); got != want {
			t.Errorf("%v applied %d, want %d", k, got, want)
		}
	}
	if set.refused.Load() != 1 {
		t.Errorf("refused %d, want 1", set.refused.Load())
	}
}
