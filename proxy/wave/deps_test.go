package wave

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The per-packet path (Push, Release, OnSent, OnAck, the Events buffer)
// allocates nothing in steady state.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	p, _ := New(Config{})
	q, _ := NewQueue(QueueConfig{})
	ev := NewEvents(0)
	pkt := make([]byte, 1250)
	now := t0
	var pn int64
	send := func(b []byte) error { return nil }
	var ranges [1]AckRange
	step := func() {
		for i := 0; i < 10; i++ {
			q.Push(pkt)
		}
		n := q.Release(now, p, send)
		for i := 0; i < n; i++ {
			ev.Sent(now, pn, 1250, 1)
			pn++
		}
		for i := 0; i < 5; i++ {
			ranges[0] = AckRange{0, pn - 10 + int64(2*i) + 1}
			ev.Acked(now.Add(20*time.Millisecond+time.Duration(i)*time.Millisecond), ranges[:])
		}
		ev.DrainInto(p)
		_ = p.State()
		now = now.Add(p.TxTime())
	}
	for i := 0; i < 100; i++ {
		step()
	}
	if a := testing.AllocsPerRun(1000, step); a != 0 {
		t.Fatalf("%v allocations per burst, want 0", a)
	}
	if p.State().BurstsMeasured < 1000 {
		t.Fatalf("measured %d bursts: the loop did not exercise tracking", p.State().BurstsMeasured)
	}
}

func BenchmarkBurst(b *testing.B) {
	p, _ := New(Config{})
	q, _ := NewQueue(QueueConfig{})
	pkt := make([]byte, 1250)
	now := t0
	var pn int64
	send := func([]byte) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < 10; i++ {
			q.Push(pkt)
		}
		n := q.Release(now, p, send)
		for i := 0; i < n; i++ {
			p.OnSent(now, pn, 1250, 1)
			pn++
		}
		for i := 0; i < 5; i++ {
			p.OnAck(now.Add(20*time.Millisecond+time.Duration(i)*time.Millisecond), []AckRange{{0, pn - 10 + int64(2*i) + 1}})
		}
		now = now.Add(p.TxTime())
	}
}

