package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/m2ho/m2ho/proxy/tunnel"
)

// tunnelLink is the phone's tunnel as the engine sees it: one Sink (the
// uplink of quic and quic+m2ho flows) and one Source (their downlink) that
// outlive any one QUIC connection. A connection that ends (server restart,
// idle timeout, a path that stayed dead) does not end the daemon: the link
// redials with exponential backoff (0.5 s doubling to 30 s) and swaps the
// new client in.
//
// While the tunnel is down:
//   - Write takes the packets of tunnelled flows and drops them, counted
//     (m2ho_tunnel_client_down_drops_total). They are not sent outside the
//     tunnel: the flows are NATed to the tunnel's inner address, so the
//     far end knows them only under that address, and a packet sent
//     directly would reach it from another address (a new 4-tuple: a reset
//     or a stray segment, never a continuation). The inner TCP retransmits
//     as after any loss; SYNs of new flows are retried by the laptop's
//     kernel (1 s, 3 s, 7 s, ...), so new flows start once the link is up.
//   - Read blocks until a new client is up (or the link is closed).
//
// After a redial, flows survive only if the server assigned the same inner
// address again (it does, within its --address-hold: proxy/tunnel's
// sticky leases) and they did not time out meanwhile; otherwise the log
// says the open flows break (their segments carry the old address,
// which the server now drops as spoofed) and only new flows work.
//
// The link also follows the uplink's address (see watchUplink): QUIC
// connection migration onto the new address, the connection and the
// inner address kept.
type tunnelLink struct {
	flags tunnelFlags
	log   *zap.Logger
	// uplinkAddr, when set, returns the uplink interface's current address
	// to bind to (no port); ok false when it has none.
	uplinkAddr func() (netip.Addr, bool)

	mu     sync.Mutex
	cur    *tunnel.Client
	up     chan struct{} // closed and replaced whenever cur changes to a live client
	closed bool
	done   chan struct{}
	// addrs is the inner address set of the first session (the one the
	// flows were NATed to).
	addrs []netip.Prefix

	st struct {
		redials, redialFailures, addrChanged, downDrops atomic.Uint64
		migrations, migrationFailures                   atomic.Uint64
		migrationsStuck                                 atomic.Uint64 // no probe could leave: redialled
		restarts                                        atomic.Uint64
	}
	// prev accumulates the counters of clients that are gone, so the
	// exported counters never go backwards.
	prevMu sync.Mutex
	prev   tunnel.ClientStats
}

func newTunnelLink(f tunnelFlags, log *zap.Logger, uplinkAddr func() (netip.Addr, bool)) *tunnelLink {
	return &tunnelLink{flags: f, log: log, uplinkAddr: uplinkAddr, up: make(chan struct{}), done: make(chan struct{})}
}

// localAddr is where a new client binds: --tunnel-local-addr, else the
// uplink's current address (port chosen by the kernel), else any.
func (l *tunnelLink) localAddr() string {
	if l.flags.LocalAddr != "" {
		return l.flags.LocalAddr
	}
	if l.uplinkAddr != nil {
		if a, ok := l.uplinkAddr(); ok {
			return netip.AddrPortFrom(a, 0).String()
		}
	}
	return ""
}

// dial makes a new client and installs it.
func (l *tunnelLink) dial(ctx context.Context) (*tunnel.Client, error) {
	f := l.flags
	f.LocalAddr = l.localAddr()
	c, err := f.dial(ctx, l.log)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, errors.New("tunnel link closed")
	}
	if l.addrs == nil {
		l.addrs = slices.Clone(c.Addresses())
	} else if !slices.Equal(l.addrs, c.Addresses()) {
		l.st.addrChanged.Add(1)
		l.log.Error("tunnel redialled with other inner addresses: open tunnelled flows break (their packets carry the old address); new flows use the new one",
			zap.Any("old", l.addrs), zap.Any("new", c.Addresses()))
		l.addrs = slices.Clone(c.Addresses())
	}
	l.cur = c
	close(l.up)
	l.up = make(chan struct{})
	return c, nil
}

