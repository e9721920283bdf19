package tun

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// mergeModel coalesces one run the way wireguard-go's GRO does, but more
// eagerly: it merges a candidate into the group of its flow whose next
// sequence number it continues (any UDP datagram into its flow's last
// group) without comparing any header byte, under the same size rules
// (only the last piece may be shorter; nothing after PSH). Then it cuts
// every group again as the kernel's GSO does: the head's headers for every
// piece, sequence numbers advanced, IPv4 ID incremented, PSH and FIN only
// on the last piece, lengths and checksums recomputed. A run that survives
// this model survives wireguard-go, which merges less.
func mergeModel(run [][]byte) [][]byte {
	type group struct {
		head   []byte
		c      candidate
		pieces [][]byte // payloads
		psh    bool
		end    uint32
	}
	var groups []*group
	var order []any // *group or []byte (written as is)
	for _, p := range run {
		var c candidate
		if !decodeCandidate(p, &c) || !c.merge {
			order = append(order, p)
			continue
		}
		pl := p[c.l3+c.l4:]
		merged := false
		for i := len(groups) - 1; i >= 0; i-- {
			g := groups[i]
			if g.c.key != c.key || g.c.ack != c.ack {
				continue
			}
			gso := len(g.pieces[0])
			last := len(g.pieces[len(g.pieces)-1])
			if last != gso || len(pl) > gso || g.psh || (c.isTCP && c.seq != g.end) {
				if !c.isTCP {
					break // UDP: only the flow's last group
				}
				continue
			}
			g.pieces = append(g.pieces, pl)
			g.end += uint32(len(pl))
			g.psh = c.isTCP && p[c.l3+13]&0x08 != 0
			merged = true
			break
		}
		if !merged {
			g := &group{head: p, c: c, pieces: [][]byte{pl}, end: c.seq + uint32(len(pl))}
			g.psh = c.isTCP && p[c.l3+13]&0x08 != 0
			groups = append(groups, g)
			order = append(order, g)
		}
	}
	var out [][]byte
	for _, o := range order {
		g, ok := o.(*group)
		if !ok {
			out = append(out, o.([]byte))
			continue
		}
		hl := g.c.l3 + g.c.l4
		seq := g.c.seq
		for i, pl := range g.pieces {
			q := make([]byte, hl+len(pl))
			copy(q, g.head[:hl])
			copy(q[hl:], pl)
			if g.c.key.v6 {
				binary.BigEndian.PutUint16(q[4:], uint16(len(q)-40))
			} else {
				binary.BigEndian.PutUint16(q[2:], uint16(len(q)))
				binary.BigEndian.PutUint16(q[4:], g.c.id+uint16(i))
			}
			t := q[g.c.l3:]
			if g.c.isTCP {
				binary.BigEndian.PutUint32(t[4:], seq)
				seq += uint32(len(pl))
				t[13] &^= 0x09 // PSH, FIN
				if i == len(g.pieces)-1 && g.psh {
					t[13] |= 0x08
				}
			} else {
				binary.BigEndian.PutUint16(t[4:], uint16(8+len(pl)))
			}
			fixChecksums(q)
			out = append(out, q)
		}
	}
	return out
}

// writeThroughModel cuts bufs into runs as Offload.Write does and passes
// each through mergeModel.
func writeThroughModel(bufs [][]byte) [][]byte {
	g := newGrouper(len(bufs) + 1)
	var out [][]byte
	for start := 0; start < len(bufs); {
		end := g.nextRun(bufs, 0, start)
		if end <= start {
			panic(fmt.Sprintf("nextRun(%d) = %d", start, end))
		}
		out = append(out, mergeModel(bufs[start:end])...)
		start = end
	}
	return out
}

// sameFlows reports how got differs from want as sequences per 5-tuple
// (what a merge may reorder is packets of different 5-tuples).
func sameFlows(got, want [][]byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d packets out, %d in", len(got), len(want))
	}
	split := func(ps [][]byte) map[groupKey][][]byte {
		m := map[groupKey][][]byte{}
		for _, p := range ps {
			var c candidate
			decodeCandidate(p, &c)
			m[c.key] = append(m[c.key], p)
		}
		return m
	}
	g, w := split(got), split(want)
	for k, ws := range w {
		gs := g[k]
		if len(gs) != len(ws) {
			return fmt.Errorf("flow %v: %d packets out, %d in", k.ports, len(gs), len(ws))
		}
		for i := range ws {
			if !bytes.Equal(gs[i], ws[i]) {
				return fmt.Errorf("flow %v packet %d changed (window %d, want %d):\n got % x\nwant % x", k.ports, i, tcpWindow(gs[i]), tcpWindow(ws[i]), gs[i], ws[i])
			}
		}
	}
	return nil
}

var (
	laptop = netip.MustParseAddrPort("10.1.0.2:40000")
	server = netip.MustParseAddrPort("10.2.0.1:443")
)

