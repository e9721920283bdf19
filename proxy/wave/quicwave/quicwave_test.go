package quicwave

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"

	"github.com/m2ho/m2ho/proxy/wave"
)

func tlsConfigs(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"wave-test"}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"wave-test"}}
	return server, client
}

// A real quic-go connection over loopback UDP: the client sends datagrams
// through the Wave pump, the adapter feeds the pacer, and the pacer sees
// every datagram packet sent and acknowledged, with plausible RTTs.
func TestLoopbackFeedsPacer(t *testing.T) {
	srvTLS, cliTLS := tlsConfigs(t)
	conf := &quic.Config{EnableDatagrams: true, MaxIdleTimeout: 10 * time.Second}
	ln, err := quic.ListenAddr("127.0.0.1:0", srvTLS, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	const total = 400
	got := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := ln.Accept(ctx)
		if err != nil {
			got <- -1
			return
		}
		n := 0
		for n < total {
			if _, err := c.ReceiveDatagram(ctx); err != nil {
				break
			}
			n++
		}
		got <- n
		<-ctx.Done()
	}()

	p, err := wave.New(wave.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := wave.NewQueue(wave.QueueConfig{MaxPackets: 1024, MaxBytes: 2 << 20})
	ev := wave.NewEvents(0)
	tr := NewTrace(ev, nil, nil)
	cliConf := conf.Clone()
	cliConf.Tracer = Tracer(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(WithTrace(ctx, tr), ln.Addr().String(), cliTLS, cliConf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")

	pump := wave.NewPump(p, q, ev, conn.SendDatagram, nil)
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pump.Run(pctx) }()
	buf := make([]byte, 1000)
	for i := 0; i < total; i++ {
		buf[0] = byte(i)
		if !pump.Push(buf) {
			t.Fatalf("push %d refused", i)
		}
	}
	var n int
	select {
	case n = <-got:
	case <-ctx.Done():
		t.Fatal("server did not receive the datagrams")
	}
	// Let the last ACKs come back and be drained.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		s, _ := pump.State()
		if s.PacketsAcked+s.PacketsLost >= s.PacketsSent && s.PacketsSent > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
		pump.Locked(func(time.Time, *wave.Pacer, *wave.Queue) {}) // wake
	}
	pcancel()
	<-done
	s, qs := pump.State()
	st := tr.Stats()
	t.Logf("server received %d of %d; adapter: %d datagram packets, %d DATAGRAM frames, %d ACK frames, %d lost; pacer: %+v; queue: %+v",
		n, total, st.PacketsSent.Load(), st.DatagramFrames.Load(), st.AckFrames.Load(), st.PacketsLost.Load(), s, qs)
	if qs.Released != total || qs.DroppedHead != 0 {
		t.Fatalf("queue released %d, dropped %d", qs.Released, qs.DroppedHead)
	}
	// Every released datagram was seen in a sent packet (FIFO mapping).
	if st.DatagramFrames.Load() != total || s.PacketsUnpaced != 0 || s.PacketNumberBad != 0 {
		t.Fatalf("datagram frames %d unpaced %d bad pn %d", st.DatagramFrames.Load(), s.PacketsUnpaced, s.PacketNumberBad)
	}
	if s.PacketsSent != st.PacketsSent.Load() || s.PacketsAcked == 0 {
		t.Fatalf("pacer sent %d acked %d", s.PacketsSent, s.PacketsAcked)
	}
	// Loopback RTT: positive and well below a second even on a loaded machine.
	if s.MinRTT <= 0 || s.MinRTT > time.Second || s.SmoothedRTT <= 0 || s.SmoothedRTT > 2*time.Second {
		t.Fatalf("implausible RTT: min %v smoothed %v", s.MinRTT, s.SmoothedRTT)
	}
	// Bursts were settled and gave Wave updates (tracking or recovery).
	if s.BurstsMeasured+s.RecoveryUpdates == 0 || s.Mode == wave.ModeInitial {
		t.Fatalf("no Wave update: mode %v measured %d recovery %d", s.Mode, s.BurstsMeasured, s.RecoveryUpdates)
	}
}

// The recorder recognises the three events and ignores other packet types.
func TestRecorderMapping(t *testing.T) {
	p, _ := wave.New(wave.Config{})
	ev := wave.NewEvents(0)
	tr := NewTrace(ev, nil, func() time.Time { return time.Unix(100, 0) })
	r := tr.AddProducer()
	p.OnRelease(time.Unix(100, 0), 3, 300)
	r.RecordEvent(qlog.PacketSent{Header: qlog.PacketHeader{PacketType: qlog.PacketTypeHandshake, PacketNumber: 0}, Frames: []qlog.Frame{{Frame: &qlog.DatagramFrame{Length: 100}}}})
	r.RecordEvent(qlog.PacketSent{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 4}, Raw: qlog.RawInfo{Length: 250}, Frames: []qlog.Frame{{Frame: &qlog.DatagramFrame{Length: 100}}, {Frame: &qlog.DatagramFrame{Length: 100}}}})
	r.RecordEvent(qlog.PacketSent{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 5}, Raw: qlog.RawInfo{Length: 40}, Frames: []qlog.Frame{{Frame: &qlog.PingFrame{}}}})
	r.RecordEvent(qlog.PacketSent{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 6}, Raw: qlog.RawInfo{Length: 150}, Frames: []qlog.Frame{{Frame: &qlog.DatagramFrame{Length: 100}}}})
	r.RecordEvent(qlog.PacketReceived{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 9}, Frames: []qlog.Frame{{Frame: &qlog.AckFrame{AckRanges: []qlog.AckRange{{Smallest: 4, Largest: 4}}}}}})
	r.RecordEvent(qlog.PacketLost{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 6}})
	ev.DrainInto(p)
	s := p.State()
	if s.PacketsSent != 2 || s.PacketsAcked != 1 || s.PacketsLost != 1 || s.BytesInFlight != 0 || s.BurstsLossy != 1 {
		t.Fatalf("%+v", s)
	}
	if tr.Stats().DatagramFrames.Load() != 3 || tr.Stats().AckFrames.Load() != 1 {
		t.Fatalf("adapter stats %d %d", tr.Stats().DatagramFrames.Load(), tr.Stats().AckFrames.Load())
	}
	if a := testing.AllocsPerRun(100, func() {
		r.RecordEvent(qlog.PacketLost{Header: qlog.PacketHeader{PacketType: qlog.PacketType1RTT, PacketNumber: 7}})
	}); a > 1 { // boxing the value in the interface is the caller's allocation
		t.Fatalf("RecordEvent allocates %v", a)
	}
}

