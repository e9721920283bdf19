//go:build linux

package tun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The loop tests write packets from 10.215.0.2 (behind the TUN) to
// 10.215.1.9 (routed back into the TUN): the kernel forwards what the
// device writes straight back to it, with the TTL lowered by one. Merged
// segments travel through the kernel as one GSO packet and are split again
// by Read, so a round trip exercises the device's coalescing and the
// kernel's and wireguard-go's segmentation without any socket.
var (
	loopSrc = netip.MustParseAddrPort("10.215.0.2:40000")
	loopDst = netip.MustParseAddrPort("10.215.1.9:443")
	loopAck = netip.MustParseAddrPort("10.215.0.2:40001")
)

// openLoop makes a namespace with an offload TUN set up for the loop.
func openLoop(t *testing.T, name string) *Offload {
	t.Helper()
	ns := enterTestNetns(t)
	d, err := OpenOffload(OffloadConfig{Name: name, MTU: 1500})
	if err != nil {
		t.Fatalf("OpenOffload: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	run(t, "ip", "-n", ns, "addr", "add", "10.215.0.1/24", "dev", name)
	run(t, "ip", "-n", ns, "link", "set", name, "up")
	run(t, "ip", "-n", ns, "route", "add", "10.215.1.0/24", "dev", name)
	for _, kv := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0",
		"net.ipv4.conf." + name + ".rp_filter=0", "net.ipv4.conf.all.send_redirects=0",
		"net.ipv4.conf." + name + ".send_redirects=0"} {
		run(t, "ip", "netns", "exec", ns, "sysctl", "-qw", kv)
	}
	return d
}

// loopBufs returns n buffers laid out as the device asks.
func loopBufs(d Device, n int) [][]byte {
	l := LayoutOf(d)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, l.Headroom+l.BufSize)
	}
	return bufs
}

// withHeadroom copies packets into device buffers at offset off.
func withHeadroom(bufs [][]byte, ps [][]byte, off int) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		out[i] = bufs[i][:off+copy(bufs[i][off:], p)]
	}
	return out
}

// readN reads until n packets to loopDst's network arrived (others, such
// as IPv6 router solicitations, are skipped) or the deadline passes.
func readN(t *testing.T, d Device, n int, off int) [][]byte {
	t.Helper()
	timer := time.AfterFunc(10*time.Second, func() { d.Close() })
	defer timer.Stop()
	bufs := loopBufs(d, d.BatchSize())
	sizes := make([]int, len(bufs))
	var got [][]byte
	for len(got) < n {
		k, err := d.Read(bufs, sizes, off)
		if err != nil {
			t.Fatalf("Read after %d of %d packets: %v", len(got), n, err)
		}
		for i := 0; i < k; i++ {
			p := bufs[i][off : off+sizes[i]]
			if len(p) >= 20 && p[0]>>4 == 4 && netip.AddrFrom4([4]byte(p[16:20])) == loopDst.Addr() {
				got = append(got, append([]byte(nil), p...))
			}
		}
	}
	return got
}

// forwarded is p as the kernel forwards it: TTL lowered, checksums redone.
func forwarded(p []byte) []byte {
	q := append([]byte(nil), p...)
	q[8]--
	fixChecksums(q)
	return q
}

// loopPayload fills a 1460-byte IPv4 packet with timestamps.
const loopPayload = 1460 - 20 - 32

// loopBatch is 24 in-order data segments of one flow (the proxy lowered
// the window of segments 9..11 and 20), with 8 pure ACKs of another
// connection, windows falling, in between.
func loopBatch() [][]byte {
	var ps [][]byte
	ack := 0
	for i := 0; i < 24; i++ {
		p := tcpPacket(seg{src: loopSrc, dst: loopDst, seq: 5000 + uint32(i*loopPayload), ack: 9, flags: 0x10,
			window: 2000, id: uint16(300 + i), opts: tcpTSOpts(4, 5), payloadLen: loopPayload, fill: byte(i)})
		if (i >= 9 && i <= 11) || i == 20 {
			setWindow(p, 1500-uint16(i))
		}
		ps = append(ps, p)
		if i%3 == 1 {
			ps = append(ps, tcpPacket(seg{src: loopAck, dst: loopDst, seq: 1, ack: uint32(1000 * ack), flags: 0x10,
				window: uint16(900 - ack), id: uint16(ack)}))
			ack++
		}
	}
	return ps
}