func TestQueueHeadDrop(t *testing.T) {
	q, err := NewQueue(QueueConfig{MaxPackets: 3, MaxBytes: 3000, MaxPacketBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	for i := byte(1); i <= 4; i++ {
		q.Push([]byte{i, i, i})
	}
	// packet 1 (the oldest) was dropped
	if s := q.Stats(); s.DroppedHead != 1 || s.DroppedHeadBytes != 3 || s.Packets != 3 {
		t.Fatalf("%+v", s)
	}
	// [2 3 4]; a 1500-byte packet: the packet bound drops 2 → [3 4 1500];
	// another: the packet bound drops 3, then 3+1500+1500 > 3000 bytes
	// drops 4 → [1500 1500].
	q.Push(make([]byte, 1500))
	q.Push(make([]byte, 1500))
	if s := q.Stats(); s.Bytes != 3000 || s.Packets != 2 || s.DroppedHead != 4 || s.DroppedHeadBytes != 12 {
		t.Fatalf("byte bound: %+v", s)
	}
	if q.Push(nil) || q.Push(make([]byte, 1501)) || q.Stats().DroppedOversize != 2 {
		t.Fatalf("oversize accepted: %+v", q.Stats())
	}
	q.Push([]byte{9})
	p, _ := New(Config{})
	var got [][]byte
	q.Release(t0, p, func(b []byte) error { got = append(got, append([]byte(nil), b...)); return nil })
	// oldest first; the byte bound dropped the first 1500-byte packet
	if len(got) != 2 || len(got[0]) != 1500 || got[1][0] != 9 {
		t.Fatalf("released %d packets", len(got))
	}
	if _, err := NewQueue(QueueConfig{MaxPackets: 4, MaxBytes: 100, MaxPacketBytes: 1500}); err == nil {
		t.Fatal("MaxBytes < MaxPacketBytes accepted")
	}
}

func TestQueueSendError(t *testing.T) {
	q, _ := NewQueue(QueueConfig{})
	p, _ := New(Config{})
	for i := 0; i < 3; i++ {
		q.Push(make([]byte, 100))
	}
	calls := 0
	n := q.Release(t0, p, func([]byte) error {
		calls++
		if calls == 2 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if n != 2 || q.Stats().SendErrors != 1 || q.Len() != 0 {
		t.Fatalf("sent %d errors %d left %d", n, q.Stats().SendErrors, q.Len())
	}
}

// The pump releases what is pushed and paces the rest with its timer, on a
// real clock (no timing assertion: only that all packets go out in order).
func TestPumpDeliversAll(t *testing.T) {
	p, _ := New(Config{InitialTxTime: 2 * time.Millisecond, MinTxTime: time.Millisecond})
	q, _ := NewQueue(QueueConfig{})
	ev := NewEvents(0)
	out := make(chan byte, 100)
	m := NewPump(p, q, ev, func(b []byte) error { out <- b[0]; return nil }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	for i := 0; i < 35; i++ {
		m.Push([]byte{byte(i)})
	}
	for i := 0; i < 35; i++ {
		if b := <-out; b != byte(i) {
			t.Fatalf("packet %d out of order: %d", i, b)
		}
	}
	if err := m.HandoverPredicted(1000); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.State(); !s.Predicted {
		t.Fatal("hint not applied")
	}
	m.PredictionWithdrawn()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	if _, qs := m.State(); qs.Released != 35 {
		t.Fatalf("released %d", qs.Released)
	}
}

// The core is pure: standard library only, no net/os/syscall, no QUIC; only
// pump.go reads the clock.
func TestPureCore(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{"context": true, "errors": true, "fmt": true, "math": true, "sync": true, "sync/atomic": true, "time": true}
	for _, imp := range strings.Fields(string(out)) {
		if !allowed[imp] {
			t.Errorf("proxy/wave imports %s", imp)
		}
	}
	out, err = exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || strings.HasPrefix(dep, "net/") || dep == "os/exec" || strings.Contains(dep, "quic-go") || (strings.HasPrefix(dep, "github.com/") && dep != "github.com/m2ho/m2ho/proxy/wave") {
			t.Errorf("proxy/wave depends on %s", dep)
		}
	}
	for _, f := range []string{"wave.go", "queue.go", "events.go", "gate.go"} {
		b, err := exec.Command("grep", "-n", "time.Now\\|time.NewTimer\\|go func", f).CombinedOutput()
		if err == nil {
			t.Errorf("%s reads the clock or starts goroutines:\n%s", f, b)
		}
	}
}

func TestEventsBounded(t *testing.T) {
	e := NewEvents(2) // 2 events, 8 range slots
	p, _ := New(Config{})
	r := make([]AckRange, 5)
	for i := range r {
		r[i] = AckRange{int64(10 * i), int64(10*i + 1)}
	}
	e.Acked(t0, r) // 5 slots
	e.Acked(t0, r) // 5 more > 8: dropped
	e.Lost(t0, 1)  // fits (events 2)
	e.Lost(t0, 2)  // events full: dropped
	e.Acked(t0, r) // events full: dropped
	if s := e.Stats(); s.Recorded != 2 || s.Dropped != 3 {
		t.Fatalf("%+v", s)
	}
	if n := e.DrainInto(p); n != 2 {
		t.Fatalf("drained %d", n)
	}
	e.Acked(t0, r) // room again
	if s := e.Stats(); s.Recorded != 3 {
		t.Fatalf("%+v", s)
	}
	big := make([]AckRange, MaxAckRanges+1)
	e2 := NewEvents(0)
	e2.Acked(t0, big)
	if s := e2.Stats(); s.RangesTruncated != 1 || s.Recorded != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestPumpPushAllocatesNothing(t *testing.T) {
	p, _ := New(Config{})
	q, _ := NewQueue(QueueConfig{})
	ev := NewEvents(0)
	now := t0
	var pn int64
	m := NewPump(p, q, ev, func([]byte) error {
		ev.Sent(now, pn, 1250, 1)
		pn++
		return nil
	}, func() time.Time { now = now.Add(time.Millisecond); return now })
	pkt := make([]byte, 1250)
	push := func() {
		m.Push(pkt)
		if pn%10 == 0 && pn > 0 {
			ev.Acked(now, []AckRange{{0, pn - 1}})
		}
	}
	for i := 0; i < 200; i++ {
		push()
	}
	if a := testing.AllocsPerRun(1000, push); a != 0 {
		t.Fatalf("Pump.Push allocates %v per packet", a)
	}
}
