package tunnel

import (
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cipqlog "github.com/quic-go/connect-ip-go/qlog"
	h3qlog "github.com/quic-go/quic-go/http3/qlog"
	"github.com/quic-go/quic-go/qlog"
)

// quic-go reports its DATAGRAM drops only as qlog events: the server's
// trace turns a receive-queue drop into DropDatagramRecvQueue and a
// DATAGRAM that fit no packet into DropSendError.
func TestDatagramDropEventsCounted(t *testing.T) {
	s := &Server{}
	r := (&countingTrace{count: s.countDrop}).AddProducer()
	r.RecordEvent(qlog.DatagramDropped{Direction: qlog.DirectionReceiving, Trigger: "buffer_full"})
	r.RecordEvent(qlog.DatagramDropped{Direction: qlog.DirectionReceiving, Trigger: "buffer_full"})
	r.RecordEvent(qlog.DatagramDropped{Direction: qlog.DirectionSending})
	st := s.Stats()
	if st.DropDatagramRecvQueue != 2 || st.DropSendError != 1 || st.DropInvalid != 0 {
		t.Fatalf("stats %+v: want 2 receive-queue drops, 1 send error", st)
	}
}

// The qlog file is buffered (quic-go writes token by token): nothing
// reaches the file before Close, everything after.
func TestQlogFileBuffered(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.sqlog")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	b := newBufferedFile(f)
	for range 100 {
		b.Write([]byte(`{"t":1}`))
	}
	if fi, _ := os.Stat(p); fi.Size() != 0 {
		t.Fatalf("%d bytes written before Close: unbuffered", fi.Size())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 700 {
		t.Fatalf("%d bytes after Close, want 700", fi.Size())
	}
}

// http3 drops a DATAGRAM its stream's queue has no room for without any
// event: the loss is what http3 parsed less what connect-ip-go then
// processed from the peer (forwarded or dropped, the drop counted by its
// own reason).
func TestH3DatagramQueueLossInferred(t *testing.T) {
	s := &Server{}
	r := (&countingTrace{count: s.countDrop}).AddProducer()
	for range 10 {
		r.RecordEvent(h3qlog.DatagramParsed{})
	}
	for range 6 {
		r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointPeer, Outcome: cipqlog.PacketForwarded})
	}
	r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointPeer, Outcome: cipqlog.PacketDropped, Reason: "source_address_not_allowed"})
	// Our own packets (to the peer) are no part of the count.
	r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointApplication, Outcome: cipqlog.PacketForwarded})
	st := s.Stats()
	if st.DropH3DatagramQueue != 3 || st.DropSpoofedSource != 1 || st.DropInvalid != 0 {
		t.Fatalf("stats %+v: want 3 inferred http3 queue drops, 1 spoofed", st)
	}
	if h3Lost(5, 7) != 0 {
		t.Fatal("more processed than parsed (events in flight) must count 0")
	}
}

// http3's goroutine records DatagramParsed for each DATAGRAM just before
// it queues it, and wakes the reader, which Go runs only once that
// goroutine stops: a burst fills the queue first. With the trace's yield
// the reader drains it whenever it holds more than h3YieldDepth; without
// it the whole burst waits. One P makes the schedule deterministic.
func TestYieldToReaderLetsReaderDrain(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, noYield := range []bool{false, true} {
		tr := &countingTrace{count: func(string, bool) {}, noYield: noYield}
		r := tr.AddProducer()
		var mu sync.Mutex
		queued := 0
		wake := make(chan struct{}, 1)
		done := make(chan struct{})
		go func() { // the reader: ReadPacket's loop
			defer close(done)
			for range wake {
				mu.Lock()
				n := queued
				queued = 0
				mu.Unlock()
				for range n {
					r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointPeer, Outcome: cipqlog.PacketForwarded})
				}
			}
		}()
		deepest := 0
		for range 200 { // http3's loop over a burst quic-go queued
			r.RecordEvent(h3qlog.DatagramParsed{})
			mu.Lock()
			queued++
			mu.Unlock()
			deepest = max(deepest, int(tr.parsed.Load()-tr.processed.Load()))
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		close(wake)
		<-done
		t.Logf("yield %v: deepest queue %d", !noYield, deepest)
		switch {
		case !noYield && deepest > h3YieldDepth+1:
			t.Errorf("with the yield the queue reached %d (> %d)", deepest, h3YieldDepth+1)
		case noYield && deepest <= 32:
			t.Errorf("without the yield the queue stayed at %d: the case tests nothing", deepest)
		}
	}
}

