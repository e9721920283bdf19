// Package proxy is the packet path: it reads every packet of the tethered
// laptop from a TUN device, keeps a table of TCP flows, asks the M2HO
// controller for a verdict on each segment of an m2ho-mode flow, applies
// the verdict (window rewrite with an RFC 1624 checksum update, or drop of a
// pure ACK) and writes the packet back. It fails open: whatever it cannot
// parse or does not know passes unchanged. The packet views and checksums
// it uses are in the leaf package proxy/packet.
package proxy
