package proxy

import (
	"bytes"
	"context"
	"errors"
	"github.com/m2ho/m2ho/proxy/packet"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/tun"
)

// fakeSink records every Write: how many calls, and the packets (copied).
type fakeSink struct {
	name string
	mu   sync.Mutex
	// calls[i] is the number of packets of the i-th Write.
	calls []int
	pkts  [][]byte
	wrote chan struct{} // one element per Write, if not nil
}

func newFakeSink(name string) *fakeSink {
	return &fakeSink{name: name, wrote: make(chan struct{}, 64)}
}

func (s *fakeSink) Name() string { return s.name }
func (s *fakeSink) Write(bufs [][]byte, off int) (int, error) {
	s.mu.Lock()
	s.calls = append(s.calls, len(bufs))
	for _, b := range bufs {
		s.pkts = append(s.pkts, bytes.Clone(b[off:]))
	}
	s.mu.Unlock()
	if s.wrote != nil {
		s.wrote <- struct{}{}
	}
	return len(bufs), nil
}

func (s *fakeSink) snapshot() ([]int, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.calls...), append([][]byte(nil), s.pkts...)
}

// errOnce wraps a device (or source) so that its first Read that delivers
// packets also returns an error, as an offload TUN does when it has more
// segments than buffers.
type errOnce struct {
	*tun.ChannelTUN
	mu   sync.Mutex
	done bool
}

var errTooManySegments = errors.New("too many segments")

func (d *errOnce) Read(bufs [][]byte, sizes []int, off int) (int, error) {
	n, err := d.ChannelTUN.Read(bufs, sizes, off)
	d.mu.Lock()
	defer d.mu.Unlock()
	if n > 0 && err == nil && !d.done {
		d.done = true
		return n, errTooManySegments
	}
	return n, err
}

var (
	quicServer = netip.MustParseAddrPort("198.51.100.7:443")
	qmServer   = netip.MustParseAddrPort("198.51.100.7:8443")
	m2hoServer = netip.MustParseAddrPort("198.51.100.7:80")
	passServer = netip.MustParseAddrPort("198.51.100.7:22")
)

