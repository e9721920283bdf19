package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/tun"
)

// Controller is what the packet path needs of the M2HO controller. It is
// not goroutine-safe: the engine calls it with its mutex held, and
// signalling events must reach it through Engine.Do.
type Controller interface {
	// Attach is called once when an m2ho-mode flow is created; f is zeroed.
	Attach(now time.Time, f *m2ho.Flow)
	// Detach is called when the flow expires or is evicted; f is reused
	// afterwards.
	Detach(f *m2ho.Flow)
	// OnPacket returns the verdict for one TCP segment of the flow.
	OnPacket(now time.Time, f *m2ho.Flow, p *m2ho.Packet) m2ho.Verdict
}

// Defaults for EngineConfig's zero fields.
const (
	DefaultMaxFlows      = 16384
	DefaultIdleTimeout   = 120 * time.Second
	DefaultClosedTimeout = 30 * time.Second
	DefaultExpireEvery   = time.Second
)

// EngineConfig configures an Engine.
type EngineConfig struct {
	// TetherPrefixes are the tethered side's addresses: a packet whose
	// source is inside is Uplink, whose destination is inside is Downlink;
	// anything else (neither, or both) passes uncounted as pass-through.
	TetherPrefixes []netip.Prefix
	// Rules select each new flow's mode, first match wins; DefaultMode
	// applies when none matches. They are evaluated once per flow.
	Rules       []Rule
	DefaultMode Mode
	// MaxFlows bounds the flow table (memory is preallocated); when full,
	// the least recently seen flow is evicted.
	MaxFlows int
	// IdleTimeout expires open flows, ClosedTimeout flows that saw FIN or
	// RST.
	IdleTimeout, ClosedTimeout time.Duration
	// ExpireEvery is how often Run expires flows while no packets arrive.
	ExpireEvery time.Duration
	// Offset is the head-room Run leaves in front of each packet buffer;
	// Run leaves at least what the device asks for (tun.LayoutOf).
	Offset int
	// Now is Run's clock (time.Now if nil). Process takes now explicitly.
	Now func() time.Time
	// Sinks route the uplink packets of tunnelled modes (quic, quic+m2ho)
	// away from the TUN; a mode is available only with a sink (see
	// Route). Several modes may share one sink: it then gets one Write
	// per read batch for all of them.
	Sinks map[Mode]Sink
	// Sources are the packets coming back from the sinks: Run reads each
	// on its own pump, processes the packets as the engine's own and
	// writes them to the TUN.
	Sources []Source
}

// modeAvailable is Mode.Available, except that a tunnelled mode with a
// sink configured is available.
func (c *EngineConfig) modeAvailable(m Mode) error {
	if m.tunnelled() && c.Sinks[m] != nil {
		return nil
	}
	if err := m.Available(); err != nil {
		if m.tunnelled() {
			return fmt.Errorf("%w (no sink configured for it)", err)
		}
		return err
	}
	return nil
}

