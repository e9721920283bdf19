package tunnel

import (
	"bufio"
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
	"slices"
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
	"github.com/m2ho/m2ho/tun"
)

// Device is the part of a packet device (tun.Device) the server needs: its
// own TUN, into which it writes the clients' packets and from which it
// reads what is routed back to their inner addresses.
type Device interface {
	Read(bufs [][]byte, sizes []int, offset int) (int, error)
	Write(bufs [][]byte, offset int) (int, error)
}

// ServerConfig configures a tunnel server.
type ServerConfig struct {
	// Certificate is the server's certificate and key.
	Certificate tls.Certificate
	// ClientCAs verifies client certificates: a client without a
	// certificate signed by one of them fails the TLS handshake.
	ClientCAs *x509.CertPool
	// InnerPrefixes are the pools of inner addresses, at most one IPv4 and
	// one IPv6 prefix: the first host address of each is the server's, each
	// CONNECT-IP session gets one more from each (ADDRESS_ASSIGN).
	InnerPrefixes []netip.Prefix
	// Routes are the only destinations a client may reach
	// (ROUTE_ADVERTISEMENT); anything else is dropped and counted. The
	// server is no open relay: there is no default.
	Routes []netip.Prefix
	// MTU is the inner MTU (DefaultMTU when 0).
	MTU int
	// NoFullPackets keeps quic-go's defaults (4-byte connection IDs, path
	// MTU discovery from 1350 bytes). By default the server sends its
	// DATAGRAM packets at fullPacketSize(MTU) without discovery, so that
	// against a client with 20-byte connection IDs (ClientConfig's
	// default) MTU-sized inner packets fill them and a burst leaves in one
	// GSO system call, and asks clients for 20-byte IDs itself. A client
	// with shorter IDs still works, one system call per packet.
	NoFullPackets bool
	// QueueLen bounds each session's downlink queue in packets (default
	// 512); excess is tail-dropped and counted.
	QueueLen int
	// MaxConnsPerClient bounds the QUIC connections open at once per client
	// identity (the certificate's subject CN; default 4).
	MaxConnsPerClient int
	// MaxSessions bounds the sessions of all clients (default 1024).
	MaxSessions int
	// AddressHold is how long a client identity's inner addresses stay
	// reserved for it after its session ended (DefaultAddressHold when 0,
	// none when negative): a phone that redials gets the same addresses
	// back, so the flows NATed to them continue. While held, no other
	// identity gets them. A new session of an identity whose older session
	// is still open takes that session's addresses over and ends it (one
	// live session per identity: the phone's redial after a loss, while
	// the server has not yet noticed the loss).
	AddressHold time.Duration
	// MaxHeldAddresses bounds the holds per pool (DefaultMaxHeldAddresses
	// when 0, none when negative); when full, the hold expiring first goes.
	MaxHeldAddresses int
	// NewPacer makes the downlink pacer of a session (PassThrough when nil).
	NewPacer func(identity string) Pacer
	// NewConnPacer is NewPacer given the session's connection too (its
	// Context carries what ConnContext put there); it wins over NewPacer.
	NewConnPacer func(identity string, qc *quic.Conn) Pacer
	// ConnContext, when set, derives each connection's context before its
	// handshake (quic.Transport.ConnContext), and WrapTracer, when set,
	// wraps the server's own per-connection trace (drop counting, qlog).
	// Together they let a pacer see quic-go's packet and ACK events: the
	// Wave pacer's quicwave.WithTrace and quicwave.Tracer (cmd/m2ho).
	ConnContext func(ctx context.Context) context.Context
	WrapTracer  func(inner func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace
	// QlogDir, when set, gets one qlog file per connection.
	QlogDir string
	// Log gets the server's log lines (zap.NewNop when nil).
	Log *zap.Logger

	// inlineUplink writes each uplink packet to the TUN from the
	// ReadPacket loop itself, one Write per packet, as before the uplink
	// ring (the receive-path test's and BenchmarkTunnelBulk's before/after
	// only).
	inlineUplink bool
	// noH3Yield turns yieldToReader off, as before it (BenchmarkTunnelBulk).
	noH3Yield bool
}

// ServerStats are the server's counters (Prometheus exports them).
type ServerStats struct {
	ConnsAccepted, ConnsRefused  uint64 // refused: over MaxConnsPerClient
	SessionsOpened, SessionsOpen uint64
	SessionsRefused              uint64 // pool spent, MaxSessions, or a second session on one connection
	PacketsUp, BytesUp           uint64 // client -> TUN
	PacketsDown, BytesDown       uint64 // TUN -> client
	DropSpoofedSource            uint64 // inner source not the client's (connect-ip-go's check)
	DropOutsideRoutes            uint64 // destination (or protocol) outside the advertised routes
	DropInvalid                  uint64 // malformed inner packet or TTL expired
	DropQueueFull                uint64 // downlink queue bound
	DropQueueLimit               uint64 // downlink queue held at the pacer's QueueLimit (QueueLimiter)
	DropUpQueueFull              uint64 // uplink ring bound: the TUN writer fell QueueLen packets behind
	DropNoSession                uint64 // from the TUN to an address no session holds
	DropSendError                uint64
	DropDatagramRecvQueue        uint64 // quic-go's DATAGRAM receive queue was full (uplink packets lost)
	DropH3DatagramQueue          uint64 // inferred: http3's per-stream DATAGRAM queue was full (see eventH3DatagramParsed)
	PTBSent                      uint64 // Packet Too Big for an oversize downlink packet
	MSSClamped                   uint64
	Hints                        [4]uint64 // by HintKind
	HintsRejected                uint64
	PeerMigrations               uint64 // a client's connection moved to a new address (QUIC migration)
	AddressesResumed             uint64 // addresses given back to the identity that held them (per pool)
	SessionsSuperseded           uint64 // sessions ended because a newer one of the same identity took their addresses
	AddressesHeld                uint64 // addresses held for identities without a session now (all pools)
}

// Server is the tunnel server: QUIC + HTTP/3 + CONNECT-IP (RFC 9484) with
// mutual TLS, in front of a TUN device.
type Server struct {
	cfg    ServerConfig
	dev    Device
	log    *zap.Logger
	routes []connectip.IPRoute
	pools  []*addrPool
	h3     *http3.Server
	proxy  connectip.Proxy

	devMu  sync.Mutex // serialises writes to dev
	devBuf [][]byte   // writeDev's one-element batch, under devMu
	// The uplink writers' device layout: head-room in front of each packet
	// (the offload TUN's virtio-net header) and packets per Write.
	upHeadroom, upBatch int

	mu       sync.RWMutex
	conns    map[string]int          // open connections per identity
	byConn   map[*quic.Conn]*session // session of each connection
	byAddr   map[netip.Addr]*session // session holding each inner address
	sessions int

	ln      *quic.Listener
	tr      *quic.Transport
	udp     net.PacketConn
	closing atomic.Bool
	tunErr  atomic.Pointer[error] // why readTUN stopped, if not Close
	wg      sync.WaitGroup

	st struct {
		connsAccepted, connsRefused, sessionsOpened, sessionsRefused  atomic.Uint64
		packetsUp, bytesUp, packetsDown, bytesDown                    atomic.Uint64
		dropSpoofed, dropRoutes, dropInvalid, dropNoSession, dropSend atomic.Uint64
		ptb, clamped, hintsRejected, peerMigrations                   atomic.Uint64
		superseded, dropDgramRecv, h3Parsed, peerProcessed            atomic.Uint64
		hints                                                         [4]atomic.Uint64
	}
	dropQueueClosed atomic.Uint64 // queue-full drops of sessions already gone
	dropLimitClosed atomic.Uint64 // queue-limit drops of sessions already gone
	dropUpClosed    atomic.Uint64 // uplink ring drops of sessions already gone
}

type connKey struct{}

// session is one CONNECT-IP session: a client connection, its addresses
// and its downlink queue.
type session struct {
	srv      *Server
	identity string
	qc       *quic.Conn
	ip       *connectip.Conn
	addrs    []netip.Addr
	gens     []uint64 // each address's lease generation (addrPool.release)
	replaced bool     // a newer session of the identity took the addresses; under srv.mu
	down     *queue   // downlink: readTUN -> pacer -> WritePacket
	up       *queue   // uplink ring: ReadPacket -> TUN writer
	pacer    Pacer
	hintMu   sync.Mutex
	hintSeq  uint64
	hintSeen bool
}

// NewServer checks cfg and returns a server writing to and reading from dev.
func NewServer(cfg ServerConfig, dev Device) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.MTU == 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < minMTU || cfg.MTU > maxMTU {
		return nil, fmt.Errorf("tunnel: MTU %d: must lie in [%d, %d] (a DATAGRAM must fit one QUIC packet)", cfg.MTU, minMTU, maxMTU)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = 512
	}
	if cfg.MaxConnsPerClient == 0 {
		cfg.MaxConnsPerClient = 4
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = 1024
	}
	if cfg.QueueLen < 1 || cfg.MaxConnsPerClient < 1 || cfg.MaxSessions < 1 {
		return nil, errors.New("tunnel: QueueLen, MaxConnsPerClient and MaxSessions must be positive")
	}
	if cfg.ClientCAs == nil {
		return nil, errors.New("tunnel: ClientCAs is required: the server accepts only clients with a certificate")
	}
	if len(cfg.Certificate.Certificate) == 0 {
		return nil, errors.New("tunnel: Certificate is required")
	}
	if len(cfg.Routes) == 0 {
		return nil, errors.New("tunnel: no routes: the server forwards only to configured routes")
	}
	routes, err := prefixRoutes(cfg.Routes)
	if err != nil {
		return nil, fmt.Errorf("tunnel: %w", err)
	}
	s := &Server{
		cfg: cfg, dev: dev, log: cfg.Log, routes: routes,
		conns: map[string]int{}, byConn: map[*quic.Conn]*session{}, byAddr: map[netip.Addr]*session{},
		upBatch: 64,
	}
	if d, ok := dev.(tun.Device); ok {
		s.upHeadroom = tun.LayoutOf(d).Headroom
	}
	var have4, have6 bool
	for _, p := range cfg.InnerPrefixes {
		if p.Addr().Is4() && have4 || p.Addr().Is6() && have6 {
			return nil, fmt.Errorf("tunnel: inner prefix %s: at most one prefix per address family", p)
		}
		have4, have6 = have4 || p.Addr().Is4(), have6 || p.Addr().Is6()
		hold, maxHeld := cfg.AddressHold, cfg.MaxHeldAddresses
		if hold == 0 {
			hold = DefaultAddressHold
		}
		if maxHeld == 0 {
			maxHeld = DefaultMaxHeldAddresses
		}
		pool, err := newAddrPool(p, hold, maxHeld)
		if err != nil {
			return nil, fmt.Errorf("tunnel: %w", err)
		}
		for _, r := range cfg.Routes {
			if r.Overlaps(p) {
				return nil, fmt.Errorf("tunnel: inner prefix %s overlaps route %s: clients would reach each other", p, r)
			}
		}
		s.pools = append(s.pools, pool)
	}
	if len(s.pools) == 0 {
		return nil, errors.New("tunnel: no inner prefix: every client needs an assigned address")
	}
	mux := http.NewServeMux()
	mux.HandleFunc(ConnectIPPath, s.handleConnectIP)
	mux.HandleFunc(HintsPath, s.handleHints)
	s.h3 = &http3.Server{
		Handler:         mux,
		EnableDatagrams: true,
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	return s, nil
}

// ServerAddrs are the server's own inner addresses (one per prefix): the
// TUN device's addresses.
func (s *Server) ServerAddrs() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.pools {
		out = append(out, netip.PrefixFrom(p.server, p.prefix.Bits()))
	}
	return out
}

