package packet

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/m2ho/m2ho/proxy/packettest"
)

var (
	laptop4 = netip.MustParseAddrPort("192.168.42.10:50000")
	server4 = netip.MustParseAddrPort("203.0.113.5:443")
	laptop6 = netip.MustParseAddrPort("[fd00:42::10]:50000")
	server6 = netip.MustParseAddrPort("[2001:db8::5]:443")
)

func TestDecodeTCPOptions(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		src, dst := laptop4, server4
		if v6 {
			src, dst = laptop6, server6
		}
		seg := packettest.TCP{Src: src, Dst: dst, Seq: 0xfffffff0, Ack: 7, Flags: packettest.ACK | packettest.PSH,
			Window: 501, HasTS: true, TSval: 11, TSecr: 22,
			SACK: [][2]uint32{{100, 200}, {300, 400}, {500, 600}}, Payload: []byte("hello")}
		b := seg.Build()
		var p Parsed
		if !p.Decode(b) {
			t.Fatalf("v6=%v: Decode failed: %v", v6, p.Err)
		}
		want := Parsed{IPVersion: 4, Proto: ProtoTCP, Src: src.Addr(), Dst: dst.Addr(), Length: len(b), L4Off: 20,
			SrcPort: 50000, DstPort: 443, TCPParsed: true, Seq: 0xfffffff0, Ack: 7, Flags: 0x18, Window: 501,
			TCPHdrLen: 20 + 12 + 28, PayloadLen: 5, WScale: -1, HasTS: true, TSval: 11, TSecr: 22, NumSACK: 3,
			SACK: [4][2]uint32{{100, 200}, {300, 400}, {500, 600}}}
		if v6 {
			want.IPVersion, want.L4Off = 6, 40
		}
		if p != want {
			t.Errorf("v6=%v:\n got %+v\nwant %+v", v6, p, want)
		}
		if !TCPChecksumValid(b, &p) {
			t.Errorf("v6=%v: checksum of a gopacket-built packet reported invalid", v6)
		}
	}
}

func TestDecodeSYNOptions(t *testing.T) {
	b := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.SYN, Window: 64240, MSS: 1460,
		SACKPermitted: true, HasTS: true, TSval: 1, HasWScale: true, WScale: 7}.Build()
	var p Parsed
	if !p.Decode(b) || p.MSS != 1460 || p.WScale != 7 || !p.SACKPermitted || !p.HasTS || p.Flags != 0x02 {
		t.Fatalf("SYN parsed as %+v", p)
	}
	// RFC 7323: a shift above 14 is used as 14.
	b = packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.SYN, HasWScale: true, WScale: 20}.Build()
	if !p.Decode(b) || p.WScale != 14 {
		t.Fatalf("WScale 20 parsed as %d", p.WScale)
	}
}

func TestDecodeIPv6ExtensionHeaders(t *testing.T) {
	base := packettest.TCP{Src: laptop6, Dst: server6, Flags: packettest.ACK, Window: 1000, Payload: []byte("x")}
	cases := []struct {
		name      string
		ext       []packettest.ExtHeader
		l4        int
		tcp       bool
		proto     uint8
		frag, frg bool
	}{
		{"hop-by-hop", []packettest.ExtHeader{packettest.HopByHop()}, 48, true, ProtoTCP, false, false},
		{"hbh+routing+dstopts", []packettest.ExtHeader{packettest.HopByHop(), packettest.Routing(), packettest.DstOpts()}, 88, true, ProtoTCP, false, false},
		{"ah", []packettest.ExtHeader{packettest.AH()}, 64, true, ProtoTCP, false, false},
		{"first fragment", []packettest.ExtHeader{packettest.Fragment(0, true)}, 48, true, ProtoTCP, true, true},
		{"non-first fragment", []packettest.ExtHeader{packettest.Fragment(10, false)}, 48, false, ProtoTCP, true, false},
	}
	for _, c := range cases {
		s := base
		s.IPv6ExtHeaders = c.ext
		b := s.Build()
		var p Parsed
		if !p.Decode(b) {
			t.Errorf("%s: Decode failed: %v", c.name, p.Err)
			continue
		}
		if p.L4Off != c.l4 || p.TCPParsed != c.tcp || p.Proto != c.proto || p.Fragment != c.frag || p.FirstFragment != c.frg {
			t.Errorf("%s: got l4 %d tcp %v proto %d frag %v first %v", c.name, p.L4Off, p.TCPParsed, p.Proto, p.Fragment, p.FirstFragment)
		}
		if c.tcp && (p.Window != 1000 || p.PayloadLen != 1 || !TCPChecksumValid(b, &p)) {
			t.Errorf("%s: window %d payload %d checksum valid %v", c.name, p.Window, p.PayloadLen, TCPChecksumValid(b, &p))
		}
	}
	// ESP ends the walk: nothing after it is parsed.
	b := base.Build()
	b[6] = ProtoESP
	var p Parsed
	if !p.Decode(b) || p.Proto != ProtoESP || p.TCPParsed {
		t.Errorf("ESP: %+v", p)
	}
	// A chain longer than the bound is refused.
	s := base
	for i := 0; i < maxExtHeaders+1; i++ {
		s.IPv6ExtHeaders = append(s.IPv6ExtHeaders, packettest.DstOpts())
	}
	if p.Decode(s.Build()) || p.Err != ErrExtHeader {
		t.Errorf("long chain: ok, err = %v", p.Err)
	}
}

