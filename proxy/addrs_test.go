package proxy

import "net/netip"

var (
	laptop4 = netip.MustParseAddrPort("192.168.42.10:50000")
	server4 = netip.MustParseAddrPort("203.0.113.5:443")
	laptop6 = netip.MustParseAddrPort("[fd00:42::10]:50000")
	server6 = netip.MustParseAddrPort("[2001:db8::5]:443")
)
