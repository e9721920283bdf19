package wave

import (
	"container/heap"
	"testing"
	"time"
)

// A simulated path on virtual time: the Pacer and Queue in front of a
// bottleneck of rate R (bytes/s) with a drop-tail buffer, a one-way delay
// each way, and a QUIC-like receiver that acks every second packet at once
// and an odd one after max_ack_delay (25 ms), each ACK frame carrying the
// received packets of the last 256 packet numbers as ranges. The sender
// declares a packet lost when a packet 3 numbers above it is acked (RFC
// 9002 packet threshold). Everything is deterministic.

type simEvent struct {
	at   time.Time
	seq  uint64
	kind int // 1 receive, 2 ack arrival, 3 delayed-ack timer
	pn   int64
	ack  []AckRange
}

type eventHeap []simEvent

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(simEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type rateStep struct {
	from   time.Duration
	rate   float64       // bytes/s
	oneWay time.Duration // one-way delay from then on; 0 keeps the previous
}

type simLink struct {
	t       *testing.T
	p       *Pacer
	q       *Queue
	rates   []rateStep
	oneWay  time.Duration
	bufByte int // bottleneck buffer

	events  eventHeap
	seq     uint64
	pn      int64
	lastDep time.Time
	sentAt  map[int64]time.Time

	// receiver
	recv       map[int64]bool
	largest    int64
	unacked    int
	timerArmed bool
	timerGen   int64
	ackEvery   int // ack-eliciting packets per ACK frame (2: quic-go's packetsBeforeAck)

	// sender loss detection
	outstanding []int64

	// measurements, per bin
	bin       time.Duration
	delivered []int // bytes leaving the bottleneck per bin
	maxQDelay []time.Duration
	drops     int
	pkt       []byte
	now       time.Time
}

func newSimLink(t *testing.T, cfg Config, rates []rateStep, oneWay time.Duration, bufPackets int) *simLink {
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQueue(QueueConfig{MaxPackets: 64})
	if err != nil {
		t.Fatal(err)
	}
	return &simLink{t: t, p: p, q: q, rates: rates, oneWay: oneWay, bufByte: bufPackets * size,
		sentAt: map[int64]time.Time{}, recv: map[int64]bool{}, largest: -1,
		bin: 50 * time.Millisecond, pkt: make([]byte, size), ackEvery: 2}
}

func (s *simLink) rate(now time.Time) float64 {
	r := s.rates[0].rate
	for _, st := range s.rates {
		if now.Sub(t0) >= st.from {
			r = st.rate
		}
	}
	return r
}

func (s *simLink) delay(now time.Time) time.Duration {
	d := s.oneWay
	for _, st := range s.rates {
		if now.Sub(t0) >= st.from && st.oneWay > 0 {
			d = st.oneWay
		}
	}
	return d
}

func (s *simLink) push(e simEvent) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *simLink) binOf(at time.Time) int {
	b := int(at.Sub(t0) / s.bin)
	for len(s.delivered) <= b {
		s.delivered = append(s.delivered, 0)
		s.maxQDelay = append(s.maxQDelay, 0)
	}
	return b
}

// send is the Queue's send function: the packet enters the bottleneck.
func (s *simLink) sendAt(now time.Time) func([]byte) error {
	return func(b []byte) error {
		pn := s.pn
		s.pn++
		s.sentAt[pn] = now
		s.p.OnSent(now, pn, len(b), 1)
		s.outstanding = append(s.outstanding, pn)
		start := now
		if s.lastDep.After(start) {
			start = s.lastDep
		}
		backlog := start.Sub(now)
		bi := s.binOf(now)
		if backlog > s.maxQDelay[bi] {
			s.maxQDelay[bi] = backlog
		}
		if int(backlog.Seconds()*s.rate(now)) > s.bufByte {
			s.drops++
			return nil // dropped at the bottleneck, the sender does not know
		}
		dep := start.Add(time.Duration(float64(len(b)) / s.rate(start) * float64(time.Second)))
		s.lastDep = dep
		s.delivered[s.binOf(dep)] += len(b)
		s.push(simEvent{at: dep.Add(s.delay(dep)), kind: 1, pn: pn})
		return nil
	}
}

func (s *simLink) ackFrame() []AckRange {
	var r []AckRange
	lo := s.largest - 256
	for pn := s.largest; pn >= 0 && pn > lo; pn-- {
		if !s.recv[pn] {
			continue
		}
		if n := len(r); n > 0 && r[n-1].Smallest == pn+1 {
			r[n-1].Smallest = pn
		} else {
			r = append(r, AckRange{pn, pn})
		}
	}
	return r
}

