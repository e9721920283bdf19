package main

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// slotLines are n MAC slot lines 125 µs apart (an mmWave cell's slot
// rate), stamped from t.
func slotLines(t time.Time, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(`{"t":"`)
		b.WriteString(t.Add(time.Duration(i) * 125 * time.Microsecond).UTC().Format(time.RFC3339Nano))
		b.WriteString(`","kind":"mac","rb":0.95,"bytes":`)
		b.WriteString(strconv.Itoa(1000 + i%500))
		b.WriteString(`,"cell":"88"}` + "\n")
	}
	return b.Bytes()
}

// holdLikePump holds the engine's lock the way the packet pump does
// (proxy.Engine.pump): a batch processed under the lock, then the TUN
// write and the next read outside it, which are system calls. hold is
// the time under the lock per batch (a batch of 128 segments at the
// 170 ns each of BenchmarkProcessRealController is 22 µs), free the
// time outside, spent in system calls (a write to a socket pair stands
// in for the TUN's). It stops when stop is closed.
func holdLikePump(eng *proxy.Engine, hold, free time.Duration, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		panic(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	pkt := make([]byte, 1500)
	rbuf := make([]byte, 1500)
	spin := func(d time.Duration) {
		for t := time.Now(); time.Since(t) < d; {
		}
	}
	work := func() { spin(hold) }
	for {
		select {
		case <-stop:
			return
		default:
		}
		eng.Do(work)
		for t := time.Now(); time.Since(t) < free; {
			syscall.Write(fds[0], pkt)
			syscall.Read(fds[1], rbuf)
		}
	}
}

// BenchmarkSignalPath is the live signalling path per event, end to end:
// a writer's MAC slot lines through the Unix socket, the server's read
// and decode, the daemon's eventFeed, the engine's lock and the
// controller's OnEvent. Alone, and with a goroutine holding the engine's
// lock as the packet pump does under load: 25 µs per batch with 5 µs
// (busy) or 25 µs (half) outside it. events/s is the throughput. The
// writer sends 1000 lines per write (chunk: the path's capacity), or one
// (line: as the emulator's sigio.Client does, a write per event); the
// server hands the feed one event per batch (batch=1, as before batches)
// or up to DefaultMaxBatch.
func BenchmarkSignalPath(b *testing.B) {
	for _, bc := range []struct {
		name       string
		hold, free time.Duration
	}{
		{"alone", 0, 0},
		{"pump-half", 25 * time.Microsecond, 25 * time.Microsecond},
		{"pump-busy", 25 * time.Microsecond, 5 * time.Microsecond},
	} {
		for _, w := range []struct {
			name  string
			lines int
		}{{"chunk", 1000}, {"line", 1}} {
			for _, batch := range []int{1, sigio.DefaultMaxBatch} {
				b.Run(bc.name+"/"+w.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
					benchSignalPath(b, bc.hold, bc.free, w.lines, sigio.WithMaxBatch(batch))
				})
			}
		}
	}
}

func benchSignalPath(b *testing.B, hold, free time.Duration, chunk int, opts ...sigio.ServerOption) {
	ctrl := m2ho.New(m2ho.Config{Observer: newObserver(zap.NewNop()), SMaxDB: m2ho.NewSMaxDB()})
	eng := proxy.NewEngine(proxy.EngineConfig{}, nil, ctrl, zap.NewNop())
	var n, want atomic.Int64
	done := make(chan struct{}, 1)
	feed := newEventFeed(eng.Do, func(now time.Time, src *m2ho.SignalSource, ev *signaling.Event) {
		ctrl.OnSourceEvent(now, src, ev)
		if n.Add(1) == want.Load() {
			done <- struct{}{}
		}
	})
	srv, err := serveFeed(b.TempDir()+"/s.sock", feed, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	c, err := net.Dial("unix", srv.Path())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	warm := slotLines(time.Now(), 1000)
	want.Store(1000)
	c.Write(warm)
	<-done
	lines := slotLines(time.Now(), b.N)
	per := len(lines) / b.N
	n.Store(0)
	want.Store(int64(b.N))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	if hold > 0 {
		wg.Add(1)
		go holdLikePump(eng, hold, free, stop, &wg)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for off := 0; off < len(lines); off += chunk * per {
		c.Write(lines[off:min(off+chunk*per, len(lines))])
	}
	<-done
	el := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}

// listenFeed serves the signalling socket into feed, as runDaemon does.
func serveFeed(path string, feed *eventFeed, opts ...sigio.ServerOption) (*sigio.Server, error) {
	return sigio.ListenBatch(path, feed.sinkBatch, opts...)
}
