// Package bench is `m2ho bench`: A/B runs of kernel TCP CUBIC (iperf3)
// through the emulated 5G link (bench/emu driven by `m2ho emulate`), one
// run per variant of the phone proxy (`m2ho run`), and the analysis that
// turns the files each run leaves behind into summary.json, summary.md and
// plots.
//
// The package has three layers. The readers in this file parse what a run
// writes (the emulator's TSV and JSON files, iperf3's JSON and the
// receiver's timestamped interval lines). The analysis (analysis.go) is
// pure: RunData in, numbers out, so it is tested on synthetic runs with
// hand-computed values. Run (run.go) is the orchestration: namespaces,
// child processes, teardown.
package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/m2ho/m2ho/bench/emu"
	"github.com/m2ho/m2ho/signaling"
)

// CapacityBin is one row of the emulator's capacity.tsv: the serving
// cell's capacity over the 100 ms bin that starts T seconds after the
// emulator started (0 while the link is interrupted).
type CapacityBin struct {
	T    float64
	Mbps float64
	Cell string
	Type string // sub6 or mmwave
}

// HandoverRow is one row of handovers.tsv; times are seconds since the
// emulator started.
type HandoverRow struct {
	Report, Command, RA float64
	From, To            string
	// Type is horizontal, sub6-to-mmwave or mmwave-to-sub6.
	Type string
	// The emulator's per-handover counters (absent in older files: -1):
	// tail drops from this command to the next, packets missing at the
	// flush and packets delivered past them.
	OverflowDrops, FlushedHoles, FlushedEarly int64
}

// FalseAlarmRow is one row of falsealarms.tsv.
type FalseAlarmRow struct {
	Report, A1 float64
}

// EmulatorSummary is emulator.json, written by `m2ho emulate` at exit:
// the emulator's own type, so the two sides cannot drift apart.
type EmulatorSummary = emu.Summary

// HandoverTypes are the handover types of handovers.tsv, in report order;
// TypeNone labels the time before the first handover.
var HandoverTypes = []string{"horizontal", "sub6-to-mmwave", "mmwave-to-sub6"}

// TypeNone is the goodput-by-type key of bins before the first handover.
const TypeNone = "none"

// tsv reads a tab-separated file with the given header, calling row with
// the fields of every data line. Errors name file:line and the column.
func tsv(r io.Reader, name string, header []string, row func(line int, f []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	sawHeader := false
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "\t")
		if !sawHeader {
			if strings.Join(f, "\t") != strings.Join(header, "\t") {
				return fmt.Errorf("%s:%d: header is %q, want %q", name, line, text, strings.Join(header, "\t"))
			}
			sawHeader = true
			continue
		}
		if len(f) != len(header) {
			return fmt.Errorf("%s:%d: %d fields, want %d (%s)", name, line, len(f), len(header), strings.Join(header, ","))
		}
		if err := row(line, f); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", name, line, err)
	}
	if !sawHeader {
		return fmt.Errorf("%s: empty, want header %q", name, strings.Join(header, "\t"))
	}
	return nil
}

// num parses a finite float, naming file:line and column on error.
func num(name string, line int, col, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s:%d: %s: %q is not a finite number", name, line, col, s)
	}
	return v, nil
}

// ReadCapacity parses capacity.tsv (header t_s, mbps, cell, type). Rows
// must be in time order with capacities >= 0.
func ReadCapacity(r io.Reader, name string) ([]CapacityBin, error) {
	var out []CapacityBin
	err := tsv(r, name, []string{"t_s", "mbps", "cell", "type"}, func(line int, f []string) error {
		t, err := num(name, line, "t_s", f[0])
		if err != nil {
			return err
		}
		m, err := num(name, line, "mbps", f[1])
		if err != nil {
			return err
		}
		if m < 0 || t < 0 {
			return fmt.Errorf("%s:%d: t_s and mbps must be >= 0", name, line)
		}
		if n := len(out); n > 0 && t <= out[n-1].T {
			return fmt.Errorf("%s:%d: t_s %v not after the previous row's %v", name, line, t, out[n-1].T)
		}
		out = append(out, CapacityBin{T: t, Mbps: m, Cell: f[2], Type: f[3]})
		return nil
	})
	return out, err
}

