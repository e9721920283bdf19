package packet

import (
	"encoding/binary"
	"testing"

	"github.com/m2ho/m2ho/proxy/packettest"
)

// TestSetTCPWindowChecksum checks the RFC 1624 update against a full
// recomputation and gopacket's serializer, across windows that flip the
// checksum through its 0x0000/0xffff edge.
func TestSetTCPWindowChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		src, dst := laptop4, server4
		if v6 {
			src, dst = laptop6, server6
		}
		for _, w := range []uint16{0, 1, 100, 0x7fff, 0x8000, 0xfffe, 0xffff} {
			b := packettest.TCP{Src: src, Dst: dst, Seq: 1, Ack: 2, Flags: packettest.ACK, Window: 0xffff, HasTS: true,
				Payload: []byte("x")}.Build()
			var p Parsed
			if !p.Decode(b) {
				t.Fatal(p.Err)
			}
			SetTCPWindow(b, &p, w)
			var q Parsed
			if !q.Decode(b) || q.Window != w || p.Window != w {
				t.Fatalf("v6=%v w=%d: window now %d (view %d)", v6, w, q.Window, p.Window)
			}
			got := binary.BigEndian.Uint16(b[q.L4Off+TCPChecksumOff:])
			oracle, err := packettest.Oracle(b)
			if err != nil {
				t.Fatal(err)
			}
			if got != oracle || got != TCPChecksum(b, &q) || !TCPChecksumValid(b, &q) {
				t.Fatalf("v6=%v w=%d: checksum %#04x, gopacket %#04x, recomputed %#04x", v6, w, got, oracle, TCPChecksum(b, &q))
			}
		}
	}
}

// TestUpdateChecksumMatchesRecompute runs eqn. 3 over every 16-bit word
// value at one position of a small buffer.
func TestUpdateChecksumMatchesRecompute(t *testing.T) {
	buf := []byte{0x45, 0x00, 0x12, 0x34, 0xab, 0xcd, 0xff, 0xff}
	full := func() uint16 { return ^fold(sum16(0, buf)) }
	hc := full()
	for m1 := 0; m1 <= 0xffff; m1++ {
		m := binary.BigEndian.Uint16(buf[2:])
		binary.BigEndian.PutUint16(buf[2:], uint16(m1))
		hc = UpdateChecksum(hc, m, uint16(m1))
		if want := full(); hc != want {
			t.Fatalf("word %#04x: incremental %#04x, full %#04x", m1, hc, want)
		}
	}
}

func TestSetTCPWindowAllocs(t *testing.T) {
	b := packettest.TCP{Src: laptop4, Dst: server4, Flags: packettest.ACK, Window: 5000}.Build()
	var p Parsed
	p.Decode(b)
	if n := testing.AllocsPerRun(1000, func() { SetTCPWindow(b, &p, 4000) }); n != 0 {
		t.Fatalf("SetTCPWindow allocates %v times", n)
	}
}
