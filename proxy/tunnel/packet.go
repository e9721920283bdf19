package tunnel

import (
	"encoding/binary"

	"github.com/m2ho/m2ho/proxy/packet"
)

// DefaultMTU is the tunnel's inner MTU. A QUIC DATAGRAM (RFC 9221) must fit
// one QUIC packet, which quic-go v0.65 sizes between 1200 and 1452 bytes;
// 1280 bytes of IP packet fit after the short header, the AEAD tag, the
// DATAGRAM frame header, the quarter stream ID and the context ID (RFC
// 9484 §6) both in the packets of fullPacketSize(1280) = 1322 bytes sent
// by default and in the 1350-byte first packets (connect-ip-go's own
// default) of quic-go's defaults (NoFullPackets). 1280 is also IPv6's
// minimum link MTU, which RFC 9484 §10.1 requires a tunnel to carry.
const DefaultMTU = 1280

// minMTU is the smallest inner MTU a tunnel accepts (IPv6's minimum).
const minMTU = 1280

// maxMTU is the largest inner MTU that can fit a DATAGRAM in quic-go v0.65
// (1452-byte packets minus the overheads listed at DefaultMTU).
const maxMTU = 1400

// fullPacketCIDLen is the connection ID length each end asks its peer to
// use (quic.Transport.ConnectionIDLength) when it sends full packets: the
// largest QUIC allows, the length quic-go's DATAGRAM admission reckons
// with (see fullPacketSize).
const fullPacketCIDLen = 20

// fullPacketSize is the QUIC packet size (quic.Config.InitialPacketSize,
// path MTU discovery off) at which a DATAGRAM carrying an inner packet of
// mtu bytes fills its 1-RTT packet exactly, when the receiver's connection
// ID is fullPacketCIDLen long: 1 header byte, 20 of connection ID, 2 of
// packet number (quic-go v0.65 uses 2 while fewer than 2^15 packets are
// unacknowledged), 1 frame type (a DATAGRAM frame that ends its packet
// carries no length), 1 quarter stream ID (RFC 9297 §2.1; one byte for
// the CONNECT-IP stream, a client's first), 1 context ID (RFC 9484 §6)
// and the 16-byte AEAD tag.
//
// Why it matters: quic-go v0.65 hands a run of packets to one GSO
// sendmsg only while each is exactly its maximum size
// (sendPacketsWithGSO), and SendDatagram admits a payload only up to that
// size less 37 bytes (estimateMaxPayloadSize, which assumes a 20-byte
// connection ID). With quic-go's default 4-byte connection IDs a DATAGRAM
// packet is therefore always at least 13 bytes short of the maximum and
// every packet costs a system call (README, session 29: the tunnel's
// ceiling). With the receiver's connection IDs at 20 bytes and the size
// pinned here, MTU-sized inner packets make full packets and a bulk
// transfer leaves in GSO batches; a payload up to 5 bytes shorter still
// passes SendDatagram (mtu+2 ≤ size−37) and goes in a packet of its own.
// TestFullPackets holds quic-go to this arithmetic.
func fullPacketSize(mtu int) int { return mtu + 42 }

// Header sizes used to derive the MSS from the MTU.
const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 20
	icmpHeaderLen = 8
)

const (
	tcpFlagSYN = 0x02
	tcpOptMSS  = 2
	tcpOptEnd  = 0
	tcpOptNOP  = 1
)

// mssFor is the largest MSS that keeps a segment without IP or TCP options
// within mtu (RFC 9293 §3.7.1: MSS excludes the IP and TCP headers).
func mssFor(mtu int, ipVersion uint8) uint16 {
	if ipVersion == 6 {
		return uint16(mtu - ipv6HeaderLen - tcpHeaderLen)
	}
	return uint16(mtu - ipv4HeaderLen - tcpHeaderLen)
}

// ClampMSS lowers the MSS option of a TCP SYN (or SYN-ACK) in pkt, parsed
// into p, so that the peer never sends a segment larger than mtu; it
// reports whether it changed the packet. The TCP checksum is updated
// incrementally (RFC 1624, packet.UpdateChecksum), also when the option's
// value sits at an odd offset. A SYN without an MSS option needs nothing:
// its default (536 / 1220 bytes, RFC 9293 §3.7.1, RFC 8200 §8.3) is below
// every tunnel MTU. The MSS is never raised.
func ClampMSS(pkt []byte, p *packet.Parsed, mtu int) bool {
	if p.Err != packet.ParseOK || p.Proto != packet.ProtoTCP || !p.TCPParsed || p.Flags&tcpFlagSYN == 0 {
		return false
	}
	limit := mssFor(mtu, p.IPVersion)
	if p.MSS == 0 || p.MSS <= limit {
		return false
	}
	t := pkt[p.L4Off : p.L4Off+p.TCPHdrLen]
	// p's decoder validated every option length, so this walk stays in t.
	for i := tcpHeaderLen; i < len(t); {
		switch kind := t[i]; kind {
		case tcpOptEnd:
			return false
		case tcpOptNOP:
			i++
			continue
		}
		if i+1 >= len(t) {
			return false
		}
		n := int(t[i+1])
		if n < 2 || i+n > len(t) {
			return false
		}
		if t[i] == tcpOptMSS && n == 4 {
			setBytes16(t, i+2, limit)
			p.MSS = limit
			return true
		}
		i += n
	}
	return false
}

