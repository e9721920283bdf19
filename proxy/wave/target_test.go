package wave

import (
	"container/heap"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// QUIC Wave's targets on virtual time. A tunnel sender (Wave through a
// Gate, or a Reno window standing in for quic-go's default controller,
// i.e. tunnel.PassThrough) sends wirePkt-byte QUIC packets from a tunnel
// queue (tail drop at 512 packets, as proxy/tunnel's queue) through a
// bottleneck of capacity C with a drop-tail buffer of B bytes and a
// one-way delay each way; a QUIC-like receiver acks every second packet,
// at once on a gap, else after max_ack_delay (25 ms). The sender declares
// losses as RFC 9002 does (3 packets or 9/8 RTT, plus a PTO-like timer).
// The application is either bulk (the tunnel queue never empties) or an
// inner TCP (Reno with SACK loss recovery in the manner of RFC 6675, IW 10,
// rwnd 4500 segments, delayed ACKs every second segment or 40 ms) whose
// segments are the tunnel's packets and whose ACKs come back over the
// tunnel's uplink (not the bottleneck).
// Everything is deterministic.

const (
	wirePkt   = DefaultNominalPacketBytes
	tunQueue  = 512
	ackDelay  = 25 * time.Millisecond
	tcpDelAck = 40 * time.Millisecond
	tcpRwnd   = 4500
	tcpIW     = 10
)

// tev is an event: the three per-packet kinds are typed (no closure), the
// rare ones carry f. at is nanoseconds since t0.
type tev struct {
	at    int64
	seq   uint64
	kind  uint8 // tevFunc, tevRecv, tevAck, tevTCPAck
	pn    int64
	seg   int64
	d     time.Duration
	r     []AckRange
	sacks []int64
	f     func(time.Time)
}

const (
	tevFunc = iota
	tevRecv
	tevAck
	tevTCPAck
)

type tevHeap []tev

func (h tevHeap) Len() int { return len(h) }
func (h tevHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h tevHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *tevHeap) Push(x any)   { *h = append(*h, x.(tev)) }
func (h *tevHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// tunSender is the tunnel's downlink sender: the pacer seam plus the
// transport events it needs.
type tunSender interface {
	budget(now time.Time, queued int) (n int, wait time.Duration)
	sent(now time.Time, pn int64, bytes int)
	ack(now time.Time, ackDelay time.Duration, ranges []AckRange)
	lost(now time.Time, pn int64)
}

// waveSender is Wave as the tunnel runs it: a Gate in front, events
// through an Events buffer.
type waveSender struct {
	p  *Pacer
	g  *Gate
	ev *Events
	// tr, when set, is quic-go below Wave (quicgo_test.go), trq its
	// datagram queue: Wave releases into trq, tr sends from it.
	tr  *qgTransport
	trq []int64
}

func newWaveSender(t *testing.T, cfg Config) *waveSender {
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev := NewEvents(0)
	return &waveSender{p: p, g: NewGate(p, ev), ev: ev}
}

func (w *waveSender) budget(now time.Time, queued int) (int, time.Duration) {
	return w.g.Budget(now, queued)
}
func (w *waveSender) sent(now time.Time, pn int64, bytes int) {
	w.g.Sent(now, bytes)
	w.ev.Sent(now, pn, bytes, 1)
}
func (w *waveSender) ack(now time.Time, d time.Duration, r []AckRange) {
	w.ev.AckedDelayed(now, d, r)
	if w.tr != nil {
		w.tr.ack(now, r)
	}
}
func (w *waveSender) lost(now time.Time, pn int64) {
	w.ev.Lost(now, pn)
	if w.tr != nil {
		w.tr.lost(now, pn)
	}
}

// renoSender is quic-go v0.65's default: its cubic_sender in Reno mode
// (initial window 32 packets, β = 0.7, one reduction per recovery period,
// window ≤ 10000 packets). quic-go's pacer (rate 1.25·cwnd/srtt) is left
// out: it spreads a window over an RTT but does not change how full the
// window keeps the bottleneck buffer.
type renoSender struct {
	cwnd, ssthresh float64
	inflight       int
	largestSent    int64
	recoveryEnd    int64
	bytes          []int32 // by packet number; 0: not in flight
}

func newRenoSender() *renoSender {
	return &renoSender{cwnd: 32 * wirePkt, ssthresh: math.Inf(1), recoveryEnd: -1}
}

func (r *renoSender) budget(_ time.Time, queued int) (int, time.Duration) {
	room := int(r.cwnd) - r.inflight
	if room <= 0 {
		return 0, 0 // an ACK or a loss opens the window
	}
	return min(queued, (room+wirePkt-1)/wirePkt), 0
}
func (r *renoSender) sent(_ time.Time, pn int64, b int) {
	r.inflight += b
	for int64(len(r.bytes)) <= pn {
		r.bytes = append(r.bytes, 0)
	}
	r.bytes[pn] = int32(b)
	r.largestSent = pn
}
func (r *renoSender) ack(_ time.Time, _ time.Duration, ranges []AckRange) {
	for _, rg := range ranges {
		for pn := rg.Smallest; pn <= rg.Largest && pn < int64(len(r.bytes)); pn++ {
			b := int(r.bytes[pn])
			if b == 0 {
				continue
			}
			r.bytes[pn] = 0
			r.inflight -= b
			if pn <= r.recoveryEnd {
				continue
			}
			if r.cwnd < r.ssthresh {
				r.cwnd += float64(b)
			} else {
				r.cwnd += wirePkt * float64(b) / r.cwnd
			}
			r.cwnd = min(r.cwnd, 10000*wirePkt)
		}
	}
}
func (r *renoSender) lost(_ time.Time, pn int64) {
	if pn >= int64(len(r.bytes)) || r.bytes[pn] == 0 {
		return
	}
	r.inflight -= int(r.bytes[pn])
	r.bytes[pn] = 0
	if pn > r.recoveryEnd {
		r.cwnd = max(r.cwnd*0.7, 2*wirePkt)
		r.ssthresh = r.cwnd
		r.recoveryEnd = r.largestSent
	}
}

type sentRec struct {
	at    time.Time
	seg   int64 // inner TCP segment it carries (-1: bulk)
	state uint8 // 0 in flight, 1 acked, 2 lost
}

// tsim is one run: path, tunnel sender, application.
type tsim struct {
	t     *testing.T
	steps []rateStep
	buf   int
	snd   tunSender
	tcp   bool
	// bdpQueue bounds the tunnel queue at Wave's BDP estimate
	bdpQueue bool
	// ackJitter, when > 0, delays each ACK frame's arrival at the sender
	// by a pseudo-random amount in [0, ackJitter) (order kept: a frame
	// never overtakes the one before): the real stack's processing and
	// scheduling delays on a loaded host (see jitter.go's comment).
	ackJitter  time.Duration
	jitterRand uint64
	lastAckAt  int64
	// fwdJitter, when > 0, delays each packet on its way from the sender
	// to the bottleneck by a pseudo-random amount in [0, fwdJitter), order
	// kept (see noisefloor_test.go): RTT noise that the bottleneck's own
	// spacing removes from the ACK train (it can stretch a train, never
	// compress it below 1/C per packet).
	fwdJitter time.Duration
	lastEnter time.Time
	// rxStall, when > 0, makes the QUIC receiver stall: at a packet's
	// arrival, with probability 1/rxStallEvery, its goroutine is off the
	// CPU for a time uniform in [0, rxStall); what arrives meanwhile is
	// handled at the stall's end as one batch with one ACK frame, as
	// quic-go handles a backlog (see jitter_test.go).
	rxStall      time.Duration
	rxStallEvery uint64
	stallEnd     time.Time
	stalled      []tev
	batching     bool

	now    time.Time
	events tevHeap
	seq    uint64

	// tunnel queue: inner segment numbers (bulk: -1)
	q         []int64
	qDrops    int
	pn        int64
	lastDep   time.Time
	bneckDrop int

	// sender-side records, index pn
	recs          []sentRec
	head          int64 // lowest pn not yet resolved
	largestAcked  int64
	srtt, latest  time.Duration
	ptoArmed      bool
	tunRTTSum     []float64 // per bin: sum of packet RTTs (s) acked in it
	tunRTTN       []int
	delivered     []int // bytes leaving the bottleneck per bin
	goodput       []int // bytes delivered in order to the application per bin
	bin           time.Duration
	recv          []bool
	recvAt        []time.Time
	rLargest      int64
	rUnacked      int
	rTimerGen     int
	rTimerPending bool

	// inner TCP (sender on the server side, receiver on the phone)
	una, nxt      int64
	cwnd, ssth    float64
	beta          float64 // window factor after a loss: Reno's 0.5, CUBIC's 0.7
	dup           int
	inRec         bool
	recover       int64
	segSent       []time.Time
	segRetx       []bool
	sacked        []bool
	sackedInWin   int
	highSack      int64
	rxCur         int64 // next hole to retransmit in recovery
	sackNew       []int64
	rackArmed     bool
	tsrtt, trvar  time.Duration
	rto           time.Duration
	rtoGen        int
	rcvNxt        int64
	ooo           map[int64]bool
	rcvUnacked    int
	rcvTimerGen   int
	tcpRTTSum     []float64
	tcpRTTN       []int
	retransmits   int
	rtoFires      int
	innerSegsSent int

	// HyStart's view of slow start (Linux tcp_cubic.c, its delay test:
	// from a window of hsLowWindow segments on, per round, until the ACK
	// passes what was sent when the round began, the minimum of the
	// round's RTT samples once it has hsMinSamples of them, against the
	// connection's minimum; slow start ends where that excess passes
	// clamp(min/8, 4 ms, 16 ms)). The model's Reno does not act on it:
	// hsWorst is the largest excess of the minimum of a round's first
	// hsMinSamples samples while cwnd < hsWatchBelow, hsWorstCwnd the
	// cwnd then (see TestStartupRampInnerSlowStart).
	hsRoundEnd    int64
	hsCurr, hsMin time.Duration
	hsSamples     int
	hsWatchBelow  float64
	hsWorst       time.Duration
	hsWorstCwnd   float64
}

const (
	hsLowWindow  = 16
	hsMinSamples = 8
)

// hystartSample feeds one RTT sample of an ACK up to a to HyStart's view
// (see tsim.hsWorst).
func (s *tsim) hystartSample(a int64, rtt time.Duration) {
	if s.hsMin == 0 || rtt < s.hsMin {
		s.hsMin = rtt
	}
	if s.cwnd >= s.ssth || s.cwnd < hsLowWindow {
		return
	}
	if a > s.hsRoundEnd {
		s.hsRoundEnd, s.hsCurr, s.hsSamples = s.nxt, 0, 0
	}
	if s.hsCurr == 0 || rtt < s.hsCurr {
		s.hsCurr = rtt
	}
	if s.hsSamples++; s.hsSamples != hsMinSamples {
		return
	}
	if ex := s.hsCurr - s.hsMin; ex > s.hsWorst && s.cwnd < s.hsWatchBelow {
		s.hsWorst, s.hsWorstCwnd = ex, s.cwnd
	}
}

func newTsim(t *testing.T, steps []rateStep, buf int, snd tunSender, tcp bool) *tsim {
	s := &tsim{t: t, steps: steps, buf: buf, snd: snd, tcp: tcp, now: t0, bin: 50 * time.Millisecond,
		largestAcked: -1, rLargest: -1, highSack: -1, cwnd: tcpIW, ssth: math.Inf(1), beta: 0.5, rto: time.Second, ooo: map[int64]bool{}}
	return s
}

func (s *tsim) rate(at time.Time) float64 {
	r := s.steps[0].rate
	for _, st := range s.steps {
		if at.Sub(t0) >= st.from {
			r = st.rate
		}
	}
	return r
}

func (s *tsim) delay(at time.Time) time.Duration {
	d := s.steps[0].oneWay
	for _, st := range s.steps {
		if at.Sub(t0) >= st.from && st.oneWay > 0 {
			d = st.oneWay
		}
	}
	return d
}

func (s *tsim) after(at time.Time, f func(time.Time)) {
	s.push(tev{at: int64(at.Sub(t0)), kind: tevFunc, f: f})
}

func (s *tsim) push(e tev) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *tsim) dispatch(e *tev) {
	at := t0.Add(time.Duration(e.at))
	switch e.kind {
	case tevRecv:
		if s.rxStall > 0 && s.stall(at, e) {
			return
		}
		s.receive(at, e.pn, e.seg)
	case tevAck:
		s.onAck(at, e.d, e.r)
	case tevTCPAck:
		s.tcpAck(at, e.seg, e.sacks)
	default:
		e.f(at)
	}
}

func (s *tsim) binOf(at time.Time) int {
	b := int(at.Sub(t0) / s.bin)
	for len(s.delivered) <= b {
		s.delivered = append(s.delivered, 0)
		s.goodput = append(s.goodput, 0)
		s.tunRTTSum = append(s.tunRTTSum, 0)
		s.tunRTTN = append(s.tunRTTN, 0)
		s.tcpRTTSum = append(s.tcpRTTSum, 0)
		s.tcpRTTN = append(s.tcpRTTN, 0)
	}
	return b
}

// release asks the tunnel sender and puts what it allows on the path.
// It asks again until the answer is "wait" (or the queue is empty), as the
// tunnel's sender loop does.
func (s *tsim) release(now time.Time) time.Duration {
	if w, ok := s.snd.(*waveSender); ok && w.tr != nil {
		return s.releaseOverQuic(now, w)
	}
	for len(s.q) > 0 {
		n, wait := s.snd.budget(now, len(s.q))
		if n <= 0 {
			return wait
		}
		for i := 0; i < n && len(s.q) > 0; i++ {
			seg := s.q[0]
			s.q = s.q[1:]
			pn := s.pn
			s.pn++
			s.recs = append(s.recs, sentRec{at: now, seg: seg})
			s.snd.sent(now, pn, wirePkt)
			s.bottleneck(now, pn, seg)
		}
		if !s.tcp {
			for len(s.q) < tunQueue {
				s.q = append(s.q, -1)
			}
		}
	}
	return 0
}

func (s *tsim) bottleneck(now time.Time, pn, seg int64) {
	if !s.ptoArmed {
		s.armPTO(now)
	}
	if s.fwdJitter > 0 {
		now = now.Add(time.Duration(s.rand() % uint64(s.fwdJitter)))
		if now.Before(s.lastEnter) {
			now = s.lastEnter
		}
		s.lastEnter = now
	}
	start := now
	if s.lastDep.After(start) {
		start = s.lastDep
	}
	if start.Sub(now).Seconds()*s.rate(now)+wirePkt > float64(s.buf) {
		s.bneckDrop++
		return
	}
	dep := start.Add(time.Duration(wirePkt / s.rate(start) * float64(time.Second)))
	s.lastDep = dep
	s.delivered[s.binOf(dep)] += wirePkt
	s.push(tev{at: int64(dep.Add(s.delay(dep)).Sub(t0)), kind: tevRecv, pn: pn, seg: seg})
}

// receive is the QUIC receiver: ack every second packet, at once on a gap.
func (s *tsim) receive(now time.Time, pn, seg int64) {
	for int64(len(s.recv)) <= pn {
		s.recv = append(s.recv, false)
	}
	s.recv[pn] = true
	for int64(len(s.recvAt)) <= pn {
		s.recvAt = append(s.recvAt, time.Time{})
	}
	s.recvAt[pn] = now
	gap := pn != s.rLargest+1
	if pn > s.rLargest {
		s.rLargest = pn
	}
	s.rUnacked++
	if s.batching {
		// one ACK for the batch, after it (stall)
	} else if s.rUnacked >= 2 || gap {
		s.sendAck(now)
	} else if !s.rTimerPending {
		s.rTimerPending = true
		gen := s.rTimerGen
		s.after(now.Add(ackDelay), func(at time.Time) {
			if gen == s.rTimerGen && s.rUnacked > 0 {
				s.sendAck(at)
			}
		})
	}
	if s.tcp {
		s.tcpReceive(now, seg)
	} else {
		s.goodput[s.binOf(now)] += wirePkt
	}
}

func (s *tsim) sendAck(now time.Time) {
	s.rUnacked = 0
	s.rTimerGen++
	s.rTimerPending = false
	var r []AckRange
	for pn := s.rLargest; pn >= 0 && pn > s.rLargest-64; pn-- {
		if !s.recv[pn] {
			continue
		}
		if n := len(r); n > 0 && r[n-1].Smallest == pn+1 {
			r[n-1].Smallest = pn
		} else {
			r = append(r, AckRange{pn, pn})
		}
	}
	d := now.Sub(s.recvAt[s.rLargest])
	at := int64(now.Add(s.delay(now)).Sub(t0))
	if s.ackJitter > 0 {
		at += int64(s.jitter())
		at = max(at, s.lastAckAt)
		s.lastAckAt = at
	}
	s.push(tev{at: at, kind: tevAck, d: d, r: r})
}

// stall defers a packet arriving while the receiver is stalled (or starts
// a stall); it reports whether the packet was deferred.
func (s *tsim) stall(at time.Time, e *tev) bool {
	if !at.Before(s.stallEnd) {
		if s.rand()%s.rxStallEvery != 0 {
			return false
		}
		s.stallEnd = at.Add(time.Duration(s.rand() % uint64(s.rxStall)))
		s.after(s.stallEnd, func(now time.Time) {
			s.batching = true
			for _, d := range s.stalled {
				s.receive(now, d.pn, d.seg)
			}
			s.batching = false
			s.stalled = s.stalled[:0]
			if s.rUnacked > 0 {
				s.sendAck(now)
			}
		})
	}
	s.stalled = append(s.stalled, *e)
	return true
}

// rand is a fixed-seed xorshift: the same draws in every run of a test.
func (s *tsim) rand() uint64 { return xorshift(&s.jitterRand) }

// xorshift advances *state (0: the fixed seed) and returns it: the same
// draws in every run.
func xorshift(state *uint64) uint64 {
	if *state == 0 {
		*state = 0x9e3779b97f4a7c15
	}
	x := *state
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*state = x
	return x
}

// jitter draws from [0, ackJitter) with a fixed-seed xorshift: the same
// delays in every run of a test.
func (s *tsim) jitter() time.Duration {
	return time.Duration(s.rand() % uint64(s.ackJitter))
}

// onAck is the sender's side of an ACK frame: RTT samples, loss detection.
func (s *tsim) onAck(now time.Time, ackDelay time.Duration, ranges []AckRange) {
	s.snd.ack(now, ackDelay, ranges)
	bi := s.binOf(now)
	for _, rg := range ranges {
		for pn := max(rg.Smallest, s.head); pn <= rg.Largest; pn++ {
			r := &s.recs[pn]
			if r.state != 0 {
				continue
			}
			r.state = 1
			rtt := now.Sub(r.at)
			s.tunRTTSum[bi] += rtt.Seconds()
			s.tunRTTN[bi]++
			if pn > s.largestAcked {
				s.largestAcked = pn
				s.latest = rtt
				if s.srtt == 0 {
					s.srtt = rtt
				} else {
					s.srtt = (7*s.srtt + rtt) / 8
				}
			}
		}
	}
	thr := 9 * max(s.srtt, s.latest) / 8
	for s.head < int64(len(s.recs)) {
		r := &s.recs[s.head]
		switch {
		case r.state != 0:
		case s.head+3 <= s.largestAcked || (s.head < s.largestAcked && !r.at.After(now.Add(-thr))):
			r.state = 2
			s.snd.lost(now, s.head)
		default:
			return
		}
		s.head++
	}
}

// armPTO declares lost what stayed unacknowledged for max(3·srtt +
// max_ack_delay, 1 s): RFC 9002's probe timeout would find a tail loss out
// one probe later.
func (s *tsim) armPTO(now time.Time) {
	s.ptoArmed = true
	s.after(now.Add(10*time.Millisecond), func(at time.Time) {
		s.ptoArmed = false
		// at least 1 s: a path whose RTT jumps (bdp-switch) must not see
		// its packets declared lost before their first ACK could return
		pto := max(3*s.srtt+ackDelay, time.Second)
		for s.head < int64(len(s.recs)) {
			r := &s.recs[s.head]
			if r.state == 0 {
				if r.at.After(at.Add(-pto)) {
					break
				}
				r.state = 2
				s.snd.lost(at, s.head)
			}
			s.head++
		}
		if s.head < int64(len(s.recs)) {
			s.armPTO(at)
		}
	})
}

// queueLimit bounds the tunnel queue: 512 packets (proxy/tunnel's
// default), or with bdpQueue the Gate's QueueLimit.
func (s *tsim) queueLimit() int {
	if !s.bdpQueue {
		return tunQueue
	}
	if l := s.snd.(*waveSender).g.QueueLimit(); l > 0 {
		return l
	}
	return tunQueue
}

// inner TCP sender: fill the tunnel queue while the window allows.
// SACKed segments are out of the network: they leave room in the window.
func (s *tsim) tcpSend(now time.Time) {
	for s.nxt < s.una+int64(min(s.cwnd+float64(s.sackedInWin), tcpRwnd)) {
		if s.nxt < int64(len(s.sacked)) && s.sacked[s.nxt] {
			s.nxt++
			continue
		}
		s.tcpXmit(now, s.nxt)
		s.nxt++
	}
}

func (s *tsim) tcpXmit(now time.Time, seg int64) {
	for int64(len(s.segSent)) <= seg {
		s.segSent = append(s.segSent, time.Time{})
		s.segRetx = append(s.segRetx, false)
		s.sacked = append(s.sacked, false)
	}
	if !s.segSent[seg].IsZero() {
		s.segRetx[seg] = true
		s.retransmits++
	}
	s.segSent[seg] = now
	s.innerSegsSent++
	if len(s.q) >= s.queueLimit() {
		s.qDrops++ // tail drop at the tunnel's queue
	} else {
		s.q = append(s.q, seg)
	}
	s.armRTO(now)
}

func (s *tsim) armRTO(now time.Time) {
	s.rtoGen++
	gen := s.rtoGen
	s.after(now.Add(s.rto), func(at time.Time) {
		if gen != s.rtoGen || s.una >= s.nxt {
			return
		}
		s.rtoFires++
		s.ssth = max(float64(s.nxt-s.una)*s.beta, 2)
		s.cwnd = 1
		s.inRec = false
		s.dup = 0
		s.nxt = s.una // go-back-N over what was not SACKed
		s.rto = min(2*s.rto, 4*time.Second)
		s.tcpSend(at)
	})
}

func (s *tsim) tcpAck(now time.Time, a int64, sacks []int64) {
	newSack := false
	for _, g := range sacks {
		if g >= s.una && g < int64(len(s.sacked)) && !s.sacked[g] {
			s.sacked[g] = true
			s.sackedInWin++
			s.highSack = max(s.highSack, g)
			newSack = true
		}
	}
	for g := s.una; g < a; g++ {
		if s.sacked[g] {
			s.sackedInWin--
		}
	}
	switch {
	case a > s.una:
		newly := float64(a - s.una)
		last := a - 1
		if !s.segRetx[last] {
			rtt := now.Sub(s.segSent[last])
			bi := s.binOf(now)
			s.tcpRTTSum[bi] += rtt.Seconds()
			s.tcpRTTN[bi]++
			if s.tsrtt == 0 {
				s.tsrtt, s.trvar = rtt, rtt/2
			} else {
				d := s.tsrtt - rtt
				if d < 0 {
					d = -d
				}
				s.trvar = (3*s.trvar + d) / 4
				s.tsrtt = (7*s.tsrtt + rtt) / 8
			}
			s.rto = max(s.tsrtt+4*s.trvar, 200*time.Millisecond)
			s.hystartSample(a, rtt)
		}
		s.una = a
		if s.nxt < s.una {
			s.nxt = s.una
		}
		s.dup = 0
		if s.inRec {
			if a >= s.recover {
				s.inRec = false
				s.cwnd = s.ssth
			}
		} else if s.cwnd < s.ssth {
			s.cwnd += newly
		} else {
			s.cwnd += newly / s.cwnd
		}
		if s.una < s.nxt {
			s.armRTO(now)
		} else {
			s.rtoGen++
		}
	case a == s.una && s.nxt > s.una && newSack:
		s.dup++
		if s.dup == 3 && !s.inRec {
			s.ssth = max(float64(s.nxt-s.una-int64(s.sackedInWin))*s.beta, 2)
			s.cwnd = s.ssth
			s.inRec = true
			s.recover = s.nxt
			s.rxCur = s.una
		}
	}
	s.tcpRecover(now)
	s.tcpSend(now)
}

// tcpRecover retransmits the holes below the highest SACK, two per call
// (an ACK, or the RACK-like timer that finds lost retransmissions when no
// ACK comes).
func (s *tsim) tcpRecover(now time.Time) {
	if s.inRec {
		if !s.rackArmed {
			s.rackArmed = true
			s.after(now.Add(5*s.tsrtt/4+time.Millisecond), func(at time.Time) {
				s.rackArmed = false
				s.tcpRecover(at)
				s.tcpSend(at)
			})
		}
		s.rxCur = max(s.rxCur, s.una)
		if s.rxCur >= s.highSack && now.Sub(s.segSent[s.una]) > 5*s.tsrtt/4 {
			s.rxCur = s.una // a retransmission was lost too (RACK would see it)
		}
		for n := 0; n < 2 && s.rxCur < s.highSack; s.rxCur++ {
			if !s.sacked[s.rxCur] && (!s.segRetx[s.rxCur] || now.Sub(s.segSent[s.rxCur]) > 5*s.tsrtt/4) {
				s.tcpXmit(now, s.rxCur)
				n++
			}
		}
	}
}

// inner TCP receiver (on the phone): cumulative ACKs, delayed every second
// in-order segment or 40 ms, at once out of order; they return over the
// tunnel's uplink.
func (s *tsim) tcpReceive(now time.Time, seg int64) {
	immediate := false
	switch {
	case seg == s.rcvNxt:
		s.rcvNxt++
		for s.ooo[s.rcvNxt] {
			delete(s.ooo, s.rcvNxt)
			s.rcvNxt++
			immediate = true
		}
		s.goodput[s.binOf(now)] += int(wirePkt * 1) // in order
	case seg > s.rcvNxt:
		if !s.ooo[seg] {
			s.ooo[seg] = true
			s.sackNew = append(s.sackNew, seg)
		}
		immediate = true
	default:
		immediate = true // duplicate
	}
	// goodput counts each in-order segment once; a hole filled releases the
	// segments behind it
	s.rcvUnacked++
	if immediate || s.rcvUnacked >= 2 {
		s.tcpSendAck(now)
		return
	}
	s.rcvTimerGen++
	gen := s.rcvTimerGen
	s.after(now.Add(tcpDelAck), func(at time.Time) {
		if gen == s.rcvTimerGen && s.rcvUnacked > 0 {
			s.tcpSendAck(at)
		}
	})
}

func (s *tsim) tcpSendAck(now time.Time) {
	s.rcvUnacked = 0
	s.rcvTimerGen++
	a := s.rcvNxt
	sacks := s.sackNew
	s.sackNew = nil
	s.push(tev{at: int64(now.Add(s.delay(now)).Sub(t0)), kind: tevTCPAck, seg: a, sacks: sacks})
}

// run simulates until end (from t0).
func (s *tsim) run(end time.Duration) {
	stop := t0.Add(end)
	if s.tcp && s.nxt == 0 {
		s.tcpSend(s.now)
	}
	for {
		now := s.now
		if !s.tcp {
			for len(s.q) < tunQueue {
				s.q = append(s.q, -1)
			}
		}
		wait := s.release(now)
		next := stop
		if wait > 0 && now.Add(wait).Before(next) {
			next = now.Add(wait)
		}
		if len(s.events) > 0 {
			if at := t0.Add(time.Duration(s.events[0].at)); at.Before(next) {
				next = at
			}
		}
		if !next.Before(stop) {
			s.now = stop
			return
		}
		s.now = next
		nowNs := int64(next.Sub(t0))
		for len(s.events) > 0 && s.events[0].at <= nowNs {
			e := heap.Pop(&s.events).(tev)
			s.dispatch(&e)
		}
	}
}

// metrics over [from, to)
func (s *tsim) sumBins(v []int, from, to time.Duration) float64 {
	sum := 0
	for i := int(from / s.bin); i < int(to/s.bin) && i < len(v); i++ {
		sum += v[i]
	}
	return float64(sum) / (to - from).Seconds()
}

func (s *tsim) meanRTT(sum []float64, n []int, from, to time.Duration) time.Duration {
	var a float64
	var c int
	for i := int(from / s.bin); i < int(to/s.bin) && i < len(sum); i++ {
		a += sum[i]
		c += n[i]
	}
	if c == 0 {
		return 0
	}
	return time.Duration(a / float64(c) * float64(time.Second))
}

// goodputOver is the application's in-order goodput (bytes/s).
func (s *tsim) goodputOver(from, to time.Duration) float64 { return s.sumBins(s.goodput, from, to) }

// rtt is the mean RTT the application sees: the tunnel's packets' for
// bulk, the inner TCP's samples (tunnel queue included) for TCP.
func (s *tsim) rtt(from, to time.Duration) time.Duration {
	if s.tcp {
		return s.meanRTT(s.tcpRTTSum, s.tcpRTTN, from, to)
	}
	return s.meanRTT(s.tunRTTSum, s.tunRTTN, from, to)
}

// reach90 is how long after from the goodput first reaches and then keeps,
// in every 100 ms window until until, at least 90 % of rate.
func (s *tsim) reach90(from, until time.Duration, rate float64) (time.Duration, bool) {
	for t := from; t+100*time.Millisecond <= until; t += s.bin {
		ok := true
		for u := t; u+100*time.Millisecond <= until; u += s.bin {
			if s.goodputOver(u, u+100*time.Millisecond) < 0.9*rate {
				ok = false
				break
			}
		}
		if ok {
			return t - from, true
		}
	}
	return 0, false
}

// longSim skips a target simulation under the race detector: it is one
// goroutine on virtual time (nothing for the detector to find) and runs
// ~20 times slower there. Run the targets with
// `go test -count=1 -run Target -v ./proxy/wave/`.
func longSim(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("single-goroutine virtual-time simulation, ~20x slower under -race: run without -race (go test -run Target -v ./proxy/wave/)")
	}
}

