package tunnel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	connectip "github.com/quic-go/connect-ip-go"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/qlogwriter"
	"github.com/yosida95/uritemplate/v3"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/packet"
)

// ClientConfig configures the phone's end of the tunnel.
type ClientConfig struct {
	// Server is the server's UDP address, host:port.
	Server string
	// ServerName is the name the server's certificate must carry (and the
	// CONNECT-IP request's authority); default: Server's host.
	ServerName string
	// RootCAs verifies the server's certificate.
	RootCAs *x509.CertPool
	// Certificate is the client's certificate and key (mutual TLS).
	Certificate tls.Certificate
	// LocalAddr is the UDP address to send from (default: any).
	LocalAddr string
	// MTU is the inner MTU (DefaultMTU when 0); larger packets get a
	// Packet Too Big back through Read.
	MTU int
	// QueueLen bounds the uplink and the downlink queue in packets
	// (default 512); excess is tail-dropped and counted.
	QueueLen int
	// NoFullPackets keeps quic-go's defaults (4-byte connection IDs, path
	// MTU discovery from 1350 bytes), under which no DATAGRAM packet is
	// full-size and each costs the sender a system call. By default the
	// client asks for 20-byte connection IDs, so that the server's
	// full-size DATAGRAM packets (ServerConfig.NoFullPackets) go out in GSO
	// batches, and sends its own at fullPacketSize(MTU) without discovery;
	// the path must then carry UDP payloads of MTU+42 bytes from the
	// handshake on (1322 for the default MTU, less than the 1350 of
	// quic-go's first packets otherwise).
	NoFullPackets bool
	// Pacer paces the uplink (PassThrough when nil).
	Pacer Pacer
	// NAT rewrites the tethered host's source address to the assigned
	// inner address (and back on the downlink), as a phone's VPN does for
	// tethered traffic. One tethered host per address family: packets from
	// a second one are dropped and counted (NAPT is not done).
	NAT bool
	// NATHosts pre-set the tethered host of each family (at most one per
	// family), so that the far side can open connections to it before it
	// sent anything (a downlink SYN to the inner address reaches it). Only
	// with NAT.
	NATHosts []netip.Addr
	// QlogDir, when set, gets the connection's qlog file.
	QlogDir string
	// CountDrops keeps quic-go's events in the trace without a file too,
	// so that the DATAGRAMs quic-go drops on receipt are counted
	// (DropDatagramRecvQueue; qlog.go). Off by default: with quic-go's
	// events in the trace it builds one per packet (BenchmarkTunnelUpload:
	// ~22 -> ~30 allocations per packet), which also slows the receive
	// chain whose lag causes those drops. http3's queue loss
	// (DropH3DatagramQueue) is counted either way, unless NoReaderYield
	// leaves the client without a trace.
	CountDrops bool
	// Log gets the client's log lines (zap.NewNop when nil).
	Log *zap.Logger
	// HintRateWait bounds how long SendHint holds an executed hint whose
	// CEst is 0 for the first delivery-rate interval on the new cell (see
	// SendHint); default DefaultHintRateWait, negative: no wait (the hint
	// goes as given).
	HintRateWait time.Duration

	// qlogUnbuffered writes the qlog file unbuffered, as before
	// bufferedFile (BenchmarkTunnelBulk's before/after only).
	qlogUnbuffered bool
	// NoReaderYield turns the trace's yieldToReader off, as before it
	// (for measuring it: BenchmarkTunnelBulk, m2ho run's hidden
	// --tunnel-reader-yield=false); without QlogDir or CountDrops the
	// client then has no trace, as before.
	NoReaderYield bool
	// NoRecvWait turns the trace's waitForH3 off (qlog.go): quic-go's
	// receiving goroutine then never waits for http3's, and a burst
	// beyond quic-go's DATAGRAM receive queue is dropped, as before it.
	// With the wait on (the default) the trace keeps quic-go's events,
	// which the wait needs, as CountDrops does.
	NoRecvWait bool
	// onTrace gets each connection's trace (tests only).
	onTrace func(*countingTrace)
}

