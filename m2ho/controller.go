// Package m2ho is the M2HO controller (MobiCom'24, §4): a pure state
// machine that turns the UE's own signalling into verdicts on the tethered
// flows' uplink packets. Every input carries `now`; nothing here reads the
// clock, starts a goroutine or does I/O on the packet path.
//
// Decisions beyond the paper's text:
//   - Until the first signalling event, and after SignalLoss without one,
//     every packet passes (fail open); RTT and rate tracking go on.
//   - So does it while the events come late (SignalStale, stale.go): an
//     event staler than the bound is not acted on, and the controller
//     stays in Stable until events have been fresh for the bound again.
//   - Preparation is entered on a prediction or, without one, on the
//     handover command itself. A command during Smoothing, or a new
//     prediction during it, ends the smoothing and enters Preparation.
//   - After a command, random access failures change nothing; the first
//     success (any reason) enters Smoothing; without one within
//     ExecutionBound (default 1 s, the usual T304) the controller returns
//     to Stable.
//   - A handover the reader inferred after the fact (Event.Inferred) has
//     executed already: it confirms the prediction and the controller goes
//     to Stable on the new cell, with no wait for random access and no
//     Smoothing (see executed).
//   - Smoothing keeps Preparation's clamp (random access does not lift
//     it) and drops uplink pure ACKs of flows that had downlink data at
//     the command, until the flow acknowledges all of it (rule a, per
//     flow), the first burst in the target cell ends or SmoothingBound
//     passes (rules b, c, for all flows); the clamp ends with Smoothing.
//   - No hold ends at once: when the clamp, Eqn 2 or the ramp stops
//     lowering a flow's window, the window grows by what each ACK
//     acknowledges until the laptop's own is the smaller or the sender
//     leaves it unused (see release): a sender held below its cwnd would
//     send the difference at once, ahead of the phone's estimate of its
//     right edge.
//   - Eqn 2's rwnd is kept between the serving cell's ŝ_max and one
//     bandwidth-delay product plus ŝ_max, and rises at most ŝ_max per
//     RTT (see stableRwnd); RTT_min is the current cell's (Flow.newPath).
//     In a sub-6 dwell the product's rate is r_low, the least per-RTT
//     delivery rate of the cell in the last second (Config.Eqn2Bound,
//     envelope.go), so a capacity dip to any rate the cell showed lately
//     queues at most ŝ_max; the return ramp keeps the last RTT's rate.
//   - In the sub-6 dwell the flows together keep at most the cell's
//     buffer in flight where it was seen full (eqn2InFlightBound), or,
//     in a cell not yet seen full, the least buffer seen full among the
//     cells of its type (inFlightBuffer, §4.3's estimate of an unknown
//     cell from the known ones).
//   - The return to mmWave after Eqn 2 does not release the window at
//     once: the same bounded rwnd (the ramp) goes on with the mmWave
//     cell's ŝ_max until the flow's sender shows a loss recovery, which
//     restarts its CUBIC epoch (see the ramp field and Flow.rampFree).
//   - No ACK is suppressed (Preparation after the command, Smoothing)
//     for a flow whose sender is in loss recovery, as the phone can tell
//     (three duplicate ACKs forwarded, or a retransmission by its TSval,
//     until the recovery point is acknowledged), nor one that reports
//     everything the sender may have sent: either may be the last ACK
//     the sender gets, and only its RTO would follow (see inRecovery and
//     lastNews).
//   - The ramp lets a flow go once its sender retransmitted (a later
//     TSval below the highest seen, not a segment the link layer
//     reordered: see retransmission) and then leaves the ramp's window
//     unused (cwnd-limited: its cut cwnd is below what the ramp allows),
//     so the let-go never hands it a window it would fill at once.
//   - No clamp takes back a right edge the sender may already use: the
//     window of a clamped ACK is at least f.edge − ack, the sender's
//     snd_nxt as the phone can tell (see clamp); a shrunk window stops
//     Linux's loss probe and retransmissions above it, so a handover that
//     loses the tail of the forwarded queue would end in an RTO.
//   - ŝ_max is learned on mmWave cells too (see onSlot) and a known
//     mmWave cell's own value is its Lookup; unknown ones keep §4.3's
//     minimum sub-6 value.
//   - c_est is one estimate for the phone (the cell's delivery rate, reset
//     when random access to a new cell succeeds); Eqn 2's rwnd and the
//     Preparation budget ŝ_max are both shared equally by active flows.
package m2ho

import (
	"math"
	"time"

	"github.com/m2ho/m2ho/m2ho/bwe"
	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/signaling"
)

// Defaults (see Config).
const (
	DefaultLambda = 2.0 // Eqn 2's λ (§4.5)
	// DefaultSmoothingBound caps ACK suppression after a handover
	// command: well under the 200 ms minimum RTO, and it leaves ~90 ms
	// after random access (command→RA is ~60 ms: 33 ms to execution plus
	// the 27 ms interruption) for the forwarded data to fill the holes.
	DefaultSmoothingBound = 150 * time.Millisecond
	DefaultSignalLoss     = 5 * time.Second
	// DefaultSignalStale is how much later than usual an event may reach
	// the controller before it stops acting on signalling (stale.go):
	// 200 ms. Normal lag is up to ~20 ms (a modem or the emulator sends
	// a burst's MAC slots at its end), so 10× that is never a normal
	// event; a prediction is worth something only ahead of the command
	// it predicts (report → command 30-100 ms, command → execution
	// ~33 ms, report → execution ~180 ms: DefaultT2), so an event 200 ms
	// late describes a handover that has already happened.
	DefaultSignalStale      = 200 * time.Millisecond
	DefaultT2               = 180 * time.Millisecond // ≈ the paper's 178.9 ms report→execution
	DefaultActiveFlowWindow = time.Second
	// DefaultExecutionBound is how long after a handover command the
	// controller waits for random access to succeed before giving up the
	// handover: 1 s, the usual NR T304, after which the UE declares a
	// radio link failure and the clamp would only starve the flows.
	DefaultExecutionBound = time.Second
	// DefaultRTTFloor is the smallest RTT Eqn 2 believes: below a few
	// milliseconds the phone's own scheduling (TUN reads, timers) moves
	// the measured RTT by more than any queue, and RTT_min/RTT would
	// throttle a LAN-speed path to nothing. 5G RTTs are tens of ms.
	DefaultRTTFloor = 5 * time.Millisecond
	// DefaultMSS is assumed when a packet does not say its flow's MSS.
	DefaultMSS = 1460
)

// minRTTSamples is how many RTT samples a flow needs before Eqn 2 touches
// its window: one is enough for a window size, two make RTT_min/RTT mean
// something other than 1.
const minRTTSamples = 2

// Toggle is a switch whose zero value means "the default".
type Toggle uint8

const (
	ToggleDefault Toggle = iota
	ToggleOn
	ToggleOff
)

func (t Toggle) on(def bool) bool {
	switch t {
	case ToggleOn:
		return true
	case ToggleOff:
		return false
	}
	return def
}

// Config parameterises a Controller; New fills zero fields with defaults.
type Config struct {
	Lambda           float64       // Eqn 2's λ; default 2
	SmoothingBound   time.Duration // no ACK is dropped later than this after a handover command; default 150 ms
	SignalLoss       time.Duration // no event for this long → pass-through; default 5 s
	SignalStale      time.Duration // an event this much later than its source's usual → pass-through; default 200 ms
	DefaultT2        time.Duration // T2 before any report→command interval was measured; default 180 ms
	ActiveFlowWindow time.Duration // a flow with downlink payload this recently is active; default 1 s
	ExecutionBound   time.Duration // command → random access success; default 1 s
	RTTFloor         time.Duration // Eqn 2 reads RTT and RTT_min as at least this; default 5 ms
	Estimator        func() bwe.Estimator
	Observer         Observer
	SMaxDB           *SMaxDB // nil: every lookup gives DefaultSMax
	Rules            Rules   // prediction rule set; default Streams (Algorithm1 and A3Only stay selectable)
	StableRate       Toggle  // Eqn 2 in Stable; default on
	// Eqn2InFlight: in the sub-6 dwell the flows together have at most a
	// measured ŝ_max in flight while the pipe fits under it
	// (eqn2InFlightBound); default on.
	Eqn2InFlight Toggle
	// InFlightPeers: in a sub-6 cell whose buffer was not seen full, the
	// in-flight bound takes the least buffer seen full among the cells
	// of its type (its own measured queue if deeper), as §4.3 estimates
	// a cell it knows nothing of from the known ones (inFlightBuffer);
	// default on. Off: the bound waits for the cell's own overflow.
	InFlightPeers Toggle
	// Eqn2Bound is the cap on Eqn 2's window in a sub-6 dwell: the
	// cell's last per-RTT rate (BoundRate, the default) or the low
	// envelope of its rates (BoundEnvelope).
	Eqn2Bound Eqn2Bound
	// EnvelopeWindow is how far back the envelope looks; default 1 s.
	EnvelopeWindow time.Duration
	// RampQueue is the share of a measured ŝ_max (SMaxDB.ObserveQueue)
	// of the mmWave cell that the return ramp lets stand queued there,
	// and its pace per RTT (see stableRwnd); default measuredUse (2/3),
	// at most 1. A burst estimate of ŝ_max is used whole.
	RampQueue float64
	// RampPairRate: on the ramp back to mmWave, Eqn 2 and its cap read
	// the cell's rate as the mean of its last two per-RTT samples
	// (pairRate); default on. Off: the last sample alone.
	RampPairRate Toggle
	// SlotPipe: in the sub-6 dwell and on the ramp back to mmWave,
	// while a flow meets no standing queue (Flow.queueEmpty), Eqn 2's
	// window may grow toward the pipe the cell's MAC slots show (their
	// rate at full allocation, slotRate, times RTT_min), at most
	// doubling per RTT, in place of growing by the cap's queue alone
	// (ŝ_max: the 64 KB default in a sub-6 cell never measured, the
	// least sub-6 value in such an mmWave cell); default on. Off: the
	// queue's pace throughout (the rule before 2026-12-06, late).
	// Without MAC slots in the feed it changes nothing.
	SlotPipe Toggle
	// SlotStart: the same growth in a new cell's first round trips,
	// while Eqn 2 still waits for the new path's RTT_min and rate (it
	// held the flows at ŝ_max until then: ~100 ms at the 64 KB default
	// on the bench), with the previous path's RTT_min (or the new
	// path's latest sample, when less) standing in for the new one's;
	// default on. Needs SlotPipe, and MAC slots in the feed.
	SlotStart Toggle
	// OWDPathBase: after random access the one-way delay's base becomes
	// the new path's own least offset once the MAC slots show the cell
	// drained (queue.go); default on. Off: the least offset of the last
	// 4-8 s, across handovers (the rule before 2026-12-07, later), which
	// reads a path slower than the one before as queued by the
	// difference.
	OWDPathBase Toggle
	// MmWaveHorizontalClamp: a handover predicted or commanded from an
	// mmWave cell to another mmWave cell clamps the flows to the target's
	// ŝ_max as any other does (§4.3, the default). Off: no clamp for it
	// (Smoothing still holds back duplicate ACKs). §4.3 saw no overflow
	// at mmWave → mmWave handovers and clamps them only because it
	// assumes every mmWave buffer at least the smallest sub-6 one; an
	// mmWave cell the phone has not measured gets that sub-6 value, a
	// tenth or less of what a 1 Gbit/s flow has in flight, for every
	// prediction, withdrawn ones included (see prepare).
	MmWaveHorizontalClamp Toggle
	// AnchorKeepsCell: an LTE anchor handover that keeps the NR data
	// cell (EN-DC: the command names the serving NR cell as its target)
	// is not a handover of the data path (the default). Its prediction
	// (an LTE A3/A5 while the data is on NR) and its command, to random
	// access, clamp to that cell's own ŝ_max, the buffer the data stays
	// in (the SN pauses it meanwhile, TS 37.340 §10.7); then Stable: no
	// c_est restart, no Smoothing, Eqn 2's window goes on. Off:
	// as any handover, to an NR cell of the data cell's type whose
	// ŝ_max is not known (Lookup's fallback: on mmWave the least sub-6
	// value, or DefaultSMax), with c_est restarted at random access.
	AnchorKeepsCell Toggle
	// AnswerRates: a prediction that rests only on kinds of report the
	// network has rarely answered within their deadline (learned per
	// kind and data cell type in SMaxDB, answers.go) clamps nothing
	// until a command comes (the default); the command clamps as ever.
	// Off: every prediction clamps (§4.3). The rates are learned either
	// way.
	AnswerRates Toggle
	// MmWaveA2Hold: an NR A2 from an mmWave data cell keeps its
	// prediction, and its clamp, live at least this long
	// (DefaultMmWaveA2Hold when 0; negative: only its kind's deadline):
	// the mmWave cell at its edge drains its queue before the handover
	// down to sub-6 forwards it (see DefaultMmWaveA2Hold).
	MmWaveA2Hold time.Duration
	// Eqn2Trace, when set, is called with every window Eqn 2 computes
	// (in the sub-6 dwell and on the ramp), for diagnostics (m2ho run
	// --eqn2-log). Like Observer it is called synchronously from
	// OnPacket, so it must be quick and must not call back.
	Eqn2Trace func(now time.Time, f *Flow, s Eqn2Step)
	// SMaxTrace, when set, is called each time a queue measured from
	// one-way delay raises a cell's ŝ_max in the database, with the
	// sample that did it (m2ho run --smax-log): an estimate above the
	// cell's buffer is then traced to its inputs. Called synchronously
	// from OnPacket and OnEvent, like Observer.
	SMaxTrace func(s SMaxStep)
}