type variant struct {
	name string
	mk   func(t *testing.T) tunSender
}

var (
	varQuic = variant{"quic (Reno)", func(*testing.T) tunSender { return newRenoSender() }}
	varWave = variant{"quic-wave", func(t *testing.T) tunSender { return newWaveSender(t, Config{}) }}
	// the queue bound at two estimates on every path (the delay cap off:
	// the model's inner TCP is Reno, see TestTargetHighBDP)
	varWaveBDP = variant{"quic-wave Qlim", func(t *testing.T) tunSender { return newWaveSender(t, Config{QueueDelay: -1}) }}
)

// variantsFor lists the senders compared: with an inner TCP also Wave
// with its queue bounded at its BDP estimate.
func variantsFor(tcp bool) []variant {
	if tcp {
		return []variant{varQuic, varWave, varWaveBDP}
	}
	return []variant{varQuic, varWave}
}

func newVariantSim(t *testing.T, v variant, steps []rateStep, buf int, tcp bool) *tsim {
	s := newTsim(t, steps, buf, v.mk(t), tcp)
	s.bdpQueue = v.name == varWaveBDP.name
	return s
}

func appName(tcp bool) string {
	if tcp {
		return "inner TCP"
	}
	return "bulk"
}

// report accumulates the figures of a target test for the log.
type report struct{ b strings.Builder }

