package tunnel

import (
	"sync"
	"time"

	"github.com/m2ho/m2ho/m2ho/bwe"
)

// DefaultHintRateWait bounds how long an executed hint without a rate
// waits for the phone's first delivery-rate interval on the new cell
// (RateMeter): M2HO's Smoothing bound (MobiCom'24 §4.4, 150 ms), as long
// as the controller itself keeps Preparation's clamp after the random
// access. After it the hint goes with c_est 0 (unknown).
const DefaultHintRateWait = 150 * time.Millisecond

// RateMeter is the downlink delivery rate of the tunnel as the phone sees
// it: every datagram the client receives, fed to M2HO's own estimator
// (bwe.PerRTT, MobiCom'24 §4.5: the bytes delivered in the last complete
// RTT-long interval), the interval being the tunnel's smoothed RTT. The
// M2HO controller sees only the TCP flows that cross it in the clear; a
// flow in the tunnel is inside QUIC, so this is the rate the executed
// hint's c_est carries for tunnelled flows.
//
// Restart forgets the estimate (a handover: the new cell's rate has
// nothing to do with the old one's) and Fresh reports when the first
// interval after it has closed. Sample allocates nothing; it is called
// from the receive goroutine while a hint is being prepared on another,
// hence the lock.
type RateMeter struct {
	mu    sync.Mutex
	est   bwe.PerRTT
	fresh chan struct{} // closed when the first interval after Restart closes; nil: no Restart pending
}

// rateMinInterval is the shortest interval RateMeter measures over: the
// phone receives in bunches (the radio's slots, 0.125-1 ms; quic-go's
// batched UDP reads; a busy receive goroutine), so an interval shorter
// than a few of those holds part of one bunch over less than its spread
// and reads a burst's rate, not the link's. A 5G path's RTT (20-70 ms)
// is far above it; a loopback tunnel's (0.1-0.3 ms) is not: there a
// loaded host spread a 10-packet batch over more than the RTT, and the
// hint said 17.2 MB/s for a 0.6 MB/s delivery
// (TestExecutedHintCarriesDeliveredRate, 2026-12-02).
const rateMinInterval = 5 * time.Millisecond

// Sample records bytes received at now; rtt is the tunnel's smoothed RTT
// (the interval, at least rateMinInterval).
func (m *RateMeter) Sample(now time.Time, bytes int, rtt time.Duration) {
	m.mu.Lock()
	m.est.Sample(now, bytes, max(rtt, rateMinInterval))
	if m.fresh != nil && m.est.Rate() > 0 {
		close(m.fresh)
		m.fresh = nil
	}
	m.mu.Unlock()
}

// Rate is the estimate in bytes/s, 0 until an interval closed (since the
// last Restart).
func (m *RateMeter) Rate() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.est.Rate()
}

// Restart forgets the estimate and returns a channel closed when the first
// interval after it closes (its rate is then Rate's, > 0: an interval opens
// at a datagram, so a closed one holds at least its bytes).
func (m *RateMeter) Restart() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.est.Reset()
	if m.fresh != nil {
		close(m.fresh)
	}
	m.fresh = make(chan struct{})
	return m.fresh
}
