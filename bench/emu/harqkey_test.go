package emu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// tcp4 builds an IPv4/TCP packet with the given payload and sequence
// number (header checksums are not needed by PayloadRetx).
func tcp4(seq uint32, payload []byte) []byte {
	p := make([]byte, 40+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	p[9] = 6
	binary.BigEndian.PutUint32(p[24:28], seq)
	p[32] = 5 << 4
	copy(p[40:], payload)
	return p
}

func TestPayloadRetxDeterministic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HARQFraction = 0.05
	cfg.RetxDelay = Dist{Kind: "uniform", Min: 5 * time.Millisecond, Max: 10 * time.Millisecond}
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	pkts := make([][]byte, n)
	for i := range pkts {
		pl := make([]byte, 1448)
		for j := range pl {
			pl[j] = byte(rng.Uint32())
		}
		// The sequence numbers differ between the two runs (random ISNs):
		// only the bytes decide.
		pkts[i] = tcp4(uint32(i), pl)
	}
	other := make([][]byte, n)
	for i := range other {
		other[i] = tcp4(uint32(i)+12345, pkts[i][40:])
	}
	a := PayloadRetx(cfg, 7, func(id uint64) []byte { return pkts[id] })
	b := PayloadRetx(cfg, 7, func(id uint64) []byte { return other[n-1-id] })
	hits := 0
	for i := range n {
		da, ra := a(uint64(i))
		db, rb := b(uint64(n - 1 - i))
		if ra != rb || da != db {
			t.Fatalf("packet %d: run A (%v, %v), run B (%v, %v): the same payload must meet the same fate", i, da, ra, db, rb)
		}
		if ra {
			hits++
			if da < cfg.RetxDelay.Min || da > cfg.RetxDelay.Max {
				t.Errorf("packet %d: delay %v outside the scenario's [%v, %v]", i, da, cfg.RetxDelay.Min, cfg.RetxDelay.Max)
			}
		}
	}
	if frac := float64(hits) / n; frac < 0.04 || frac > 0.06 {
		t.Errorf("%d of %d packets retransmitted (%.3f), want about the scenario's 0.05", hits, n, frac)
	}
	// Another seed makes other faults.
	c := PayloadRetx(cfg, 8, func(id uint64) []byte { return pkts[id] })
	same := 0
	for i := range n {
		_, ra := a(uint64(i))
		_, rc := c(uint64(i))
		if ra && rc {
			same++
		}
	}
	if same > hits/4 {
		t.Errorf("seeds 7 and 8 share %d of %d retransmissions: the seed does not enter the decision", same, hits)
	}
	// No payload, no retransmission: pure ACKs, SYNs and non-TCP pass.
	ack := tcp4(1, nil)
	udp := tcp4(1, []byte("payload"))
	udp[9] = 17
	for name, p := range map[string][]byte{"pure ACK": ack, "UDP": udp, "truncated": ack[:30], "empty": nil} {
		f := PayloadRetx(cfg, 7, func(uint64) []byte { return p })
		for range 100 {
			if _, r := f(0); r {
				t.Fatalf("%s: retransmitted", name)
			}
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { a(3) }); allocs != 0 {
		t.Errorf("PayloadRetx allocates %v per packet", allocs)
	}
}

func TestScenarioHARQBy(t *testing.T) {
	base := "name: x\nduration: 1s\ncells:\n  - {id: a, type: sub6, buffer: 1MB, capacity: {mbps: 10}}\nschedule: {start: a}\nerrors: {harq_fraction: 0.1, harq_by: %s}\n"
	for _, c := range []struct {
		by      string
		payload bool
		ok      bool
	}{{"random", false, true}, {"payload", true, true}, {"bytes", false, false}} {
		sc, err := ParseScenario("x", "", []byte(fmt.Sprintf(base, c.by)), LoadOptions{})
		if (err == nil) != c.ok {
			t.Errorf("harq_by %s: error %v, want ok=%v", c.by, err, c.ok)
			continue
		}
		if err == nil && sc.Config.HARQByPayload != c.payload {
			t.Errorf("harq_by %s: HARQByPayload %v", c.by, sc.Config.HARQByPayload)
		}
	}
}
