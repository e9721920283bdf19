package wave

import (
	"testing"
	"time"
)

func TestQueueWindowBDP(t *testing.T) {
	p, err := New(Config{QueueWindow: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGate(p, nil)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// feed records the estimate b every 10 ms over [from, to) ms
	feed := func(from, to, b int) {
		for ms := from; ms < to; ms += 10 {
			g.windowBDP(at(ms), b)
		}
	}
	// 100 packets for 300 ms (three slots), then a dip to 20
	feed(0, 300, 100)
	if b := g.windowBDP(at(300), 20); b != 100 {
		t.Fatalf("dip right after 300 ms at 100: bound %d, want 100", b)
	}
	feed(310, 1300, 20)
	if b := g.windowBDP(at(1300), 20); b != 20 {
		t.Fatalf("a window after the dip: bound %d, want 20", b)
	}
	// one high slot (a compressed train's estimate) and one more: ignored
	g.windowBDP(at(1400), 500)
	g.windowBDP(at(1500), 400)
	if b := g.windowBDP(at(1600), 20); b != 20 {
		t.Fatalf("two outlier slots: bound %d, want 20 (the third largest)", b)
	}
	// no estimate (adjustment, handover restart) empties the window
	if b := g.windowBDP(at(1610), 0); b != 0 {
		t.Fatalf("no estimate: %d", b)
	}
	if b := g.windowBDP(at(1620), 30); b != 30 {
		t.Fatalf("after a restart: bound %d, want 30 (the old path's rate forgotten)", b)
	}
	// a window without a call makes every slot stale
	feed(1630, 1900, 300)
	if b := g.windowBDP(at(4000), 10); b != 10 {
		t.Fatalf("after 2 s without a call: bound %d, want 10", b)
	}
	off, _ := New(Config{})
	go1 := NewGate(off, nil)
	go1.windowBDP(at(0), 100)
	if b := go1.windowBDP(at(10), 20); b != 20 {
		t.Fatalf("no QueueWindow: bound %d, want the current 20", b)
	}
	for _, w := range []time.Duration{-1, time.Millisecond, 2 * time.Minute} {
		if _, err := New(Config{QueueWindow: w}); err == nil {
			t.Fatalf("QueueWindow %v accepted", w)
		}
	}
	if testing.AllocsPerRun(100, func() { g.windowBDP(at(5000), 40) }) != 0 {
		t.Fatal("windowBDP allocates")
	}
}

// TestQueueWindowVariableCapacity: an inner TCP through Wave on a link
// whose capacity is redrawn every 100 ms in 30-150 Mbit/s (a 5G cell's
// variation; 26 ms base RTT, 600 KB buffer), the tunnel queue bounded by
// Gate.QueueLimit. With the current estimate alone the bound followed
// every dip and tail-dropped the inner TCP's window (63 % of the mean
// capacity, 3213 queue drops); with the 1 s window 85 % (1482 drops), at
// a price: the inner TCP's mean RTT 57 ms against 29 (quic-go's default
// here: 96 %, 40 ms).
func TestQueueWindowVariableCapacity(t *testing.T) {
	longSim(t)
	var steps []rateStep
	var rng uint64
	for at := time.Duration(0); at < 25*time.Second; at += 100 * time.Millisecond {
		steps = append(steps, rateStep{at, (30 + float64(xorshift(&rng)%121)) * mbit, 13 * time.Millisecond})
	}
	const from, end = 5 * time.Second, 25 * time.Second
	var sum float64
	for _, st := range steps[from/(100*time.Millisecond):] {
		sum += st.rate
	}
	C := sum / float64(len(steps)-int(from/(100*time.Millisecond)))
	got := map[time.Duration]float64{}
	for _, w := range []time.Duration{time.Second, 0} {
		s := runNoisyWave(t, Config{QueueWindow: w}, steps, 600<<10, noise{"none", func(*tsim) {}}, true, end)
		got[w] = s.goodputOver(from, end)
		t.Logf("QueueWindow %v: %s", w, s.summary(from, end, C))
	}
	q := newTsim(t, steps, 600<<10, newRenoSender(), true)
	q.run(end)
	t.Logf("quic: %s", q.summary(from, end, C))
	if g := got[time.Second]; g < 0.8*C {
		t.Errorf("with the window: %.0f%% of the mean capacity, want >= 80%%", 100*g/C)
	}
	if g := got[0]; g > 0.7*C {
		t.Errorf("without the window: %.0f%% of C; the test no longer shows what the window is for", 100*g/C)
	}
}
