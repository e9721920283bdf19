package tunnel

import (
	"encoding/binary"
	"net/netip"

	"github.com/m2ho/m2ho/proxy/packet"
)

// rewriteAddr replaces the source (src true) or destination address of the
// parsed packet pkt with a (same family), updating the IPv4 header checksum
// and the TCP, UDP or ICMPv6 checksum incrementally (RFC 1624): the
// address is part of their pseudo-header. A non-first fragment carries no
// transport header, so only the IP header changes. It never allocates.
func rewriteAddr(pkt []byte, p *packet.Parsed, src bool, a netip.Addr) {
	var off, n int
	switch {
	case p.IPVersion == 4 && src:
		off, n = 12, 4
	case p.IPVersion == 4:
		off, n = 16, 4
	case src:
		off, n = 8, 16
	default:
		off, n = 24, 16
	}
	var nb [16]byte
	if n == 4 {
		b := a.As4()
		copy(nb[:], b[:])
	} else {
		nb = a.As16()
	}
	l4sum := -1
	if !p.Fragment || p.FirstFragment {
		switch p.Proto {
		case packet.ProtoTCP:
			if p.L4Off+18 <= p.Length {
				l4sum = p.L4Off + 16
			}
		case packet.ProtoUDP:
			if p.L4Off+8 <= p.Length && (p.IPVersion == 6 || binary.BigEndian.Uint16(pkt[p.L4Off+6:]) != 0) {
				l4sum = p.L4Off + 6
			}
		case packet.ProtoICMPv6:
			if p.L4Off+4 <= p.Length {
				l4sum = p.L4Off + 2
			}
		}
	}
	for i := 0; i < n; i += 2 {
		old := binary.BigEndian.Uint16(pkt[off+i:])
		nw := binary.BigEndian.Uint16(nb[i:])
		if p.IPVersion == 4 {
			binary.BigEndian.PutUint16(pkt[10:], packet.UpdateChecksum(binary.BigEndian.Uint16(pkt[10:]), old, nw))
		}
		if l4sum >= 0 {
			binary.BigEndian.PutUint16(pkt[l4sum:], packet.UpdateChecksum(binary.BigEndian.Uint16(pkt[l4sum:]), old, nw))
		}
		binary.BigEndian.PutUint16(pkt[off+i:], nw)
	}
	if l4sum >= 0 && p.Proto == packet.ProtoUDP && binary.BigEndian.Uint16(pkt[l4sum:]) == 0 {
		binary.BigEndian.PutUint16(pkt[l4sum:], 0xffff) // RFC 768: 0 means "no checksum"
	}
	if src {
		p.Src = a
	} else {
		p.Dst = a
	}
}