// ClientStats are the client's counters.
type ClientStats struct {
	PacketsUp, BytesUp     uint64 // handed to the tunnel
	PacketsDown, BytesDown uint64 // returned by Read (tunnel packets and local ICMP)
	DropUpQueueFull        uint64
	DropUpQueueLimit       uint64 // uplink queue held at the pacer's QueueLimit (QueueLimiter)
	DropDownQueueFull      uint64
	DropInvalid            uint64 // Write got something that is not an IP packet
	DropNATConflict        uint64 // a second tethered host in one family (see ClientConfig.NAT)
	DropRefused            uint64 // connect-ip-go refused to send (source/destination not allowed)
	PTBSent                uint64
	MSSClamped             uint64
	HintsSent              uint64
	// HintsRateMeasured: executed hints whose c_est the client filled from
	// its RateMeter; HintsRateUnknown: those sent with c_est 0 because no
	// interval closed within HintRateWait.
	HintsRateMeasured, HintsRateUnknown uint64
	Migrations                          uint64
	SendsPathGone                       uint64 // UDP sends refused (address or route gone): taken as lost
	// DropDatagramRecvQueue: quic-go's DATAGRAM receive queue was full
	// (downlink packets lost); DropH3DatagramQueue: inferred, http3's
	// per-stream DATAGRAM queue was full (see eventH3DatagramParsed).
	DropDatagramRecvQueue, DropH3DatagramQueue uint64
	// RecvWaits: quic-go's receiving goroutine waited for http3's
	// (waitForH3); RecvWaitsTimedOut: of those, ended at the bound with
	// quic-go's queue still deep.
	RecvWaits, RecvWaitsTimedOut uint64
}

// Add adds x's counters to s (a client's over its connections).
func (s *ClientStats) Add(x ClientStats) {
	s.PacketsUp += x.PacketsUp
	s.BytesUp += x.BytesUp
	s.PacketsDown += x.PacketsDown
	s.BytesDown += x.BytesDown
	s.DropUpQueueFull += x.DropUpQueueFull
	s.DropUpQueueLimit += x.DropUpQueueLimit
	s.DropDownQueueFull += x.DropDownQueueFull
	s.DropInvalid += x.DropInvalid
	s.DropNATConflict += x.DropNATConflict
	s.DropRefused += x.DropRefused
	s.PTBSent += x.PTBSent
	s.MSSClamped += x.MSSClamped
	s.HintsSent += x.HintsSent
	s.HintsRateMeasured += x.HintsRateMeasured
	s.HintsRateUnknown += x.HintsRateUnknown
	s.Migrations += x.Migrations
	s.SendsPathGone += x.SendsPathGone
	s.DropDatagramRecvQueue += x.DropDatagramRecvQueue
	s.DropH3DatagramQueue += x.DropH3DatagramQueue
	s.RecvWaits += x.RecvWaits
	s.RecvWaitsTimedOut += x.RecvWaitsTimedOut
}

// Client is the phone's end of the tunnel: a CONNECT-IP session over one
// QUIC connection. It is the engine's Sink (Write: packets of quic-mode
// flows into the tunnel) and Source (Read: packets from the tunnel, plus
// the ICMP errors the client itself generates, for the TUN).
type Client struct {
	cfg  ClientConfig
	log  *zap.Logger
	qc   *quic.Conn
	h3   *http3.ClientConn
	ip   *connectip.Conn
	up   *queue
	down *queue

	addrs  []netip.Prefix
	routes []connectip.IPRoute
	assign [2]netip.Addr // [0] IPv4, [1] IPv6 assigned address

	natMu   sync.Mutex
	natOrig [2]netip.Addr // the tethered host's address per family

	hintMu  sync.Mutex
	hintStr *http3.RequestStream
	hintSeq uint64
	rate    RateMeter // downlink delivery rate, for the executed hint's c_est

	trMu       sync.Mutex
	transports []*quic.Transport
	sockets    []net.PacketConn // quic.Transport does not close a Conn it was given
	local      net.Addr
	writes     *socketWrites // the current socket's
	pathGoneCh chan struct{} // PathGone

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	dead   chan struct{} // closed when recvLoop ends: the session or connection is gone

	st struct {
		packetsUp, bytesUp, packetsDown, bytesDown atomic.Uint64
		invalid, natConflict, refused, ptb, clamp  atomic.Uint64
		hints, migrations                          atomic.Uint64
		rateMeasured, rateUnknown                  atomic.Uint64
		pathGone                                   atomic.Uint64 // sends refused for want of an address/route: lost
		dgramRecv, h3Parsed, peerProcessed         atomic.Uint64
		recvWaits, recvWaitsOut                    atomic.Uint64
	}
}

