// Package sigio is the I/O side of package signaling: the live Unix-socket
// server and its client, and opening trace files. Package signaling itself
// (the event model, the JSON-lines codec, the XCAL reader over io.Reader)
// does no I/O of its own.
package sigio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/m2ho/m2ho/signaling"
)

// Server is the live signalling socket: a Unix stream socket that writers
// (a modem-diagnostics shim, the emulator, `m2ho feed`) feed with JSON
// lines. The protocol and the merge rule are in FORMAT.md: each connection
// has its own reader; events of all connections reach the sink one batch
// at a time, each connection's in its order, across connections in
// arrival order (the order in which their readers, a batch decoded, reach
// the sink). Nothing is answered for a good line; a bad one gets
// "error: <line>: <field>: <msg>\n" and the connection stays up; a writer
// beyond the connection limit gets "error: busy\n" and is closed.
type Server struct {
	path      string
	ln        *net.UnixListener
	sink      func(Batch)
	maxLine   int
	maxConns  int
	maxBatch  int
	newDecode func() func([]byte) (signaling.Event, error)

	mu     sync.Mutex
	stats  ServerStats
	conns  map[net.Conn]struct{}
	slots  []bool // slots[i]: a connection holds Batch.Slot i
	seq    uint64 // connections accepted, for Batch.Conn
	closed bool
	wg     sync.WaitGroup

	deliver sync.Mutex // held while the sink runs: one batch at a time
}

// Batch is what a batch sink gets: events one writer had sent, in its
// order, decoded from the lines its connection had buffered when its
// reader took them (at most WithMaxBatch). Events is reused for the
// connection's next batch: the sink must not keep it after it returns.
type Batch struct {
	// Conn numbers the writer's connection: 1 for the first the server
	// accepted, 2 for the next, never reused. Slot is the writer's place
	// among those connected, in [0, MaxConns): a slot is free again when
	// its writer hangs up, so a sink can keep per-writer state in an
	// array indexed by Slot and start it over when Conn changes.
	Conn   uint64
	Slot   int
	Events []signaling.Event
}

// ServerStats counts the server's work over all connections.
type ServerStats struct {
	signaling.Stats     // lines, events, skipped (unknown kinds), errors
	Connections     int // writers accepted
	Active          int // writers connected now
	Busy            int // connections refused because MaxConns writers were connected
}

// ServerOption configures Listen.
type ServerOption func(*Server)

// WithMaxLine sets the longest accepted line (default signaling.MaxLine,
// 64 KiB). It is also the size of each connection's read buffer.
func WithMaxLine(n int) ServerOption { return func(s *Server) { s.maxLine = n } }

// DefaultMaxConns is how many writers may be connected at once unless
// WithMaxConns says otherwise.
const DefaultMaxConns = 8

// DefaultMaxBatch bounds a batch unless WithMaxBatch says otherwise: 64
// MAC slots are 8 ms of an mmWave cell's, and a controller's work on them
// (~0.1-0.2 µs each) about as long as a packet batch's under the
// engine's lock, so the packet path never waits long behind a batch.
const DefaultMaxBatch = 64

// WithMaxBatch bounds the events of one Batch (default DefaultMaxBatch);
// 1 hands the sink one event at a time.
func WithMaxBatch(n int) ServerOption { return func(s *Server) { s.maxBatch = n } }

// WithMaxConns bounds the writers connected at once (default
// DefaultMaxConns); one more is answered "error: busy" and closed.
func WithMaxConns(n int) ServerOption { return func(s *Server) { s.maxConns = n } }

// replyTimeout bounds how long an error reply may block: a writer that
// never reads its socket must not stall its own feed for long (and cannot
// stall the others', whose readers are separate).
const replyTimeout = time.Second

// Listen creates the socket at path and serves it until Close. sink is
// called for every good event from one goroutine at a time; a slow sink
// slows the writers (their sockets apply back-pressure) rather than
// queueing without bound. A stale socket file left by a dead server is
// replaced; a live one is an error.
func Listen(path string, sink func(signaling.Event), opts ...ServerOption) (*Server, error) {
	return ListenBatch(path, func(b Batch) {
		for i := range b.Events {
			sink(b.Events[i])
		}
	}, opts...)
}