func (s *simLink) sendAck(now time.Time) {
	s.unacked = 0
	s.timerArmed = false
	s.timerGen++ // an ACK sent cancels the delayed-ack timer
	s.push(simEvent{at: now.Add(s.delay(now)), kind: 2, ack: s.ackFrame()})
}

func (s *simLink) onAck(now time.Time, ranges []AckRange) {
	s.p.OnAck(now, ranges)
	largest := ranges[0].Largest
	keep := s.outstanding[:0]
	for _, pn := range s.outstanding {
		acked := false
		for _, r := range ranges {
			if pn >= r.Smallest && pn <= r.Largest {
				acked = true
				break
			}
		}
		switch {
		case acked:
		case pn+3 <= largest:
			s.p.OnLost(now, pn)
		default:
			keep = append(keep, pn)
		}
	}
	s.outstanding = keep
}

// run simulates until end with a backlogged sender.
func (s *simLink) run(end time.Duration) {
	now := s.now
	if now.IsZero() {
		now = t0
	}
	defer func() { s.now = now }()
	stop := t0.Add(end)
	for now.Before(stop) {
		for s.q.Len() < 20 {
			s.q.Push(s.pkt)
		}
		s.q.Release(now, s.p, s.sendAt(now))
		at, n := s.p.Next(now)
		next := stop
		if n > 0 && at.After(now) && at.Before(next) {
			next = at
		}
		if len(s.events) > 0 && s.events[0].at.Before(next) {
			next = s.events[0].at
		}
		if !next.After(now) && len(s.events) == 0 {
			s.t.Fatalf("simulation stuck at %v", now.Sub(t0))
		}
		now = next
		for len(s.events) > 0 && !s.events[0].at.After(now) {
			e := heap.Pop(&s.events).(simEvent)
			switch e.kind {
			case 1:
				s.recv[e.pn] = true
				if e.pn > s.largest {
					s.largest = e.pn
				}
				s.unacked++
				if s.unacked >= s.ackEvery {
					s.sendAck(e.at)
				} else if !s.timerArmed {
					s.timerArmed = true
					s.push(simEvent{at: e.at.Add(25 * time.Millisecond), kind: 3, pn: s.timerGen})
				}
			case 2:
				s.onAck(e.at, e.ack)
			case 3:
				if e.pn != s.timerGen {
					continue // cancelled
				}
				s.timerArmed = false
				if s.unacked > 0 {
					s.sendAck(e.at)
				}
			}
		}
	}
}

// rateOver is the delivered rate (bytes/s) over bins [from, to).
func (s *simLink) rateOver(from, to time.Duration) float64 {
	a, b := int(from/s.bin), int(to/s.bin)
	sum := 0
	for i := a; i < b && i < len(s.delivered); i++ {
		sum += s.delivered[i]
	}
	return float64(sum) / (to - from).Seconds()
}