func (r *report) row(format string, a ...any) { fmt.Fprintf(&r.b, format+"\n", a...) }

// QUIC Wave's low-BDP situation (bench scenario low-bdp: 50 Mbit/s, 10 ms
// base RTT, 1 MB buffer). Target: ≥ 40 % lower mean RTT than quic-go's
// default at ≤ 7 % goodput cost.
func TestTargetLowBDP(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 5 * time.Millisecond}}
	const end, from = 20 * time.Second, 5 * time.Second
	var rep report
	for _, tcp := range []bool{false, true} {
		res := map[string][2]float64{}
		for _, v := range variantsFor(tcp) {
			s := newVariantSim(t, v, steps, 1<<20, tcp)
			s.run(end)
			g, r := s.goodputOver(from, end), s.rtt(from, end)
			res[v.name] = [2]float64{g, r.Seconds()}
			rep.row("low-bdp %-9s %-12s %s", appName(tcp), v.name, s.summary(from, end, C))
		}
		for _, v := range variantsFor(tcp)[1:] {
			q, w := res[varQuic.name], res[v.name]
			rttCut, gCost := 1-w[1]/q[1], 1-w[0]/q[0]
			rep.row("low-bdp %-9s %s vs quic: mean RTT %.1f%% lower, goodput %.1f%% lower (targets: >= 40%%, <= 7%%)", appName(tcp), v.name, 100*rttCut, 100*gCost)
			if (rttCut < 0.40 || gCost > 0.07) && (!tcp || v.name == varWaveBDP.name) {
				t.Errorf("low-bdp %s %s: RTT %.1f%% lower, goodput cost %.1f%%: misses the target", appName(tcp), v.name, 100*rttCut, 100*gCost)
			}
		}
	}
	t.Log("\n" + rep.b.String())
}

