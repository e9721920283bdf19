package packet

import (
	"encoding/binary"
	"net/netip"
)

// All Internet-checksum arithmetic of the project lives in this file.

// sum16 adds b as big-endian 16-bit words (an odd trailing byte padded with
// zero) to the running 32-bit one's-complement accumulator s.
func sum16(s uint64, b []byte) uint64 {
	for len(b) >= 8 {
		s += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces a one's-complement accumulator to 16 bits.
func fold(s uint64) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// Sum adds b to the one's-complement accumulator s (RFC 1071), for
// checksums built from several pieces (a pseudo-header, then the data).
func Sum(s uint64, b []byte) uint64 { return sum16(s, b) }

// Checksum is the Internet checksum (RFC 1071) of b on top of the
// accumulator s (0, or a pseudo-header's Sum): the value to store in the
// checksum field, which must be zero in b while it is computed.
func Checksum(s uint64, b []byte) uint16 { return ^fold(sum16(s, b)) }

// UpdateChecksum returns the checksum hc updated for one 16-bit word of the
// covered data changing from m to m1, by RFC 1624 eqn. 3:
// HC' = ~(~HC + ~m + m'). Unlike eqn. 2 it never yields 0xffff for data
// whose full checksum is 0x0000, so it agrees bit for bit with a full
// recomputation.
func UpdateChecksum(hc, m, m1 uint16) uint16 {
	s := uint64(^hc) + uint64(^m) + uint64(m1)
	return ^fold(s)
}

// pseudoSum is the one's-complement sum of the TCP/UDP pseudo-header
// (RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6).
func pseudoSum(src, dst netip.Addr, proto uint8, length int) uint64 {
	var s uint64
	if src.Is4() {
		a, b := src.As4(), dst.As4()
		s = sum16(s, a[:])
		s = sum16(s, b[:])
	} else {
		a, b := src.As16(), dst.As16()
		s = sum16(s, a[:])
		s = sum16(s, b[:])
	}
	return s + uint64(proto) + uint64(length>>16) + uint64(length&0xffff)
}

// TCPChecksum computes the TCP checksum of the parsed packet b from
// scratch, as if its checksum field were zero. For IPv6 the pseudo-header
// uses the header's destination (a routing header's final destination is
// not substituted; the packet path never needs it).
func TCPChecksum(b []byte, p *Parsed) uint16 {
	seg := b[p.L4Off:p.Length]
	s := pseudoSum(p.Src, p.Dst, ProtoTCP, len(seg))
	s = sum16(s, seg[:16])
	s = sum16(s, seg[18:])
	return ^fold(s)
}

// TCPChecksumValid reports whether the parsed TCP segment in b carries a
// correct checksum.
func TCPChecksumValid(b []byte, p *Parsed) bool {
	seg := b[p.L4Off:p.Length]
	return fold(sum16(pseudoSum(p.Src, p.Dst, ProtoTCP, len(seg)), seg)) == 0xffff
}

// TCPWindowOff and TCPChecksumOff are offsets within the TCP header.
const (
	TCPWindowOff   = 14
	TCPChecksumOff = 16
)

// SetTCPWindow writes the raw window field of the parsed TCP segment in b
// and updates its checksum incrementally (RFC 1624), and p.Window with it.
// The length never changes; the caller decides whether the new value may
// be written (the proxy never raises a window).
func SetTCPWindow(b []byte, p *Parsed, w uint16) {
	t := b[p.L4Off:]
	old := binary.BigEndian.Uint16(t[TCPWindowOff:])
	hc := binary.BigEndian.Uint16(t[TCPChecksumOff:])
	binary.BigEndian.PutUint16(t[TCPWindowOff:], w)
	binary.BigEndian.PutUint16(t[TCPChecksumOff:], UpdateChecksum(hc, old, w))
	p.Window = w
}
