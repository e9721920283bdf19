// Package packettest builds IPv4/IPv6 TCP packets for tests, with options
// and correct checksums, through gopacket's serializer so that the bytes do
// not depend on the code under test. It is for tests and benchmarks only.
package packettest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TCP flag bits.
const (
	FIN = 0x01
	SYN = 0x02
	RST = 0x04
	PSH = 0x08
	ACK = 0x10
)

// TCP describes one segment. Zero option fields leave the option out.
type TCP struct {
	Src, Dst      netip.AddrPort // both IPv4 or both IPv6
	Seq, Ack      uint32
	Flags         uint8
	Window        uint16
	MSS           uint16 // 0: absent
	WScale        int    // shift announced when HasWScale
	HasWScale     bool   // include the window scale option with WScale
	SACKPermitted bool   // include SACK-permitted
	SACK          [][2]uint32
	HasTS         bool
	TSval, TSecr  uint32
	Payload       []byte
	// IPv6ExtHeaders, if set, is spliced in between the IPv6 header and
	// TCP: each element a complete extension header whose first byte (next
	// header) is patched. Ignored for IPv4.
	IPv6ExtHeaders []ExtHeader
}

// ExtHeader is an IPv6 extension header: its protocol number and bytes
// (the first byte is overwritten with the next header's number).
type ExtHeader struct {
	Proto uint8
	Bytes []byte
}

// Options returns the TCP options in the order Linux sends them, NOP-padded
// to 4 bytes.
func (s *TCP) options() []layers.TCPOption {
	var o []layers.TCPOption
	nop := layers.TCPOption{OptionType: layers.TCPOptionKindNop}
	if s.MSS != 0 {
		d := make([]byte, 2)
		binary.BigEndian.PutUint16(d, s.MSS)
		o = append(o, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: d})
	}
	if s.SACKPermitted {
		o = append(o, nop, nop, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2})
	}
	if s.HasTS {
		d := make([]byte, 8)
		binary.BigEndian.PutUint32(d, s.TSval)
		binary.BigEndian.PutUint32(d[4:], s.TSecr)
		o = append(o, nop, nop, layers.TCPOption{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d})
	}
	if s.HasWScale {
		o = append(o, nop, layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{byte(s.WScale)}})
	}
	if len(s.SACK) > 0 {
		d := make([]byte, 8*len(s.SACK))
		for i, b := range s.SACK {
			binary.BigEndian.PutUint32(d[8*i:], b[0])
			binary.BigEndian.PutUint32(d[8*i+4:], b[1])
		}
		o = append(o, nop, nop, layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(d)), OptionData: d})
	}
	return o
}

// Build serializes the segment with IP and TCP checksums computed by
// gopacket. It panics on inconsistent input (a test bug).
func (s TCP) Build() []byte {
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(s.Src.Port()), DstPort: layers.TCPPort(s.Dst.Port()),
		Seq: s.Seq, Ack: s.Ack, Window: s.Window,
		FIN: s.Flags&FIN != 0, SYN: s.Flags&SYN != 0, RST: s.Flags&RST != 0,
		PSH: s.Flags&PSH != 0, ACK: s.Flags&ACK != 0,
		Options: s.options(),
	}
	var ip gopacket.SerializableLayer
	src, dst := s.Src.Addr(), s.Dst.Addr()
	if src.Is4() != dst.Is4() {
		panic(fmt.Sprintf("packettest: mixed address families %v %v", src, dst))
	}
	if src.Is4() {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Flags: layers.IPv4DontFragment,
			SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		tcp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: net.IP(src.AsSlice()), DstIP: net.IP(dst.AsSlice())}
		tcp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ip, tcp, gopacket.Payload(s.Payload)); err != nil {
		panic(err)
	}
	b := buf.Bytes()
	if src.Is4() || len(s.IPv6ExtHeaders) == 0 {
		return b
	}
	// Splice extension headers in. The TCP checksum covers the upper-layer
	// length only, so it stays valid.
	out := append([]byte(nil), b[:40]...)
	prev := 6 // offset of the byte naming the next header
	for _, h := range s.IPv6ExtHeaders {
		out[prev] = h.Proto
		prev = len(out)
		out = append(out, h.Bytes...)
	}
	out[prev] = byte(layers.IPProtocolTCP)
	out = append(out, b[40:]...)
	binary.BigEndian.PutUint16(out[4:], uint16(len(out)-40))
	return out
}

// Oracle recomputes the TCP checksum of an IPv4 or IPv6 packet with
// gopacket (its checksum field taken as zero). It is the reference the
// packet path's own arithmetic is checked against.
func Oracle(pkt []byte) (uint16, error) {
	c := append([]byte(nil), pkt...)
	first := layers.LayerTypeIPv4
	if len(c) > 0 && c[0]>>4 == 6 {
		first = layers.LayerTypeIPv6
	}
	p := gopacket.NewPacket(c, first, gopacket.Default)
	tl, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok {
		return 0, fmt.Errorf("packettest: no TCP layer: %v", p.ErrorLayer())
	}
	if err := tl.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
		return 0, err
	}
	tl.Contents[16], tl.Contents[17] = 0, 0
	return tl.ComputeChecksum()
}

// HopByHop returns an 8-byte IPv6 hop-by-hop header holding a PadN option.
func HopByHop() ExtHeader {
	return ExtHeader{Proto: 0, Bytes: []byte{0, 0, 1, 4, 0, 0, 0, 0}}
}

// DstOpts returns a 16-byte IPv6 destination options header (PadN).
func DstOpts() ExtHeader {
	return ExtHeader{Proto: 60, Bytes: []byte{0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}
}

// Routing returns a type-4 (segment routing) routing header with segments
// left 0 and one 16-byte segment, 24 bytes.
func Routing() ExtHeader {
	b := make([]byte, 24)
	b[1], b[2], b[3] = 2, 4, 0
	return ExtHeader{Proto: 43, Bytes: b}
}

// Fragment returns an IPv6 fragment header at the given offset (in 8-byte
// units) with the more-fragments flag.
func Fragment(offset uint16, more bool) ExtHeader {
	b := make([]byte, 8)
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	return ExtHeader{Proto: 44, Bytes: b}
}

// AH returns an authentication header with a 12-byte ICV (24 bytes:
// payload length field 4, in 4-octet units minus 2).
func AH() ExtHeader {
	b := make([]byte, 24)
	b[1] = 4
	return ExtHeader{Proto: 51, Bytes: b}
}
