// Package emu is the pure link model of m2ho's user-space 5G emulator: a
// serving cell with a base-station buffer and burst scheduling, link-layer
// retransmissions behind a reordering buffer, and handovers that reproduce
// the M2HO paper's findings (MobiCom'24 §3.3): the reordering flush on the
// handover command (Finding 2), the target cell's buffer overflow during the
// interruption (Finding 3), and the 27 ms hard interruption itself
// (Finding 1). It runs on virtual time: every call takes `now`, and the
// model returns deliveries and signalling events. It does no I/O of its
// own (files it refers to are opened through LoadOptions.Open); the thin
// real-time driver in bench/emu/driver moves the packets between TUN
// devices and writes the output files.
package emu

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Capacity is how many bytes a cell can deliver to the UE over time. Times
// are offsets from the start of the run, so every source (a trace, a
// measured log, a constant) shares one timeline.
type Capacity interface {
	// Bytes is the number of bytes deliverable in [from, to). It is
	// additive: Bytes(a,b)+Bytes(b,c) == Bytes(a,c), so slot-by-slot
	// service never gains or loses a byte to rounding.
	Bytes(from, to time.Duration) int64
}

// Constant is a fixed-rate capacity.
type Constant struct{ BitsPerSecond float64 }

// Mbps returns a Constant capacity of the given megabits per second.
func Mbps(v float64) Constant { return Constant{BitsPerSecond: v * 1e6} }

func (c Constant) cum(t time.Duration) int64 {
	if t <= 0 || !(c.BitsPerSecond > 0) {
		return 0
	}
	if bps := c.BitsPerSecond; bps == math.Trunc(bps) && bps < 1<<62 {
		// exact: floor(bps·ns / 8e9) in 128 bits, so 12 Mbps is exactly
		// 1500 bytes in every millisecond however long the run.
		hi, lo := bits.Mul64(uint64(bps), uint64(t))
		if hi < 8e9 { // else the quotient would not fit 64 bits
			q, _ := bits.Div64(hi, lo, 8e9)
			if q < 1<<63 {
				return int64(q)
			}
		}
	}
	return int64(math.Floor(c.BitsPerSecond / 8 * t.Seconds()))
}

// Bytes implements Capacity.
func (c Constant) Bytes(from, to time.Duration) int64 { return c.cum(to) - c.cum(from) }

// Series is a piecewise-constant rate that repeats with period Ends[len-1]:
// segment i spans [Ends[i-1], Ends[i]) (Ends[-1] = 0) and carries Bytes[i]
// spread evenly over it. iperf3 intervals and `seconds<TAB>Mbps` traces
// become Series.
type Series struct {
	ends  []time.Duration
	cumB  []int64 // cumB[i] = bytes delivered in [0, ends[i])
	total int64
}

// NewSeries builds a Series from segment end times (strictly increasing,
// first > 0) and the bytes of each segment.
func NewSeries(ends []time.Duration, segBytes []int64) (*Series, error) {
	if len(ends) == 0 || len(ends) != len(segBytes) {
		return nil, errors.New("series: need one byte count per segment and at least one segment")
	}
	s := &Series{ends: ends, cumB: make([]int64, len(ends))}
	var prev time.Duration
	var sum int64
	for i, e := range ends {
		if e <= prev {
			return nil, fmt.Errorf("series: segment %d ends at %v, not after %v", i, e, prev)
		}
		if segBytes[i] < 0 {
			return nil, fmt.Errorf("series: segment %d has negative bytes", i)
		}
		sum += segBytes[i]
		s.cumB[i] = sum
		prev = e
	}
	s.total = sum
	return s, nil
}

// Period is the length after which the series repeats.
func (s *Series) Period() time.Duration { return s.ends[len(s.ends)-1] }

// MeanMbps is the series' average rate.
func (s *Series) MeanMbps() float64 { return float64(s.total) * 8 / s.Period().Seconds() / 1e6 }

func (s *Series) cum(t time.Duration) int64 {
	if t <= 0 {
		return 0
	}
	p := s.Period()
	k := int64(t / p)
	r := t - time.Duration(k)*p
	// first segment whose end is > r
	lo, hi := 0, len(s.ends)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.ends[m] <= r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	var base int64
	var segStart time.Duration
	if lo > 0 {
		base = s.cumB[lo-1]
		segStart = s.ends[lo-1]
	}
	segBytes := s.cumB[lo] - base
	frac := float64(r-segStart) / float64(s.ends[lo]-segStart)
	return k*s.total + base + int64(math.Floor(float64(segBytes)*frac))
}