func TestOffloadLoopKeepsEveryByte(t *testing.T) {
	d := openLoop(t, "m2hoofl0")
	ps := loopBatch()
	bufs := loopBufs(d, len(ps))
	for _, off := range []int{VirtioNetHdrLen, 32, 0} { // 0: the device copies into head-room of its own
		t.Run(fmt.Sprintf("offset %d", off), func(t *testing.T) {
			before := d.Stats()
			if n, err := d.Write(withHeadroom(bufs, ps, off), off); n != len(ps) || err != nil {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(ps))
			}
			got := readN(t, d, len(ps), off)
			want := make([][]byte, len(ps))
			for i, p := range ps {
				want[i] = forwarded(p)
			}
			if err := sameFlows(got, want); err != nil {
				t.Fatal(err)
			}
			s := d.Stats()
			// Runs: [0..9) [9..12) [12..20) [20] [21..] at least; the
			// data segments of a run come back as one frame.
			if runs := s.Runs - before.Runs; runs < 5 {
				t.Errorf("%d runs; the lowered windows must cut the batch at least 4 times", runs)
			}
			if frames, segs := s.Frames-before.Frames, s.Segments-before.Segments; frames >= segs {
				t.Errorf("%d frames for %d packets: nothing was merged and split again", frames, segs)
			}
		})
	}
}

// TestWireguardMergesAwayWindows documents the hazard the runs exist for:
// given the batch in one call, wireguard-go merges data segments whose
// windows differ, and the kernel gives every piece the head's window, so
// the proxy's lowered windows come back raised. If this test fails,
// wireguard-go learnt to compare windows and the runs cost nothing.
func TestWireguardMergesAwayWindows(t *testing.T) {
	d := openLoop(t, "m2hoofl1")
	ps := loopBatch()
	bufs := loopBufs(d, len(ps))
	if _, err := d.dev.Write(withHeadroom(bufs, ps, VirtioNetHdrLen), VirtioNetHdrLen); err != nil {
		t.Fatal(err)
	}
	got := readN(t, d, len(ps), VirtioNetHdrLen)
	raised := 0
	for _, p := range got {
		if netip.AddrFrom4([4]byte(p[12:16])) == loopSrc.Addr() && binary.BigEndian.Uint16(p[20:]) == loopSrc.Port() {
			seq := binary.BigEndian.Uint32(p[24:])
			i := int(seq-5000) / loopPayload
			if w := tcpWindow(p); w != tcpWindow(ps[i+(i+1)/3]) {
				raised++
			}
		}
	}
	if raised == 0 {
		t.Errorf("wireguard-go kept every window of a merged batch; the runs in group.go are no longer needed")
	}
	t.Logf("wireguard-go alone: %d of 24 data segments came back with another window", raised)
}