// setBytes16 writes v big-endian at t[off:off+2] and updates the TCP
// checksum (at t[16:18]) word by word: off may be odd, in which case the
// two bytes straddle two 16-bit words of the checksummed data.
func setBytes16(t []byte, off int, v uint16) {
	first := off &^ 1
	last := (off + 1) &^ 1
	var old [2]uint16
	for w := first; w <= last; w += 2 {
		old[(w-first)/2] = binary.BigEndian.Uint16(t[w:])
	}
	binary.BigEndian.PutUint16(t[off:], v)
	hc := binary.BigEndian.Uint16(t[16:])
	for w := first; w <= last; w += 2 {
		hc = packet.UpdateChecksum(hc, old[(w-first)/2], binary.BigEndian.Uint16(t[w:]))
	}
	binary.BigEndian.PutUint16(t[16:], hc)
}

// Bounds on the quoted original packet, so that the error fits the minimum
// MTU of its family: 576 bytes for IPv4 (RFC 1812 §4.3.2.3), 1280 for IPv6
// (RFC 4443 §2.4(c)).
const (
	ptbQuote4 = 576 - ipv4HeaderLen - icmpHeaderLen
	ptbQuote6 = 1280 - ipv6HeaderLen - icmpHeaderLen
	// PTBMaxLen is the largest packet PacketTooBig writes.
	PTBMaxLen = 1280
)

const icmpHopLimit = 64

// PacketTooBig writes into dst (at least PTBMaxLen bytes) the ICMP error
// that tells the sender of pkt, an IP packet larger than mtu, to send
// smaller ones: ICMPv4 Destination Unreachable / Fragmentation Needed with
// the next-hop MTU (RFC 1191 §4) or ICMPv6 Packet Too Big (RFC 4443 §3.2),
// as RFC 9484 §10.1 asks of a tunnel endpoint. It returns the length
// written, or 0 when no error may be sent: pkt is itself an ICMP error
// (RFC 1122 §3.2.2, RFC 4443 §2.4(e)), a non-first fragment, or unparsed.
// Like connect-ip-go, the error's source is the original destination, so
// the sender's stack accepts it as coming from the path. It never
// allocates.
func PacketTooBig(dst, pkt []byte, p *packet.Parsed, mtu int) int {
	if len(dst) < PTBMaxLen || p.Err != packet.ParseOK || (p.Fragment && !p.FirstFragment) {
		return 0
	}
	if isICMPError(pkt, p) {
		return 0
	}
	if p.IPVersion == 4 {
		q := pkt[:min(p.Length, ptbQuote4)]
		n := ipv4HeaderLen + icmpHeaderLen + len(q)
		h := dst[:ipv4HeaderLen]
		clear(h)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(n))
		h[8] = icmpHopLimit
		h[9] = packet.ProtoICMP
		copy(h[12:16], pkt[16:20]) // from the original destination
		copy(h[16:20], pkt[12:16]) // to the original source
		binary.BigEndian.PutUint16(h[10:], packet.Checksum(0, h))
		m := dst[ipv4HeaderLen:n]
		clear(m[:icmpHeaderLen])
		m[0], m[1] = 3, 4 // Destination Unreachable, Fragmentation Needed and DF set
		binary.BigEndian.PutUint16(m[6:], uint16(mtu))
		copy(m[icmpHeaderLen:], q)
		binary.BigEndian.PutUint16(m[2:], packet.Checksum(0, m))
		return n
	}
	q := pkt[:min(p.Length, ptbQuote6)]
	n := ipv6HeaderLen + icmpHeaderLen + len(q)
	h := dst[:ipv6HeaderLen]
	clear(h)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(n-ipv6HeaderLen))
	h[6] = packet.ProtoICMPv6
	h[7] = icmpHopLimit
	copy(h[8:24], pkt[24:40])
	copy(h[24:40], pkt[8:24])
	m := dst[ipv6HeaderLen:n]
	clear(m[:icmpHeaderLen])
	m[0] = 2 // Packet Too Big
	binary.BigEndian.PutUint32(m[4:], uint32(mtu))
	copy(m[icmpHeaderLen:], q)
	// RFC 4443 §2.3: the checksum covers the IPv6 pseudo-header.
	s := packet.Sum(0, h[8:40])
	s += uint64(len(m)) + packet.ProtoICMPv6
	binary.BigEndian.PutUint16(m[2:], packet.Checksum(s, m))
	return n
}

// isICMPError reports whether pkt is an ICMP or ICMPv6 error message, to
// which no error may be sent back.
func isICMPError(pkt []byte, p *packet.Parsed) bool {
	if p.L4Off >= p.Length {
		return false
	}
	typ := pkt[p.L4Off]
	switch p.Proto {
	case packet.ProtoICMP:
		// RFC 1122 §3.2.2: Destination Unreachable, Source Quench,
		// Redirect, Time Exceeded, Parameter Problem.
		return typ == 3 || typ == 4 || typ == 5 || typ == 11 || typ == 12
	case packet.ProtoICMPv6:
		return typ < 128 // RFC 4443 §2.1
	}
	return false
}