// TLSConfig is the server's TLS configuration: TLS 1.3, h3, and a client
// certificate signed by ClientCAs required.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{s.cfg.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    s.cfg.ClientCAs,
		NextProtos:   []string{http3.NextProtoH3},
	}
}

func (s *Server) quicConfig() *quic.Config {
	tracer := s.tracer
	if s.cfg.WrapTracer != nil {
		tracer = s.cfg.WrapTracer(s.tracer)
	}
	qc := &quic.Config{
		EnableDatagrams:    true,
		InitialPacketSize:  1350,
		MaxIdleTimeout:     30 * time.Second,
		KeepAlivePeriod:    10 * time.Second,
		MaxIncomingStreams: 16, // CONNECT-IP + hints + a few; bounds per-connection state
		Tracer:             tracer,
	}
	if !s.cfg.NoFullPackets {
		qc.InitialPacketSize, qc.DisablePathMTUDiscovery = uint16(fullPacketSize(s.cfg.MTU)), true
	}
	return qc
}

// Listen opens the UDP socket; Serve then runs on it.
func (s *Server) Listen(addr string) (net.Addr, error) {
	udp, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen %s: %w", addr, err)
	}
	tr := &quic.Transport{Conn: udp}
	if !s.cfg.NoFullPackets {
		tr.ConnectionIDLength = fullPacketCIDLen
	}
	if f := s.cfg.ConnContext; f != nil {
		tr.ConnContext = func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) { return f(ctx), nil }
	}
	ln, err := tr.Listen(s.TLSConfig(), s.quicConfig())
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, fmt.Errorf("tunnel: listen %s: %w", addr, err)
	}
	s.ln, s.tr, s.udp = ln, tr, udp
	return ln.Addr(), nil
}

