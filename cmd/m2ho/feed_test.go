package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/signaling/sigio"
)

// fakeClock is virtual time: Sleep advances it at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
}

// stampWriter records the virtual time of each write (one line per event).
type stampWriter struct {
	clock *fakeClock
	w     io.Writer
	at    []time.Time
}

func (s *stampWriter) Write(p []byte) (int, error) {
	s.at = append(s.at, s.clock.Now())
	return s.w.Write(p)
}

// collectSink gathers the server's events.
type collectSink struct {
	mu     sync.Mutex
	events []signaling.Event
}

func (c *collectSink) sink(e signaling.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

func (c *collectSink) waitFor(t *testing.T, n int) []signaling.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.mu.Lock()
		got := len(c.events)
		c.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events arrived", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]signaling.Event(nil), c.events...)
}

var feedT0 = time.Date(2026, 1, 15, 9, 0, 7, 0, time.UTC)

// feedTrace is a JSON-lines trace with gaps of 120 ms, 80 ms, 0, 800 ms,
// an event stamped before its predecessor, then 2 s.
func feedTrace(t *testing.T) (path string, events []signaling.Event) {
	offsets := []time.Duration{0, 120, 200, 200, 1000, 900, 3000}
	var buf bytes.Buffer
	w := signaling.NewWriter(&buf)
	for i, ms := range offsets {
		e := signaling.Event{Time: feedT0.Add(ms * time.Millisecond), Kind: signaling.KindMACSlot, RBRatio: 0.5, Bytes: i, Serving: signaling.Cell{ID: "88"}}
		if err := w.Write(&e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	path = filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, events
}

func listenFeed(t *testing.T, opts ...sigio.ServerOption) (*sigio.Server, *collectSink) {
	t.Helper()
	c := &collectSink{}
	s, err := sigio.Listen(filepath.Join(t.TempDir(), "sig.sock"), c.sink, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

// The feeder paces events by the trace's times scaled by --speed, on
// virtual time, and they arrive at the socket in order and unchanged.
func TestFeederPacing(t *testing.T) {
	path, want := feedTrace(t)
	for _, tc := range []struct {
		speed float64
		// send times after the first event, ms of virtual time
		at []time.Duration
	}{
		{1, []time.Duration{0, 120, 200, 200, 1000, 1000, 3000}},
		{2, []time.Duration{0, 60, 100, 100, 500, 500, 1500}},
		{0.5, []time.Duration{0, 240, 400, 400, 2000, 2000, 6000}},
		{0, []time.Duration{0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(fmt.Sprint("speed=", tc.speed), func(t *testing.T) {
			s, sink := listenFeed(t)
			conn, err := net.Dial("unix", s.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			start := clock.now
			sw := &stampWriter{clock: clock, w: conn}
			var errw bytes.Buffer
			fd := &traceFeeder{name: path, w: sw, errw: &errw, progress: func() float64 { return -1 },
				opts: feedOptions{speed: tc.speed, clock: clock, maxErrors: 10, progressEvery: 500 * time.Millisecond}}
			f, _ := os.Open(path)
			defer f.Close()
			src, _ := signaling.NewReader(f, path, signaling.FormatAuto)
			res, err := fd.run(src)
			if err != nil {
				t.Fatal(err)
			}
			if res.sent != len(want) || res.bad != 0 || res.span != 3*time.Second {
				t.Errorf("result %+v", res)
			}
			for i, at := range sw.at {
				if got := at.Sub(start); got != tc.at[i]*time.Millisecond {
					t.Errorf("event %d sent at +%v, want +%v", i, got, tc.at[i]*time.Millisecond)
				}
			}
			for _, d := range clock.sleeps {
				if d > 500*time.Millisecond {
					t.Errorf("slept %v in one piece, more than the progress interval", d)
				}
			}
			// The events' own times go at the replay's pace (unchanged
			// at max speed), so a slowed trace does not look late.
			scaled := slices.Clone(want)
			for i := range scaled {
				if tc.speed > 0 {
					scaled[i].Time = want[0].Time.Add(time.Duration(float64(want[i].Time.Sub(want[0].Time)) / tc.speed))
				}
			}
			if got := sink.waitFor(t, len(want)); !reflect.DeepEqual(got, scaled) {
				t.Errorf("events arrived\n%+v\nwant\n%+v", got, scaled)
			}
			if tc.speed == 1 && strings.Count(errw.String(), "events sent, trace time") < 4 {
				t.Errorf("too few progress lines over 3 s at 500 ms:\n%s", errw.String())
			}
		})
	}
}

func TestFeedCommand(t *testing.T) {
	s, sink := listenFeed(t)
	path, want := feedTrace(t)
	// A malformed line and a line of unknown kind in the middle.
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	bad := append([]string{}, lines[:2]...)
	bad = append(bad, `{"t":"2026-01-15T09:00:07.15Z","kind":"mac","rb":2,"bytes":1}`+"\n", `{"t":"2026-01-15T09:00:07.15Z","kind":"gnss"}`+"\n")
	bad = append(bad, lines[2:]...)
	badPath := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(badPath, []byte(strings.Join(bad, "")), 0o644)

	_, stderr, code := runCLI(t, "feed", "--speed", "max", "--socket", s.Path(), path)
	if code != 0 || !strings.Contains(stderr, "7 events sent") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if got := sink.waitFor(t, len(want)); !reflect.DeepEqual(got, want) {
		t.Errorf("events arrived\n%+v\nwant\n%+v", got, want)
	}
	_, stderr, code = runCLI(t, "feed", "--speed", "0", "--socket", s.Path(), badPath)
	if code != 1 || !strings.Contains(stderr, badPath+":3: rb: 2 outside [0, 1]") || !strings.Contains(stderr, "1 malformed lines skipped") || !strings.Contains(stderr, "1 lines not modelled skipped") {
		t.Errorf("malformed line: exit %d, stderr:\n%s", code, stderr)
	}
	sink.waitFor(t, 2*len(want))

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"feed"}, 2, "exactly one FILE"},
		{[]string{"feed", "a", "b"}, 2, "exactly one FILE"},
		{[]string{"feed", "--speed", "-1", path}, 2, `--speed "-1"`},
		{[]string{"feed", "--speed", "fast", path}, 2, `--speed "fast"`},
		{[]string{"feed", "--speed", "Inf", path}, 2, `--speed "Inf"`},
		{[]string{"feed", "--format", "csv", path}, 2, `--format "csv"`},
		{[]string{"feed", "--progress", "0s", path}, 2, "--progress"},
		{[]string{"feed", "--socket", s.Path(), filepath.Join(t.TempDir(), "missing.jsonl")}, 2, "missing.jsonl"},
		{[]string{"feed", "--socket", filepath.Join(t.TempDir(), "none.sock"), path}, 2, "is m2ho run listening there?"},
	} {
		_, stderr, code := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
	out, _, code := runCLI(t, "feed", "--help")
	for _, want := range []string{"--speed 2", "twice as fast", "--speed max", "FILE:LINE", "merged in arrival order", "Examples:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

// The wall clock: the bundled example drive (about 100 s of trace) at
// 1000 times real time; every event arrives, in order. No timing is
// asserted.
func TestFeedExampleDriveScaled(t *testing.T) {
	path := filepath.Join(repoRoot(t), "configs", "example-drive.jsonl")
	want, _, errs := sigio.ReadAll(path, signaling.FormatAuto)
	if len(errs) > 0 || len(want) == 0 {
		t.Fatalf("%s: %d events, %v", path, len(want), errs)
	}
	s, sink := listenFeed(t)
	_, stderr, code := runCLI(t, "feed", "--speed", "1000", "--socket", s.Path(), path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Their own times at the replay's pace (1000 times faster).
	for i := range want {
		if !want[i].Time.IsZero() {
			want[i].Time = want[0].Time.Add(time.Duration(float64(want[i].Time.Sub(want[0].Time)) / 1000))
		}
	}
	if got := sink.waitFor(t, len(want)); !reflect.DeepEqual(got, want) {
		t.Errorf("events arrived\n%+v\nwant\n%+v", got, want)
	}
}

// A proxy with no writer slot left: feed says so and exits 1.
func TestFeedBusy(t *testing.T) {
	s, _ := listenFeed(t, sigio.WithMaxConns(1))
	hog, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Active != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("first writer not accepted")
		}
	}
	path, _ := feedTrace(t)
	_, stderr, code := runCLI(t, "feed", "--speed", "max", "--socket", s.Path(), path)
	if code != 1 || !strings.Contains(stderr, "busy") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// An XCAL export feeds the same events as the reader reads, inferred
// handovers included (the JSON-lines format carries them): the file is one
// with an inferred handover among its first events.
func TestFeedXCAL(t *testing.T) {
	path := os.Getenv("M2HO_SHARED_DATA")
	if path == "" {
		path = filepath.Join(repoRoot(t), "..", "shared", "data")
	}
	var csvs []string
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".csv") && !d.IsDir() {
			csvs = append(csvs, p)
		}
		return nil
	})
	if len(csvs) == 0 {
		t.Skipf("no XCAL export under %s; set M2HO_SHARED_DATA", path)
	}
	var csv string
	var want []signaling.Event
	for _, p := range csvs {
		ev, _, _ := sigio.ReadAll(p, signaling.FormatXCAL)
		if len(ev) > 20000 {
			ev = ev[:20000]
		}
		if slices.ContainsFunc(ev, func(e signaling.Event) bool { return e.Inferred }) {
			csv, want = p, ev
			break
		}
	}
	if csv == "" {
		t.Fatalf("no XCAL file under %s has an inferred handover in its first 20000 events", path)
	}
	t.Logf("%s: %d events", csv, len(want))
	s, sink := listenFeed(t)
	_, stderr, code := runCLI(t, "feed", "--speed", "max", "--format", "xcal", "--socket", s.Path(), csv)
	if code > 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := sink.waitFor(t, len(want))
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: event %d arrived as\n%+v\nwant\n%+v", csv, i, got[i], want[i])
		}
	}
}

// The proxy's answers: a refusal and a rejected line are told apart.
func TestFeedReadReplies(t *testing.T) {
	var errw bytes.Buffer
	f := &traceFeeder{name: "x.jsonl", errw: &errw, replies: make(chan struct{})}
	f.readReplies(strings.NewReader("error: 3: t: missing\n\nerror: busy\n"))
	if f.rejected() != 1 || f.refusedBy() == nil || !strings.Contains(f.refusedBy().Error(), "busy") {
		t.Errorf("rejected %d, refused %v", f.rejected(), f.refusedBy())
	}
	if !strings.Contains(errw.String(), `x.jsonl: the proxy answered "error: 3: t: missing"`) {
		t.Errorf("stderr %q", errw.String())
	}
	select {
	case <-f.replies:
	default:
		t.Error("replies not closed at the end of the answers")
	}
	// A write after the refusal reports the refusal.
	if err := f.send(&signaling.Event{Time: feedT0, Kind: signaling.KindRandomAccess}); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("send after refusal: %v", err)
	}
}
