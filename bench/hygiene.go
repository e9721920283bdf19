package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/m2ho/m2ho/bench/netns"
)

// TCPSysctls are set in every namespace of a run's chain. tcp_rmem and
// tcp_wmem bound the kernel's buffer autotuning (iperf3 sets no -w, so
// net.core.rmem_max/wmem_max, which only cap SO_RCVBUF/SO_SNDBUF set by
// hand, do not apply; they are host-wide and read-only inside a network
// namespace on these kernels, and are recorded, never written). 64 MiB
// holds more than a 1 Gbit/s × 500 ms window; the host's 4 MiB capped a
// 70 ms flow near 480 Mbit/s. tcp_no_metrics_save keeps one run's
// ssthresh out of the next (each run also gets a fresh chain).
var TCPSysctls = [][2]string{
	{"net.ipv4.tcp_rmem", "4096 131072 67108864"},
	{"net.ipv4.tcp_wmem", "4096 16384 67108864"},
	{"net.ipv4.tcp_no_metrics_save", "1"},
}

// The namespaces' default congestion control is set to CUBIC where the
// kernel allows it (a namespace may only pick one the host lists in
// tcp_allowed_congestion_control); iperf3's -C cubic sets it per socket
// in any case, and the value read back is recorded.
const defaultCC = "cubic"

// recordedSysctls are read back in every namespace after TCPSysctls.
var recordedSysctls = []string{
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_no_metrics_save",
	"net.ipv4.tcp_congestion_control", "net.core.rmem_max", "net.core.wmem_max",
	"net.ipv4.tcp_sack", "net.ipv4.tcp_dsack", "net.ipv4.tcp_recovery", "net.ipv4.tcp_timestamps",
}

// Sysctls maps namespace (laptop, phone, emu, server) → key → value.
type Sysctls map[string]map[string]string

// configureTCP sets TCPSysctls in every namespace of c and reads
// recordedSysctls back.
func configureTCP(c *netns.Chain) (Sysctls, error) {
	names := []string{netns.Laptop, netns.Phone, netns.Server}
	if c.WithEmu {
		names = []string{netns.Laptop, netns.Phone, netns.Emu, netns.Server}
	}
	out := Sysctls{}
	for _, n := range names {
		for _, kv := range TCPSysctls {
			if err := c.Sysctl(n, kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
		ccErr := c.Sysctl(n, "net.ipv4.tcp_congestion_control", defaultCC)
		m := map[string]string{}
		if ccErr != nil {
			m["bench.default_cc_note"] = "could not set " + defaultCC + " as the namespace default (not in the host's allowed list); iperf3 -C cubic sets it per socket"
		}
		for _, k := range recordedSysctls {
			b, err := c.Exec(n, "cat", "/proc/sys/"+strings.ReplaceAll(k, ".", "/")).Output()
			if err != nil {
				m[k] = "unreadable"
				continue
			}
			m[k] = strings.Join(strings.Fields(string(b)), " ")
		}
		for _, kv := range TCPSysctls {
			if m[kv[0]] != kv[1] {
				return nil, fmt.Errorf("sysctl %s in %s reads %q after writing %q", kv[0], n, m[kv[0]], kv[1])
			}
		}
		out[n] = m
	}
	return out, nil
}

// KernelCounters are the server's (the sender's) TCP recovery counters
// that say how Linux handled a run's losses and reorderings.
var KernelCounters = []string{"TCPDSACKUndo", "TCPPartialUndo", "TCPLossUndo", "TCPFullUndo",
	"TCPSpuriousRTOs", "TCPTimeouts", "TCPLostRetransmit", "TCPSACKReorder", "TCPDSACKRecv"}

// ParseNetstat reads /proc/net/netstat (pairs of header and value lines
// per prefix) and returns the TcpExt counters named in keys; a key
// missing from the file is absent from the map.
func ParseNetstat(r io.Reader, name string, keys []string) (map[string]int64, error) {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var head []string
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if head == nil || head[0] != f[0] {
			head = f
			continue
		}
		if len(f) != len(head) {
			return nil, fmt.Errorf("%s:%d: %d values for %d names", name, line, len(f), len(head))
		}
		if f[0] == "TcpExt:" {
			for i := 1; i < len(f); i++ {
				if want[head[i]] {
					v, err := strconv.ParseInt(f[i], 10, 64)
					if err != nil {
						return nil, fmt.Errorf("%s:%d: %s: %q is not a count", name, line, head[i], f[i])
					}
					out[head[i]] = v
				}
			}
		}
		head = nil
	}
	return out, sc.Err()
}

// Files of a run directory the hygiene adds.
const (
	sysctlFile  = "sysctl.json"
	netstatFile = "server-netstat.txt"
	smaxDBFile  = "smaxdb.json"
	cellsFile   = "cells.json"
	verdictFile = "verdicts.tsv"
	// eqn2File is the proxy's --eqn2-log: what Eqn 2 saw and set, for
	// reading a run's carried windows afterwards (not analysed).
	eqn2File = "eqn2.tsv"
)

// smaxLogFile is the proxy's --smax-log: each rise of a cell's ŝ_max
// with the sample that made it.
const smaxLogFile = "smax.tsv"

// smaxLogColumns is the --smax-log header (cmd/m2ho smaxHeader).
var smaxLogColumns = []string{"unix_ns", "cell", "type", "smax_B", "wait_us", "received_B", "served_B", "busy_us", "raw_B"}

// SMaxRise is one rise of a cell's ŝ_max as the proxy logged it: the
// value, the queueing delay of the segment that completed it, the bytes
// received and served since that segment joined the queue, how long the
// cell had been busy and the largest single sample.
type SMaxRise struct {
	UnixNs   int64   `json:"-"`
	AtS      float64 `json:"at_s"` // emulator time, set by AnalyzeRun
	Cell     string  `json:"cell"`
	Type     string  `json:"type"`
	SMax     int64   `json:"smax_bytes"`
	WaitUs   int64   `json:"wait_us"`
	Received int64   `json:"received_bytes"`
	Served   int64   `json:"served_bytes"`
	BusyUs   int64   `json:"busy_us"`
	Raw      int64   `json:"raw_bytes"`
}

// ReadSMaxLog reads the proxy's --smax-log; errors name file:line and the
// column.
func ReadSMaxLog(r io.Reader, name string) ([]SMaxRise, error) {
	var out []SMaxRise
	err := tsv(r, name, smaxLogColumns, func(line int, f []string) error {
		var v [7]int64
		for i, c := range []int{0, 3, 4, 5, 6, 7, 8} {
			n, err := strconv.ParseInt(f[c], 10, 64)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: %q is not an integer", name, line, smaxLogColumns[c], f[c])
			}
			v[i] = n
		}
		out = append(out, SMaxRise{UnixNs: v[0], Cell: f[1], Type: f[2], SMax: v[1], WaitUs: v[2], Received: v[3], Served: v[4], BusyUs: v[5], Raw: v[6]})
		return nil
	})
	return out, err
}

