package tunnel

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/proxy/packettest"
)

// FuzzPacketOps feeds arbitrary bytes through the tunnel's packet
// operations. Oracles: nothing panics; a TCP segment whose checksum was
// valid stays valid after clamping and address rewriting; the MSS is never
// raised and nothing outside the TCP header changes; a PTB, when made, is a
// parseable ICMP(v6) packet no longer than PTBMaxLen.
func FuzzPacketOps(f *testing.F) {
	f.Add(packettest.TCP{Src: a4, Dst: b4, Flags: packettest.SYN, MSS: 1460, SACKPermitted: true, HasWScale: true, WScale: 7}.Build(), uint16(1280))
	f.Add(packettest.TCP{Src: a6, Dst: b6, Flags: packettest.SYN | packettest.ACK, MSS: 8960}.Build(), uint16(1400))
	f.Add(packettest.TCP{Src: a4, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, 1300)}.Build(), uint16(1280))
	f.Add([]byte{0x45, 0, 0, 20}, uint16(0))
	f.Fuzz(func(t *testing.T, pkt []byte, mtu uint16) {
		m := minMTU + int(mtu)%(maxMTU-minMTU+1)
		var p packet.Parsed
		if !p.Decode(pkt) {
			return
		}
		isTCP := p.Proto == packet.ProtoTCP && p.TCPParsed && (!p.Fragment || p.FirstFragment)
		valid := isTCP && packet.TCPChecksumValid(pkt, &p)
		before := p.MSS
		work := append([]byte(nil), pkt...)
		ClampMSS(work, &p, m)
		var q packet.Parsed
		if !q.Decode(work) {
			t.Fatalf("clamped packet no longer parses: %v", q.Err)
		}
		if q.MSS > before {
			t.Fatalf("MSS raised from %d to %d", before, q.MSS)
		}
		if valid && !packet.TCPChecksumValid(work, &q) {
			t.Fatal("clamping broke a valid TCP checksum")
		}
		if isTCP && (!bytes.Equal(work[:p.L4Off], pkt[:p.L4Off]) || !bytes.Equal(work[p.L4Off+p.TCPHdrLen:], pkt[p.L4Off+p.TCPHdrLen:])) {
			t.Fatal("clamping changed bytes outside the TCP header")
		}

		a := netip.MustParseAddr("10.77.0.9")
		if q.IPVersion == 6 {
			a = netip.MustParseAddr("fd77::9")
		}
		rewriteAddr(work, &q, true, a)
		var r packet.Parsed
		if !r.Decode(work) {
			t.Fatalf("rewritten packet no longer parses: %v", r.Err)
		}
		if r.Src != a {
			t.Fatalf("source %v after rewrite, want %v", r.Src, a)
		}
		if valid && !packet.TCPChecksumValid(work, &r) {
			t.Fatal("address rewrite broke a valid TCP checksum")
		}

		dst := make([]byte, PTBMaxLen)
		if n := PacketTooBig(dst, pkt, &p, m); n > 0 {
			var e packet.Parsed
			if n > PTBMaxLen || !e.Decode(dst[:n]) || (e.Proto != packet.ProtoICMP && e.Proto != packet.ProtoICMPv6) || e.Length != n {
				t.Fatalf("PTB of %d bytes does not parse as ICMP: %v", n, e.Err)
			}
		}
	})
}
