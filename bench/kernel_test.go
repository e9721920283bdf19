package bench

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func netstatText(timeouts, dsackUndo int) string {
	return "TcpExt: SyncookiesSent TCPDSACKUndo TCPTimeouts\nTcpExt: 9 " +
		strconv.Itoa(dsackUndo) + " " + strconv.Itoa(timeouts) + "\nIpExt: InNoRoutes\nIpExt: 5\n"
}

// The sampler re-reads the same open file each time (as it does a
// namespace's /proc/net/netstat) and its last sample is taken at stop.
func TestKernelSamplerRereadsItsFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "netstat")
	if err := os.WriteFile(src, []byte(netstatText(1, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, kernelLogFile)
	s, err := startKernelSampler(f, log)
	if err != nil {
		t.Fatal(err)
	}
	// Rewritten in place: the open descriptor sees the new counts.
	if err := os.WriteFile(src, []byte(netstatText(4, 2)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	ks, err := ReadKernelLog(fh, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) < 2 {
		t.Fatalf("%d samples, want the first and the one at stop", len(ks))
	}
	idx := func(name string) int {
		for i, k := range KernelCounters {
			if k == name {
				return i
			}
		}
		t.Fatalf("%s not in KernelCounters", name)
		return -1
	}
	first, last := ks[0], ks[len(ks)-1]
	if first.Counts[idx("TCPTimeouts")] != 1 || last.Counts[idx("TCPTimeouts")] != 4 || last.Counts[idx("TCPDSACKUndo")] != 2 || last.Counts[idx("TCPLossUndo")] != 0 {
		t.Fatalf("first %v last %v", first.Counts, last.Counts)
	}
	d, _ := kernelDelta(ks, first.UnixNs, 0, float64(last.UnixNs-first.UnixNs)/1e9)
	if len(d) != 2 || d["TCPTimeouts"] != 3 || d["TCPDSACKUndo"] != 2 {
		t.Fatalf("delta %v, want TCPTimeouts 3, TCPDSACKUndo 2 and nothing else", d)
	}
}

func TestKernelSamplerRefusesAFileItCannotParse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "netstat")
	if err := os.WriteFile(src, []byte("TcpExt: A B\nTcpExt: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startKernelSampler(f, filepath.Join(dir, kernelLogFile)); err == nil || !strings.Contains(err.Error(), src+":2") {
		t.Fatalf("err %v, want one naming %s:2", err, src)
	}
}

func TestReadKernelLog(t *testing.T) {
	header := "unix_ns\t" + strings.Join(KernelCounters, "\t") + "\n"
	row := func(ns string, v string) string {
		return ns + strings.Repeat("\t"+v, len(KernelCounters)) + "\n"
	}
	ks, err := ReadKernelLog(strings.NewReader(header+row("10", "1")+row("20", "3")), "k")
	if err != nil || len(ks) != 2 || ks[1].UnixNs != 20 || ks[1].Counts[0] != 3 {
		t.Fatalf("%+v %v", ks, err)
	}
	for _, c := range []struct{ name, in, want string }{
		{"header", "unix_ns\tTCPTimeouts\n1\t2\n", "k:1: header"},
		{"count", header + row("10", "x"), "k:2: TCPDSACKUndo"},
		{"negative", header + row("10", "-1"), "k:2: TCPDSACKUndo"},
		{"time", header + row("x", "1"), "k:2: unix_ns"},
		{"backwards", header + row("20", "1") + row("10", "1"), "k:3: unix_ns 10 goes back"},
	} {
		if _, err := ReadKernelLog(strings.NewReader(c.in), "k"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

// Each handover gets what grew from its command to the next one's.
func TestHandoverStatsKernelPerHandover(t *testing.T) {
	n := len(KernelCounters)
	at := func(ns int64, timeouts, undo int64) KernelSample {
		c := make([]int64, n)
		for i, k := range KernelCounters {
			switch k {
			case "TCPTimeouts":
				c[i] = timeouts
			case "TCPDSACKUndo":
				c[i] = undo
			}
		}
		return KernelSample{UnixNs: ns, Counts: c}
	}
	d := RunData{Handovers: []HandoverRow{{Report: 1.9, Command: 2, RA: 2.06}, {Report: 4.9, Command: 5, RA: 5.06}}}
	d.Emu.StartUnixNS = 1e9
	// Emulator time = (ns - 1e9) / 1e9: an undo at 2.5 s (first
	// handover), a timeout at 6 s and another at 7 s (second).
	d.KernelLog = []KernelSample{at(1.5e9, 0, 0), at(3.0e9, 0, 0), at(3.6e9, 0, 1), at(7.1e9, 1, 1), at(8.1e9, 2, 1)}
	hs := handoverStats(RunResult{}, d)
	if len(hs) != 2 || len(hs[0].Kernel) != 1 || hs[0].Kernel["TCPDSACKUndo"] != 1 || len(hs[1].Kernel) != 1 || hs[1].Kernel["TCPTimeouts"] != 2 {
		t.Fatalf("%+v / %+v", hs[0].Kernel, hs[1].Kernel)
	}
	// When each first grew, from the command: the undo's sample at 2.6 s
	// (command 2 s), the first timeout's at 6.1 s (command 5 s).
	if a0, a1 := hs[0].KernelAfterS["TCPDSACKUndo"], hs[1].KernelAfterS["TCPTimeouts"]; math.Abs(a0-0.6) > 1e-9 || math.Abs(a1-1.1) > 1e-9 {
		t.Fatalf("first growth +%v s / +%v s, want +0.6 / +1.1", a0, a1)
	}
	if c := kernelCell(hs[1].Kernel, hs[1].KernelAfterS); c != "Timeouts 2 (+1.1 s)" {
		t.Fatalf("cell %q", c)
	}
	if kernelCell(hs[1].Kernel, nil) != "Timeouts 2" || kernelCell(map[string]int64{}, nil) != "-" || kernelCell(nil, nil) != "" {
		t.Fatalf("cells %q %q %q", kernelCell(hs[1].Kernel, nil), kernelCell(map[string]int64{}, nil), kernelCell(nil, nil))
	}
	d.KernelLog = nil
	if hs = handoverStats(RunResult{}, d); hs[0].Kernel != nil {
		t.Fatalf("kernel %v without samples", hs[0].Kernel)
	}
}