// TestOffloadReadCompletesPartialChecksums: a local TCP socket sends
// through the TUN with checksum offload, so the kernel hands frames with
// NEEDS_CSUM (only the pseudo-header sum in the checksum field) and large
// GSO frames. Every packet Read returns must carry a complete, valid
// checksum, so the proxy's RFC 1624 update stays exact.
func TestOffloadReadCompletesPartialChecksums(t *testing.T) {
	d := openLoop(t, "m2hoofl2")
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	peer := netip.MustParseAddrPort("10.215.1.7:80")
	err = unix.Connect(fd, &unix.SockaddrInet4{Addr: peer.Addr().As4(), Port: int(peer.Port())})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		t.Fatal(err)
	}
	off := VirtioNetHdrLen
	bufs := loopBufs(d, d.BatchSize())
	sizes := make([]int, len(bufs))
	timer := time.AfterFunc(10*time.Second, func() { d.Close() })
	defer timer.Stop()
	next := func() [][]byte {
		for {
			n, err := d.Read(bufs, sizes, off)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			var ps [][]byte
			for i := 0; i < n; i++ {
				p := bufs[i][off : off+sizes[i]]
				if p[0]>>4 == 4 && p[9] == 6 && netip.AddrFrom4([4]byte(p[16:20])) == peer.Addr() {
					ps = append(ps, append([]byte(nil), p...))
				}
			}
			if len(ps) > 0 {
				return ps
			}
		}
	}
	syn := next()[0]
	if !checksumsValid(syn) {
		t.Fatalf("SYN from Read has an incomplete checksum: % x", syn)
	}
	// Complete the handshake as the peer: SYN-ACK with MSS 1400.
	local := netip.AddrPortFrom(netip.AddrFrom4([4]byte(syn[12:16])), binary.BigEndian.Uint16(syn[20:]))
	iss := binary.BigEndian.Uint32(syn[24:])
	synack := tcpPacket(seg{src: peer, dst: local, seq: 77, ack: iss + 1, flags: 0x12, window: 65535,
		opts: []byte{2, 4, 0x05, 0x78}})
	wb := loopBufs(d, 1)
	if _, err := d.Write(withHeadroom(wb, [][]byte{synack}, off), off); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("m2ho offload "), 3000) // 39 kB: one GSO frame or a few
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := unix.Write(fd, payload)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.ENOTCONN) || time.Now().After(deadline) {
			t.Fatalf("write to the socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Unacknowledged, the sender sends its initial window (10 segments)
	// and then only retransmissions.
	var data int
	var pieces, frames int
	for pieces < 10 {
		ps := next()
		frames++
		for _, p := range ps {
			if !checksumsValid(p) {
				t.Fatalf("segment with an invalid checksum from Read: % x", p[:60])
			}
			if len(p) > d.MTU() {
				t.Fatalf("a %d-byte packet from Read, above the MTU", len(p))
			}
			plen := len(p) - 20 - int(p[32]>>4)*4
			data += plen
			if plen > 0 {
				pieces++
				// The proxy's update on what Read gave stays exact.
				setWindow(p, tcpWindow(p)/2)
				if !checksumsValid(p) {
					t.Fatalf("RFC 1624 update of a Read segment is not exact")
				}
			}
		}
	}
	t.Logf("%d bytes in %d segments from %d reads", data, pieces, frames)
	if pieces <= frames {
		t.Logf("the kernel sent no GSO frame (small window or no TSO); the split was not exercised here")
	}
}

// TestPartialChecksumAndRFC1624 pins the checksum contract: an RFC 1624
// update is exact on a complete checksum, and wrong on the pseudo-header
// partial sum a NEEDS_CSUM frame carries (the kernel would then add the
// new window to a sum that already accounts for it). So the device must
// complete checksums before the proxy sees a packet, as wireguard-go's
// Read does.
func TestPartialChecksumAndRFC1624(t *testing.T) {
	p := tcpPacket(seg{src: loopSrc, dst: loopDst, seq: 1, ack: 2, flags: 0x10, window: 5000, payloadLen: 333, fill: 3})
	full := append([]byte(nil), p...)
	setWindow(full, 1234)
	if !checksumsValid(full) {
		t.Fatal("RFC 1624 on a complete checksum is not exact")
	}
	// The partial form: the folded pseudo-header sum, not complemented.
	part := append([]byte(nil), p...)
	off := l4Off(part)
	binary.BigEndian.PutUint16(part[off+16:], csumFold(pseudo(part, 6, len(part)-off)))
	complete := func(q []byte) { // what the kernel (or wireguard-go) does with NEEDS_CSUM
		binary.BigEndian.PutUint16(q[off+16:], ^csumFold(csumAdd(0, q[off:])))
	}
	wrong := append([]byte(nil), part...)
	setWindow(wrong, 1234)
	complete(wrong)
	if checksumsValid(wrong) {
		t.Fatal("an RFC 1624 update of a partial checksum came out valid; the contract above is wrong")
	}
	right := append([]byte(nil), part...)
	complete(right)
	setWindow(right, 1234)
	if !bytes.Equal(right, full) {
		t.Fatal("completing, then updating, differs from updating a complete checksum")
	}
}

// TestOffloadSteadyStateAllocs: a batch written and read back through the
// kernel, again and again, allocates nothing in the device.
func TestOffloadSteadyStateAllocs(t *testing.T) {
	d := openLoop(t, "m2hoofl3")
	ps := loopBatch()
	off := VirtioNetHdrLen
	wbufs := loopBufs(d, len(ps))
	rbufs := loopBufs(d, d.BatchSize())
	sizes := make([]int, len(rbufs))
	out := make([][]byte, len(ps))
	round := func() {
		for i, p := range ps {
			out[i] = wbufs[i][:off+copy(wbufs[i][off:], p)]
		}
		if n, err := d.Write(out, off); n != len(ps) || err != nil {
			panic(fmt.Sprintf("Write = %d, %v", n, err))
		}
		for got := 0; got < len(ps); {
			n, err := d.Read(rbufs, sizes, off)
			if err != nil {
				panic(err)
			}
			for i := 0; i < n; i++ {
				p := rbufs[i][off : off+sizes[i]]
				if p[0]>>4 == 4 && netip.AddrFrom4([4]byte(p[16:20])) == loopDst.Addr() {
					got++
				}
			}
		}
	}
	timer := time.AfterFunc(30*time.Second, func() { d.Close() })
	defer timer.Stop()
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Errorf("a batch of %d through the offload device allocates %.1f times", len(ps), allocs)
	}
}