// Serve accepts connections and moves packets until ctx ends or Close.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		return errors.New("tunnel: Serve before Listen")
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.readTUN() }()
	go func() { <-ctx.Done(); s.Close() }()
	for {
		qc, err := s.ln.Accept(ctx)
		if err != nil {
			if e := s.tunErr.Load(); e != nil {
				return fmt.Errorf("tunnel: reading the TUN: %w", *e)
			}
			if s.closing.Load() || ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.admit(qc)
	}
}

// identity names a connection's client: its certificate's subject CN
// (mutual TLS has verified it against ClientCAs before Accept returns).
func identity(qc *quic.Conn) string {
	st := qc.ConnectionState().TLS
	if len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}

// admit enforces MaxConnsPerClient and serves HTTP/3 on the connection.
func (s *Server) admit(qc *quic.Conn) {
	id := identity(qc)
	s.mu.Lock()
	if id == "" || s.conns[id] >= s.cfg.MaxConnsPerClient {
		s.mu.Unlock()
		s.st.connsRefused.Add(1)
		s.log.Warn("connection refused: too many connections for this client", zap.String("client", id),
			zap.Stringer("remote", qc.RemoteAddr()), zap.Int("max", s.cfg.MaxConnsPerClient))
		qc.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad), "m2ho: too many connections for this client")
		return
	}
	s.conns[id]++
	s.mu.Unlock()
	s.st.connsAccepted.Add(1)
	s.log.Info("connection", zap.String("client", id), zap.Stringer("remote", qc.RemoteAddr()))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.h3.ServeQUICConn(qc)
		<-qc.Context().Done()
		s.mu.Lock()
		if s.conns[id]--; s.conns[id] == 0 {
			delete(s.conns, id)
		}
		sess := s.byConn[qc]
		s.mu.Unlock()
		if sess != nil {
			sess.close()
		}
		s.log.Info("connection closed", zap.String("client", id), zap.NamedError("reason", context.Cause(qc.Context())), zap.NamedError("h3", err))
	}()
}