// dataRun is n contiguous, in-order data segments of one flow.
func dataRun(n, mss int, opts []byte) [][]byte {
	var ps [][]byte
	for i := 0; i < n; i++ {
		ps = append(ps, tcpPacket(seg{src: laptop, dst: server, seq: 1000 + uint32(i*mss), ack: 7, flags: 0x10,
			window: 500, id: uint16(100 + i), opts: opts, payloadLen: mss, fill: byte(i)}))
	}
	return ps
}

func TestMergeModelMergesAwayWindowsWithoutRuns(t *testing.T) {
	// The hazard the runs guard against: merged without cutting, the
	// rewritten window of the third segment is replaced by the head's.
	ps := dataRun(4, 1000, nil)
	setWindow(ps[2], 300)
	out := mergeModel(ps)
	if len(out) != 4 || tcpWindow(out[2]) != 500 {
		t.Fatalf("model without runs: %d packets, third window %d; want 4 and the head's 500", len(out), tcpWindow(out[2]))
	}
	if err := sameFlows(writeThroughModel(ps), ps); err != nil {
		t.Error(err)
	}
}

func TestNextRunCuts(t *testing.T) {
	mk := func() [][]byte { return dataRun(6, 1200, tcpTSOpts(9, 8)) }
	other := netip.MustParseAddrPort("10.1.0.3:40001")
	tests := []struct {
		name   string
		change func(ps [][]byte) [][]byte
		cuts   []int // run ends
	}{
		{"in order, same headers: one run", func(ps [][]byte) [][]byte { return ps }, []int{6}},
		{"window lowered on 3", func(ps [][]byte) [][]byte { setWindow(ps[3], 100); return ps }, []int{3, 4, 6}},
		{"window lowered on 3..5", func(ps [][]byte) [][]byte {
			for _, p := range ps[3:] {
				setWindow(p, 100)
			}
			return ps
		}, []int{3, 6}},
		{"sequence gap before 2", func(ps [][]byte) [][]byte { ps[2], ps[3] = ps[3], ps[2]; return ps }, []int{2, 3, 4, 6}},
		{"IPv4 ID jump on 4", func(ps [][]byte) [][]byte {
			binary.BigEndian.PutUint16(ps[4][4:], 9)
			fixChecksums(ps[4])
			return ps
		}, []int{4, 5, 6}},
		{"timestamp changes on 2", func(ps [][]byte) [][]byte {
			copy(ps[2][20+20:], tcpTSOpts(10, 8))
			fixChecksums(ps[2])
			return ps
		}, []int{2, 3, 6}}, // 2 differs from 1, and 3 (the old timestamp) from 2
		{"pure ACKs of another flow with changing windows: no cut", func(ps [][]byte) [][]byte {
			var r [][]byte
			for i, p := range ps {
				r = append(r, p, tcpPacket(seg{src: other, dst: server, seq: 5, ack: uint32(100 * i), flags: 0x10, window: uint16(1000 - i)}))
			}
			return r
		}, []int{12}},
		{"a pure ACK of the same connection between data: cut", func(ps [][]byte) [][]byte {
			ack := tcpPacket(seg{src: laptop, dst: server, seq: 1000 + 3*1200, ack: 7, flags: 0x10, window: 100, id: 103})
			return append(ps[:3:3], append([][]byte{ack}, ps[3:]...)...)
		}, []int{3, 7}}, // the ACK opens a run: nothing of its connection before it
		{"acknowledgment number changes on 3", func(ps [][]byte) [][]byte {
			binary.BigEndian.PutUint32(ps[3][20+8:], 8)
			fixChecksums(ps[3])
			return ps
		}, []int{3, 4, 6}},
		{"PSH on the last: one run", func(ps [][]byte) [][]byte {
			ps[5][20+13] |= 0x08
			fixChecksums(ps[5])
			return ps
		}, []int{6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ps := tc.change(mk())
			g := newGrouper(len(ps))
			var cuts []int
			for s := 0; s < len(ps); {
				s = g.nextRun(ps, 0, s)
				cuts = append(cuts, s)
			}
			if fmt.Sprint(cuts) != fmt.Sprint(tc.cuts) {
				t.Errorf("runs end at %v, want %v", cuts, tc.cuts)
			}
			if err := sameFlows(writeThroughModel(ps), ps); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestNextRunAllocatesNothing(t *testing.T) {
	ps := dataRun(64, 1400, tcpTSOpts(1, 2))
	for i := 0; i < 64; i += 7 {
		setWindow(ps[i], 10)
	}
	g := newGrouper(128)
	allocs := testing.AllocsPerRun(100, func() {
		for s := 0; s < len(ps); {
			s = g.nextRun(ps, 0, s)
		}
	})
	if allocs != 0 {
		t.Errorf("nextRun allocates %.1f times per batch", allocs)
	}
}

// fuzzFlow is one connection of a fuzzed batch.
type fuzzFlow struct {
	src      netip.AddrPort
	seq, ack uint32
	id       uint16
	ts       uint32
}

func fuzzFlows() []*fuzzFlow {
	return []*fuzzFlow{
		{src: netip.MustParseAddrPort("10.1.0.2:1000"), seq: 1},
		{src: netip.MustParseAddrPort("10.1.0.3:1001"), seq: 0xffffff00},
		{src: netip.MustParseAddrPort("[fd00::2]:1002"), seq: 77},
		{src: netip.MustParseAddrPort("[fd00::3]:1003"), seq: 1 << 31},
	}
}

// genBatch turns fuzz data into the batch a proxy writes: three bytes a
// segment over the four flows (in order or not, data or pure ACKs or
// other flags, timestamps changing or not, IPv4 IDs in step or not), each
// with a fuzzed verdict applied (pass, lower the window, drop a pure ACK:
// a dropped one is not in the batch). At most 128 segments.
func genBatch(data []byte, flows []*fuzzFlow, dst4, dst6 netip.AddrPort) [][]byte {
	var want [][]byte
	for n := 0; len(data) >= 3 && n < 128; n++ {
		a, b, c := data[0], data[1], data[2]
		data = data[3:]
		fl := flows[a&3]
		dst := dst4
		if fl.src.Addr().Is6() {
			dst = dst6
		}
		if a&0x10 != 0 {
			fl.ts++
		}
		var opts []byte
		if b&0x80 != 0 {
			opts = tcpTSOpts(fl.ts, 5)
		}
		l3 := 20
		if fl.src.Addr().Is6() {
			l3 = 40
		}
		plen := min(int(b&0x3f)*23, 1500-l3-20-len(opts)) // within a 1500-byte MTU
		flags := uint8(0x10)
		switch a >> 5 {
		case 1:
			flags |= 0x08 // PSH
		case 2:
			flags = 0x11 // FIN
		case 3:
			flags = 0x12 // SYN|ACK
		}
		if a&0x04 != 0 {
			fl.seq += 5000 // a gap
		}
		if a&0x08 != 0 {
			fl.id += 3
		}
		if b&0x40 != 0 {
			fl.ack += 1000
		}
		p := tcpPacket(seg{src: fl.src, dst: dst, seq: fl.seq, ack: fl.ack, flags: flags, window: 4000,
			id: fl.id, opts: opts, payloadLen: plen, fill: c})
		fl.seq += uint32(plen)
		fl.id++
		pure := plen == 0 && flags == 0x10
		switch {
		case c&3 == 1:
			setWindow(p, 4000-uint16(c))
		case c&3 == 2 && pure:
			continue // dropped: never in the batch
		}
		want = append(want, p)
	}
	return want
}

// FuzzWriteRuns drives the write path's invariants: a fuzzed sequence of
// segments over a few flows (in order or not, data or pure ACKs or other
// flags, IPv4 or IPv6, timestamps changing or not), a fuzzed proxy verdict
// on each (pass, lower the window, drop a pure ACK), then the runs and the
// eager merge model. What comes out must be exactly the survivors, in
// order, byte for byte: so every checksum is valid, no window is raised,
// only pure ACKs are gone and no byte changed but the proxy's window and
// checksum.
func FuzzWriteRuns(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 1, 0, 0, 2, 0, 0, 1, 0, 0, 0, 3, 0, 0})
	f.Add([]byte{0x10, 0x81, 0x02, 0x11, 0x00, 0x44, 0x90, 0x05, 0x11})
	f.Fuzz(func(t *testing.T, data []byte) {
		want := genBatch(data, fuzzFlows(), netip.MustParseAddrPort("10.2.0.1:443"), netip.MustParseAddrPort("[fd00:1::1]:443"))
		snap := make([][]byte, len(want))
		for i, p := range want {
			snap[i] = append([]byte(nil), p...)
		}
		got := writeThroughModel(want)
		for i, p := range got {
			if !checksumsValid(p) {
				t.Fatalf("packet %d: invalid checksum", i)
			}
		}
		if err := sameFlows(got, snap); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzMergeCandidate: no input panics the candidate test or nextRun.
func FuzzMergeCandidate(f *testing.F) {
	f.Add(dataRun(1, 10, nil)[0])
	f.Add(tcpPacket(seg{src: netip.MustParseAddrPort("[fd00::2]:1"), dst: netip.MustParseAddrPort("[fd00::1]:2"), flags: 0x10, payloadLen: 3}))
	f.Fuzz(func(t *testing.T, p []byte) {
		var c candidate
		decodeCandidate(p, &c)
		g := newGrouper(4)
		q := append([]byte(nil), p...)
		bufs := [][]byte{p, q, p}
		for s := 0; s < len(bufs); {
			n := g.nextRun(bufs, 0, s)
			if n <= s {
				t.Fatalf("nextRun(%d) = %d", s, n)
			}
			s = n
		}
	})
}