// Dial connects to the server, opens the CONNECT-IP session and waits for
// the assigned addresses and routes.
func Dial(ctx context.Context, cfg ClientConfig) (c *Client, err error) {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < minMTU || cfg.MTU > maxMTU {
		return nil, fmt.Errorf("tunnel: MTU %d: must lie in [%d, %d]", cfg.MTU, minMTU, maxMTU)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 512
	}
	if cfg.QueueLen < 1 {
		return nil, fmt.Errorf("tunnel: QueueLen %d: must be positive", cfg.QueueLen)
	}
	host, port, err := net.SplitHostPort(cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("tunnel: server %q: %v", cfg.Server, err)
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	raddr, err := net.ResolveUDPAddr("udp", cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("tunnel: server %q: %v", cfg.Server, err)
	}
	if cfg.LocalAddr == "" {
		cfg.LocalAddr = ":0"
	}
	udp, err := net.ListenPacket("udp", cfg.LocalAddr)
	if err != nil {
		return nil, fmt.Errorf("tunnel: local address %q: %w", cfg.LocalAddr, err)
	}
	c = &Client{
		cfg: cfg, log: cfg.Log,
		up:      newQueue(cfg.QueueLen, cfg.MTU),
		down:    newQueue(cfg.QueueLen, max(cfg.MTU, PTBMaxLen, maxMTU+64)), // what a DATAGRAM may hold
		sockets: []net.PacketConn{udp},
		local:   udp.LocalAddr(),
		dead:    make(chan struct{}),
	}
	c.pathGoneCh = make(chan struct{}, 1)
	c.writes = &socketWrites{notify: c.pathGoneCh}
	tr := c.transport(wrapLossy(udp, &c.st.pathGone, c.writes))
	c.transports = []*quic.Transport{tr}
	if l, ok := cfg.Pacer.(QueueLimiter); ok {
		c.up.limiter = l
	}
	for _, h := range cfg.NATHosts {
		h = h.Unmap()
		f := family(h)
		if !h.IsValid() || c.natOrig[f].IsValid() {
			udp.Close()
			return nil, fmt.Errorf("tunnel: NAT host %v: want at most one valid address per family", h)
		}
		c.natOrig[f] = h
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cl := c // the returns below set c to nil
	defer func() {
		if err != nil {
			cl.Close()
		}
	}()
	tlsConf := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		ServerName:   cfg.ServerName,
		RootCAs:      cfg.RootCAs,
		Certificates: []tls.Certificate{cfg.Certificate},
		NextProtos:   []string{http3.NextProtoH3},
	}
	qconf := &quic.Config{
		EnableDatagrams:   true,
		InitialPacketSize: 1350,
		MaxIdleTimeout:    30 * time.Second,
		KeepAlivePeriod:   10 * time.Second,
	}
	if !cfg.NoFullPackets {
		qconf.InitialPacketSize, qconf.DisablePathMTUDiscovery = uint16(fullPacketSize(cfg.MTU)), true
	}
	// The wait for http3 (waitForH3, on unless NoRecvWait) needs quic-go's
	// events. Without it, a qlog file or CountDrops the trace is light: no
	// quic-go events (quic-go builds one per packet for a full trace), only
	// http3's and connect-ip-go's two per DATAGRAM, which yieldToReader
	// needs and which count http3's queue loss (DropH3DatagramQueue);
	// quic-go's own receive drops are then not counted. Write checks
	// source and destination itself (allowed) before connect-ip-go would.
	// NoReaderYield without either needs no trace at all (as before the
	// yield).
	if cfg.QlogDir != "" || cfg.CountDrops || !cfg.NoReaderYield || !cfg.NoRecvWait {
		light := cfg.QlogDir == "" && !cfg.CountDrops && cfg.NoRecvWait
		qconf.Tracer = func(_ context.Context, isClient bool, odcid quic.ConnectionID) qlogwriter.Trace {
			t := &countingTrace{noYield: cfg.NoReaderYield, light: light, recvWait: !cfg.NoRecvWait, count: func(reason string, _ bool) {
				switch reason {
				case "packet_too_large": // answered with a PTB, counted there
				case eventRecvWait:
					c.st.recvWaits.Add(1)
				case eventRecvWaitOut:
					c.st.recvWaitsOut.Add(1)
				case reasonDatagramRecvQueue:
					// reasonDatagramTooLarge (fits no packet) falls to
					// refused below: quic-go would not send it.
					c.st.dgramRecv.Add(1)
				case eventH3DatagramParsed:
					c.st.h3Parsed.Add(1)
				case eventPeerPacketProcessed:
					c.st.peerProcessed.Add(1)
				default:
					c.st.refused.Add(1)
				}
			}}
			if cfg.onTrace != nil {
				cfg.onTrace(t)
			}
			if cfg.QlogDir == "" {
				return t
			}
			f, err := os.Create(filepath.Join(cfg.QlogDir, fmt.Sprintf("%s_client.sqlog", odcid)))
			if err != nil {
				cfg.Log.Warn("qlog", zap.Error(err))
				return t
			}
			var w io.WriteCloser = newBufferedFile(f)
			if cfg.qlogUnbuffered {
				w = f
			}
			t.file = qlogwriter.NewConnectionFileSeq(w, isClient, odcid)
			go t.file.Run()
			return t
		}
	}
	if c.qc, err = tr.Dial(ctx, raddr, tlsConf, qconf); err != nil {
		return nil, fmt.Errorf("tunnel: dialing %s: %w", cfg.Server, err)
	}
	c.h3 = (&http3.Transport{EnableDatagrams: true}).NewClientConn(c.qc)
	tmpl, err := uritemplate.New("https://" + net.JoinHostPort(cfg.ServerName, port) + ConnectIPPath)
	if err != nil {
		return nil, fmt.Errorf("tunnel: server name %q: %v", cfg.ServerName, err)
	}
	// The request's context lives as long as the client: it bounds the
	// session's request stream.
	req, err := connectip.NewRequest(c.ctx, tmpl)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	ipc, rsp, err := connectip.NewClientConn(c.h3).Dial(req)
	if err != nil {
		if rsp != nil {
			return nil, fmt.Errorf("tunnel: CONNECT-IP refused: %s", rsp.Status)
		}
		return nil, fmt.Errorf("tunnel: CONNECT-IP: %w", err)
	}
	c.ip = ipc
	assigned, err := ipc.ReceiveAddressAssignment(ctx)
	if err != nil {
		return nil, fmt.Errorf("tunnel: waiting for ADDRESS_ASSIGN: %w", err)
	}
	for _, a := range assigned {
		if a.Rejected() {
			continue
		}
		c.addrs = append(c.addrs, a.IPPrefix)
		fam := 0
		if a.IPPrefix.Addr().Is6() {
			fam = 1
		}
		if !c.assign[fam].IsValid() {
			c.assign[fam] = a.IPPrefix.Addr()
		}
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("tunnel: the server assigned no address")
	}
	if c.routes, err = ipc.Routes(ctx); err != nil {
		return nil, fmt.Errorf("tunnel: waiting for ROUTE_ADVERTISEMENT: %w", err)
	}
	if err := c.openHints(); err != nil {
		return nil, err
	}
	c.log.Info("tunnel up", zap.String("server", cfg.Server), zap.Any("addresses", c.addrs), zap.Any("routes", c.Routes()))
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.sendLoop() }()
	go func() { defer c.wg.Done(); c.recvLoop() }()
	return c, nil
}

