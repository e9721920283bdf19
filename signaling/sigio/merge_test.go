package sigio

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// macLine is a MAC slot of writer w with sequence number seq (in bytes).
func macLine(w string, seq int) string {
	return fmt.Sprintf(`{"t":"2023-02-16T22:45:00.000125Z","kind":"mac","rb":0.5,"bytes":%d,"cell":%q}`, seq, w)
}

func dialRaw(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitActive waits until the server has n writers connected (Accept runs
// asynchronously to the writer's Dial).
func waitActive(t *testing.T, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Active != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d writers connected, want %d", s.Stats().Active, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A writer that stalls in the middle of a line, and one that sends nothing,
// do not hold up a third; the stalled line arrives when it is finished.
func TestStalledWriterDoesNotBlockOthers(t *testing.T) {
	c := newCollector()
	s, path := listen(t, c)
	silent := dialRaw(t, path)
	stalled := dialRaw(t, path)
	half := macLine("stalled", 0)
	if _, err := stalled.Write([]byte(half[:30])); err != nil {
		t.Fatal(err)
	}
	waitActive(t, s, 2)
	live := dialRaw(t, path)
	var all strings.Builder
	for i := range 100 {
		all.WriteString(macLine("live", i) + "\n")
	}
	if _, err := live.Write([]byte(all.String())); err != nil {
		t.Fatal(err)
	}
	got := c.wait(t, 100)
	for i, e := range got {
		if e.Serving.ID != "live" || e.Bytes != i {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
	if _, err := stalled.Write([]byte(half[30:] + "\n")); err != nil {
		t.Fatal(err)
	}
	if got := c.wait(t, 1); got[100].Serving.ID != "stalled" {
		t.Fatalf("stalled writer's line: %+v", got[100])
	}
	_ = silent
	if st := s.Stats(); st.Connections != 3 || st.Active != 3 || st.Events != 101 || st.Busy != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Concurrent writers: every event arrives once, each writer's in its order,
// the sink never runs twice at once; error replies count lines per
// connection.
func TestConcurrentWritersMerge(t *testing.T) {
	const writers, per = 4, 500
	var running atomic.Int32
	var mu sync.Mutex
	var got []signaling.Event
	done := make(chan struct{})
	s, err := Listen(t.TempDir()+"/s.sock", func(e signaling.Event) {
		if running.Add(1) != 1 {
			t.Error("sink called concurrently")
		}
		mu.Lock()
		got = append(got, e)
		n := len(got)
		mu.Unlock()
		running.Add(-1)
		if n == writers*per {
			close(done)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	replies := make([]string, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", s.Path())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			bw := bufio.NewWriter(c)
			for i := range per {
				fmt.Fprintln(bw, macLine(fmt.Sprint("w", w), i))
				if i == w { // one bad line per writer, at line w+1
					fmt.Fprintln(bw, `{"kind":"mac"}`)
				}
				if i%50 == 0 {
					bw.Flush()
					runtime.Gosched()
				}
			}
			bw.Flush()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			replies[w], _ = bufio.NewReader(c).ReadString('\n')
		}()
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d events arrived", len(got), writers*per)
	}
	wg.Wait()
	next := map[string]int{}
	for _, e := range got {
		if e.Bytes != next[e.Serving.ID] {
			t.Fatalf("writer %s: event %d arrived when %d was due", e.Serving.ID, e.Bytes, next[e.Serving.ID])
		}
		next[e.Serving.ID]++
	}
	for w := range writers {
		if want := fmt.Sprintf("error: %d: t: missing\n", w+2); replies[w] != want {
			t.Errorf("writer %d reply %q, want %q", w, replies[w], want)
		}
	}
	if st := s.Stats(); st.Events != writers*per || st.Errors != writers || st.Connections != writers {
		t.Errorf("stats %+v", st)
	}
}

// A writer that floods the socket does not starve another: each of the
// other's events gets through while the flood goes on.
func TestFloodDoesNotStarveOther(t *testing.T) {
	var flooded atomic.Int64
	arrived := make(chan int, 1)
	s, err := Listen(t.TempDir()+"/s.sock", func(e signaling.Event) {
		if e.Serving.ID == "quiet" {
			arrived <- e.Bytes
		} else {
			flooded.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	flood := dialRaw(t, s.Path())
	stop := make(chan struct{})
	var floodWG sync.WaitGroup
	floodWG.Add(1)
	go func() {
		defer floodWG.Done()
		var chunk strings.Builder
		for i := range 1000 {
			chunk.WriteString(macLine("flood", i) + "\n")
		}
		b := []byte(chunk.String())
		for {
			select {
			case <-stop:
				return
			default:
			}
			flood.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := flood.Write(b); err != nil && !isTimeout(err) {
				return
			}
		}
	}()
	defer func() { close(stop); floodWG.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); flooded.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the flood does not arrive")
		}
	}
	quietConn := dialRaw(t, s.Path())
	for i := range 20 {
		if _, err := fmt.Fprintln(quietConn, macLine("quiet", i)); err != nil {
			t.Fatal(err)
		}
		select {
		case n := <-arrived:
			if n != i {
				t.Fatalf("quiet event %d arrived, want %d", n, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("quiet event %d stuck behind the flood (%d events in all)", i, s.Stats().Events)
		}
	}
	if st := s.Stats(); st.Events <= 20 {
		t.Errorf("stats %+v", st)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The connection limit: one writer more is refused and counted; when one
// leaves, a new one is accepted.
func TestMaxConns(t *testing.T) {
	c := newCollector()
	s, path := listen(t, c, WithMaxConns(2))
	a, b := dialRaw(t, path), dialRaw(t, path)
	waitActive(t, s, 2)
	third := dialRaw(t, path)
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(third).ReadString('\n'); got != "error: busy\n" {
		t.Fatalf("third writer got %q (%v)", got, err)
	}
	fmt.Fprintln(a, macLine("a", 0))
	fmt.Fprintln(b, macLine("b", 0))
	c.wait(t, 2)
	a.Close()
	waitActive(t, s, 1)
	d := dialRaw(t, path)
	fmt.Fprintln(d, macLine("d", 0))
	if got := c.wait(t, 1); got[2].Serving.ID != "d" {
		t.Fatalf("after a writer left: %+v", got[2])
	}
	if st := s.Stats(); st.Busy != 1 || st.Connections != 3 || st.Active != 2 {
		t.Errorf("stats %+v", st)
	}
}

// The socket path allocates nothing per event once warmed up: read a line
// from the connection, decode, hand to the sink.
func TestSocketPathAllocs(t *testing.T) {
	const n = 20000
	got := make(chan struct{}, 1)
	var count int
	s, err := Listen(t.TempDir()+"/s.sock", func(e signaling.Event) {
		if count++; count%n == 0 {
			got <- struct{}{}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := dialRaw(t, s.Path())
	var all strings.Builder
	for i := range n {
		all.WriteString(macLine("88", i) + "\n")
	}
	batch := []byte(all.String())
	send := func() {
		if _, err := conn.Write(batch); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("events did not arrive")
		}
	}
	send() // warm up: the connection's goroutine, buffers, interned ID
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	send()
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / n; per > 0.05 {
		t.Errorf("%.3f allocations per event on the socket path", per)
	}
}

// ListenBatch: lines a writer sent together reach the sink in batches of
// at most WithMaxBatch, in order, named by the writer's connection and
// slot; a writer that takes a freed slot has a new connection number.
func TestServerBatches(t *testing.T) {
	type got struct {
		conn  uint64
		slot  int
		bytes []int
	}
	var mu sync.Mutex
	var batches []got
	n := make(chan int, 1024)
	s, err := ListenBatch(t.TempDir()+"/s.sock", func(b Batch) {
		g := got{conn: b.Conn, slot: b.Slot}
		for _, e := range b.Events {
			g.bytes = append(g.bytes, e.Bytes)
		}
		mu.Lock()
		batches = append(batches, g)
		mu.Unlock()
		n <- len(b.Events)
	}, WithMaxBatch(16))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	send := func(c net.Conn, from, count int) {
		var all strings.Builder
		for i := from; i < from+count; i++ {
			all.WriteString(macLine("w", i) + "\n")
		}
		if _, err := c.Write([]byte(all.String())); err != nil {
			t.Fatal(err)
		}
		for left := count; left > 0; {
			select {
			case k := <-n:
				left -= k
			case <-time.After(5 * time.Second):
				t.Fatalf("%d events missing", left)
			}
		}
	}
	a := dialRaw(t, s.Path())
	send(a, 0, 100)
	mu.Lock()
	next, multi := 0, 0
	for _, b := range batches {
		if b.conn != 1 || b.slot != 0 || len(b.bytes) > 16 {
			t.Errorf("batch conn %d slot %d of %d events", b.conn, b.slot, len(b.bytes))
		}
		if len(b.bytes) > 1 {
			multi++
		}
		for _, v := range b.bytes {
			if v != next {
				t.Fatalf("event %d where %d was due", v, next)
			}
			next++
		}
	}
	if multi == 0 {
		t.Errorf("100 lines in one write came one event per batch (%d batches)", len(batches))
	}
	batches = nil
	mu.Unlock()

	b := dialRaw(t, s.Path())
	send(b, 0, 1)
	a.Close()
	waitActive(t, s, 1)
	c := dialRaw(t, s.Path())
	send(c, 0, 1)
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || batches[0].conn != 2 || batches[0].slot != 1 || batches[1].conn != 3 || batches[1].slot != 0 {
		t.Errorf("writers named %+v, want conn 2 in slot 1, then conn 3 in the freed slot 0", batches)
	}
}