// handleConnectIP opens a CONNECT-IP session: addresses from the pools,
// the configured routes, then the uplink loop until the session ends.
func (s *Server) handleConnectIP(w http.ResponseWriter, r *http.Request) {
	qc, _ := r.Context().Value(connKey{}).(*quic.Conn)
	if qc == nil {
		http.Error(w, "no connection", http.StatusInternalServerError)
		return
	}
	// The template's host is whatever authority the client used: TLS has
	// authenticated both ends already, and a client may reach the server
	// under several names.
	tmpl, err := uritemplate.New("https://" + r.Host + ConnectIPPath)
	if err != nil {
		http.Error(w, "bad authority", http.StatusBadRequest)
		return
	}
	req, err := connectip.ParseProxyRequest(r, tmpl)
	if err != nil {
		status := http.StatusBadRequest
		if pe, ok := errors.AsType[*connectip.ProxyRequestParseError](err); ok {
			status = pe.HTTPStatus
		}
		http.Error(w, err.Error(), status)
		return
	}
	sess, superseded, status, why := s.openSession(qc)
	for _, old := range superseded {
		s.st.superseded.Add(1)
		s.log.Info("session superseded: a newer session of this client took its addresses", zap.String("client", old.identity),
			zap.Any("addresses", old.addrs), zap.Stringer("old_remote", old.qc.RemoteAddr()), zap.Stringer("new_remote", qc.RemoteAddr()))
		old.close()
	}
	if sess == nil {
		s.st.sessionsRefused.Add(1)
		s.log.Warn("session refused", zap.String("client", identity(qc)), zap.String("why", why))
		http.Error(w, why, status)
		return
	}
	ipc, err := s.proxy.Proxy(w, req)
	if err != nil {
		s.closeSession(sess)
		return
	}
	sess.ip = ipc
	prefixes := make([]netip.Prefix, len(sess.addrs))
	for i, a := range sess.addrs {
		prefixes[i] = netip.PrefixFrom(a, a.BitLen())
	}
	if err := ipc.AssignAddresses(prefixes); err != nil {
		s.log.Error("assigning addresses", zap.Error(err))
		ipc.Close()
		s.closeSession(sess)
		return
	}
	if err := ipc.AdvertiseRoute(s.routes); err != nil {
		s.log.Error("advertising routes", zap.Error(err))
		ipc.Close()
		s.closeSession(sess)
		return
	}
	s.st.sessionsOpened.Add(1)
	s.log.Info("session", zap.String("client", sess.identity), zap.Any("addresses", sess.addrs))
	s.mu.Lock()
	if sess.replaced {
		// A newer session of this client took the addresses while this one
		// was being set up: it must not take them back.
		s.mu.Unlock()
		ipc.Close()
		s.closeSession(sess)
		return
	}
	for _, a := range sess.addrs {
		s.byAddr[a] = sess
	}
	s.mu.Unlock()
	done := make(chan struct{})
	wrote := make(chan struct{})
	go func() { sess.sendLoop(); close(done) }()
	go func() { sess.writeLoop(); close(wrote) }()
	sess.receiveLoop()
	sess.close()
	<-done
	<-wrote
	s.closeSession(sess)
	s.log.Info("session closed", zap.String("client", sess.identity), zap.Any("addresses", sess.addrs))
}