// openHints opens the hints request stream (HINTS.md).
func (c *Client) openHints() error {
	str, err := c.h3.OpenRequestStream(c.ctx)
	if err != nil {
		return fmt.Errorf("tunnel: opening the hints stream: %w", err)
	}
	u := "https://" + net.JoinHostPort(c.cfg.ServerName, portOf(c.cfg.Server)) + HintsPath
	// An extended CONNECT (RFC 9220) makes the request stream a byte
	// stream both ways without a length, as CONNECT-IP's own stream is.
	req, err := http.NewRequestWithContext(c.ctx, http.MethodConnect, u, nil)
	if err != nil {
		return fmt.Errorf("tunnel: hints request: %w", err)
	}
	req.Proto = HintsProtocol
	if err := str.SendRequestHeader(req); err != nil {
		return fmt.Errorf("tunnel: hints request: %w", err)
	}
	c.hintStr = str
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		rsp, err := str.ReadResponse()
		if err == nil && rsp.StatusCode != http.StatusOK {
			c.log.Warn("hints channel refused", zap.String("status", rsp.Status))
		}
	}()
	return nil
}

func portOf(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// ErrClosed is what Read and Write return once the client is closed (or
// the connection is gone); it is both os.ErrClosed (the engine's test for a
// closed device) and net.ErrClosed.
var ErrClosed = fmt.Errorf("tunnel: client closed: %w (%w)", os.ErrClosed, net.ErrClosed)

// Name names the client for the engine's logs (proxy.Sink, proxy.Source).
func (c *Client) Name() string { return "tunnel " + c.cfg.Server }

// Addresses are the inner addresses the server assigned.
func (c *Client) Addresses() []netip.Prefix { return c.addrs }

// Routes are the prefixes the server forwards to.
func (c *Client) Routes() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range c.routes {
		out = append(out, r.Prefixes()...)
	}
	return out
}