func TestOpenModes(t *testing.T) {
	ns := enterTestNetns(t)
	for _, tc := range []struct {
		mode    OffloadMode
		offload bool
	}{{OffloadAuto, true}, {OffloadOn, true}, {OffloadOff, false}} {
		name := "m2hoopen" + tc.mode.String()
		d, note, err := Open(Config{Name: name, MTU: 1400, Offload: tc.mode})
		if err != nil {
			t.Fatalf("Open(%s): %v", tc.mode, err)
		}
		_, isOffload := d.(*Offload)
		if isOffload != tc.offload || d.Name() != name || d.MTU() != 1400 {
			t.Errorf("Open(%s) = %T %q mtu %d (%s)", tc.mode, d, d.Name(), d.MTU(), note)
		}
		if tc.offload != strings.HasPrefix(note, "offload") {
			t.Errorf("Open(%s) note %q", tc.mode, note)
		}
		if out := run(t, "ip", "-n", ns, "link", "show", name); !strings.Contains(out, "mtu 1400") {
			t.Errorf("kernel: %s", out)
		}
		d.Close()
	}
	if _, _, err := Open(Config{Offload: OffloadMode(7)}); err == nil {
		t.Error("Open with mode 7 succeeded")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("this Linux has no TUN driver (%v): the device modes were not opened", err)
	}
}

func TestOffloadRefusesShortBuffers(t *testing.T) {
	d := openLoop(t, "m2hoofl4")
	if l := LayoutOf(d); l.Headroom != VirtioNetHdrLen || l.BufSize != MaxSegment {
		t.Errorf("LayoutOf(offload) = %+v", l)
	}
	if _, err := d.Read([][]byte{make([]byte, 10+1000)}, []int{0}, 10); !errors.Is(err, ErrTooBig) || !IsPacketError(err) {
		t.Errorf("Read into a buffer below the MTU = %v, want ErrTooBig", err)
	}
	ps := loopBatch()[:3]
	bufs := withHeadroom(loopBufs(d, 3), ps, 10)
	bufs[1] = bufs[1][:10]
	n, err := d.Write(bufs, 10)
	if n != 1 || !errors.Is(err, ErrTooBig) {
		t.Errorf("Write with an empty packet at 1 = %d, %v; want 1, ErrTooBig", n, err)
	}
	got := readN(t, d, 1, 10)
	if !bytes.Equal(got[0], forwarded(ps[0])) {
		t.Errorf("the packet before the refused one was not written")
	}
}

