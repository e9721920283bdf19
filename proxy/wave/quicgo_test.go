package wave

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// qgTransport models what quic-go v0.65 does below Wave on the real
// stack: its cubic_sender in Reno mode (initial window 32 packets, β 0.7,
// one reduction per recovery period) with HyStart (hybrid_slow_start.go:
// per round, the least of its first 8 RTT samples against the
// connection's minimum, threshold clamp(min/8, 4 ms, 16 ms), from 16
// packets on), the window grown only while cwnd-limited (isCwndLimited:
// in flight within 3 packets of cwnd, or over half of it in slow start),
// and its pacer (a token bucket at 2·cwnd/srtt in slow start, 1.25·cwnd/srtt
// after, holding at most max(2 ms of that rate, 10 packets)). Wave's Gate
// hands datagrams to it through a 32-entry queue (SendDatagram blocks when
// it is full), and Wave's tracer sees the packets when this sends them.
type qgTransport struct {
	// the window, the bytes in flight and the loss response are the Reno
	// model's (renoSender); what differs is the growth (ack) and pacing
	renoSender
	sentAt       []time.Time
	numAcked     int
	srtt, minRTT time.Duration

	tokens   float64
	lastSent time.Time

	hsStarted bool
	hsEnd     int64
	hsCurr    time.Duration
	hsN       int
	hsFound   bool

	appLimitedAcks, limitedAcks int
	maxCwnd                     float64
}

const qgQueue = 32 // quic-go's datagram send queue

func newQGTransport() *qgTransport {
	return &qgTransport{renoSender: *newRenoSender()}
}

func (q *qgTransport) inSlowStart() bool { return q.cwnd < q.ssthresh }

func (q *qgTransport) rate() float64 { // bytes/s; 0: not pacing yet
	if q.srtt <= 0 {
		return 0
	}
	r := q.cwnd / q.srtt.Seconds()
	if q.inSlowStart() {
		return 2 * r
	}
	return 1.25 * r
}

func (q *qgTransport) tokensAt(now time.Time) float64 {
	r := q.rate()
	if r == 0 {
		return math.Inf(1)
	}
	maxBurst := max(r*0.002, 10*wirePkt)
	if q.lastSent.IsZero() {
		return maxBurst
	}
	return min(maxBurst, q.tokens+r*now.Sub(q.lastSent).Seconds())
}

func (q *qgTransport) budget(now time.Time, queued int) (int, time.Duration) {
	room := q.cwnd - float64(q.inflight)
	if room <= 0 {
		return 0, 0 // an ACK or a loss opens the window
	}
	n := min(queued, int(math.Ceil(room/wirePkt)))
	tok := q.tokensAt(now)
	if !math.IsInf(tok, 1) {
		np := int(tok / wirePkt)
		if np == 0 {
			return 0, max(time.Duration((wirePkt-tok)/q.rate()*float64(time.Second)), time.Microsecond)
		}
		n = min(n, np)
	}
	return n, 0
}

func (q *qgTransport) sent(now time.Time, pn int64, b int) {
	if t := q.tokensAt(now); !math.IsInf(t, 1) {
		q.tokens = max(0, t-float64(b))
	}
	q.lastSent = now
	q.renoSender.sent(now, pn, b)
	for int64(len(q.sentAt)) <= pn {
		q.sentAt = append(q.sentAt, time.Time{})
	}
	q.sentAt[pn] = now
}

func (q *qgTransport) cwndLimited(prior int) bool {
	if float64(prior) >= q.cwnd {
		return true
	}
	avail := q.cwnd - float64(prior)
	return (q.inSlowStart() && float64(prior) > q.cwnd/2) || avail <= 3*wirePkt
}

