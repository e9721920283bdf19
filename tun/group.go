package tun

import "encoding/binary"

// Write-side coalescing (GRO) and the proxy's verdicts.
//
// The offload device's Write hands a batch to wireguard-go's tun, which
// merges TCP (and UDP) segments of one flow into one large segment with a
// virtio-net GSO header; the kernel cuts it up again (GSO) on its way out,
// copying the head segment's headers into every piece. wireguard-go merges
// two TCP segments when they have payload, flags ACK or ACK|PSH, the same
// addresses, ports and acknowledgment number, equal TCP options, equal
// IPv4 TOS/TTL/DF (IPv6 traffic class and hop limit), and adjacent
// sequence numbers. It does not compare the window, the urgent pointer,
// the IPv6 flow label or the IPv4 ID. So a window the proxy lowered on the
// second of two segments would be replaced by the first one's on the wire:
// a raised window.
//
// writeGroups guards against that by cutting the batch into runs that are
// each written by their own call (wireguard-go coalesces only within one
// call): within a run, every packet that could be merged with an earlier
// packet of its flow is the exact in-order continuation of the previous
// one of its flow, with every header byte the kernel's re-segmentation
// copies from the head equal (window included), the next sequence number
// and, for IPv4, the next ID. Cutting the merged segment again therefore
// gives back every packet byte for byte (with its own valid checksum), so
// coalescing never merges away a rewrite, and a pure ACK (never merged)
// is never moved across data of its own connection, where the peer would
// take the older window last. A dropped ACK is never in the batch, so
// nothing revives it.

// groupKey names a 5-tuple: protocol, addresses and ports.
type groupKey struct {
	addrs [32]byte
	ports uint32
	proto uint8
	v6    bool
}

// groupSlot is the last packet of one 5-tuple in the current run.
type groupSlot struct {
	key groupKey
	idx int    // index of the packet in bufs
	ack uint32 // TCP acknowledgment number
	end uint32 // TCP: the sequence number after its payload
	id  uint16 // IPv4 ID
}

// grouper holds the per-run slots; its slice is allocated once.
type grouper struct {
	slots []groupSlot
}

func newGrouper(batch int) grouper {
	return grouper{slots: make([]groupSlot, 0, batch)}
}

// candidate describes a TCP or UDP packet.
type candidate struct {
	key   groupKey
	l3    int // IP header length
	l4    int // transport header length
	ack   uint32
	seq   uint32
	plen  int // payload length
	id    uint16
	isTCP bool
	// merge: wireguard-go's GRO might merge the packet with another.
	merge bool
}

// decodeCandidate reports whether p is a TCP or UDP packet the run check
// must look at, with c.merge set when wireguard-go's GRO could merge it
// with another. c.merge is a superset of wireguard-go's own test (a
// packet it accepts here but wireguard-go would not costs at most an
// extra cut), never a subset.
func decodeCandidate(p []byte, c *candidate) bool {
	c.merge = false
	if len(p) < 20 {
		return false
	}
	var proto uint8
	switch p[0] >> 4 {
	case 4:
		if int(binary.BigEndian.Uint16(p[2:])) != len(p) {
			return false // a length mismatch: never merged
		}
		c.l3 = int(p[0]&0x0f) * 4
		if c.l3 < 20 || c.l3 > len(p) {
			return false
		}
		proto = p[9]
		c.key.v6 = false
		copy(c.key.addrs[:8], p[12:20])
		clear(c.key.addrs[8:])
		c.id = binary.BigEndian.Uint16(p[4:])
		if binary.BigEndian.Uint16(p[6:])&0x3fff != 0 {
			return false // a fragment
		}
		c.merge = c.l3 == 20 // IPv4 options: never merged
	case 6:
		if len(p) < 40 || int(binary.BigEndian.Uint16(p[4:])) != len(p)-40 {
			return false
		}
		proto = p[6]
		c.l3 = 40
		c.key.v6 = true
		copy(c.key.addrs[:], p[8:40])
		c.id = 0
		c.merge = true
	default:
		return false
	}
	t := p[c.l3:]
	c.key.proto = proto
	switch proto {
	case 6:
		if len(t) < 20 {
			return false
		}
		c.l4 = int(t[12]>>4) * 4
		if c.l4 < 20 || c.l4 > len(t) {
			return false
		}
		if f := t[13] &^ 0x08; f != 0x10 { // ACK, possibly with PSH
			c.merge = false
		}
		c.ack = binary.BigEndian.Uint32(t[8:])
		c.seq = binary.BigEndian.Uint32(t[4:])
		c.isTCP = true
	case 17:
		if len(t) < 8 {
			return false
		}
		c.l4 = 8
		c.ack = 0
		c.seq = 0
		c.isTCP = false
	default:
		return false
	}
	c.key.ports = binary.BigEndian.Uint32(t[0:])
	c.plen = len(t) - c.l4
	c.merge = c.merge && c.plen > 0
	return true
}