// current is the live client, or nil while the tunnel is down.
func (l *tunnelLink) current() *tunnel.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// supervise redials whenever the current client ends, until ctx ends or
// the link is closed. c is the client dial installed first.
func (l *tunnelLink) supervise(ctx context.Context, c *tunnel.Client) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.done:
			return nil
		case <-c.Done():
		}
		l.mu.Lock()
		if l.cur == c {
			l.cur = nil
		}
		l.mu.Unlock()
		l.retire(c)
		l.log.Warn("tunnel down: tunnelled flows are dropped (counted) until it is up again; redialling")
		backoff := 500 * time.Millisecond
		for {
			l.st.redials.Add(1)
			nc, err := l.dial(ctx)
			if err == nil {
				c = nc
				l.log.Info("tunnel up again", zap.Any("addresses", nc.Addresses()), zap.Stringer("local", nc.LocalAddr()))
				break
			}
			l.st.redialFailures.Add(1)
			l.log.Warn("tunnel redial failed", zap.Error(err), zap.Duration("retry_in", backoff))
			select {
			case <-ctx.Done():
				return nil
			case <-l.done:
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// retire closes a client that has ended and keeps its counters.
func (l *tunnelLink) retire(c *tunnel.Client) {
	c.Close()
	s := c.Stats()
	l.prevMu.Lock()
	l.prev.Add(s)
	l.prevMu.Unlock()
}

// Name implements proxy.Sink and proxy.Source.
func (l *tunnelLink) Name() string { return "tunnel " + l.flags.Server }

// Write implements proxy.Sink: into the live client, or a counted drop
// while the tunnel is down. It fails only once the link is closed.
func (l *tunnelLink) Write(bufs [][]byte, offset int) (int, error) {
	c := l.current()
	if c != nil {
		n, err := c.Write(bufs, offset)
		if err == nil {
			return n, nil
		}
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return 0, tunnel.ErrClosed
	}
	l.st.downDrops.Add(uint64(len(bufs)))
	return len(bufs), nil
}

// Read implements proxy.Source: from the live client; while the tunnel is
// down it waits for the next one. It fails only once the link is closed.
func (l *tunnelLink) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	for {
		l.mu.Lock()
		c, up, closed := l.cur, l.up, l.closed
		l.mu.Unlock()
		if closed {
			return 0, tunnel.ErrClosed
		}
		if c != nil {
			n, err := c.Read(bufs, sizes, offset)
			if n > 0 || err == nil {
				return n, nil
			}
			// This client is gone: wait for the supervisor's next one.
			select {
			case <-c.Done():
			case <-l.done:
				return 0, tunnel.ErrClosed
			}
			l.mu.Lock()
			if l.cur == c {
				up = l.up
			} else {
				l.mu.Unlock()
				continue
			}
			l.mu.Unlock()
		}
		select {
		case <-up:
		case <-l.done:
			return 0, tunnel.ErrClosed
		}
	}
}

// Close implements proxy.Source: it ends the link and its client.
func (l *tunnelLink) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	c := l.cur
	l.cur = nil
	close(l.done)
	l.mu.Unlock()
	if c != nil {
		l.retire(c)
	}
	s := l.Stats()
	l.log.Info("tunnel stopped", zap.Uint64("packets_up", s.PacketsUp), zap.Uint64("packets_down", s.PacketsDown),
		zap.Uint64("drop_up_queue_full", s.DropUpQueueFull), zap.Uint64("drop_down_queue_full", s.DropDownQueueFull),
		zap.Uint64("drop_up_queue_limit", s.DropUpQueueLimit),
		zap.Bool("quic_receive_drops_counted", l.flags.CountDrops || l.flags.QlogDir != "" || !l.flags.NoRecvWait),
		zap.Bool("h3_receive_drops_counted", l.flags.CountDrops || l.flags.QlogDir != "" || !l.flags.NoReaderYield || !l.flags.NoRecvWait),
		zap.Uint64("drop_quic_datagram_receive_queue", s.DropDatagramRecvQueue), zap.Uint64("drop_h3_datagram_queue", s.DropH3DatagramQueue),
		zap.Uint64("recv_waits", s.RecvWaits), zap.Uint64("recv_waits_timed_out", s.RecvWaitsTimedOut),
		zap.Uint64("drop_tunnel_down", l.st.downDrops.Load()), zap.Uint64("restarts", l.st.restarts.Load()))
	return nil
}

// SendHint sends on the live client (the hint forwarder's sink).
func (l *tunnelLink) SendHint(h tunnel.Hint) error {
	c := l.current()
	if c == nil {
		return errors.New("tunnel down")
	}
	return c.SendHint(h)
}

