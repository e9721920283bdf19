package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/m2ho/m2ho/m2ho"
	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/tun"
)

const (
	syn = packettest.SYN
	ack = packettest.ACK
	fin = packettest.FIN
	rst = packettest.RST
	psh = packettest.PSH
)

// scripted is a fake controller: it returns next (once) or always, and
// records what it saw.
type scripted struct {
	always   m2ho.Verdict
	next     []m2ho.Verdict
	seen     []m2ho.Packet
	attached int
	detached int
}

func (c *scripted) Attach(time.Time, *m2ho.Flow) { c.attached++ }
func (c *scripted) Detach(*m2ho.Flow)            { c.detached++ }
func (c *scripted) OnPacket(_ time.Time, _ *m2ho.Flow, p *m2ho.Packet) m2ho.Verdict {
	c.seen = append(c.seen, *p)
	if len(c.next) > 0 {
		v := c.next[0]
		c.next = c.next[1:]
		return v
	}
	return c.always
}

// fixed returns one verdict and records nothing, so it allocates nothing.
type fixed struct{ v m2ho.Verdict }

func (fixed) Attach(time.Time, *m2ho.Flow)                                {}
func (fixed) Detach(*m2ho.Flow)                                           {}
func (c fixed) OnPacket(time.Time, *m2ho.Flow, *m2ho.Packet) m2ho.Verdict { return c.v }

var t0 = time.Date(2024, 9, 30, 12, 0, 0, 0, time.UTC)

func testConfig() EngineConfig {
	return EngineConfig{
		TetherPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.42.0/24"), netip.MustParsePrefix("fd00:42::/64")},
		DefaultMode:    ModeM2HO,
		MaxFlows:       16,
	}
}

// conn builds the segments of one connection between laptop and server.
type conn struct {
	laptop, server netip.AddrPort
	// laptopWS, serverWS: window scale in each SYN (-1: none); ts: timestamps on.
	laptopWS, serverWS int
	ts                 bool
}

func (c conn) seg(up bool, flags uint8, seq, ackn uint32, win uint16, payload int) []byte {
	s := packettest.TCP{Src: c.laptop, Dst: c.server, Seq: seq, Ack: ackn, Flags: flags, Window: win,
		Payload: bytes.Repeat([]byte{0xab}, payload), HasTS: c.ts, TSval: seq ^ 0x5a5a, TSecr: ackn}
	ws := c.laptopWS
	if !up {
		s.Src, s.Dst = c.server, c.laptop
		ws = c.serverWS
	}
	if flags&syn != 0 {
		s.MSS = 1460
		if !up {
			s.MSS = 1400
		}
		s.SACKPermitted = true
		if ws >= 0 {
			s.HasWScale, s.WScale = true, ws
		}
	}
	return s.Build()
}

// handshake runs SYN, SYN-ACK through e.
func (c conn) handshake(t *testing.T, e *Engine, isn, irs uint32) {
	t.Helper()
	for _, b := range [][]byte{c.seg(true, syn, isn, 0, 64240, 0), c.seg(false, syn|ack, irs, isn+1, 65160, 0)} {
		if !e.Process(t0, b) {
			t.Fatal("handshake packet dropped")
		}
	}
}

func windowOf(b []byte) uint16 {
	var p packet.Parsed
	p.Decode(b)
	return p.Window
}