// sameHeads reports whether every header byte the kernel's
// re-segmentation copies from a merged segment's head is equal in a and b:
// the IP header except length, ID and checksum; the TCP header except
// sequence number, checksum and PSH (which only the last piece keeps).
func sameHeads(a, b []byte, c *candidate) bool {
	if c.key.v6 {
		// version, traffic class, flow label; next header, hop limit
		if binary.BigEndian.Uint32(a) != binary.BigEndian.Uint32(b) || a[6] != b[6] || a[7] != b[7] {
			return false
		}
	} else {
		// version/IHL, TOS; flags/fragment offset, TTL, protocol
		if a[0] != b[0] || a[1] != b[1] || binary.BigEndian.Uint32(a[6:]) != binary.BigEndian.Uint32(b[6:]) {
			return false
		}
	}
	if !c.isTCP {
		return true
	}
	ta, tb := a[c.l3:], b[c.l3:]
	if ta[12] != tb[12] || ta[13]&^0x08 != tb[13]&^0x08 ||
		binary.BigEndian.Uint16(ta[14:]) != binary.BigEndian.Uint16(tb[14:]) || // window
		binary.BigEndian.Uint16(ta[18:]) != binary.BigEndian.Uint16(tb[18:]) { // urgent pointer
		return false
	}
	for i := 20; i < c.l4; i++ { // options
		if ta[i] != tb[i] {
			return false
		}
	}
	return true
}

// nextRun returns the end of the run of bufs that starts at start: the
// first index after start whose packet breaks the run, or len(bufs).
// Within a run, the packets of a 5-tuple that has a mergeable packet are
// all mergeable, each the exact continuation of the one before (same
// acknowledgment number, same heads, next sequence number, next IPv4 ID).
// So whatever wireguard-go merges is cut back into the same packets, and
// nothing of that 5-tuple is reordered around a merged segment (a pure ACK
// between two data segments of its connection ends the run). Packets are
// at bufs[i][offset:]; the caller has checked that every buffer is at
// least offset long.
func (g *grouper) nextRun(bufs [][]byte, offset, start int) int {
	g.slots = g.slots[:0]
	var c candidate
	for i := start; i < len(bufs); i++ {
		p := bufs[i][offset:]
		if !decodeCandidate(p, &c) {
			continue
		}
		s := g.find(&c.key)
		if s == nil {
			if !c.merge {
				continue
			}
			if len(g.slots) == cap(g.slots) {
				return i // more flows than slots: cut (never happens with batch-sized slots)
			}
			g.slots = append(g.slots, groupSlot{key: c.key})
			s = &g.slots[len(g.slots)-1]
		} else {
			ok := c.merge && c.ack == s.ack && sameHeads(bufs[s.idx][offset:], p, &c)
			if ok && c.isTCP {
				ok = c.seq == s.end
			}
			if ok && !c.key.v6 {
				ok = c.id == s.id+1
			}
			if !ok && i > start {
				return i
			}
		}
		s.idx = i
		s.ack = c.ack
		s.end = c.seq + uint32(c.plen)
		s.id = c.id
	}
	return len(bufs)
}

func (g *grouper) find(k *groupKey) *groupSlot {
	for i := range g.slots {
		if g.slots[i].key == *k {
			return &g.slots[i]
		}
	}
	return nil
}
