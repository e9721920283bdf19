package tunnel

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/zap/zaptest"

	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/signaling"
	"github.com/m2ho/m2ho/tun"
)

// pki is a CA with a server and a client certificate.
type pki struct {
	ca           KeyPair
	pool         *x509.CertPool
	server, user tls.Certificate
}

func newPKI(t *testing.T, client string) pki {
	t.Helper()
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServerCert(ca, []string{"localhost", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClientCert(ca, client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	k := pki{ca: ca, pool: x509.NewCertPool()}
	k.pool.AddCert(ca.Cert)
	if k.server, err = srv.TLS(); err != nil {
		t.Fatal(err)
	}
	if k.user, err = cl.TLS(); err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	innerV4 = netip.MustParsePrefix("10.77.0.0/24")
	innerV6 = netip.MustParsePrefix("fd77::/64")
	routeV4 = netip.MustParsePrefix("198.51.100.0/24")
	routeV6 = netip.MustParsePrefix("2001:db8::/64")
)

type harness struct {
	pki  pki
	srv  *Server
	dev  *tun.ChannelTUN
	addr string
}

func startServer(t *testing.T, k pki, mod func(*ServerConfig)) *harness {
	t.Helper()
	dev := tun.NewChannelTUN(1500, 16)
	cfg := ServerConfig{
		Certificate: k.server, ClientCAs: k.pool,
		InnerPrefixes: []netip.Prefix{innerV4, innerV6},
		Routes:        []netip.Prefix{routeV4, routeV6},
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := NewServer(cfg, dev)
	if err != nil {
		t.Fatal(err)
	}
	a, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		dev.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Wait()
	})
	return &harness{pki: k, srv: srv, dev: dev, addr: a.String()}
}

func (h *harness) dial(t *testing.T, mod func(*ClientConfig)) (*Client, error) {
	t.Helper()
	cfg := ClientConfig{Server: h.addr, ServerName: "localhost", RootCAs: h.pki.pool, Certificate: h.pki.user, LocalAddr: "127.0.0.1:0"}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func mustDial(t *testing.T, h *harness, mod func(*ClientConfig)) *Client {
	t.Helper()
	c, err := h.dial(t, mod)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually polls cond (the machine is shared and loaded: no timing
// assertion, only a generous bound on waiting).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stream builds n TCP segments from src to dst whose sizes cycle through
// small, mid-size and exactly-MTU packets; payloads are pseudo-random.
func stream(src, dst netip.AddrPort, n, mtu int, seed byte) [][]byte {
	hdr := 40
	if src.Addr().Is6() {
		hdr = 60
	}
	sizes := []int{1, 100, 537, mtu - hdr - 1, mtu - hdr}
	var out [][]byte
	seq := uint32(1000)
	x := uint32(seed) + 1
	for i := range n {
		pl := make([]byte, sizes[i%len(sizes)])
		for j := range pl {
			x = x*1103515245 + 12345
			pl[j] = byte(x >> 16)
		}
		out = append(out, packettest.TCP{Src: src, Dst: dst, Seq: seq, Flags: packettest.ACK, Window: 512, Payload: pl}.Build())
		seq += uint32(len(pl))
	}
	return out
}

func payloadDigest(t *testing.T, pkts [][]byte) ([32]byte, int) {
	t.Helper()
	h := sha256.New()
	atMTU := 0
	for _, pkt := range pkts {
		checkTCP(t, pkt)
		p := decode(t, pkt)
		h.Write(pkt[p.L4Off+p.TCPHdrLen : p.Length])
		if p.Length == DefaultMTU {
			atMTU++
		}
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d, atMTU
}

// upload sends pkts through c in windows of 32 (DATAGRAMs are unreliable:
// the window keeps every queue far below its bound) and returns what the
// server's TUN received.
func upload(t *testing.T, c *Client, dev *tun.ChannelTUN, pkts [][]byte, midway func()) [][]byte {
	t.Helper()
	var got [][]byte
	for i := 0; i < len(pkts); i += 32 {
		if midway != nil && i >= len(pkts)/2 && i < len(pkts)/2+32 {
			midway()
		}
		end := min(i+32, len(pkts))
		batch := make([][]byte, 0, 32)
		for _, p := range pkts[i:end] {
			batch = append(batch, append([]byte(nil), p...))
		}
		if _, err := c.Write(batch, 0); err != nil {
			t.Fatal(err)
		}
		for range end - i {
			select {
			case p := <-dev.Outbound:
				got = append(got, p)
			case <-time.After(20 * time.Second):
				t.Fatalf("upload: %d of %d packets arrived; client %+v, server %+v", len(got), len(pkts), c.Stats(), c.Stats())
			}
		}
	}
	return got
}

// download sends pkts into the server's TUN and reads them from c.
func download(t *testing.T, c *Client, dev *tun.ChannelTUN, pkts [][]byte) [][]byte {
	t.Helper()
	var got [][]byte
	bufs := make([][]byte, 16)
	sizes := make([]int, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 2000)
	}
	for i := 0; i < len(pkts); i += 32 {
		end := min(i+32, len(pkts))
		for _, p := range pkts[i:end] {
			dev.Inbound <- p
		}
		for len(got) < end {
			n, err := c.Read(bufs, sizes, 0)
			if err != nil {
				t.Fatalf("download: %v after %d packets", err, len(got))
			}
			for j := range n {
				got = append(got, append([]byte(nil), bufs[j][:sizes[j]]...))
			}
		}
	}
	return got
}

func TestTransferByteExact(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	wantAddrs := []netip.Prefix{netip.MustParsePrefix("10.77.0.2/32"), netip.MustParsePrefix("fd77::2/128")}
	if fmt.Sprint(c.Addresses()) != fmt.Sprint(wantAddrs) {
		t.Fatalf("assigned %v, want %v", c.Addresses(), wantAddrs)
	}
	if got := fmt.Sprint(c.Routes()); got != "[198.51.100.0/24 2001:db8::/64]" {
		t.Fatalf("routes %s", got)
	}
	for _, fam := range []struct {
		name     string
		me, peer netip.AddrPort
	}{
		{"v4", netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000), b4},
		{"v6", netip.AddrPortFrom(netip.MustParseAddr("fd77::2"), 40000), b6},
	} {
		t.Run(fam.name+"/up", func(t *testing.T) {
			sent := stream(fam.me, fam.peer, 400, DefaultMTU, 1)
			want, wantMTU := payloadDigest(t, sent)
			got, gotMTU := payloadDigest(t, upload(t, c, h.dev, sent, nil))
			if got != want || gotMTU != wantMTU || wantMTU == 0 {
				t.Fatalf("sha256 %x, want %x; %d of %d packets at exactly the MTU", got, want, gotMTU, wantMTU)
			}
		})
		t.Run(fam.name+"/down", func(t *testing.T) {
			sent := stream(fam.peer, fam.me, 400, DefaultMTU, 2)
			want, wantMTU := payloadDigest(t, sent)
			got, gotMTU := payloadDigest(t, download(t, c, h.dev, sent))
			if got != want || gotMTU != wantMTU {
				t.Fatalf("sha256 %x, want %x; %d of %d at the MTU", got, want, gotMTU, wantMTU)
			}
		})
	}
	// The server counts a packet once the TUN write or WritePacket has
	// returned, which can be after the other end has it.
	eventually(t, "the server to count 800 packets each way", func() bool {
		st := h.srv.Stats()
		return st.PacketsUp >= 800 && st.PacketsDown >= 800
	})
	st := h.srv.Stats()
	if st.PacketsUp != 800 || st.PacketsDown != 800 || st.DropQueueFull+st.DropSpoofedSource+st.DropOutsideRoutes != 0 {
		t.Fatalf("server stats %+v", st)
	}
}

// quicMigrationRace: the race is inside quic-go v0.65, not in this
// package's use of it (README, "Costs and limits"). M2HO_RACE_MIGRATION=1
// runs the test under -race anyway, to re-check after an upgrade.
const quicMigrationRace = "quic-go v0.65 races on migration: Conn.switchToNewPath (connection.go:940, run loop, on Path.Switch) replaces c.conn without connStateMutex while Conn.ConnectionState (connection.go:790, from http3's control-stream goroutine, http3/conn.go:261) reads c.conn.capabilities(); inside quic-go, no quic-go issue found for it (the same unguarded-field class as quic-go#4228); tested without -race (M2HO_RACE_MIGRATION=1 runs it)"

// TestMigrationMidTransfer moves the client from 127.0.0.1 to 127.0.0.2
// half-way through an upload and a download.
func TestMigrationMidTransfer(t *testing.T) {
	if raceEnabled && os.Getenv("M2HO_RACE_MIGRATION") == "" {
		t.Skip(quicMigrationRace)
	}
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	sent := stream(me, b4, 600, DefaultMTU, 3)
	want, _ := payloadDigest(t, sent)
	var migErr error
	got, _ := payloadDigest(t, upload(t, c, h.dev, sent, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		migErr = c.Migrate(ctx, "127.0.0.2:0")
	}))
	if migErr != nil {
		t.Fatal(migErr)
	}
	if got != want {
		t.Fatalf("upload across the migration: sha256 %x, want %x", got, want)
	}
	if ip := c.LocalAddr().(*net.UDPAddr).IP.String(); ip != "127.0.0.2" {
		t.Fatalf("local address %s after migration", ip)
	}
	if c.Stats().Migrations != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
	// Downlink after the switch reaches the client at its new address.
	down := stream(b4, me, 200, DefaultMTU, 4)
	want, _ = payloadDigest(t, down)
	got, _ = payloadDigest(t, download(t, c, h.dev, down))
	if got != want {
		t.Fatalf("download after migration: sha256 %x, want %x", got, want)
	}
	// A phone moves more than once: connection IDs must not run out
	// (quic-go issue 5814 was about exactly that before v0.62).
	for i, addr := range []string{"127.0.0.3:0", "127.0.0.4:0", "127.0.0.1:0"} {
		if i == 0 {
			// The old address gone first, quic-go's window empty: the
			// probe still leaves (no ErrProbeNotSent).
			c.trMu.Lock()
			c.writes.gone.Store(true)
			c.trMu.Unlock()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := c.Migrate(ctx, addr)
		cancel()
		if err != nil {
			t.Fatalf("migration %d: %v", i+2, err)
		}
		more := stream(me, b4, 50, DefaultMTU, byte(10+i))
		want, _ := payloadDigest(t, more)
		if got, _ := payloadDigest(t, upload(t, c, h.dev, more, nil)); got != want {
			t.Fatalf("upload after migration %d: sha256 mismatch", i+2)
		}
	}
	if c.Stats().Migrations != 4 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

// fillIntoVoid writes tunnelled packets while the client's socket refuses
// every send (its address gone), until quic-go stops sending: its
// congestion window is full of packets that will never be acknowledged.
// It returns how many QUIC packets went into the void.
func fillIntoVoid(t *testing.T, c *Client, me netip.AddrPort) uint64 {
	t.Helper()
	c.trMu.Lock()
	w := c.writes
	c.trMu.Unlock()
	w.gone.Store(true)
	gone0 := c.Stats().SendsPathGone
	pkts := stream(me, b4, 32, DefaultMTU, 7)
	last, still := uint64(0), 0
	for range 400 { // at most 400 rounds of 32 packets
		batch := make([][]byte, 0, len(pkts))
		for _, p := range pkts {
			batch = append(batch, append([]byte(nil), p...))
		}
		if _, err := c.Write(batch, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		n := c.Stats().SendsPathGone - gone0
		if n == last {
			if still++; still == 20 { // nothing sent for 200 ms with packets waiting
				return n
			}
			continue
		}
		last, still = n, 0
	}
	t.Fatalf("quic-go kept sending into the void (%d packets): its window never filled", last)
	return 0
}

// An uplink address that went away with quic-go's window full: every
// packet sent since is lost, no ACK will come, and quic-go sends path
// probes only when its window has room, so Path.Probe would wait until its
// context ends (the test's 20 s). Migrate says so after probeSendWait
// with ErrProbeNotSent (tunnelLink redials on it), and the connection is
// left as it was. (With the address gone but the window not full the
// probe leaves and the migration succeeds: TestMigrationMidTransfer.)
// No -race skip: the connection never switches paths here.
func TestMigrateWithFullWindowOnLostPath(t *testing.T) {
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	upload(t, c, h.dev, stream(me, b4, 200, DefaultMTU, 3), nil)
	void := fillIntoVoid(t, c, me)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := c.Migrate(ctx, "127.0.0.2:0")
	if !errors.Is(err, ErrProbeNotSent) {
		t.Fatalf("Migrate after %d packets into the void: %v, want ErrProbeNotSent", void, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Migrate returned only when its context ended (%v)", err)
	}
	if c.Stats().Migrations != 0 || c.LocalAddr().(*net.UDPAddr).IP.String() != "127.0.0.1" {
		t.Fatalf("after a failed migration: stats %+v, local %v", c.Stats(), c.LocalAddr())
	}
	t.Logf("%d QUIC packets into the void (cwnd %d B); %v", void, c.ConnectionStats().CongestionWindow, err)
}

// PathGone fires on a refused send (the uplink's address gone), not
// before: the link's watcher migrates on it instead of waiting for its
// next poll.
func TestPathGoneSignalsRefusedSend(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	upload(t, c, h.dev, stream(me, b4, 50, DefaultMTU, 3), nil)
	select {
	case <-c.PathGone():
		t.Fatal("PathGone fired while every send went out")
	default:
	}
	c.trMu.Lock()
	c.writes.gone.Store(true)
	c.trMu.Unlock()
	if _, err := c.Write(stream(me, b4, 1, DefaultMTU, 4), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.PathGone():
	case <-time.After(10 * time.Second):
		t.Fatalf("no PathGone after a refused send (stats %+v)", c.Stats())
	}
	if c.Stats().SendsPathGone == 0 {
		t.Fatal("the refused send was not counted")
	}
}

func TestClientClampsSYNAndAnswersOversize(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	syn := packettest.TCP{Src: me, Dst: b4, Flags: packettest.SYN, MSS: 1460, SACKPermitted: true, HasWScale: true, WScale: 7}.Build()
	big := packettest.TCP{Src: me, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, 1400)}.Build()
	if _, err := c.Write([][]byte{syn, big}, 0); err != nil {
		t.Fatal(err)
	}
	out := <-h.dev.Outbound
	checkTCP(t, out)
	if mss := decode(t, out).MSS; mss != 1240 {
		t.Fatalf("SYN arrived with MSS %d, want 1240", mss)
	}
	bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
	n, err := c.Read(bufs, sizes, 0)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	ptb := bufs[0][:sizes[0]]
	if ptb[9] != 1 || ptb[20] != 3 || ptb[21] != 4 || binary.BigEndian.Uint16(ptb[26:]) != DefaultMTU {
		t.Fatalf("not an ICMP fragmentation-needed with MTU %d: % x", DefaultMTU, ptb[:28])
	}
	if string(ptb[28:48]) != string(big[:20]) {
		t.Fatal("PTB does not quote the original header")
	}
	if st := c.Stats(); st.PTBSent != 1 || st.MSSClamped != 1 {
		t.Fatalf("stats %+v", st)
	}
	select {
	case p := <-h.dev.Outbound:
		t.Fatalf("the oversize packet went through (%d bytes)", len(p))
	case <-time.After(50 * time.Millisecond):
	}
}

func TestServerAnswersOversizeDownlink(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	mustDial(t, h, nil)
	me := netip.AddrPortFrom(netip.MustParseAddr("fd77::2"), 40000)
	big := packettest.TCP{Src: b6, Dst: me, Flags: packettest.ACK, Payload: make([]byte, 1400)}.Build()
	h.dev.Inbound <- big
	ptb := <-h.dev.Outbound
	if ptb[6] != 58 || ptb[40] != 2 || binary.BigEndian.Uint32(ptb[44:]) != DefaultMTU {
		t.Fatalf("not an ICMPv6 Packet Too Big: % x", ptb[:48])
	}
	if string(ptb[24:40]) != string(big[8:24]) {
		t.Fatal("PTB not addressed to the sender")
	}
	if st := h.srv.Stats(); st.PTBSent != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestClientWithoutCertRefused(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	_, err := h.dial(t, func(c *ClientConfig) { c.Certificate = tls.Certificate{} })
	if err == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	t.Logf("refused as expected: %v", err)
	if st := h.srv.Stats(); st.ConnsAccepted != 0 || st.SessionsOpened != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestClientFromOtherCARefused(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	other := newPKI(t, "phone-1") // same name, another CA
	_, err := h.dial(t, func(c *ClientConfig) { c.Certificate = other.user })
	if err == nil {
		t.Fatal("a client with a certificate from another CA was accepted")
	}
	t.Logf("refused as expected: %v", err)
	if st := h.srv.Stats(); st.ConnsAccepted != 0 || st.SessionsOpened != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConnectionCountBound(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) { c.MaxConnsPerClient = 2 })
	c1 := mustDial(t, h, nil)
	mustDial(t, h, nil)
	if _, err := h.dial(t, nil); err == nil {
		t.Fatal("a third connection of one client was accepted with MaxConnsPerClient 2")
	}
	if st := h.srv.Stats(); st.ConnsRefused != 1 || st.ConnsAccepted != 2 {
		t.Fatalf("stats %+v", st)
	}
	c1.Close()
	eventually(t, "the closed connection to be released", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.conns["phone-1"] == 1
	})
	c3 := mustDial(t, h, nil)
	// One identity, one address: each newer session took it over (sticky
	// leases, sticky_test.go).
	if got := c3.Addresses()[0].Addr().String(); got != "10.77.0.2" {
		t.Fatalf("third connection of phone-1 got %s, want its 10.77.0.2", got)
	}
}

// rawConn dials the server with the client certificate and speaks HTTP/3
// by hand, without connect-ip-go's client-side checks, as a hostile or
// merely non-Go peer would.
func rawConn(t *testing.T, h *harness) *http3.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, h.addr, &tls.Config{ServerName: "localhost", RootCAs: h.pki.pool,
		Certificates: []tls.Certificate{h.pki.user}, NextProtos: []string{http3.NextProtoH3}},
		&quic.Config{EnableDatagrams: true, InitialPacketSize: 1350})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	cc := (&http3.Transport{EnableDatagrams: true}).NewClientConn(qc)
	<-cc.ReceivedSettings()
	return cc
}

// rawRequest sends an extended CONNECT for protocol at path and returns
// the stream and the response status.
func rawRequest(t *testing.T, cc *http3.ClientConn, path, protocol string) (*http3.RequestStream, int) {
	t.Helper()
	str, err := cc.OpenRequestStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodConnect, "https://localhost"+path, nil)
	req.Proto = protocol
	req.Host = "localhost"
	req.Header.Set("Capsule-Protocol", "?1")
	if err := str.SendRequestHeader(req); err != nil {
		t.Fatal(err)
	}
	rsp, err := str.ReadResponse()
	if err != nil {
		t.Fatal(err)
	}
	return str, rsp.StatusCode
}

// rawSession opens a CONNECT-IP session by hand.
func rawSession(t *testing.T, h *harness) *http3.RequestStream {
	t.Helper()
	str, status := rawRequest(t, rawConn(t, h), ConnectIPPath, "connect-ip")
	if status != 200 {
		t.Fatalf("CONNECT-IP: status %d", status)
	}
	return str
}

func TestSessionAndHintsRules(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	cc := rawConn(t, h)
	if _, status := rawRequest(t, cc, HintsPath, HintsProtocol); status != http.StatusConflict {
		t.Fatalf("hints before a session: status %d, want 409", status)
	}
	if _, status := rawRequest(t, cc, ConnectIPPath, "connect-ip"); status != 200 {
		t.Fatalf("CONNECT-IP: %d", status)
	}
	if _, status := rawRequest(t, cc, ConnectIPPath, "connect-ip"); status != http.StatusConflict {
		t.Fatalf("second session on one connection: status %d, want 409", status)
	}
	// The server answers 200 before it assigns the addresses and counts
	// the session (handleConnectIP), so the count may come a moment later.
	eventually(t, "one session opened and one refused", func() bool {
		st := h.srv.Stats()
		return st.SessionsOpened == 1 && st.SessionsRefused == 1
	})
	hs, status := rawRequest(t, cc, HintsPath, HintsProtocol)
	if status != 200 {
		t.Fatalf("hints: %d", status)
	}
	for _, line := range []string{
		`{"v":1,"seq":5,"kind":"withdrawn"}`,
		`{"v":1,"seq":5,"kind":"withdrawn"}`,            // seq does not increase
		`{"v":1,"seq":6,"kind":"predicted","smax":0}`,   // invalid
		`{"v":1,"seq":7,"kind":"predicted","smax":100}`, // fine
		strings.Repeat("x", 2000),                       // too long: closes the stream
		`{"v":1,"seq":8,"kind":"withdrawn"}`,            // never read
	} {
		hs.Write([]byte(line + "\n"))
	}
	eventually(t, "the hints to be judged", func() bool {
		st := h.srv.Stats()
		return st.Hints[HintWithdrawn] == 1 && st.Hints[HintPredicted] == 1 && st.HintsRejected == 3
	})
}

func TestSpoofedSourceAndOutsideRoutesDroppedAndCounted(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	str := rawSession(t, h)
	mine := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	spoofed := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.99"), 40000)
	outside := netip.MustParseAddrPort("203.0.113.5:80")
	send := func(p []byte) {
		if err := str.SendDatagram(append([]byte{0}, p...)); err != nil { // context ID 0
			t.Fatal(err)
		}
	}
	eventually(t, "the session to be registered", func() bool { return h.srv.Stats().SessionsOpen == 1 })
	for range 3 {
		send(packettest.TCP{Src: spoofed, Dst: b4, Flags: packettest.ACK}.Build())
	}
	for range 2 {
		send(packettest.TCP{Src: mine, Dst: outside, Flags: packettest.ACK}.Build())
	}
	send(packettest.TCP{Src: mine, Dst: b4, Flags: packettest.ACK, Payload: []byte("ok")}.Build())
	out := <-h.dev.Outbound // the legitimate one
	if p := decode(t, out); p.Src != mine.Addr() || p.Dst != b4.Addr() {
		t.Fatalf("forwarded %v -> %v", p.Src, p.Dst)
	}
	eventually(t, "the drops to be counted", func() bool {
		st := h.srv.Stats()
		return st.DropSpoofedSource == 3 && st.DropOutsideRoutes == 2
	})
	select {
	case p := <-h.dev.Outbound:
		t.Fatalf("a refused packet reached the TUN: % x", p[:20])
	case <-time.After(50 * time.Millisecond):
	}
}

func TestClientRefusesOutsideRoutes(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, nil)
	mine := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	c.Write([][]byte{packettest.TCP{Src: mine, Dst: netip.MustParseAddrPort("203.0.113.5:80"), Flags: packettest.ACK}.Build()}, 0)
	eventually(t, "the client to count the refusal", func() bool { return c.Stats().DropRefused == 1 })
}

// blockedPacer never lets a packet go.
type blockedPacer struct{}

func (blockedPacer) Budget(time.Time, int) (int, time.Duration) { return 0, time.Hour }
func (blockedPacer) Sent(time.Time, int)                        {}
func (blockedPacer) Hint(time.Time, Hint)                       {}

func TestQueueBoundsHold(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) {
		c.QueueLen = 4
		c.NewPacer = func(string) Pacer { return blockedPacer{} }
	})
	c := mustDial(t, h, func(c *ClientConfig) { c.QueueLen = 4; c.Pacer = blockedPacer{} })
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	up := stream(me, b4, 10, DefaultMTU, 5)
	c.Write(up, 0)
	if st := c.Stats(); st.DropUpQueueFull != 6 {
		t.Fatalf("client: %d uplink drops, want 6 (10 packets, queue of 4)", st.DropUpQueueFull)
	}
	for _, p := range stream(b4, me, 10, DefaultMTU, 6) {
		h.dev.Inbound <- p
	}
	eventually(t, "6 downlink drops", func() bool { return h.srv.Stats().DropQueueFull == 6 })
}

