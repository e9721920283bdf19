package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/m2ho/m2ho/m2ho"
)

// tsvLog is a diagnostic log of tab-separated lines (--eqn2-log,
// --smax-log): the controller writes lines under the engine's lock into a
// buffer, flush runs after each tick outside it. The first write error
// stops the log and is reported at Close.
type tsvLog struct {
	flag string // the flag that named the file, for errors
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	line []byte
	err  error
}

func openTSVLog(flag, name, header string) (*tsvLog, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &tsvLog{flag: flag, f: f, w: bufio.NewWriterSize(f, 64<<10), line: make([]byte, 0, 256)}
	if _, err := l.w.WriteString(header); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// write appends one line, made by fill from the reused buffer. The caller
// holds mu.
func (l *tsvLog) write(fill func(b []byte) []byte) {
	if l.err != nil {
		return
	}
	l.line = append(fill(l.line[:0]), '\n')
	_, l.err = l.w.Write(l.line)
}

func (l *tsvLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
}

func (l *tsvLog) Close() error {
	l.flush()
	err := l.f.Close()
	if l.err != nil {
		return fmt.Errorf("%s: %w", l.flag, l.err)
	}
	return err
}

// appendField appends a text field from the signalling (a cell ID):
// control characters, which would break the line or its columns, become
// '?'.
func appendField(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			c = '?'
		}
		b = append(b, c)
	}
	return b
}

// appendInts appends each value after a tab.
func appendInts(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = append(b, '\t')
		b = strconv.AppendInt(b, v, 10)
	}
	return b
}

// eqn2LogEvery spaces the lines of --eqn2-log: Eqn 2 decides on every
// uplink ACK (tens of thousands a second at mmWave rates), and its inputs
// move on the scale of an RTT.
const eqn2LogEvery = 10 * time.Millisecond

// eqn2Header names the columns of --eqn2-log: times in microseconds,
// rates in bytes per second, windows in bytes (per flow).
const eqn2Header = "unix_ns\trate_Bps\tpipe_Bps\trtt_min_us\tsrtt_us\teqn_B\tcap_B\tbound_B\tqueue_B\tlimit_B\tshare\twait_us\tinflight_B\n"

// eqn2Log writes what Eqn 2 saw and set (m2ho.Eqn2Step), a line per
// eqn2LogEvery at most, for finding out why a carried window sat where
// it did.
type eqn2Log struct {
	*tsvLog
	last time.Time
	step m2ho.Eqn2Step // the line's step: fill reads it (no closure per call)
	fill func([]byte) []byte
}

func openEqn2Log(name string) (*eqn2Log, error) {
	t, err := openTSVLog("--eqn2-log", name, eqn2Header)
	if err != nil {
		return nil, err
	}
	l := &eqn2Log{tsvLog: t}
	l.fill = func(b []byte) []byte {
		s := &l.step
		b = strconv.AppendInt(b, l.last.UnixNano(), 10)
		return appendInts(b, int64(s.Rate), int64(s.Pipe), s.RTTMin.Microseconds(), s.SRTT.Microseconds(),
			int64(s.Eqn), capInt(s.Cap), capInt(s.Bound), int64(s.Queue), int64(s.Limit), int64(s.Share), s.Wait.Microseconds(), int64(s.InFlight))
	}
	return l, nil
}

func (l *eqn2Log) trace(now time.Time, _ *m2ho.Flow, s m2ho.Eqn2Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) < eqn2LogEvery {
		return
	}
	l.last, l.step = now, s
	l.write(l.fill)
}

// capInt is a cap or bound as a count, -1 where there is none (no ŝ_max
// known, no in-flight bound).
func capInt(v float64) int64 {
	if !(v < 1<<62) {
		return -1
	}
	return int64(v)
}

// smaxHeader names the columns of --smax-log: one line per rise of a
// cell's ŝ_max (m2ho.SMaxStep), times in microseconds, counts in bytes.
const smaxHeader = "unix_ns\tcell\ttype\tsmax_B\twait_us\treceived_B\tserved_B\tbusy_us\traw_B\n"

// smaxLog writes each rise of a cell's ŝ_max with the sample that made
// it (m2ho.Config.SMaxTrace), so that an estimate above a buffer can be
// traced to its moment and inputs. Rises are few: a line each.
type smaxLog struct {
	*tsvLog
	step m2ho.SMaxStep
	fill func([]byte) []byte
}

func openSMaxLog(name string) (*smaxLog, error) {
	t, err := openTSVLog("--smax-log", name, smaxHeader)
	if err != nil {
		return nil, err
	}
	l := &smaxLog{tsvLog: t}
	l.fill = func(b []byte) []byte {
		s := &l.step
		b = strconv.AppendInt(b, s.SampleAt.UnixNano(), 10)
		b = append(b, '\t')
		b = appendField(b, s.Cell.ID)
		b = append(b, '\t')
		b = append(b, s.Cell.Type.String()...)
		return appendInts(b, int64(s.SMax), s.Wait.Microseconds(), s.Received, s.Served, s.Busy.Microseconds(), s.Raw)
	}
	return l, nil
}

func (l *smaxLog) trace(s m2ho.SMaxStep) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.step = s
	l.write(l.fill)
}