// Bytes implements Capacity.
func (s *Series) Bytes(from, to time.Duration) int64 { return s.cum(to) - s.cum(from) }

// MahimahiMTU is the size of one mahimahi delivery opportunity.
const MahimahiMTU = 1500

// Mahimahi is a mahimahi packet-delivery trace: one 1500-byte opportunity
// at each listed millisecond, repeating with period = the last timestamp
// (as mahimahi's LinkQueue does).
type Mahimahi struct {
	ops    []time.Duration // within [0, period): ops at `period` moved to 0
	period time.Duration
	atEnd  int64 // ops that were at `period`: they happen at k·period for k >= 1, not at 0
}

func (m *Mahimahi) cum(t time.Duration) int64 {
	if t <= 0 {
		return 0
	}
	k := int64(t / m.period)
	r := t - time.Duration(k)*m.period
	lo, hi := 0, len(m.ops) // count ops < r
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.ops[mid] < r {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return (k*int64(len(m.ops)) + int64(lo) - m.atEnd) * MahimahiMTU
}

// Bytes implements Capacity.
func (m *Mahimahi) Bytes(from, to time.Duration) int64 { return m.cum(to) - m.cum(from) }

// MeanMbps is the trace's average rate.
func (m *Mahimahi) MeanMbps() float64 {
	return float64(len(m.ops)*MahimahiMTU*8) / m.period.Seconds() / 1e6
}

// Scaled multiplies a capacity by F (the bench's --scale), keeping the
// additivity of Bytes.
type Scaled struct {
	C Capacity
	F float64
}

// Bytes implements Capacity.
func (s Scaled) Bytes(from, to time.Duration) int64 {
	a := int64(math.Floor(s.F * float64(s.C.Bytes(0, from))))
	b := int64(math.Floor(s.F * float64(s.C.Bytes(0, to))))
	return b - a
}

// ParseMahimahi reads a mahimahi trace: one non-negative integer (ms) per
// line, non-decreasing, last one > 0. name is used in errors (file:line).
func ParseMahimahi(name string, r io.Reader) (*Mahimahi, error) {
	sc := bufio.NewScanner(r)
	m := &Mahimahi{}
	line := 0
	var last int64 = -1
	for sc.Scan() {
		line++
		txt := strings.TrimSpace(sc.Text())
		if txt == "" {
			return nil, fmt.Errorf("%s:%d: empty line (mahimahi traces have one millisecond timestamp per line)", name, line)
		}
		v, err := strconv.ParseInt(txt, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a non-negative integer of milliseconds", name, line, txt)
		}
		if v < last {
			return nil, fmt.Errorf("%s:%d: timestamp %d goes back from %d (must be non-decreasing)", name, line, v, last)
		}
		if v > int64(math.MaxInt64/time.Millisecond) {
			return nil, fmt.Errorf("%s:%d: timestamp %d too large", name, line, v)
		}
		last = v
		m.ops = append(m.ops, time.Duration(v)*time.Millisecond)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(m.ops) == 0 {
		return nil, fmt.Errorf("%s: no timestamps", name)
	}
	if last == 0 {
		return nil, fmt.Errorf("%s:%d: trace must last a nonzero time (last timestamp is 0)", name, line)
	}
	m.period = time.Duration(last) * time.Millisecond
	n := len(m.ops)
	for n > 0 && m.ops[n-1] == m.period {
		n--
	}
	m.atEnd = int64(len(m.ops) - n)
	moved := make([]time.Duration, m.atEnd, len(m.ops))
	m.ops = append(moved, m.ops[:n]...)
	return m, nil
}

// ParseMbpsTrace reads `seconds<TAB>Mbps` samples (whitespace-separated),
// each giving the rate of the interval that ends at that second (the first
// starts at 0). Blank lines and lines starting with # are skipped.
func ParseMbpsTrace(name string, r io.Reader) (*Series, error) {
	sc := bufio.NewScanner(r)
	var ends []time.Duration
	var segs []int64
	var prev time.Duration
	line := 0
	for sc.Scan() {
		line++
		txt := strings.TrimSpace(sc.Text())
		if txt == "" || strings.HasPrefix(txt, "#") {
			continue
		}
		f := strings.Fields(txt)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want `seconds<TAB>Mbps`, got %d fields", name, line, len(f))
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(sec) || sec <= 0 || sec > 1e9 {
			return nil, fmt.Errorf("%s:%d: seconds %q is not a positive number", name, line, f[0])
		}
		mbps, err := strconv.ParseFloat(f[1], 64)
		if err != nil || math.IsNaN(mbps) || mbps < 0 || mbps > 1e6 {
			return nil, fmt.Errorf("%s:%d: Mbps %q is not a number in [0, 1e6]", name, line, f[1])
		}
		end := time.Duration(sec * float64(time.Second))
		if end <= prev {
			return nil, fmt.Errorf("%s:%d: time %vs is not after the previous sample", name, line, f[0])
		}
		ends = append(ends, end)
		segs = append(segs, int64(mbps*1e6/8*(end-prev).Seconds()))
		prev = end
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(ends) == 0 {
		return nil, fmt.Errorf("%s: no samples", name)
	}
	return NewSeries(ends, segs)
}

// IperfUDP is an iperf3 UDP log's receive capacity and the wall-clock start
// of the test (to align it with signalling logs).
type IperfUDP struct {
	*Series
	Start time.Time
}

// iperfStart is the start block of an iperf3 -J log.
type iperfStart struct {
	Timestamp struct {
		Timesecs int64 `json:"timesecs"`
	} `json:"timestamp"`
}

type iperfLog struct {
	Start     iperfStart `json:"start"`
	Intervals []struct {
		Sum *struct {
			Start float64 `json:"start"`
			End   float64 `json:"end"`
			Bytes float64 `json:"bytes"`
		} `json:"sum"`
	} `json:"intervals"`
}

// ParseIperf3UDP reads an iperf3 `-J` log (UDP, receiver side, e.g. -R):
// the bytes of each interval's sum are what the link delivered in it, so
// they are the link's capacity while the UDP flow saturates it.
func ParseIperf3UDP(name string, r io.Reader) (*IperfUDP, error) {
	var lg iperfLog
	if err := decodeJSONLog(name, r, &lg); err != nil {
		return nil, err
	}
	if len(lg.Intervals) == 0 {
		return nil, fmt.Errorf("%s: intervals: none (not an iperf3 -J log?)", name)
	}
	ends := make([]time.Duration, 0, len(lg.Intervals))
	segs := make([]int64, 0, len(lg.Intervals))
	var prev time.Duration
	for i, iv := range lg.Intervals {
		if iv.Sum == nil {
			return nil, fmt.Errorf("%s: intervals[%d].sum: missing", name, i)
		}
		s := iv.Sum
		if math.IsNaN(s.End) || s.End <= 0 || s.End > 1e7 || s.Bytes < 0 || math.IsNaN(s.Bytes) || s.Bytes > 1e15 {
			return nil, fmt.Errorf("%s: intervals[%d].sum: end %v / bytes %v out of range", name, i, s.End, s.Bytes)
		}
		end := time.Duration(s.End * float64(time.Second))
		if end <= prev {
			return nil, fmt.Errorf("%s: intervals[%d].sum.end: %v is not after the previous interval", name, i, s.End)
		}
		ends = append(ends, end)
		segs = append(segs, int64(s.Bytes))
		prev = end
	}
	ser, err := NewSeries(ends, segs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := &IperfUDP{Series: ser}
	if ts := lg.Start.Timestamp.Timesecs; ts > 0 {
		out.Start = time.Unix(ts, 0).UTC()
	}
	return out, nil
}

// decodeJSONLog reads a whole JSON document (an iperf3 -J log) into v; a
// syntax or type error names the file's line (and the field).
func decodeJSONLog(name string, r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("%s:%d: %v", name, lineOf(data, se.Offset), err)
		case errors.As(err, &te):
			return fmt.Errorf("%s:%d: field %s: %v", name, lineOf(data, te.Offset), te.Field, err)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

// ParseCapacity parses r, named name in errors, with the parser of kind:
// "mahimahi", "iperf3" or "mbps-trace".
func ParseCapacity(kind, name string, r io.Reader) (Capacity, error) {
	switch kind {
	case "mahimahi":
		return ParseMahimahi(name, r)
	case "iperf3":
		return ParseIperf3UDP(name, r)
	case "mbps-trace":
		return ParseMbpsTrace(name, r)
	}
	return nil, fmt.Errorf("unknown capacity kind %q", kind)
}