// routeConfig: port 443 quic, 8443 quic+m2ho, 80 m2ho, the rest pass.
func routeConfig(t testing.TB, sinks map[Mode]Sink) EngineConfig {
	rules, err := ParseRules([]string{"tcp port 443 mode=quic", "tcp port 8443 mode=quic+m2ho", "tcp port 80 mode=m2ho"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Rules, cfg.DefaultMode, cfg.Sinks = rules, ModePass, sinks
	return cfg
}

func TestRoutesPerMode(t *testing.T) {
	a, b := newFakeSink("quic"), newFakeSink("quic+m2ho")
	ctrl := &scripted{}
	e := NewEngine(routeConfig(t, map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: b}), nil, ctrl, nil)
	if err := e.cfg.Validate(); err != nil {
		t.Fatalf("quic modes with sinks: %v", err)
	}
	ra, rb := e.route[ModeQUIC], e.route[ModeQUICM2HO]
	if e.Sink(ra) != a || e.Sink(rb) != b || ra == rb || e.Sink(RouteTUN) != nil || e.Sink(RouteDrop) != nil {
		t.Fatalf("routes %v %v: sinks %v %v", ra, rb, e.Sink(ra), e.Sink(rb))
	}
	for _, c := range []struct {
		server         netip.AddrPort
		up, down       Route
		throughCtrl    bool
		mode           Mode
		dropPureUplink bool
	}{
		{quicServer, ra, RouteTUN, false, ModeQUIC, false},
		{qmServer, rb, RouteTUN, true, ModeQUICM2HO, true},
		{m2hoServer, RouteTUN, RouteTUN, true, ModeM2HO, true},
		{passServer, RouteTUN, RouteTUN, false, ModePass, false},
	} {
		cn := conn{laptop4, c.server, 7, 7, false}
		seen := len(ctrl.seen)
		if r := e.Route(t0, cn.seg(true, syn, 1, 0, 64240, 0)); r != c.up {
			t.Errorf("%v: uplink SYN routed %v, want %v", c.mode, r, c.up)
		}
		if r := e.Route(t0, cn.seg(false, syn|ack, 1000, 2, 65160, 0)); r != c.down {
			t.Errorf("%v: downlink SYN-ACK (read from the TUN) routed %v, want %v", c.mode, r, c.down)
		}
		if r := e.Return(t0, cn.seg(false, ack|psh, 1001, 2, 500, 100)); r != RouteTUN {
			t.Errorf("%v: downlink from a source routed %v, want tun", c.mode, r)
		}
		if got := len(ctrl.seen) - seen; (got == 3) != c.throughCtrl || (got != 0 && got != 3) {
			t.Errorf("%v: the controller saw %d of 3 packets (want it to see all: %v)", c.mode, got, c.throughCtrl)
		}
		if f, ok := e.Flow(packet.ProtoTCP, laptop4, c.server); !ok || f.Mode != c.mode {
			t.Errorf("%v: flow %+v %v", c.mode, f, ok)
		}
		// A controller's drop still wins over the sink; a pure ACK coming
		// back from a source goes to the TUN, never into a sink.
		ctrl.next = []m2ho.Verdict{{Action: m2ho.Drop}}
		drops := e.Stats().Drops
		want := c.up
		if c.dropPureUplink {
			want = RouteDrop
		}
		if r := e.Route(t0, cn.seg(true, ack, 2, 1101, 500, 0)); r != want {
			t.Errorf("%v: dropped pure uplink ACK routed %v, want %v", c.mode, r, want)
		}
		if c.dropPureUplink && e.Stats().Drops != drops+1 {
			t.Errorf("%v: drop not counted", c.mode)
		}
		ctrl.next = nil
		if r := e.Return(t0, cn.seg(true, ack, 2, 1101, 500, 0)); r != RouteTUN {
			t.Errorf("%v: uplink packet from a source routed %v, want tun (no loop into the tunnel)", c.mode, r)
		}
	}
	if ctrl.attached != 2 {
		t.Errorf("controller attached to %d flows, want 2 (m2ho and quic+m2ho)", ctrl.attached)
	}
	// Non-TCP never goes to a sink.
	udp := conn{laptop4, quicServer, -1, -1, false}.seg(true, ack, 1, 1, 1, 0)
	udp[9] = 17
	if r := e.Route(t0, udp); r != RouteTUN {
		t.Errorf("UDP routed %v", r)
	}
	if st := e.Stats(); st.Sunk != 3 || st.Returned != 8 {
		t.Errorf("stats: %d sunk (want 3: quic SYN and ACK, quic+m2ho SYN; not the dropped ACK, nothing returned), %d returned (want 8)", st.Sunk, st.Returned)
	}

	// One sink for both tunnelled modes is one route.
	e = NewEngine(routeConfig(t, map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: a}), nil, ctrl, nil)
	if len(e.sinks) != 1 || e.route[ModeQUIC] != e.route[ModeQUICM2HO] {
		t.Errorf("shared sink: %d sinks, routes %v %v", len(e.sinks), e.route[ModeQUIC], e.route[ModeQUICM2HO])
	}
}

func TestValidateSinks(t *testing.T) {
	a := newFakeSink("a")
	for _, c := range []struct {
		sinks map[Mode]Sink
		want  string
	}{
		{nil, "mode quic is not available yet (no sink configured for it)"},
		{map[Mode]Sink{ModeQUIC: a}, "mode quic+m2ho is not available yet (no sink configured for it)"},
		{map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: a, ModePass: a}, "sink for mode pass: only quic and quic+m2ho"},
		{map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: nil}, "sink for mode quic+m2ho: nil"},
		{map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: a}, ""},
	} {
		cfg := routeConfig(t, c.sinks)
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("sinks %v: Validate = %v, want %q", c.sinks, err, c.want)
		}
	}
}