// recordingPacer keeps the hints it gets.
type recordingPacer struct {
	PassThrough
	mu    sync.Mutex
	hints []Hint
}

func (r *recordingPacer) Hint(_ time.Time, h Hint) {
	r.mu.Lock()
	r.hints = append(r.hints, h)
	r.mu.Unlock()
}

func TestHintsReachServerPacer(t *testing.T) {
	rp := &recordingPacer{}
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) { c.NewPacer = func(string) Pacer { return rp }; c.Log = zaptest.NewLogger(t) })
	c := mustDial(t, h, func(c *ClientConfig) { c.Log = zaptest.NewLogger(t) })
	sent := []Hint{
		{Kind: HintPredicted, TargetCell: "cell-7", CellType: signaling.CellMmWave, SMax: 2_500_000},
		{Kind: HintWithdrawn},
		{Kind: HintPredicted, SMax: 400_000},
		{Kind: HintExecuted, CellType: signaling.CellSub6, CEst: 30e6},
	}
	for _, x := range sent {
		if err := c.SendHint(x); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "4 hints at the pacer", func() bool { rp.mu.Lock(); defer rp.mu.Unlock(); return len(rp.hints) == 4 })
	for i, x := range sent {
		x.Seq = uint64(i + 1)
		if rp.hints[i] != x {
			t.Fatalf("hint %d: got %+v, want %+v", i, rp.hints[i], x)
		}
	}
	st := h.srv.Stats()
	if st.Hints[HintPredicted] != 2 || st.Hints[HintExecuted] != 1 || st.Hints[HintWithdrawn] != 1 || st.HintsRejected != 0 {
		t.Fatalf("hint counters %+v", st.Hints)
	}
}

