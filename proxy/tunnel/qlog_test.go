package tunnel

import (
	"os"
	"path/filepath"
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