// openSession leases addresses (the identity's own again if it holds
// them, see addrPool); nil with an HTTP status and reason when it may not
// open. superseded are the identity's older sessions whose addresses the
// new one took over: the caller ends them, outside the lock.
func (s *Server) openSession(qc *quic.Conn) (sess *session, superseded []*session, status int, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byConn[qc]; dup {
		return nil, nil, http.StatusConflict, "one CONNECT-IP session per connection"
	}
	if s.sessions >= s.cfg.MaxSessions {
		return nil, nil, http.StatusServiceUnavailable, "server full"
	}
	id := identity(qc)
	now := time.Now()
	sess = &session{srv: s, identity: id, qc: qc, down: newQueue(s.cfg.QueueLen, s.cfg.MTU),
		// A client may send up to what a DATAGRAM holds, above the MTU
		// we advertise nowhere: the slots take the largest.
		up: newQueueHeadroom(s.cfg.QueueLen, maxMTU+64, s.upHeadroom)}
	takenOver := false
	for _, p := range s.pools {
		a, gen, takeover, ok := p.lease(id, now)
		if !ok {
			// What was leased becomes a hold of this identity again.
			for i, b := range sess.addrs {
				s.poolOf(b).release(b, sess.gens[i], now)
			}
			return nil, nil, http.StatusServiceUnavailable, "inner address pool " + p.prefix.String() + " spent"
		}
		sess.addrs = append(sess.addrs, a)
		sess.gens = append(sess.gens, gen)
		takenOver = takenOver || takeover
	}
	if takenOver {
		// Sessions are bounded (MaxSessions) and takeovers happen once per
		// redial: a scan is cheap enough.
		for _, old := range s.byConn {
			if old.identity == id && slices.ContainsFunc(old.addrs, func(a netip.Addr) bool { return slices.Contains(sess.addrs, a) }) {
				old.replaced = true
				superseded = append(superseded, old)
			}
		}
	}
	sess.pacer = PassThrough{}
	switch {
	case s.cfg.NewConnPacer != nil:
		sess.pacer = s.cfg.NewConnPacer(id, qc)
	case s.cfg.NewPacer != nil:
		sess.pacer = s.cfg.NewPacer(id)
	}
	if l, ok := sess.pacer.(QueueLimiter); ok {
		sess.down.limiter = l
	}
	s.byConn[qc] = sess
	s.sessions++
	return sess, superseded, 0, ""
}

func (s *Server) poolOf(a netip.Addr) *addrPool {
	for _, p := range s.pools {
		if p.prefix.Contains(a) {
			return p
		}
	}
	return nil
}

func (s *Server) closeSession(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byConn[sess.qc] != sess {
		return
	}
	delete(s.byConn, sess.qc)
	now := time.Now()
	for i, a := range sess.addrs {
		if s.byAddr[a] == sess {
			delete(s.byAddr, a)
		}
		s.poolOf(a).release(a, sess.gens[i], now)
	}
	s.sessions--
	s.dropQueueClosed.Add(sess.down.dropped.Swap(0))
	s.dropLimitClosed.Add(sess.down.limited.Swap(0))
	s.dropUpClosed.Add(sess.up.dropped.Swap(0))
}

func (sess *session) close() {
	sess.down.close()
	sess.up.close()
	if sess.ip != nil {
		sess.ip.Close()
	}
}

// receiveLoop moves the client's packets into the session's uplink ring
// and nothing else, so that http3's per-stream DATAGRAM queue (32, quic-go
// v0.65 http3/state_tracking_stream.go), which drops silently when full,
// is drained as fast as quic-go fills it: a burst waits in the ring
// (QueueLen packets, its tail drop counted: DropUpQueueFull) while
// writeLoop hands it to the TUN, many packets per Write. connect-ip-go's
// ReadPacket has already dropped any whose source is not the client's
// assigned address or whose destination is outside the advertised routes
// (counted through the qlog events, see countingTrace).
func (sess *session) receiveLoop() {
	buf := make([]byte, maxMTU+64)
	if sess.srv.cfg.inlineUplink {
		sess.receiveInline(buf)
		return
	}
	for {
		n, err := sess.ip.ReadPacket(buf)
		if err != nil {
			sess.up.close()
			return
		}
		sess.up.push(buf[:n])
	}
}