func TestDecodeIPv4Fragments(t *testing.T) {
	b := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.ACK, Payload: make([]byte, 100)}.Build()
	var p Parsed
	binary.BigEndian.PutUint16(b[6:], 0x2000) // MF, offset 0
	if !p.Decode(b) || !p.Fragment || !p.FirstFragment || !p.TCPParsed {
		t.Errorf("first fragment: %+v", p)
	}
	binary.BigEndian.PutUint16(b[6:], 0x0003) // offset 24 bytes
	if !p.Decode(b) || !p.Fragment || p.FirstFragment || p.TCPParsed || p.SrcPort != 0 {
		t.Errorf("non-first fragment was parsed past IP: %+v", p)
	}
}

func TestDecodeErrors(t *testing.T) {
	good4 := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.ACK, HasTS: true}.Build()
	good6 := packettest.TCP{Src: laptop6, Dst: server6, Flags: packettest.ACK}.Build()
	mod := func(b []byte, f func([]byte) []byte) []byte { return f(append([]byte(nil), b...)) }
	cases := []struct {
		name string
		b    []byte
		want ParseError
	}{
		{"empty", nil, ErrShort},
		{"version 5", mod(good4, func(b []byte) []byte { b[0] = 0x55; return b }), ErrVersion},
		{"v4 short", good4[:19], ErrShort},
		{"ihl 4", mod(good4, func(b []byte) []byte { b[0] = 0x44; return b }), ErrIPHeaderLen},
		{"ihl 15", mod(good4, func(b []byte) []byte { b[0] = 0x4f; return b[:40] }), ErrIPHeaderLen},
		{"total > buffer", mod(good4, func(b []byte) []byte { return b[:len(b)-1] }), ErrIPTotalLen},
		{"total < ihl", mod(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[2:], 10); return b }), ErrIPTotalLen},
		{"tcp truncated", mod(good4, func(b []byte) []byte { binary.BigEndian.PutUint16(b[2:], 30); return b }), ErrTCPHeaderLen},
		{"tcp doff 4", mod(good4, func(b []byte) []byte { b[32] = 0x40; return b }), ErrTCPHeaderLen},
		{"tcp doff 15", mod(good4, func(b []byte) []byte { b[32] = 0xf0; return b }), ErrTCPHeaderLen},
		{"option len 0", mod(good4, func(b []byte) []byte { b[43] = 0; return b }), ErrTCPOption},
		{"option len past header", mod(good4, func(b []byte) []byte { b[43] = 40; return b }), ErrTCPOption},
		{"v6 short", good6[:39], ErrShort},
		{"v6 payload > buffer", mod(good6, func(b []byte) []byte { return b[:len(b)-1] }), ErrIPTotalLen},
		{"v6 ext past end", mod(good6, func(b []byte) []byte { b[6] = ProtoDstOpts; b[41] = 200; return b }), ErrExtHeader},
	}
	for _, c := range cases {
		var p Parsed
		if p.Decode(c.b) || p.Err != c.want {
			t.Errorf("%s: Err = %v, want %v", c.name, p.Err, c.want)
		}
	}
}

// TestDecodeTrailingBytes: bytes after the IP length (Ethernet padding)
// are not part of the segment.
func TestDecodeTrailingBytes(t *testing.T) {
	b := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.ACK}.Build()
	n := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0)
	var p Parsed
	if !p.Decode(b) || p.Length != n || p.PayloadLen != 0 || !TCPChecksumValid(b, &p) {
		t.Fatalf("trailing padding: %+v", p)
	}
}

func TestDecodeAllocs(t *testing.T) {
	b := packettest.TCP{Src: laptop6, Dst: server6, Flags: packettest.ACK, HasTS: true, SACK: [][2]uint32{{1, 2}},
		IPv6ExtHeaders: []packettest.ExtHeader{packettest.HopByHop()}}.Build()
	var p Parsed
	if n := testing.AllocsPerRun(1000, func() { p.Decode(b) }); n != 0 {
		t.Fatalf("Decode allocates %v times per packet", n)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.SYN, MSS: 1460, HasWScale: true, WScale: 7, SACKPermitted: true, HasTS: true}.Build())
	f.Add(packettest.TCP{Src: laptop6, Dst: server6, Flags: packettest.ACK, SACK: [][2]uint32{{1, 2}},
		IPv6ExtHeaders: []packettest.ExtHeader{packettest.HopByHop(), packettest.Routing(), packettest.Fragment(0, true), packettest.AH()}}.Build())
	f.Add([]byte{0x45})
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 0, 64})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Parsed
		ok := p.Decode(b)
		if ok != (p.Err == ParseOK) {
			t.Fatalf("Decode = %v with Err %v", ok, p.Err)
		}
		if !ok {
			return
		}
		if p.Length > len(b) || p.L4Off > p.Length {
			t.Fatalf("offsets outside the buffer: len %d Length %d L4Off %d", len(b), p.Length, p.L4Off)
		}
		if p.TCPParsed {
			if p.L4Off+p.TCPHdrLen+p.PayloadLen != p.Length || p.TCPHdrLen < 20 {
				t.Fatalf("TCP lengths inconsistent: %+v", p)
			}
			TCPChecksum(b, &p)
			TCPChecksumValid(b, &p)
		}
	})
}

func TestIPDst(t *testing.T) {
	b4 := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.ACK}.Build()
	b6 := packettest.TCP{Src: laptop6, Dst: server6, Flags: packettest.ACK}.Build()
	if d, ok := IPDst(b4); !ok || d != server4.Addr() {
		t.Errorf("v4: %v %v", d, ok)
	}
	if d, ok := IPDst(b6); !ok || d != server6.Addr() {
		t.Errorf("v6: %v %v", d, ok)
	}
	for _, b := range [][]byte{nil, b4[:19], b6[:39], {0x55, 0, 0, 0}} {
		if _, ok := IPDst(b); ok {
			t.Errorf("IPDst(% x) ok", b)
		}
	}
}
