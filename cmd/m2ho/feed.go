package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/m2ho/m2ho/signaling"
)

type feedFlags struct {
	socket    string
	speed     string
	format    string
	maxErrors int
	progress  time.Duration
}

func newFeedCmd(g *globalFlags) *cobra.Command {
	f := &feedFlags{socket: defaultRunConfig().Socket}
	cmd := &cobra.Command{
		Use:   "feed [flags] FILE",
		Short: "Replay a signalling trace into a running proxy's socket, at real or scaled time",
		Long: `feed sends the events of a signalling trace (an XCAL CSV export or m2ho's
JSON lines, signaling/FORMAT.md) to the signalling socket of a running
proxy (m2ho run --socket) or of anything else that listens there, one JSON
line per event, keeping the trace's own timing:

  --speed 1     real time: an event 120 ms after the previous one is sent
                120 ms after it (the default)
  --speed 2     twice as fast (60 ms); 0.5 is half as fast
  --speed max   as fast as the socket takes them (also --speed 0)

The clock starts at the first event; an event stamped earlier than the one
before it is sent at once. The proxy stamps events with their arrival time,
so at --speed 1 the predictor sees the trace's spacing; at other speeds it
sees the scaled one. At other speeds than 1 the events' own timestamps are
scaled the same way (from the first event's), so that the proxy's check
for late signalling (--signal-stale) and its MAC slot timing see the replay
as it is sent; at --speed max they are sent unchanged.

The socket takes several writers at once (the modem shim and feed, say):
events of all writers are merged in arrival order, each writer's in its own
order. A proxy with all its writer slots taken answers "busy" and feed stops
with that error.

Malformed lines are reported as FILE:LINE: field: message (the first
--max-errors of them; all are counted) and skipped; lines of message kinds
the reader does not model are skipped silently. On long traces a progress
line goes to stderr every --progress, and a summary at the end. The exit
code is 0 when every line was read and sent, 1 when lines were malformed or
the proxy refused the connection or went away, 2 on bad usage (a bad flag,
or a FILE or --socket that cannot be opened).

Examples:
  m2ho run --config configs/phone.yaml &
  m2ho feed configs/example-drive.jsonl
  m2ho feed --speed max --socket /tmp/sig.sock drive.csv`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("feed needs exactly one FILE (XCAL CSV or JSON lines), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			speed, err := parseSpeed(f.speed)
			if err != nil {
				return err
			}
			format, ok := signaling.ParseFormat(f.format)
			if !ok {
				return fmt.Errorf("--format %q: want auto, json or xcal", f.format)
			}
			if f.progress <= 0 {
				return fmt.Errorf("--progress %v: must be positive", f.progress)
			}
			if f.maxErrors < 0 {
				return fmt.Errorf("--max-errors %d: must not be negative", f.maxErrors)
			}
			return runFeed(cmd.ErrOrStderr(), args[0], f.socket, format, feedOptions{
				speed: speed, clock: wallClock{}, maxErrors: f.maxErrors, progressEvery: f.progress,
			})
		},
	}
	cmd.Flags().StringVar(&f.socket, "socket", f.socket, "the proxy's signalling socket (m2ho run --socket)")
	cmd.Flags().StringVar(&f.speed, "speed", "1", "time scale: 1 real time, 2 twice as fast, 0.5 half, 0 or max as fast as possible")
	cmd.Flags().StringVar(&f.format, "format", "auto", "input format: auto, xcal or json")
	cmd.Flags().IntVar(&f.maxErrors, "max-errors", 10, "malformed lines to print (all are counted)")
	cmd.Flags().DurationVar(&f.progress, "progress", 5*time.Second, "interval between progress lines on stderr")
	return cmd
}

// parseSpeed reads --speed: a finite factor > 0, or 0 / "max" (returned
// as 0) for as fast as possible.
func parseSpeed(s string) (float64, error) {
	if strings.EqualFold(s, "max") {
		return 0, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("--speed %q: want a factor > 0 (1 real time, 2 twice as fast, 0.5 half) or 0 or max (as fast as possible)", s)
	}
	return v, nil
}

