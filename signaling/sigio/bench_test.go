package sigio

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"

	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/internal/jsonv1"
)

// withDecode swaps the decoder (the benchmark's old side).
func withDecode(f func() func([]byte) (signaling.Event, error)) ServerOption {
	return func(s *Server) { s.newDecode = f }
}

var (
	benchMAC    = []byte(`{"t":"2023-02-16T22:45:00.000125Z","kind":"mac","rb":0.95,"bytes":12000,"cell":"88"}` + "\n")
	benchReport = []byte(`{"t":"2023-02-16T22:44:59.886Z","kind":"report","event":"A3","serving":{"id":"88","type":"sub6","rsrp":-96,"rsrq":-15.5},"neighbor":{"id":"393","type":"sub6","rsrp":-91,"rsrq":-13}}` + "\n")
)

// BenchmarkSocketPath is the live path per event: a writer's line goes
// through the Unix socket, the server reads it, decodes it and hands the
// Event to the sink; the old decoder (encoding/json) and the new one in
// the same run. The writer's cost (one write per 1000 lines) is included.
func BenchmarkSocketPath(b *testing.B) {
	for _, kind := range []struct {
		name string
		line []byte
	}{{"mac", benchMAC}, {"report", benchReport}} {
		for _, dec := range []struct {
			name string
			opt  ServerOption
		}{
			{"old", withDecode(func() func([]byte) (signaling.Event, error) { return jsonv1.ParseLine })},
			{"new", func(*Server) {}},
		} {
			b.Run(kind.name+"/"+dec.name, func(b *testing.B) {
				benchSocket(b, kind.line, dec.opt)
			})
		}
	}
}

func benchSocket(b *testing.B, line []byte, opt ServerOption) {
	var n, want atomic.Int64
	done := make(chan struct{}, 1)
	s, err := Listen(b.TempDir()+"/s.sock", func(e signaling.Event) {
		if n.Add(1) == want.Load() {
			done <- struct{}{}
		}
	}, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	chunk := bytes.Repeat(line, 1000)
	send := func(lines int) {
		for lines >= 1000 {
			c.Write(chunk)
			lines -= 1000
		}
		c.Write(chunk[:lines*len(line)])
	}
	// Warm up: the connection's goroutine, buffers, interned IDs.
	want.Store(1000)
	send(1000)
	<-done
	n.Store(0)
	want.Store(int64(b.N))
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	send(b.N)
	<-done
	b.StopTimer()
	reportCPU(b, cpu)
}
