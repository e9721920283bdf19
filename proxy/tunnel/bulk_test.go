package tunnel

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/tun"
)

// BenchmarkTunnelBulk pushes MTU-sized packets through the tunnel over
// loopback UDP, no emulator, at an offered rate (Mbit/s; 0: as fast as the
// queue takes them), down (server TUN -> client, the bench's direction)
// and up (client -> server TUN). The client counts its receive drops
// (CountDrops) except in the light and no-trace cases. It reports the delivered rate, the CPU time of the whole process
// per delivered packet (both ends, quic-go, the feeder), and the packets
// lost at each stage:
//
//   - queue-drops: the sender's bounded queue was full (tail drop).
//     SendDatagram blocks once quic-go holds 32 DATAGRAMs (quic-go v0.65
//     datagram_queue.go), so the sender loop waits and its queue takes
//     the excess;
//   - dgram-recv-drops: quic-go's DATAGRAM receive queue (128 frames) was
//     full because the receiving end's reader fell behind;
//   - h3-queue-drops: inferred (qlog.go): http3's per-stream DATAGRAM
//     queue (32) was full; it drops silently;
//   - ring-drops: the receiving end's queue between its reader and the
//     TUN (the server's uplink ring, the client's downlink queue) was full;
//   - unaccounted: handed to SendDatagram and neither delivered nor
//     counted above (quic-lost: what quic-go declared lost on the wire).
//
// On a shared machine the rates are indicative only.
func BenchmarkTunnelBulk(b *testing.B) {
	for _, dir := range []string{"down", "up"} {
		for _, rate := range []int{50, 200, 0} {
			b.Run(fmt.Sprintf("%s/%dMbps", dir, rate), func(b *testing.B) { benchBulk(b, dir == "down", rate, 0) })
		}
	}
	// Both ends without yieldToReader, as before it.
	for _, rate := range []int{200, 0} {
		for _, dir := range []string{"down", "up"} {
			b.Run(fmt.Sprintf("%s/%dMbps/no-yield", dir, rate), func(b *testing.B) { benchBulk(b, dir == "down", rate, noYield) })
		}
	}
	// A client qlog file, written through bufferedFile and, as before it,
	// unbuffered (one system call per JSON token).
	b.Run("down/50Mbps/qlog", func(b *testing.B) { benchBulk(b, true, 50, qlogBuffered) })
	b.Run("down/50Mbps/qlog-unbuffered", func(b *testing.B) { benchBulk(b, true, 50, qlogRaw) })
	// The client as m2ho run starts it (quic-go's events, the wait for
	// http3's reader, waitForH3), and with the drops only counted, as
	// before the wait.
	for _, rate := range []int{200, 0} {
		b.Run(fmt.Sprintf("down/%dMbps/recv-wait", rate), func(b *testing.B) { benchBulk(b, true, rate, 0) })
		b.Run(fmt.Sprintf("down/%dMbps/no-recv-wait", rate), func(b *testing.B) { benchBulk(b, true, rate, noRecvWait) })
	}
	// A light trace (http3's and
	// connect-ip-go's events only: the yield and the http3 loss count;
	// quic-go's receive drops then uncounted), and without any trace (no
	// yield, nothing counted), as before the light trace.
	for _, rate := range []int{50, 200, 0} {
		b.Run(fmt.Sprintf("down/%dMbps/light", rate), func(b *testing.B) { benchBulk(b, true, rate, lightTrace) })
		b.Run(fmt.Sprintf("down/%dMbps/no-trace", rate), func(b *testing.B) { benchBulk(b, true, rate, noTrace) })
	}
	// quic-go's defaults (4-byte connection IDs, path MTU discovery): no
	// DATAGRAM packet is full-size, so none is GSO-batched (fullPacketSize).
	for _, rate := range []int{200, 0} {
		b.Run(fmt.Sprintf("down/%dMbps/no-full-packets", rate), func(b *testing.B) { benchBulk(b, true, rate, noFullPackets) })
	}
	// Up with a TUN write that costs a system call per packet, as a real
	// TUN's does (one write(2) to /dev/null each), through the uplink ring
	// and, as before it, written inline by the reader (inlineUplink).
	for _, rate := range []int{200, 0} {
		b.Run(fmt.Sprintf("up/%dMbps/syscall-tun", rate), func(b *testing.B) { benchBulk(b, false, rate, syscallTUN) })
		b.Run(fmt.Sprintf("up/%dMbps/syscall-tun/inline-before", rate), func(b *testing.B) { benchBulk(b, false, rate, syscallTUNInline) })
	}
}

// devNullTUN is a ChannelTUN whose Write also writes each packet to
// /dev/null: a system call per packet, as a TUN's write costs.
type devNullTUN struct {
	*tun.ChannelTUN
	null *os.File
}

func (d *devNullTUN) Write(bufs [][]byte, offset int) (int, error) {
	for _, b := range bufs {
		d.null.Write(b[offset:])
	}
	return d.ChannelTUN.Write(bufs, offset)
}

const (
	qlogBuffered = 1 + iota
	qlogRaw
	noTrace
	syscallTUN
	syscallTUNInline
	noYield
	lightTrace
	noRecvWait
	noFullPackets
)

