package emu

import (
	"bufio"
	"io"
	"strconv"
	"time"
)

// MMLog writes one direction of the link in mahimahi's mm-link log format
// (frontend/link_queue.cc), so mahimahi's scripts (mm-throughput-graph,
// mm-delay-graph) read it: a header with `# base timestamp: 0`, then
// millisecond lines `t + bytes` (arrival), `t - bytes delay` (delivery),
// `t d packets bytes` (drop) and `t # bytes` (delivery capacity). Times are
// milliseconds from the model's start. Writing allocates nothing; call
// Flush at the end.
type MMLog struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewMMLog starts a log on w; name and source go in the header line.
func NewMMLog(w io.Writer, name, source string) *MMLog {
	l := &MMLog{w: bufio.NewWriterSize(w, 64<<10), buf: make([]byte, 0, 64)}
	_, l.err = l.w.WriteString("# mahimahi mm-link (" + name + ") [" + source + "] (m2ho emu)\n# base timestamp: 0\n")
	return l
}

func ms(t time.Duration) int64 { return int64(t / time.Millisecond) }

func (l *MMLog) line(t time.Duration, kind byte, a int64, b int64, hasB bool) {
	if l.err != nil {
		return
	}
	l.buf = strconv.AppendInt(l.buf[:0], ms(t), 10)
	l.buf = append(l.buf, ' ', kind, ' ')
	l.buf = strconv.AppendInt(l.buf, a, 10)
	if hasB {
		l.buf = append(l.buf, ' ')
		l.buf = strconv.AppendInt(l.buf, b, 10)
	}
	l.buf = append(l.buf, '\n')
	_, l.err = l.w.Write(l.buf)
}

// Arrival logs a packet entering the link.
func (l *MMLog) Arrival(t time.Duration, size int) { l.line(t, '+', int64(size), 0, false) }

// Departure logs a delivery and its delay through the link.
func (l *MMLog) Departure(t time.Duration, size int64, delay time.Duration) {
	l.line(t, '-', size, ms(delay), true)
}

// Drop logs packets dropped at t.
func (l *MMLog) Drop(t time.Duration, pkts int, bytes int64) {
	l.line(t, 'd', int64(pkts), bytes, true)
}

// Capacity logs the bytes the link could deliver in the millisecond at t.
func (l *MMLog) Capacity(t time.Duration, bytes int64) { l.line(t, '#', bytes, 0, false) }

// Flush writes buffered lines and returns the first write error.
func (l *MMLog) Flush() error {
	if l.err != nil {
		return l.err
	}
	return l.w.Flush()
}
