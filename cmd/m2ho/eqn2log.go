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

// eqn2LogEvery spaces the lines of --eqn2-log: Eqn 2 decides on every
// uplink ACK (tens of thousands a second at mmWave rates), and its inputs
// move on the scale of an RTT.
const eqn2LogEvery = 10 * time.Millisecond

// eqn2Header names the columns of --eqn2-log: times in microseconds,
// rates in bytes per second, windows in bytes (per flow).
const eqn2Header = "unix_ns\trate_Bps\tpipe_Bps\trtt_min_us\tsrtt_us\teqn_B\tcap_B\tqueue_B\tlimit_B\tshare\twait_us\tinflight_B\n"

// eqn2Log writes what Eqn 2 saw and set (m2ho.Eqn2Step), a line per
// eqn2LogEvery at most, for finding out why a carried window sat where
// it did. The controller calls trace under the engine's lock; flush runs
// after each tick outside it.
type eqn2Log struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	last time.Time
	line []byte
	err  error
}

func openEqn2Log(name string) (*eqn2Log, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	l := &eqn2Log{f: f, w: bufio.NewWriterSize(f, 64<<10), line: make([]byte, 0, 256)}
	if _, err := l.w.WriteString(eqn2Header); err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

func (l *eqn2Log) trace(now time.Time, _ *m2ho.Flow, s m2ho.Eqn2Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || now.Sub(l.last) < eqn2LogEvery {
		return
	}
	l.last = now
	b := strconv.AppendInt(l.line[:0], now.UnixNano(), 10)
	for _, v := range [...]int64{int64(s.Rate), int64(s.Pipe), s.RTTMin.Microseconds(), s.SRTT.Microseconds(),
		int64(s.Eqn), capInt(s.Cap), int64(s.Queue), int64(s.Limit), int64(s.Share), s.Wait.Microseconds(), int64(s.InFlight)} {
		b = append(b, '\t')
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, '\n')
	l.line = b
	_, l.err = l.w.Write(b)
}

// capInt is the cap as a count, -1 where there is none (no ŝ_max known).
func capInt(v float64) int64 {
	if !(v < 1<<62) {
		return -1
	}
	return int64(v)
}

func (l *eqn2Log) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
}

func (l *eqn2Log) Close() error {
	l.flush()
	err := l.f.Close()
	if l.err != nil {
		return fmt.Errorf("--eqn2-log: %w", l.err)
	}
	return err
}