// checkChecksum asserts that b's TCP checksum equals both a full
// recomputation and gopacket's.
func checkChecksum(t *testing.T, b []byte) {
	t.Helper()
	var p packet.Parsed
	if !p.Decode(b) {
		t.Fatalf("rewritten packet no longer parses: %v", p.Err)
	}
	got := binary.BigEndian.Uint16(b[p.L4Off+packet.TCPChecksumOff:])
	oracle, err := packettest.Oracle(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != oracle || got != packet.TCPChecksum(b, &p) || !packet.TCPChecksumValid(b, &p) {
		t.Fatalf("checksum %#04x, gopacket %#04x, full recomputation %#04x", got, oracle, packet.TCPChecksum(b, &p))
	}
}

func TestVerdicts(t *testing.T) {
	type variant struct {
		name     string
		c        conn
		wantWS   int8 // shift the controller must see on uplink packets
		isn, irs uint32
	}
	var variants []variant
	for _, v6 := range []bool{false, true} {
		l, s := laptop4, server4
		fam := "v4"
		if v6 {
			l, s, fam = laptop6, server6, "v6"
		}
		variants = append(variants,
			variant{fam + " wscale+ts", conn{l, s, 7, 9, true}, 7, 1000, 2000},
			variant{fam + " wscale only laptop", conn{l, s, 7, -1, false}, 0, 1000, 2000},
			variant{fam + " no wscale", conn{l, s, -1, -1, true}, 0, 1000, 2000},
			variant{fam + " seq wrap", conn{l, s, 2, 2, true}, 2, 0xfffffff0, 0xffffff00})
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ctrl := &scripted{}
			e := NewEngine(testConfig(), nil, ctrl, nil)
			v.c.handshake(t, e, v.isn, v.irs)
			if ctrl.attached != 1 {
				t.Fatalf("Attach called %d times", ctrl.attached)
			}
			// Downlink data crossing the sequence wrap, then uplink ACKs.
			data := v.c.seg(false, ack|psh, v.irs+1, v.isn+1, 500, 1000)
			if !e.Process(t0, data) {
				t.Fatal("data dropped")
			}
			a := v.irs + 1 + 1000
			pure := v.c.seg(true, ack, v.isn+1, a, 40000, 0)

			// Pass: unchanged.
			ctrl.next = []m2ho.Verdict{{Action: m2ho.Pass}}
			b := bytes.Clone(pure)
			if !e.Process(t0, b) || !bytes.Equal(b, pure) {
				t.Fatal("pass verdict changed the packet")
			}
			got := ctrl.seen[len(ctrl.seen)-1]
			if got.Dir != m2ho.Uplink || got.WScale != v.wantWS || got.Ack != a || got.MSS != 1400 ||
				got.HasTS != v.c.ts || got.Window != 40000 || !got.IsPureACK() {
				t.Fatalf("controller saw %+v, want uplink WScale %d Ack %#x MSS 1400", got, v.wantWS, a)
			}
			if dl := ctrl.seen[len(ctrl.seen)-2]; dl.Dir != m2ho.Downlink || dl.Seq != v.irs+1 || dl.PayloadLen != 1000 {
				t.Fatalf("downlink packet seen as %+v", dl)
			}

			// Rewrite lower: window field set, checksum right, length same.
			ctrl.next = []m2ho.Verdict{{Action: m2ho.Rewrite, Window: 1234, Reason: m2ho.ReasonPreparation}}
			b = bytes.Clone(pure)
			if !e.Process(t0, b) || len(b) != len(pure) || windowOf(b) != 1234 {
				t.Fatalf("rewrite: window %d", windowOf(b))
			}
			checkChecksum(t, b)
			var p packet.Parsed
			p.Decode(b)
			if !bytes.Equal(b[:p.L4Off+14], pure[:p.L4Off+14]) || !bytes.Equal(b[p.L4Off+18:], pure[p.L4Off+18:]) {
				t.Fatal("rewrite touched bytes other than window and checksum")
			}

			// Rewrite of a data-carrying uplink segment is allowed too.
			upData := v.c.seg(true, ack|psh, v.isn+1, a, 30000, 100)
			ctrl.next = []m2ho.Verdict{{Action: m2ho.Rewrite, Window: 100, Reason: m2ho.ReasonStableRate}}
			b = bytes.Clone(upData)
			if !e.Process(t0, b) || windowOf(b) != 100 {
				t.Fatal("rewrite of uplink data segment not applied")
			}
			checkChecksum(t, b)

			// Rewrite that would raise the window, or set 0: refused.
			for _, w := range []uint16{40001, 0} {
				ctrl.next = []m2ho.Verdict{{Action: m2ho.Rewrite, Window: w}}
				b = bytes.Clone(pure)
				if !e.Process(t0, b) || !bytes.Equal(b, pure) {
					t.Fatalf("rewrite to %d applied", w)
				}
			}
			// Rewrite of a downlink packet: refused.
			ctrl.next = []m2ho.Verdict{{Action: m2ho.Rewrite, Window: 1}}
			b = bytes.Clone(data)
			if !e.Process(t0, b) || !bytes.Equal(b, data) {
				t.Fatal("downlink rewrite applied")
			}

			// Drop a pure ACK: dropped.
			ctrl.next = []m2ho.Verdict{{Action: m2ho.Drop, Reason: m2ho.ReasonSmoothing}}
			if e.Process(t0, bytes.Clone(pure)) {
				t.Fatal("pure ACK not dropped")
			}
			// Drop of data, FIN, RST, SYN, downlink: refused.
			unsafe := [][]byte{
				upData,
				v.c.seg(true, ack|fin, v.isn+1, a, 40000, 0),
				v.c.seg(true, ack|rst, v.isn+1, a, 40000, 0),
				v.c.seg(false, ack, v.irs+1, v.isn+1, 500, 0),
			}
			for i, u := range unsafe {
				ctrl.next = []m2ho.Verdict{{Action: m2ho.Drop}}
				b = bytes.Clone(u)
				if !e.Process(t0, b) || !bytes.Equal(b, u) {
					t.Fatalf("unsafe drop %d applied", i)
				}
			}
			st := e.Stats()
			want := Stats{Rewrites: 2, Drops: 1, UnsafeVerdicts: 3 + 4}
			want.RewritesBy[m2ho.ReasonPreparation] = 1
			want.RewritesBy[m2ho.ReasonStableRate] = 1
			want.DropsBy[m2ho.ReasonSmoothing] = 1
			if st.Rewrites != want.Rewrites || st.Drops != want.Drops || st.UnsafeVerdicts != want.UnsafeVerdicts ||
				st.RewritesBy != want.RewritesBy || st.DropsBy != want.DropsBy || st.Flows != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestNoHandshakeNeverRewritten: a flow picked up mid-stream (or whose
// SYN-ACK was not seen) has WScale -1 and its windows are never touched.
func TestNoHandshakeNeverRewritten(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		l, s := laptop4, server4
		if v6 {
			l, s = laptop6, server6
		}
		c := conn{l, s, 7, 7, true}
		ctrl := &scripted{always: m2ho.Verdict{Action: m2ho.Rewrite, Window: 10}}
		e := NewEngine(testConfig(), nil, ctrl, nil)
		pkts := [][]byte{
			c.seg(true, ack, 5, 6, 1000, 0),   // mid-stream
			c.seg(true, syn, 100, 0, 1000, 0), // SYN only: no SYN-ACK yet
			c.seg(true, ack, 101, 1, 1000, 0), // still unknown
		}
		for i, p := range pkts {
			b := bytes.Clone(p)
			e.Process(t0, b)
			if !bytes.Equal(b, p) {
				t.Fatalf("v6=%v packet %d rewritten without a seen handshake", v6, i)
			}
			if ws := ctrl.seen[len(ctrl.seen)-1].WScale; ws != -1 {
				t.Fatalf("v6=%v packet %d: controller saw WScale %d, want -1", v6, i, ws)
			}
		}
		if st := e.Stats(); st.UnsafeVerdicts != 3 || st.Rewrites != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}

func TestFailOpenCounters(t *testing.T) {
	ctrl := &scripted{always: m2ho.Verdict{Action: m2ho.Drop}}
	e := NewEngine(testConfig(), nil, ctrl, nil)
	c := conn{laptop4, server4, -1, -1, false}
	pure := c.seg(true, ack, 1, 1, 100, 0)

	bad := bytes.Clone(pure)
	bad[0] = 0x44 // IHL 4
	udp := bytes.Clone(pure)
	udp[9] = packet.ProtoUDP
	other := packettest.TCP{Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("10.0.0.2:2"), Flags: ack}.Build()
	local := packettest.TCP{Src: laptop4, Dst: netip.MustParseAddrPort("192.168.42.11:22"), Flags: ack}.Build()
	frag := bytes.Clone(pure)
	binary.BigEndian.PutUint16(frag[6:], 0x2000)
	for _, b := range [][]byte{bad, udp, other, local, frag} {
		if !e.Process(t0, b) {
			t.Fatal("fail-open packet dropped")
		}
	}
	st := e.Stats()
	if st.Unparseable != 1 || st.UnparseableBy[packet.ErrIPHeaderLen] != 1 || st.NonTCP != 1 || st.PassThrough != 2 ||
		st.Fragments != 1 || st.Packets != 5 || st.Uplink.Packets != 2 || len(ctrl.seen) != 0 || st.Flows != 0 {
		t.Fatalf("stats %+v, controller saw %d", st, len(ctrl.seen))
	}
}

func TestModesFromRules(t *testing.T) {
	rules, err := ParseRules([]string{"tcp dst-port 443 mode=m2ho", "any mode=pass"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Rules = rules
	ctrl := &scripted{always: m2ho.Verdict{Action: m2ho.Drop}}
	e := NewEngine(cfg, nil, ctrl, nil)
	https := conn{laptop4, server4, 7, 7, false}
	ssh := conn{laptop4, netip.MustParseAddrPort("203.0.113.5:22"), 7, 7, false}
	// The first packet is downlink: the rule still sees the server's port as dst.
	if !e.Process(t0, https.seg(false, ack, 1, 1, 100, 0)) {
		t.Fatal("downlink dropped")
	}
	if e.Process(t0, https.seg(true, ack, 1, 1, 100, 0)) {
		t.Fatal("m2ho flow: pure ACK not dropped")
	}
	if !e.Process(t0, ssh.seg(true, ack, 1, 1, 100, 0)) {
		t.Fatal("pass flow reached the controller")
	}
	if f, ok := e.Flow(packet.ProtoTCP, laptop4, server4); !ok || f.Mode != ModeM2HO {
		t.Fatalf("https flow %+v %v", f, ok)
	}
	if f, ok := e.Flow(packet.ProtoTCP, laptop4, ssh.server); !ok || f.Mode != ModePass {
		t.Fatalf("ssh flow %+v %v", f, ok)
	}
	if ctrl.attached != 1 || e.Stats().PassMode != 1 {
		t.Fatalf("attached %d, stats %+v", ctrl.attached, e.Stats())
	}
}

func TestEvictionAndExpiry(t *testing.T) {
	cfg := testConfig()
	cfg.MaxFlows = 3
	cfg.IdleTimeout = 100 * time.Second
	cfg.ClosedTimeout = 10 * time.Second
	ctrl := &scripted{}
	e := NewEngine(cfg, nil, ctrl, nil)
	srv := func(i int) netip.AddrPort { return netip.AddrPortFrom(server4.Addr(), uint16(1000+i)) }
	seg := func(i int, flags uint8) []byte {
		return packettest.TCP{Src: laptop4, Dst: srv(i), Flags: flags}.Build()
	}
	for i := 0; i < 3; i++ {
		e.Process(t0.Add(time.Duration(i)*time.Second), seg(i, ack))
	}
	e.Process(t0.Add(3*time.Second), seg(0, ack)) // flow 0 is now the most recent
	e.Process(t0.Add(4*time.Second), seg(3, ack)) // evicts flow 1, the least recently seen
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(1)); ok {
		t.Fatal("flow 1 not evicted")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(i)); !ok {
			t.Fatalf("flow %d evicted", i)
		}
	}
	if st := e.Stats(); st.Evictions != 1 || st.Flows != 3 || ctrl.detached != 1 || st.FlowsCreated != 4 {
		t.Fatalf("after eviction: %+v, detached %d", st, ctrl.detached)
	}

	// Flow 3 closes: it expires after ClosedTimeout; the others after IdleTimeout.
	e.Process(t0.Add(5*time.Second), seg(3, ack|fin))
	e.Expire(t0.Add(15 * time.Second))
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(3)); !ok {
		t.Fatal("closed flow expired too early")
	}
	e.Expire(t0.Add(15*time.Second + time.Millisecond))
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(3)); ok {
		t.Fatal("closed flow not expired after ClosedTimeout")
	}
	e.Expire(t0.Add(102 * time.Second)) // flow 2 last seen at 2 s
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(2)); !ok {
		t.Fatal("flow 2 expired too early")
	}
	e.Expire(t0.Add(102*time.Second + time.Millisecond))
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(2)); ok {
		t.Fatal("flow 2 not expired")
	}
	if _, ok := e.Flow(packet.ProtoTCP, laptop4, srv(0)); !ok {
		t.Fatal("flow 0 (seen at 3 s) expired early")
	}
	// Expiry also happens on the packet path.
	e.Process(t0.Add(200*time.Second), seg(9, ack))
	if st := e.Stats(); st.Expirations != 3 || st.Flows != 1 || ctrl.detached != 4 {
		t.Fatalf("after expiry: %+v, detached %d", st, ctrl.detached)
	}
}