func (q *qgTransport) ack(now time.Time, ranges []AckRange) {
	prior := q.inflight
	var largest int64 = -1
	var acked []int64
	for _, rg := range ranges {
		for pn := rg.Smallest; pn <= rg.Largest && pn < int64(len(q.bytes)); pn++ {
			if q.bytes[pn] == 0 {
				continue
			}
			q.inflight -= int(q.bytes[pn])
			q.bytes[pn] = 0
			acked = append(acked, pn)
			largest = max(largest, pn)
		}
	}
	if largest < 0 {
		return
	}
	rtt := now.Sub(q.sentAt[largest])
	if q.minRTT == 0 || rtt < q.minRTT {
		q.minRTT = rtt
	}
	if q.srtt == 0 {
		q.srtt = rtt
	} else {
		q.srtt = (7*q.srtt + rtt) / 8
	}
	// HyStart (quic-go: MaybeExitSlowStart on each ACK, then per packet
	// OnPacketAcked, which ends the round)
	if q.inSlowStart() {
		if !q.hsStarted {
			q.hsStarted, q.hsEnd, q.hsCurr, q.hsN = true, q.largestSent, 0, 0
		}
		if !q.hsFound {
			q.hsN++
			if q.hsN <= 8 && (q.hsCurr == 0 || q.hsCurr > rtt) {
				q.hsCurr = rtt
			}
			if q.hsN == 8 {
				thr := min(max(q.minRTT/8, 4*time.Millisecond), 16*time.Millisecond)
				q.hsFound = q.hsCurr > q.minRTT+thr
			}
		}
		if q.hsFound && q.cwnd >= 16*wirePkt {
			q.ssthresh = q.cwnd
		}
	}
	for _, pn := range acked {
		if q.hsStarted && pn >= q.hsEnd {
			q.hsStarted = false
		}
		if pn <= q.recoveryEnd {
			continue
		}
		if !q.cwndLimited(prior) {
			q.appLimitedAcks++
			continue
		}
		q.limitedAcks++
		if q.inSlowStart() {
			q.cwnd += wirePkt
		} else if q.numAcked++; q.numAcked >= int(q.cwnd/wirePkt) {
			q.cwnd += wirePkt
			q.numAcked = 0
		}
		q.cwnd = min(q.cwnd, 10000*wirePkt)
	}
	q.maxCwnd = max(q.maxCwnd, q.cwnd)
}

// qgSender is quic-go alone (the bench's `quic` variant): its window and
// pacer decide what leaves the tunnel queue.
type qgSender struct{ *qgTransport }

func (q qgSender) ack(now time.Time, _ time.Duration, r []AckRange) { q.qgTransport.ack(now, r) }

// releaseOverQuic is tsim.release for Wave over quic-go: quic-go sends
// what its window and pacer allow from its queue, Wave moves what its
// Gate allows from the tunnel queue into quic-go's, while there is room.
func (s *tsim) releaseOverQuic(now time.Time, w *waveSender) time.Duration {
	for {
		progress := false
		var wait time.Duration
		for len(w.trq) > 0 {
			n, tw := w.tr.budget(now, len(w.trq))
			if n <= 0 {
				wait = tw
				break
			}
			for range n {
				seg := w.trq[0]
				w.trq = w.trq[1:]
				pn := s.pn
				s.pn++
				s.recs = append(s.recs, sentRec{at: now, seg: seg})
				w.ev.Sent(now, pn, wirePkt, 1)
				w.tr.sent(now, pn, wirePkt)
				s.bottleneck(now, pn, seg)
			}
			progress = true
		}
		for len(s.q) > 0 && len(w.trq) < qgQueue {
			n, ww := w.g.Budget(now, len(s.q))
			if n <= 0 {
				if ww > 0 && (wait == 0 || ww < wait) {
					wait = ww
				}
				break
			}
			for i := 0; i < n && len(s.q) > 0 && len(w.trq) < qgQueue; i++ {
				w.trq = append(w.trq, s.q[0])
				s.q = s.q[1:]
				w.g.Sent(now, wirePkt)
			}
			progress = true
			if !s.tcp {
				for len(s.q) < tunQueue {
					s.q = append(s.q, -1)
				}
			}
		}
		if !progress {
			return wait
		}
	}
}

func qgTail(q *qgTransport) string {
	return fmt.Sprintf("  [quic-go: cwnd %.0f KB (max %.0f), srtt %v, cwnd-limited ACKs %d, app-limited %d]",
		q.cwnd/1000, q.maxCwnd/1000, q.srtt.Round(100*time.Microsecond), q.limitedAcks, q.appLimitedAcks)
}