// A reader running on another P is not helped by a yield: http3's
// goroutine, with nothing else on its P, gets its P straight back and fills
// the queue at its own pace. The wait holds it until the reader has
// brought the queue down. The reader here spins 20 µs per DATAGRAM; the
// wait's bound is raised so that a loaded machine descheduling the reader
// cannot end a wait early (the depth bound is then exact, not timing).
func TestYieldToReaderWaitsForReaderElsewhere(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, wait := range []bool{true, false} {
		tr := &countingTrace{count: func(string, bool) {}, waitMax: time.Minute}
		if !wait {
			tr.waitMax = -1 // the yields only
		}
		r := tr.AddProducer()
		var queued atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // the reader, on the other P
			defer close(done)
			for {
				if queued.Load() == 0 {
					select {
					case <-stop:
						return
					default:
						runtime.Gosched()
						continue
					}
				}
				for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
				}
				queued.Add(-1)
				r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointPeer, Outcome: cipqlog.PacketForwarded})
			}
		}()
		deepest := 0
		for range 200 {
			r.RecordEvent(h3qlog.DatagramParsed{})
			queued.Add(1)
			deepest = max(deepest, int(tr.depth()))
		}
		close(stop)
		<-done
		t.Logf("wait %v: deepest queue %d, waits %d (%d ended by the bound)", wait, deepest, tr.h3w.waits.Load(), tr.h3w.waitsOut.Load())
		switch {
		case wait && deepest > h3YieldDepth+1:
			t.Errorf("with the wait the queue reached %d (> %d)", deepest, h3YieldDepth+1)
		case wait && tr.h3w.waits.Load() == 0:
			t.Error("the reader kept up without a wait: the case tests nothing")
		case wait && tr.h3w.waitsOut.Load() != 0:
			t.Errorf("%d waits ended by the bound with a reader that keeps reading", tr.h3w.waitsOut.Load())
		case !wait && deepest <= 32:
			// Not an error: on a machine whose other P stalls the
			// producer the yields alone can keep up.
			t.Logf("the yields alone kept the queue at %d", deepest)
		}
	}
}

// A wait ends at h3WaitMax when the reader stops: the DATAGRAM is then
// queued (http3 may drop it), the goroutine never hangs.
func TestYieldToReaderWaitBounded(t *testing.T) {
	tr := &countingTrace{count: func(string, bool) {}, waitMax: 5 * time.Millisecond}
	r := tr.AddProducer()
	for range h3YieldDepth + 2 {
		r.RecordEvent(h3qlog.DatagramParsed{})
	}
	if w, out := tr.h3w.waits.Load(), tr.h3w.waitsOut.Load(); w != 2 || out != 2 {
		t.Fatalf("waits %d, ended by the bound %d: want 2 and 2 (depths 25 and 26, no reader)", w, out)
	}
	// The reader comes back: the depth falls, the next wait ends on its
	// signal (the bound raised so that only the signal can end it).
	tr.waitMax = time.Minute
	go func() {
		for range 20 {
			time.Sleep(100 * time.Microsecond)
			r.RecordEvent(cipqlog.PacketProcessed{Source: cipqlog.EndpointPeer, Outcome: cipqlog.PacketForwarded})
		}
	}()
	r.RecordEvent(h3qlog.DatagramParsed{})
	if w, out, d := tr.h3w.waits.Load(), tr.h3w.waitsOut.Load(), tr.depth(); w != 3 || out != 2 || d > h3ResumeDepth {
		t.Fatalf("waits %d, ended by the bound %d, depth %d: want 3, 2, <= %d", w, out, d, h3ResumeDepth)
	}
}

// A light trace (the client's with NoRecvWait and without CountDrops or a
// qlog file) answers quic-go's connection, the
// first producer, with no recorder: quic-go then builds no events, while
// http3's and connect-ip-go's (the yield's and the http3 loss count's)
// still arrive. With CountDrops quic-go's events come too: the check can
// fail. Holds quic-go v0.65's order of producers.
func TestLightTraceSkipsQUICEvents(t *testing.T) {
	for _, full := range []bool{false, true} {
		h := startServer(t, newPKI(t, "phone-1"), nil)
		var tr *countingTrace
		var events atomic.Uint64
		c := mustDial(t, h, func(cfg *ClientConfig) {
			cfg.CountDrops, cfg.NoRecvWait = full, !full
			cfg.onTrace = func(x *countingTrace) { tr, x.onEvent = x, func() { events.Add(1) } }
		})
		me := netip.AddrPortFrom(c.Addresses()[0].Addr(), 40000)
		download(t, c, h.dev, stream(b4, me, 200, DefaultMTU, 1))
		eventually(t, "connect-ip-go's events", func() bool { return tr.processed.Load() >= 200 })
		parsed, processed, all := tr.parsed.Load(), tr.processed.Load(), events.Load()
		t.Logf("full %v: parsed %d, processed %d, events %d", full, parsed, processed, all)
		if parsed < 200 {
			t.Errorf("full %v: http3 parsed %d of 200 DATAGRAMs: its recorder is missing", full, parsed)
		}
		other := all - parsed - processed
		switch {
		case !full && other > 100:
			t.Errorf("light trace: %d events besides the DATAGRAMs' (quic-go's per packet?)", other)
		case full && other <= 100: // one per QUIC packet received, at least half as many as DATAGRAMs
			t.Errorf("full trace: only %d events besides the DATAGRAMs': quic-go's are missing", other)
		}
	}
}