func TestNATForTetheredHost(t *testing.T) {
	h := startServer(t, newPKI(t, "phone-1"), nil)
	c := mustDial(t, h, func(c *ClientConfig) { c.NAT = true })
	laptop := netip.MustParseAddrPort("192.168.42.2:50000")
	c.Write([][]byte{packettest.TCP{Src: laptop, Dst: b4, Flags: packettest.ACK, Payload: []byte("up")}.Build()}, 0)
	out := <-h.dev.Outbound
	checkTCP(t, out)
	if p := decode(t, out); p.Src.String() != "10.77.0.2" {
		t.Fatalf("source %v at the server, want the assigned 10.77.0.2", p.Src)
	}
	h.dev.Inbound <- packettest.TCP{Src: b4, Dst: netip.MustParseAddrPort("10.77.0.2:50000"), Flags: packettest.ACK, Payload: []byte("down")}.Build()
	bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
	if _, err := c.Read(bufs, sizes, 0); err != nil {
		t.Fatal(err)
	}
	back := bufs[0][:sizes[0]]
	checkTCP(t, back)
	if p := decode(t, back); p.Dst != laptop.Addr() {
		t.Fatalf("downlink to %v, want the laptop %v", p.Dst, laptop.Addr())
	}
	// A second tethered host is refused and counted.
	c.Write([][]byte{packettest.TCP{Src: netip.MustParseAddrPort("192.168.42.3:50000"), Dst: b4, Flags: packettest.ACK}.Build()}, 0)
	if st := c.Stats(); st.DropNATConflict != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewServerConfigErrors(t *testing.T) {
	k := newPKI(t, "x")
	base := func() ServerConfig {
		return ServerConfig{Certificate: k.server, ClientCAs: k.pool, InnerPrefixes: []netip.Prefix{innerV4}, Routes: []netip.Prefix{routeV4}}
	}
	for _, tc := range []struct {
		name string
		mod  func(*ServerConfig)
		want string
	}{
		{"no routes", func(c *ServerConfig) { c.Routes = nil }, "no routes"},
		{"no CA", func(c *ServerConfig) { c.ClientCAs = nil }, "ClientCAs"},
		{"no pool", func(c *ServerConfig) { c.InnerPrefixes = nil }, "inner prefix"},
		{"pool overlaps route", func(c *ServerConfig) { c.Routes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")} }, "overlaps"},
		{"two v4 pools", func(c *ServerConfig) {
			c.InnerPrefixes = append(c.InnerPrefixes, netip.MustParsePrefix("10.78.0.0/24"))
		}, "one prefix per"},
		{"MTU too big", func(c *ServerConfig) { c.MTU = 1500 }, "MTU 1500"},
	} {
		cfg := base()
		tc.mod(&cfg)
		if _, err := NewServer(cfg, tun.NewChannelTUN(0, 0)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestQlogPerConnection(t *testing.T) {
	dir := t.TempDir()
	h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) { c.QlogDir = dir })
	str := rawSession(t, h)
	eventually(t, "the session", func() bool { return h.srv.Stats().SessionsOpen == 1 })
	spoofed := netip.MustParseAddrPort("10.77.0.99:1")
	if err := str.SendDatagram(append([]byte{0}, packettest.TCP{Src: spoofed, Dst: b4, Flags: packettest.ACK}.Build()...)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the drop", func() bool { return h.srv.Stats().DropSpoofedSource == 1 })
	h.srv.Close()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("qlog (%d bytes): %.2000s", len(last), last)
		}
	}()
	eventually(t, "a qlog file naming the drop", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "*_server.sqlog"))
		if len(files) != 1 {
			return false
		}
		b, _ := os.ReadFile(files[0])
		last = string(b)
		return strings.Contains(string(b), "source_address_not_allowed") && strings.Contains(string(b), "packet_sent")
	})
}

