package wave

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Gate adapts a Pacer to a sender loop that owns its own queue and asks,
// before each send, how many of its queued packets may go (the shape of
// proxy/tunnel's Pacer seam: Budget(now, queued) (n, wait), then Sent per
// packet). It drains the transport's Events into the Pacer on each call,
// records the packets sent on one Budget answer as one release at that
// answer's instant, and serialises the hints, which come from another
// goroutine.
//
// There is no "burst-fill wait": a burst that is the whole queue goes at
// once, and the Pacer measures it (partial bursts are scaled, see the
// package comment), so a TCP sender inside the tunnel that hands over its
// segments one or two at a time is neither held back nor left unmeasured.
//
// Budget, Sent and the hint methods allocate nothing.
type Gate struct {
	mu     sync.Mutex
	p      *Pacer
	ev     *Events
	relAt  time.Time // instant of the last Budget that allowed packets
	relOK  bool
	capMax int          // bytes of one packet for the ŝ_max budget (NominalPacketBytes)
	qlim   atomic.Int32 // QueueLimit as of the last Budget
	// the bandwidth-delay estimate's largest value per slot of
	// QueueWindow/queueSlots, the last queueSlots slots (a ring; slotAt
	// is when the current slot began)
	bdpSlot [queueSlots]int
	slotIdx int
	slotAt  time.Time
}

// queueSlots is how many slots Config.QueueWindow is cut into; the limit
// uses the queueRank-th largest slot maximum, so that up to queueRank−1
// slots whose estimate came from compressed ACK trains are ignored.
const (
	queueSlots = 10
	queueRank  = 3
)

// CapPoll is how long Budget tells the loop to wait when only an ACK (or a
// withdrawal) can lift the ŝ_max cap: the loop has no event for ACKs, so
// it polls.
const CapPoll = time.Millisecond

// minWait bounds the waits Budget returns from below, so that a loop never
// spins on a window that ends within nanoseconds.
const minWait = 50 * time.Microsecond

// NewGate returns a Gate over p; ev may be nil (no transport feedback).
func NewGate(p *Pacer, ev *Events) *Gate {
	return &Gate{p: p, ev: ev, capMax: p.cfg.NominalPacketBytes}
}

// Budget answers how many of queued packets may be sent at now; with none,
// wait is how long until it should be asked again (the loop also asks
// when more packets are queued).
func (g *Gate) Budget(now time.Time, queued int) (n int, wait time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ev != nil {
		g.ev.DrainInto(g.p)
	}
	g.qlim.Store(int32(g.queueLimit(now)))
	if queued <= 0 {
		return 0, 0
	}
	packets, bytes := g.p.Budget(now)
	if packets > 0 {
		n = min(packets, queued)
		if bytes != math.MaxInt {
			// cwnd-like: go on while below the cap (overshoot < 1 packet).
			n = min(n, max(1, (bytes+g.capMax-1)/g.capMax))
		}
		g.relAt, g.relOK = now, true
		return n, 0
	}
	at, _ := g.p.Next(now)
	if at.IsZero() {
		return 0, CapPoll
	}
	return 0, max(at.Sub(now), minWait)
}

// Sent records one packet of size bytes handed to the transport, as part
// of the release its Budget answer allowed.
func (g *Gate) Sent(now time.Time, size int) {
	g.mu.Lock()
	t := now
	if g.relOK {
		t = g.relAt
	}
	g.p.OnRelease(t, 1, size)
	g.mu.Unlock()
}

// HandoverPredicted applies a predicted-handover hint: see
// Pacer.OnHandoverPredicted.
func (g *Gate) HandoverPredicted(now time.Time, sMaxBytes int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ev != nil {
		g.ev.DrainInto(g.p)
	}
	return g.p.OnHandoverPredicted(now, sMaxBytes)
}

// HandoverExecuted applies an executed-handover hint: see
// Pacer.OnHandoverExecuted.
func (g *Gate) HandoverExecuted(now time.Time, cellType string, cEstBytesPerSec float64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ev != nil {
		g.ev.DrainInto(g.p)
	}
	return g.p.OnHandoverExecuted(now, cellType, cEstBytesPerSec)
}

// PredictionWithdrawn applies a withdrawal: see Pacer.OnPredictionWithdrawn.
func (g *Gate) PredictionWithdrawn(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.p.OnPredictionWithdrawn(now)
}

// State returns the Pacer's state under the Gate's lock.
func (g *Gate) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.p.State()
}

// BDPPackets is the Pacer's bandwidth-delay product estimate (see
// Pacer.BDPPackets): a bound for the sender loop's queue.
func (g *Gate) BDPPackets() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.p.BDPPackets()
}