// transport is a quic.Transport on conn; every path of the connection
// (Migrate's too) has one with the same connection ID length, since each
// demultiplexes by the IDs the connection issued.
func (c *Client) transport(conn net.PacketConn) *quic.Transport {
	tr := &quic.Transport{Conn: conn}
	if !c.cfg.NoFullPackets {
		tr.ConnectionIDLength = fullPacketCIDLen
	}
	return tr
}

// MTU is the inner MTU.
func (c *Client) MTU() int { return c.cfg.MTU }

// BatchSize is the most packets one Read returns (for the engine's loop).
func (c *Client) BatchSize() int { return 16 }

// LocalAddr is the UDP address the tunnel currently sends from.
func (c *Client) LocalAddr() net.Addr {
	c.trMu.Lock()
	defer c.trMu.Unlock()
	return c.local
}

// Write takes packets of quic-mode flows, each at bufs[i][offset:], into
// the tunnel: the MSS of a TCP SYN is clamped to the inner MTU, a packet
// larger than the MTU is answered with a Packet Too Big (returned by Read)
// instead of being sent, the rest waits in the bounded uplink queue. It
// returns len(bufs): every packet was dealt with (sent, answered, or a
// counted drop); an error only once the client is closed.
func (c *Client) Write(bufs [][]byte, offset int) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	var p packet.Parsed
	var ptb [PTBMaxLen]byte
	for _, b := range bufs {
		pkt := b[offset:]
		if !p.Decode(pkt) {
			c.st.invalid.Add(1)
			continue
		}
		pkt = pkt[:p.Length]
		if len(pkt) > c.cfg.MTU {
			if n := PacketTooBig(ptb[:], pkt, &p, c.cfg.MTU); n > 0 {
				if c.down.push(ptb[:n]) {
					c.st.ptb.Add(1)
				}
			}
			continue
		}
		if c.cfg.NAT && !c.natUp(pkt, &p) {
			continue
		}
		if !c.allowed(&p) {
			c.st.refused.Add(1)
			continue
		}
		if ClampMSS(pkt, &p, c.cfg.MTU) {
			c.st.clamp.Add(1)
		}
		c.up.push(pkt)
	}
	return len(bufs), nil
}