func TestPortReuseAfterClose(t *testing.T) {
	ctrl := &scripted{}
	e := NewEngine(testConfig(), nil, ctrl, nil)
	c := conn{laptop4, server4, 7, 7, false}
	c.handshake(t, e, 1, 1)
	e.Process(t0, c.seg(true, ack|rst, 2, 2, 0, 0))
	e.Process(t0, c.seg(true, syn, 500, 0, 100, 0))
	f, ok := e.Flow(packet.ProtoTCP, laptop4, server4)
	if !ok || f.Closing || f.WScale(m2ho.Uplink) != -1 || ctrl.attached != 2 || ctrl.detached != 1 {
		t.Fatalf("reused 4-tuple: %+v attached %d detached %d", f, ctrl.attached, ctrl.detached)
	}
}

func TestValidate(t *testing.T) {
	rules, err := ParseRules([]string{"tcp port 443 mode=quic"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Rules = rules
	e := NewEngine(cfg, tun.NewChannelTUN(1500, 1), &scripted{}, nil)
	if err := e.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "mode quic is not available yet") {
		t.Fatalf("Run = %v", err)
	}
	cfg = testConfig()
	cfg.DefaultMode = ModeQUICM2HO
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "mode quic+m2ho is not available yet") {
		t.Fatalf("Validate = %v", err)
	}
	cfg = testConfig()
	cfg.TetherPrefixes = nil
	if err := cfg.Validate(); err == nil {
		t.Fatal("no prefixes accepted")
	}
}