func (c *EngineConfig) setDefaults() {
	if c.MaxFlows <= 0 {
		c.MaxFlows = DefaultMaxFlows
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ClosedTimeout <= 0 {
		c.ClosedTimeout = DefaultClosedTimeout
	}
	if c.ExpireEvery <= 0 {
		c.ExpireEvery = DefaultExpireEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	for i, p := range c.TetherPrefixes {
		if p.IsValid() && p.Addr().Is4In6() {
			c.TetherPrefixes[i] = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
		}
	}
}

// Validate reports configuration the engine cannot run: no tether prefix,
// an invalid prefix, or a mode that is not available yet.
func (c *EngineConfig) Validate() error {
	if len(c.TetherPrefixes) == 0 {
		return errors.New("proxy: no tether prefixes: every packet would pass uncounted")
	}
	for i, p := range c.TetherPrefixes {
		if !p.IsValid() {
			return fmt.Errorf("proxy: tether prefix %d is invalid", i+1)
		}
	}
	for m, sk := range c.Sinks {
		switch {
		case !m.tunnelled():
			return fmt.Errorf("proxy: sink for mode %s: only quic and quic+m2ho flows go to a sink", m)
		case sk == nil:
			return fmt.Errorf("proxy: sink for mode %s: nil", m)
		}
	}
	for i, src := range c.Sources {
		if src == nil {
			return fmt.Errorf("proxy: source %d: nil", i+1)
		}
	}
	if err := c.modeAvailable(c.DefaultMode); err != nil {
		return fmt.Errorf("proxy: default mode: %w", err)
	}
	for i, r := range c.Rules {
		if err := c.modeAvailable(r.Mode); err != nil {
			return fmt.Errorf("proxy: rule %d (%s): %w", i+1, r, err)
		}
	}
	return nil
}

// NumReasons is the number of m2ho.Reason values counted separately.
const NumReasons = 5

// DirStats counts one direction.
type DirStats struct{ Packets, Bytes uint64 }

// Stats are the engine's counters. They are plain fields updated under the
// engine's mutex; Engine.Stats returns a consistent copy.
type Stats struct {
	Packets, Bytes   uint64
	Uplink, Downlink DirStats
	// PassThrough: neither (or both) addresses in the tether prefixes.
	PassThrough   uint64
	Unparseable   uint64
	UnparseableBy [packet.NumParseErrors]uint64 // indexed by ParseError
	NonTCP        uint64
	Fragments     uint64 // IP fragments, passed unchanged
	PassMode      uint64 // TCP packets of flows not in m2ho mode

	Flows        uint64 // currently in the table
	FlowsCreated uint64
	Evictions    uint64 // removed because the table was full
	Expirations  uint64 // removed after idling

	Rewrites   uint64
	RewritesBy [NumReasons]uint64 // indexed by m2ho.Reason
	Drops      uint64
	DropsBy    [NumReasons]uint64
	// UnsafeVerdicts counts verdicts the engine refused: raising or zero
	// windows, rewrites without a seen handshake, drops of anything but a
	// pure uplink ACK, unknown actions. The packet passed unchanged.
	UnsafeVerdicts uint64

	// Written and WriteErrors count writes to the TUN (from the packet
	// pump and the source pumps). ReadErrors counts failed TUN reads that
	// were not fatal: a packet too big for the buffer, or an error that
	// still delivered packets (which were processed).
	Written, WriteErrors, ReadErrors uint64

	// Sunk counts packets routed to a sink, SinkWritten those the sinks
	// took, SinkWriteErrors the failed sink writes (the refused packet is
	// skipped).
	Sunk, SinkWritten, SinkWriteErrors uint64
	// Returned counts packets read from the sources, SourceReadErrors the
	// non-fatal source read errors (as ReadErrors).
	Returned, SourceReadErrors uint64
}

// Engine is the packet path for one TUN device.
type Engine struct {
	mu     sync.Mutex
	cfg    EngineConfig
	dev    tun.Device
	ctrl   Controller
	log    *zap.Logger
	flows  *flowTable
	parsed packet.Parsed
	pkt    m2ho.Packet
	// nextExpire is the packet time at which process next expires flows.
	nextExpire time.Time
	stats      Stats

	onRemove func(*FlowEntry) // bound once, so expiry does not allocate

	// sinks are the distinct sinks of cfg.Sinks, in mode order; route[m]
	// is where an uplink packet of a flow in mode m goes.
	sinks []Sink
	route [numModes]Route
	// off and bufSize are the packet buffers' head-room and size, from the
	// device's layout (tun.LayoutOf), fixed when Run starts.
	off, bufSize int
	// wmu serializes writes to dev: the packet pump and the source pumps
	// all write to it.
	wmu sync.Mutex
}

// NewEngine builds an engine; zero config fields take the defaults. The
// configuration is checked by Run (see EngineConfig.Validate).
func NewEngine(cfg EngineConfig, dev tun.Device, ctrl Controller, log *zap.Logger) *Engine {
	cfg.TetherPrefixes = append([]netip.Prefix(nil), cfg.TetherPrefixes...)
	cfg.setDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	e := &Engine{cfg: cfg, dev: dev, ctrl: ctrl, log: log}
	e.flows = newFlowTable(cfg.MaxFlows, cfg.IdleTimeout, cfg.ClosedTimeout)
	e.onRemove = e.removeFlow
	for m := range Mode(numModes) {
		sk := cfg.Sinks[m]
		if sk == nil || !m.tunnelled() {
			continue
		}
		i := 0
		for i < len(e.sinks) && !sameSink(e.sinks[i], sk) {
			i++
		}
		if i == len(e.sinks) {
			e.sinks = append(e.sinks, sk)
		}
		e.route[m] = RouteTUN + 1 + Route(i)
	}
	return e
}

// Sink returns the sink of a route above RouteTUN (nil for the others).
func (e *Engine) Sink(r Route) Sink {
	if i := int(r - RouteTUN - 1); r > RouteTUN && i < len(e.sinks) {
		return e.sinks[i]
	}
	return nil
}

// Do runs f with the engine's mutex held, serializing other work
// (signalling events and ticks for the controller) with packet processing.
func (e *Engine) Do(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
}

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Flows = uint64(e.flows.len())
	return s
}

// Flow returns a copy of the table entry for a connection given by its
// laptop and internet endpoints, for tests and inspection.
func (e *Engine) Flow(proto uint8, laptop, remote netip.AddrPort) (FlowEntry, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.flows.lookup(makeKey(proto, laptop.Addr().Unmap(), laptop.Port(), remote.Addr().Unmap(), remote.Port()))
	if f == nil {
		return FlowEntry{}, false
	}
	return *f, true
}

// Expire removes idle flows as of now.
func (e *Engine) Expire(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stats.Expirations += uint64(e.flows.expire(now, e.onRemove))
}

// Process handles one packet in place and reports whether to forward it
// (false only for a pure uplink ACK the controller dropped), to the TUN
// or a sink (see Route). The packet's length never changes.
func (e *Engine) Process(now time.Time, pkt []byte) (keep bool) {
	return e.Route(now, pkt) != RouteDrop
}

// Route handles one packet read from the TUN in place and returns where
// it goes.
func (e *Engine) Route(now time.Time, pkt []byte) Route {
	e.mu.Lock()
	r := e.process(now, pkt, false)
	e.mu.Unlock()
	return r
}

// Return handles one packet coming back from a sink in place and returns
// where it goes: RouteTUN, or RouteDrop if the controller dropped it.
func (e *Engine) Return(now time.Time, pkt []byte) Route {
	e.mu.Lock()
	r := e.processReturn(now, pkt)
	e.mu.Unlock()
	return r
}

func (e *Engine) processReturn(now time.Time, pkt []byte) Route {
	e.stats.Returned++
	return e.process(now, pkt, true)
}

func (e *Engine) removeFlow(f *FlowEntry) {
	if f.Mode.usesController() && e.ctrl != nil {
		e.ctrl.Detach(&f.Flow)
	}
}

func (e *Engine) inTether(a netip.Addr) bool {
	for _, p := range e.cfg.TetherPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// process handles one packet: from the TUN (returned false), or from a
// source (returned true: never routed to a sink).
func (e *Engine) process(now time.Time, b []byte, returned bool) Route {
	s := &e.stats
	s.Packets++
	s.Bytes += uint64(len(b))
	p := &e.parsed
	if !p.Decode(b) {
		s.Unparseable++
		s.UnparseableBy[p.Err]++
		return RouteTUN
	}
	srcIn, dstIn := e.inTether(p.Src), e.inTether(p.Dst)
	var dir m2ho.Dir
	switch {
	case srcIn && !dstIn:
		dir = m2ho.Uplink
		s.Uplink.Packets++
		s.Uplink.Bytes += uint64(len(b))
	case dstIn && !srcIn:
		dir = m2ho.Downlink
		s.Downlink.Packets++
		s.Downlink.Bytes += uint64(len(b))
	default:
		s.PassThrough++
		return RouteTUN
	}
	if p.Fragment {
		s.Fragments++
		return RouteTUN
	}
	if p.Proto != packet.ProtoTCP || !p.TCPParsed {
		s.NonTCP++
		return RouteTUN
	}
	if !now.Before(e.nextExpire) {
		// At most once per ExpireEvery of packet time: expiry is then up to
		// ExpireEvery late, and costs one time comparison per packet.
		s.Expirations += uint64(e.flows.expire(now, e.onRemove))
		e.nextExpire = now.Add(e.cfg.ExpireEvery)
	}

	var k flowKey
	if dir == m2ho.Uplink {
		k = makeKey(packet.ProtoTCP, p.Src, p.SrcPort, p.Dst, p.DstPort)
	} else {
		k = makeKey(packet.ProtoTCP, p.Dst, p.DstPort, p.Src, p.SrcPort)
	}
	f := e.flows.lookup(k)
	isSYN := p.Flags&m2ho.FlagSYN != 0
	if f != nil && f.Closing && isSYN && p.Flags&m2ho.FlagACK == 0 {
		// A new connection reusing the 4-tuple of a closed one.
		e.flows.remove(f.self, e.onRemove)
		f = nil
	}
	if f == nil {
		f = e.newFlow(now, k)
	}
	if isSYN {
		f.synSeen[dir] = true
		f.wsOpt[dir] = p.WScale
		if p.MSS != 0 {
			f.mss[dir] = p.MSS
		}
	}
	if p.Flags&(m2ho.FlagFIN|m2ho.FlagRST) != 0 {
		f.Closing = true
	}
	f.Packets[dir]++
	f.Bytes[dir] += uint64(len(b))
	e.flows.touch(f, now)
	// Where the packet goes if kept: an uplink packet of a tunnelled
	// flow to its sink (RouteTUN without one, as Process called without
	// Run's validation may see), everything else to the TUN.
	to := RouteTUN
	if dir == m2ho.Uplink && !returned {
		to = e.route[f.Mode%Mode(numModes)]
	}
	if !f.Mode.usesController() || e.ctrl == nil {
		s.PassMode++
		if to != RouteTUN {
			s.Sunk++
		}
		return to
	}
	// pk lives in the engine: passed through an interface it would
	// otherwise escape to the heap on every packet.
	pk := &e.pkt
	*pk = m2ho.Packet{
		Dir: dir, Flags: p.Flags, Seq: p.Seq, Ack: p.Ack, Window: p.Window,
		PayloadLen: p.PayloadLen, WScale: f.WScale(dir), MSS: f.MSS(),
		HasTS: p.HasTS, TSval: p.TSval, TSecr: p.TSecr,
	}
	v := e.ctrl.OnPacket(now, &f.Flow, pk)
	if !e.apply(b, p, pk, v) {
		return RouteDrop
	}
	if to != RouteTUN {
		s.Sunk++
	}
	return to
}

func (e *Engine) newFlow(now time.Time, k flowKey) *FlowEntry {
	f, evicted := e.flows.insert(k, now, e.onRemove)
	if evicted {
		e.stats.Evictions++
	}
	e.stats.FlowsCreated++
	p := &e.parsed
	laptop, remote := netip.AddrFrom16(k.laptop).Unmap(), netip.AddrFrom16(k.remote).Unmap()
	f.Mode = MatchRules(e.cfg.Rules, e.cfg.DefaultMode, p.Proto, laptop, k.lport, remote, k.rport)
	if f.Mode.usesController() && e.ctrl != nil {
		e.ctrl.Attach(now, &f.Flow)
	}
	if ce := e.log.Check(zap.DebugLevel, "new flow"); ce != nil {
		ce.Write(zap.Stringer("laptop", netip.AddrPortFrom(laptop, k.lport)),
			zap.Stringer("remote", netip.AddrPortFrom(remote, k.rport)), zap.Stringer("mode", f.Mode))
	}
	return f
}

func reasonIndex(r m2ho.Reason) int {
	if int(r) < NumReasons {
		return int(r)
	}
	return 0
}

// apply enforces the packet path's own invariants on a verdict before
// acting on it: only uplink packets are touched; a window is only ever
// lowered, never to 0, never in a SYN, and only when the flow's window
// scale is known;
// only pure ACKs are dropped. Anything else passes unchanged and counts as
// an unsafe verdict.
func (e *Engine) apply(b []byte, p *packet.Parsed, pk *m2ho.Packet, v m2ho.Verdict) bool {
	s := &e.stats
	switch v.Action {
	case m2ho.Pass:
		return true
	case m2ho.Rewrite:
		// A SYN's window is never scaled (RFC 7323 §2.2), so a verdict in
		// scaled units cannot apply to it.
		if pk.Dir != m2ho.Uplink || pk.WScale < 0 || pk.Flags&m2ho.FlagSYN != 0 || v.Window == 0 || v.Window > p.Window {
			s.UnsafeVerdicts++
			return true
		}
		if v.Window < p.Window {
			packet.SetTCPWindow(b, p, v.Window)
			s.Rewrites++
			s.RewritesBy[reasonIndex(v.Reason)]++
		}
		return true
	case m2ho.Drop:
		if pk.Dir != m2ho.Uplink || !pk.IsPureACK() {
			s.UnsafeVerdicts++
			return true
		}
		s.Drops++
		s.DropsBy[reasonIndex(v.Reason)]++
		return false
	}
	s.UnsafeVerdicts++
	return true
}

// Run reads packet batches from the device, processes them and writes
// each batch's survivors to where they are routed: back to the same
// device, or to a sink (one Write per destination per batch). A second
// pump per Source writes the packets coming back from the sinks to the
// device, after processing them (see Route). Run stops when ctx is done
// (then it closes the device and the sources and returns nil) or when the
// device, a sink or a source fails. It expires idle flows every
// ExpireEvery even when no packets arrive. A read error that still
// delivered packets (an offload TUN reports too many segments so) is
// counted and the packets processed; it is not fatal.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.cfg.Validate(); err != nil {
		return err
	}
	// The device's layout: head-room for its own header (the offload
	// device's virtio-net header) and room to merge segments in place.
	lay := tun.LayoutOf(e.dev)
	e.off, e.bufSize = max(e.cfg.Offset, lay.Headroom), lay.BufSize
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		t := time.NewTicker(e.cfg.ExpireEvery)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				// Unblocks every pump's Read.
				e.dev.Close()
				for _, src := range e.cfg.Sources {
					src.Close()
				}
				return nil
			case <-t.C:
				e.Expire(e.cfg.Now())
			}
		}
	})
	e.log.Info("packet path running", zap.String("device", e.dev.Name()), zap.Int("batch", e.dev.BatchSize()),
		zap.Int("mtu", e.dev.MTU()), zap.Stringer("default_mode", e.cfg.DefaultMode), zap.Int("rules", len(e.cfg.Rules)),
		zap.Int("sinks", len(e.sinks)), zap.Int("sources", len(e.cfg.Sources)))
	g.Go(func() error { return e.pump(gctx) })
	for _, src := range e.cfg.Sources {
		g.Go(func() error { return e.pumpReturn(gctx, src) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// buffers allocates one batch of packet buffers for the device.
func (e *Engine) buffers() (bufs [][]byte, sizes []int) {
	bs := max(e.dev.BatchSize(), 1)
	size := e.off + e.bufSize
	bufs = make([][]byte, bs)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs, make([]int, bs)
}

// readFailed decides what a read error means: nil to carry on (counted in
// *count), or the error that ends the pump.
func (e *Engine) readFailed(ctx context.Context, name string, n int, err error, count *uint64) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if n > 0 || errors.Is(err, tun.ErrTooBig) || tun.IsPacketError(err) {
		e.Do(func() { *count++ })
		if ce := e.log.Check(zap.DebugLevel, "read error"); ce != nil {
			ce.Write(zap.String("from", name), zap.Int("packets", n), zap.Error(err))
		}
		return nil
	}
	return fmt.Errorf("proxy: read %s: %w", name, err)
}

// pump is the device's packet pump.
func (e *Engine) pump(ctx context.Context) error {
	off := e.off
	bufs, sizes := e.buffers()
	// outs[r] collects a batch's packets for route r (RouteTUN, sinks).
	outs := make([][][]byte, 1+len(e.sinks))
	for i := range outs {
		outs[i] = make([][]byte, 0, len(bufs))
	}
	for {
		n, rerr := e.dev.Read(bufs, sizes, off)
		if n > 0 {
			now := e.cfg.Now()
			for i := range outs {
				outs[i] = outs[i][:0]
			}
			e.mu.Lock()
			for i := 0; i < n; i++ {
				if r := e.process(now, bufs[i][off:off+sizes[i]], false); r != RouteDrop {
					outs[r] = append(outs[r], bufs[i][:off+sizes[i]])
				}
			}
			e.mu.Unlock()
			for r, out := range outs {
				if len(out) == 0 {
					continue
				}
				if err := e.write(Route(r), out); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
		}
		if rerr != nil {
			if err := e.readFailed(ctx, e.dev.Name(), n, rerr, &e.stats.ReadErrors); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// pumpReturn is a source's pump: its packets go to the device.
func (e *Engine) pumpReturn(ctx context.Context, src Source) error {
	off := e.off
	bufs, sizes := e.buffers()
	out := make([][]byte, 0, len(bufs))
	for {
		n, rerr := src.Read(bufs, sizes, off)
		if n > 0 {
			now := e.cfg.Now()
			out = out[:0]
			e.mu.Lock()
			for i := 0; i < n; i++ {
				if e.processReturn(now, bufs[i][off:off+sizes[i]]) != RouteDrop {
					out = append(out, bufs[i][:off+sizes[i]])
				}
			}
			e.mu.Unlock()
			if err := e.write(RouteTUN, out); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if rerr != nil {
			if err := e.readFailed(ctx, "source "+src.Name(), n, rerr, &e.stats.SourceReadErrors); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
}

// write sends out to route r's destination, skipping (and counting) a
// packet it refuses; it fails only when the destination is closed.
func (e *Engine) write(r Route, out [][]byte) error {
	off := e.off
	var dst Sink = e.dev
	written, errs := &e.stats.Written, &e.stats.WriteErrors
	if r > RouteTUN {
		dst = e.sinks[r-RouteTUN-1]
		written, errs = &e.stats.SinkWritten, &e.stats.SinkWriteErrors
	} else {
		e.wmu.Lock()
		defer e.wmu.Unlock()
	}
	for len(out) > 0 {
		n, err := dst.Write(out, off)
		e.mu.Lock()
		*written += uint64(n)
		if err != nil {
			*errs++
		}
		e.mu.Unlock()
		if err == nil {
			return nil
		}
		if errors.Is(err, os.ErrClosed) {
			return fmt.Errorf("proxy: write %s: %w", dst.Name(), err)
		}
		e.log.Debug("write failed", zap.String("to", dst.Name()), zap.Error(err))
		out = out[min(n+1, len(out)):]
	}
	return nil
}