// TestRunSinksAndReturn runs both pumps over in-memory devices: one read
// batch becomes one Write per destination, the packets coming back from a
// source reach the TUN after the controller saw them, a read error that
// delivered packets is counted and the packets processed.
func TestRunSinksAndReturn(t *testing.T) {
	dev := &errOnce{ChannelTUN: tun.NewChannelTUN(1500, 16)}
	src := &errOnce{ChannelTUN: tun.NewChannelTUN(1500, 16)}
	a, b := newFakeSink("quic"), newFakeSink("quic+m2ho")
	ctrl := &scripted{}
	cfg := routeConfig(t, map[Mode]Sink{ModeQUIC: a, ModeQUICM2HO: b})
	cfg.Offset = 16
	cfg.Sources = []Source{src}
	e := NewEngine(cfg, dev, ctrl, nil)
	q, qm, ps := conn{laptop4, quicServer, 7, 7, false}, conn{laptop4, qmServer, 7, 7, false}, conn{laptop4, passServer, 7, 7, false}
	batch := [][]byte{
		q.seg(true, syn, 1, 0, 64240, 0),       // -> a
		qm.seg(true, syn, 1, 0, 64240, 0),      // -> b (controller: pass)
		ps.seg(true, syn, 1, 0, 64240, 0),      // -> tun
		q.seg(true, ack, 2, 1001, 500, 100),    // -> a
		qm.seg(true, ack, 2, 1001, 500, 0),     // dropped by the controller
		qm.seg(true, ack, 2, 1001, 600, 0),     // -> b
		q.seg(false, syn|ack, 1000, 2, 500, 0), // downlink on the TUN -> tun
	}
	ctrl.next = []m2ho.Verdict{{}, {Action: m2ho.Drop}, {}}
	// Queued before Run starts, so that the first Read takes them all.
	for _, p := range batch {
		dev.Inbound <- bytes.Clone(p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()

	recv := func(what string, ch chan []byte) []byte {
		t.Helper()
		select {
		case p := <-ch:
			return p
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing after 10 s (stats %+v)", what, e.Stats())
		}
		return nil
	}
	wait := func(s *fakeSink) {
		t.Helper()
		select {
		case <-s.wrote:
		case <-time.After(10 * time.Second):
			t.Fatalf("sink %s: no Write after 10 s (stats %+v)", s.name, e.Stats())
		}
	}
	wait(a)
	wait(b)
	if p := recv("pass SYN", dev.Outbound); !bytes.Equal(p, batch[2]) {
		t.Error("first packet on the TUN is not the pass flow's SYN")
	}
	if p := recv("downlink SYN-ACK", dev.Outbound); !bytes.Equal(p, batch[6]) {
		t.Error("second packet on the TUN is not the quic flow's downlink SYN-ACK")
	}
	for _, c := range []struct {
		s    *fakeSink
		want [][]byte
	}{{a, [][]byte{batch[0], batch[3]}}, {b, [][]byte{batch[1], batch[5]}}} {
		calls, pkts := c.s.snapshot()
		if len(calls) != 1 || calls[0] != 2 {
			t.Errorf("sink %s: writes of %v packets, want one Write of 2 for the batch", c.s.name, calls)
			continue
		}
		for i := range c.want {
			if !bytes.Equal(pkts[i], c.want[i]) {
				t.Errorf("sink %s: packet %d differs from what was read (offset lost?)", c.s.name, i)
			}
		}
	}

	// The return pump: downlink of both tunnelled flows out of the
	// tunnel, with a read error that still delivered them.
	back := [][]byte{qm.seg(false, syn|ack, 1000, 2, 65160, 0), q.seg(false, ack|psh, 1001, 102, 500, 50)}
	for _, p := range back {
		src.Inbound <- bytes.Clone(p)
	}
	for i := range back {
		if p := recv("returned packet", dev.Outbound); !bytes.Equal(p, back[i]) {
			t.Errorf("returned packet %d differs", i)
		}
	}
	// The TUN pump carries on after its n>0-with-error read.
	dev.Inbound <- bytes.Clone(ps.seg(true, ack, 2, 1001, 500, 0))
	recv("packet after the read error", dev.Outbound)

	var seen []m2ho.Packet
	var st Stats
	e.Do(func() { seen = append(seen, ctrl.seen...) })
	// The counters of a write follow its return: wait for them.
	want := func(st Stats) bool {
		return st.ReadErrors == 1 && st.SourceReadErrors == 1 && st.Returned == 2 && st.Drops == 1 &&
			st.Sunk == 4 && st.SinkWritten == 4 && st.Written == 5 && st.Packets == 10
	}
	for deadline := time.Now().Add(10 * time.Second); !want(e.Stats()) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	st = e.Stats()
	if len(seen) != 4 || seen[3].Dir != m2ho.Downlink || seen[3].Flags != syn|ack {
		t.Errorf("controller saw %d packets (last %+v); want 4, the last the quic+m2ho SYN-ACK from the tunnel", len(seen), seen[len(seen)-1])
	}
	if !want(st) {
		t.Errorf("stats %+v: want 1 read error each on the TUN and the source, 2 returned, 1 drop, 4 sunk and written to sinks, 5 written to the TUN, 10 packets", st)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if _, err := src.Read(make([][]byte, 1), make([]int, 1), 0); err == nil {
		t.Error("the source is still open after Run returned")
	}
}

func TestRunSourceFailureStops(t *testing.T) {
	dev := tun.NewChannelTUN(1500, 4)
	src := tun.NewChannelTUN(1500, 4)
	src.Close() // a source that fails at once, with nothing delivered
	cfg := routeConfig(t, map[Mode]Sink{ModeQUIC: newFakeSink("a"), ModeQUICM2HO: newFakeSink("b")})
	cfg.Sources = []Source{src}
	e := NewEngine(cfg, dev, &scripted{}, nil)
	errc := make(chan error, 1)
	go func() { errc <- e.Run(context.Background()) }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "read source") {
			t.Errorf("Run = %v, want the source's read error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop when its source failed")
	}
}

func TestProcessAllocsWithSinks(t *testing.T) {
	for _, mode := range []Mode{ModeQUIC, ModeQUICM2HO} {
		cfg := testConfig()
		cfg.DefaultMode = mode
		s := newFakeSink("s")
		cfg.Sinks = map[Mode]Sink{ModeQUIC: s, ModeQUICM2HO: s}
		e := NewEngine(cfg, nil, fixed{m2ho.Verdict{Action: m2ho.Rewrite, Window: 1000}}, nil)
		c := conn{laptop4, server4, 7, 7, true}
		e.Process(t0, c.seg(true, syn, 1, 0, 64240, 0))
		e.Process(t0, c.seg(false, syn|ack, 1000, 2, 65160, 0))
		tmpl := c.seg(true, ack, 2, 1001, 40000, 0)
		down := c.seg(false, ack, 1001, 2, 40000, 1000)
		bu, bd := bytes.Clone(tmpl), bytes.Clone(down)
		now := t0
		n := testing.AllocsPerRun(1000, func() {
			copy(bu, tmpl)
			copy(bd, down)
			now = now.Add(time.Millisecond)
			if e.Route(now, bu) == RouteTUN {
				t.Fatal("uplink not routed to the sink")
			}
			e.Return(now, bd)
		})
		if n != 0 {
			t.Errorf("mode %v: %v allocations per packet pair", mode, n)
		}
		if mode == ModeQUICM2HO && e.Stats().Rewrites == 0 {
			t.Errorf("quic+m2ho mode did not rewrite")
		}
	}
}