// engineDevice is a device for the engine to run on, with a harness that
// feeds it packets and collects what the engine wrote.
type engineDevice struct {
	name string
	// open returns the engine's device, a function that sends packets
	// towards it, and one that returns the next n packets of the
	// connections between laptop4/laptop6 and server4/server6 that the
	// engine wrote, normalized by norm (the kernel lowers the TTL).
	open func(t *testing.T) (dev tun.Device, send func([][]byte), recv func(n int) [][]byte)
	// v6: the harness carries IPv6.
	v6 bool
}

// engineDevices are the devices every engine test that runs a device runs
// on: the in-memory one here, water and the offload device on Linux
// (engine_linux_test.go).
var engineDevices = []engineDevice{{name: "memory", v6: true, open: func(t *testing.T) (tun.Device, func([][]byte), func(int) [][]byte) {
	dev := tun.NewChannelTUN(1500, 4)
	send := func(ps [][]byte) {
		for _, p := range ps {
			dev.Inbound <- bytes.Clone(p)
		}
	}
	recv := func(n int) [][]byte {
		var out [][]byte
		for len(out) < n {
			select {
			case p := <-dev.Outbound:
				out = append(out, p)
			case <-time.After(10 * time.Second):
				t.Fatalf("only %d of %d packets came back", len(out), n)
			}
		}
		return out
	}
	return dev, send, recv
}}}

