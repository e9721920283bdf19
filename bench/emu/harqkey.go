package emu

import (
	"math/rand/v2"
	"time"

	"github.com/m2ho/m2ho/proxy/packet"
)

// harqKeyBytes is how much of a TCP payload keys its retransmission
// decision: enough that two different MSS-sized pieces of a byte stream
// (pseudo-random in the tests, any real content otherwise) practically
// never share a key.
const harqKeyBytes = 32

// PayloadRetx returns a Config.Retx deciding each packet's HARQ
// retransmission (with probability cfg.HARQFraction, delay drawn from
// cfg.RetxDelay) from a hash of the seed and the first bytes of its TCP
// payload, read through payload(id). A packet without TCP payload (pure
// ACKs, SYNs, non-TCP) is never retransmitted. The same segment of the
// same byte stream therefore meets the same fate in every run, also when
// the sender retransmits it, and the model's random stream is not
// consumed per packet, so the rest of the scenario (report leads) draws
// the same values too. It allocates nothing per packet.
func PayloadRetx(cfg Config, seed uint64, payload func(id uint64) []byte) func(uint64) (time.Duration, bool) {
	if seed == 0 {
		seed = cfg.Seed
	}
	var parsed packet.Parsed
	pcg := rand.NewPCG(0, 0)
	rng := rand.New(pcg)
	return func(id uint64) (time.Duration, bool) {
		if cfg.HARQFraction <= 0 {
			return 0, false
		}
		pl := tcpPayload(&parsed, payload(id))
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

// tcpPayload is the TCP payload of an IPv4 or IPv6 packet, nil for
// anything else, a fragment or a truncated one. p is the parser's scratch,
// owned by the caller's closure, so nothing escapes per packet.
func tcpPayload(p *packet.Parsed, b []byte) []byte {
	if !p.Decode(b) || p.Proto != packet.ProtoTCP || !p.TCPParsed || p.Fragment || p.PayloadLen <= 0 {
		return nil
	}
	off := p.L4Off + p.TCPHdrLen
	return b[off : off+p.PayloadLen]
}