// SMaxStep is one rise of a cell's ŝ_max from the queue measured ahead of
// a downlink segment (queue.go, Config.SMaxTrace): the new value and the
// sample of the held window that completed it.
type SMaxStep struct {
	Cell     signaling.Cell
	SMax     int           // the new ŝ_max (the held window's least sample)
	SampleAt time.Time     // when the completing segment reached the phone
	Wait     time.Duration // its queueing delay (one-way delay above the base, less the margin)
	Received int64         // bytes the phone received since it joined the queue (its own included)
	Served   int64         // bytes the MAC slots served since then, by their own clock
	Busy     time.Duration // how long the cell had been serving this UE back to back
	Raw      int64         // the largest single sample in the cell so far
}

// Eqn2Step is what Eqn 2 saw and decided for one uplink ACK of a flow
// (Config.Eqn2Trace). Rates are bytes per second, windows bytes for the
// flow (the cell's share of it already taken).
type Eqn2Step struct {
	Rate         float64       // the cell's per-RTT delivery rate (c.est)
	Pipe         float64       // the rate the cap uses (Rate or the envelope's low)
	RTTMin, SRTT time.Duration // the flow's, as the rule reads them (floored)
	Eqn          float64       // λ·c_est·RTT_min/RTT alone
	Cap          float64       // pipe·RTT_min + queue (before the ŝ_max floor)
	Bound        float64       // the in-flight bound of the sub-6 dwell (eqn2InFlightBound; +Inf: none)
	Queue        float64       // the standing queue the cap allows
	Limit        int           // the window the rule sets (after the pace)
	Share        int           // flows sharing the cell
	Wait         time.Duration // the flow's last one-way queueing delay measured (queue.go; 0 also before the first)
	InFlight     uint32        // the sender's bytes in flight at the last echo (0: unknown)
}

// Observer is told of the controller's decisions, for logs and metrics.
// It is called synchronously from OnPacket, OnEvent and Tick, so it must
// be quick and must not call back into the Controller.
type Observer interface {
	Transition(now time.Time, from, to State, why string)
	Prediction(now time.Time, o PredictionOutcome)
	SignalLost(now time.Time)
	SignalRestored(now time.Time)
	// SignalStale: an event came late by late beyond its source's usual
	// lag, more than Config.SignalStale; pass-through from now.
	// SignalFresh: events have been fresh for SignalStale; the
	// controller acts on them again.
	SignalStale(now time.Time, late time.Duration)
	SignalFresh(now time.Time)
}

// NopObserver ignores everything.
type NopObserver struct{}

func (NopObserver) Transition(time.Time, State, State, string) {}
func (NopObserver) Prediction(time.Time, PredictionOutcome)    {}
func (NopObserver) SignalLost(time.Time)                       {}
func (NopObserver) SignalRestored(time.Time)                   {}
func (NopObserver) SignalStale(time.Time, time.Duration)       {}
func (NopObserver) SignalFresh(time.Time)                      {}

// Hint is the controller's state for other consumers (the QUIC tunnel's
// server-side pacer, metrics).
type Hint struct {
	State State
	// SMax is the clamp budget in bytes for all flows together while in
	// Preparation (the target's ŝ_max), 0 otherwise.
	SMax int
	// CEst is the delivery rate estimate in bytes/s (0: none yet).
	CEst            float64
	Serving, Target signaling.Cell
	PassThrough     bool
}

// Controller is one phone's M2HO state machine (Fig. 6). It is not safe
// for concurrent use: one goroutine feeds it packets, events and ticks.
type Controller struct {
	cfg         Config
	stableRate  bool
	inFlight    bool // Config.Eqn2InFlight
	peers       bool // Config.InFlightPeers
	pairRamp    bool // Config.RampPairRate
	slotPipe    bool // Config.SlotPipe
	slotStart   bool // Config.SlotStart (and SlotPipe)
	owdPath     bool // Config.OWDPathBase
	slots       slotRate
	mmClamp     bool // Config.MmWaveHorizontalClamp
	anchorKeeps bool // Config.AnchorKeepsCell
	keepCell    bool // the command being executed is an anchor handover that keeps the data cell
	answerRates bool // Config.AnswerRates
	// unclamped: no clamp for the handover in preparation: it goes from
	// mmWave to mmWave and MmWaveHorizontalClamp is off, or it is a
	// prediction the network rarely answers (see prepare).
	unclamped bool
	// ignored: the prediction in preparation rests only on kinds of
	// report the network rarely answers in time (see prepare): the flows
	// get Stable's verdicts (Eqn 2, the ramp) until a command comes.
	ignored bool
	obs     Observer
	pred    *Predictor
	est     bwe.Estimator
	env     envelope // r_low for Eqn2Bound BoundEnvelope
	burst   burstDetector

	state State

	// Signal loss: passThrough until the first event and after SignalLoss
	// without one.
	passThrough bool
	lost        bool
	everEvent   bool
	lastEvent   time.Time
	// Stale signalling (stale.go): src judges OnEvent's events.
	src   SignalSource
	stale staleState

	serving signaling.Cell // the serving data cell, as last named
	target  signaling.Cell // predicted, then commanded target
	sMax    int            // ŝ_max of target while in Preparation
	sMaxSrc SMaxSource
	// sMaxMeasured: sMax is a queue measured from one-way delay.
	sMaxMeasured bool

	commanded bool // a command is being executed (Preparation after it)
	commandAt time.Time
	episode   uint32    // counts commands; flows snapshot per episode
	episodeAt time.Time // when episode began (random access, or the inferred handover)
	smoothAt  time.Time

	// Active flows (see activeFlows).
	epochStart   time.Time
	epochStarted bool
	epoch        int64
	cur          int // flows with payload in the current epoch
	prevOnly     int // flows with payload in the previous epoch, not yet in this one

	lastRTT time.Duration // latest smoothed RTT of any flow, for flows without their own
	// prevRate is c_est of the previous cell, at its reset (see lastNews).
	prevRate float64
	// rateLast and ratePrev are c_est's last two per-RTT samples in
	// this cell (0: none yet), for pairRate.
	rateLast, ratePrev float64

	// Eqn 2 is armed from a handover mmWave → sub-6 until the next one
	// into mmWave (§4.5): it keeps the window the server built on mmWave
	// by limiting the rate with rwnd rather than letting the sub-6 buffer
	// overflow; on the way back the ramp takes over (see ramp). stableCap
	// is the target's
	// ŝ_max, the clamp until c_est has its first sample in the new cell,
	// and then the queue Eqn 2's rwnd may build (stableRwnd); it follows
	// the serving cell's estimate as bursts there raise it.
	eqn2Armed bool
	stableCap int
	// stableMeasured: stableCap is a measured queue (SMaxDB.ObserveQueue),
	// the buffer itself within a few percent, not a burst estimate.
	stableMeasured bool
	// cellFull: the serving cell's buffer was seen full, at this visit
	// (queueSample: a segment lost at the deepest queue measured there)
	// or before (SMaxDB.Full), so its measured ŝ_max is the buffer's
	// level: the in-flight bound of the sub-6 dwell holds only then (see
	// eqn2InFlightBound). fullSaved: it is in the database. servingQ: the
	// database's measured queue of the serving cell when it began to
	// serve (0: none), the level a loss is judged against with qMax.
	cellFull, fullSaved bool
	servingQ            int
	// typeFull: the least ŝ_max among the cells of the serving cell's
	// type whose buffer was seen full (SMaxDB.MinFull; 0: none), for
	// the in-flight bound in a cell not seen full (inFlightBuffer).
	typeFull int

	// ramp keeps Eqn 2's bounded rwnd (stableRwnd, with the mmWave
	// cell's ŝ_max as stableCap) after a handover into mmWave while Eqn 2
	// was armed, until the flow lets go (Flow.rampFree == rampGen).
	//
	// Why not release at once (§4.5's text): Linux CUBIC does not run its
	// congestion avoidance while rwnd-limited (tcp_is_cwnd_limited), so
	// after a sub-6 dwell under Eqn 2 its epoch is seconds old; released,
	// the cubic target W_max + C·(t−K)³ lies far above cwnd and cwnd
	// grows at the cnt floor, ×1.5 per RTT, until the mmWave buffer
	// overflows by up to half a window in one RTT (the bench: 7014 drops
	// at one return, cwnd 1787 → 5318 KB). §4.5's aim is that the carried
	// window fills the new cell at once, not that the sender's stale
	// growth runs unbounded: the ramp lets the window open as fast as the
	// buffer allows, ŝ_max per RTT up to rate·RTT_min + ŝ_max (a standing
	// queue of at most ŝ_max ≤ s_max, the clamp's own bound), so the cell
	// fills within a few RTTs and never overflows from the window's
	// growth. A step above that is never safe while the epoch is stale:
	// the pipe full (the RTT shows the queue at ŝ_max) is exactly when a
	// ×1.5 RTT overflows, and a flow that is not rwnd-limited for a while
	// is one whose stale growth will reach the limit within a few RTTs.
	// What makes it safe is a fresh epoch: a retransmission means the
	// sender entered recovery (or loss), and Linux CUBIC then ends its
	// epoch (bictcp_recalc_ssthresh: epoch_start = 0) and sets W_max
	// where it lost; from there its growth is the usual concave one, and
	// the flow is left to it, once it also leaves the ramp's window
	// unused (see stableRwnd). The retransmission must be the sender's
	// (Controller.retransmission: a later TSval), not a segment the
	// mmWave link layer delivered late, whose sender's epoch is as stale
	// as before. rampGen names the ramp: a handover mmWave →
	// mmWave keeps it, and a flow that let go stays free.
	ramp    bool
	rampGen uint32

	// The queue measured from one-way delay (queue.go): deliv counts the
	// downlink bytes received, served the bytes the MAC slots served by
	// their own timestamps (on the phone's clock through slotOffset);
	// busySince is when the MAC slots' current burst began (zero: none),
	// lastSlotAt the last slot; qMax is the largest queue measured in the
	// serving cell, qSaved the part of it already in the database; owdAt
	// is when a flow last measured a wait.
	deliv      deliveryLog
	served     deliveryLog
	slotLag    runMin
	held       heldWindow
	qRaw       int64 // the largest single sample in the serving cell (diagnostics, tests)
	busySince  time.Time
	lastSlotAt time.Time
	qMax       int
	qMaxStep   SMaxStep // the sample that set qMax (Config.SMaxTrace)
	qSaved     int
	owdAt      time.Time
	// drainedAt is when the serving cell's slots last showed this UE's
	// queue empty (burstDetector.drained: §4.3's end of a burst, in a
	// burst or not). The one-way delay's per-path base waits for it
	// (queue.go).
	drainedAt time.Time
}