func waveTail(s *tsim) string {
	w, ok := s.snd.(*waveSender)
	if !ok {
		return ""
	}
	st := w.p.State()
	return fmt.Sprintf("  [wave: mode %v TxTime %v burst %d measured %d partial %d recovery %d adjust %d app-limited %d grows %d shrinks %d]",
		st.Mode, st.TxTime.Round(time.Microsecond), st.BurstPackets, st.BurstsMeasured, st.BurstsPartial, st.RecoveryUpdates, st.Adjustments, st.BurstsAppLimited, st.BurstGrows, st.BurstShrinks)
}

func (s *tsim) summary(from, to time.Duration, C float64) string {
	g, r := s.goodputOver(from, to), s.rtt(from, to)
	tcp := ""
	if s.tcp {
		tcp = fmt.Sprintf(" inner TCP retransmits %d RTOs %d", s.retransmits, s.rtoFires)
	}
	return fmt.Sprintf("goodput %6.2f Mbit/s (%5.1f%% of C)  mean RTT %8v  tunnel RTT %8v  bottleneck drops %d tunnel-queue drops %d%s%s",
		g/mbit, 100*g/C, r.Round(10*time.Microsecond), s.meanRTT(s.tunRTTSum, s.tunRTTN, from, to).Round(10*time.Microsecond), s.bneckDrop, s.qDrops, tcp, waveTail(s))
}