// Stats are the counters of all clients so far.
func (l *tunnelLink) Stats() tunnel.ClientStats {
	l.prevMu.Lock()
	s := l.prev
	l.prevMu.Unlock()
	if c := l.current(); c != nil {
		s.Add(c.Stats())
	}
	return s
}

// ConnectionStats are quic-go's statistics of the live connection; ok
// false while the tunnel is down.
func (l *tunnelLink) ConnectionStats() (quic.ConnectionStats, bool) {
	c := l.current()
	if c == nil {
		return quic.ConnectionStats{}, false
	}
	return c.ConnectionStats(), true
}

// checkUplink migrates the live connection when the address it sends from
// is no longer the uplink's (the uplink's address changed). It does nothing
// with --tunnel-local-addr (the operator chose the address) or without an
// uplink address to move to.
func (l *tunnelLink) checkUplink(ctx context.Context) {
	if l.flags.LocalAddr != "" || l.uplinkAddr == nil {
		return
	}
	c := l.current()
	if c == nil {
		return
	}
	want, ok := l.uplinkAddr()
	if !ok {
		return
	}
	ua, _ := c.LocalAddr().(*net.UDPAddr)
	if ua != nil {
		if have, ok := netip.AddrFromSlice(ua.IP); ok && have.Unmap() == want {
			return
		}
	}
	to := netip.AddrPortFrom(want, 0).String()
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Migrate(mctx, to); err != nil {
		if errors.Is(err, tunnel.ErrProbeNotSent) {
			// The connection cannot move (it would wait for its idle
			// timeout); a new one from the new address can, and the server
			// hands this identity its inner addresses back.
			l.st.migrationsStuck.Add(1)
			l.log.Warn("tunnel migration impossible: redialling from the new address", zap.String("to", to), zap.Error(err))
			c.Close()
			return
		}
		l.st.migrationFailures.Add(1)
		l.log.Warn("tunnel migration failed (retried at the next check)", zap.String("to", to), zap.Error(err))
		return
	}
	l.st.migrations.Add(1)
}

// watchUplink checks the uplink's address every interval, on each value
// from kick (SIGHUP) and when the live client's socket had a send refused
// (Client.PathGone), migrating when it changed, until ctx ends.
// Polling (the interface's address list) instead of a netlink
// subscription: a phone's address changes at most every few seconds and
// one poll a second costs one small system call.
func (l *tunnelLink) watchUplink(ctx context.Context, every time.Duration, kick <-chan struct{}) error {
	t := time.NewTicker(every)
	defer t.Stop()
	listen := true // refused sends: at most one extra check per interval
	for {
		var gone <-chan struct{}
		if c := l.current(); c != nil && listen {
			gone = c.PathGone()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.done:
			return nil
		case <-t.C:
			listen = true
		case <-kick:
			l.log.Info("SIGHUP: checking the uplink address")
		case <-gone:
			// A refused send: check now rather than at the next poll
			// (while the address stays gone every send is refused).
			listen = false
		}
		l.checkUplink(ctx)
	}
}

// restart ends the live connection (CONNECTION_CLOSE) and lets supervise
// dial a new one straight away; the server hands this identity its inner
// addresses back (tunnel.ServerConfig.AddressHold). A new connection measures the path afresh:
// quic-go's RTT estimate (its min RTT is never forgotten) and congestion
// controller (HyStart leaves slow start as soon as the RTT exceeds that
// min RTT by 4-16 ms) restart on the path as it is now. It is what the
// bench does once the emulated link is up, since the tunnel was dialled
// over the bare path before (SIGUSR1). Flows survive it as a redial: if
// the server hands out the same inner address again.
func (l *tunnelLink) restart() {
	c := l.current()
	if c == nil {
		return
	}
	l.st.restarts.Add(1)
	l.log.Info("restarting the tunnel connection: a new connection measures the path afresh")
	c.Close()
}

// restartOn calls restart for each value from sig (SIGUSR1) until ctx
// ends.
func (l *tunnelLink) restartOn(ctx context.Context, sig <-chan os.Signal) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.done:
			return nil
		case <-sig:
			l.restart()
		}
	}
}