// ListenBatch is Listen with a sink that takes the events a writer had
// buffered together: a consumer that must take a lock per call (the
// engine's, which the packet path holds for its batches) takes it once
// for the lot, instead of once per event at a MAC slot's rate. A batch
// never waits for more input: it is what the connection's buffer held
// when the reader reached a line it had not received whole.
func ListenBatch(path string, sink func(Batch), opts ...ServerOption) (*Server, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("sigio: %s: a server is already listening", path)
		}
		os.Remove(path)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	s := &Server{path: path, ln: ln, sink: sink, maxLine: signaling.MaxLine, maxConns: DefaultMaxConns,
		conns: make(map[net.Conn]struct{})}
	for _, o := range opts {
		o(s)
	}
	if s.maxLine <= 0 {
		s.maxLine = signaling.MaxLine
	}
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConns
	}
	if s.maxBatch <= 0 {
		s.maxBatch = DefaultMaxBatch
	}
	s.slots = make([]bool, s.maxConns)
	if s.newDecode == nil {
		s.newDecode = func() func([]byte) (signaling.Event, error) {
			d := new(signaling.Decoder)
			return d.Decode
		}
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Path is the socket's file name.
func (s *Server) Path() string { return s.path }

// Stats returns a copy of the counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Stats = st.Stats.Clone()
	st.Active = len(s.conns)
	return st
}

// Close stops accepting, ends the connections, waits for the serving
// goroutines and removes the socket file.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			c.Close()
			return
		case len(s.conns) >= s.maxConns:
			s.stats.Busy++
			s.mu.Unlock()
			c.SetWriteDeadline(time.Now().Add(replyTimeout))
			io.WriteString(c, "error: busy\n")
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.stats.Connections++
		s.seq++
		w := writer{conn: s.seq}
		for s.slots[w.slot] {
			w.slot++ // a free one exists: fewer than maxConns are connected
		}
		s.slots[w.slot] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c, w)
	}
}

// writer names a connection for Batch.
type writer struct {
	conn uint64
	slot int
}

// serve reads one writer's lines until it hangs up. Its buffer is its
// own and bounded (maxLine); it waits only for its own socket and for its
// turn at the sink. It hands the sink what it decoded whenever the next
// line is not buffered whole (reading it would wait for the writer),
// before it answers a bad line, and every maxBatch events.
func (s *Server) serve(c net.Conn, w writer) {
	defer s.wg.Done()
	batch := Batch{Conn: w.conn, Slot: w.slot, Events: make([]signaling.Event, 0, s.maxBatch)}
	flush := func() {
		if len(batch.Events) == 0 {
			return
		}
		s.deliver.Lock()
		s.sink(batch)
		s.deliver.Unlock()
		clear(batch.Events) // drop the events' strings for the collector
		batch.Events = batch.Events[:0]
	}
	defer func() {
		flush() // the events before a hang-up or a read error
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.slots[w.slot] = false
		s.mu.Unlock()
	}()
	decode := s.newDecode()
	br := bufio.NewReaderSize(c, s.maxLine+2)
	lr := signaling.NewLineReader(br, s.maxLine)
	var reply []byte
	for {
		if len(batch.Events) > 0 && !lineBuffered(br) {
			flush()
		}
		line, err := lr.Next()
		switch {
		case err == signaling.ErrLineTooLong:
			err = &signaling.ParseError{Field: "json", Msg: "line longer than " + strconv.Itoa(s.maxLine) + " bytes"}
		case err != nil:
			return
		case signaling.IsBlank(line):
			continue
		}
		var e signaling.Event
		if err == nil {
			e, err = decode(line)
		}
		s.mu.Lock()
		s.stats.CountLine(&e, err)
		s.mu.Unlock()
		if err == nil {
			// The batch may outlive the buffer's contents: an Event owns
			// its strings (the decoder interns cell IDs), none points into
			// the line.
			if batch.Events = append(batch.Events, e); len(batch.Events) >= s.maxBatch {
				flush()
			}
			continue
		}
		if signaling.IsUnknownKind(err) {
			continue
		}
		flush() // the reply may block; what came before it is not held up
		pe := err.(*signaling.ParseError)
		pe.Line = lr.Line()
		reply = append(reply[:0], "error: "...)
		reply = append(reply, pe.Error()...)
		reply = append(reply, '\n')
		c.SetWriteDeadline(time.Now().Add(replyTimeout))
		c.Write(reply) // a writer that does not read loses its replies, not its feed
	}
}

// lineBuffered reports whether br holds a whole line, which reading
// takes without waiting for the socket.
func lineBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := br.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// Client writes events to a Server's socket.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	buf  []byte
}

// Dial connects to the socket at path. A server with its connection limit
// reached answers "error: busy" and closes, which Send then reports as a
// write error.
func Dial(path string) (*Client, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	return &Client{conn: c, buf: make([]byte, 0, 256)}, nil
}

// Send writes e as one line; see signaling.AppendJSON for the events it
// refuses. It is safe for concurrent use.
func (c *Client) Send(e *signaling.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := signaling.AppendJSON(c.buf[:0], e)
	if err != nil {
		return err
	}
	c.buf = b
	_, err = c.conn.Write(b)
	return err
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