// QUIC Wave's high-BDP situation (bench scenario high-bdp: 50 Mbit/s,
// 600 ms base RTT, 4 MB buffer). Target: the best goodput with the lowest
// RTT.
func TestTargetHighBDP(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 300 * time.Millisecond}}
	const end, from = 30 * time.Second, 5 * time.Second
	var rep report
	for _, tcp := range []bool{false, true} {
		res := map[string][2]float64{}
		for _, v := range variantsFor(tcp) {
			s := newVariantSim(t, v, steps, 4<<20, tcp)
			s.run(end)
			res[v.name] = [2]float64{s.goodputOver(from, end), s.rtt(from, end).Seconds()}
			rep.row("high-bdp %-9s %-12s %s", appName(tcp), v.name, s.summary(from, end, C))
		}
		for _, v := range variantsFor(tcp)[1:] {
			q, w := res[varQuic.name], res[v.name]
			rep.row("high-bdp %-9s %s vs quic: goodput %+.1f%%, mean RTT %+.1f%% (target: goodput >= quic's, RTT lower)", appName(tcp), v.name, 100*(w[0]/q[0]-1), 100*(w[1]/q[1]-1))
			// with an inner TCP its receive window (4500 segments) decides
			// the standing queue for every variant: same RTT at best
			worse := w[1] >= q[1]
			if tcp {
				worse = w[1] > 1.01*q[1]
			}
			if (w[0] < 0.99*q[0] || worse) && (!tcp || v.name == varWaveBDP.name) {
				t.Errorf("high-bdp %s %s: goodput %.2f vs %.2f Mbit/s, RTT %.0f vs %.0f ms: misses the target", appName(tcp), v.name, w[0]/mbit, q[0]/mbit, w[1]*1e3, q[1]*1e3)
			}
		}
	}
	// The model's inner TCP is Reno (it halves and regrows a segment per
	// round), which needs the full two estimates: varWaveBDP runs with the
	// delay cap off. Under the server's default cap (half an estimate at
	// 600 ms, sized for CUBIC's β 0.7 and measured with Linux CUBIC on the
	// bench: README, "The queue on a long path") the model shows what a
	// Reno sender would get; with β 0.7 but Reno's slow regrowth it is
	// still short of the link: the model has no CUBIC growth, so these
	// rows are reported, not judged.
	for _, beta := range []float64{0.5, 0.7} {
		s := newTsim(t, steps, 4<<20, newWaveSender(t, Config{}), true)
		s.bdpQueue, s.beta = true, beta
		s.run(end)
		rep.row("high-bdp inner TCP (β %.1f) quic-wave Qlim, delay cap on: %s", beta, s.summary(from, end, C))
	}
	t.Log("\n" + rep.b.String())
}