func benchBulk(b *testing.B, down bool, rateMbps int, qlog int) {
	k := newPKIB(b)
	dev := tun.NewChannelTUN(1500, 16)
	var sdev Device = dev
	if qlog == syscallTUN || qlog == syscallTUNInline {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer null.Close()
		sdev = &devNullTUN{ChannelTUN: dev, null: null}
	}
	srv, err := NewServer(ServerConfig{Certificate: k.server, ClientCAs: k.pool, InnerPrefixes: []netip.Prefix{innerV4}, Routes: []netip.Prefix{routeV4},
		inlineUplink: qlog == syscallTUNInline, noH3Yield: qlog == noYield, NoFullPackets: qlog == noFullPackets}, sdev)
	if err != nil {
		b.Fatal(err)
	}
	a, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx)
	defer func() { cancel(); srv.Close(); dev.Close(); srv.Wait() }()
	cc := ClientConfig{Server: a.String(), ServerName: "localhost", RootCAs: k.pool, Certificate: k.user, LocalAddr: "127.0.0.1:0", CountDrops: true}
	switch qlog {
	case qlogBuffered, qlogRaw:
		cc.QlogDir, cc.qlogUnbuffered = b.TempDir(), qlog == qlogRaw
	case noTrace:
		cc.CountDrops, cc.NoReaderYield, cc.NoRecvWait = false, true, true
	case lightTrace:
		cc.CountDrops, cc.NoRecvWait = false, true
	case noYield:
		cc.NoReaderYield, cc.NoRecvWait = true, true
	case noRecvWait:
		cc.NoRecvWait = true
	case noFullPackets:
		cc.NoFullPackets = true
	}
	c, err := Dial(ctx, cc)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	me := netip.AddrPortFrom(c.Addresses()[0].Addr(), 40000)
	src, dst := b4, me
	if !down {
		src, dst = me, b4
	}
	pkt := packettest.TCP{Src: src, Dst: dst, Flags: packettest.ACK, Payload: make([]byte, DefaultMTU-40)}.Build()

	var got atomic.Uint64
	readDone, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readDone)
		if !down {
			for {
				select {
				case <-dev.Outbound:
					got.Add(1)
				case <-stop:
					return
				}
			}
		}
		bufs := make([][]byte, 16)
		sizes := make([]int, 16)
		for i := range bufs {
			bufs[i] = make([]byte, 2000)
		}
		for {
			n, err := c.Read(bufs, sizes, 0)
			if err != nil {
				return
			}
			got.Add(uint64(n))
		}
	}()

	// The feeder hands out copies from a ring (the TUN's reader keeps a
	// packet until its next Read; Client.Write rewrites in place).
	ring := make([][]byte, 4096)
	for i := range ring {
		ring[i] = append([]byte(nil), pkt...)
	}
	batch := make([][]byte, 16)
	offered := b.N * 64
	perMs := 0
	if rateMbps > 0 {
		perMs = max(1, rateMbps*1e6/8/len(pkt)/1000)
	}
	st0, cs0, cst0, got0 := srv.Stats(), c.ConnectionStats(), c.Stats(), got.Load()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < offered; {
		n := 16
		if perMs > 0 {
			// Paced: i packets due by now.
			due := int(time.Since(start).Milliseconds()+1) * perMs
			if i >= due {
				time.Sleep(200 * time.Microsecond)
				continue
			}
			n = min(n, due-i)
		}
		n = min(n, offered-i)
		for j := range n {
			x := ring[(i+j)%len(ring)]
			copy(x, pkt)
			batch[j] = x
		}
		if down {
			for _, x := range batch[:n] {
				dev.Inbound <- x
			}
		} else {
			c.Write(batch[:n], 0)
		}
		i += n
	}
	// Let what is queued drain: until nothing arrives for 100 ms; the
	// rate is over the time until the last arrival.
	lastAt := time.Now()
	for last := got.Load(); ; {
		time.Sleep(100 * time.Millisecond)
		if g := got.Load(); g == last {
			break
		} else {
			last, lastAt = g, time.Now()
		}
	}
	b.StopTimer()
	el := max(lastAt.Sub(start), time.Millisecond)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	st1, cs1, cst1 := srv.Stats(), c.ConnectionStats(), c.Stats()
	delivered := float64(got.Load() - got0)
	var sent, qdrops, rdrops, hdrops, rings float64
	if down {
		rings = float64(cst1.DropDownQueueFull - cst0.DropDownQueueFull)
		sent = float64(st1.PacketsDown - st0.PacketsDown)
		qdrops = float64(st1.DropQueueFull - st0.DropQueueFull)
		rdrops = float64(cst1.DropDatagramRecvQueue - cst0.DropDatagramRecvQueue)
		hdrops = float64(cst1.DropH3DatagramQueue - cst0.DropH3DatagramQueue)
	} else {
		sent = float64(cst1.PacketsUp - cst0.PacketsUp)
		qdrops = float64(cst1.DropUpQueueFull - cst0.DropUpQueueFull)
		rings = float64(st1.DropUpQueueFull - st0.DropUpQueueFull)
		rdrops = float64(st1.DropDatagramRecvQueue - st0.DropDatagramRecvQueue)
		hdrops = float64(st1.DropH3DatagramQueue - st0.DropH3DatagramQueue)
	}
	cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
	b.ReportMetric(delivered*float64(len(pkt))*8/el.Seconds()/1e6, "Mbit/s")
	if delivered > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/delivered, "cpu-ns/pkt")
	}
	b.ReportMetric(float64(offered), "offered")
	b.ReportMetric(delivered, "delivered")
	b.ReportMetric(qdrops, "queue-drops")
	b.ReportMetric(rdrops, "dgram-recv-drops")
	b.ReportMetric(hdrops, "h3-queue-drops")
	b.ReportMetric(rings, "ring-drops")
	b.ReportMetric(sent-delivered-rdrops-hdrops-rings, "unaccounted")
	b.ReportMetric(float64(cs1.PacketsLost-cs0.PacketsLost), "quic-lost")
	b.ReportMetric(float64(cst1.DropRefused-cst0.DropRefused+cst1.DropInvalid-cst0.DropInvalid+st1.DropInvalid-st0.DropInvalid+st1.DropSendError-st0.DropSendError), "other-drops")
	close(stop)
	c.Close()
	<-readDone
}
