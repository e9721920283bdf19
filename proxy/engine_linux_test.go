//go:build linux

package proxy

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/tun"
	"github.com/m2ho/m2ho/tun/tuntest"
)

// The kernel harness: in a namespace of its own, the engine's TUN
// (m2hoeng0) and a harness TUN (m2hohar0) of the same kind, routed like
// the phone (DESIGN.md "Packet path"): what the harness writes arrives
// from m2hohar0 and is sent into the engine's TUN by the policy rule; what
// the engine writes back leaves through the main table, back to the
// harness. The kernel lowers the TTL twice (and redoes the IPv4 header
// checksum); recv undoes that so packets compare byte for byte.
func init() {
	engineDevices = append(engineDevices,
		engineDevice{name: "water", open: func(t *testing.T) (tun.Device, func([][]byte), func(int) [][]byte) {
			return kernelHarness(t, tun.OffloadOff)
		}},
		engineDevice{name: "offload", open: func(t *testing.T) (tun.Device, func([][]byte), func(int) [][]byte) {
			return kernelHarness(t, tun.OffloadOn)
		}})
}

func enterTestNetns(t *testing.T) string { return tuntest.EnterNetns(t, "m2ho-proxytest") }

func ipRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func kernelHarness(t *testing.T, mode tun.OffloadMode) (tun.Device, func([][]byte), func(int) [][]byte) {
	ns := enterTestNetns(t)
	open := func(name string) tun.Device {
		d, _, err := tun.Open(tun.Config{Name: name, MTU: 1500, Offload: mode})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	eng, har := open("m2hoeng0"), open("m2hohar0")
	ip := func(args ...string) { ipRun(t, append([]string{"ip", "-n", ns}, args...)...) }
	sysctl := func(kv string) { ipRun(t, "ip", "netns", "exec", ns, "sysctl", "-qw", kv) }
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.all.send_redirects=0", "net.ipv6.conf.all.forwarding=1"} {
		sysctl(kv)
	}
	for _, n := range []string{"m2hoeng0", "m2hohar0"} {
		ip("link", "set", n, "up")
		sysctl("net.ipv4.conf." + n + ".rp_filter=0")
	}
	// Harness → engine: everything from the harness TUN goes to table 100.
	ip("route", "add", "default", "dev", "m2hoeng0", "table", "100")
	ip("rule", "add", "iif", "m2hohar0", "lookup", "100", "pref", "1000")
	// Engine → harness: the main table routes laptop and server back.
	ip("route", "add", netip.PrefixFrom(laptop4.Addr(), 24).Masked().String(), "dev", "m2hohar0")
	ip("route", "add", netip.PrefixFrom(server4.Addr(), 24).Masked().String(), "dev", "m2hohar0")

	lay := tun.LayoutOf(har)
	off := lay.Headroom
	wbufs := make([][]byte, har.BatchSize())
	for i := range wbufs {
		wbufs[i] = make([]byte, off+lay.BufSize)
	}
	send := func(ps [][]byte) {
		out := make([][]byte, len(ps))
		for i, p := range ps {
			q := wbufs[i][:off+copy(wbufs[i][off:], p)]
			q[off+8] += 2 // the two hops take two off the TTL
			fixIPv4Checksum(q[off:])
			out[i] = q
		}
		if n, err := har.Write(out, off); n != len(out) || err != nil {
			t.Fatalf("harness Write = %d, %v", n, err)
		}
	}
	rbufs := make([][]byte, har.BatchSize())
	for i := range rbufs {
		rbufs[i] = make([]byte, off+lay.BufSize)
	}
	sizes := make([]int, len(rbufs))
	var pending [][]byte
	recv := func(n int) [][]byte {
		timer := time.AfterFunc(10*time.Second, func() { har.Close() })
		defer timer.Stop()
		for len(pending) < n {
			k, err := har.Read(rbufs, sizes, off)
			if err != nil {
				t.Fatalf("harness Read after %d of %d packets: %v", len(pending), n, err)
			}
			for i := 0; i < k; i++ {
				p := rbufs[i][off : off+sizes[i]]
				if len(p) < 20 || p[0]>>4 != 4 {
					continue // the kernel's own IPv6 router and listener traffic
				}
				pending = append(pending, append([]byte(nil), p...))
			}
		}
		out := pending[:n]
		pending = pending[n:]
		return out
	}
	return eng, send, recv
}
