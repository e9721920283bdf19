// Package packet holds the allocation-free views of IP/TCP packets shared
// by the proxy, the emulator and the tests: Parsed (offsets and decoded
// header fields over the caller's bytes), the Internet checksum (RFC 1624
// incremental update and full recomputation), the in-place window rewrite
// and wrap-safe sequence-number comparison. It is a leaf: it imports only
// the standard library, and nothing that does I/O.
package packet

import (
	"encoding/binary"
	"net/netip"
)

// IP protocol numbers the parser knows.
const (
	ProtoHopByHop = 0
	ProtoICMP     = 1
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoESP      = 50
	ProtoAH       = 51
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDstOpts  = 60
)

// ParseError says why a packet could not be parsed; the proxy's engine
// counts it and passes the packet unchanged.
type ParseError uint8

const (
	ParseOK         ParseError = iota
	ErrShort                   // shorter than the header it claims
	ErrVersion                 // IP version neither 4 nor 6
	ErrIPHeaderLen             // IPv4 IHL < 5 or beyond the packet
	ErrIPTotalLen              // IP length field inconsistent with the buffer
	ErrExtHeader               // IPv6 extension header chain malformed or too long
	ErrTCPHeaderLen            // TCP data offset < 5 or beyond the segment
	ErrTCPOption               // TCP option with a bad length
	ErrUDPHeader               // UDP header truncated

	// NumParseErrors is the number of ParseError values, for counter
	// arrays indexed by ParseError.
	NumParseErrors
)

var parseErrorNames = [...]string{"ok", "short", "ip-version", "ip-header-len",
	"ip-total-len", "ipv6-ext-header", "tcp-header-len", "tcp-option", "udp-header"}

func (e ParseError) String() string {
	if int(e) < len(parseErrorNames) {
		return parseErrorNames[e]
	}
	return "unknown"
}

// maxExtHeaders bounds the IPv6 extension header walk, so a hostile chain
// costs a constant.
const maxExtHeaders = 8

// maxSACKBlocks is the most SACK blocks that fit the 40-byte option space.
const maxSACKBlocks = 4

// Parsed is a view of one packet: offsets and decoded header fields, never
// a copy of the bytes. Decode fills it without allocating, so one Parsed is
// reused for every packet. Fields past the IP layer are meaningful only when
// Err is ParseOK and Proto says which transport was parsed.
type Parsed struct {
	Err ParseError

	IPVersion uint8
	// Proto is the transport protocol after any IPv6 extension headers
	// (ProtoESP when an ESP header ends the walk).
	Proto    uint8
	Src, Dst netip.Addr
	// Length is the IP packet length from its header (trailing bytes in the
	// buffer beyond it are ignored and left untouched).
	Length int
	// L4Off is the offset of the transport header.
	L4Off int
	// Fragment is set for any fragment; FirstFragment for the one that
	// holds the transport header. A non-first fragment is never parsed
	// past the IP layer.
	Fragment, FirstFragment bool

	SrcPort, DstPort uint16

	// TCP fields, valid when Proto == ProtoTCP and TCPParsed.
	TCPParsed  bool
	Seq, Ack   uint32
	Flags      uint8
	Window     uint16
	TCPHdrLen  int
	PayloadLen int

	// TCP options.
	MSS           uint16 // 0: absent
	WScale        int8   // -1: absent
	SACKPermitted bool
	NumSACK       int
	SACK          [maxSACKBlocks][2]uint32
	HasTS         bool
	TSval, TSecr  uint32
}

// IPDst returns the destination address from the IP header of b alone
// (nothing past it is looked at), so that a packet can be classified
// without being parsed; ok is false when b is not IPv4/IPv6 or shorter than
// its fixed IP header. It never allocates.
func IPDst(b []byte) (dst netip.Addr, ok bool) {
	switch {
	case len(b) >= 20 && b[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(b[16:20])), true
	case len(b) >= 40 && b[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(b[24:40])), true
	}
	return netip.Addr{}, false
}

// Decode parses b as an IPv4 or IPv6 packet. It never panics on any input
// and never allocates; on malformed input it sets p.Err and returns false.
func (p *Parsed) Decode(b []byte) bool {
	*p = Parsed{WScale: -1}
	if len(b) < 1 {
		return p.fail(ErrShort)
	}
	switch b[0] >> 4 {
	case 4:
		return p.decode4(b)
	case 6:
		return p.decode6(b)
	}
	return p.fail(ErrVersion)
}

func (p *Parsed) fail(e ParseError) bool {
	p.Err = e
	return false
}

func (p *Parsed) decode4(b []byte) bool {
	if len(b) < 20 {
		return p.fail(ErrShort)
	}
	p.IPVersion = 4
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || ihl > len(b) {
		return p.fail(ErrIPHeaderLen)
	}
	total := int(binary.BigEndian.Uint16(b[2:]))
	if total < ihl || total > len(b) {
		return p.fail(ErrIPTotalLen)
	}
	p.Length = total
	p.Proto = b[9]
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.L4Off = ihl
	frag := binary.BigEndian.Uint16(b[6:])
	offset := frag & 0x1fff
	more := frag&0x2000 != 0
	if offset != 0 || more {
		p.Fragment = true
		p.FirstFragment = offset == 0
		if offset != 0 {
			return true
		}
	}
	return p.decodeL4(b[:total])
}

