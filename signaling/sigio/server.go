// Package sigio is the I/O side of package signaling: the live Unix-socket
// server and its client, and opening trace files. Package signaling itself
// (the event model, the JSON-lines codec, the XCAL reader over io.Reader)
// does no I/O of its own.
package sigio

import (
	"bufio"
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
// has its own reader; events of all connections reach the sink one at a
// time, each connection's in its order, across connections in arrival
// order (the order in which their readers, a line decoded, reach the sink). Nothing is answered for a good line; a bad one
// gets "error: <line>: <field>: <msg>\n" and the connection stays up; a
// writer beyond the connection limit gets "error: busy\n" and is closed.
type Server struct {
	path      string
	ln        *net.UnixListener
	sink      func(signaling.Event)
	maxLine   int
	maxConns  int
	newDecode func() func([]byte) (signaling.Event, error)

	mu     sync.Mutex
	stats  ServerStats
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	deliver sync.Mutex // held while the sink runs: one event at a time
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
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve reads one writer's lines until it hangs up. Its buffer is its
// own and bounded (maxLine); it waits only for its own socket and for its
// turn at the sink.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	decode := s.newDecode()
	lr := signaling.NewLineReader(bufio.NewReaderSize(c, s.maxLine+2), s.maxLine)
	var reply []byte
	for {
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
			s.deliver.Lock()
			s.sink(e)
			s.deliver.Unlock()
			continue
		}
		if signaling.IsUnknownKind(err) {
			continue
		}
		pe := err.(*signaling.ParseError)
		pe.Line = lr.Line()
		reply = append(reply[:0], "error: "...)
		reply = append(reply, pe.Error()...)
		reply = append(reply, '\n')
		c.SetWriteDeadline(time.Now().Add(replyTimeout))
		c.Write(reply) // a writer that does not read loses its replies, not its feed
	}
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