// allowed applies RFC 9484's rules as connect-ip-go's WritePacket would
// (source an assigned address, destination inside an advertised route), so
// a refusal is counted here, synchronously and without a qlog trace.
func (c *Client) allowed(p *packet.Parsed) bool {
	if a := c.assign[family(p.Src)]; !a.IsValid() || a != p.Src {
		return false
	}
	for _, r := range c.routes {
		if r.StartIP.Is4() == p.Dst.Is4() && r.StartIP.Compare(p.Dst) <= 0 && p.Dst.Compare(r.EndIP) <= 0 {
			return true
		}
	}
	return false
}

func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// natUp rewrites a tethered host's source to the assigned address; false
// when the packet must be dropped (a second host in the family, or no
// address of its family).
func (c *Client) natUp(pkt []byte, p *packet.Parsed) bool {
	f := family(p.Src)
	a := c.assign[f]
	if !a.IsValid() {
		c.st.refused.Add(1)
		return false
	}
	if p.Src == a {
		return true
	}
	c.natMu.Lock()
	orig := c.natOrig[f]
	if !orig.IsValid() {
		c.natOrig[f], orig = p.Src, p.Src
	}
	c.natMu.Unlock()
	if orig != p.Src {
		c.st.natConflict.Add(1)
		return false
	}
	rewriteAddr(pkt, p, true, a)
	return true
}

func (c *Client) natDown(pkt []byte, p *packet.Parsed) {
	f := family(p.Dst)
	if p.Dst != c.assign[f] {
		return
	}
	c.natMu.Lock()
	orig := c.natOrig[f]
	c.natMu.Unlock()
	if orig.IsValid() {
		rewriteAddr(pkt, p, false, orig)
	}
}

// Read returns packets for the TUN, each at bufs[i][offset:] with its
// length in sizes[i]: what came through the tunnel (NAT undone, MSS of a
// SYN clamped), and the ICMP errors Write generated. It blocks until at
// least one is available.
func (c *Client) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	var p packet.Parsed
	for {
		n := 0
		for n < len(bufs) {
			pkt, ok := c.down.front()
			if !ok {
				break
			}
			if len(pkt) > len(bufs[n])-offset {
				c.down.pop()
				c.st.invalid.Add(1)
				continue
			}
			sizes[n] = copy(bufs[n][offset:], pkt)
			c.down.pop()
			out := bufs[n][offset : offset+sizes[n]]
			if !p.Decode(out) {
				c.st.invalid.Add(1)
				continue
			}
			if c.cfg.NAT {
				c.natDown(out, &p)
			}
			if ClampMSS(out, &p, c.cfg.MTU) {
				c.st.clamp.Add(1)
			}
			c.st.packetsDown.Add(1)
			c.st.bytesDown.Add(uint64(sizes[n]))
			n++
		}
		if n > 0 {
			return n, nil
		}
		if c.down.isClosed() {
			return 0, ErrClosed
		}
		<-c.down.notify
	}
}

func (c *Client) sendLoop() {
	pacer := c.cfg.Pacer
	if pacer == nil {
		pacer = PassThrough{}
	}
	runSender(c.up, pacer, func(pkt []byte) bool {
		icmp, err := c.ip.WritePacket(pkt)
		if err != nil {
			return !errors.Is(err, net.ErrClosed) && c.ctx.Err() == nil
		}
		if icmp != nil {
			// The path's DATAGRAM limit fell below the MTU: connect-ip-go
			// composed the Packet Too Big.
			c.down.push(icmp)
			c.st.ptb.Add(1)
			return true
		}
		c.st.packetsUp.Add(1)
		c.st.bytesUp.Add(uint64(len(pkt)))
		return true
	})
}

