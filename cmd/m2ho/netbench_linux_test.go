//go:build linux

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/bench/netns"
)

// TestNetBench is `make netbench`: iperf3 CUBIC downloads (server ->
// laptop, -t 10) through the phone of one netns chain, in the same run:
// kernel forwarding, the no-op TUN forwarder (read -> write, no parsing),
// and `m2ho run` in pass and m2ho modes. In m2ho mode a stable serving
// cell report arrives every 500 ms so the controller is active (not in
// pass-through); it runs once with Eqn 2 (the default) and once without
// (--stable-rate=false), which isolates the packet path's own cost. It
// prints a table with the ratio to the no-op forwarder; the target
// is m2ho mode >= 0.9x. Throughput is a measurement, not an assertion.
func TestNetBench(t *testing.T) {
	if os.Getenv("M2HO_NETBENCH") == "" {
		t.Skip("set M2HO_NETBENCH=1 (make netbench): a 1-minute throughput measurement")
	}
	needKernel(t, "iperf3")
	secs := 10
	c := newChain(t)
	o := netns.Iperf3Options{Seconds: secs, CC: "cubic", Reverse: true}
	type row struct {
		name string
		res  netns.Iperf3Result
		note string
	}
	var rows []row
	measure := func(name, note string) {
		r, err := c.Iperf3(netns.Laptop, netns.Server, c.ServerAddr4, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rows = append(rows, row{name, r, note})
	}

	measure("kernel forwarding", "")

	f, err := netns.StartNoopForwarder(c, "m2honoop0")
	if err != nil {
		t.Fatal(err)
	}
	measure("no-op TUN forwarder", "")
	up, down := f.UplinkPackets.Load(), f.DownlinkPackets.Load()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if up == 0 || down == 0 {
		t.Fatalf("the no-op run did not cross the forwarder (%d up, %d down); iperf3 %+v", up, down, rows[len(rows)-1].res)
	}

	runDaemonCase := func(name string, feed bool, args ...string) {
		d := startDaemon(t, c, args...)
		var stop chan struct{}
		done := make(chan struct{})
		if feed {
			fd := dialFeeder(t, d)
			fd.send(t, periodic(cell88))
			stop = make(chan struct{})
			go func() {
				defer close(done)
				tk := time.NewTicker(500 * time.Millisecond)
				defer tk.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tk.C:
						fd.send(t, periodic(cell88))
					}
				}
			}()
		}
		measure(name, "")
		if feed {
			close(stop)
			<-done
		}
		m := d.metrics()
		rows[len(rows)-1].note = fmt.Sprintf("%.0f down / %.0f up pkts, %.0f rewrites, signal_lost %.0f",
			m[`m2ho_packets_total{dir="downlink"}`], m[`m2ho_packets_total{dir="uplink"}`],
			m[`m2ho_window_rewrites_total{reason="stable-rate"}`]+m[`m2ho_window_rewrites_total{reason="preparation"}`],
			m["m2ho_signal_lost"])
		if m[`m2ho_packets_total{dir="downlink"}`] == 0 {
			t.Errorf("%s: no packet crossed the engine; iperf3 %+v, metrics %v\nlog:\n%s", name, rows[len(rows)-1].res, m, d.stderr.String())
		}
		d.stop()
	}
	runDaemonCase("m2ho run, pass", false, "--default-mode", "pass")
	runDaemonCase("m2ho run, m2ho", true, "--default-mode", "m2ho")
	runDaemonCase("m2ho run, m2ho --stable-rate=false", true, "--default-mode", "m2ho", "--stable-rate=false")

	noop := rows[1].res.BitsPerSecond
	var b strings.Builder
	fmt.Fprintf(&b, "\nnetbench: iperf3 -C cubic -t %d -R (server -> laptop), one chain, in this order\n\n", secs)
	fmt.Fprintf(&b, "| path | Gbit/s | x no-op | retransmits | engine counters |\n|---|---:|---:|---:|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %d | %s |\n", r.name, r.res.BitsPerSecond/1e9, r.res.BitsPerSecond/noop, r.res.Retransmits, r.note)
	}
	fmt.Print(b.String())
}
