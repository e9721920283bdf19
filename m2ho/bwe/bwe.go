// Package bwe holds the pluggable bandwidth estimators behind M2HO's c_est
// (§4.5, Eqn 2): the paper's own per-RTT byte count and three filters from
// the ABEC-MPTCP paper (Westwood's fixed pole, the bilinear Tustin filter and
// ABEC's adaptive pole), so that they can be compared on the same traces.
//
// Every estimator is pure: the caller passes the arrival time, the bytes
// delivered and the current RTT; Sample never allocates. Rates are bytes/s.
package bwe

import (
	"fmt"
	"strings"
	"time"
)

// Estimator turns delivered bytes into a rate.
type Estimator interface {
	// Sample records bytes delivered at now; rtt is the current round-trip
	// time estimate and sets the sampling interval (≥ 1 RTT). With rtt ≤ 0
	// bytes accumulate but no interval closes.
	Sample(now time.Time, bytes int, rtt time.Duration)
	// Rate is the estimate in bytes/s; 0 until a first interval closed.
	Rate() float64
	// Reset forgets everything (used after a handover: the new cell's
	// capacity has nothing to do with the old one's).
	Reset()
}

// interval accumulates bytes over one sampling interval of at least minLen.
// The interval [start, now) closes at the first sample with
// now-start ≥ minLen; that sample's bytes open the next interval (they
// arrived after the closing instant is known, so they are counted once).
type interval struct {
	start   time.Time
	bytes   int
	started bool
}

// add returns the closed interval's bytes and length when one closes.
func (w *interval) add(now time.Time, bytes int, minLen time.Duration) (closedBytes int, dt time.Duration, closed bool) {
	if bytes < 0 {
		bytes = 0
	}
	if !w.started {
		w.start, w.bytes, w.started = now, bytes, true
		return 0, 0, false
	}
	el := now.Sub(w.start)
	if minLen > 0 && el >= minLen {
		closedBytes, dt = w.bytes, el
		w.start, w.bytes = now, bytes
		return closedBytes, dt, true
	}
	w.bytes += bytes
	return 0, 0, false
}

func rate(bytes int, dt time.Duration) float64 {
	if dt <= 0 {
		return 0
	}
	return float64(bytes) / dt.Seconds()
}

// PerRTT is M2HO's own estimator (§4.5, after [38]): c_est is the bytes
// delivered in the last complete RTT-long interval, as a rate.
type PerRTT struct {
	w    interval
	rate float64
}

// NewPerRTT returns the M2HO default estimator.
func NewPerRTT() *PerRTT { return &PerRTT{} }

func (e *PerRTT) Sample(now time.Time, bytes int, rtt time.Duration) {
	if b, dt, ok := e.w.add(now, bytes, rtt); ok {
		e.rate = rate(b, dt)
	}
}
func (e *PerRTT) Rate() float64 { return e.rate }
func (e *PerRTT) Reset()        { *e = PerRTT{} }

// WestwoodAlpha is the fixed pole of Westwood's filter (ABEC-MPTCP, Eqn 3).
const WestwoodAlpha = 19.0 / 21.0

// Westwood is the fixed-pole filter of TCP Westwood (ABEC-MPTCP, Eqn 3) over
// per-RTT samples b_k:
//
//	Bw_k = α·Bw_{k-1} + (1-α)·(b_k + b_{k-1})/2,  α = 19/21.
//
// The first sample initialises Bw_0 = b_0 = b_{-1} (starting from 0 would
// make the estimate crawl up from nothing after every Reset, i.e. after
// every handover).
type Westwood struct {
	w        interval
	bw, prev float64
	n        int
}

func NewWestwood() *Westwood { return &Westwood{} }

func (e *Westwood) Sample(now time.Time, bytes int, rtt time.Duration) {
	b, dt, ok := e.w.add(now, bytes, rtt)
	if !ok {
		return
	}
	s := rate(b, dt)
	if e.n == 0 {
		e.bw, e.prev = s, s
	} else {
		e.bw = WestwoodAlpha*e.bw + (1-WestwoodAlpha)*(s+e.prev)/2
		e.prev = s
	}
	e.n++
}
func (e *Westwood) Rate() float64 { return e.bw }
func (e *Westwood) Reset()        { *e = Westwood{} }

// DefaultTau is the Tustin filter's time constant when none is given: half
// a second, the order of Westwood's own choice (a few RTTs of cellular
// paths), so one interrupted RTT does not swing the estimate.
const DefaultTau = 500 * time.Millisecond

// Tustin is a first-order low-pass filter with time constant τ discretised
// with the bilinear (Tustin) transform over per-RTT samples s_k of length
// T_k (ABEC-MPTCP's "Tustin" comparison):
//
//	α_k = (2τ - T_k)/(2τ + T_k),  Bw_k = α_k·Bw_{k-1} + (1-α_k)/2·(s_k + s_{k-1}).
//
// T_k is clamped to 2τ so the pole never goes negative. The first sample
// initialises the filter like Westwood.
type Tustin struct {
	Tau      time.Duration
	w        interval
	bw, prev float64
	n        int
}

func NewTustin(tau time.Duration) *Tustin {
	if tau <= 0 {
		tau = DefaultTau
	}
	return &Tustin{Tau: tau}
}

