//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/netns"
	"github.com/m2ho/m2ho/tun"
)

// netbenchRow is one row of bench-out/netbench.json.
type netbenchRow struct {
	Name string  `json:"name"`
	Gbps float64 `json:"gbps"`
	// CPUPct is the whole machine's busy CPU during the run, in percent of
	// one core (200 = both cores of a 2-core machine): it includes the
	// kernel's forwarding in softirq, iperf3 and anything else running.
	CPUPct float64 `json:"cpu_pct"`
	// CPUPerGbps is CPUPct per Gbit/s carried.
	CPUPerGbps float64 `json:"cpu_pct_per_gbps"`
	// ForwarderCPUPct is the user-space forwarder's own CPU (the test
	// process for the no-op forwarders, the daemon for m2ho run), in
	// percent of one core; 0 for kernel forwarding.
	ForwarderCPUPct float64 `json:"forwarder_cpu_pct"`
	Retransmits     int64   `json:"retransmits"`
	Device          string  `json:"device,omitempty"`
	Note            string  `json:"note,omitempty"`
}

// cpuTicks reads the machine's busy and total jiffies from /proc/stat.
func cpuTicks() (busy, total uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// procTicks reads a process's user+system jiffies from /proc/pid/stat.
func procTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return u + k
}

// TestNetBench is `make netbench`: iperf3 CUBIC downloads (server ->
// laptop, -t 10) through the phone of one netns chain, in the same run:
// kernel forwarding, the no-op TUN forwarder (read -> write, no parsing)
// on water and on the offload device, and `m2ho run` in pass and m2ho
// modes on the offload device. In m2ho mode a stable serving cell report
// arrives every 500 ms so the controller is active (not in pass-through);
// it runs once with Eqn 2 (the default) and once without
// (--stable-rate=false), which isolates the packet path's own cost. It
// prints a table (ratios to the no-op forwarder on water and on the
// offload device) and writes bench-out/netbench.json. Throughput is a
// measurement, not an assertion. The targets: noop-offload >= 4x
// noop-water, m2ho >= 0.9x noop-offload, m2ho >= 5 Gbit/s.
func TestNetBench(t *testing.T) {
	if os.Getenv("M2HO_NETBENCH") == "" {
		t.Skip("set M2HO_NETBENCH=1 (make netbench): a 1.5-minute throughput measurement")
	}
	needKernel(t, "iperf3")
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("M2HO_NETBENCH_SECS")); err == nil && s > 0 {
		secs = s
	}
	// M2HO_NETBENCH_PPROF=dir writes CPU profiles of the no-op forwarder
	// on the offload device (this process) and of each m2ho run there.
	profDir := os.Getenv("M2HO_NETBENCH_PPROF")
	c := newChain(t)
	o := netns.Iperf3Options{Seconds: secs, CC: "cubic", Reverse: true}
	var rows []netbenchRow
	measure := func(name string, pid int) {
		b0, t0 := cpuTicks()
		p0 := procTicks(pid)
		start := time.Now()
		r, err := c.Iperf3(netns.Laptop, netns.Server, c.ServerAddr4, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b1, t1 := cpuTicks()
		p1 := procTicks(pid)
		row := netbenchRow{Name: name, Gbps: r.BitsPerSecond / 1e9, Retransmits: r.Retransmits}
		if t1 > t0 {
			// /proc/stat's first line sums all cores.
			row.CPUPct = float64(b1-b0) / float64(t1-t0) * 100 * float64(numCPU())
		}
		if pid > 0 {
			row.ForwarderCPUPct = float64(p1-p0) / 100 / time.Since(start).Seconds() * 100 // USER_HZ = 100
		}
		if row.Gbps > 0 {
			row.CPUPerGbps = row.CPUPct / row.Gbps
		}
		rows = append(rows, row)
	}

	measure("kernel", 0)

	for _, fw := range []struct {
		name string
		mode tun.OffloadMode
	}{{"noop-water", tun.OffloadOff}, {"noop-offload", tun.OffloadOn}} {
		f, err := netns.StartNoopForwarderOn(c, "m2honoop0", fw.mode)
		if err != nil {
			t.Fatal(err)
		}
		if profDir != "" && fw.mode == tun.OffloadOn {
			pf, err := os.Create(filepath.Join(profDir, "noop-offload.pprof"))
			if err != nil {
				t.Fatal(err)
			}
			pprof.StartCPUProfile(pf)
			measure(fw.name, os.Getpid())
			pprof.StopCPUProfile()
			pf.Close()
		} else {
			measure(fw.name, os.Getpid())
		}
		rows[len(rows)-1].Device = f.Device
		up, down := f.UplinkPackets.Load(), f.DownlinkPackets.Load()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if up == 0 || down == 0 {
			t.Fatalf("the %s run did not cross the forwarder (%d up, %d down)", fw.name, up, down)
		}
		rows[len(rows)-1].Note = fmt.Sprintf("%d down / %d up pkts", down, up)
	}

	runDaemonCase := func(name string, feed bool, args ...string) {
		pre := []string{"--tun-offload", "on"}
		if profDir != "" {
			pre = append(pre, "--cpu-profile", filepath.Join(profDir, strings.NewReplacer(" ", "", "=", "-").Replace(name)+".pprof"))
		}
		d := startDaemon(t, c, append(pre, args...)...)
		stopFeed := func() {}
		if feed {
			fd := dialFeeder(t, d)
			fd.send(t, periodic(cell88))
			stopFeed = fd.keepAlive(t, 500*time.Millisecond)
		}
		measure(name, d.cmd.Process.Pid)
		stopFeed()
		m := d.metrics()
		r := &rows[len(rows)-1]
		r.Device = "offload"
		r.Note = fmt.Sprintf("%.0f down / %.0f up pkts, %.0f rewrites, signal_lost %.0f",
			m[`m2ho_packets_total{dir="downlink"}`], m[`m2ho_packets_total{dir="uplink"}`],
			m[`m2ho_window_rewrites_total{reason="stable-rate"}`]+m[`m2ho_window_rewrites_total{reason="preparation"}`],
			m["m2ho_signal_lost"])
		if m[`m2ho_packets_total{dir="downlink"}`] == 0 {
			t.Errorf("%s: no packet crossed the engine; row %+v, metrics %v\nlog:\n%s", name, rows[len(rows)-1], m, d.stderr.String())
		}
		d.stop()
	}
	runDaemonCase("m2ho-pass", false, "--default-mode", "pass")
	runDaemonCase("m2ho", true, "--default-mode", "m2ho")
	runDaemonCase("m2ho --stable-rate=false", true, "--default-mode", "m2ho", "--stable-rate=false")

	gbps := map[string]float64{}
	for _, r := range rows {
		gbps[r.Name] = r.Gbps
	}
	ratio := func(a, b string) float64 {
		if gbps[b] == 0 {
			return 0
		}
		return gbps[a] / gbps[b]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nnetbench: iperf3 -C cubic -t %d -R (server -> laptop), one chain, in this order; %d CPUs\n\n", secs, numCPU())
	fmt.Fprintf(&b, "| path | Gbit/s | x noop-water | x noop-offload | CPU %% (machine) | CPU %% per Gbit/s | forwarder CPU %% | retransmits | notes |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.0f | %.1f | %.0f | %d | %s |\n", r.Name, r.Gbps, ratio(r.Name, "noop-water"),
			ratio(r.Name, "noop-offload"), r.CPUPct, r.CPUPerGbps, r.ForwarderCPUPct, r.Retransmits, r.Note)
	}
	fmt.Fprintf(&b, "\ntargets: noop-offload/noop-water %.2f (>= 4), m2ho/noop-offload %.2f (>= 0.9), m2ho %.2f Gbit/s (>= 5)\n",
		ratio("noop-offload", "noop-water"), ratio("m2ho", "noop-offload"), gbps["m2ho"])
	fmt.Print(b.String())

	dir := filepath.Join("..", "..", "bench-out")
	if v := os.Getenv("M2HO_NETBENCH_OUT"); v != "" {
		dir = v
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(struct {
		Rows []netbenchRow `json:"rows"`
	}{rows}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "netbench.json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, "netbench.json"))
}

func numCPU() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 1
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu") && len(l) > 3 && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	return max(n, 1)
}
