package tunnel

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

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
