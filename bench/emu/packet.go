package emu

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/m2ho/m2ho/proxy/packet"
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
	dst, ok := packet.IPDst(p)
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
// ACK. The packet is read through packet.Parsed, so IPv6 extension headers
// are followed as the proxy follows them; what does not parse, fragments
// and non-TCP packets are never duplicates.
func (c *DupAckCounter) Observe(b []byte) bool {
	var p packet.Parsed
	if !p.Decode(b) || p.Proto != packet.ProtoTCP || !p.TCPParsed || p.Fragment {
		return false
	}
	const fin, syn, rst, ack = 0x01, 0x02, 0x04, 0x10
	if p.Flags&ack == 0 {
		return false
	}
	k := flowKey{src: p.Src, dst: p.Dst, sp: p.SrcPort, dp: p.DstPort}
	st := ackState{ack: p.Ack, win: p.Window}
	pure := p.PayloadLen == 0 && p.Flags&(fin|syn|rst) == 0
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