// QUIC Wave's switching situation (bench scenario bdp-switch: 50 Mbit/s
// with 10 ms base RTT and a 1 MB buffer, switching to 600 ms and 4 MB at
// 10 s and back at 20 s). Target: within 10 % of the new capacity in
// <= 0.5 s after each switch. quic-wave-hints gets an executed-handover
// hint with c_est = the new capacity at each switch.
func TestTargetBDPSwitch(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 5 * time.Millisecond}, {10 * time.Second, C, 300 * time.Millisecond}, {20 * time.Second, C, 5 * time.Millisecond}}
	const end = 30 * time.Second
	var rep report
	for _, tcp := range []bool{false, true} {
		for _, hints := range []bool{false, true} {
			for _, v := range variantsFor(tcp) {
				if hints && v.name == varQuic.name {
					continue
				}
				s := newVariantSim(t, v, steps, 4<<20, tcp)
				s.buf = 1 << 20
				s.after(t0.Add(10*time.Second), func(at time.Time) { s.buf = 4 << 20 })
				s.after(t0.Add(20*time.Second), func(at time.Time) { s.buf = 1 << 20 })
				name := v.name
				if hints {
					name += "-hints"
					w := s.snd.(*waveSender)
					for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
						s.after(t0.Add(at), func(now time.Time) {
							if err := w.g.HandoverExecuted(now, "sub6", C); err != nil {
								t.Fatal(err)
							}
						})
					}
				}
				s.run(end)
				up, ok1 := s.reach90(10*time.Second, 20*time.Second, C)
				down, ok2 := s.reach90(20*time.Second, 30*time.Second, C)
				rep.row("bdp-switch %-9s %-15s to 90%% of C after 10 ms→600 ms: %v (%v), after 600 ms→10 ms: %v (%v); goodput 10-20 s %.2f, 20-30 s %.2f Mbit/s; RTT 10-20 s %v, 20-30 s %v%s",
					appName(tcp), name, up, ok1, down, ok2, s.goodputOver(10*time.Second, 20*time.Second)/mbit, s.goodputOver(20*time.Second, 30*time.Second)/mbit,
					s.rtt(10*time.Second, 20*time.Second).Round(100*time.Microsecond), s.rtt(20*time.Second, 30*time.Second).Round(100*time.Microsecond), waveTail(s))
				if !tcp && hints && (!ok1 || !ok2 || up > 500*time.Millisecond || down > 500*time.Millisecond) {
					t.Errorf("bdp-switch bulk %s: %v / %v after the switches, target <= 0.5 s", name, up, down)
				}
			}
		}
	}
	t.Log("\n" + rep.b.String())
}