// recvLoop only moves what ReadPacket returns into the downlink queue, so
// that http3's per-stream DATAGRAM queue (32, quic-go v0.65
// http3/state_tracking_stream.go), which drops silently when full, is
// drained as fast as quic-go fills it while the engine writes the TUN: a
// burst waits in the queue (QueueLen packets, tail drop counted:
// DropDownQueueFull). Read undoes the NAT and clamps, in the engine's
// goroutine.
func (c *Client) recvLoop() {
	defer close(c.dead)
	buf := make([]byte, maxMTU+64)
	for {
		n, err := c.ip.ReadPacket(buf)
		if err != nil {
			c.down.close()
			c.up.close()
			if !c.closed.Load() {
				c.log.Warn("tunnel session ended", zap.Error(err))
			}
			return
		}
		c.rate.Sample(time.Now(), n, c.qc.ConnectionStats().SmoothedRTT)
		c.down.push(buf[:n])
	}
}

// SendHint sends a hint to the server on the hints channel; Seq is set
// here.
//
// An executed hint with CEst 0 gets the tunnel's own measure of the new
// cell: the M2HO controller restarts its estimate at the random access
// (the new cell's capacity has nothing to do with the old one's), so its
// c_est at "executed" is always 0, and it sees no tunnelled flow anyway.
// SendHint restarts the client's RateMeter and holds the hint until the
// meter's first RTT-long interval on the new cell has closed (the first
// round of downlink delivery after the handover, whose first packets are
// the backlog the target cell drains at its own rate), at most
// HintRateWait; the hint then carries that rate, or 0 (unknown) if no
// interval closed. Meanwhile the server keeps the ŝ_max cap, as the
// controller keeps Preparation's clamp through Smoothing. The wait blocks
// the caller (the phone's hint forwarder, whose later hints must follow
// this one anyway).
func (c *Client) SendHint(h Hint) error {
	if h.Kind == HintExecuted && h.CEst == 0 && c.cfg.HintRateWait >= 0 {
		wait := c.cfg.HintRateWait
		if wait == 0 {
			wait = DefaultHintRateWait
		}
		fresh := c.rate.Restart()
		t := time.NewTimer(wait)
		select {
		case <-fresh:
		case <-t.C:
		case <-c.ctx.Done():
		}
		t.Stop()
		if h.CEst = c.rate.Rate(); h.CEst > 0 {
			c.st.rateMeasured.Add(1)
		} else {
			c.st.rateUnknown.Add(1)
		}
		c.log.Info("executed hint: c_est from the tunnel's delivery rate", zap.Float64("c_est", h.CEst), zap.Stringer("cell_type", h.CellType))
	}
	c.hintMu.Lock()
	defer c.hintMu.Unlock()
	c.hintSeq++
	h.Seq = c.hintSeq
	b, err := MarshalHint(h)
	if err != nil {
		return err
	}
	if _, err := c.hintStr.Write(b); err != nil {
		return fmt.Errorf("tunnel: sending hint: %w", err)
	}
	c.st.hints.Add(1)
	return nil
}

// ErrProbeNotSent is Migrate's error when quic-go sent no path probe: it
// sends PATH_CHALLENGE only when its congestion window has room, and when
// the old address went away with a window's worth of packets in flight
// (every send refused, so no ACK will ever free the window) it never does.
// The connection cannot move; a new one from the new address can
// (tunnelLink redials at once).
var ErrProbeNotSent = errors.New("quic-go sent no path probe: its congestion window is full of packets sent on the lost path (it probes only when not congestion-limited)")

// probeSendWait is how long Migrate waits for the first PATH_CHALLENGE to
// leave before it gives up with ErrProbeNotSent: a connection whose window
// is full on a live path gets room back from the next ACK, within an RTT.
func probeSendWait(srtt time.Duration) time.Duration { return max(time.Second, 3*srtt) }

