package sigio

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

type collector struct {
	mu     sync.Mutex
	events []signaling.Event
	ch     chan struct{}
}

func newCollector() *collector { return &collector{ch: make(chan struct{}, 1024)} }

func (c *collector) sink(e signaling.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	c.ch <- struct{}{}
}

func (c *collector) wait(t *testing.T, n int) []signaling.Event {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-c.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d events arrived", i, n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]signaling.Event(nil), c.events...)
}

var t0 = time.Date(2023, 2, 16, 22, 44, 53, 100_000_000, time.UTC)

// testEvents has one event of each kind.
var testEvents = []signaling.Event{
	{Time: t0, Kind: signaling.KindReport, Meas: signaling.MeasA3,
		Serving:  signaling.Cell{ID: "88", Type: signaling.CellSub6, RSRP: -96, RSRQ: -15.5, HasSignal: true},
		Neighbor: signaling.Cell{ID: "393", Type: signaling.CellSub6, RSRP: -91, HasSignal: true}},
	{Time: t0, Kind: signaling.KindHOCommand, HO: signaling.HOSNChange,
		Serving: signaling.Cell{ID: "522", Type: signaling.CellMmWave}, Target: signaling.Cell{ID: "524", Type: signaling.CellMmWave}},
	{Time: t0, Kind: signaling.KindRandomAccess, RAReason: signaling.RAHandover, RAResult: signaling.RASuccess},
	{Time: t0, Kind: signaling.KindMACSlot, RBRatio: 0.95, Bytes: 12000, Serving: signaling.Cell{ID: "88"}},
}

func listen(t *testing.T, c *collector, opts ...ServerOption) (*Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sig.sock")
	s, err := Listen(path, c.sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestServerClientEvents(t *testing.T) {
	c := newCollector()
	s, path := listen(t, c)
	cl, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want []signaling.Event
	for _, e := range testEvents {
		if err := cl.Send(&e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if got := c.wait(t, len(want)); !reflect.DeepEqual(got, want) {
		t.Errorf("sink got\n%+v\nwant\n%+v", got, want)
	}
	st := s.Stats()
	if st.Connections != 1 || st.Events != len(want) || st.Errors != 0 || st.Busy != 0 {
		t.Errorf("stats %+v", st)
	}
	if err := cl.Send(&signaling.Event{Kind: signaling.KindUnknown}); err == nil {
		t.Error("client sent an unknown-kind event")
	}
}

func TestServerBadLinesAndBusy(t *testing.T) {
	c := newCollector()
	s, path := listen(t, c, WithMaxLine(1024), WithMaxConns(1))
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	replies := bufio.NewReader(conn)
	good := `{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover","result":"success"}`
	lines := []string{
		good,
		`{"t":"2023-02-16T22:44:59.997Z","kind":"ra","reason":"handover"}`, // line 2: error
		``,
		`{"t":"2023-02-16T22:44:59.997Z","kind":"gnss"}`, // skipped, no answer
		strings.Repeat("y", 5000),                        // line 5: too long
		`not json`,                                       // line 6
		good,
	}
	if _, err := conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, want := range []string{
		"error: 2: result: missing\n",
		"error: 5: json: line longer than 1024 bytes\n",
		"error: 6: json: ",
	} {
		got, err := replies.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, want) {
			t.Fatalf("reply %q (%v), want prefix %q", got, err, want)
		}
	}
	if got := c.wait(t, 2); len(got) != 2 || got[1].RAResult != signaling.RASuccess {
		t.Fatalf("events %+v", got)
	}

	// A second writer while the first is connected is refused (limit 1).
	second, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := bufio.NewReader(second).ReadString('\n')
	if got != "error: busy\n" {
		t.Errorf("second writer got %q (%v)", got, err)
	}
	second.Close()

	// The first is still served.
	conn.Write([]byte(good + "\n"))
	c.wait(t, 1)
	st := s.Stats()
	if st.Lines != 7 || st.Events != 3 || st.Errors != 3 || st.Busy != 1 || st.Skipped[`unknown kind "gnss"`] != 1 {
		t.Errorf("stats %+v", st)
	}

	// After the first hangs up, a new writer is accepted.
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cl, err := Dial(path)
		if err != nil {
			t.Fatal(err)
		}
		cl.Send(&testEvents[2])
		select {
		case <-c.ch:
			cl.Close()
			goto accepted
		case <-time.After(100 * time.Millisecond):
		}
		cl.Close()
		if time.Now().After(deadline) {
			t.Fatal("no second connection accepted after the first closed")
		}
	}
accepted:
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file still there: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestListenStaleAndLive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	// A stale socket: a listener whose file is left behind.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s, err := Listen(path, func(signaling.Event) {})
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer s.Close()
	if _, err := Listen(path, func(signaling.Event) {}); err == nil {
		t.Error("second Listen on a live socket succeeded")
	}
}

func TestServerCloseWithActiveWriter(t *testing.T) {
	c := newCollector()
	s, path := listen(t, c)
	cl, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Send(&testEvents[2])
	c.wait(t, 1)
	done := make(chan error)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs with a writer connected")
	}
}