// readSMaxDB reads the proxy's ŝ_max database file (version 1: cells of
// id, type, smax_bytes); a missing file is no cells.
func readSMaxDB(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		Cells []struct {
			ID   string `json:"id"`
			SMax int    `json:"smax_bytes"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]int{}
	for _, c := range f.Cells {
		out[c.ID] = max(out[c.ID], c.SMax)
	}
	return out, nil
}

func readJSONFile(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// VerdictSample is one line of the proxy's --verdict-log: its cumulative
// verdict counters at a wall time.
type VerdictSample struct {
	UnixNs                    int64
	Clamp, Eqn2, Suppressions uint64
	// Release: rewrites that opened a held window gradually (0 in logs
	// from before the column existed).
	Release uint64
	// SignalLagUs: the largest signalling lag the proxy saw since the
	// line before (µs; the event's arrival less its own timestamp; 0 in
	// logs from before the column existed). Not a counter.
	SignalLagUs uint64
}

// verdictColumns is the --verdict-log header; logs written before the
// release or the signal_lag column are read too (verdictColumns[:4],
// [:5]).
var verdictColumns = []string{"unix_ns", "clamp_rewrites", "eqn2_rewrites", "suppressed_acks", "release_rewrites", "signal_lag_us"}

// ReadVerdictLog parses the proxy's --verdict-log (header unix_ns,
// clamp_rewrites, eqn2_rewrites, suppressed_acks, release_rewrites,
// signal_lag_us; or the first five or four alone).
func ReadVerdictLog(r io.Reader, name string) ([]VerdictSample, error) {
	br := bufio.NewReader(r)
	header := verdictColumns
	first, _ := br.Peek(256)
	switch {
	case !bytes.Contains(first, []byte("\trelease_rewrites")):
		header = verdictColumns[:4]
	case !bytes.Contains(first, []byte("\tsignal_lag_us")):
		header = verdictColumns[:5]
	}
	out := []VerdictSample{} // a log with its header only: no verdicts, not "not logged"
	err := tsv(br, name, header, func(line int, f []string) error {
		var v [6]uint64
		for i, s := range f {
			x, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("%s:%d: column %d: %q is not a count", name, line, i+1, s)
			}
			v[i] = x
		}
		vs := VerdictSample{UnixNs: int64(v[0]), Clamp: v[1], Eqn2: v[2], Suppressions: v[3], Release: v[4], SignalLagUs: v[5]}
		if n := len(out); n > 0 {
			// The proxy's counters only grow, a line per tick: a log
			// out of order is two logs in one file (verdictsAt reads
			// it in order).
			p := out[n-1]
			if vs.UnixNs < p.UnixNs || vs.Clamp < p.Clamp || vs.Eqn2 < p.Eqn2 || vs.Suppressions < p.Suppressions || vs.Release < p.Release {
				return fmt.Errorf("%s:%d: goes back in time or in a counter (%v after %v): two logs in one file?", name, line, vs, p)
			}
		}
		out = append(out, vs)
		return nil
	})
	return out, err
}

// verdictsAt is the counters in force at emulator time t (the last sample
// at or before it; zero before the first).
func verdictsAt(vs []VerdictSample, startNs int64, t float64) VerdictSample {
	var last VerdictSample
	for _, v := range vs {
		if float64(v.UnixNs-startNs)/1e9 > t {
			break
		}
		last = v
	}
	return last
}

// kernelLogFile holds the server's KernelCounters sampled during the
// download (kernelSampler), so each handover gets its own counts.
const kernelLogFile = "server-kernel.tsv"

// KernelSampleEvery is how often the bench samples the server's counters.
const KernelSampleEvery = 100 * time.Millisecond

// KernelSample is the server's KernelCounters at a wall time.
type KernelSample struct {
	UnixNs int64
	Counts []int64 // in KernelCounters order
}

// kernelSampler writes the counters of one network namespace's
// /proc/net/netstat to a TSV file (unix_ns, then KernelCounters) every
// KernelSampleEvery until stop is called. f is that namespace's netstat
// file, opened from inside it: a /proc/net file keeps the namespace of
// its opener, so the samples need no process in the namespace. The
// sampler closes f when it stops.
type kernelSampler struct {
	stopc chan struct{}
	done  chan error
}

func startKernelSampler(f *os.File, path string) (*kernelSampler, error) {
	out, err := os.Create(path)
	if err != nil {
		f.Close()
		return nil, err
	}
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "unix_ns\t%s\n", strings.Join(KernelCounters, "\t"))
	var buf bytes.Buffer // reused: one sample a KernelSampleEvery
	sample := func() error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(f); err != nil {
			return err
		}
		now := time.Now().UnixNano()
		m, err := ParseNetstat(bytes.NewReader(buf.Bytes()), f.Name(), KernelCounters)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%d", now)
		for _, k := range KernelCounters {
			fmt.Fprintf(w, "\t%d", m[k])
		}
		return w.WriteByte('\n')
	}
	finish := func(err error) error {
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		f.Close()
		return err
	}
	// The first sample before returning: a file that can't be read is an
	// error now, not after the run.
	if err := sample(); err != nil {
		return nil, finish(err)
	}
	s := &kernelSampler{stopc: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		tick := time.NewTicker(KernelSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-s.stopc:
				s.done <- finish(sample())
				return
			case <-tick.C:
				if err := sample(); err != nil {
					s.done <- finish(err)
					<-s.stopc
					return
				}
			}
		}
	}()
	return s, nil
}

// stop takes a last sample and returns the first error the sampler met.
func (s *kernelSampler) stop() error {
	close(s.stopc)
	return <-s.done
}

// ReadKernelLog parses a kernelSampler file. Its header must name
// exactly KernelCounters (a log of another build is refused, naming the
// line).
func ReadKernelLog(r io.Reader, name string) ([]KernelSample, error) {
	header := append([]string{"unix_ns"}, KernelCounters...)
	out := []KernelSample{}
	err := tsv(r, name, header, func(line int, f []string) error {
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%s:%d: unix_ns: %q is not a time", name, line, f[0])
		}
		s := KernelSample{UnixNs: ns, Counts: make([]int64, len(KernelCounters))}
		for i, x := range f[1:] {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil || v < 0 {
				return fmt.Errorf("%s:%d: %s: %q is not a count", name, line, KernelCounters[i], x)
			}
			s.Counts[i] = v
		}
		if n := len(out); n > 0 && ns < out[n-1].UnixNs {
			return fmt.Errorf("%s:%d: unix_ns %d goes back in time", name, line, ns)
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// kernelDelta is what each counter grew by between emulator times t0 and
// t1 (the samples in force at each: the last at or before it; before the
// first sample the first one's counts), and for each, how long after t0
// the first sample showing the growth came. Only counters that grew are
// in the maps; nil without samples.
func kernelDelta(ks []KernelSample, startNs int64, t0, t1 float64) (map[string]int64, map[string]float64) {
	if len(ks) == 0 {
		return nil, nil
	}
	emu := func(k KernelSample) float64 { return float64(k.UnixNs-startNs) / 1e9 }
	at := func(t float64) KernelSample {
		last := ks[0]
		for _, k := range ks {
			if emu(k) > t {
				break
			}
			last = k
		}
		return last
	}
	a, b := at(t0), at(t1)
	out, after := map[string]int64{}, map[string]float64{}
	for i, name := range KernelCounters {
		if d := b.Counts[i] - a.Counts[i]; d > 0 {
			out[name] = d
			for _, k := range ks {
				if t := emu(k); t > t0 && t <= t1 && k.Counts[i] > a.Counts[i] {
					after[name] = t - t0
					break
				}
			}
		}
	}
	return out, after
}