// The server side (the downlink sender): a Trace per connection through
// quic.Transport.ConnContext, found again with FromContext(conn.Context()).
func TestServerWiringThroughConnContext(t *testing.T) {
	srvTLS, cliTLS := tlsConfigs(t)
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{
		Conn: udp,
		ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			return WithTrace(ctx, NewTrace(wave.NewEvents(0), nil, nil)), nil
		},
	}
	defer tr.Close()
	conf := &quic.Config{EnableDatagrams: true, Tracer: Tracer(nil)}
	ln, err := tr.Listen(srvTLS, conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := quic.DialAddr(ctx, udp.LocalAddr().String(), cliTLS, &quic.Config{EnableDatagrams: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.CloseWithError(0, "")
	conn, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trace := FromContext(conn.Context())
	if trace == nil {
		t.Fatal("no Trace in the accepted connection's context")
	}
	p, _ := wave.New(wave.Config{})
	q, _ := wave.NewQueue(wave.QueueConfig{})
	pump := wave.NewPump(p, q, trace.Events(), conn.SendDatagram, nil)
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	go pump.Run(pctx)
	const total = 100
	recvd := make(chan int, 1)
	go func() {
		n := 0
		for n < total {
			if _, err := cli.ReceiveDatagram(ctx); err != nil {
				break
			}
			n++
		}
		recvd <- n
	}()
	buf := make([]byte, 1200)
	for i := 0; i < total; i++ {
		pump.Push(buf)
	}
	if n := <-recvd; n != total {
		t.Fatalf("client received %d of %d", n, total)
	}
	for i := 0; i < 250; i++ {
		if s, _ := pump.State(); s.PacketsAcked == s.PacketsSent && s.PacketsSent > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
		pump.Locked(func(time.Time, *wave.Pacer, *wave.Queue) {})
	}
	s, _ := pump.State()
	t.Logf("server pacer: sent %d acked %d min_rtt %v mode %v TxTime %v", s.PacketsSent, s.PacketsAcked, s.MinRTT, s.Mode, s.TxTime)
	if s.PacketsSent != total || s.PacketsAcked == 0 || s.MinRTT <= 0 || s.MinRTT > time.Second {
		t.Fatalf("server pacer: %+v", s)
	}
}