// TestWaveOverQuicGo runs Wave in front of the quic-go model, with an
// inner TCP and the bounded tunnel queue, against quic-go alone (the
// bench's `quic`), under 2 ms of ACK jitter, on mmWave-like cells of the
// bench's 5G drive (RTT 28 ms, 1 MB buffer).
//
// A steady 200 Mbit/s cell: Wave's bursts are measured through quic-go's
// pacer and it keeps the cell full at a lower RTT, so quic-go below does
// not by itself cost Wave its rate.
//
// A cell redrawn every 100 ms between 50 and 350 Mbit/s (mean ~200):
// the real stack's gap on the mixed drive (quic-wave 40-48 Mbit/s against
// quic's 68-73) appears (here Wave 0.59 of quic-go alone), and it is the
// tunnel queue's bound, not quic-go: the bound follows Wave's estimate
// down at each dip and drops the inner TCP's window (the queue-limit drops
// below), and the bound taken over the last second (QueueWindow, the
// opt-in --wave-queue-window) closes most of it (0.94 of quic-go alone,
// at an inner RTT of 51 ms against Wave's 31 and quic-go's 42: session
// 10's bench trade). quic-go's window does
// stop growing under Wave (few cwnd-limited ACKs), but it is not what
// binds; measuring the bursts its pacer spreads (tried on 2026-12-03 as
// an option, "paced trains") changed neither the model's goodput nor the
// bench's (two valid pairs, 0.94 and 1.04).
func TestWaveOverQuicGo(t *testing.T) {
	longSim(t)
	const end, from = 20 * time.Second, 5 * time.Second
	jitter := trainNoises[1]
	run := func(steps []rateStep, snd tunSender) *tsim {
		s := newTsim(t, steps, 1<<20, snd, true)
		_, s.bdpQueue = snd.(*waveSender)
		jitter.set(s)
		s.run(end)
		return s
	}
	overQuic := func(cfg Config) *waveSender {
		w := newWaveSender(t, cfg)
		w.tr = newQGTransport()
		return w
	}

	C := 200 * mbit
	steady := []rateStep{{0, C, 14 * time.Millisecond}}
	q := run(steady, qgSender{newQGTransport()})
	w := run(steady, overQuic(Config{}))
	t.Logf("steady, quic-go alone: %s%s", q.summary(from, end, C), qgTail(q.snd.(qgSender).qgTransport))
	t.Logf("steady, wave over quic-go: %s%s", w.summary(from, end, C), qgTail(w.snd.(*waveSender).tr))
	if g := w.goodputOver(from, end); g < 0.9*C {
		t.Errorf("steady: wave over quic-go %.0f%% of C, want >= 90%%", 100*g/C)
	}
	if rw, rq := w.rtt(from, end), q.rtt(from, end); rw > rq*8/10 {
		t.Errorf("steady: inner RTT %v with wave, %v with quic-go alone: want 20%% lower at least", rw, rq)
	}
	if m := w.snd.(*waveSender).p.State().BurstsMeasured; m < 1000 {
		t.Errorf("steady: %d bursts measured through quic-go's pacer, want >= 1000", m)
	}

	var varying []rateStep
	var rng uint64 = 7
	for at := time.Duration(0); at < end; at += 100 * time.Millisecond {
		varying = append(varying, rateStep{at, (50 + float64(xorshift(&rng)%300)) * mbit, 14 * time.Millisecond})
	}
	q = run(varying, qgSender{newQGTransport()})
	w = run(varying, overQuic(Config{}))
	win := run(varying, overQuic(Config{QueueWindow: time.Second}))
	gq, gw, gwin := q.goodputOver(from, end), w.goodputOver(from, end), win.goodputOver(from, end)
	t.Logf("varying, quic-go alone: %s%s", q.summary(from, end, C), qgTail(q.snd.(qgSender).qgTransport))
	t.Logf("varying, wave over quic-go: %s%s", w.summary(from, end, C), qgTail(w.snd.(*waveSender).tr))
	t.Logf("varying, wave over quic-go, queue window 1 s: %s%s", win.summary(from, end, C), qgTail(win.snd.(*waveSender).tr))
	if gw > 0.75*gq {
		t.Errorf("varying: wave %.0f%% of quic-go alone; the model no longer shows the bench's gap", 100*gw/gq)
	}
	if gwin < 0.85*gq {
		t.Errorf("varying: wave with the 1 s queue window %.0f%% of quic-go alone, want >= 85%%", 100*gwin/gq)
	}
	if w.qDrops < 3*win.qDrops {
		t.Errorf("varying: queue-limit drops %d with the current estimate, %d with the window: the bound is not what cuts the inner TCP", w.qDrops, win.qDrops)
	}
}