// FuzzOffloadKernelLoop drives the whole device through the kernel: a
// fuzzed batch as the proxy writes it (genBatch: segments of four IPv4
// connections, verdicts applied) goes through Write (runs, wireguard-go's
// merge, the kernel's GSO), is forwarded back by the kernel and read with
// Read (the virtio-net header, wireguard-go's split). What comes back must
// be the batch, per connection in order, byte for byte but for the TTL the
// kernel lowers: so checksums are valid, no window is raised, nothing but
// the dropped pure ACKs is missing and nothing is revived. Needs root;
// with -fuzz each worker makes its own namespace.
func FuzzOffloadKernelLoop(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x00, 0x3f, 0x00, 0x00, 0x3f, 0x01, 0x00, 0x3f, 0x00, 0x01, 0x00, 0x02, 0x00, 0x3f, 0x05, 0x00, 0x3f, 0x00})
	f.Add([]byte{0x10, 0xbf, 0x02, 0x11, 0x80, 0x44, 0x90, 0x05, 0x11, 0x20, 0x3f, 0x01, 0x20, 0x3f, 0x00, 0x08, 0x3f, 0x00})
	if os.Geteuid() != 0 {
		f.Skip("needs root (CAP_NET_ADMIN) to create a TUN device and a network namespace")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := sharedLoop()
		if err != nil {
			t.Fatalf("setting up the kernel loop (offload TUN in its own namespace, as root): %v", err)
		}
		ports := []uint16{1000, 1001, 1002, 1003}
		flows := fuzzFlows()
		for i, fl := range flows {
			fl.src = netip.AddrPortFrom(loopSrc.Addr(), ports[i])
		}
		batch := genBatch(data, flows, loopDst, loopDst)
		if len(batch) == 0 {
			return
		}
		bufs := loopBufs(d, len(batch))
		if n, err := d.Write(withHeadroom(bufs, batch, VirtioNetHdrLen), VirtioNetHdrLen); n != len(batch) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		got := readN(t, d, len(batch), VirtioNetHdrLen)
		want := make([][]byte, len(batch))
		for i, p := range batch {
			want[i] = forwarded(p)
		}
		for i, p := range got {
			if !checksumsValid(p) {
				t.Fatalf("packet %d back from the kernel: invalid checksum", i)
			}
		}
		if err := sameFlows(got, want); err != nil {
			t.Fatal(err)
		}
	})
}

var shared struct {
	once sync.Once
	d    *Offload
	err  error
}

// sharedLoop sets up the loop of openLoop once per process, in a network
// namespace without a name: a thread that unshares its namespace creates
// it, and the device's descriptor keeps it alive and usable from any
// thread until the process exits.
func sharedLoop() (*Offload, error) {
	shared.once.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				shared.err = fmt.Errorf("unshare: %w", err)
				return
			}
			const name = "m2hofuzz0"
			d, err := OpenOffload(OffloadConfig{Name: name, MTU: 1500})
			if err != nil {
				shared.err = err
				return
			}
			for _, args := range [][]string{{"ip", "addr", "add", "10.215.0.1/24", "dev", name}, {"ip", "link", "set", name, "up"},
				{"ip", "route", "add", "10.215.1.0/24", "dev", name}, {"sysctl", "-qw", "net.ipv4.ip_forward=1"},
				{"sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"}, {"sysctl", "-qw", "net.ipv4.conf." + name + ".rp_filter=0"},
				{"sysctl", "-qw", "net.ipv4.conf.all.send_redirects=0"}, {"sysctl", "-qw", "net.ipv4.conf." + name + ".send_redirects=0"}} {
				// A child forked from this thread starts in its namespace.
				if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
					d.Close()
					shared.err = fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
					return
				}
			}
			shared.d = d
		}()
		<-done
	})
	return shared.d, shared.err
}

// BenchmarkOffloadLoop: one batch (24 data segments in runs, 8 pure ACKs)
// written through the device, forwarded by the kernel and read back; run
// with -benchmem (0 allocs/op).
func BenchmarkOffloadLoop(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	d, err := sharedLoop()
	if err != nil {
		b.Skip(err)
	}
	ps := loopBatch()
	off := VirtioNetHdrLen
	wbufs := loopBufs(d, len(ps))
	rbufs := loopBufs(d, d.BatchSize())
	sizes := make([]int, len(rbufs))
	out := make([][]byte, len(ps))
	var bytes int64
	for _, p := range ps {
		bytes += int64(len(p))
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		for i, p := range ps {
			out[i] = wbufs[i][:off+copy(wbufs[i][off:], p)]
		}
		if _, err := d.Write(out, off); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < len(ps); {
			n, err := d.Read(rbufs, sizes, off)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if p := rbufs[i][off : off+sizes[i]]; p[0]>>4 == 4 && netip.AddrFrom4([4]byte(p[16:20])) == loopDst.Addr() {
					got++
				}
			}
		}
	}
}
