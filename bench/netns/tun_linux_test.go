//go:build linux

package netns

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/tun"
)

// transfer sends size pseudo-random bytes from a listener in the server
// namespace on dst to a client in the laptop namespace (downlink, as a
// download through the phone) and returns the SHA-256 of what was sent and
// of what arrived, and how many bytes arrived.
func transfer(c *Chain, dst netip.Addr, size int64) (sent, got [32]byte, n int64, err error) {
	var ln net.Listener
	if err = c.Do(Server, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(dst, 0).String())
		return err
	}); err != nil {
		return
	}
	defer ln.Close()
	sentc := make(chan [32]byte, 1)
	errc := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer conn.Close()
		h := sha256.New()
		src := io.LimitReader(rand.NewChaCha8([32]byte{7}), size)
		_, err = io.Copy(io.MultiWriter(conn, h), src)
		errc <- err
		sentc <- [32]byte(h.Sum(nil))
	}()
	var conn net.Conn
	if err = c.Do(Laptop, func() (err error) {
		conn, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	h := sha256.New()
	n, err = io.Copy(h, conn)
	if err != nil {
		return
	}
	got = [32]byte(h.Sum(nil))
	if err = <-errc; err != nil {
		return
	}
	sent = <-sentc
	return
}

const mb = 1 << 20

func TestKernelForwardingTransfer(t *testing.T) {
	need(t)
	c := newChain(t, false)
	for _, tc := range []struct {
		dst  netip.Addr
		size int64
	}{{c.ServerAddr4, 20 * mb}, {c.ServerAddr6, 2 * mb}} {
		sent, got, n, err := transfer(c, tc.dst, tc.size)
		if err != nil {
			t.Fatalf("%s: %v", tc.dst, err)
		}
		if n != tc.size || sent != got {
			t.Errorf("%s: received %d bytes sha256 %x, sent %d sha256 %x", tc.dst, n, got, tc.size, sent)
		}
	}
}

func cmdOut(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "FIB table does not exist") {
		t.Fatalf("%v: %v: %s", cmd.Args, err, out)
	}
	if err != nil {
		return ""
	}
	return string(out)
}

// TestNoopTUNForwarderTransfer is the packet path of DESIGN.md with a
// forwarder that changes nothing: every packet of both directions must
// cross the TUN, TCP must deliver 20 MB intact, and Close must leave no
// rule, route, link or namespace behind. It runs on water and on the
// offload device; there the transfers cross the TUN as 64 KiB frames, split
// into MSS-sized packets on read and merged again on write.
func TestNoopTUNForwarderTransfer(t *testing.T) {
	for _, m := range []tun.OffloadMode{tun.OffloadOff, tun.OffloadOn} {
		t.Run(map[tun.OffloadMode]string{tun.OffloadOff: "water", tun.OffloadOn: "offload"}[m], func(t *testing.T) {
			testNoopTUNForwarderTransfer(t, m)
		})
	}
}