// feedClock is the traceFeeder's time: the wall clock, or a fake in tests.
type feedClock interface {
	Now() time.Time
	Sleep(time.Duration)
}

type wallClock struct{}

func (wallClock) Now() time.Time        { return time.Now() }
func (wallClock) Sleep(d time.Duration) { time.Sleep(d) }

type feedOptions struct {
	speed         float64 // 0: as fast as possible
	clock         feedClock
	maxErrors     int
	progressEvery time.Duration
}

// runFeed opens the trace and the socket and feeds one into the other.
func runFeed(errw io.Writer, path, socket string, format signaling.Format, o feedOptions) error {
	errw = &lockedWriter{w: errw} // the reply reader writes too
	file, err := os.Open(path)
	if err != nil {
		return err // "open PATH: ..." names the file
	}
	defer file.Close()
	var size int64
	if fi, err := file.Stat(); err == nil {
		size = fi.Size()
	}
	cr := &countingReader{r: file}
	src, err := signaling.NewReader(cr, path, format)
	if err != nil {
		return err
	}
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("--socket %s: %w (is m2ho run listening there?)", socket, err)
	}
	defer conn.Close()
	fd := &traceFeeder{
		name: path, opts: o, w: conn, errw: errw,
		progress: func() float64 {
			if size <= 0 {
				return -1
			}
			return float64(cr.n) / float64(size)
		},
	}
	fd.replies = make(chan struct{})
	go fd.readReplies(conn)
	res, err := fd.run(src)
	if err != nil {
		fmt.Fprintf(errw, "m2ho feed: %s: %v\n", path, err)
		return exitError{code: 1}
	}
	// Give the proxy's answers to the last lines a moment to arrive.
	conn.(*net.UnixConn).CloseWrite()
	fd.waitReplies(time.Second)
	if busy := fd.refusedBy(); busy != nil {
		fmt.Fprintf(errw, "m2ho feed: %s: %v\n", socket, busy)
		return exitError{code: 1}
	}
	fmt.Fprintf(errw, "m2ho feed: %s: %s\n", path, res)
	if res.bad > 0 || res.refused > 0 || fd.rejected() > 0 {
		return exitError{code: 1}
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// traceFeeder sends a Reader's events to w at the trace's pace.
type traceFeeder struct {
	name     string
	opts     feedOptions
	w        io.Writer
	errw     io.Writer
	progress func() float64 // fraction of the input read, < 0 unknown

	mu       sync.Mutex
	busy     error         // the proxy refused the connection
	nRejects int           // lines the proxy answered with an error
	replies  chan struct{} // closed when readReplies ends
	buf      []byte
}

type feedResult struct {
	sent, bad, refused int
	span               time.Duration // trace time from the first event to the last sent
	took               time.Duration // traceFeeder's clock
	stats              signaling.Stats
}

func (r feedResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d events sent in %v (trace span %v)", r.sent, r.took.Round(time.Millisecond), r.span.Round(time.Millisecond))
	if r.bad > 0 {
		fmt.Fprintf(&b, ", %d malformed lines skipped", r.bad)
	}
	if n := r.stats.SkippedTotal(); n > 0 {
		fmt.Fprintf(&b, ", %d lines not modelled skipped", n)
	}
	if r.refused > 0 {
		fmt.Fprintf(&b, ", %d events not expressible as JSON lines skipped", r.refused)
	}
	return b.String()
}

// run sends every event of src. Malformed lines are reported and counted;
// the error is a read error, a write error or the proxy's refusal.
func (f *traceFeeder) run(src signaling.Reader) (feedResult, error) {
	var (
		res          feedResult
		t0, w0, last time.Time
	)
	start := f.opts.clock.Now()
	lastProgress := start
	report := func(now time.Time) {
		if now.Sub(lastProgress) < f.opts.progressEvery {
			return
		}
		lastProgress = now
		msg := fmt.Sprintf("m2ho feed: %s: %d events sent, trace time +%v", f.name, res.sent, last.Sub(t0).Round(time.Millisecond))
		if p := f.progress(); p >= 0 {
			msg += fmt.Sprintf(", about %.0f%% of the file read", 100*min(p, 1))
		}
		fmt.Fprintln(f.errw, msg)
	}
	for {
		e, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *signaling.ParseError
			if !errors.As(err, &pe) {
				return res, err
			}
			res.bad++
			if res.bad <= f.opts.maxErrors {
				fmt.Fprintf(f.errw, "m2ho feed: %v\n", pe)
			}
			continue
		}
		if res.sent == 0 && res.refused == 0 {
			t0, w0 = e.Time, f.opts.clock.Now()
		}
		if f.opts.speed > 0 {
			due := w0.Add(time.Duration(float64(e.Time.Sub(t0)) / f.opts.speed))
			for {
				now := f.opts.clock.Now()
				wait := due.Sub(now)
				if wait <= 0 {
					break
				}
				// Sleep in pieces so that a long gap still shows progress.
				f.opts.clock.Sleep(min(wait, f.opts.progressEvery))
				report(f.opts.clock.Now())
			}
		}
		at := e.Time
		if f.opts.speed > 0 && f.opts.speed != 1 && !e.Time.IsZero() && !t0.IsZero() {
			// The event's own timestamp goes at the replay's pace too: a
			// proxy judges lateness from it (--signal-stale) and times
			// MAC slots by it, so a trace slowed down would otherwise
			// look later with every event.
			e.Time = t0.Add(time.Duration(float64(e.Time.Sub(t0)) / f.opts.speed))
		}
		if err := f.send(&e); err != nil {
			var we writeError
			if !errors.As(err, &we) {
				res.refused++
				fmt.Fprintf(f.errw, "m2ho feed: %s: event %d (%v at %v): %v\n", f.name, res.sent+res.refused, e.Kind, e.Time.Format(time.RFC3339Nano), err)
				continue
			}
			return res, err
		}
		res.sent++
		last = at
		res.span = last.Sub(t0)
		report(f.opts.clock.Now())
	}
	res.took = f.opts.clock.Now().Sub(start)
	res.stats = src.Stats()
	return res, nil
}