// The rate ceiling: a 1 Gbit/s mmWave cell (10 ms base RTT, 2 MB buffer).
// With fixed 10-packet bursts and the 1 ms TxTime floor Wave cannot pass
// ~108 Mbit/s; the adaptive burst reaches the capacity.
func TestTargetRateCeiling(t *testing.T) {
	longSim(t)
	C := 1000 * mbit
	steps := []rateStep{{0, C, 5 * time.Millisecond}}
	const end, from = 3 * time.Second, 1 * time.Second
	var rep report
	fixed := variant{"quic-wave fixed 10", func(t *testing.T) tunSender { return newWaveSender(t, Config{MaxBurstPackets: 10}) }}
	res := map[string]float64{}
	for _, v := range []variant{varQuic, fixed, varWave} {
		s := newTsim(t, steps, 2<<20, v.mk(t), false)
		s.run(end)
		res[v.name] = s.goodputOver(from, end)
		rep.row("1 Gbit/s bulk %-19s %s", v.name, s.summary(from, end, C))
	}
	t.Log("\n" + rep.b.String())
	if g := res[fixed.name]; g > 0.12*C {
		t.Errorf("fixed bursts reach %.0f Mbit/s: the ceiling the adaptive burst lifts is not there", g/mbit)
	}
	if g := res[varWave.name]; g < 0.9*C {
		t.Errorf("adaptive bursts reach %.0f Mbit/s, want >= 90%% of 1 Gbit/s", g/mbit)
	}
}