// runEngine starts e.Run and returns a function that stops it and checks
// that it returned nil.
func runEngine(t *testing.T, e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not stop")
		}
	}
}

// TestEngineRunDevices runs the whole loop over every device: every packet
// comes back except the dropped pure ACK, rewritten ones with the new
// window and an exact checksum.
func TestEngineRunDevices(t *testing.T) {
	for _, d := range engineDevices {
		t.Run(d.name, func(t *testing.T) {
			dev, send, recv := d.open(t)
			ctrl := &scripted{}
			cfg := testConfig()
			cfg.Offset = 16
			e := NewEngine(cfg, dev, ctrl, nil)
			stop := runEngine(t, e)

			c := conn{laptop4, server4, 7, 7, true}
			if d.v6 {
				c = conn{laptop6, server6, 7, 7, true}
			}
			in := [][]byte{
				c.seg(true, syn, 1, 0, 64240, 0),
				c.seg(false, syn|ack, 1000, 2, 65160, 0),
				c.seg(true, ack, 2, 1001, 500, 0),        // rewritten to 300
				c.seg(true, ack, 2, 1001, 500, 0),        // dropped
				c.seg(false, ack|psh, 1001, 2, 500, 100), // passed
			}
			e.Do(func() {
				ctrl.next = []m2ho.Verdict{{}, {}, {Action: m2ho.Rewrite, Window: 300}, {Action: m2ho.Drop}, {}}
			})
			// One packet at a time: a kernel device must not reorder the
			// two directions (they are different 5-tuples).
			var out [][]byte
			for i, p := range in {
				send([][]byte{p})
				if i != 3 { // the dropped ACK: in[4] would come after it
					out = append(out, recv(1)...)
				}
			}
			want := [][]byte{in[0], in[1], nil, in[4]}
			for i, w := range want {
				if w == nil {
					if windowOf(out[i]) != 300 || len(out[i]) != len(in[2]) {
						t.Fatalf("packet %d: window %d", i, windowOf(out[i]))
					}
					checkChecksum(t, out[i])
					continue
				}
				if !bytes.Equal(out[i], w) {
					t.Fatalf("packet %d changed:\n got % x\nwant % x", i, out[i], w)
				}
			}
			stop()
			// A kernel device also carries the kernel's own IPv6 traffic
			// (router solicitations, MLD): pass-through.
			if st := e.Stats(); st.Uplink.Packets+st.Downlink.Packets != 5 || st.Written != 4+st.PassThrough || st.Drops != 1 || st.Rewrites != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestEngineRunDevicesBurst sends an upload burst of 16 in-order data
// segments in one batch (one GSO frame on the offload device, split for
// the engine) and lowers the window of segments 5 and 9..10 only: each
// comes back with its own window, exact checksums and its bytes, however
// the device merged them on the way.
func TestEngineRunDevicesBurst(t *testing.T) {
	for _, d := range engineDevices {
		t.Run(d.name, func(t *testing.T) {
			dev, send, recv := d.open(t)
			ctrl := &scripted{}
			e := NewEngine(testConfig(), dev, ctrl, nil)
			stop := runEngine(t, e)
			// No timestamps: the builder's TSval changes per segment, which
			// a real burst's does not, and unequal options are never merged.
			c := conn{laptop4, server4, 7, 7, false}
			if d.v6 {
				c = conn{laptop6, server6, 7, 7, false}
			}
			hs := [][]byte{c.seg(true, syn, 1, 0, 64240, 0), c.seg(false, syn|ack, 1000, 2, 65160, 0)}
			verdicts := []m2ho.Verdict{{}, {}}
			var burst [][]byte
			const mss = 1400
			for i := 0; i < 16; i++ {
				p := c.seg(true, ack, 2+uint32(i*mss), 1001, 2000, mss)
				if !d.v6 {
					// A sender's consecutive IPv4 IDs, as Linux TCP sends
					// them: only then may the device merge the segments.
					binary.BigEndian.PutUint16(p[4:], uint16(7000+i))
					fixIPv4Checksum(p)
				}
				burst = append(burst, p)
				v := m2ho.Verdict{}
				if i == 5 || i == 9 || i == 10 {
					v = m2ho.Verdict{Action: m2ho.Rewrite, Window: 1000 - uint16(i)}
				}
				verdicts = append(verdicts, v)
			}
			e.Do(func() { ctrl.next = verdicts })
			for _, p := range hs {
				send([][]byte{p})
				recv(1)
			}
			send(burst)
			out := recv(len(burst))
			for i, p := range out {
				var q packet.Parsed
				if !q.Decode(p) || !packet.TCPChecksumValid(p, &q) {
					t.Fatalf("segment %d: bad checksum or unparseable", i)
				}
				j := int(q.Seq-2) / mss
				if q.Seq != 2+uint32(j*mss) || j >= len(burst) {
					t.Fatalf("segment %d: seq %d is no segment of the burst", i, q.Seq)
				}
				want := bytes.Clone(burst[j])
				if v := verdicts[2+j]; v.Action == m2ho.Rewrite {
					var w packet.Parsed
					w.Decode(want)
					packet.SetTCPWindow(want, &w, v.Window)
				}
				if !bytes.Equal(p, want) {
					t.Fatalf("segment %d (seq %d): window %d, want %d; bytes differ", i, j, q.Window, windowOf(want))
				}
			}
			if od, ok := dev.(interface{ Stats() tun.OffloadStats }); ok {
				// The burst crossed the kernel as merged frames.
				if s := od.Stats(); s.Segments <= s.Frames || s.Runs <= s.Writes {
					t.Errorf("offload device %+v: no frame was split on Read, or no batch cut on Write", s)
				}
			}
			stop()
			if st := e.Stats(); st.Rewrites != 3 || st.Written != 18+st.PassThrough {
				t.Errorf("stats: %d rewrites, %d written (%d pass-through); want 3, 18", st.Rewrites, st.Written, st.PassThrough)
			}
		})
	}
}

func fixIPv4Checksum(p []byte) {
	p[10], p[11] = 0, 0
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(p[i])<<8 | uint32(p[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	p[10], p[11] = byte(^s>>8), byte(^s)
}

func steadyEngine(tb testing.TB, mode Mode, v6 bool, v m2ho.Verdict) (*Engine, []byte) {
	cfg := testConfig()
	cfg.DefaultMode = mode
	e := NewEngine(cfg, nil, fixed{v}, nil)
	l, s := laptop4, server4
	if v6 {
		l, s = laptop6, server6
	}
	c := conn{l, s, 7, 7, true}
	e.Process(t0, c.seg(true, syn, 1, 0, 64240, 0))
	e.Process(t0, c.seg(false, syn|ack, 1000, 2, 65160, 0))
	return e, c.seg(true, ack, 2, 1001, 40000, 0)
}

func TestProcessAllocs(t *testing.T) {
	for _, mode := range []Mode{ModePass, ModeM2HO} {
		for _, v6 := range []bool{false, true} {
			e, tmpl := steadyEngine(t, mode, v6, m2ho.Verdict{Action: m2ho.Rewrite, Window: 1000})
			b := bytes.Clone(tmpl)
			now := t0
			n := testing.AllocsPerRun(1000, func() {
				copy(b, tmpl)
				now = now.Add(time.Millisecond)
				e.Process(now, b)
			})
			if n != 0 {
				t.Errorf("mode %v v6=%v: %v allocations per packet", mode, v6, n)
			}
			if mode == ModeM2HO && e.Stats().Rewrites == 0 {
				t.Errorf("m2ho mode did not rewrite")
			}
		}
	}
}

func BenchmarkProcess(b *testing.B) {
	for _, mode := range []Mode{ModePass, ModeM2HO} {
		for _, v6 := range []bool{false, true} {
			name := mode.String() + "/v4"
			if v6 {
				name = mode.String() + "/v6"
			}
			b.Run(name, func(b *testing.B) {
				e, tmpl := steadyEngine(b, mode, v6, m2ho.Verdict{Action: m2ho.Rewrite, Window: 1000})
				buf := bytes.Clone(tmpl)
				now := t0
				b.ReportAllocs()
				b.SetBytes(int64(len(tmpl)))
				for b.Loop() {
					copy(buf, tmpl)
					now = now.Add(time.Microsecond)
					e.Process(now, buf)
				}
			})
		}
	}
}

// FuzzRewrite feeds arbitrary packets through the engine with a
// controller that rewrites to an arbitrary window or drops. Oracle: no
// panic; length unchanged; the window never raised; a packet with a valid
// checksum still has one; only pure uplink ACKs dropped.
func FuzzRewrite(f *testing.F) {
	c := conn{laptop4, server4, 7, 7, true}
	c6 := conn{laptop6, server6, 7, 7, true}
	f.Add(c.seg(true, ack, 2, 1001, 40000, 0), uint16(1000), uint8(1))
	f.Add(c.seg(true, ack|psh, 2, 1001, 40000, 10), uint16(50000), uint8(2))
	f.Add(c6.seg(true, ack, 2, 1001, 40000, 0), uint16(1), uint8(2))
	f.Add(c6.seg(true, ack|fin, 2, 1001, 40000, 0), uint16(0), uint8(1))
	f.Fuzz(func(t *testing.T, pkt []byte, w uint16, action uint8) {
		e := NewEngine(testConfig(), nil, fixed{m2ho.Verdict{Action: m2ho.Action(action % 4), Window: w}}, nil)
		// A handshake for the seeds' flows so that rewrites are possible.
		for _, cc := range []conn{c, c6} {
			e.Process(t0, cc.seg(true, syn, 1, 0, 64240, 0))
			e.Process(t0, cc.seg(false, syn|ack, 1000, 2, 65160, 0))
		}
		var before packet.Parsed
		okBefore := before.Decode(pkt)
		validBefore := okBefore && before.TCPParsed && !before.Fragment && packet.TCPChecksumValid(pkt, &before)
		wBefore := before.Window
		orig := bytes.Clone(pkt)
		keep := e.Process(t0, pkt)
		if len(pkt) != len(orig) {
			t.Fatal("length changed")
		}
		if !okBefore || !before.TCPParsed || before.Fragment {
			if !bytes.Equal(pkt, orig) || !keep {
				t.Fatal("unparsed packet modified or dropped")
			}
			return
		}
		var after packet.Parsed
		if !after.Decode(pkt) {
			t.Fatalf("packet no longer parses: %v", after.Err)
		}
		if after.Window > wBefore {
			t.Fatalf("window raised %d -> %d", wBefore, after.Window)
		}
		if validBefore && !packet.TCPChecksumValid(pkt, &after) {
			t.Fatal("checksum broken by rewrite")
		}
		if !keep {
			mp := m2ho.Packet{Flags: before.Flags, PayloadLen: before.PayloadLen}
			if !mp.IsPureACK() || !e.inTether(before.Src) {
				t.Fatalf("dropped a packet that is not a pure uplink ACK: flags %#x payload %d", before.Flags, before.PayloadLen)
			}
		}
	})
}

// TestSYNNeverRewritten: in a connection the laptop accepts, its SYN-ACK
// completes the handshake but carries an unscaled window: never rewritten.
func TestSYNNeverRewritten(t *testing.T) {
	ctrl := &scripted{always: m2ho.Verdict{Action: m2ho.Rewrite, Window: 10}}
	e := NewEngine(testConfig(), nil, ctrl, nil)
	c := conn{laptop4, server4, 7, 7, false}
	e.Process(t0, c.seg(false, syn, 1, 0, 64240, 0))
	synack := c.seg(true, syn|ack, 100, 2, 65160, 0)
	b := bytes.Clone(synack)
	e.Process(t0, b)
	if !bytes.Equal(b, synack) || ctrl.seen[1].WScale != 7 {
		t.Fatalf("SYN-ACK rewritten (controller saw WScale %d)", ctrl.seen[1].WScale)
	}
	ack1 := c.seg(true, ack, 101, 2, 65160, 0)
	b = bytes.Clone(ack1)
	e.Process(t0, b)
	if windowOf(b) != 10 {
		t.Fatal("first uplink ACK after the handshake not rewritten")
	}
	checkChecksum(t, b)
}
