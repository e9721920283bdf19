package emu

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// Classifier decides a packet's direction through the emulated link from
// its destination: inside one of the UE-side prefixes (the phone and the
// laptops behind it) means downlink, anything else uplink. It looks at the
// IP header only and allocates nothing.
type Classifier struct {
	UE []netip.Prefix
}

// Dir returns the packet's direction; ok is false for what the link does
// not carry: not IPv4/IPv6, truncated, or multicast / link-local
// destinations (the kernel's own neighbour and MLD chatter on the TUN).
func (c *Classifier) Dir(p []byte) (d Dir, ok bool) {
	dst, ok := dstAddr(p)
	if !ok || dst.IsMulticast() || dst.IsLinkLocalUnicast() || dst.IsUnspecified() {
		return 0, false
	}
	for _, pf := range c.UE {
		if pf.Contains(dst) {
			return Down, true
		}
	}
	return Up, true
}

func dstAddr(p []byte) (netip.Addr, bool) {
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(p[16:20])), true
	case len(p) >= 40 && p[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(p[24:40])), true
	}
	return netip.Addr{}, false
}

// ParsePrefixes parses UE-side prefixes ("10.77.1.0/24", "fd77:1::/64", or
// a bare address meaning a single host), naming the bad one.
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if p, err := netip.ParsePrefix(f); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("UE prefix %q: not a prefix (10.77.1.0/24) or an address", f)
			}
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// RoutePrefixes extracts the destinations of `ip -o route show dev X`
// output: the prefixes reachable through the phone-side interface, which
// are the UE side of the link. Default, link-local and multicast routes
// are skipped, as are lines it does not understand.
func RoutePrefixes(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dst := f[0]
		if dst == "unicast" && len(f) > 1 {
			dst = f[1]
		}
		p, err := netip.ParsePrefix(dst)
		if err != nil {
			a, aerr := netip.ParseAddr(dst)
			if aerr != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if a := p.Addr(); a.IsLinkLocalUnicast() || a.IsMulticast() || p.Bits() == 0 {
			continue
		}
		ps = append(ps, p.Masked())
	}
	return ps
}

// flowKey names one direction of a TCP connection.
type flowKey struct {
	src, dst netip.Addr
	sp, dp   uint16
}

type ackState struct {
	ack uint32
	win uint16
}

// DupAckCounter counts duplicate ACKs the way the sender's TCP counts
// them (Linux tcp_ack: no data, no SYN/FIN/RST, the same cumulative ACK
// and the same window as the previous ACK of the flow; SACK blocks do not
// matter). Fed with the uplink packets the link delivers, it counts what
// the server sees. Observing a known flow allocates nothing; MaxFlows
// bounds the table (further flows are not tracked).
type DupAckCounter struct {
	MaxFlows int // 0 = 65536
	Dups     int64
	flows    map[flowKey]ackState
}

// Observe looks at one IP packet and reports whether it is a duplicate
// ACK.
func (c *DupAckCounter) Observe(p []byte) bool {
	var k flowKey
	var tcp []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if p[9] != 6 || ihl < 20 || total > len(p) || total < ihl+20 || binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 {
			return false // not TCP, malformed, or a fragment
		}
		k.src, k.dst = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		tcp = p[ihl:total]
	case len(p) >= 40 && p[0]>>4 == 6:
		total := 40 + int(binary.BigEndian.Uint16(p[4:6]))
		if p[6] != 6 || total > len(p) || total < 60 {
			return false // not TCP (extension headers are not followed)
		}
		k.src, k.dst = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		tcp = p[40:total]
	default:
		return false
	}
	off := int(tcp[12]>>4) * 4
	flags := tcp[13]
	const fin, syn, rst, ack = 0x01, 0x02, 0x04, 0x10
	if off < 20 || off > len(tcp) || flags&ack == 0 {
		return false
	}
	k.sp, k.dp = binary.BigEndian.Uint16(tcp[0:2]), binary.BigEndian.Uint16(tcp[2:4])
	st := ackState{ack: binary.BigEndian.Uint32(tcp[8:12]), win: binary.BigEndian.Uint16(tcp[14:16])}
	pure := off == len(tcp) && flags&(fin|syn|rst) == 0
	if c.flows == nil {
		c.flows = make(map[flowKey]ackState)
	}
	prev, known := c.flows[k]
	if !known {
		max := c.MaxFlows
		if max == 0 {
			max = 65536
		}
		if len(c.flows) >= max {
			return false
		}
	}
	c.flows[k] = st
	if known && pure && prev == st {
		c.Dups++
		return true
	}
	return false
}

// FormatPrefixes renders prefixes comma-separated, as ParsePrefixes reads
// them.
func FormatPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