// ReadHandovers parses handovers.tsv. Each row must have report <=
// command <= ra, a known type, and commands in time order.
func ReadHandovers(r io.Reader, name string) ([]HandoverRow, error) {
	var out []HandoverRow
	// Two layouts: the six columns of older emulators, and the same with
	// the per-handover counters.
	br := bufio.NewReader(r)
	head, _ := br.Peek(512)
	header := []string{"report_s", "command_s", "ra_s", "from", "to", "type"}
	counters := strings.HasPrefix(string(head), strings.Join(append(header, "overflow_drops"), "\t"))
	if counters {
		header = append(header, "overflow_drops", "flushed_holes", "flushed_early")
	}
	err := tsv(br, name, header, func(line int, f []string) error {
		var v [3]float64
		for i, col := range []string{"report_s", "command_s", "ra_s"} {
			x, err := num(name, line, col, f[i])
			if err != nil {
				return err
			}
			v[i] = x
		}
		if !(v[0] <= v[1] && v[1] <= v[2]) || v[0] < 0 {
			return fmt.Errorf("%s:%d: want 0 <= report_s <= command_s <= ra_s, got %v, %v, %v", name, line, v[0], v[1], v[2])
		}
		known := false
		for _, t := range HandoverTypes {
			known = known || t == f[5]
		}
		if !known {
			return fmt.Errorf("%s:%d: type: %q is not one of %s", name, line, f[5], strings.Join(HandoverTypes, ", "))
		}
		if n := len(out); n > 0 && v[1] < out[n-1].Command {
			return fmt.Errorf("%s:%d: command_s %v before the previous row's %v", name, line, v[1], out[n-1].Command)
		}
		h := HandoverRow{Report: v[0], Command: v[1], RA: v[2], From: f[3], To: f[4], Type: f[5], OverflowDrops: -1, FlushedHoles: -1, FlushedEarly: -1}
		if counters {
			var c [3]int64
			for i, col := range header[6:] {
				n, err := strconv.ParseInt(f[6+i], 10, 64)
				if err != nil || n < 0 {
					return fmt.Errorf("%s:%d: %s: %q is not a count", name, line, col, f[6+i])
				}
				c[i] = n
			}
			h.OverflowDrops, h.FlushedHoles, h.FlushedEarly = c[0], c[1], c[2]
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// ReadFalseAlarms parses falsealarms.tsv.
func ReadFalseAlarms(r io.Reader, name string) ([]FalseAlarmRow, error) {
	var out []FalseAlarmRow
	err := tsv(r, name, []string{"report_s", "a1_s"}, func(line int, f []string) error {
		rep, err := num(name, line, "report_s", f[0])
		if err != nil {
			return err
		}
		a1, err := num(name, line, "a1_s", f[1])
		if err != nil {
			return err
		}
		if rep < 0 || a1 < rep {
			return fmt.Errorf("%s:%d: want 0 <= report_s <= a1_s, got %v, %v", name, line, rep, a1)
		}
		out = append(out, FalseAlarmRow{Report: rep, A1: a1})
		return nil
	})
	return out, err
}

// ReadEmulatorSummary parses emulator.json; unknown fields are ignored, a
// missing or zero start_unix_ns is an error (nothing can be aligned
// without it).
func ReadEmulatorSummary(b []byte, name string) (EmulatorSummary, error) {
	var s EmulatorSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if s.StartUnixNS <= 0 {
		return s, fmt.Errorf("%s: start_unix_ns: missing or not positive", name)
	}
	if s.DurationS < 0 || s.LatePct < 0 || s.Handovers < 0 {
		return s, fmt.Errorf("%s: duration_s, late_pct and handovers must be >= 0", name)
	}
	return s, nil
}

// SenderInterval is one -i interval of the iperf3 client, which is the
// sender in the bench (server -> laptop download): bytes written to the
// socket, retransmissions, and the kernel's smoothed RTT and cwnd at the
// interval's end.
type SenderInterval struct {
	Start, End  float64 // seconds since the test started
	Bytes       int64
	Retransmits int64
	RTTus       int64 // tcp_info rtt, microseconds (0 = no sample)
	CwndBytes   int64
}

// Iperf3Sender is what the analysis takes from the client's iperf3 -J.
type Iperf3Sender struct {
	// TimeSecs is start.timestamp.timesecs: the test's wall time at 1 s
	// resolution only, used as a coarse check of the alignment.
	TimeSecs  int64
	Intervals []SenderInterval
	// Congestion is end.sender_tcp_congestion, the algorithm the kernel
	// ran ("" when iperf3 did not say).
	Congestion string
}

// ReadIperf3Sender parses iperf3 -J from the sending client. Intervals
// come from the first stream (the bench runs one); an "error" member is
// reported as an error.
func ReadIperf3Sender(b []byte, name string) (Iperf3Sender, error) {
	var doc struct {
		Error *string `json:"error"`
		Start struct {
			Timestamp struct {
				TimeSecs int64 `json:"timesecs"`
			} `json:"timestamp"`
		} `json:"start"`
		End struct {
			SenderTCPCongestion string `json:"sender_tcp_congestion"`
		} `json:"end"`
		Intervals []struct {
			Streams []struct {
				Start       float64 `json:"start"`
				End         float64 `json:"end"`
				Bytes       int64   `json:"bytes"`
				Retransmits int64   `json:"retransmits"`
				RTT         int64   `json:"rtt"`
				SndCwnd     int64   `json:"snd_cwnd"`
				Sender      bool    `json:"sender"`
			} `json:"streams"`
		} `json:"intervals"`
	}
	var out Iperf3Sender
	if err := json.Unmarshal(b, &doc); err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Error != nil {
		return out, fmt.Errorf("%s: iperf3 reported: %s", name, *doc.Error)
	}
	out.TimeSecs = doc.Start.Timestamp.TimeSecs
	out.Congestion = doc.End.SenderTCPCongestion
	for i, iv := range doc.Intervals {
		if len(iv.Streams) == 0 {
			return out, fmt.Errorf("%s: intervals[%d].streams: empty", name, i)
		}
		s := iv.Streams[0]
		if !s.Sender {
			return out, fmt.Errorf("%s: intervals[%d].streams[0].sender is false: run the client as the sender (no -R)", name, i)
		}
		if s.End < s.Start || s.Bytes < 0 || s.Retransmits < 0 || s.RTT < 0 {
			return out, fmt.Errorf("%s: intervals[%d].streams[0]: end < start or negative bytes/retransmits/rtt", name, i)
		}
		out.Intervals = append(out.Intervals, SenderInterval{Start: s.Start, End: s.End, Bytes: s.Bytes,
			Retransmits: s.Retransmits, RTTus: s.RTT, CwndBytes: s.SndCwnd})
	}
	return out, nil
}

// RecvInterval is one interval line of the receiving iperf3 server, with
// the wall time the bench read it at.
type RecvInterval struct {
	Start, End float64 // seconds since the test started (iperf3's own clock)
	Bytes      int64   // from the Transfer column, see ParseRecvLine
	ArrivalNs  int64   // wall clock (Unix ns) when the line was read
}

// unitBytes are iperf3's Transfer units (powers of 1024).
var unitBytes = map[string]float64{"Bytes": 1, "KBytes": 1 << 10, "MBytes": 1 << 20, "GBytes": 1 << 30, "TBytes": 1 << 40}

// ParseRecvLine parses one interval line of iperf3's text output,
//
//	[  5]   0.10-0.20   sec  1280 KBytes  104858 Kbits/sec
//
// ok is false for every other line (headers, the final sum with
// "receiver"/"sender", connection lines). The Transfer column is rounded
// by iperf3 to 3-4 significant digits; the bench runs the server with
// -f k so it is in KBytes, an error below 0.05 % (0.5 KB) once a bin
// carries 1 MB.
func ParseRecvLine(line string) (iv RecvInterval, ok bool, err error) {
	rest, found := strings.CutPrefix(strings.TrimSpace(line), "[")
	if !found {
		return iv, false, nil
	}
	id, rest, found := strings.Cut(rest, "]")
	if !found || strings.TrimSpace(id) == "ID" || strings.TrimSpace(id) == "SUM" {
		return iv, false, nil
	}
	f := strings.Fields(rest)
	// interval, "sec", value, unit, rate, rate-unit [, receiver|sender]
	if len(f) < 6 || f[1] != "sec" || len(f) > 6 {
		return iv, false, nil
	}
	a, b, found := strings.Cut(f[0], "-")
	if !found {
		return iv, false, nil
	}
	start, err1 := strconv.ParseFloat(a, 64)
	end, err2 := strconv.ParseFloat(b, 64)
	val, err3 := strconv.ParseFloat(f[2], 64)
	mul, known := unitBytes[f[3]]
	if err := errors.Join(err1, err2, err3); err != nil || !known {
		return iv, false, fmt.Errorf("interval line %q: want START-END sec VALUE UNIT", line)
	}
	if math.IsNaN(start+end+val) || math.IsInf(start+end+val, 0) || end < start || start < 0 || val < 0 {
		return iv, false, fmt.Errorf("interval line %q: end before start or negative", line)
	}
	return RecvInterval{Start: start, End: end, Bytes: int64(math.Round(val * mul))}, true, nil
}

// ReadRecvLog parses the receiver log the bench writes: one line per line
// iperf3 printed, "<unix ns>\t<text>". Lines that are not intervals are
// skipped; malformed timestamps and interval lines are errors naming the
// line.
func ReadRecvLog(r io.Reader, name string) ([]RecvInterval, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []RecvInterval
	line := 0
	for sc.Scan() {
		line++
		ts, text, found := strings.Cut(sc.Text(), "\t")
		if !found {
			return out, fmt.Errorf("%s:%d: want <unix ns><TAB><iperf3 line>", name, line)
		}
		ns, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || ns <= 0 {
			return out, fmt.Errorf("%s:%d: timestamp %q is not a positive integer", name, line, ts)
		}
		iv, ok, err := ParseRecvLine(text)
		if err != nil {
			return out, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if !ok {
			continue
		}
		iv.ArrivalNs = ns
		out = append(out, iv)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s:%d: %w", name, line, err)
	}
	return out, nil
}

// KeptCellCommand is an LTE anchor handover command whose target is the
// serving data cell (XCAL's "ENDC LTE HO Request (DiffLTE-SameNR)"): the
// data stays in that cell, and the emulator pauses the link from it to
// the logged random access unless told not to (emu.Schedule.Pauses).
// Not a handover of handovers.tsv; the phases put the time around it
// apart (PhaseAnchorMmWave, PhaseAnchorSub6), since that is where M2HO's
// handling of it acts.
type KeptCellCommand struct {
	T    float64 // seconds on the emulator's clock
	Type string  // the data cell's type: "mmwave", "sub6"
	// Drops are the emulator's downlink tail drops from anchorBefore
	// before the command to anchorAfter after it (-1: emu/mm-down.log
	// absent).
	Drops int64
}

// countKeptCellDrops sets each command's Drops from the run's drop
// times (ascending).
func countKeptCellDrops(kept []KeptCellCommand, drops []float64) {
	for i := range kept {
		lo := sort.SearchFloat64s(drops, kept[i].T-anchorBefore)
		hi := sort.SearchFloat64s(drops, kept[i].T+anchorAfter)
		kept[i].Drops = int64(hi - lo)
	}
}

// ReadKeptCellCommands scans the events the emulator published
// (emu/events.jsonl, every report, command, random access and MAC slot
// of the run) for kept-cell commands; startNs is emulator.json's
// start_unix_ns. Only command lines are decoded; a malformed one is an
// error naming file:line.
func ReadKeptCellCommands(r io.Reader, name string, startNs int64) ([]KeptCellCommand, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), signaling.MaxLine)
	var (
		dec  signaling.Decoder
		out  []KeptCellCommand
		line int
	)
	hoKind, anchor := []byte(`"kind":"ho"`), []byte(`"lte-anchor"`)
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if !bytes.Contains(b, hoKind) || !bytes.Contains(b, anchor) {
			continue
		}
		e, err := dec.Decode(b)
		if err != nil {
			var pe *signaling.ParseError
			if errors.As(err, &pe) {
				pe.File, pe.Line = name, line
				return nil, pe
			}
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if e.Kind != signaling.KindHOCommand || e.HO != signaling.HOLTEAnchor ||
			e.Target.ID == "" || e.Target.ID != e.Serving.ID {
			continue
		}
		out = append(out, KeptCellCommand{T: float64(e.Time.UnixNano()-startNs) / 1e9, Type: e.Target.Type.String()})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return out, nil
}