// BenchmarkTunnelUpload moves MTU-sized packets client -> server TUN over
// loopback UDP in windows of 32. On a shared, loaded machine the figure is
// indicative only. allocs/op counts every goroutine of the process
// (quic-go's, connect-ip-go's): the package's own per-packet path
// allocates nothing (TestClientWriteAllocs).
func BenchmarkTunnelUpload(b *testing.B) {
	k := newPKIB(b)
	dev := tun.NewChannelTUN(1500, 16)
	srv, err := NewServer(ServerConfig{Certificate: k.server, ClientCAs: k.pool, InnerPrefixes: []netip.Prefix{innerV4}, Routes: []netip.Prefix{routeV4}}, dev)
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
	c, err := Dial(ctx, ClientConfig{Server: a.String(), ServerName: "localhost", RootCAs: k.pool, Certificate: k.user, LocalAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	me := netip.AddrPortFrom(netip.MustParseAddr("10.77.0.2"), 40000)
	pkt := packettest.TCP{Src: me, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, DefaultMTU-40)}.Build()
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = make([]byte, len(pkt))
	}
	b.SetBytes(int64(len(pkt)) * 32)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for _, x := range batch {
			copy(x, pkt)
		}
		c.Write(batch, 0)
		for range batch {
			select {
			case <-dev.Outbound:
			case <-time.After(10 * time.Second):
				b.Fatalf("lost packets: %+v", srv.Stats())
			}
		}
	}
}