// convergedAfter is the first time >= from after which every 100 ms
// window up to until delivers within 10 % of rate.
func (s *simLink) convergedAfter(from, until time.Duration, rate float64) (time.Duration, bool) {
	for t := from; t+100*time.Millisecond <= until; t += s.bin {
		ok := true
		for u := t; u+100*time.Millisecond <= until; u += s.bin {
			r := s.rateOver(u, u+100*time.Millisecond)
			if r < 0.9*rate || r > 1.1*rate {
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

func (s *simLink) maxDelay(from, to time.Duration) time.Duration {
	var m time.Duration
	for i := int(from / s.bin); i < int(to/s.bin) && i < len(s.maxQDelay); i++ {
		m = max(m, s.maxQDelay[i])
	}
	return m
}

const mbit = 1e6 / 8 // bytes/s per Mbit/s

func TestSimLinkLowBDPConverges(t *testing.T) {
	R := 10 * mbit
	s := newSimLink(t, Config{}, []rateStep{{0, R, 0}}, 10*time.Millisecond, 100)
	s.run(5 * time.Second)
	conv, ok := s.convergedAfter(0, 5*time.Second, R)
	got := s.rateOver(2*time.Second, 5*time.Second)
	st := s.p.State()
	t.Logf("10 Mbit/s, RTT 20 ms: converged within 10%% after %v; rate 2-5 s %.2f Mbit/s (%.1f%% of R); max bottleneck queue 2-5 s %v; drops %d; mode %v TxTime %v ATD %v ΔRTT %v; measured %d recovery %d adjustments %d",
		conv, got/mbit, 100*got/R, s.maxDelay(2*time.Second, 5*time.Second), s.drops, st.Mode, st.TxTime, st.ATD, st.DeltaRTT, st.BurstsMeasured, st.RecoveryUpdates, st.Adjustments)
	if !ok || got < 0.9*R || got > 1.1*R {
		t.Fatalf("not within 10%% of R: %.2f Mbit/s", got/mbit)
	}
	// a short bottleneck queue: at most about two bursts
	if d := s.maxDelay(2*time.Second, 5*time.Second); d > 20*time.Millisecond {
		t.Fatalf("bottleneck queue up to %v, want short", d)
	}
}

func TestSimLinkHighBDPConverges(t *testing.T) {
	R := 10 * mbit
	s := newSimLink(t, Config{}, []rateStep{{0, R, 0}}, 300*time.Millisecond, 1000)
	s.run(10 * time.Second)
	conv, ok := s.convergedAfter(0, 10*time.Second, R)
	got := s.rateOver(4*time.Second, 10*time.Second)
	st := s.p.State()
	t.Logf("10 Mbit/s, RTT 600 ms: converged within 10%% after %v; rate 4-10 s %.2f Mbit/s (%.1f%%); max bottleneck queue %v; drops %d; mode %v TxTime %v measured %d recovery %d adjustments %d",
		conv, got/mbit, 100*got/R, s.maxDelay(4*time.Second, 10*time.Second), s.drops, st.Mode, st.TxTime, st.BurstsMeasured, st.RecoveryUpdates, st.Adjustments)
	if !ok || got < 0.9*R || got > 1.1*R {
		t.Fatalf("not within 10%% of R: %.2f Mbit/s", got/mbit)
	}
}

func TestSimLinkRateSwitch(t *testing.T) {
	lo, hi := 10*mbit, 40*mbit
	for _, c := range []struct {
		name   string
		r1, r2 float64
	}{{"up", lo, hi}, {"down", hi, lo}} {
		t.Run(c.name, func(t *testing.T) {
			sw := 3 * time.Second
			s := newSimLink(t, Config{}, []rateStep{{0, c.r1, 0}, {sw, c.r2, 0}}, 10*time.Millisecond, 100)
			s.run(6 * time.Second)
			before, ok1 := s.convergedAfter(0, sw, c.r1)
			after, ok2 := s.convergedAfter(sw, 6*time.Second, c.r2)
			st := s.p.State()
			t.Logf("%.0f → %.0f Mbit/s at %v (RTT 20 ms): first convergence %v; re-converged within 10%% %v after the switch; rate last 2 s %.2f Mbit/s; max bottleneck queue after re-convergence %v; drops %d; measured %d recovery %d adjustments %d",
				c.r1/mbit, c.r2/mbit, sw, before, after, s.rateOver(4*time.Second, 6*time.Second)/mbit, s.maxDelay(sw+after, 6*time.Second), s.drops, st.BurstsMeasured, st.RecoveryUpdates, st.Adjustments)
			if !ok1 || !ok2 {
				t.Fatalf("no convergence: before %v/%v after %v/%v", before, ok1, after, ok2)
			}
			if after > 500*time.Millisecond {
				t.Fatalf("re-convergence took %v, target <= 0.5 s", after)
			}
		})
	}
}

func TestSimLinkHandoverHint(t *testing.T) {
	// 10 → 40 Mbit/s "handover" at 3 s with a 27 ms interruption modelled
	// as the switch; compare re-convergence with and without the hint.
	lo, hi := 10*mbit, 40*mbit
	sw := 3 * time.Second
	res := map[bool]time.Duration{}
	for _, hint := range []bool{false, true} {
		s := newSimLink(t, Config{}, []rateStep{{0, lo, 0}, {sw, hi, 0}}, 10*time.Millisecond, 100)
		s.run(sw)
		if hint {
			if err := s.p.OnHandoverExecuted(t0.Add(sw), "mmWave", hi); err != nil {
				t.Fatal(err)
			}
		}
		s.run(5 * time.Second)
		after, ok := s.convergedAfter(sw, 5*time.Second, hi)
		if !ok {
			t.Fatalf("hint %v: no convergence", hint)
		}
		res[hint] = after
		first := s.rateOver(sw, sw+100*time.Millisecond)
		t.Logf("hint %v: re-converged after %v; first 100 ms after the switch %.2f Mbit/s", hint, after, first/mbit)
	}
	if res[true] > res[false] {
		t.Fatalf("the hint slowed re-convergence: %v with, %v without", res[true], res[false])
	}
}

// QUIC Wave's bdp-switch situation: the path switches between a low-BDP
// link (10 Mbit/s, RTT 20 ms) and a high-BDP one (40 Mbit/s, RTT 600 ms,
// satellite-like) mid-transfer.
func TestSimLinkBDPSwitch(t *testing.T) {
	lowR, highR := 10*mbit, 40*mbit
	low, high := 10*time.Millisecond, 300*time.Millisecond
	for _, c := range []struct {
		name       string
		r1, r2     float64
		d1, d2     time.Duration
		buf1, buf2 int
		wantWithin time.Duration
	}{
		// The RTT jumps 30-fold: samples above 10·min_rtt are ignored, so
		// the new RTT enters only through the pilots until ΔRTT > β forces
		// an adjustment, and the first train on the new path takes one new
		// RTT (600 ms): a few RTTs, not 0.5 s.
		{"low-to-high", lowR, highR, low, high, 100, 4000, 2 * time.Second},
		// The first ACK train through the slow link sets its rate.
		{"high-to-low", highR, lowR, high, low, 4000, 100, 500 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			sw := 5 * time.Second
			s := newSimLink(t, Config{}, []rateStep{{0, c.r1, c.d1}, {sw, c.r2, c.d2}}, c.d1, max(c.buf1, c.buf2))
			s.run(12 * time.Second)
			before, ok1 := s.convergedAfter(0, sw, c.r1)
			after, ok2 := s.convergedAfter(sw, 12*time.Second, c.r2)
			st := s.p.State()
			t.Logf("%s: first convergence %v (%v); re-converged within 10%% %v after the switch (%v); rate last 3 s %.2f Mbit/s; drops %d; filtered samples %d; measured %d recovery %d adjustments %d; final mode %v TxTime %v min_rtt %v",
				c.name, before, ok1, after, ok2, s.rateOver(9*time.Second, 12*time.Second)/mbit, s.drops, st.SamplesFiltered, st.BurstsMeasured, st.RecoveryUpdates, st.Adjustments, st.Mode, st.TxTime, st.MinRTT)
			if !ok1 || !ok2 || after > c.wantWithin {
				t.Fatalf("re-convergence %v (converged %v), want within %v", after, ok2, c.wantWithin)
			}
		})
	}
}

// QUIC Wave's recovery mode: a receiver that acks a whole burst in one
// frame (as with GSO, or quic-go on loopback where a batch of packets is
// read before an ACK goes out) leaves no dispersion; TxTime then follows
// 0.4·TxTime + 0.2·(rtt − min_rtt), whose fixed point is (rtt − min_rtt)/3:
// the sender probes until a queue of about 3·TxTime stands.
func TestSimLinkRecoveryMode(t *testing.T) {
	R := 10 * mbit
	s := newSimLink(t, Config{}, []rateStep{{0, R, 0}}, 10*time.Millisecond, 100)
	s.ackEvery = 10
	s.run(5 * time.Second)
	st := s.p.State()
	got := s.rateOver(2*time.Second, 5*time.Second)
	t.Logf("recovery mode, 10 Mbit/s RTT 20 ms: rate 2-5 s %.2f Mbit/s (%.1f%%); max bottleneck queue %v; drops %d; mode %v TxTime %v; recovery %d measured %d adjustments %d; burst %d grows %d shrinks %d lossy %d applim %d",
		got/mbit, 100*got/R, s.maxDelay(2*time.Second, 5*time.Second), s.drops, st.Mode, st.TxTime, st.RecoveryUpdates, st.BurstsMeasured, st.Adjustments, st.BurstPackets, st.BurstGrows, st.BurstShrinks, st.BurstsLossy, st.BurstsAppLimited)
	if st.RecoveryUpdates == 0 || st.BurstsMeasured != 0 {
		t.Fatalf("recovery %d measured %d: the link should leave no ACK train", st.RecoveryUpdates, st.BurstsMeasured)
	}
	if got < 0.9*R {
		t.Fatalf("recovery mode reaches only %.2f Mbit/s", got/mbit)
	}
}
