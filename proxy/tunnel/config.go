package tunnel

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	connectip "github.com/quic-go/connect-ip-go"
)

// ConnectIPPath is the path of the CONNECT-IP endpoint (RFC 9484 §3's
// default well-known location, without flow-forwarding variables, which
// connect-ip-go does not support).
const ConnectIPPath = "/.well-known/masque/ip/"

// HintsPath is the path of the hints channel (HINTS.md).
const HintsPath = "/.well-known/m2ho/hints"

// HintsProtocol is the :protocol of the hints channel's extended CONNECT.
const HintsProtocol = "m2ho-hints"

// prefixRoutes turns configured route prefixes into the RFC 9484 ROUTE_ADVERTISEMENT
// ranges, in the order the RFC requires (IPv4 first, increasing, disjoint);
// overlapping prefixes are an error naming both.
func prefixRoutes(prefixes []netip.Prefix) ([]connectip.IPRoute, error) {
	ps := make([]netip.Prefix, len(prefixes))
	for i, p := range prefixes {
		ps[i] = p.Masked()
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if a.Addr().BitLen() != b.Addr().BitLen() {
			return cmp.Compare(a.Addr().BitLen(), b.Addr().BitLen())
		}
		return a.Addr().Compare(b.Addr())
	})
	out := make([]connectip.IPRoute, 0, len(ps))
	for i, p := range ps {
		if i > 0 && ps[i-1].Overlaps(p) {
			return nil, fmt.Errorf("routes %s and %s overlap", ps[i-1], p)
		}
		out = append(out, connectip.IPRoute{StartIP: p.Addr(), EndIP: lastAddr(p)})
	}
	return out, nil
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 7; j >= 0; j-- {
			if i*8+(7-j) >= bits {
				b[i] |= 1 << j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
