package main

import (
	"context"
	"crypto/tls"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/proxy/tunnel"
	"github.com/m2ho/m2ho/tun"
)

// startTestServer runs an in-process tunnel server on addr (loopback) with
// an in-memory TUN.
func startTestServer(t *testing.T, dir, addr string) (*tunnel.Server, *tun.ChannelTUN, string, func()) {
	t.Helper()
	crt, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tunnel.LoadCertPool(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	dev := tun.NewChannelTUN(1280, 16)
	srv, err := tunnel.NewServer(tunnel.ServerConfig{Certificate: crt, ClientCAs: pool,
		InnerPrefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.0/24")},
		Routes:        []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}}, dev)
	if err != nil {
		t.Fatal(err)
	}
	a, err := srv.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	stop := func() { cancel(); srv.Close(); dev.Close(); <-done; srv.Wait() }
	return srv, dev, a.String(), stop
}

// A tunnel whose server goes away does not end the link: packets are
// dropped and counted while it is down, Read waits, and after the server
// is back the link redials, gets the same inner address and carries
// packets again.
func TestTunnelLinkRedials(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	_, dev, addr, stop := startTestServer(t, dir, "127.0.0.1:0")
	f := tunnelFlags{Server: addr, ServerName: "localhost", CA: filepath.Join(dir, "ca.crt"),
		Cert: filepath.Join(dir, "phone-1.crt"), Key: filepath.Join(dir, "phone-1.key")}
	link := newTunnelLink(f, zap.NewNop(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := link.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	inner := c.Addresses()[0].Addr()
	supDone := make(chan error, 1)
	go func() { supDone <- link.supervise(ctx, c) }()

	laptop := netip.MustParseAddrPort("192.168.42.10:40000")
	server := netip.MustParseAddrPort("198.51.100.7:5201")
	seg := func(seq uint32) [][]byte {
		return [][]byte{packettest.TCP{Src: laptop, Dst: server, Seq: seq, Flags: packettest.ACK, Window: 100, Payload: []byte("hello")}.Build()}
	}
	// expect reads the server's TUN until the segment with seq arrives
	// (the NAT puts the inner address in as the source).
	expect := func(seq uint32) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			if _, err := link.Write(seg(seq), 0); err != nil {
				t.Fatal(err)
			}
			select {
			case p := <-dev.Outbound:
				src, _ := netip.AddrFromSlice(p[12:16])
				if src != inner {
					t.Fatalf("source %v at the server, want the inner address %v", src, inner)
				}
				return
			case <-time.After(200 * time.Millisecond):
			case <-deadline:
				t.Fatalf("segment %d never reached the server", seq)
			}
		}
	}
	expect(1)

	stop() // the server goes away; the client notices when its session ends
	select {
	case <-c.Done():
	case <-time.After(40 * time.Second):
		t.Fatal("the client never noticed the server closing")
	}
	// Down: Write takes the packets and counts them.
	for link.current() != nil {
		time.Sleep(10 * time.Millisecond)
	}
	before := link.st.downDrops.Load()
	if n, err := link.Write(seg(2), 0); n != 1 || err != nil {
		t.Fatalf("Write while down: %d, %v; want 1, nil", n, err)
	}
	if link.st.downDrops.Load() != before+1 {
		t.Fatal("a packet written while down was not counted")
	}

	// Back on the same port: the link redials on its own.
	_, dev2, _, stop2 := startTestServer(t, dir, addr)
	defer stop2()
	dev = dev2
	deadline := time.Now().Add(40 * time.Second)
	for link.current() == nil {
		if time.Now().After(deadline) {
			t.Fatal("never redialled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := link.current().Addresses()[0].Addr(); got != inner {
		t.Fatalf("redialled with inner address %v, want %v again", got, inner)
	}
	if link.st.addrChanged.Load() != 0 {
		t.Fatal("inner address change counted")
	}
	expect(3)
	if link.st.redials.Load() < 1 {
		t.Fatal("redials not counted")
	}
	// The client counts a packet once WritePacket returns, which can be
	// after the server has it: wait for the count (across both clients).
	deadline = time.Now().Add(10 * time.Second)
	for s := link.Stats(); s.PacketsUp < 2; s = link.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("stats across clients: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Close ends Read and Write with ErrClosed, and the supervisor.
	link.Close()
	if _, err := link.Write(seg(4), 0); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	bufs, sizes := [][]byte{make([]byte, 1500)}, []int{0}
	if _, err := link.Read(bufs, sizes, 0); err == nil {
		t.Fatal("Read after Close succeeded")
	}
	select {
	case <-supDone:
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not end")
	}
}

// SIGUSR1 (restartOn) replaces the live connection by a new one, which
// measures the path afresh (the bench sends it once the emulated link is
// up); the server released the old session, so the new one gets the same
// inner address and tunnelled packets keep flowing.
func TestTunnelLinkRestart(t *testing.T) {
	dir := t.TempDir()
	if err := newKeysCmdRun(t, dir); err != nil {
		t.Fatal(err)
	}
	_, dev, addr, stop := startTestServer(t, dir, "127.0.0.1:0")
	defer stop()
	f := tunnelFlags{Server: addr, ServerName: "localhost", CA: filepath.Join(dir, "ca.crt"),
		Cert: filepath.Join(dir, "phone-1.crt"), Key: filepath.Join(dir, "phone-1.key")}
	link := newTunnelLink(f, zap.NewNop(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := link.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	inner := c.Addresses()[0].Addr()
	go link.supervise(ctx, c)
	sig := make(chan os.Signal, 1)
	go link.restartOn(ctx, sig)

	sig <- syscall.SIGUSR1
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the old connection was not closed")
	}
	deadline := time.Now().Add(40 * time.Second)
	for n := link.current(); n == nil || n == c; n = link.current() {
		if time.Now().After(deadline) {
			t.Fatal("no new connection after the restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := link.current().Addresses()[0].Addr(); got != inner || link.st.addrChanged.Load() != 0 {
		t.Fatalf("new connection's inner address %v (changes counted %d), want %v again", got, link.st.addrChanged.Load(), inner)
	}
	if link.st.restarts.Load() != 1 || link.st.redials.Load() != 1 || link.st.redialFailures.Load() != 0 {
		t.Fatalf("restarts %d, redials %d (failed %d): want 1, 1, 0", link.st.restarts.Load(), link.st.redials.Load(), link.st.redialFailures.Load())
	}
	laptop := netip.MustParseAddrPort("192.168.42.10:40000")
	server := netip.MustParseAddrPort("198.51.100.7:5201")
	pkt := packettest.TCP{Src: laptop, Dst: server, Seq: 1, Flags: packettest.ACK, Window: 100, Payload: []byte("hello")}.Build()
	for got := false; !got; {
		if _, err := link.Write([][]byte{append([]byte(nil), pkt...)}, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-dev.Outbound:
			if src, _ := netip.AddrFromSlice(p[12:16]); src != inner {
				t.Fatalf("source %v at the server, want %v", src, inner)
			}
			got = true
		case <-time.After(200 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no packet through the new connection")
			}
		}
	}
}
