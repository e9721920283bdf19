package tunnel

import (
	"os"
	"path/filepath"
	"testing"

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