// Bounds of QueueLimit, in packets.
const (
	QueueLimitMin = 64
	QueueLimitMax = 4096
	// QueueLimitBatch is the room QueueLimit keeps above 2·BDP for one
	// offload batch: the tunnel server reads its TUN with the kernel's
	// offloads (wireguard-go tun, TSO/GSO), so a sender's 64 KB TSO
	// segment reaches the queue as one burst of up to 64 KB / 1240-byte
	// MSS (the tunnel's clamp at MTU 1280) = 53 packets. A limit that
	// cannot take one batch on top of the standing queue drops inside
	// it, and the inner TCP backs off on every such drop (bench
	// bdp-switch, 50 Mbit/s 10 ms phase: 215-299 queue-limit drops per
	// 30 s run and the pacer idle behind an inner CUBIC that kept halving).
	QueueLimitBatch = 64
)

// QueueLimit is how many packets the sender loop's queue should hold in
// front of this pacer when it carries TCP: twice the Pacer's
// bandwidth-delay product estimate (BDPPackets) plus one offload batch
// (QueueLimitBatch), at least QueueLimitMin and 4 bursts, at most
// QueueLimitMax; 0 while there is no estimate (keep
// the loop's static bound). Wave paces at about the bottleneck's rate, so
// the inner TCP's excess window queues here instead of at the bottleneck:
// a fixed 512 packets is ~110 ms of standing queue at 50 Mbit/s but only
// a fifth of the BDP at 600 ms (the TCP then halves below the BDP and
// never recovers); about a BDP keeps a Reno sender busy (see
// Pacer.BDPPackets), twice that absorbs Wave's own ΔRTT/2 under-pacing
// and the floor keeps bursts fillable while the estimate is low. In the
// simulation (target_test.go) this cuts the inner TCP's mean RTT at low
// BDP from 93 ms (512 packets) to 35 ms at 1.9 % goodput cost, and lifts
// its goodput at 600 ms from 40 % to 99 % of capacity.
//
// With Config.QueueWindow the estimate it doubles is not the current one
// alone but the larger of it and the third largest of its maxima over ten
// slots of the window (see windowBDP): on a link whose capacity moves
// every 100 ms, as a 5G cell's does, Wave's estimate follows each dip
// within a few bursts, and a limit that shrinks with it tail-drops the
// inner TCP's window just when the queue grows (virtual time, inner TCP,
// capacity redrawn every 100 ms in 30-150 Mbit/s: 63 % of the mean
// capacity with the current estimate alone, 85 % with a 1 s window, mean
// RTT 29 → 57 ms; TestQueueWindowVariableCapacity). The third largest,
// not the largest: compressed ACK trains make single high estimates, and
// at constant capacity the largest of them held the queue (and the inner
// TCP's RTT) at twice its size (noisy low-BDP simulation: 54 against 22
// ms; 33-36 ms with the third largest). Off by default: on the bench's 5G
// drive a 1 s window bought 10 % of goodput for twice the inner TCP's
// median RTT, which then equalled quic-go's own (README, session 10).
//
// It takes no lock (the value as of the last Budget call), so a producer
// goroutine may call it for every packet it queues.
func (g *Gate) QueueLimit() int { return int(g.qlim.Load()) }

func (g *Gate) queueLimit(now time.Time) int {
	b := g.windowBDP(now, g.p.BDPPackets())
	if b == 0 {
		return 0
	}
	q := int(g.p.queueBDP()*float64(b) + 0.5)
	return min(max(q+QueueLimitBatch, QueueLimitMin, 4*g.p.burstN), QueueLimitMax)
}

// windowBDP records the current bandwidth-delay estimate b and returns
// what QueueLimit bounds the queue with: with Config.QueueWindow set, the
// larger of b and the queueRank-th largest slot maximum of the window;
// else b. An estimate of 0 (none yet, or forgotten by an adjustment or a
// handover restart) empties the window: the old path's rate must not hold
// the new path's queue open.
func (g *Gate) windowBDP(now time.Time, b int) int {
	w := g.p.cfg.QueueWindow
	if w <= 0 {
		return b
	}
	if b == 0 {
		g.bdpSlot = [queueSlots]int{}
		g.slotAt = time.Time{}
		return 0
	}
	if !g.slotAt.IsZero() && (now.Sub(g.slotAt) >= w || now.Before(g.slotAt)) {
		g.bdpSlot = [queueSlots]int{} // a window without a call: all stale
		g.slotAt = time.Time{}
	}
	if g.slotAt.IsZero() || now.Sub(g.slotAt) >= w/queueSlots {
		g.slotIdx = (g.slotIdx + 1) % queueSlots
		g.bdpSlot[g.slotIdx] = 0
		g.slotAt = now
	}
	g.bdpSlot[g.slotIdx] = max(g.bdpSlot[g.slotIdx], b)
	var top [queueRank]int // the largest slot maxima, descending
	for _, v := range g.bdpSlot {
		for i := range top {
			if v > top[i] {
				copy(top[i+1:], top[i:queueRank-1])
				top[i] = v
				break
			}
		}
	}
	return max(b, top[queueRank-1])
}