// interfaceAddr returns a function giving the first global unicast address
// of interface name in the family of server (IPv4 when server's family is
// unknown).
func interfaceAddr(name, server string) func() (netip.Addr, bool) {
	want6 := false
	if host, _, err := net.SplitHostPort(server); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			want6 = a.Is6() && !a.Is4In6()
		}
	}
	return func() (netip.Addr, bool) {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return netip.Addr{}, false
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return netip.Addr{}, false
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			x, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			x = x.Unmap()
			if x.Is6() != want6 || !x.IsGlobalUnicast() {
				continue
			}
			return x, true
		}
		return netip.Addr{}, false
	}
}

// describe is the start-up line for the tunnel.
func (l *tunnelLink) describe(c *tunnel.Client) string {
	return fmt.Sprintf("tunnel to %s from %s: inner addresses %v, routes %v", l.flags.Server, c.LocalAddr(), c.Addresses(), c.Routes())
}

// tunnelCollector exports the phone's tunnel: counters of all clients so
// far, the link's redials and migrations, and quic-go's RTT estimates of
// the live connection (the bench reports them next to the inner TCP's).
type tunnelCollector struct {
	link  *tunnelLink
	hints *hintForwarder // nil with --tunnel-hints=false
}

var (
	tcDescPackets  = prometheus.NewDesc("m2ho_tunnel_client_packets_total", "Packets through the tunnel by direction (up: into the tunnel; down: returned to the TUN, local ICMP included).", []string{"dir"}, nil)
	tcDescBytes    = prometheus.NewDesc("m2ho_tunnel_client_bytes_total", "Bytes through the tunnel by direction.", []string{"dir"}, nil)
	tcDescDrops    = prometheus.NewDesc("m2ho_tunnel_client_drops_total", "Packets the tunnel client dropped by reason (down: the tunnel was down).", []string{"reason"}, nil)
	tcDescPTB      = prometheus.NewDesc("m2ho_tunnel_client_packet_too_big_total", "ICMP Packet Too Big returned for packets above the inner MTU.", nil, nil)
	tcDescClamp    = prometheus.NewDesc("m2ho_tunnel_client_mss_clamped_total", "TCP SYN/SYN-ACKs whose MSS was clamped to the inner MTU.", nil, nil)
	tcDescHints    = prometheus.NewDesc("m2ho_tunnel_client_hints_total", "Hints by outcome (sent to the server, dropped: forwarder queue full).", []string{"outcome"}, nil)
	tcDescHintRate = prometheus.NewDesc("m2ho_tunnel_client_executed_hint_rate_total", "Executed-handover hints by where their c_est came from (measured: the tunnel's own delivery rate after the handover; unknown: none measured within the wait, sent as 0).", []string{"c_est"}, nil)
	tcDescRedial   = prometheus.NewDesc("m2ho_tunnel_client_redials_total", "Redial attempts after the tunnel went down, by outcome.", []string{"outcome"}, nil)
	tcDescAddrChg  = prometheus.NewDesc("m2ho_tunnel_client_inner_address_changes_total", "Redials that got other inner addresses (open tunnelled flows broke).", nil, nil)
	tcDescMigr     = prometheus.NewDesc("m2ho_tunnel_client_migrations_total", "QUIC connection migrations to a new uplink address, by outcome (redialled: quic-go could send no path probe, its window full of packets lost with the old address, so the tunnel redialled from the new one).", []string{"outcome"}, nil)
	tcDescUp       = prometheus.NewDesc("m2ho_tunnel_client_up", "1 while the tunnel connection is up.", nil, nil)
	tcDescRTT      = prometheus.NewDesc("m2ho_tunnel_client_rtt_seconds", "quic-go's RTT estimates of the tunnel connection (min, smoothed, latest, mean deviation).", []string{"stat"}, nil)
	tcDescQuic     = prometheus.NewDesc("m2ho_tunnel_client_quic_packets_total", "QUIC packets of the live connection (quic-go's statistics), by event.", []string{"event"}, nil)
	tcDescRecvWait = prometheus.NewDesc("m2ho_tunnel_client_receive_waits_total", "Waits of quic-go's receiving goroutine for http3's reader while quic-go's DATAGRAM receive queue was nearly full (--tunnel-recv-wait), by how they ended (drained, or bound: at 3 ms with the queue still deep).", []string{"end"}, nil)
)