// Migrate moves the connection to a new local UDP address (QUIC connection
// migration, RFC 9000 §9): a new socket, a path probed with
// PATH_CHALLENGE, then switched to. Packets keep flowing on the old path
// until the switch. The old socket stays open (quic-go closes a
// connection with the transport it was dialed on) until Close. When
// quic-go sends no probe within probeSendWait it returns ErrProbeNotSent.
func (c *Client) Migrate(ctx context.Context, localAddr string) error {
	udp, err := net.ListenPacket("udp", localAddr)
	if err != nil {
		return fmt.Errorf("tunnel: migrate to %q: %w", localAddr, err)
	}
	w := &socketWrites{notify: c.pathGoneCh}
	tr := c.transport(wrapLossy(udp, &c.st.pathGone, w))
	path, err := c.qc.AddPath(tr)
	if err != nil {
		tr.Close()
		udp.Close()
		return fmt.Errorf("tunnel: migrate to %q: %w", localAddr, err)
	}
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if _, ok := udp.(*net.UDPConn); ok { // else w counts nothing
		t := time.AfterFunc(probeSendWait(c.qc.ConnectionStats().SmoothedRTT), func() {
			if w.ok.Load() == 0 {
				cancel(ErrProbeNotSent)
			}
		})
		defer t.Stop()
	}
	if err := path.Probe(pctx); err != nil {
		path.Close()
		tr.Close()
		udp.Close()
		return fmt.Errorf("tunnel: migrate to %q: probing: %w", localAddr, err)
	}
	if err := path.Switch(); err != nil {
		path.Close()
		tr.Close()
		udp.Close()
		return fmt.Errorf("tunnel: migrate to %q: switching: %w", localAddr, err)
	}
	c.trMu.Lock()
	old := c.local
	c.transports = append(c.transports, tr)
	c.sockets = append(c.sockets, udp)
	c.local = udp.LocalAddr()
	c.writes = w
	c.trMu.Unlock()
	c.st.migrations.Add(1)
	c.log.Info("migrated", zap.Stringer("from", old), zap.Stringer("to", udp.LocalAddr()))
	return nil
}

// PathGone receives a token (at most one pending) when the kernel refused
// a send for want of an address or a route: the uplink's address has
// probably gone, and the sooner Migrate is called the fewer packets go
// into the void first (with a window's worth of them quic-go can no
// longer probe: ErrProbeNotSent).
func (c *Client) PathGone() <-chan struct{} { return c.pathGoneCh }

// Done is closed when the session or its connection has ended (the
// server closed it, the idle timeout struck, or Close): from then on Write
// and Read return ErrClosed, and a new Dial is needed.
func (c *Client) Done() <-chan struct{} { return c.dead }

// Stats returns the counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{
		PacketsUp: c.st.packetsUp.Load(), BytesUp: c.st.bytesUp.Load(),
		PacketsDown: c.st.packetsDown.Load(), BytesDown: c.st.bytesDown.Load(),
		DropUpQueueFull: c.up.dropped.Load(), DropDownQueueFull: c.down.dropped.Load(), DropUpQueueLimit: c.up.limited.Load(),
		DropInvalid: c.st.invalid.Load(), DropNATConflict: c.st.natConflict.Load(),
		DropRefused: c.st.refused.Load(), PTBSent: c.st.ptb.Load(), MSSClamped: c.st.clamp.Load(),
		HintsSent: c.st.hints.Load(), HintsRateMeasured: c.st.rateMeasured.Load(), HintsRateUnknown: c.st.rateUnknown.Load(), Migrations: c.st.migrations.Load(), SendsPathGone: c.st.pathGone.Load(),
		DropDatagramRecvQueue: c.st.dgramRecv.Load(), DropH3DatagramQueue: h3Lost(c.st.h3Parsed.Load(), c.st.peerProcessed.Load()),
		RecvWaits: c.st.recvWaits.Load(), RecvWaitsTimedOut: c.st.recvWaitsOut.Load(),
	}
}

// ConnectionStats are quic-go's statistics of the connection (RTT, ...),
// which the bench reports as the tunnel's own RTT.
func (c *Client) ConnectionStats() quic.ConnectionStats { return c.qc.ConnectionStats() }

// Close ends the session and the connection.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.up.close()
	c.down.close()
	if c.ip != nil {
		c.ip.Close()
	}
	if c.qc != nil {
		c.qc.CloseWithError(0, "")
	}
	c.cancel()
	c.wg.Wait()
	c.trMu.Lock()
	defer c.trMu.Unlock()
	for _, tr := range c.transports {
		tr.Close()
	}
	for _, s := range c.sockets {
		s.Close()
	}
	return nil
}