// tustinAlpha is the bilinear pole for time constant tau and step t.
func tustinAlpha(tau, t float64) float64 {
	if t > 2*tau {
		t = 2 * tau
	}
	return (2*tau - t) / (2*tau + t)
}

func (e *Tustin) Sample(now time.Time, bytes int, rtt time.Duration) {
	b, dt, ok := e.w.add(now, bytes, rtt)
	if !ok {
		return
	}
	s := rate(b, dt)
	if e.n == 0 {
		e.bw, e.prev = s, s
	} else {
		a := tustinAlpha(e.Tau.Seconds(), dt.Seconds())
		e.bw = a*e.bw + (1-a)/2*(s+e.prev)
		e.prev = s
	}
	e.n++
}
func (e *Tustin) Rate() float64 { return e.bw }
func (e *Tustin) Reset()        { *e = Tustin{Tau: e.Tau} }

// ABEC defaults.
const (
	DefaultABECBeta = 0.9 // weight of the past in U_k (Eqn 9)
	DefaultABECRTTs = 2   // sampling interval in RTTs (must be ≥ 1)
)

// ABEC is the adaptive-pole estimator of ABEC-MPTCP (§2.2).
//
// The paper's Eqns 6-8 are lost in the text we have; this is our reading of
// what remains (Algorithm 1 lines 2, 8, 9 and the prose around Eqns 7-9):
//
//   - Eqn 6: the sampling interval T_k spans at least one RTT (here
//     RTTs·RTT, default 2) and its sample is s_k = ΣL_i / T_k.
//   - Eqn 9: the network state U_k = β·U_{k-1} + (1-β)·|s_k - s_{k-1}|
//     (the text writes U_k on both sides; the recursion is meant).
//   - Eqn 8: τ_k is "at least one RTT and set by U_k and the number N of
//     round trips in the interval": τ_k = RTT·(1 + N·U_k/s̄_k) with
//     N = T_k/RTT and s̄_k = max(s_k, s_{k-1}) (U_k relative to the rate, so
//     a jittery link is smoothed harder, a steady one follows quickly);
//     τ_k = RTT when s̄_k = 0.
//   - Eqn 7: the pole from τ_k in the same bilinear form as the Tustin
//     baseline, α_k = (2τ_k - T_k)/(2τ_k + T_k) (T_k clamped to 2τ_k).
//   - Algorithm 1 lines 8-9: the filter smooths bytes and interval lengths
//     separately, S_k = α_k·S_{k-1} + (1-α_k)·bytes_k,
//     T̄_k = α_k·T̄_{k-1} + (1-α_k)·T_k, and the estimate is Bw_k = S_k/T̄_k.
//
// The first interval initialises S, T̄ and s_{k-1} from itself and U = 0.
type ABEC struct {
	Beta float64
	RTTs int

	w          interval
	s, t, u    float64 // S_k (bytes), T̄_k (s), U_k (bytes/s)
	prevSample float64
	n          int
}

func NewABEC(beta float64, rtts int) *ABEC {
	if !(beta >= 0 && beta < 1) {
		beta = DefaultABECBeta
	}
	if rtts < 1 {
		rtts = DefaultABECRTTs
	}
	return &ABEC{Beta: beta, RTTs: rtts}
}

func (e *ABEC) Sample(now time.Time, bytes int, rtt time.Duration) {
	b, dt, ok := e.w.add(now, bytes, time.Duration(e.RTTs)*rtt)
	if !ok {
		return
	}
	tk := dt.Seconds()
	sk := float64(b) / tk
	if e.n == 0 {
		e.s, e.t, e.prevSample, e.u = float64(b), tk, sk, 0
		e.n++
		return
	}
	diff := sk - e.prevSample
	if diff < 0 {
		diff = -diff
	}
	e.u = e.Beta*e.u + (1-e.Beta)*diff
	r := rtt.Seconds()
	n := tk / r
	sbar := sk
	if e.prevSample > sbar {
		sbar = e.prevSample
	}
	tau := r
	if sbar > 0 {
		tau = r * (1 + n*e.u/sbar)
	}
	a := tustinAlpha(tau, tk)
	e.s = a*e.s + (1-a)*float64(b)
	e.t = a*e.t + (1-a)*tk
	e.prevSample = sk
	e.n++
}

func (e *ABEC) Rate() float64 {
	if e.n == 0 || e.t <= 0 {
		return 0
	}
	return e.s / e.t
}
func (e *ABEC) Reset() { *e = ABEC{Beta: e.Beta, RTTs: e.RTTs} }

// Names lists the estimators ByName knows, default first.
var Names = []string{"perrtt", "westwood", "tustin", "abec"}

// ByName returns a constructor for the named estimator with its defaults,
// for command-line flags. "m2ho" is an alias of "perrtt".
func ByName(name string) (func() Estimator, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "", "perrtt", "m2ho":
		return func() Estimator { return NewPerRTT() }, nil
	case "westwood":
		return func() Estimator { return NewWestwood() }, nil
	case "tustin":
		return func() Estimator { return NewTustin(DefaultTau) }, nil
	case "abec":
		return func() Estimator { return NewABEC(DefaultABECBeta, DefaultABECRTTs) }, nil
	}
	return nil, fmt.Errorf("bwe: unknown estimator %q (known: %s)", name, strings.Join(Names, ", "))
}
