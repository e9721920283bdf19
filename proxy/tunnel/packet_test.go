package tunnel

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/proxy/packettest"
)

func decode(t *testing.T, pkt []byte) *packet.Parsed {
	t.Helper()
	var p packet.Parsed
	if !p.Decode(pkt) {
		t.Fatalf("decode: %v", p.Err)
	}
	return &p
}

// checkTCP verifies pkt's TCP checksum against gopacket's recomputation.
func checkTCP(t *testing.T, pkt []byte) {
	t.Helper()
	want, err := packettest.Oracle(pkt)
	if err != nil {
		t.Fatal(err)
	}
	p := decode(t, pkt)
	if got := binary.BigEndian.Uint16(pkt[p.L4Off+16:]); got != want {
		t.Fatalf("TCP checksum %#04x, gopacket computes %#04x", got, want)
	}
}

var (
	a4 = netip.MustParseAddrPort("10.77.0.2:40000")
	b4 = netip.MustParseAddrPort("198.51.100.7:5201")
	a6 = netip.MustParseAddrPort("[fd77::2]:40000")
	b6 = netip.MustParseAddrPort("[2001:db8::7]:5201")
)

func TestClampMSS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seg      packettest.TCP
		mtu      int
		wantMSS  uint16
		modified bool
	}{
		{"v4 SYN 1460", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN, MSS: 1460, SACKPermitted: true, HasTS: true, TSval: 7, HasWScale: true, WScale: 7}, 1280, 1240, true},
		{"v6 SYN 1440", packettest.TCP{Src: a6, Dst: b6, Flags: packettest.SYN, MSS: 1440, HasWScale: true, WScale: 7}, 1280, 1220, true},
		{"v4 SYN-ACK 8960", packettest.TCP{Src: b4, Dst: a4, Flags: packettest.SYN | packettest.ACK, MSS: 8960}, 1400, 1360, true},
		{"v4 SYN already small", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN, MSS: 1200}, 1280, 1200, false},
		{"v4 SYN at exactly the limit", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN, MSS: 1240}, 1280, 1240, false},
		{"v4 ACK with MSS option ignored", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.ACK, MSS: 1460}, 1280, 1460, false},
		{"v4 SYN without MSS", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN}, 1280, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkt := tc.seg.Build()
			orig := append([]byte(nil), pkt...)
			p := decode(t, pkt)
			if got := ClampMSS(pkt, p, tc.mtu); got != tc.modified {
				t.Fatalf("ClampMSS = %v, want %v", got, tc.modified)
			}
			if !tc.modified && !bytes.Equal(pkt, orig) {
				t.Fatal("packet changed although no clamp was due")
			}
			checkTCP(t, pkt)
			if got := decode(t, pkt).MSS; got != tc.wantMSS {
				t.Fatalf("MSS after = %d, want %d", got, tc.wantMSS)
			}
			// Only the MSS value and the checksum may differ.
			diff := 0
			for i := range pkt {
				if pkt[i] != orig[i] {
					diff++
				}
			}
			if diff > 4 {
				t.Fatalf("%d bytes changed, want at most 4 (MSS value and checksum)", diff)
			}
		})
	}
}

// TestClampMSSOddOffset puts the MSS option after a single NOP, so its
// value straddles two 16-bit words of the checksummed data.
func TestClampMSSOddOffset(t *testing.T) {
	pkt := packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN}.Build()
	// Rebuild with options NOP, MSS(1460), NOP, NOP, NOP: 8 bytes, value at TCP offset 23.
	opts := []byte{1, 2, 4, 0x05, 0xb4, 1, 1, 1}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, SYN: true, Window: 65535,
		Options: []layers.TCPOption{
			{OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: opts[3:5]},
			{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
		}}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: a4.Addr().AsSlice(), DstIP: b4.Addr().AsSlice()}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp); err != nil {
		t.Fatal(err)
	}
	pkt = buf.Bytes()
	if pkt[20+21] != 2 {
		t.Fatalf("test packet: MSS option not at TCP offset 21: % x", pkt[40:48])
	}
	p := decode(t, pkt)
	if !ClampMSS(pkt, p, 1280) {
		t.Fatal("not clamped")
	}
	checkTCP(t, pkt)
	if got := decode(t, pkt).MSS; got != 1240 {
		t.Fatalf("MSS %d, want 1240", got)
	}
}