func (t *tunnelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tcDescPackets, tcDescBytes, tcDescDrops, tcDescPTB, tcDescClamp, tcDescHints, tcDescHintRate, tcDescRedial, tcDescAddrChg, tcDescMigr, tcDescUp, tcDescRTT, tcDescQuic, tcDescRecvWait} {
		ch <- d
	}
}

func (t *tunnelCollector) Collect(ch chan<- prometheus.Metric) {
	s := t.link.Stats()
	l := t.link
	cnt := func(d *prometheus.Desc, v uint64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
	}
	cnt(tcDescPackets, s.PacketsUp, "up")
	cnt(tcDescPackets, s.PacketsDown, "down")
	cnt(tcDescBytes, s.BytesUp, "up")
	cnt(tcDescBytes, s.BytesDown, "down")
	cnt(tcDescDrops, s.DropUpQueueFull, "up-queue-full")
	cnt(tcDescDrops, s.DropDownQueueFull, "down-queue-full")
	cnt(tcDescDrops, s.DropUpQueueLimit, "up-queue-limit")
	cnt(tcDescDrops, s.DropDatagramRecvQueue, "quic-datagram-receive-queue")
	cnt(tcDescDrops, s.DropH3DatagramQueue, "h3-datagram-queue")
	cnt(tcDescRecvWait, s.RecvWaits-s.RecvWaitsTimedOut, "drained")
	cnt(tcDescRecvWait, s.RecvWaitsTimedOut, "bound")
	cnt(tcDescDrops, s.DropInvalid, "invalid")
	cnt(tcDescDrops, s.DropNATConflict, "nat-conflict")
	cnt(tcDescDrops, s.DropRefused, "refused")
	cnt(tcDescDrops, l.st.downDrops.Load(), "tunnel-down")
	cnt(tcDescDrops, s.SendsPathGone, "udp-path-gone")
	cnt(tcDescPTB, s.PTBSent)
	cnt(tcDescClamp, s.MSSClamped)
	cnt(tcDescHints, s.HintsSent, "sent")
	cnt(tcDescHintRate, s.HintsRateMeasured, "measured")
	cnt(tcDescHintRate, s.HintsRateUnknown, "unknown")
	var hd uint64
	if t.hints != nil {
		hd = t.hints.dropped.Load()
	}
	cnt(tcDescHints, hd, "dropped")
	cnt(tcDescRedial, l.st.redials.Load()-l.st.redialFailures.Load(), "ok")
	cnt(tcDescRedial, l.st.redialFailures.Load(), "failed")
	cnt(tcDescAddrChg, l.st.addrChanged.Load())
	cnt(tcDescMigr, s.Migrations, "ok")
	cnt(tcDescMigr, l.st.migrationFailures.Load(), "failed")
	cnt(tcDescMigr, l.st.migrationsStuck.Load(), "redialled")
	cs, up := l.ConnectionStats()
	ch <- prometheus.MustNewConstMetric(tcDescUp, prometheus.GaugeValue, b2f(up))
	if !up {
		return
	}
	g := func(stat string, d time.Duration) {
		ch <- prometheus.MustNewConstMetric(tcDescRTT, prometheus.GaugeValue, d.Seconds(), stat)
	}
	g("min", cs.MinRTT)
	g("smoothed", cs.SmoothedRTT)
	g("latest", cs.LatestRTT)
	g("meandev", cs.MeanDeviation)
	cnt(tcDescQuic, cs.PacketsSent, "sent")
	cnt(tcDescQuic, cs.PacketsReceived, "received")
	cnt(tcDescQuic, cs.PacketsLost, "lost")
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// logRTT appends a line every interval while the tunnel is up: unix_ns,
// then quic-go's latest, smoothed and min RTT in ms (the bench's tunnel
// RTT), until ctx ends.
func (l *tunnelLink) logRTT(ctx context.Context, w io.Writer, every time.Duration) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "unix_ns\tlatest_ms\tsmoothed_ms\tmin_ms\n")
	t := time.NewTicker(every)
	defer t.Stop()
	defer bw.Flush()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			cs, up := l.ConnectionStats()
			if !up || cs.LatestRTT == 0 {
				continue
			}
			fmt.Fprintf(bw, "%d\t%.3f\t%.3f\t%.3f\n", now.UnixNano(), ms(cs.LatestRTT), ms(cs.SmoothedRTT), ms(cs.MinRTT))
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("--tunnel-rtt-log: %w", err)
			}
		}
	}
}