// receiveInline is the receive path before the uplink ring: the reader
// itself clamps and writes each packet to the TUN, so while a Write
// blocks nothing drains http3's queue.
func (sess *session) receiveInline(buf []byte) {
	s := sess.srv
	var p packet.Parsed
	bufs := [][]byte{nil}
	defer sess.up.close()
	for {
		n, err := sess.ip.ReadPacket(buf)
		if err != nil {
			return
		}
		pkt := buf[:n]
		if p.Decode(pkt) && ClampMSS(pkt, &p, s.cfg.MTU) {
			s.st.clamped.Add(1)
		}
		bufs[0] = pkt
		s.devMu.Lock()
		_, err = s.dev.Write(bufs, 0)
		s.devMu.Unlock()
		if err != nil {
			s.st.dropSend.Add(1)
			continue
		}
		s.st.packetsUp.Add(1)
		s.st.bytesUp.Add(uint64(n))
	}
}

// writeLoop drains the uplink ring to the TUN in batches: MSS clamp in
// place, then one Write of up to upBatch packets (the offload device
// writes its virtio-net header into the slots' head-room). What the ring
// holds when the session ends is still written. It returns when the ring
// is closed and empty.
func (sess *session) writeLoop() {
	s := sess.srv
	bufs := make([][]byte, s.upBatch)
	var p packet.Parsed
	off := s.upHeadroom
	for {
		k := sess.up.frontBatch(bufs)
		if k == 0 {
			if sess.up.isClosed() {
				return
			}
			<-sess.up.notify
			continue
		}
		var bytes uint64
		for _, b := range bufs[:k] {
			pkt := b[off:]
			if p.Decode(pkt) && ClampMSS(pkt, &p, s.cfg.MTU) {
				s.st.clamped.Add(1)
			}
			bytes += uint64(len(pkt))
		}
		s.devMu.Lock()
		n, err := s.dev.Write(bufs[:k], off)
		s.devMu.Unlock()
		sess.up.popN(k)
		if err != nil {
			// Counted as a device refusal each: what the device did
			// not take (a packet it refused, or the batch's rest).
			n = min(max(n, 0), k)
			s.st.dropSend.Add(uint64(k - n))
			s.st.packetsUp.Add(uint64(n))
			s.st.bytesUp.Add(bytes * uint64(n) / uint64(k))
			continue
		}
		s.st.packetsUp.Add(uint64(k))
		s.st.bytesUp.Add(bytes)
	}
}

// sendLoop drains the downlink queue through the pacer into WritePacket.
func (sess *session) sendLoop() {
	runSender(sess.down, sess.pacer, func(pkt []byte) bool {
		s := sess.srv
		icmp, err := sess.ip.WritePacket(pkt)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return false
			}
			s.st.dropSend.Add(1)
			return true
		}
		if icmp != nil {
			// The path's DATAGRAM limit fell below the MTU: connect-ip-go
			// composed the Packet Too Big; send it back to the sender.
			s.writeDev(icmp)
			s.st.ptb.Add(1)
			return true
		}
		s.st.packetsDown.Add(1)
		s.st.bytesDown.Add(uint64(len(pkt)))
		return true
	})
}

// runSender is the sender loop of both ends: wait for packets, ask the
// pacer how many may go, send them; send returns false when the tunnel is
// gone.
func runSender(q *queue, pacer Pacer, send func([]byte) bool) {
	var timer *time.Timer
	for {
		if q.isClosed() {
			return // the tunnel is gone: what is still queued cannot go
		}
		queued := q.len()
		if queued == 0 {
			<-q.notify
			continue
		}
		n, wait := pacer.Budget(time.Now(), queued)
		if n <= 0 {
			if wait <= 0 {
				wait = time.Millisecond
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-timer.C:
			case <-q.notify:
			}
			continue
		}
		for range min(n, queued) {
			pkt, ok := q.front()
			if !ok {
				break
			}
			size := len(pkt)
			alive := send(pkt)
			q.pop()
			if !alive {
				return
			}
			pacer.Sent(time.Now(), size)
		}
	}
}

func (s *Server) writeDev(pkt []byte) {
	s.devMu.Lock()
	if s.devBuf == nil {
		s.devBuf = make([][]byte, 1)
	}
	s.devBuf[0] = pkt
	_, err := s.dev.Write(s.devBuf, 0)
	s.devBuf[0] = nil
	s.devMu.Unlock()
	if err != nil {
		s.st.dropSend.Add(1)
	}
}