// recvBurst plays quic-go's receiving goroutine over a burst of n
// DATAGRAMs against its receive queue of 128 (a buffered channel): each is
// queued or dropped (DatagramDropped first, as quic-go records it), then
// its packet's PacketReceived is recorded. http3's goroutine, when live,
// takes them out and records DatagramParsed. It returns the drops and the
// deepest queue seen.
func recvBurst(tr *countingTrace, n int, h3Live bool) (drops, deepest int) {
	r := tr.AddProducer()
	q := make(chan struct{}, 128)
	done := make(chan struct{})
	if h3Live {
		go func() {
			defer close(done)
			for range q {
				r.RecordEvent(h3qlog.DatagramParsed{})
			}
		}()
	} else {
		close(done)
	}
	dgram := qlog.PacketReceived{Frames: []qlog.Frame{{Frame: &qlog.DatagramFrame{Length: 1282}}}}
	for range n {
		select {
		case q <- struct{}{}:
		default:
			drops++
			r.RecordEvent(qlog.DatagramDropped{Direction: qlog.DirectionReceiving})
		}
		r.RecordEvent(dgram)
		deepest = max(deepest, len(q))
	}
	close(q)
	<-done
	return drops, deepest
}

// quic-go's receiving goroutine queues a burst into its DATAGRAM queue of
// 128 without stopping, and http3's goroutine, woken, runs only once it
// does: on one P the burst overflows the queue (drops, each an inner TCP
// loss). With waitForH3 it stops at three quarters until http3's has
// taken the queue down: no drop. The wait's bound is raised so that a
// stalled machine cannot end a wait before the signal.
func TestRecvWaitLetsH3Drain(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, wait := range []bool{true, false} {
		tr := &countingTrace{count: func(string, bool) {}, noYield: true, recvWait: wait, qWaitMax: time.Minute, qBudgetMax: time.Hour}
		drops, deepest := recvBurst(tr, 400, true)
		t.Logf("wait %v: %d drops, deepest queue %d, waits %d", wait, drops, deepest, tr.qw.waits.Load())
		switch {
		case wait && (drops != 0 || deepest > quicWaitDepth+1):
			t.Errorf("with the wait: %d drops, deepest %d (want 0, <= %d)", drops, deepest, quicWaitDepth+1)
		case wait && tr.qw.waitsOut.Load() != 0:
			t.Errorf("%d waits ended by the bound with http3's goroutine live", tr.qw.waitsOut.Load())
		case !wait && drops == 0:
			t.Error("without the wait nothing was dropped: the case tests nothing")
		}
		if got := tr.qDepth(); got != 0 {
			t.Errorf("wait %v: depth %d after http3 took everything out", wait, got)
		}
	}
}

// With http3's goroutine gone the waits end at their bound and use up the
// budget; then the queue overflows as without the wait: quic-go's
// goroutine never hangs and waits at most about the budget.
func TestRecvWaitBudget(t *testing.T) {
	tr := &countingTrace{count: func(string, bool) {}, noYield: true, recvWait: true, qWaitMax: 2 * time.Millisecond, qBudgetMax: 5 * time.Millisecond}
	drops, deepest := recvBurst(tr, 200, false)
	t.Logf("%d drops, deepest %d, waits %d (%d by the bound), skipped %d", drops, deepest, tr.qw.waits.Load(), tr.qw.waitsOut.Load(), tr.qWaitsSkipped.Load())
	if drops != 200-128 || deepest != 128 {
		t.Errorf("%d drops, deepest %d: want %d, 128", drops, deepest, 200-128)
	}
	if w, out := tr.qw.waits.Load(), tr.qw.waitsOut.Load(); w < 2 || out != w {
		t.Errorf("waits %d, by the bound %d: want at least 2, all by the bound", w, out)
	}
	if tr.qWaitsSkipped.Load() == 0 {
		t.Error("no wait skipped: the budget bounds nothing")
	}
}