func TestPacketTooBig(t *testing.T) {
	payload := bytes.Repeat([]byte{0xab}, 1400)
	for _, tc := range []struct {
		name  string
		pkt   []byte
		quote int
	}{
		{"v4", packettest.TCP{Src: a4, Dst: b4, Flags: packettest.ACK, Payload: payload}.Build(), ptbQuote4},
		{"v6", packettest.TCP{Src: a6, Dst: b6, Flags: packettest.ACK, Payload: payload}.Build(), ptbQuote6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, PTBMaxLen)
			n := PacketTooBig(dst, tc.pkt, decode(t, tc.pkt), 1280)
			if n == 0 {
				t.Fatal("no PTB")
			}
			out := dst[:n]
			var first gopacket.LayerType = layers.LayerTypeIPv4
			if tc.name == "v6" {
				first = layers.LayerTypeIPv6
			}
			g := gopacket.NewPacket(out, first, gopacket.Default)
			if el := g.ErrorLayer(); el != nil {
				t.Fatalf("gopacket: %v", el.Error())
			}
			var quoted []byte
			if tc.name == "v4" {
				ip := g.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				ic := g.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
				if ic.TypeCode != layers.CreateICMPv4TypeCode(3, 4) {
					t.Fatalf("type/code %v", ic.TypeCode)
				}
				if mtu := binary.BigEndian.Uint16(out[20+6:]); mtu != 1280 {
					t.Fatalf("next-hop MTU %d", mtu)
				}
				if !ip.SrcIP.Equal(b4.Addr().AsSlice()) || !ip.DstIP.Equal(a4.Addr().AsSlice()) {
					t.Fatalf("addresses %v -> %v", ip.SrcIP, ip.DstIP)
				}
				// Verify both checksums by recomputation.
				cp := append([]byte(nil), out...)
				cp[10], cp[11], cp[22], cp[23] = 0, 0, 0, 0
				if got, want := binary.BigEndian.Uint16(out[10:]), packet.Checksum(0, cp[:20]); got != want {
					t.Fatalf("IP checksum %#x, want %#x", got, want)
				}
				if got, want := binary.BigEndian.Uint16(out[22:]), packet.Checksum(0, cp[20:]); got != want {
					t.Fatalf("ICMP checksum %#x, want %#x", got, want)
				}
				quoted = out[28:]
			} else {
				ic := g.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
				if ic.TypeCode != layers.CreateICMPv6TypeCode(2, 0) {
					t.Fatalf("type/code %v", ic.TypeCode)
				}
				if mtu := binary.BigEndian.Uint32(out[44:]); mtu != 1280 {
					t.Fatalf("MTU %d", mtu)
				}
				// gopacket verifies nothing on decode; recompute with it.
				ip := g.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
				ic2 := &layers.ICMPv6{TypeCode: ic.TypeCode}
				ic2.SetNetworkLayerForChecksum(ip)
				buf := gopacket.NewSerializeBuffer()
				if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ic2, gopacket.Payload(out[44:])); err != nil {
					t.Fatal(err)
				}
				if got, want := binary.BigEndian.Uint16(out[42:]), binary.BigEndian.Uint16(buf.Bytes()[2:]); got != want {
					t.Fatalf("ICMPv6 checksum %#x, gopacket %#x", got, want)
				}
				quoted = out[48:]
			}
			if len(quoted) != tc.quote || !bytes.Equal(quoted, tc.pkt[:tc.quote]) {
				t.Fatalf("quote: %d bytes, want the first %d of the original", len(quoted), tc.quote)
			}
		})
	}
}

func TestPacketTooBigNotForICMPErrors(t *testing.T) {
	big := packettest.TCP{Src: a4, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, 1400)}.Build()
	dst := make([]byte, PTBMaxLen)
	n := PacketTooBig(dst, big, decode(t, big), 1280)
	ptb := append([]byte(nil), dst[:n]...)
	if PacketTooBig(dst, ptb, decode(t, ptb), 576) != 0 {
		t.Fatal("an ICMP error was answered with an ICMP error")
	}
}

func TestPacketPathAllocs(t *testing.T) {
	syn := packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN, MSS: 1460}.Build()
	big := packettest.TCP{Src: a6, Dst: b6, Flags: packettest.ACK, Payload: make([]byte, 1400)}.Build()
	dst := make([]byte, PTBMaxLen)
	var p packet.Parsed
	work := make([]byte, len(syn))
	assigned := netip.MustParseAddr("10.77.0.9")
	if n := testing.AllocsPerRun(100, func() {
		copy(work, syn)
		p.Decode(work)
		rewriteAddr(work, &p, true, assigned)
		ClampMSS(work, &p, 1280)
		p.Decode(big)
		PacketTooBig(dst, big, &p, 1280)
	}); n != 0 {
		t.Fatalf("%v allocations per packet", n)
	}
}

func TestRewriteAddrChecksums(t *testing.T) {
	for _, seg := range []packettest.TCP{
		{Src: a4, Dst: b4, Flags: packettest.ACK, Payload: []byte("hello")},
		{Src: a6, Dst: b6, Flags: packettest.ACK, Payload: []byte("hello")},
	} {
		pkt := seg.Build()
		p := decode(t, pkt)
		na := netip.MustParseAddr("192.168.42.2")
		if seg.Src.Addr().Is6() {
			na = netip.MustParseAddr("fd42::2")
		}
		rewriteAddr(pkt, p, true, na)
		checkTCP(t, pkt)
		if got := decode(t, pkt).Src; got != na {
			t.Fatalf("src %v, want %v", got, na)
		}
		if seg.Src.Addr().Is4() {
			cp := append([]byte(nil), pkt[:20]...)
			cp[10], cp[11] = 0, 0
			if got, want := binary.BigEndian.Uint16(pkt[10:]), packet.Checksum(0, cp); got != want {
				t.Fatalf("IPv4 header checksum %#x, want %#x", got, want)
			}
		}
	}
}