// readTUN dispatches packets routed into the TUN to the session holding
// their destination: MSS clamp on SYNs, Packet Too Big for oversize ones,
// the session's bounded queue for the rest.
func (s *Server) readTUN() {
	// The device's layout: the offload device (tun.Open) wants head-room
	// for its virtio-net header and delivers a 64 KiB frame as up to
	// BatchSize MTU-sized packets in one Read.
	batch, off, size := 16, 0, 65535
	if d, ok := s.dev.(tun.Device); ok {
		lay := tun.LayoutOf(d)
		if d.BatchSize() > batch {
			batch, size = d.BatchSize(), max(s.cfg.MTU, 1500)+64
		}
		off = lay.Headroom
	}
	bufs := make([][]byte, batch)
	sizes := make([]int, batch)
	for i := range bufs {
		bufs[i] = make([]byte, off+size)
	}
	ptb := make([]byte, PTBMaxLen)
	var p packet.Parsed
	for {
		n, err := s.dev.Read(bufs, sizes, off)
		for i := range n {
			s.dispatch(bufs[i][off:off+sizes[i]], &p, ptb)
		}
		if err == nil {
			continue
		}
		if s.closing.Load() || errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			return
		}
		if n > 0 || tun.IsPacketError(err) {
			// One frame the device could not deliver: dropped, counted.
			s.st.dropInvalid.Add(1)
			continue
		}
		// Downlink would stop silently: end the server instead.
		s.log.Error("reading the TUN", zap.Error(err))
		s.tunErr.Store(&err)
		s.Close()
		return
	}
}

// dispatch handles one packet read from the TUN; ptb is scratch space of
// PTBMaxLen bytes. It allocates nothing.
func (s *Server) dispatch(pkt []byte, p *packet.Parsed, ptb []byte) {
	if !p.Decode(pkt) {
		s.st.dropInvalid.Add(1)
		return
	}
	pkt = pkt[:p.Length]
	s.mu.RLock()
	sess := s.byAddr[p.Dst]
	s.mu.RUnlock()
	if sess == nil {
		s.st.dropNoSession.Add(1)
		return
	}
	if len(pkt) > s.cfg.MTU {
		if m := PacketTooBig(ptb, pkt, p, s.cfg.MTU); m > 0 {
			s.writeDev(ptb[:m])
			s.st.ptb.Add(1)
		}
		return
	}
	if ClampMSS(pkt, p, s.cfg.MTU) {
		s.st.clamped.Add(1)
	}
	sess.down.push(pkt)
}