func (p *Parsed) decode6(b []byte) bool {
	if len(b) < 40 {
		return p.fail(ErrShort)
	}
	p.IPVersion = 6
	plen := int(binary.BigEndian.Uint16(b[4:]))
	// Jumbograms (payload length 0 with a hop-by-hop option) are not
	// supported: they never cross a TUN with a normal MTU.
	total := 40 + plen
	if total > len(b) {
		return p.fail(ErrIPTotalLen)
	}
	p.Length = total
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	b = b[:total]
	next := b[6]
	off := 40
	for i := 0; ; i++ {
		switch next {
		case ProtoHopByHop, ProtoRouting, ProtoDstOpts, ProtoAH:
			if i == maxExtHeaders || off+8 > total {
				return p.fail(ErrExtHeader)
			}
			var n int
			if next == ProtoAH {
				n = (int(b[off+1]) + 2) * 4 // RFC 4302: in 4-octet units, minus 2
			} else {
				n = (int(b[off+1]) + 1) * 8 // RFC 8200: in 8-octet units, minus 1
			}
			if off+n > total {
				return p.fail(ErrExtHeader)
			}
			next = b[off]
			off += n
			continue
		case ProtoFragment:
			if i == maxExtHeaders || off+8 > total {
				return p.fail(ErrExtHeader)
			}
			fo := binary.BigEndian.Uint16(b[off+2:])
			next = b[off]
			off += 8
			p.Fragment = true
			p.FirstFragment = fo&0xfff8 == 0
			if !p.FirstFragment {
				p.Proto, p.L4Off = next, off
				return true
			}
			continue
		}
		break
	}
	p.Proto, p.L4Off = next, off
	if next == ProtoESP || next == ProtoNoNext {
		return true
	}
	return p.decodeL4(b)
}

// decodeL4 parses the transport header of b (trimmed to the IP length).
func (p *Parsed) decodeL4(b []byte) bool {
	l4 := b[p.L4Off:]
	switch p.Proto {
	case ProtoUDP:
		if len(l4) < 8 {
			if p.Fragment {
				return true
			}
			return p.fail(ErrUDPHeader)
		}
		p.SrcPort = binary.BigEndian.Uint16(l4[0:])
		p.DstPort = binary.BigEndian.Uint16(l4[2:])
		return true
	case ProtoTCP:
		return p.decodeTCP(l4)
	}
	return true
}

func (p *Parsed) decodeTCP(t []byte) bool {
	if len(t) < 20 {
		return p.fail(ErrTCPHeaderLen)
	}
	hl := int(t[12]>>4) * 4
	if hl < 20 || hl > len(t) {
		return p.fail(ErrTCPHeaderLen)
	}
	p.SrcPort = binary.BigEndian.Uint16(t[0:])
	p.DstPort = binary.BigEndian.Uint16(t[2:])
	p.Seq = binary.BigEndian.Uint32(t[4:])
	p.Ack = binary.BigEndian.Uint32(t[8:])
	p.Flags = t[13]
	p.Window = binary.BigEndian.Uint16(t[14:])
	p.TCPHdrLen = hl
	p.PayloadLen = len(t) - hl
	if !p.decodeOptions(t[20:hl]) {
		return p.fail(ErrTCPOption)
	}
	p.TCPParsed = true
	return true
}

// decodeOptions walks the TCP options (RFC 9293 §3.1). An option whose
// length is < 2 or runs past the header makes the whole segment
// unparseable; an option of known kind with the wrong length is ignored, as
// a TCP stack would.
func (p *Parsed) decodeOptions(o []byte) bool {
	for len(o) > 0 {
		kind := o[0]
		if kind == 0 { // end of option list
			return true
		}
		if kind == 1 { // no-operation
			o = o[1:]
			continue
		}
		if len(o) < 2 {
			return false
		}
		n := int(o[1])
		if n < 2 || n > len(o) {
			return false
		}
		switch {
		case kind == 2 && n == 4:
			p.MSS = binary.BigEndian.Uint16(o[2:])
		case kind == 3 && n == 3:
			p.WScale = int8(min(o[2], 14)) // RFC 7323 §2.3: larger values are used as 14
		case kind == 4 && n == 2:
			p.SACKPermitted = true
		case kind == 5 && n >= 10 && (n-2)%8 == 0:
			p.NumSACK = 0
			for i := 2; i+8 <= n && p.NumSACK < maxSACKBlocks; i += 8 {
				p.SACK[p.NumSACK] = [2]uint32{binary.BigEndian.Uint32(o[i:]), binary.BigEndian.Uint32(o[i+4:])}
				p.NumSACK++
			}
		case kind == 8 && n == 10:
			p.HasTS = true
			p.TSval = binary.BigEndian.Uint32(o[2:])
			p.TSecr = binary.BigEndian.Uint32(o[6:])
		}
		o = o[n:]
	}
	return true
}
