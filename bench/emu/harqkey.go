package emu

import (
	"encoding/binary"
	"math/rand/v2"
	"time"
)

// harqKeyBytes is how much of a TCP payload keys its retransmission
// decision: enough that two different MSS-sized pieces of a byte stream
// (pseudo-random in the tests, any real content otherwise) practically
// never share a key.
const harqKeyBytes = 32

// payloadRetx returns a Config.Retx deciding each packet's HARQ
// retransmission (with probability cfg.HARQFraction, delay drawn from
// cfg.RetxDelay) from a hash of the seed and the first bytes of its TCP
// payload, read through payload(id). A packet without TCP payload (pure
// ACKs, SYNs, non-TCP) is never retransmitted. The same segment of the
// same byte stream therefore meets the same fate in every run, also when
// the sender retransmits it, and the model's random stream is not
// consumed per packet, so the rest of the scenario (report leads) draws
// the same values too. It allocates nothing per packet.
func payloadRetx(cfg Config, seed uint64, payload func(id uint64) []byte) func(uint64) (time.Duration, bool) {
	if seed == 0 {
		seed = cfg.Seed
	}
	pcg := rand.NewPCG(0, 0)
	rng := rand.New(pcg)
	return func(id uint64) (time.Duration, bool) {
		if cfg.HARQFraction <= 0 {
			return 0, false
		}
		pl := tcpPayload(payload(id))
		if len(pl) == 0 {
			return 0, false
		}
		h := uint64(14695981039346656037) // FNV-1a
		for _, c := range pl[:min(len(pl), harqKeyBytes)] {
			h ^= uint64(c)
			h *= 1099511628211
		}
		pcg.Seed(h, seed)
		if rng.Float64() >= cfg.HARQFraction {
			return 0, false
		}
		return cfg.RetxDelay.Draw(rng), true
	}
}

// tcpPayload is the TCP payload of an IPv4 or IPv6 packet (IPv6 only
// without extension headers), nil for anything else or a truncated one.
func tcpPayload(p []byte) []byte {
	var l4 []byte
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if p[9] != 6 || ihl < 20 || total < ihl || total > len(p) ||
			binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 { // fragment
			return nil
		}
		l4 = p[ihl:total]
	case len(p) >= 40 && p[0]>>4 == 6:
		total := 40 + int(binary.BigEndian.Uint16(p[4:6]))
		if p[6] != 6 || total > len(p) {
			return nil
		}
		l4 = p[40:total]
	default:
		return nil
	}
	if len(l4) < 20 {
		return nil
	}
	off := int(l4[12]>>4) * 4
	if off < 20 || off > len(l4) {
		return nil
	}
	return l4[off:]
}