// handleHints reads the hints channel of the connection's session
// (HINTS.md) and hands each hint to the session's pacer.
func (s *Server) handleHints(w http.ResponseWriter, r *http.Request) {
	qc, _ := r.Context().Value(connKey{}).(*quic.Conn)
	if r.Method != http.MethodConnect || r.Proto != HintsProtocol {
		http.Error(w, "want an extended CONNECT with :protocol "+HintsProtocol, http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	sess := s.byConn[qc]
	s.mu.Unlock()
	if sess == nil {
		http.Error(w, "no CONNECT-IP session on this connection", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	br := bufio.NewReaderSize(r.Body, maxHintLine)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.st.hintsRejected.Add(1)
			s.log.Warn("hint refused: line too long; closing the hints stream", zap.String("client", sess.identity), zap.Int("max", maxHintLine))
			return
		}
		if err != nil {
			return
		}
		sess.hint(line[:len(line)-1])
	}
}

func (sess *session) hint(line []byte) {
	s := sess.srv
	h, err := ParseHint(line)
	now := time.Now()
	if err == nil {
		sess.hintMu.Lock()
		if sess.hintSeen && h.Seq <= sess.hintSeq {
			err = fmt.Errorf("hint: seq %d does not increase (last %d)", h.Seq, sess.hintSeq)
		} else {
			sess.hintSeq, sess.hintSeen = h.Seq, true
		}
		sess.hintMu.Unlock()
	}
	if err != nil {
		s.st.hintsRejected.Add(1)
		s.log.Warn("hint refused", zap.String("client", sess.identity), zap.Error(err))
		return
	}
	s.st.hints[h.Kind].Add(1)
	s.log.Info("hint", zap.String("client", sess.identity), zap.Stringer("kind", h.Kind), zap.Uint64("seq", h.Seq),
		zap.String("target_cell", h.TargetCell), zap.Stringer("cell_type", h.CellType),
		zap.Int64("smax", h.SMax), zap.Float64("c_est", h.CEst))
	sess.pacer.Hint(now, h)
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	var st ServerStats
	st.ConnsAccepted = s.st.connsAccepted.Load()
	st.ConnsRefused = s.st.connsRefused.Load()
	st.SessionsOpened = s.st.sessionsOpened.Load()
	st.SessionsRefused = s.st.sessionsRefused.Load()
	st.PacketsUp, st.BytesUp = s.st.packetsUp.Load(), s.st.bytesUp.Load()
	st.PacketsDown, st.BytesDown = s.st.packetsDown.Load(), s.st.bytesDown.Load()
	st.DropSpoofedSource = s.st.dropSpoofed.Load()
	st.DropOutsideRoutes = s.st.dropRoutes.Load()
	st.DropInvalid = s.st.dropInvalid.Load()
	st.DropNoSession = s.st.dropNoSession.Load()
	st.DropSendError = s.st.dropSend.Load()
	st.DropDatagramRecvQueue = s.st.dropDgramRecv.Load()
	st.DropH3DatagramQueue = h3Lost(s.st.h3Parsed.Load(), s.st.peerProcessed.Load())
	st.PTBSent = s.st.ptb.Load()
	st.MSSClamped = s.st.clamped.Load()
	st.HintsRejected = s.st.hintsRejected.Load()
	st.PeerMigrations = s.st.peerMigrations.Load()
	st.SessionsSuperseded = s.st.superseded.Load()
	for i := range st.Hints {
		st.Hints[i] = s.st.hints[i].Load()
	}
	s.mu.RLock()
	st.DropQueueFull = s.dropQueueClosed.Load()
	st.DropQueueLimit = s.dropLimitClosed.Load()
	st.DropUpQueueFull = s.dropUpClosed.Load()
	st.SessionsOpen = uint64(s.sessions)
	for _, p := range s.pools {
		st.AddressesResumed += p.resumed
		st.AddressesHeld += uint64(p.holds())
	}
	for _, sess := range s.byConn {
		st.DropQueueFull += sess.down.dropped.Load()
		st.DropQueueLimit += sess.down.limited.Load()
		st.DropUpQueueFull += sess.up.dropped.Load()
	}
	s.mu.RUnlock()
	return st
}

// Close stops accepting, closes every connection and waits for the loops.
// The TUN device is the caller's to close (after Close, or to unblock the
// TUN reader).
func (s *Server) Close() error {
	if s.closing.Swap(true) {
		return nil
	}
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	s.h3.Close()
	s.mu.Lock()
	conns := make([]*quic.Conn, 0, len(s.byConn))
	for qc := range s.byConn {
		conns = append(conns, qc)
	}
	s.mu.Unlock()
	for _, qc := range conns {
		qc.CloseWithError(0, "m2ho: server shutting down")
	}
	// quic.Transport does not close a socket it was given: free the port.
	if s.tr != nil {
		s.tr.Close()
		s.udp.Close()
	}
	return err
}

// Wait waits for the server's goroutines after Close and after the TUN
// device was closed.
func (s *Server) Wait() { s.wg.Wait() }

// tracer gives each connection a qlog trace that counts connect-ip-go's
// drop decisions (the only place they surface: ReadPacket drops silently)
// and, with QlogDir, writes the trace to a file.
func (s *Server) tracer(_ context.Context, isClient bool, odcid quic.ConnectionID) qlogwriter.Trace {
	t := &countingTrace{noYield: s.cfg.noH3Yield, count: s.countDrop, migrated: func(remote netip.AddrPort) {
		// Rare (a phone's uplink changed): one line each.
		s.st.peerMigrations.Add(1)
		s.log.Info("client migrated", zap.Stringer("odcid", odcid), zap.Stringer("remote", remote))
	}}
	if s.cfg.QlogDir != "" {
		path := filepath.Join(s.cfg.QlogDir, fmt.Sprintf("%s_server.sqlog", odcid))
		f, err := os.Create(path)
		if err != nil {
			s.log.Warn("qlog", zap.Error(err))
		} else {
			fs := qlogwriter.NewConnectionFileSeq(newBufferedFile(f), isClient, odcid)
			go fs.Run()
			t.file = fs
		}
	}
	return t
}

func (s *Server) countDrop(reason string, fromPeer bool) {
	if !fromPeer {
		if reason == reasonDatagramTooLarge {
			s.st.dropSend.Add(1) // accepted by SendDatagram, then fit no packet
		}
		return // other downlink drops are counted where WritePacket is called
	}
	switch reason {
	case eventH3DatagramParsed:
		s.st.h3Parsed.Add(1)
	case eventPeerPacketProcessed:
		s.st.peerProcessed.Add(1)
	case "source_address_not_allowed":
		s.st.dropSpoofed.Add(1)
	case "destination_address_not_allowed", "protocol_not_allowed":
		s.st.dropRoutes.Add(1)
	case "send_error":
		s.st.dropSend.Add(1)
	case reasonDatagramRecvQueue:
		s.st.dropDgramRecv.Add(1)
	case eventRecvWait, eventRecvWaitOut: // the client's waitForH3; not a drop
	default:
		s.st.dropInvalid.Add(1)
	}
}