// A handover from sub6 (50 Mbit/s, 20 ms RTT) to mmWave (1 Gbit/s, 10 ms)
// at 2 s: without a hint Wave finds the new rate from its ACK trains
// (doubling the burst per measured burst at the floor); with the executed
// hint it starts from c_est at once. A predicted hint at 1.8 s caps bytes
// in flight at ŝ_max until then.
func TestTargetHandoverHints(t *testing.T) {
	lo, hi := 50*mbit, 1000*mbit
	steps := []rateStep{{0, lo, 10 * time.Millisecond}, {2 * time.Second, hi, 5 * time.Millisecond}}
	const end, sw = 4 * time.Second, 2 * time.Second
	var rep report
	res := map[bool]time.Duration{}
	for _, hints := range []bool{false, true} {
		w := newWaveSender(t, Config{})
		s := newTsim(t, steps, 2<<20, w, false)
		if hints {
			s.after(t0.Add(1800*time.Millisecond), func(now time.Time) {
				if err := w.g.HandoverPredicted(now, 256<<10); err != nil {
					t.Fatal(err)
				}
			})
			s.after(t0.Add(sw), func(now time.Time) {
				if err := w.g.HandoverExecuted(now, "mmWave", hi); err != nil {
					t.Fatal(err)
				}
			})
		}
		s.run(end)
		d, ok := s.reach90(sw, end, hi)
		if !ok {
			t.Fatalf("hints %v: never within 10%% of 1 Gbit/s", hints)
		}
		res[hints] = d
		rep.row("sub6→mmWave hints %-5v: to 90%% of 1 Gbit/s %v; goodput first 100 ms %.0f Mbit/s; RTT 1.8-2 s %v%s", hints, d,
			s.goodputOver(sw, sw+100*time.Millisecond)/mbit, s.rtt(1800*time.Millisecond, sw).Round(10*time.Microsecond), waveTail(s))
	}
	t.Log("\n" + rep.b.String())
	if res[true] > 500*time.Millisecond || res[true] > res[false] {
		t.Errorf("with the hint %v, without %v: want <= 0.5 s and no slower", res[true], res[false])
	}
}

// bdp-switch with executed hints whose c_est is 0 (unknown), which is what
// the phone sends on the real stack (its controller sees no delivery rate
// for tunnelled flows): the hint must still buy the switch (≤ 0.5 s to
// 90 % of C after each), by restarting the RTT estimate at the old rate
// instead of Wave's 200 ms cold start.
func TestTargetBDPSwitchUnknownRate(t *testing.T) {
	longSim(t)
	C := 50 * mbit
	steps := []rateStep{{0, C, 5 * time.Millisecond}, {10 * time.Second, C, 300 * time.Millisecond}, {20 * time.Second, C, 5 * time.Millisecond}}
	const end = 30 * time.Second
	w := newWaveSender(t, Config{})
	s := newTsim(t, steps, 1<<20, w, false)
	s.after(t0.Add(10*time.Second), func(at time.Time) { s.buf = 4 << 20 })
	s.after(t0.Add(20*time.Second), func(at time.Time) { s.buf = 1 << 20 })
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		s.after(t0.Add(at), func(now time.Time) {
			if err := w.g.HandoverExecuted(now, "sub6", 0); err != nil {
				t.Fatal(err)
			}
		})
	}
	s.run(end)
	up, ok1 := s.reach90(10*time.Second, 20*time.Second, C)
	down, ok2 := s.reach90(20*time.Second, 30*time.Second, C)
	t.Logf("bdp-switch bulk quic-wave-hints c_est unknown: to 90%% of C after 10 ms→600 ms %v (%v), after 600 ms→10 ms %v (%v); goodput 10-20 s %.2f, 20-30 s %.2f Mbit/s%s",
		up, ok1, down, ok2, s.goodputOver(10*time.Second, 20*time.Second)/mbit, s.goodputOver(20*time.Second, 30*time.Second)/mbit, waveTail(s))
	if !ok1 || !ok2 || up > 500*time.Millisecond || down > 500*time.Millisecond {
		t.Errorf("c_est unknown: %v / %v after the switches, target <= 0.5 s", up, down)
	}
	if st := w.p.State(); st.HintsNoRate != 2 || st.Adjustments != 0 {
		t.Errorf("hints without rate %d, adjustments %d: want 2, 0", st.HintsNoRate, st.Adjustments)
	}
}