func testNoopTUNForwarderTransfer(t *testing.T, mode tun.OffloadMode) {
	need(t)
	// Unique, so that the host check below cannot see another test's TUN.
	tunName := fmt.Sprintf("m2t%d", os.Getpid())
	nsBefore := listNetns(t)
	c, err := NewChain(testPrefix, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	phone := func(args ...string) string { return cmdOut(t, c.Exec(Phone, args...)) }
	state := func() string {
		return phone("ip", "-4", "rule") + phone("ip", "-6", "rule") +
			phone("ip", "-4", "route", "show", "table", "100") + phone("ip", "-6", "route", "show", "table", "100") +
			phone("ip", "-o", "link", "show")
	}
	before := state()

	f, err := StartNoopForwarderOn(c, tunName, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(f.Device)
	for _, d := range f.Routing() {
		t.Log(d)
	}
	// The TUN opened from the test process (in DoPath) lives in the phone.
	if links := phone("ip", "-o", "link", "show"); !strings.Contains(links, tunName+":") {
		t.Errorf("TUN %s is not in the phone namespace; its links:\n%s", tunName, links)
	}
	if out, err := exec.Command("ip", "link", "show", "dev", tunName).CombinedOutput(); err == nil {
		t.Errorf("TUN appeared in the host namespace:\n%s", out)
	}
	if routes := phone("ip", "-4", "route", "show", "table", "100"); !strings.Contains(routes, "default dev "+tunName) {
		t.Fatalf("no default route into the TUN %s in table 100; the table:\n%s", tunName, routes)
	}
	for _, tc := range []struct {
		dst  netip.Addr
		size int64
	}{{c.ServerAddr4, 20 * mb}, {c.ServerAddr6, 2 * mb}} {
		up0, down0 := f.UplinkPackets.Load(), f.DownlinkBytes.Load()
		sent, got, n, err := transfer(c, tc.dst, tc.size)
		if err != nil {
			t.Fatalf("%s through the TUN: %v", tc.dst, err)
		}
		if n != tc.size || sent != got {
			t.Errorf("%s: received %d bytes sha256 %x, sent %d sha256 %x", tc.dst, n, got, tc.size, sent)
		}
		up, down := f.UplinkPackets.Load()-up0, f.DownlinkBytes.Load()-down0
		t.Logf("%s: forwarder saw %d uplink packets, %d downlink bytes", tc.dst, up, down)
		// Every payload byte crossed the TUN, plus headers.
		if down < tc.size {
			t.Errorf("%s: forwarder saw %d downlink bytes, fewer than the %d transferred", tc.dst, down, tc.size)
		}
		if up == 0 {
			t.Errorf("%s: forwarder saw no uplink packets (ACKs)", tc.dst)
		}
	}
	if od, ok := f.dev.(*tun.Offload); ok {
		st := od.Stats()
		t.Logf("offload device: %+v", st)
		if st.Segments <= 2*st.Frames {
			t.Errorf("offload device: %d packets from %d frames: the kernel's large frames were not split", st.Segments, st.Frames)
		}
	} else if mode == tun.OffloadOn {
		t.Errorf("forwarder opened %T with offloads on", f.dev)
	}
	if o, w := f.OtherPackets.Load(), f.WriteErrors.Load(); o != 0 || w != 0 {
		t.Errorf("forwarder: %d packets not to/from the laptop, %d write errors", o, w)
	}
	t.Logf("forwarder: %d link-local/multicast packets (the phone's MLD reports)", f.LinkLocalPackets.Load())
	if err := f.Close(); err != nil {
		t.Fatalf("forwarder Close: %v", err)
	}
	if after := state(); after != before {
		t.Errorf("phone state after Close:\n%s\nbefore:\n%s", after, before)
	}
	// Kernel forwarding works again without the TUN.
	if err := hello(c, c.ServerAddr4); err != nil {
		t.Errorf("after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listNetns(t); after != nsBefore {
		t.Errorf("ip netns list after:\n%s\nbefore:\n%s", after, nsBefore)
	}
}

func TestForwarderCountAllocatesNothing(t *testing.T) {
	f := &NoopForwarder{laptop4: laptop4, laptop6: laptop6}
	p4 := make([]byte, 40)
	p4[0] = 0x45
	copy(p4[12:16], server2x4.AsSlice())
	copy(p4[16:20], laptop4.AsSlice())
	p6 := make([]byte, 60)
	p6[0] = 0x60
	copy(p6[8:24], laptop6.AsSlice())
	copy(p6[24:40], server2x6.AsSlice())
	mld := make([]byte, 76)
	mld[0] = 0x60
	copy(mld[8:24], netip.MustParseAddr("fe80::1").AsSlice())
	copy(mld[24:40], netip.MustParseAddr("ff02::16").AsSlice())
	allocs := testing.AllocsPerRun(100, func() {
		f.count(p4)
		f.count(p6)
		f.count(mld)
		f.count(p4[:10])
	})
	if allocs != 0 {
		t.Errorf("count allocates %v per run", allocs)
	}
	if f.DownlinkPackets.Load() != 101 || f.UplinkPackets.Load() != 101 || f.LinkLocalPackets.Load() != 101 || f.OtherPackets.Load() != 101 {
		t.Errorf("down %d up %d link-local %d other %d, want 101 each", f.DownlinkPackets.Load(), f.UplinkPackets.Load(), f.LinkLocalPackets.Load(), f.OtherPackets.Load())
	}
}

func needIperf3(t *testing.T) {
	t.Helper()
	need(t)
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 is not installed (apt-get install iperf3)")
	}
}

func TestIperf3Smoke(t *testing.T) {
	needIperf3(t)
	c := newChain(t, false)
	r, err := c.Iperf3(Laptop, Server, c.ServerAddr4, Iperf3Options{Seconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.BitsPerSecond <= 0 || r.ReceivedBytes <= 0 {
		t.Errorf("iperf3 result %+v", r)
	}
	t.Logf("kernel forwarding, 1 s: %.2f Gbit/s", r.BitsPerSecond/1e9)
	// A server address that is not in the chain must fail clearly.
	if _, err := c.Iperf3(Laptop, Server, netip.MustParseAddr("10.77.99.1"), Iperf3Options{Seconds: 1}); err == nil {
		t.Errorf("iperf3 against an address the server lacks succeeded: %+v", r)
	}
}

// TestNetBench measures, in one run, iperf3 CUBIC laptop -> server through
// kernel forwarding and through the no-op TUN forwarder, and reports the
// ratio. Enable with M2HO_NETBENCH=1; M2HO_NETBENCH_SECS sets -t (10);
// M2HO_NETBENCH_REVERSE=1 adds -R (server -> laptop, the download).
func TestNetBench(t *testing.T) {
	if os.Getenv("M2HO_NETBENCH") != "1" {
		t.Skip("set M2HO_NETBENCH=1 to measure forwarding throughput")
	}
	needIperf3(t)
	secs := 10
	if s := os.Getenv("M2HO_NETBENCH_SECS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("M2HO_NETBENCH_SECS=%q: want a positive number of seconds", s)
		}
		secs = v
	}
	opt := Iperf3Options{Seconds: secs, CC: "cubic", Reverse: os.Getenv("M2HO_NETBENCH_REVERSE") == "1"}
	dir := "laptop->server"
	if opt.Reverse {
		dir = "server->laptop (-R)"
	}
	res, err := MeasureForwarding(testPrefix, "m2ho0", opt)
	if err != nil {
		t.Fatal(err)
	}
	kernel, viaTUN := res.Kernel, res.NoopTUN
	report := fmt.Sprintf("iperf3 -C cubic -t %d %s: kernel forwarding %.2f Gbit/s (%d retransmits), no-op TUN forwarder %.3f Gbit/s (%d retransmits), ratio kernel/TUN %.1f",
		secs, dir, kernel.BitsPerSecond/1e9, kernel.Retransmits, viaTUN.BitsPerSecond/1e9, viaTUN.Retransmits, kernel.BitsPerSecond/viaTUN.BitsPerSecond)
	t.Log(report)
	fmt.Println("NETBENCH:", report)
}