// writeError marks a failure of the socket, as against an event the
// writer refuses.
type writeError struct{ error }

func (e writeError) Unwrap() error { return e.error }

func (f *traceFeeder) send(e *signaling.Event) error {
	f.mu.Lock()
	busy := f.busy
	f.mu.Unlock()
	if busy != nil {
		return writeError{busy}
	}
	b, err := signaling.AppendJSON(f.buf[:0], e)
	if err != nil {
		return err
	}
	f.buf = b
	if _, err := f.w.Write(b); err != nil {
		// A refusal ("error: busy", then the server hangs up) can fail
		// the write before the answer is read: read it first.
		if f.replies != nil {
			f.waitReplies(time.Second)
		}
		f.mu.Lock()
		if f.busy != nil {
			err = f.busy
		}
		f.mu.Unlock()
		return writeError{fmt.Errorf("%w (did the proxy exit?)", err)}
	}
	return nil
}

// readReplies reads the proxy's answers: "error: busy" (refused) or
// "error: N: field: msg" for the N-th line sent, which should not happen
// with lines this writer wrote; both are reported.
func (f *traceFeeder) readReplies(r io.Reader) {
	defer close(f.replies)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			f.mu.Lock()
			if line == "error: busy" {
				f.busy = errors.New("the proxy refused the connection: it has as many signalling writers as it takes (error: busy)")
			} else {
				f.nRejects++
				fmt.Fprintf(f.errw, "m2ho feed: %s: the proxy answered %q (its line number counts the events sent)\n", f.name, line)
			}
			f.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (f *traceFeeder) waitReplies(d time.Duration) {
	select {
	case <-f.replies:
	case <-time.After(d):
	}
}

func (f *traceFeeder) rejected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nRejects
}

func (f *traceFeeder) refusedBy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.busy
}
