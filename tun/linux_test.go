//go:build linux

package tun

import (
	"bytes"
	"encoding/binary"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/m2ho/m2ho/tun/tuntest"
)

// enterTestNetns makes a fresh named network namespace, moves the calling
// goroutine's thread into it and returns its name. The thread stays locked
// and is discarded by the runtime when the test goroutine ends, so no other
// goroutine ever runs in the namespace.
func enterTestNetns(t *testing.T) string { return tuntest.EnterNetns(t, "m2ho-tuntest") }

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// udp4 builds an IPv4/UDP packet with a zero (absent) UDP checksum, which
// IPv4 allows.
func udp4(src, dst net.IP, sport, dport uint16, payload []byte) []byte {
	p := make([]byte, 28+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = unix.IPPROTO_UDP
	copy(p[12:16], src.To4())
	copy(p[16:20], dst.To4())
	binary.BigEndian.PutUint16(p[10:], ipv4Checksum(p[:20]))
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	copy(p[28:], payload)
	return p
}

// kernelDevices are the kernel TUN devices every device test runs on.
var kernelDevices = []struct {
	name  string
	open  func(name string, mtu int) (Device, error)
	batch int
}{
	{"water", func(name string, mtu int) (Device, error) {
		return OpenLinux(LinuxConfig{Name: name, MTU: mtu, BatchSize: 8})
	}, 8},
	{"offload", func(name string, mtu int) (Device, error) {
		return OpenOffload(OffloadConfig{Name: name, MTU: mtu})
	}, 128},
}

// TestKernelRoundTrip creates a real TUN in a private namespace, routes
// a /24 to it, and checks both directions through the kernel: a UDP
// datagram sent by a socket comes out of Read, and a packet given to Write
// is delivered to the socket. It runs on every kernel device.
func TestKernelRoundTrip(t *testing.T) {
	for _, kd := range kernelDevices {
		t.Run(kd.name, func(t *testing.T) { testKernelRoundTrip(t, kd.open, kd.batch) })
	}
}

func testKernelRoundTrip(t *testing.T, open func(string, int) (Device, error), batch int) {
	ns := enterTestNetns(t)
	dev, err := open("m2hotest0", 1400)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Name() != "m2hotest0" || dev.MTU() != 1400 || dev.BatchSize() != batch {
		t.Fatalf("device = %q mtu %d batch %d", dev.Name(), dev.MTU(), dev.BatchSize())
	}
	if out := run(t, "ip", "-n", ns, "link", "show", "m2hotest0"); !strings.Contains(out, "mtu 1400") {
		t.Fatalf("kernel does not report mtu 1400: %s", out)
	}
	run(t, "ip", "-n", ns, "addr", "add", "10.213.0.1/24", "dev", "m2hotest0")
	run(t, "ip", "-n", ns, "link", "set", "m2hotest0", "up")

	local := net.IPv4(10, 213, 0, 1)
	peer := net.IPv4(10, 213, 0, 2)
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: local})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lport := uint16(conn.LocalAddr().(*net.UDPAddr).Port)

	// Kernel → device.
	if _, err := conn.WriteToUDP([]byte("to-tun"), &net.UDPAddr{IP: peer, Port: 9999}); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(10*time.Second, func() { dev.Close() })
	defer timer.Stop()
	lay := LayoutOf(dev)
	off := max(4, lay.Headroom)
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, off+lay.BufSize)
	}
	sizes := make([]int, 8)
	found := false
	for !found {
		n, err := dev.Read(bufs, sizes, off)
		if err != nil {
			t.Fatalf("Read: %v (no UDP packet seen)", err)
		}
		for i := 0; i < n; i++ {
			p := bufs[i][off : off+sizes[i]]
			if len(p) >= 28 && p[0]>>4 == 4 && p[9] == unix.IPPROTO_UDP &&
				net.IP(p[16:20]).Equal(peer) && binary.BigEndian.Uint16(p[22:]) == 9999 {
				if !bytes.Equal(p[28:], []byte("to-tun")) || binary.BigEndian.Uint16(p[20:]) != lport {
					t.Fatalf("UDP packet from the kernel = % x", p)
				}
				found = true
			}
		}
	}

	// Device → kernel, with head-room in the buffer.
	pkt := udp4(peer, local, 9999, lport, []byte("from-tun"))
	buf := append(make([]byte, off), pkt...)
	if n, err := dev.Write([][]byte{buf}, off); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 100)
	n, from, err := conn.ReadFromUDP(got)
	if err != nil {
		t.Fatalf("the kernel did not deliver the written packet: %v", err)
	}
	if string(got[:n]) != "from-tun" || !from.IP.Equal(peer) || from.Port != 9999 {
		t.Fatalf("socket got %q from %v", got[:n], from)
	}
}

func TestLinuxSetMTURange(t *testing.T) {
	enterTestNetns(t)
	dev, err := OpenLinux(LinuxConfig{Name: "m2hotest1"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.MTU() != 1500 || dev.BatchSize() != 64 {
		t.Errorf("defaults: mtu %d batch %d, want 1500 64", dev.MTU(), dev.BatchSize())
	}
	if err := dev.SetMTU(20); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("SetMTU(20) = %v, want an out-of-range error", err)
	}
	if err := dev.SetMTU(9000); err != nil || dev.MTU() != 9000 {
		t.Errorf("SetMTU(9000) = %v, MTU %d", err, dev.MTU())
	}
}