func newPKIB(b *testing.B) pki {
	ca, _ := NewCA("bench CA", time.Hour)
	srv, _ := NewServerCert(ca, []string{"localhost"}, time.Hour)
	cl, _ := NewClientCert(ca, "bench", time.Hour)
	k := pki{ca: ca, pool: x509.NewCertPool()}
	k.pool.AddCert(ca.Cert)
	var err error
	if k.server, err = srv.TLS(); err != nil {
		b.Fatal(err)
	}
	if k.user, err = cl.TLS(); err != nil {
		b.Fatal(err)
	}
	return k
}

// failingDev fails its first Read: the server must end, not keep accepting
// clients whose downlink would never arrive.
type failingDev struct{ tun.ChannelTUN }

func (*failingDev) Read([][]byte, []int, int) (int, error) { return 0, errors.New("device gone") }

func TestServeEndsWhenTUNFails(t *testing.T) {
	k := newPKI(t, "phone-1")
	srv, err := NewServer(ServerConfig{Certificate: k.server, ClientCAs: k.pool, InnerPrefixes: []netip.Prefix{innerV4}, Routes: []netip.Prefix{routeV4}}, &failingDev{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	err = srv.Serve(context.Background())
	srv.Wait()
	if err == nil || !strings.Contains(err.Error(), "device gone") {
		t.Fatalf("Serve: %v, want the TUN's error", err)
	}
}