// New returns a Controller in Stable, in pass-through until the first
// signalling event arrives.
func New(cfg Config) *Controller {
	if cfg.Lambda <= 0 {
		cfg.Lambda = DefaultLambda
	}
	if cfg.SmoothingBound <= 0 {
		cfg.SmoothingBound = DefaultSmoothingBound
	}
	if !(cfg.RampQueue > 0) {
		cfg.RampQueue = measuredUse
	}
	cfg.RampQueue = min(cfg.RampQueue, 1)
	if cfg.SignalLoss <= 0 {
		cfg.SignalLoss = DefaultSignalLoss
	}
	if cfg.SignalStale <= 0 {
		cfg.SignalStale = DefaultSignalStale
	}
	if cfg.DefaultT2 <= 0 {
		cfg.DefaultT2 = DefaultT2
	}
	if cfg.ActiveFlowWindow <= 0 {
		cfg.ActiveFlowWindow = DefaultActiveFlowWindow
	}
	if cfg.ExecutionBound <= 0 {
		cfg.ExecutionBound = DefaultExecutionBound
	}
	if cfg.RTTFloor <= 0 {
		cfg.RTTFloor = DefaultRTTFloor
	}
	if cfg.EnvelopeWindow <= 0 {
		cfg.EnvelopeWindow = DefaultEnvelopeWindow
	}
	if cfg.Estimator == nil {
		cfg.Estimator = func() bwe.Estimator { return bwe.NewPerRTT() }
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.Rules == nil {
		// The stream rule set: on the distinct February 2023 logs it
		// holds recall and precision where Algorithm 1's one 2·T2
		// deadline loses both (README, "Handover prediction on real RRC
		// logs"), and it is built for the reporting configurations of
		// other networks (multi-shot reports, per-kind answer times).
		cfg.Rules = Streams
	}
	pred := NewPredictor(cfg.Rules, cfg.DefaultT2)
	pred.SetAnswerBook(cfg.SMaxDB)
	switch {
	case cfg.MmWaveA2Hold == 0:
		pred.SetMmWaveA2Hold(DefaultMmWaveA2Hold)
	case cfg.MmWaveA2Hold > 0:
		pred.SetMmWaveA2Hold(cfg.MmWaveA2Hold)
	}
	return &Controller{
		cfg:         cfg,
		answerRates: cfg.AnswerRates.on(true),
		stableRate:  cfg.StableRate.on(true),
		inFlight:    cfg.Eqn2InFlight.on(true),
		peers:       cfg.InFlightPeers.on(true),
		pairRamp:    cfg.RampPairRate.on(true),
		slotPipe:    cfg.SlotPipe.on(true),
		slotStart:   cfg.SlotPipe.on(true) && cfg.SlotStart.on(true),
		owdPath:     cfg.OWDPathBase.on(true),
		mmClamp:     cfg.MmWaveHorizontalClamp.on(true),
		anchorKeeps: cfg.AnchorKeepsCell.on(true),
		obs:         cfg.Observer,
		pred:        pred,
		est:         cfg.Estimator(),
		env:         envelope{window: cfg.EnvelopeWindow},
		passThrough: true,
		epoch:       2,
	}
}

// State is the current phase.
func (c *Controller) State() State { return c.state }

// AnswerCounts is how often the network answered each kind of report in
// time, as learned in the ŝ_max database (answers.go).
func (c *Controller) AnswerCounts() []AnswerCount { return c.cfg.SMaxDB.AnswerCounts() }

// Predictor gives read access to the handover predictor (T2, live prediction).
func (c *Controller) Predictor() *Predictor { return c.pred }

// Hint returns the state other consumers need.
func (c *Controller) Hint() Hint {
	h := Hint{State: c.state, CEst: c.est.Rate(), Serving: c.serving, Target: c.target, PassThrough: c.passThrough}
	if c.state == Preparation && !c.unclamped {
		h.SMax = c.sMax
	}
	return h
}

// ActiveFlows is the number of flows that carried downlink payload in the
// current or previous ActiveFlowWindow epoch.
func (c *Controller) ActiveFlows() int { return c.cur + c.prevOnly }

// Attach makes f live. The packet path calls it once per new flow; f
// must stay at the same address until Detach.
func (c *Controller) Attach(now time.Time, f *Flow) {
	// A flow that starts during a ramp has no stale window to hold.
	*f = Flow{attached: true, episode: c.episode, released: true, rampFree: c.rampGen}
	c.advanceEpoch(now)
}

// Detach forgets f (expired or evicted); its later packets pass.
func (c *Controller) Detach(f *Flow) {
	if !f.attached {
		return
	}
	switch f.lastEpoch {
	case c.epoch:
		c.cur--
	case c.epoch - 1:
		c.prevOnly--
	}
	f.attached = false
}

// Tick evaluates due timers: a prediction's deadline (2·T2 for the classic
// rule sets, the report streams' for Streams), the execution bound, the
// smoothing bound and signal loss. OnPacket and OnEvent do the same with
// their own now, so Tick is only needed when no packet or event comes.
func (c *Controller) Tick(now time.Time) { c.timers(now) }

func (c *Controller) setState(now time.Time, to State, why string) {
	if to == c.state {
		return
	}
	from := c.state
	c.state = to
	if to == Stable {
		c.commanded = false
		c.sMax = 0
		c.target = signaling.Cell{}
	}
	c.obs.Transition(now, from, to, why)
}

func (c *Controller) timers(now time.Time) {
	if c.everEvent && !c.passThrough && now.Sub(c.lastEvent) >= c.cfg.SignalLoss {
		c.setState(now, Stable, "signal lost")
		c.passThrough, c.lost = true, true
		c.obs.SignalLost(now)
	}
	if o := c.pred.Tick(now); o.Kind == OutcomeWithdrawn {
		c.obs.Prediction(now, o)
		if c.state == Preparation && !c.commanded {
			why := "prediction withdrawn: no command within 2·T2"
			if c.pred.judge == nil {
				why = "prediction withdrawn: no command by the report streams' deadline"
			}
			c.setState(now, Stable, why)
		}
	}
	switch c.state {
	case Preparation:
		if c.commanded && now.Sub(c.commandAt) >= c.cfg.ExecutionBound {
			c.setState(now, Stable, "no random access success within the execution bound")
		}
	case Smoothing:
		if now.Sub(c.commandAt) >= c.cfg.SmoothingBound {
			c.setState(now, Stable, "smoothing bound")
		}
	}
}

// OnEvent feeds one signalling event, from the controller's one source:
// its staleness is judged against the lag of the events before it (see
// OnSourceEvent for several writers).
func (c *Controller) OnEvent(now time.Time, ev *signaling.Event) {
	c.OnSourceEvent(now, &c.src, ev)
}

// OnSourceEvent feeds one signalling event from src, the writer whose
// clock stamped it (the caller keeps one SignalSource per writer, zero
// when it connects): each writer's clock has its own offset from the
// phone's, so each has its own usual lag.
func (c *Controller) OnSourceEvent(now time.Time, src *SignalSource, ev *signaling.Event) {
	if ev == nil {
		return
	}
	c.timers(now)
	c.lastEvent, c.everEvent = now, true
	if c.lost {
		c.lost = false
		c.obs.SignalRestored(now)
	}
	if c.judge(now, src, ev) {
		c.passThrough = true
		return
	}
	c.passThrough = false
	switch ev.Kind {
	case signaling.KindMACSlot:
		c.onSlot(now, ev)
	case signaling.KindReport:
		// In EN-DC an LTE report names the anchor, not the NR cell
		// that carries the data (AnchorKeepsCell).
		anchor := c.anchorKeeps && ev.Serving.Type == signaling.CellLTE && c.serving.ID != "" && isNR(c.serving.Type)
		if !anchor {
			c.nameServing(ev.Serving)
		}
		o := c.pred.OnEvent(now, ev)
		if o.Kind != OutcomeNone {
			c.obs.Prediction(now, o)
		}
		if o.Kind == OutcomeWithdrawn && c.state == Preparation && !c.commanded {
			c.setState(now, Stable, "prediction withdrawn: A1")
			return
		}
		if _, _, target, live := c.pred.Live(); live && !c.commanded {
			if anchor && target.ID == "" && target.Type == c.serving.Type {
				// An anchor handover predicted from the LTE reports:
				// the data stays in this cell's buffer.
				target = c.serving
			}
			// A prediction, new or repeated: clamp to the (latest)
			// predicted target. During Smoothing a new handover starts:
			// the old one's smoothing ends (its forwarded data has had
			// its chance) and the clamp protects the next target.
			c.prepare(target)
			const ignored = ", no clamp: its reports are rarely answered in time"
			switch {
			case c.state == Stable && c.ignored:
				c.setState(now, Preparation, "handover predicted"+ignored)
			case c.state == Stable:
				c.setState(now, Preparation, "handover predicted")
			case c.state == Smoothing && c.ignored:
				c.setState(now, Preparation, "handover predicted during smoothing"+ignored)
			case c.state == Smoothing:
				c.setState(now, Preparation, "handover predicted during smoothing")
			}
		}
	case signaling.KindHOCommand:
		o := c.pred.OnEvent(now, ev)
		c.obs.Prediction(now, o)
		if ev.Inferred {
			c.executed(now, o)
			return
		}
		// The anchor moved, the data cell did not (EN-DC with the SCG
		// kept, AnchorKeepsCell): the SN pauses the data until the UE
		// is back (TS 37.340 §10.7), so the clamp to the cell's own
		// ŝ_max holds to random access; its rate, buffer and Eqn 2's
		// window stand (see the random access below).
		c.keepCell = c.anchorKeeps && ev.HO == signaling.HOLTEAnchor && ev.Target.ID != "" && ev.Target.ID == c.serving.ID
		c.commanded, c.commandAt = true, now
		if c.keepCell {
			c.prepare(c.serving)
			c.setState(now, Preparation, "anchor handover command, data cell kept")
			return
		}
		c.prepare(o.Target)
		c.armEqn2(o)
		// The UE drops the source cell's link-layer context: a burst in
		// progress will not finish as a drained queue.
		c.resetBurst()
		switch c.state {
		case Stable:
			c.setState(now, Preparation, "handover command without prediction")
		case Smoothing:
			c.setState(now, Preparation, "handover command during smoothing")
		}
	case signaling.KindRandomAccess:
		if ev.RAResult == signaling.RASuccess && c.commanded && c.state == Preparation && c.keepCell {
			c.commanded, c.keepCell = false, false
			c.setState(now, Stable, "random access success: anchor handover, data cell kept")
			return
		}
		if ev.RAResult == signaling.RASuccess && c.commanded && c.state == Preparation {
			c.commanded = false
			c.smoothAt = now
			// Each flow's mark for release rule (a) is what it had
			// received by now: the flush at the command has been seen,
			// the holes come later from the target.
			c.episode, c.episodeAt = c.episode+1, now
			c.stableCap, c.stableMeasured = c.sMax, c.sMaxMeasured
			c.setServing(c.target)
			c.resetBurst()
			// The new cell's capacity has nothing to do with the old one's.
			c.prevRate = c.est.Rate()
			c.est.Reset()
			c.rateLast, c.ratePrev = 0, 0
			c.env.reset()
			c.setState(now, Smoothing, "random access success")
		}
		// A failed attempt changes nothing: the UE retries until success
		// or T304; the execution bound ends the wait.
	}
}

// executed takes an inferred handover (signaling.Event.Inferred: an SN
// release or an LTE handover without SCG configuration, which XCAL does
// not export) as done. The reader infers it from its trace, a
// system-information read or a B1 that finds the SCG gone, which comes
// after the random access: no random access will follow, so Preparation
// would hold the clamp until ExecutionBound for nothing, and Smoothing's
// ACK suppression would come after the duplicate ACKs it is for (§4.4).
// What the random access would have done still holds: the data is on a
// new cell (its c_est starts over, no burst spans the change, its ŝ_max
// bounds Eqn 2), and Eqn 2 is armed by the handover's type (§4.5: from
// mmWave to sub-6 or LTE it keeps the mmWave window).
func (c *Controller) executed(now time.Time, o Outcome) {
	c.commanded = false
	c.episode, c.episodeAt = c.episode+1, now
	c.setServing(o.Target)
	c.resetBurst()
	c.prevRate = c.est.Rate()
	c.est.Reset()
	c.rateLast, c.ratePrev = 0, 0
	c.env.reset()
	c.armEqn2(o)
	c.stableCap, _, c.stableMeasured = c.lookupSMax(o.Target)
	c.setState(now, Stable, "inferred handover: executed already")
}

// armEqn2 sets Eqn 2 and the ramp for a handover (§4.5): from mmWave down
// to sub-6 or LTE Eqn 2 keeps the mmWave window; into mmWave with Eqn 2
// armed the ramp begins (a handover mmWave → mmWave keeps a ramp going).
func (c *Controller) armEqn2(o Outcome) {
	switch {
	case o.Target.Type == signaling.CellMmWave:
		if c.eqn2Armed {
			c.ramp = true
			c.rampGen++
		}
		c.eqn2Armed = false
	case o.Actual == signaling.HOMmWaveToSub6:
		c.eqn2Armed, c.ramp = true, false
	default:
		// Any other handover leaves mmWave (a horizontal sub-6 one while
		// armed, or one whose source type is unknown): no ramp there.
		if o.Target.Type != signaling.CellUnknown {
			c.ramp = false
		}
	}
}

// nameServing updates the serving cell from an event that names it.
func (c *Controller) nameServing(s signaling.Cell) {
	if s.ID == "" && s.Type == signaling.CellUnknown {
		return
	}
	if s.Type == signaling.CellUnknown && s.ID == c.serving.ID {
		s.Type = c.serving.Type
	}
	c.setServing(s)
}

func (c *Controller) onSlot(now time.Time, ev *signaling.Event) {
	c.nameServing(ev.Serving)
	// The burst's length and the delivery rate around it are physical
	// times: the slot's own timestamp (the modem's, or the emulator's),
	// not when the event reached the controller. A loaded phone reads
	// the signalling socket in bunches, and slots 0.5 ms apart arriving
	// together would make every burst last no time at all (ŝ_b = S).
	ts := now
	if !ev.Time.IsZero() {
		ts = ev.Time
	}
	// RTTs under the floor are not believed (as in Eqn 2); without any
	// RTT yet the floor stands in, the short window that errs low.
	b, ended := c.burst.slot(ts, ev.RBRatio, ev.Bytes, max(c.lastRTT, c.cfg.RTTFloor))
	c.slots.add(now, ts, ev.RBRatio, ev.Bytes)
	c.served.add(ts.Add(c.slotOffset(now, ts)), ev.Bytes)
	c.lastSlotAt = now
	if c.burst.drained {
		c.drainedAt = now
	}
	switch {
	case !c.burst.in:
		c.busySince = time.Time{}
	case c.busySince.IsZero():
		c.busySince = now
	}
	c.flushQueue()
	if !ended {
		return
	}
	// While a flow's timestamps measure the queue itself (queue.go), the
	// burst's assumed arrivals would only add estimates above it.
	measuring := !c.owdAt.IsZero() && now.Sub(c.owdAt) < owdLive
	// §4.3 gives up bursts on mmWave: its beams are not shared, so a
	// burst's end need not be the queue drained. The corrected estimate
	// does not depend on that: with Q0 the backlog at the burst's start,
	// A the arrivals during it and Q_end ≥ 0 what is left at its end,
	// S = Q0 + A − Q_end, so S − A ≤ Q0 ≤ s_max whether or not the queue
	// emptied; only the arrival estimate matters, as on sub-6. Without
	// it the controller never knew an mmWave buffer (0 for every n261
	// cell on the bench), and the return to mmWave had no bound. A modem
	// whose mmWave slots never show the burst's partial end records
	// nothing, and the sub-6 fallback stands (SMaxDB.Lookup).
	if !measuring && c.cfg.SMaxDB.Observe(c.serving, b.backlog(c.est.Rate())) && (c.eqn2Armed || c.ramp) {
		c.stableCap, _, c.stableMeasured = c.lookupSMax(c.serving)
	}
	if c.state == Smoothing {
		c.setState(now, Stable, "first burst in the target cell ended")
	}
}

func (c *Controller) prepare(target signaling.Cell) {
	c.target = target
	c.sMax, c.sMaxSrc, c.sMaxMeasured = c.lookupSMax(target)
	// Without the mmWave → mmWave clamp, ŝ_max still bounds what comes
	// after (stableCap at random access). A flow on the ramp back to
	// mmWave stays held: its sender's window is the stale one the ramp
	// is there for.
	//
	// Nor for a prediction the network rarely answers in time (answers.go):
	// its clamp would last to the deadline and save nothing, so the flows
	// keep what Stable gives them, the ramp's hold included. The command,
	// if one comes, clamps (c.commanded is set before prepare).
	c.ignored = c.answerRates && !c.commanded && c.pred.Unanswered()
	c.unclamped = c.ignored || !c.ramp && c.mmWaveToMmWave(target)
}

// mmWaveToMmWave reports whether a handover to target is an mmWave →
// mmWave one that MmWaveHorizontalClamp (off) leaves unclamped.
func (c *Controller) mmWaveToMmWave(target signaling.Cell) bool {
	return !c.mmClamp && c.serving.Type == signaling.CellMmWave && target.Type == signaling.CellMmWave
}

// Dirty reports whether the ŝ_max database has unsaved changes; the caller
// saves it off the packet path.
func (c *Controller) Dirty() bool { return c.cfg.SMaxDB.Dirty() }

// advanceEpoch moves the active-flow epochs forward to now. A flow is
// active while its last downlink payload is in the current or the previous
// epoch of length ActiveFlowWindow, i.e. for between one and two windows
// after it: counting that exactly takes O(1) per packet without visiting
// the flows (which the controller does not hold).
func (c *Controller) advanceEpoch(now time.Time) {
	if !c.epochStarted {
		c.epochStart, c.epochStarted = now, true
		return
	}
	el := now.Sub(c.epochStart)
	w := c.cfg.ActiveFlowWindow
	if el < w {
		return
	}
	n := int64(el / w)
	if n == 1 {
		c.prevOnly = c.cur
	} else {
		c.prevOnly = 0
	}
	c.cur = 0
	c.epoch += n
	c.epochStart = c.epochStart.Add(time.Duration(n) * w)
}

func (c *Controller) markActive(f *Flow) {
	switch f.lastEpoch {
	case c.epoch:
		return
	case c.epoch - 1:
		c.prevOnly--
	}
	c.cur++
	f.lastEpoch = c.epoch
}

// shareOf is how many flows share a budget, counting f itself even when it
// is idle (its next window may let it start).
func (c *Controller) shareOf(f *Flow) int {
	n := c.cur + c.prevOnly
	if f.lastEpoch == 0 || f.lastEpoch < c.epoch-1 {
		n++
	}
	if n < 1 {
		n = 1
	}
	return n
}

// OnPacket decides one packet's fate. It allocates nothing.
func (c *Controller) OnPacket(now time.Time, f *Flow, p *Packet) Verdict {
	if f == nil || p == nil || !f.attached {
		return Verdict{}
	}
	c.timers(now)
	c.advanceEpoch(now)
	if f.episode != c.episode {
		// First packet of this flow since random access completed: what
		// it had received by then is what Smoothing waits for.
		f.episode, f.snap, f.released = c.episode, f.high, !f.hasHigh
		// And its data takes a new cell: RTT_min starts over (Flow.newPath),
		// and the one-way delay's base waits for the cell's own (queue.go).
		f.newPath()
		if c.owdPath {
			f.owd.newPath(c.episodeAt)
		}
	}
	if p.Dir == Downlink {
		c.downlink(now, f, p)
		return Verdict{}
	}
	v := c.uplink(now, f, p)
	if v.Action != Drop {
		v = c.release(now, f, p, v)
		c.noteEdge(f, p, v)
		f.noteRecovery(p)
	}
	if p.HasTS && v.Action != Drop {
		// A dropped ACK never reaches the server, so its TSval is never
		// echoed; recording it would shadow the next ACK's send time.
		if p.WScale >= 0 {
			w := uint32(p.Window)
			if v.Action == Rewrite {
				w = uint32(v.Window)
			}
			f.offered = p.Ack + w<<min(uint(p.WScale), 14)
		}
		f.recordTSval(now, p.TSval, p.Ack)
	}
	return v
}

func (c *Controller) downlink(now time.Time, f *Flow, p *Packet) {
	var echoAck uint32
	var echoAt time.Time // when the phone forwarded the echoed ACK
	echoed := false
	if p.HasTS && p.Flags&FlagACK != 0 {
		f.noteEcho(now, p.TSecr)
		if d, a, ok := f.matchTSecr(now, p.TSecr); ok {
			f.addRTT(now, d)
			c.lastRTT = f.srtt
			echoAck, echoed, echoAt = a, true, now.Add(-d)
		}
	}
	if p.PayloadLen <= 0 {
		return
	}
	end := p.Seq + uint32(p.PayloadLen)
	if echoed && (!f.hasHigh || !packet.SeqLess(p.Seq, f.high)) {
		// New data, sent after the sender took the echoed ACK: all it
		// had sent beyond that ACK then was in flight (see edgeFloor).
		if d := end - echoAck; d > 0 && d < 1<<30 {
			f.inflight = d
		}
		// Everything the sender sent before it took the echoed ACK has
		// come (f.high, before this segment): had the window limited it,
		// that reaches the right edge of the ACK echoed before (later
		// ACKs only raise it); how far it stays below is the window it
		// left unused.
		// During a release only the echoes of its own ACKs say how the
		// sender uses its window (an RTT of 1 s under a collapsed cell
		// echoes ACKs from before the hold, with the laptop's window).
		fresh := f.relSince.IsZero() || !echoAt.Before(f.relSince)
		if f.prevEdgeOK && fresh {
			f.unused, f.unusedOK = 0, true
			if u := f.prevEdge - f.high; packet.SeqLess(f.high, f.prevEdge) && u < 1<<30 {
				f.unused = u
			}
		}
		if fresh {
			f.prevEdge, f.prevEdgeOK = f.echoEdge, true
		}
	}
	if c.retransmission(f, p) {
		// The sender is in loss recovery (see noteRecovery) and its
		// CUBIC epoch has restarted: the ramp lets it go (see ramp).
		// Data below the
		// highest seen alone is not enough: on mmWave the link layer
		// reorders (HARQ), and a segment that merely arrived late let
		// go of a flow whose epoch was still stale; on the bench's
		// mixed drive (rate bound, seed 1, the return at 207.15 s) the
		// ramp ended 1.35 s after random access with no retransmission,
		// the sender's stale 1.9 MB cwnd replaced a 0.7 MB rwnd at once
		// and the mmWave buffer dropped 740 segments within 0.1 s.
		f.enterRecovery()
		if c.eqn2Armed && now.Sub(c.episodeAt) >= eqn2LossGrace {
			// The dwell's queue floor (eqn2PipeQueue) is not the
			// cell's to hold: from here ŝ_max alone bounds it.
			f.eq2Loss, f.eq2LossEpisode = true, c.episode
		}
		if c.ramp {
			// Whether it leaves the window unused counts from here.
			f.rampFresh, f.unusedOK, f.prevEdgeOK = c.rampGen, false, false
		}
	}
	if p.HasTS && (!f.hasHigh || !packet.SeqLess(p.Seq, f.high)) {
		c.queueSample(now, f, p)
	}
	c.deliv.add(now, p.PayloadLen)
	if !f.hasHigh || packet.SeqLess(f.high, end) {
		f.high, f.hasHigh = end, true
		f.highTS = p.TSval
	}
	c.markActive(f)
	rtt := f.srtt
	if rtt == 0 {
		rtt = c.lastRTT
	}
	c.est.Sample(now, p.PayloadLen, rtt)
	if e := c.est.Rate(); e != c.rateLast {
		c.ratePrev, c.rateLast = c.rateLast, e
		if e == 0 {
			c.ratePrev = 0
		}
	}
	c.env.sample(now, p.PayloadLen, rtt)
}

func (c *Controller) uplink(now time.Time, f *Flow, p *Packet) Verdict {
	if c.passThrough {
		return Verdict{}
	}
	switch c.state {
	case Preparation:
		if c.ignored {
			// Not commanded (prepare): no duplicate ACK to hold back.
			return c.stableRwnd(now, f, p)
		}
		// Finding 2: at the command the UE flushes its reordering buffer,
		// so the laptop sees holes and answers with duplicate ACKs at
		// once. On a phone those ACKs would wait in the modem's uplink
		// until random access; this proxy sits before that queue, so it
		// starts §4.4's suppression here, for duplicate ACKs (Flow.
		// isDupACK: not advancing the cumulative ACK) that do not cover
		// everything the flow has been sent, within the same bound.
		if c.commanded && now.Sub(c.commandAt) < c.cfg.SmoothingBound && f.hasHigh &&
			f.isDupACK(p) && packet.SeqLess(p.Ack, f.high) && !f.inRecovery(p.Ack) && !c.lastNews(f, p) {
			return Verdict{Action: Drop, Reason: ReasonSmoothing}
		}
		// §4.3: the flows together may have ŝ_max in flight.
		return c.targetClamp(f, p)
	case Smoothing:
		// §4.4: hold back duplicate ACKs until this flow acknowledged
		// everything it had received before the command (an ACK that
		// advances is no duplicate: Flow.isDupACK).
		if !f.released {
			if p.Flags&FlagACK != 0 && !packet.SeqLess(p.Ack, f.snap) {
				f.released = true
			} else if f.isDupACK(p) && !f.inRecovery(p.Ack) && !c.lastNews(f, p) {
				return Verdict{Action: Drop, Reason: ReasonSmoothing}
			}
		}
		// §4.3's clamp holds until Smoothing ends: random access says the
		// target serves again, not that its buffer has room. Until the
		// first burst there drains what was forwarded to it (release rule
		// b), the backlog is still in the target's buffer, and a full
		// window let through now (the laptop's own, MBs on mmWave) would
		// arrive on top of it and overflow it (Finding 3).
		return c.targetClamp(f, p)
	}
	return c.stableRwnd(now, f, p)
}

// targetClamp is §4.3's clamp of Preparation and Smoothing: the flow's
// share of the target's ŝ_max, none for an unclamped handover (see
// prepare).
func (c *Controller) targetClamp(f *Flow, p *Packet) Verdict {
	if c.unclamped {
		return Verdict{}
	}
	return c.clamp(f, p, c.sMax/c.shareOf(f), ReasonPreparation)
}

// stableRwnd is Eqn 2 (§4.5): rwnd = λ·c_est·RTT_min/RTT, with c_est the
// bytes delivered per RTT (the estimator's rate times the flow's RTT), so
// algebraically λ·rate·RTT_min: λ times the bandwidth-delay product at the
// base RTT, shared between the active flows. It only ever lowers a window
// (rwnd can limit a sender, never speed it up), and only once the flow has
// minRTTSamples RTT samples and the estimator a complete interval (≥ 1
// RTT of data); flows without timestamps are never touched.
//
// After a return to mmWave (the ramp) the same rule holds the flow, with
// the mmWave cell's ŝ_max, until its sender retransmits (see ramp).
func (c *Controller) stableRwnd(now time.Time, f *Flow, p *Packet) Verdict {
	if !c.stableRate || !(c.eqn2Armed || c.ramp && f.rampFree != c.rampGen) {
		return Verdict{}
	}
	share := float64(c.shareOf(f))
	mss := p.segSize()
	if c.ramp && !c.eqn2Armed && f.rampFresh == c.rampGen && f.unusedOK &&
		float64(f.unused) > max(float64(c.stableCap)/share/4, float64(8*mss)) {
		// The sender's epoch is fresh and it leaves the window unused:
		// all it sent before taking an ACK ended well below the right
		// edge of the ACK it took before (by a quarter of the limit's
		// pace per RTT, at least eight segments), where a window-limited
		// sender reaches it. It is cwnd-limited, so letting it go
		// changes nothing at once, and its growth from here is its fresh
		// epoch's.
		// Let go at the retransmission alone, a sender whose cut cwnd
		// still exceeds the pipe and the buffer (0.7 of a stale window)
		// would send that excess at once: with a window carried at twice
		// pipe plus buffer, 2457 drops after a dip on the return
		// (TestReturnToMmWaveFreshEpochHeld).
		f.rampFree = c.rampGen
		f.held = false // its measure is fresh: no release follows (see release)
		return Verdict{}
	}
	if f.eq2Episode != c.episode || f.eq2At.IsZero() {
		f.eq2Episode, f.eq2At, f.eq2Last = c.episode, now, float64(c.stableCap)/share
	}
	r := c.est.Rate()
	if c.ramp && !c.eqn2Armed && c.pairRamp {
		r = c.pairRate()
	}
	if !(r > 0) || f.rttN < minRTTSamples || f.srtt <= 0 || f.rttMin <= 0 {
		// Just arrived on sub-6 with a window sized for mmWave: until
		// the new cell's rate and the flow's RTT are known, hold the
		// flows to its buffer (letting the window go would send the
		// mmWave-sized cwnd into the sub-6 buffer at once).
		if c.stableCap > 0 {
			lim := float64(c.stableCap) / share
			if fill, rtt := c.startFill(now, f, share); fill/share > lim {
				// The fill's growth, paced as below: toward the slots'
				// pipe by what is left of it per RTT_min.
				lim = max(lim, min(fill/share, f.eq2Paced(now, rtt, fill/share-f.eq2Last)))
			}
			f.eq2Last, f.eq2At = lim, now
			return c.clamp(f, p, int(lim), ReasonStableRate)
		}
		return Verdict{}
	}
	cEst := r * f.srtt.Seconds()
	// RTT_min above the smoothed RTT is a first sample of the path that
	// a handover inflated (the uplink frozen until random access, a
	// forwarded queue that does not drain: 67-116 ms on a 28 ms path for
	// 400 ms, the bench on 2026-12-07), not the path's: no more than
	// srtt. It lags after a faster path (srtt follows at 1/8 per sample:
	// 10 ms mmWave, 28 ms sub-6, ~300 ms under the pipe on the model);
	// reading the path's own RTT_min where the one-way wait shows no
	// queue needs that wait's base to be the new path's (queue.go keeps
	// the least of 4-8 s across handovers), so it stays as it is.
	rttMin, rtt := max(min(f.rttMin, f.srtt), c.cfg.RTTFloor), max(f.srtt, c.cfg.RTTFloor)
	rwnd := c.cfg.Lambda * cEst * rttMin.Seconds() / rtt.Seconds()
	// The cap: bytes in flight are the pipe (rate·RTT_min, nothing
	// queued) plus the standing queue at the bottleneck, the serving
	// cell's buffer. Eqn 2 alone allows λ·rate·RTT_min, i.e. a standing
	// queue of (λ−1) BDPs: on sub-6 with a buffer of ~1 BDP that is an
	// overflow, and Linux CUBIC does not grow cwnd while rwnd-limited
	// (tcp_is_cwnd_limited), so every such loss lowers the carried
	// mmWave window for good, defeating §4.5's purpose. rate·RTT_min +
	// ŝ_max keeps the queue at or under ŝ_max ≤ s_max, so no overflow;
	// it still probes: while the queue is empty (RTT = RTT_min) the
	// window exceeds the pipe by ŝ_max, so a faster cell's rate shows
	// within an RTT, and λ still governs below the cap.
	//
	// The pace: a window that opens by Δ lets the server send Δ at line
	// rate at once, into the queue, whatever the link's utilisation. So
	// the limit rises by at most ŝ_max per smoothed RTT, spread over the
	// RTT's ACKs: from an empty queue a step never queues more than
	// ŝ_max ≤ s_max, the cap's own bound (while the flow is rwnd-limited
	// and the queue empty, c_est·RTT_min is the window itself and the cap
	// rises by ŝ_max per RTT too). Half of that, as before, took the 43 KB
	// of the bench's sub-6 ŝ_max 6 RTTs to refill a 170 KB pipe after
	// every capacity dip, and the capacity changes every 0.1 s.
	//
	// RTT_min is the path's: it starts over at each handover and is
	// filtered against the phone's lone bad samples (Flow.addRTT). With
	// RTT_min at a fraction ρ of the path's, the cap is ρ times the
	// window in flight plus ŝ_max, a fixed point of ŝ_max/(1−ρ) whatever
	// the cell carries: on the bench the windows sat at 2.5–2.9 ŝ_max
	// (ρ ≈ 0.6), and with 9.5 ms on a 27.1 ms path (ρ = 0.35) at the
	// ŝ_max floor for the 7 s after mmWave → sub-6.
	//
	// The floor: ŝ_max itself. In flight ≤ ŝ_max ≤ s_max can never
	// overflow the buffer (§4.3's own argument for the clamp), so going
	// lower buys nothing, and Eqn 2 has no way back from low: rwnd_{k+1}
	// = λ·rwnd_k·RTT_min/RTT_k shrinks whenever RTT_k > λ·RTT_min, which
	// a window of a few segments reaches by itself (the laptop's 40 ms
	// delayed ACK on a lone segment), and one RTT interval with a gap in
	// it (c_est low) starts the fall. On the bench a sender once sat at
	// two segments for the last 7 s of a run after mmWave → sub-6.
	//
	// The rate in the cap (Config.Eqn2Bound): rate·RTT_min + ŝ_max keeps
	// the queue under ŝ_max only while the next RTT drains as fast as the
	// last one; a fall from r to r' queues (r − r')·RTT_min more, and the
	// measured sub-6 cells fall by half within 0.1 s (the bench: 124 → 40
	// Mbit/s, 4-61 drops and a 30 % cwnd cut each). BoundEnvelope puts
	// r_low there, the least per-RTT rate of the cell in the last
	// EnvelopeWindow (see envelope and DefaultEnvelopeWindow): a dip to
	// any rate at or above r_low then queues at most ŝ_max ≤ s_max. Not
	// on the ramp: r_low rises by at most ŝ_max/RTT_min per window while
	// the window holds the flow (its delivery rate is the cap's own), so
	// from a sub-6-sized window to an mmWave pipe of MBs it takes tens of
	// seconds where §4.5 and issue 9 want the cell filled within 1 s of
	// the return (TestReturnToMmWaveNoOverflow: 80 % in 42 RTTs instead of
	// ≤ 8 under the envelope, 5 % of the capacity with the sub-6
	// fallback ŝ_max); a dip during the ramp costs the ramp, which lets
	// go at the first retransmission, not the sub-6 dwell's window.
	// The standing queue the cap allows, and the pace: ŝ_max, or of a
	// measured queue a third in the sub-6 dwell (see eqn2MeasuredQueue)
	// and Config.RampQueue on the ramp (stableCap is already measuredUse
	// of it).
	queue := float64(c.stableCap)
	if c.stableMeasured {
		if c.eqn2Armed {
			queue *= eqn2MeasuredQueue / measuredUse
		} else {
			queue *= c.cfg.RampQueue / measuredUse
		}
	}
	eqn, pipe, capped, bound := rwnd, r, math.Inf(1), math.Inf(1)
	var pace float64 // how far the limit may rise per RTT: the queue, or the fill's step
	if c.stableCap > 0 {
		if c.cfg.Eqn2Bound == BoundEnvelope && c.eqn2Armed {
			if lo, ok := c.env.low(now); ok {
				pipe = min(pipe, lo)
			}
		}
		// The pipe, bytes in flight with nothing queued: rate·RTT_min,
		// or, where the phone measures the queue itself, the flow's
		// bytes in flight less those queued (rate × its one-way wait),
		// whichever is more. RTT_min/RTT alone sits below 1 with no
		// queue at all when the phone's RTT samples spread (its reads
		// batched, the rate measured over a little more than an RTT),
		// and the cap's fixed point ŝ_max/(1−ρ) held windows under the
		// pipe (TestEqn2DwellSmallSMaxBatchedPhone); the wait does not
		// depend on the RTT samples. Per flow, times the flows sharing.
		inPipe := pipe * rttMin.Seconds()
		// The pipe as the in-flight bound reads it: the cell's last
		// rate times an RTT_min no larger than the previous path's.
		boundPipe := r * f.boundRTTMin(rttMin, c.cfg.RTTFloor).Seconds()
		if w, ok := f.queueDelay(now, rtt); ok && f.inflight > 0 {
			// In flight, as far as the window in force allows: the
			// last measure can be of the window before the handover.
			owdPipe := share*min(float64(f.inflight), f.eq2Last) - r*w.Seconds()
			inPipe = max(inPipe, owdPipe)
			boundPipe = max(boundPipe, owdPipe)
		}
		if c.eqn2Armed && !(f.eq2Loss && f.eq2LossEpisode == c.episode) {
			queue = max(queue, eqn2PipeQueue*inPipe)
		}
		capped, pace = inPipe+queue, queue
		if whole, ok := c.inFlightBuffer(); c.inFlight && c.eqn2Armed && ok {
			// In flight at most the measured buffer where the pipe fits
			// under it (eqn2InFlightBound), with a slack. The pipe is
			// the cell's last rate (the envelope's r_low may be lower)
			// times RTT_min, or, where the phone measures the queue,
			// what is in flight less what is queued if that is more.
			// RTT_min starts over in each cell, and its first samples
			// there carry the forwarded queue (44-66 ms on a 27 ms path
			// on the bench, 2026-12-05): read with it, the pipe came
			// near the bound and let out a window that the next dip
			// overflowed, so the bound takes the previous path's
			// RTT_min when that is less. The rate is measured under the
			// window, so a window held at the bound reads a pipe of
			// the bound less what the RTT samples spread: the slack
			// lets a faster cell out.
			if whole > (1+eqn2BoundSlack)*boundPipe {
				bound = whole
			}
		}
		// The fill (Config.SlotPipe): with nothing queued the window is
		// all pipe, and the cell's MAC slots say how far the pipe goes;
		// c_est, Eqn 2's own input, says it one RTT late. So the window
		// may grow toward that pipe within the RTT, at most doubling.
		// Spread over the RTT's ACKs, a window that grows by Δ up to
		// the pipe adds Δ/RTT to an arrival rate of W/RTT, together
		// the pipe's rate: no queue forms while the slots' rate is the
		// flow's. Where other UEs share the cell it is less, and the
		// growth is slow start's (doubling per RTT) until a queue shows.
		if fill := c.slotFill(now, f, rtt, rttMin, share); fill > 0 {
			rwnd, capped = max(rwnd, fill), max(capped, fill)
			pace = max(pace, fill-f.eq2Last*share)
		}
		rwnd = min(rwnd, capped, bound)
		rwnd = max(rwnd, float64(c.stableCap))
	}
	rwnd /= share
	if c.stableCap > 0 {
		rwnd = min(rwnd, f.eq2Paced(now, rtt, pace/share))
		f.eq2Last, f.eq2At = rwnd, now
	}
	if !(rwnd < math.MaxInt32) {
		return Verdict{}
	}
	if c.cfg.Eqn2Trace != nil {
		c.cfg.Eqn2Trace(now, f, Eqn2Step{Rate: r, Pipe: pipe, RTTMin: rttMin, SRTT: rtt, Eqn: eqn / share, Cap: capped / share,
			Bound: bound / share, Queue: queue / share, Limit: int(rwnd), Share: int(share), Wait: f.lastWait, InFlight: f.inflight})
	}
	return c.clamp(f, p, int(rwnd), ReasonStableRate)
}

// slotFill is the window, for all flows of the cell, that Eqn 2's
// bounded window (the sub-6 dwell, and the ramp back to mmWave) may grow
// toward while f meets no standing queue (Flow.queueEmpty) and the
// serving cell's MAC slots give its rate (slotRate): twice the limit
// now, at most that rate times this path's RTT_min. Not the smaller of
// this path's and the previous one's, as the in-flight bound reads it:
// after mmWave → sub-6 that is the mmWave path's, and on the bench (02-13
// drive 1, 2026-12-06, m2ho seed 1 at 32.7 s) it held the fill at 392 KB
// of an 800 KB pipe. The first samples in a cell can carry the queue
// forwarded to it, and then the pipe reads high for an RTT or two; the
// doubling bound and the queue check stand against that, as in slow
// start. 0 where the rule does not apply: Config.SlotPipe off, neither
// in the dwell nor on the ramp, after the flow's own loss in this cell,
// a queue or no measure of it, no recent slot rate.
func (c *Controller) slotFill(now time.Time, f *Flow, rtt, rttMin time.Duration, share float64) float64 {
	if !c.slotPipe || !(c.eqn2Armed || c.ramp) || f.eq2Loss && f.eq2LossEpisode == c.episode {
		return 0
	}
	if empty, ok := f.queueEmpty(now, rtt, rttMin); !ok || !empty {
		return 0
	}
	r, ok := c.slots.get(now, 2*rtt)
	if !ok {
		return 0
	}
	return min(2*f.eq2Last*share, r*rttMin.Seconds())
}

// eq2Paced is how far f's Eqn 2 limit may have risen by now at pace
// bytes per rtt since it was last set (never below it).
func (f *Flow) eq2Paced(now time.Time, rtt time.Duration, pace float64) float64 {
	return f.eq2Last + max(pace, 0)*float64(now.Sub(f.eq2At))/float64(rtt)
}

// startFill is slotFill for a new cell's first round trips, while Eqn 2
// still waits for the new path's RTT_min and rate (stableRwnd's hold),
// with the RTT_min it reads the pipe with and paces it by: the previous
// path's, or the new path's latest median when that is less (a faster
// cell). Not the new path's first samples alone: they carry the queue
// the handover forwarded and the ACKs the frozen uplink held. 0 where
// the rule does not apply (Config.SlotStart off, no RTT known, and
// slotFill's own conditions: a queue, no recent slot rate).
//
// Why: the hold kept the flows at ŝ_max for the ~100 ms the new path
// needs for its RTT_min (three samples) and Eqn 2 for its first rate
// interval, 64 KB in a cell the database does not know; on the bench
// (02-13 drive 1, 2026-12-06, m2ho seed 3, mmWave -> sub-6 at 32.65 s)
// 18-22 Mbit/s for the first 200 ms of a 280-340 Mbit/s cell where plain
// CUBIC delivered 230-290. The MAC slots give the cell's rate within a
// few slots of random access, and the path's base RTT seldom moves much
// at a handover (the artifact's sRTT minima: 30.3 ms mmWave, 33.4 ms
// sub-6); where it does, the doubling bound and the queue check stand
// against a pipe read too large, as in slow start.
func (c *Controller) startFill(now time.Time, f *Flow, share float64) (fill float64, rttMin time.Duration) {
	if !c.slotStart {
		return 0, 0
	}
	rm := f.rttMinPrev
	if f.rttPathN > 0 && f.rttMed > 0 && (rm == 0 || f.rttMed < rm) {
		rm = f.rttMed
	}
	if rm <= 0 {
		return 0, 0
	}
	rm = max(rm, c.cfg.RTTFloor)
	return c.slotFill(now, f, rm, rm, share), rm
}

// pairRate is the cell's rate as the mean of c_est's last two per-RTT
// samples (the last alone until there are two in the cell).
//
// Why, on the ramp back to mmWave: there the flow is window-limited, so
// it arrives in one burst per RTT, and RTT-long intervals that close at
// the first segment after an srtt take one burst and part of the next,
// then the rest: the samples swing around the rate and the bytes moved
// out of one interval are in the next. On the bench's mixed drive
// (2026-12-05, run E, m2ho seed 3, the return at 181.30 s) the phone
// measured 325, 685, 359, 514, 316, 594 Mbit/s in consecutive RTTs of a
// flow that received ~500 Mbit/s on a steady 1.1 Gbit/s cell. Each low
// sample cut Eqn 2's window below what the flow had in flight
// (λ·(1 − swing)·RTT_min/RTT < 1), the rise back is paced, and the ramp
// held the flow at half the cell for 3 s (the 75 % within 1 s
// missed); the same low rate read the queue short in the cap's pipe (in
// flight less rate × wait). The mean of two samples has the swing out
// and follows a real fall one RTT later. On the model
// (TestReturnToMmWaveSwingingRate: a steady 1.1 Gbit/s cell, samples
// swinging ±50 %) the utilisation over 2 s goes from 58 % to 95 %, no
// drop either way; on the emulator's mmWave capacity model with the
// same swing (TestReturnToMmWaveVaryingCapacity) 75 % within 1 s in 19
// of 20 returns against 14.
func (c *Controller) pairRate() float64 {
	if c.ratePrev > 0 && c.rateLast > 0 {
		return (c.ratePrev + c.rateLast) / 2
	}
	return c.est.Rate()
}

// eqn2MeasuredQueue is the share of a measured ŝ_max (SMaxDB.ObserveQueue)
// that Eqn 2's cap lets stand queued in the sub-6 dwell; the rest is
// headroom for the cell's rate falling below r_low within an RTT.
//
// The cap's argument (rate·RTT_min + ŝ_max queues at most ŝ_max ≤ s_max)
// holds while the next RTT drains as fast as r_low, and the measured
// sub-6 cells fall below any recent rate (the emulator's model, fitted to
// the 0.1 s UDP logs: quantiles down to 0.2 of the mean). A burst estimate
// of ŝ_max was 3–6 times below the buffer, so the queue it allowed left
// the rest of the buffer as headroom without saying so; a measured queue
// is the buffer within a few percent, and a queue at it overflows at the
// first dip. On the model (m2ho/bound_test.go, TestEqn2MeasuredSMax; a
// 124 Mbit/s cell, ŝ_max 97 % of a 290 KB or a 416 KB buffer, ten 8 s
// dwells) the whole ŝ_max kept the carried cwnd in 0 of 10 dwells (at
// 82 % and 94 % of the capacity while they lasted), a third of it in 9
// and 9 (73 % and 85 %); in a sweep, half of it kept 5 of 10 on the
// 290 KB buffer and a quarter no more than a third, 1-2 points lower.
// What a dwell gives up to headroom the return to mmWave gets back with
// the carried window. The ramp back on
// mmWave keeps the whole ŝ_max: its overflows are the sender's, ended by
// letting it go (see ramp).
const eqn2MeasuredQueue = 1.0 / 3

// inFlightBuffer is the buffer the in-flight bound of the sub-6 dwell
// holds the flows to (eqn2InFlightBound), and whether there is one: the
// serving cell's measured ŝ_max where its buffer was seen full; else,
// with InFlightPeers, the least buffer seen full among the cells of its
// type, or the cell's own measured queue where deeper (a floor of its
// buffer), as §4.3 estimates an unknown cell from the known ones.
//
// Why the peers: a cell's own fullness is learned from its own overflow,
// and that overflow cuts the window Eqn 2 carries (the mixed drive,
// 2026-12-07, 6 seeds × 300 s: of the 58 sub-6 horizontal handovers
// under Eqn 2, 55 lost no segment before the next command; the 3 that did
// lost them 1.3-4.4 s into cells not yet seen full, the bound off and
// 1.3-2.0 MB in flight on 1387 KB buffers, and each cut the window
// carried from mmWave). A peer's full buffer is not a queue floor that a
// held window kept small (TestEqn2InFlightBoundNeedsFullBuffer's case):
// it is where one overflowed.
func (c *Controller) inFlightBuffer() (float64, bool) {
	var own float64
	if c.stableMeasured {
		own = float64(c.stableCap) / measuredUse
	}
	switch {
	case c.stableMeasured && c.cellFull:
		return own, true
	case c.peers && !c.cellFull && c.typeFull > 0:
		return max(float64(c.typeFull), own), true
	}
	return 0, false
}

// eqn2BoundSlack: the in-flight bound holds while the pipe is under
// 1/(1+eqn2BoundSlack) of it (see eqn2InFlightBound).
const eqn2BoundSlack = 1.0 / 32

// eqn2InFlightBound: in the sub-6 dwell, with a measured ŝ_max that the
// pipe fits under, the flows together have at most ŝ_max in flight.
//
// The cap rate·RTT_min + queue keeps the standing queue at queue only
// while the next RTT drains as fast as the last; when the cell's rate
// falls, what was in the pipe queues too, up to the whole window if the
// cell stalls. A window at or under the buffer can't overflow it
// whatever the cell does (§4.3's own argument for the Preparation clamp),
// and a measured ŝ_max is the buffer within a few percent, never above
// it (queue.go). The bound costs nothing while the pipe is well under the
// buffer (the measured sub-6 cells queue 20-170 ms against a ~27 ms
// pipe: buffers of several pipes), and it takes effect where the cell's
// rate rises toward the buffer, which is where a fall overflows: on the
// emulator's sub-6 model at scale 1.0 (1387 KB buffers, 150-195 Mbit/s
// means, 8 s and 30 s dwells; bound_test.go TestEqn2InFlightBound) the
// cap alone dropped segments in 8 of 40 dwells (1153 in all), each time
// cutting the carried cwnd; with the bound in 2 of 40 (417), at 99.2
// against 99.5 % of the capacity. Where the pipe comes within
// eqn2BoundSlack of the measured ŝ_max or exceeds it (a rate peak near
// or above the buffer, or an ŝ_max that a held flow kept small:
// eqn2PipeQueue) no window both fills the link and is safe, and the cap
// stands alone. The slack is the price of letting a window held at the
// bound grow when the cell is faster: with none, the one dwell model
// whose buffer is under the pipe (TestEqn2MeasuredSMax, 0.7 BDP) sat at
// the bound at 59.8 % of the capacity, with 1/32 at 64.7 % (and 1 of 40
// more dwells cut at scale 1.0); 1/16 and 1/8 lost 5 and 4 of the 40.

// eqn2PipeQueue is the least standing queue Eqn 2's cap allows in the
// sub-6 dwell, as a share of the pipe (bytes in flight with nothing
// queued), whatever ŝ_max says, until the flow's sender retransmits in
// the dwell.
//
// ŝ_max is the largest queue the phone has seen in the cell, a lower
// bound of its buffer and no more: a flow Eqn 2 holds never shows the
// phone more than the queue the cap allows, so a cell first measured
// with a small queue stays small (the bench, mixed drive, scale 1.0,
// seed 1, 2026-12-04: n77-a at 42 KB and n77-b at 24 KB against
// 1387 KB buffers, the cap's queue 14 KB and 8 KB, and windows held at
// a third of the pipe for seconds with the queue empty: 70 against
// pass's 212 Mbit/s). A queue that small is below the flow's own bursts
// (a batch of ACKs releases a few ms of the rate at once), so the cap
// can't tell growth from burstiness, and it takes ŝ_max per RTT to
// follow a cell whose capacity changes every 0.1 s.
//
// Why a quarter: the measured sub-6 cells queue far more than that. The
// artifact's TCP logs on sub-6 show sRTT p10 53.5 ms, p50 75.8 ms and
// p90 125.2 ms, i.e. standing queues of 20–70 ms at the cell's rate,
// on a path whose pipe is ~27–55 ms; a quarter of the pipe is 7–14 ms
// of queue, a fall of the cell by half within an RTT adds half a pipe
// more, and the sum stays under what the cells held. A cell that can't
// hold it drops, its sender retransmits, and the flow goes back to
// ŝ_max's bound for the rest of the dwell (one cut of the carried
// window, where a cap under the pipe cost two thirds of the dwell's
// goodput). Not on the ramp back to mmWave, whose queue is RampQueue's.
const eqn2PipeQueue = 0.25

// eqn2LossGrace is how long after random access a retransmission is the
// handover's, not the dwell's (see eqn2PipeQueue): the holes of the flush
// at the command, the tail of the forwarded queue and an overflow of the
// target by the data in flight are repaired within a few round trips of
// the random access. On the bench (mixed drive, scale 1.0, seed 1,
// 2026-12-04) most horizontal sub-6 handovers cost the flow one
// retransmission there; counted as the dwell's, they took the floor away
// for whole dwells (n77-a, 37 s at 31 against pass's 208 Mbit/s).
const eqn2LossGrace = 500 * time.Millisecond

// clamp lowers p's window to limit bytes (clampWindow), but never so far
// that the right edge ack + window falls below f.edge, the highest
// sequence number the sender may already have sent (edgeFloor).
//
// Why: a window that shrinks below the sender's snd_nxt stops more than
// new data. Linux neither sends a tail loss probe nor retransmits a
// segment that starts at or beyond the right edge, snd_una alone excepted
// (tcp_send_loss_probe, __tcp_retransmit_skb: "If receiver has shrunk his
// window, and skb is out of new window, do not retransmit it"). When a
// handover loses the tail of the forwarded queue, everything that arrives
// is in order, no SACK shows the hole, and with the edge below snd_nxt
// only the retransmission timeout is left: on the bench (mixed drive,
// seed 2, 87.08 s and 180.16 s) the clamp to ŝ_max set ack + 30 KB
// against ~600 KB in flight, the sender sat 600 ms without a packet and
// its cwnd fell from 605 KB to one segment. Holding the edge where the
// sender already is costs the clamp nothing: the sender can send nothing
// new below its snd_nxt either way, and the edge advances again once
// ack + limit passes it, as §4.3's clamp and Eqn 2 let it. What the clamp
// bounds is the data the sender may add, not the window's field.
func (c *Controller) clamp(f *Flow, p *Packet, limit int, reason Reason) Verdict {
	if f.hasEdge && packet.SeqLess(p.Ack, f.edge) {
		if held := int(f.edge - p.Ack); held > limit && held < 1<<30 {
			limit = held
		}
	}
	return clampWindow(p, limit, reason)
}

// release opens a window the proxy held (a clamp, Eqn 2, the ramp) by at
// most the bytes each ACK acknowledges: the right edge advances by twice
// them, the window grows by them, so it doubles per RTT at most, as slow
// start does. It ends once the laptop's own window is the smaller one, or
// once the sender leaves the window unused (Flow.unused: it is
// cwnd-limited, and the rest of its window opens nothing at once).
//
// Why: a sender held by the window and not by its cwnd sends the
// difference the moment the window opens. On the bench's mixed drive
// (seed 2, 138 s) a prediction clamped a flow to ŝ_max for 0.8 s while
// the mmWave cell was at 0-6 Mbit/s; at its withdrawal the sender sent
// ~300 segments within 50 ms into that cell. Worse, the phone's estimate
// of the sender's right edge for ACKs it leaves alone (noteEdge: the
// in-flight bytes measured at the last echo, an RTT old) was measured
// under the clamp, so it lagged that burst: the clamp of the real
// handover 0.56 s later held an edge below the sender's snd_nxt, the
// handover lost the tail of the forwarded queue, and with no loss probe
// possible (see clamp) the server waited 1.27 s for its RTO. While the
// release rewrites, f.edge is the edge granted, exactly.
//
// Not in pass-through: without signalling the proxy leaves packets as
// they are (a sender it held then gets the laptop's window at once).
func (c *Controller) release(now time.Time, f *Flow, p *Packet, v Verdict) Verdict {
	if v.Action == Rewrite {
		f.held, f.relSince = true, time.Time{}
		return v
	}
	// Not held (the ramp's let-go clears held itself: it saw the sender
	// leave its window unused since its retransmission, cwnd-limited,
	// nothing to open gradually).
	if !f.held || v.Action != Pass {
		return v
	}
	if f.relSince.IsZero() {
		// Whether the sender leaves the window unused counts from here:
		// what was measured before the hold (a sender cwnd-limited then)
		// says nothing of the cwnd it holds now.
		f.relSince, f.unusedOK, f.prevEdgeOK = now, false, false
	}
	if c.passThrough || p.Flags&FlagACK == 0 || p.WScale < 0 || !f.hasEdge ||
		!packet.SeqLess(p.Ack, f.edge) || f.edge-p.Ack >= 1<<30 ||
		f.unusedOK && f.unused > uint32(8*p.segSize()) {
		f.open()
		return v
	}
	grow := uint32(0)
	if f.hasLastAck && packet.SeqLess(f.lastAck, p.Ack) && p.Ack-f.lastAck < 1<<29 {
		grow = p.Ack - f.lastAck
	}
	limit := int(f.edge-p.Ack) + 2*int(grow)
	rv := clampWindow(p, limit, ReasonRelease)
	if rv.Action != Rewrite {
		f.open() // the laptop's own window is the smaller
	}
	return rv
}

// noteEdge updates f.edge from an ACK that goes to the sender with verdict
// v. A rewritten window is a right edge the sender may use in full. The
// laptop's own window is usually far beyond what the sender has in flight
// (MBs on a flow that is cwnd-limited), so it counts only as far as the
// sender's in-flight bytes measured one RTT ago (Flow.inflight, at least
// what the phone has seen beyond this ACK) plus two segments: that is
// where the sender's snd_nxt is when the window it holds is not the
// limit. An estimate too low leaves the sender's loss probe a shorter
// edge; one too high lets it add the excess under the clamp, which is why
// the margin is two segments and not more. The measurement errs high, on
// the side of the timeout: ACKs within one tick of the laptop's timestamp
// clock (1 ms on Linux) share a TSval, the ring keeps the first one's ACK,
// and the echoing segment may answer a later one, so the error is at most
// what the laptop acknowledged in that tick (25 KB at 200 Mbit/s).
func (c *Controller) noteEdge(f *Flow, p *Packet, v Verdict) {
	if p.Flags&FlagACK == 0 || p.WScale < 0 {
		return
	}
	ws := min(uint(p.WScale), 14) // RFC 7323 §2.3
	w := int(p.Window) << ws
	if v.Action == Rewrite {
		w = int(v.Window) << ws
	} else {
		mss := p.segSize()
		in := int(f.inflight)
		if f.hasHigh && packet.SeqLess(p.Ack, f.high) {
			in = max(in, int(f.high-p.Ack))
		}
		w = min(w, in+2*mss)
	}
	if e := p.Ack + uint32(w); !f.hasEdge || packet.SeqLess(f.edge, e) {
		f.edge, f.hasEdge = e, true
	}
}

// tsTick is the sender's timestamp clock period assumed: Linux's TSval
// counts milliseconds (tcp_time_stamp_ms).
const tsTick = time.Millisecond

// retransmission reports whether downlink segment p is one the sender
// sent again: below the highest byte seen and sent after the segment that
// carried it (a later TSval). A hole filled late, by the forwarded queue
// or by link-layer reordering, carries an older TSval. A segment with the
// same TSval was sent in the same tick: a retransmission then lies about
// a window below the highest (the hole is where the loss was, one round
// trip back), a segment reordered within the tick at most what the
// sender sends in a tick or two, so the same TSval counts beyond that
// (c_est for two ticks, at least 64 KB).
func (c *Controller) retransmission(f *Flow, p *Packet) bool {
	if !p.HasTS || !f.hasHigh || !packet.SeqLess(p.Seq, f.high) {
		return false
	}
	if tsNewer(p.TSval, f.highTS) {
		return true
	}
	if p.TSval != f.highTS {
		return false
	}
	d := float64(f.high - p.Seq)
	return d < 1<<30 && d > max(64<<10, c.est.Rate()*(2*tsTick).Seconds())
}

// dupThresh is how many duplicate ACKs the sender must have had to be in
// loss recovery (RFC 5681 §3.2's DupThresh; Linux's RACK needs fewer).
const dupThresh = 3

// tsNewer reports whether TSval a is later than b (RFC 7323 §5.3's
// modular comparison).
func tsNewer(a, b uint32) bool { return int32(a-b) > 0 }

// noteRecovery follows, from an ACK that goes to the sender, whether the
// sender is in loss recovery, so that no ACK of a flow in recovery is
// suppressed (see inRecovery). Three duplicate ACKs that reported a hole
// (ack below the highest byte the laptop has been sent) have reached the
// sender: it has taken the hole for loss (RFC 5681 §3.2, RFC 6675; RACK
// sooner). The laptop acknowledging the recovery point ends it.
func (f *Flow) noteRecovery(p *Packet) {
	if p.Flags&FlagACK == 0 {
		return
	}
	if f.recovering && !packet.SeqLess(p.Ack, f.recoverPt) {
		f.recovering = false
	}
	switch {
	case f.hasLastAck && p.Ack == f.lastAck && p.IsPureACK() && f.hasHigh && packet.SeqLess(p.Ack, f.high):
		if f.dupN < dupThresh {
			f.dupN++
		}
		if f.dupN >= dupThresh {
			f.enterRecovery()
		}
	case !f.hasLastAck || packet.SeqLess(f.lastAck, p.Ack):
		f.lastAck, f.hasLastAck, f.dupN = p.Ack, true, 0
	}
}

// enterRecovery marks the sender in loss recovery until the laptop
// acknowledges its recovery point: what the sender had sent when it
// entered it (Linux's high_seq, its snd_nxt then), which the phone knows
// as high or, above it, the sender's right edge (f.edge). Erring high
// only keeps the exception longer.
func (f *Flow) enterRecovery() {
	pt := f.high
	if f.hasEdge && packet.SeqLess(pt, f.edge) && f.edge-pt < 1<<30 {
		pt = f.edge
	}
	if !f.recovering || packet.SeqLess(f.recoverPt, pt) {
		f.recoverPt = pt
	}
	f.recovering = true
}

// lastNews reports whether a duplicate ACK may be the last the laptop
// sends for a while: the phone has seen (f.high) about everything the
// sender may have sent (f.edge, its snd_nxt as the phone can tell), so
// no more data is on its way that would make the laptop send another.
// Such an ACK is not suppressed (§4.4's exception for the proxy's rule
// that it never causes a timeout).
//
// Why. Suppression is safe while a later ACK will carry what the dropped
// one said: the forwarded data fills the flush's holes and the laptop
// acknowledges it, or the sender's own loss probe draws an ACK. When the
// holes are losses (the source cell's buffer overflowed in a capacity
// outage just before the command, and the laptop sees them only after
// it) and nothing else is in flight (the clamp holds the sender's right
// edge where it is, so it adds nothing), the dropped duplicate ACKs were
// the laptop's last, and the sender, in Open, learns of the loss only at
// its loss probe, which comes no sooner than its RTO when a queue or an
// outage has raised its srtt (RFC 8985 §7.2: PTO = 2·SRTT, capped at
// the RTO). On the bench (measured drive bw-1, 9.13 s) 26 ACKs were
// suppressed, the link carried nothing for a second, and the RTO fired.
// The margin is the error of f.edge: noteEdge's two segments and what the
// laptop acknowledges within a timestamp tick or two (two ticks of c_est,
// or of the previous cell's where f.edge was measured, the estimate
// starting over at random access); a flow with less than that in flight
// beyond what the phone has seen gives up suppression, at worst a
// spurious fast retransmit where it would otherwise risk a timeout.
//
// Only for a flow whose in-flight bytes the phone has measured (TCP
// timestamps, Flow.inflight): without them f.edge is no more than high
// plus noteEdge's margin, which says nothing of what the sender holds.
func (c *Controller) lastNews(f *Flow, p *Packet) bool {
	if !f.hasEdge || !f.hasHigh || f.inflight == 0 {
		return false
	}
	if !packet.SeqLess(f.high, f.edge) {
		return true
	}
	mss := p.segSize()
	d := f.edge - f.high
	return d < 1<<30 && float64(d) < float64(2*mss)+max(c.est.Rate(), c.prevRate)*(2*tsTick).Seconds()
}

// inRecovery reports whether an ACK for ack comes from a flow whose
// sender is in loss recovery: then §4.4's suppression does not touch it.
//
// Why. §4.4 drops duplicate ACKs around a handover so that the sender
// does not take the handover's reordering (the flush at the command, the
// forwarded queue after random access) for loss and cut its window. A
// sender already in recovery has made its cut (once per episode, RFC 6675
// §5, PRR RFC 6937), so there is nothing left to save, and its duplicate
// ACKs are then its repair: the SACK blocks by which RACK (RFC 8985 §6)
// finds a lost retransmission, and PRR's clock for what it sends next. A
// dropped ACK is gone for good; when the dropped ones are the flow's last
// (the queue drained, nothing else in flight), no later ACK brings their
// news, and in recovery the sender sends no tail loss probe (RFC 8985
// §7.2: only when not in loss recovery), so only the RTO is left. On the
// bench (measured drive bw-1, 9.13 s) the flow had lost segments and
// retransmissions in a capacity outage before the command; 16 and 17
// suppressed duplicate ACKs were the laptop's last, the link then carried
// nothing for 800 ms and the server's RTO fired (TCPTimeouts 1,
// TCPLostRetransmit 30 and 31), where the same ACKs let the pass variant
// repair the loss by itself.
func (f *Flow) inRecovery(ack uint32) bool {
	return f.recovering && packet.SeqLess(ack, f.recoverPt)
}

// clampWindow lowers p's window to limit bytes: never above the packet's
// own window, never below two segments, never for a flow whose scale is
// unknown. The raw field is rounded up so the scaled window is ≥ limit.
func clampWindow(p *Packet, limit int, reason Reason) Verdict {
	if p.WScale < 0 {
		return Verdict{}
	}
	ws := uint(p.WScale)
	if ws > 14 { // RFC 7323 §2.3: larger shifts are treated as 14
		ws = 14
	}
	orig := int(p.Window) << ws
	mss := p.segSize()
	if limit < 2*mss {
		limit = 2 * mss
	}
	if limit >= orig {
		return Verdict{}
	}
	raw := (limit + 1<<ws - 1) >> ws
	if raw >= int(p.Window) {
		return Verdict{}
	}
	return Verdict{Action: Rewrite, Window: uint16(raw), Reason: reason}
}
