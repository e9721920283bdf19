package tun

import (
	"encoding/binary"
	"net/netip"
)

// Packet builders and checksum oracles for the tun tests (full
// recomputation, independent of the code under test).

func csumFold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func csumAdd(s uint64, b []byte) uint64 {
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// l4Off returns the transport header offset of an IPv4 (no options
// assumed beyond IHL) or IPv6 (no extension headers) packet.
func l4Off(p []byte) int {
	if p[0]>>4 == 4 {
		return int(p[0]&0x0f) * 4
	}
	return 40
}

func pseudo(p []byte, proto uint8, l4len int) uint64 {
	var s uint64
	if p[0]>>4 == 4 {
		s = csumAdd(s, p[12:20])
	} else {
		s = csumAdd(s, p[8:40])
	}
	return s + uint64(proto) + uint64(l4len)
}

// fixChecksums recomputes the IPv4 header checksum and the TCP/UDP
// checksum of p from scratch.
func fixChecksums(p []byte) {
	off := l4Off(p)
	proto := p[9]
	if p[0]>>4 == 4 {
		p[10], p[11] = 0, 0
		binary.BigEndian.PutUint16(p[10:], ^csumFold(csumAdd(0, p[:off])))
	} else {
		proto = p[6]
	}
	at := off + 16
	if proto == 17 {
		at = off + 6
	}
	p[at], p[at+1] = 0, 0
	c := ^csumFold(csumAdd(pseudo(p, proto, len(p)-off), p[off:]))
	if proto == 17 && c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(p[at:], c)
}

// checksumsValid reports whether p's IPv4 header and TCP/UDP checksums
// are correct.
func checksumsValid(p []byte) bool {
	off := l4Off(p)
	proto := p[9]
	if p[0]>>4 == 4 {
		if csumFold(csumAdd(0, p[:off])) != 0xffff {
			return false
		}
	} else {
		proto = p[6]
	}
	return csumFold(csumAdd(pseudo(p, proto, len(p)-off), p[off:])) == 0xffff
}

// seg describes one TCP segment for tcpPacket.
type seg struct {
	src, dst   netip.AddrPort
	seq, ack   uint32
	flags      uint8
	window     uint16
	id         uint16
	ttl        uint8
	opts       []byte // a multiple of 4 bytes
	payloadLen int
	fill       byte
}

// tcpPacket builds an IPv4 or IPv6 TCP packet (by the address family of
// s.src) with valid checksums.
func tcpPacket(s seg) []byte {
	v6 := s.src.Addr().Is6()
	l3 := 20
	if v6 {
		l3 = 40
	}
	hl := 20 + len(s.opts)
	p := make([]byte, l3+hl+s.payloadLen)
	ttl := s.ttl
	if ttl == 0 {
		ttl = 64
	}
	if v6 {
		p[0] = 0x60
		binary.BigEndian.PutUint16(p[4:], uint16(hl+s.payloadLen))
		p[6] = 6
		p[7] = ttl
		a, b := s.src.Addr().As16(), s.dst.Addr().As16()
		copy(p[8:], a[:])
		copy(p[24:], b[:])
	} else {
		p[0] = 0x45
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		binary.BigEndian.PutUint16(p[4:], s.id)
		p[6] = 0x40 // DF
		p[8] = ttl
		p[9] = 6
		a, b := s.src.Addr().As4(), s.dst.Addr().As4()
		copy(p[12:], a[:])
		copy(p[16:], b[:])
	}
	t := p[l3:]
	binary.BigEndian.PutUint16(t[0:], s.src.Port())
	binary.BigEndian.PutUint16(t[2:], s.dst.Port())
	binary.BigEndian.PutUint32(t[4:], s.seq)
	binary.BigEndian.PutUint32(t[8:], s.ack)
	t[12] = byte(hl/4) << 4
	t[13] = s.flags
	binary.BigEndian.PutUint16(t[14:], s.window)
	copy(t[20:], s.opts)
	for i := hl; i < len(t); i++ {
		t[i] = s.fill + byte(i)
	}
	fixChecksums(p)
	return p
}

// tcpWindow reads the raw window of a TCP packet.
func tcpWindow(p []byte) uint16 { return binary.BigEndian.Uint16(p[l4Off(p)+14:]) }

// setWindow lowers the window the way the proxy does: the field and an
// RFC 1624 eqn. 3 update of the checksum.
func setWindow(p []byte, w uint16) {
	t := p[l4Off(p):]
	old := binary.BigEndian.Uint16(t[14:])
	hc := binary.BigEndian.Uint16(t[16:])
	binary.BigEndian.PutUint16(t[14:], w)
	binary.BigEndian.PutUint16(t[16:], ^csumFold(uint64(^hc)+uint64(^old)+uint64(w)))
}

// tcpTSOpts is a NOP, NOP, timestamp option block.
func tcpTSOpts(val, ecr uint32) []byte {
	o := []byte{1, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(o[4:], val)
	binary.BigEndian.PutUint32(o[8:], ecr)
	return o
}
