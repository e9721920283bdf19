// Package wave is the Wave burst pacer of the m2ho QUIC tunnel (QUIC Wave,
// Computer Networks; TCP Wave before it): the sender sends bursts of a fixed
// number of packets, one burst every TxTime, and sets TxTime from the
// dispersion of each burst's ACK train instead of from a congestion window.
//
// The Pacer is a pure core on virtual time: every input carries `now`, it
// owns no goroutine, timer or socket, and it knows nothing of QUIC. Inputs
// are the pacer's own releases (OnRelease), the QUIC packets that carried
// them (OnSent, with their packet numbers), the ACK frames that came back
// (OnAck, the frame's ranges) and the losses the transport declared (OnLost),
// plus the handover hints of the M2HO controller. Outputs are Budget/Next
// (when the next burst may go and how big) and State (everything a log line
// or a metric needs).
//
// Wave's rules, as implemented in ngtcp2's QUIC Wave (PR #1680) and the TCP
// Wave kernel module, with the constants' sources:
//
//   - bursts of BurstPackets = 10 packets (both implementations);
//   - TxTime starts at 200 ms (both), never below 1 ms (ngtcp2);
//   - per burst acknowledged completely by at least 3 ACK frames (ngtcp2:
//     "works well with at least 3 acks per burst"):
//     ATD = (t_last − t_first)·n/(n−1) with n the number of ACK frames;
//     α = (pilot_rtt − min_rtt)/pilot_rtt,
//     avg_rtt ← α·avg_rtt + (1−α)·pilot_rtt, ΔRTT = avg_rtt − min_rtt;
//     tracking: TxTime = ATD + ΔRTT/2;
//   - adjustment when ΔRTT > β = 150 ms (both): TxTime back to 200 ms,
//     min_rtt forgotten, avg_rtt = smoothed RTT, burst records dropped;
//   - recovery mode (QUIC Wave's addition, because a QUIC receiver may put
//     the ACKs of a whole burst in one frame): TxTime = 0.4·TxTime +
//     0.2·(rtt − min_rtt);
//   - RTT samples above 10·min_rtt are ignored (ngtcp2).
//
// What the paper and the implementations leave open, and what this package
// chose:
//
//   - pilot_rtt is the RTT measured by the first ACK frame that acknowledges
//     a packet of the burst: now − send time of the largest packet of the
//     burst that frame newly acknowledges (ngtcp2 takes the RTT of the
//     packet whose ACK arrived first).
//
//   - "ACKs" in "≥ 3 ACKs" and n in the ATD formula count distinct ACK
//     frames that newly acknowledge part of the burst, not packets (ngtcp2
//     counts distinct ACK arrival times). With quic-go's receiver acking
//     every second ack-eliciting packet a 10-packet burst gives ~5 frames.
//
//   - A burst is settled when every datagram released in it has been seen
//     in a sent packet and every such packet is acknowledged or declared
//     lost. ngtcp2 waits for acked bytes == sent bytes, so a burst with a
//     loss is never measured and its record is never freed; here a burst
//     with a loss is settled (record freed, counted in BurstsLossy) but
//     gives no ATD: the survivors' dispersion is not the dispersion of the
//     burst that was sent.
//
//   - Partial and spread bursts. A TCP sender inside the tunnel hands its
//     segments over one or two at a time (its ACK clock), so many bursts
//     are partial (the whole queue was fewer than a burst) or spread (the
//     window filled as packets trickled in). A burst of k < burstN
//     datagrams released at once is measured like a full one and its ATD
//     scaled to the burst size, ATD·burstN/k: k packets sent back to back
//     leave the bottleneck k/C apart whatever burstN is (BurstsPartial).
//     A burst whose datagrams were released (or, if the transport below
//     spread them more, sent) over a spread s is measured only when
//     2·s <= the ACK train's length: then at least half of the
//     train is the path's dispersion, not the sender's spacing (a burst
//     released at the sender's own pace, acked at that pace, is refused:
//     BurstsAppLimited). Recovery needs a burst of the pacer's size
//     released within TxTime/4. This replaces holding the window until a
//     burst is queued (a "burst-fill wait", which delays every packet of
//     an application-limited flow and still measures nothing when the
//     queue never fills).
//
//   - ACK Delay. An ACK frame's ACK Delay field (RFC 9000 §19.3) is taken
//     off its arrival time for the train (OnAckDelayed): the odd last
//     packet of a burst is acked after max_ack_delay (25 ms in quic-go),
//     which would otherwise stretch the train of every burst with an odd
//     number of packets, and of every partial burst, by up to 25 ms. The
//     field is trusted up to Config.MaxAckDelay (the peer's max_ack_delay,
//     25 ms), and a train it would reorder (last before first) gives no
//     sample, so a bogus field cannot shrink a train to nothing.
//
//   - Recovery is applied when one ACK frame settles a full burst on its own
//     (n = 1), at most once per ACK frame, with rtt = that frame's RTT
//     sample. ngtcp2 triggers on "bytes delivered by one ACK ≥ one burst",
//     which is the same situation seen from the bytes. A full burst settled
//     by exactly 2 frames has neither a usable train nor the recovery
//     situation: it gives no update (BurstsShortTrain).
//
//   - The adjustment test runs after each ΔRTT update, in tracking and in
//     recovery (as ngtcp2 does); burst records are dropped in both cases
//     (ngtcp2 drops them only in tracking). Packets already in flight keep
//     their records for bytes-in-flight accounting but belong to no burst.
//
//   - avg_rtt has no value before the first burst (0): the first update
//     sets it to the pilot (α would weight a meaningless 0 otherwise).
//
//   - The smoothed RTT used on adjustment is this package's own RFC 9002
//     EWMA (7/8) over the ACK frames' RTT samples, ack delay not subtracted
//     (Wave measures dispersion at the sender; the peer's ack delay does
//     not enter any rule).
//
//   - ngtcp2 floors TxTime to whole milliseconds (a detail of its pacing
//     interval); here TxTime keeps nanoseconds.
//
//   - Held last ACK. A QUIC receiver acks every second ack-eliciting
//     packet; once its count is out of step with the bursts (one extra
//     packet: a reordered or late one, a PING, stream data), the last
//     packet of every burst waits for the first of the next, and the frame
//     that settles the burst arrives a TxTime later with an ACK Delay
//     measured from that next packet, not from the held one. The train
//     then measures the pacer's own interval (ATD ≈ TxTime, which grows
//     each burst: on the 600 → 10 ms switch of bdp-switch it climbed from
//     2.2 to 19 ms). When the settling frame also newly acknowledges a
//     packet sent after the burst, the train ends at the frame before it
//     and the dispersion per packet is that train's length over the
//     packets acknowledged after its first frame (for frames of two
//     packets this is Wave's train·n/(n−1) per packet; it also holds when
//     the count's step puts one packet in the first frame), if MinAcks
//     frames remain (TrainsTrimmed).
//
//   - ATD filter. Tracking uses the third smallest ATD of the last
//     ATDWindow (16) measured bursts (the smallest while it holds fewer
//     than 8), kept per packet (ATD / burst size) so that
//     partial bursts and a resized burst compare, not the last burst's
//     alone (both published implementations use the last one). On the
//     real stack (bench low-bdp: 50 Mbit/s, a 10-packet burst leaves the
//     bottleneck 2.16 ms long) the trains the server's quic-go tracer
//     timestamps had a median of 5.5 ms and a 95th percentile of 23 ms:
//     scheduling delays on a loaded host (the phone's goroutine acks late,
//     the server's goroutine stamps late) stretch a train far more often
//     than they compress it, and with the last train alone every
//     stretched one slowed the next bursts (the pacer ran at ~10 Mbit/s
//     of 50). A windowed minimum of the dispersion is a windowed maximum
//     of the bandwidth, as BBR keeps (Cardwell et al., "BBR:
//     Congestion-Based Congestion Control", ACM Queue 2016), and it errs
//     on the side Wave's own ΔRTT/2 term repairs: a too-short ATD sends a
//     little faster than the path, a queue builds and ΔRTT/2 lengthens
//     TxTime, whereas a too-long ATD leaves the path idle and nothing in
//     Wave ever says so. The filter is emptied by adjustment and by an
//     executed handover (its samples measured a path that is gone).
//     Not the minimum itself: trains are compressed too, if rarely (this
//     session's low-bdp run on a more loaded host: single filtered ATDs of
//     35-140 µs against the path's 2.16 ms, ACK frames that the phone or
//     the server's goroutine handled as one batch), and the minimum
//     trusts the most compressed one; the third smallest ignores up to two
//     per window (in the ACK-jitter simulation the inner TCP's mean RTT
//     is 22 ms instead of 35 with the noise floor). ATDWindow 1 is Wave's
//     published rule. The burst size grows only
//     when the burst's own train (not the filter's minimum, which may be
//     one compressed train) is below the floor.
//
//   - ΔRTT noise floor. Tracking answers ΔRTT above a noise floor:
//     TxTime = ATD + max(0, ΔRTT − floor)/2, the floor being the smallest
//     of the last NoiseWindow (16) values of the smoothed ΔRTT (EWMA 1/8,
//     RFC 6298's SRTT gain), at most the filtered ATD. On the real stack
//     (bench low-bdp, 50 Mbit/s, 10 ms) the ATD filter sat at the path's
//     2.16 ms per burst but ΔRTT stayed at 1.3-1.8 ms with no queue: the
//     pilots carry the host's scheduling noise and the emulator's 1 ms
//     ticks, min_rtt is the luckiest of them and avg_rtt follows the
//     pilots (Wave's α = (pilot − min_rtt)/pilot is small when the pilot
//     is near min_rtt), so ΔRTT is the noise's mean above its minimum,
//     and ΔRTT/2 held the pacer 25-30 % under the path (quic-wave 37.1 vs
//     quic 42.9 Mbit/s). Queueing raises every sample for as long as the
//     queue stands; noise comes and goes. The windowed minimum of the
//     smoothed ΔRTT is what ΔRTT never falls below although no queue
//     stood the whole window: the noise's share, which no pacing can
//     remove. Its bound, one burst's dispersion, is the queue a burst
//     sender keeps at the bottleneck anyway: a floor any larger would
//     hide a standing queue (a CoDel-like minimum alone did, when
//     compressed ACK trains made the ATD filter's minimum too short and
//     the ΔRTT term was all that held the rate: the queue moved into the
//     bottleneck's buffer). The adjustment test (ΔRTT > β) and recovery
//     keep the raw ΔRTT. Emptied by adjustment and an executed handover.
//     NoiseWindow -1 is Wave's published rule.
//
//   - Bounded memory: at most MaxBursts burst records and
//     MaxBursts·BurstPackets packet records, in preallocated rings (ngtcp2
//     mallocs one node per burst and never frees a lossy one). When a ring
//     is full the oldest record is evicted: an evicted packet counts as
//     lost (PacketsEvicted), an evicted burst gives no sample
//     (BurstsEvicted). The default 1024 bursts covers an RTT of 1 s at
//     TxTime 1 ms.
//
//   - A burst window: once a burst starts at t0, up to BurstPackets
//     datagrams may be released until t0 + TxTime, and the next burst may
//     start at t0 + TxTime (computed with the current TxTime, so a new
//     estimate applies to the window already open). A datagram arriving at
//     an empty queue therefore goes at once when the window allows.
//
//   - Burst size. Wave's bursts are fixed (10 packets) in both published
//     implementations, and the TCP Wave module makes the size a parameter:
//     with TxTime >= 1 ms that caps the rate at ~108 Mbit/s, a tenth of an
//     mmWave cell. Here burstN adapts between BurstPackets and
//     MaxBurstPackets (128): when the tracking rule asks for a TxTime
//     below the floor (ATD + ΔRTT/2 < MinTxTime) after a full burst of the
//     current size, no loss and at least MinAcks frames, the path drained
//     that burst faster than the floor lets the pacer send it and no queue
//     grew (ΔRTT/2 is part of the sum), so burstN doubles and TxTime
//     becomes twice the computed value: the same rate, now expressible
//     above the floor; the next measured burst of the new size decides
//     the next step (one doubling per measured burst, like slow start but
//     measured, not assumed). When a tracking or recovery TxTime reaches
//     4·max(MinTxTime, min_rtt/8), burstN halves with TxTime (same rate,
//     as often as it takes in one step: a shrink needs no measurement):
//     small bursts keep the burst's own queue short when no floor binds. A
//     lossy burst of the current size halves burstN at the same rate (the
//     burst may have overflowed a shallow buffer; Wave does not slow down
//     on loss). Adjustment and a hint without c_est restart at
//     BurstPackets. Recovery never grows the burst: without a train
//     nothing shows the path drained it. An executed hint sizes the burst
//     from c_est: the smallest burstN with burstN·NominalPacketBytes /
//     c_est >= MinTxTime.
//
//   - Train resolution. A train is timestamped with the noise of the
//     hosts and links it crosses, which does not shrink with the train:
//     the emulator delivers up to 1 ms late, a 5G cell schedules in slots
//     of 0.125-1 ms, and the phone's and the server's goroutines stamp ACKs
//     when they get a CPU. At 50 Mbit/s a 10-packet burst leaves the
//     bottleneck in 2.16 ms, so a millisecond of noise is half the train.
//     On the bench's high-bdp scenario (50 Mbit/s, 600 ms) the ATD filter
//     read 2.6-4.5 ms (the server log's atd) and Wave ran at 25 of 50
//     Mbit/s with quic-go's window well above its bytes in flight (server
//     qlog: cwnd 4.9 MB, in flight 1.8-2.1 MB); on virtual time with the
//     receiver-stall and ACK-jitter models (jitter_test.go) an inner TCP
//     got 35 % and 18 % of C. So while the trains are noisy the burst
//     grows until its train is min_rtt/TrainRTTDivisor (8) long, as it
//     grows at the TxTime floor (one doubling per measured full burst,
//     rate kept, up to MaxBurstPackets): noisy means that the ATD filter
//     is full and more than half of its trains are over 10 % longer than
//     the filter's value, and more than half are shorter than that floor.
//     A clean path (all trains alike) keeps its bursts: a bigger burst
//     takes longer to show a rate drop (on the 600 → 10 ms switch of
//     TestSimLinkBDPSwitch unconditional growth to 128 packets queued
//     enough at the old rate to force an adjustment: 550 ms to
//     re-converge instead of 300). min_rtt/8 bounds the burst's own queue
//     at an eighth of the RTT (HyStart's delay threshold is the same
//     fraction); at the bench's low-bdp (10 ms) the floor is 1.25 ms,
//     below a 10-packet train, so nothing changes there. Same models,
//     high BDP, inner TCP: 98 % and 95 % of C; TrainRTTDivisor -1 turns
//     it off.
//
//   - Startup ramp. Before its first measurement Wave sends a burst every
//     InitialTxTime (200 ms): ~0.6 Mbit/s, Wave's probe rate for a sender
//     that is the flow. In the tunnel the flows are inner TCPs in slow
//     start, which double their window every RTT whatever the pacer does,
//     and the first measurement needs a burst acked by at least MinAcks
//     frames: on the real stack (bench high-bdp, 600 ms) the inner TCP's
//     ACK-clocked segments make spread bursts (not measured) and the
//     receiver's batching short trains, so the server's pacer stayed in
//     initial mode for the first 2 s of the flow and held it at 10
//     packets per 200 ms from 0.75 s on (the emulator's packet log), the
//     inner TCP's segments queued in front of it, its RTT rose by 80-120
//     ms, and Linux's HyStart (which leaves slow start once the round's
//     RTT exceeds its minimum by 4-16 ms) ended slow start at 100-200 KB
//     of a 3.75 MB BDP in 5 of 9 runs (session 11, Wave with three queue
//     depths: 25-35 Mbit/s of 50 over 60 s, against 31-47 in the others,
//     whose slow start went on to 1.4-3.1 MB). So until the first
//     measurement a burst window that was used up and whose queue was
//     still waiting at its end (the next release within half a TxTime of
//     it) halves TxTime, down to MinTxTime: the pacer's rate doubles per
//     window while datagrams wait for it, and quic-go's own controller
//     underneath (Reno with HyStart, the `quic` variant's limit) decides
//     what leaves, until a measured burst hands the rate to tracking or
//     recovery. Adjustment keeps Wave's rule (there the path said its
//     queue is over β). StartupRampOff turns it off.
//
//   - Handover hints (no published Wave has them): a predicted handover caps
//     bytes in flight (sent and not acked or lost, plus released and not
//     yet sent) at the pipe (Wave's BDP estimate) plus ŝ_max, so that
//     what queues is at most ŝ_max (see OnHandoverPredicted), cwnd-like
//     (a release may start below the cap and overshoot by less than a
//     packet; never a stall with nothing in flight), and leaves TxTime
//     alone; an executed handover restarts the
//     estimate (OnHandoverExecuted): min_rtt and the smoothed RTT are
//     forgotten and the packets sent before it give no RTT sample (they
//     measure the old path: one such sample as min_rtt would make every
//     new-path sample look 10× too large and force an adjustment); a
//     withdrawal lifts the cap.
//
// Underneath, quic-go keeps its own NewReno and pacer (it has no pluggable
// congestion control): Wave only decides what is handed to SendDatagram
// and when. On loopback, quic-go's receiver reads a batch of packets before
// its ACK goes out, so ACK frames cover ~6 packets and the pacer runs
// mostly in recovery mode, as QUIC Wave reports with GSO.
//
// Memory per Pacer with the defaults: 1024 burst records (200 bytes) and
// 10240 packet records (48 bytes), ~0.7 MB, preallocated. 10240 packets in
// flight is 13.8 MB: 1 Gbit/s for 110 ms of RTT; beyond that the oldest
// records are evicted (PacketsEvicted) and estimates degrade.
//
// The Pacer is not safe for concurrent use; the Pump serialises it.
package wave

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Mode is the state of Wave's state machine (QUIC Wave: initial, tracking,
// recovery, adjustment), plus Hinted: the estimate restarted from a
// handover hint's c_est and not yet replaced by a measurement.
type Mode uint8

const (
	ModeInitial    Mode = iota // TxTime = InitialTxTime, no measurement yet
	ModeTracking               // last TxTime from an ACK train: ATD + ΔRTT/2
	ModeRecovery               // last TxTime from QUIC Wave's recovery rule
	ModeAdjustment             // ΔRTT > β: state reset, back to InitialTxTime
	ModeHinted                 // restarted from a handover hint's c_est
)

func (m Mode) String() string {
	switch m {
	case ModeInitial:
		return "initial"
	case ModeTracking:
		return "tracking"
	case ModeRecovery:
		return "recovery"
	case ModeAdjustment:
		return "adjustment"
	case ModeHinted:
		return "hinted"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Constants of Wave (see the package comment for their sources).
const (
	DefaultBurstPackets  = 10
	DefaultInitialTxTime = 200 * time.Millisecond
	DefaultBeta          = 150 * time.Millisecond
	DefaultMinTxTime     = time.Millisecond
	DefaultMinAcks       = 3
	DefaultRTTFilter     = 10
	DefaultMaxBursts     = 1024
	// DefaultMaxBurstPackets bounds the adaptive burst size: at the 1 ms
	// TxTime floor, 128 packets of 1350 bytes is ~1.4 Gbit/s, above
	// mmWave's ~1 Gbit/s.
	DefaultMaxBurstPackets = 128
	DefaultMaxAckDelay     = 25 * time.Millisecond
	// DefaultATDWindow is how many measured bursts the ATD filter keeps
	// (see "ATD filter" in the package comment).
	DefaultATDWindow = 16
	// DefaultTrainRTTDivisor: a burst's ACK train should be at least
	// min_rtt/8 long (see "Train resolution" in the package comment).
	DefaultTrainRTTDivisor = 8
	// DefaultQueueBDP: Gate.QueueLimit holds twice the bandwidth-delay
	// estimate (see there).
	DefaultQueueBDP = 2.0
	// DefaultQueueDelay: on a path whose min_rtt is long, Gate.QueueLimit
	// holds no more than 300 ms of the estimated rate, down to
	// QueueFloorBDP estimates (see Config.QueueDelay).
	DefaultQueueDelay = 300 * time.Millisecond
	// QueueFloorBDP is the least share of the bandwidth-delay estimate
	// Config.QueueDelay leaves the queue: a loss-based inner TCP that cuts
	// its window to β = 0.7 keeps the link busy only if 0.7·(BDP + queue)
	// ≥ BDP, i.e. queue ≥ 0.43 BDP.
	QueueFloorBDP = 0.5
	// DefaultNoiseWindow is how many ΔRTT updates the noise floor keeps
	// (see "ΔRTT noise floor" in the package comment).
	DefaultNoiseWindow = 16
	// noiseGain is the EWMA gain of the smoothed ΔRTT the noise floor is
	// the windowed minimum of (RFC 6298's 1/8 for SRTT).
	noiseGain = 8
	// DefaultNominalPacketBytes is the size of a full tunnel packet on the
	// wire: a ~1280-byte inner IP packet plus QUIC short header, DATAGRAM
	// frame header and AEAD tag. It converts a hinted rate (bytes/s) into a
	// TxTime for a burst of BurstPackets packets.
	DefaultNominalPacketBytes = 1350

	recoveryKeep = 0.4 // QUIC Wave recovery: TxTime ← 0.4·TxTime + 0.2·d_rtt
	recoveryGain = 0.2
)

// Config parameterises a Pacer. The zero value of a field means its default.
type Config struct {
	BurstPackets       int           // packets per burst (10)
	InitialTxTime      time.Duration // TxTime at start and after adjustment (200 ms)
	Beta               time.Duration // adjustment threshold on ΔRTT (150 ms)
	MinTxTime          time.Duration // floor of TxTime (1 ms)
	MinAcks            int           // ACK frames a burst needs for an ATD (3)
	RTTFilter          int           // samples above RTTFilter·min_rtt are ignored (10)
	MaxBursts          int           // burst records kept (1024)
	NominalPacketBytes int           // bytes of a full packet, for hinted rates (1350)
	// MaxBurstPackets bounds the adaptive burst size (see "Burst size" in
	// the package comment); BurstPackets is its floor and start. Default
	// max(128, BurstPackets); equal to BurstPackets: fixed bursts.
	MaxBurstPackets int
	// MaxAckDelay caps the ACK Delay taken off an ACK frame's arrival
	// (OnAckDelayed): the peer's max_ack_delay (25 ms, RFC 9000 §18.2 and
	// quic-go's default). A larger field is not trusted further.
	MaxAckDelay time.Duration
	// ATDWindow is how many measured bursts' dispersions the ATD filter
	// keeps: tracking uses the smallest of them (see "ATD filter" in the
	// package comment). 1 is Wave's published rule (the last burst's ATD
	// alone). Default DefaultATDWindow.
	ATDWindow int
	// TrainRTTDivisor sets the burst size's second floor (see "Train
	// resolution" in the package comment): while the ACK trains are
	// noisy the burst grows until its train is min_rtt/TrainRTTDivisor
	// long, and it shrinks only above shrinkAt times that. Default
	// DefaultTrainRTTDivisor (8); -1 turns it off (the burst grows only at
	// the TxTime floor, as before).
	TrainRTTDivisor int
	// QueueWindow, when set (10 ms..1 min), is the window of
	// Gate.QueueLimit's bandwidth-delay estimate: the limit takes the
	// larger of the current estimate and the third largest of its maxima
	// over ten slots of QueueWindow/10, so a capacity dip shorter than the
	// window does not shrink the queue bound under the inner TCP's window,
	// at the price of a longer standing queue (see Gate.QueueLimit).
	// Default 0: the current estimate alone.
	QueueWindow time.Duration
	// QueueBDP is how many bandwidth-delay estimates Gate.QueueLimit lets
	// queue in front of the pacer (plus QueueLimitBatch), 0.25..8.
	// Default DefaultQueueBDP (2).
	QueueBDP float64
	// QueueDelay caps that bound by delay: it holds at most
	// max(QueueFloorBDP, QueueDelay/min_rtt) estimates (and never more than
	// QueueBDP), so two estimates stand where min_rtt is at most
	// QueueDelay/2 and half of one on a 600 ms path, where two would put
	// 1.2 s of queue under the inner TCP. Default DefaultQueueDelay
	// (300 ms); -1 turns the cap off (QueueBDP on every path).
	QueueDelay time.Duration
	// NoiseWindow is how many ΔRTT updates the noise floor's windowed
	// minimum spans (see "ΔRTT noise floor" in the package comment):
	// tracking uses max(0, ΔRTT − floor). Default DefaultNoiseWindow; -1
	// turns the floor off (Wave's published rule, TxTime = ATD + ΔRTT/2).
	NoiseWindow int
	// StartupRampOff turns the startup ramp off (see "Startup ramp" in
	// the package comment): TxTime then stays at InitialTxTime until the
	// first measurement, Wave's published rule.
	StartupRampOff bool
}

// DefaultConfig returns Wave's published constants.
func DefaultConfig() Config {
	return Config{
		BurstPackets:       DefaultBurstPackets,
		InitialTxTime:      DefaultInitialTxTime,
		Beta:               DefaultBeta,
		MinTxTime:          DefaultMinTxTime,
		MinAcks:            DefaultMinAcks,
		RTTFilter:          DefaultRTTFilter,
		MaxBursts:          DefaultMaxBursts,
		NominalPacketBytes: DefaultNominalPacketBytes,
		MaxBurstPackets:    DefaultMaxBurstPackets,
		MaxAckDelay:        DefaultMaxAckDelay,
		ATDWindow:          DefaultATDWindow,
		NoiseWindow:        DefaultNoiseWindow,
		TrainRTTDivisor:    DefaultTrainRTTDivisor,
		QueueBDP:           DefaultQueueBDP,
		QueueDelay:         DefaultQueueDelay,
	}
}

func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.BurstPackets == 0 {
		c.BurstPackets = d.BurstPackets
	}
	if c.InitialTxTime == 0 {
		c.InitialTxTime = d.InitialTxTime
	}
	if c.Beta == 0 {
		c.Beta = d.Beta
	}
	if c.MinTxTime == 0 {
		c.MinTxTime = d.MinTxTime
	}
	if c.MinAcks == 0 {
		c.MinAcks = d.MinAcks
	}
	if c.RTTFilter == 0 {
		c.RTTFilter = d.RTTFilter
	}
	if c.MaxBursts == 0 {
		c.MaxBursts = d.MaxBursts
	}
	if c.NominalPacketBytes == 0 {
		c.NominalPacketBytes = d.NominalPacketBytes
	}
	if c.MaxAckDelay == 0 {
		c.MaxAckDelay = d.MaxAckDelay
	}
	if c.MaxBurstPackets == 0 {
		c.MaxBurstPackets = max(d.MaxBurstPackets, c.BurstPackets)
	}
	if c.ATDWindow == 0 {
		c.ATDWindow = d.ATDWindow
	}
	if c.NoiseWindow == 0 {
		c.NoiseWindow = d.NoiseWindow
	}
	if c.TrainRTTDivisor == 0 {
		c.TrainRTTDivisor = d.TrainRTTDivisor
	}
	if c.QueueBDP == 0 {
		c.QueueBDP = d.QueueBDP
	}
	if c.QueueDelay == 0 {
		c.QueueDelay = d.QueueDelay
	}
	switch {
	case c.BurstPackets < 1 || c.BurstPackets > 1<<16:
		return c, fmt.Errorf("wave: Config.BurstPackets = %d, want 1..65536", c.BurstPackets)
	case c.InitialTxTime < 0:
		return c, fmt.Errorf("wave: Config.InitialTxTime = %v, want > 0", c.InitialTxTime)
	case c.Beta < 0:
		return c, fmt.Errorf("wave: Config.Beta = %v, want > 0", c.Beta)
	case c.MinTxTime < 0 || c.MinTxTime > c.InitialTxTime:
		return c, fmt.Errorf("wave: Config.MinTxTime = %v, want 0 < MinTxTime <= InitialTxTime (%v)", c.MinTxTime, c.InitialTxTime)
	case c.MinAcks < 2:
		return c, fmt.Errorf("wave: Config.MinAcks = %d, want >= 2 (the ATD formula divides by n-1)", c.MinAcks)
	case c.RTTFilter < 1:
		return c, fmt.Errorf("wave: Config.RTTFilter = %d, want >= 1", c.RTTFilter)
	case c.MaxBursts < 1 || c.MaxBursts > 1<<20:
		return c, fmt.Errorf("wave: Config.MaxBursts = %d, want 1..1048576", c.MaxBursts)
	case c.NominalPacketBytes < 1:
		return c, fmt.Errorf("wave: Config.NominalPacketBytes = %d, want > 0", c.NominalPacketBytes)
	case c.MaxAckDelay < 0:
		return c, fmt.Errorf("wave: Config.MaxAckDelay = %v, want > 0", c.MaxAckDelay)
	case c.NoiseWindow != -1 && (c.NoiseWindow < 1 || c.NoiseWindow > 1<<12):
		return c, fmt.Errorf("wave: Config.NoiseWindow = %d, want 1..4096 or -1 (off)", c.NoiseWindow)
	case c.TrainRTTDivisor != -1 && (c.TrainRTTDivisor < 1 || c.TrainRTTDivisor > 1<<10):
		return c, fmt.Errorf("wave: Config.TrainRTTDivisor = %d, want 1..1024 or -1 (off)", c.TrainRTTDivisor)
	case !(c.QueueBDP >= 0.25 && c.QueueBDP <= 8):
		return c, fmt.Errorf("wave: Config.QueueBDP = %v, want 0.25..8", c.QueueBDP)
	case c.QueueDelay < 0 && c.QueueDelay != -1:
		return c, fmt.Errorf("wave: Config.QueueDelay = %v, want > 0, or -1 (off)", c.QueueDelay)
	case c.QueueWindow != 0 && (c.QueueWindow < 10*time.Millisecond || c.QueueWindow > time.Minute):
		return c, fmt.Errorf("wave: Config.QueueWindow = %v, want 10ms..1m or 0 (off)", c.QueueWindow)
	case c.ATDWindow < 1 || c.ATDWindow > 1<<12:
		return c, fmt.Errorf("wave: Config.ATDWindow = %d, want 1..4096", c.ATDWindow)
	case c.MaxBurstPackets < c.BurstPackets || c.MaxBurstPackets > 1<<16:
		return c, fmt.Errorf("wave: Config.MaxBurstPackets = %d, want BurstPackets (%d)..65536", c.MaxBurstPackets, c.BurstPackets)
	}
	return c, nil
}

// AckRange is one range of an ACK frame: packets Smallest..Largest
// (inclusive) are acknowledged. Same meaning as a QUIC ACK range (RFC 9000
// §19.3); the order of ranges in a frame does not matter here.
type AckRange struct {
	Smallest, Largest int64
}

// Counters count what the Pacer did and what it refused; all monotonic.
type Counters struct {
	Bursts           uint64 // burst windows opened
	BurstsMeasured   uint64 // bursts that gave an ATD (tracking updates)
	RecoveryUpdates  uint64 // recovery-mode TxTime updates
	Adjustments      uint64 // ΔRTT > β resets
	BurstsLossy      uint64 // settled with a loss: no sample
	BurstsAppLimited uint64 // released too spread out (or too few acks for a partial burst): no sample
	BurstsPartial    uint64 // partial bursts measured (ATD scaled to the burst size)
	BurstGrows       uint64 // burst size doubled (TxTime at its floor)
	BurstShrinks     uint64 // burst size halved (TxTime well above its floor, or a lossy burst)
	StartupRamps     uint64 // TxTime halved before the first measurement: a full window, the queue still waiting
	BurstsShortTrain uint64 // full, settled by 2..MinAcks-1 frames: no sample
	BurstsEvicted    uint64 // dropped from the full burst ring
	BurstsDropped    uint64 // dropped by an adjustment or a handover restart
	PacketsSent      uint64 // packets attributed to a burst
	PacketsUnpaced   uint64 // sent packets with no released datagram to match
	PacketsAcked     uint64
	PacketsLost      uint64 // declared lost by the transport
	PacketsEvicted   uint64 // dropped from the full packet ring (counted lost)
	PacketNumberBad  uint64 // OnSent with a packet number not above the last
	AckFrames        uint64
	AckRangesBad     uint64 // ranges with Smallest > Largest
	SamplesFiltered  uint64 // RTT samples above RTTFilter·min_rtt
	ReleaseOverrun   uint64 // OnRelease with more than the budget allowed
	CapBlocked       uint64 // Budget calls refused by the ŝ_max cap
	SettleOverflow   uint64 // bursts settled beyond 64 in one ACK frame: no sample
	TrainsTrimmed    uint64 // trains ended at the frame before a held last ACK
	HintsPredicted   uint64
	HintsExecuted    uint64
	HintsWithdrawn   uint64
	HintsNoRate      uint64 // executed hints with c_est 0 (unknown): estimate restarted, rate kept
	HintsInvalid     uint64 // hints with ŝ_max <= 0 or c_est < 0 / NaN / Inf
}

// State is the Pacer's state for logs and metrics.
type State struct {
	Mode        Mode
	TxTime      time.Duration
	ATD         time.Duration // ackTrainDispersion tracking used: the ATD filter's minimum, at the current burst size
	ATDLast     time.Duration // the last burst's own ATD (at the current burst size), before the filter
	MinRTT      time.Duration // 0 when forgotten
	AvgRTT      time.Duration
	DeltaRTT    time.Duration // avg_rtt − min_rtt
	NoiseFloor  time.Duration // the ΔRTT noise floor tracking subtracts (0 when off)
	Alpha       float64
	PilotRTT    time.Duration // last burst's pilot
	LatestRTT   time.Duration // last accepted ACK-frame sample
	SmoothedRTT time.Duration
	// BurstPackets is the current (adaptive) burst size.
	BurstPackets int
	NextBurst    time.Time // earliest start of the next burst window

	BytesInFlight int // sent, not yet acked or lost, plus released not yet sent
	Predicted     bool
	CapBytes      int     // ŝ_max cap while a handover is predicted, else 0
	CellType      string  // from the last executed handover
	HintRate      float64 // c_est (bytes/s) of the last executed handover
	LiveBursts    int

	Counters
}

type pktState uint8

const (
	pktInFlight pktState = iota
	pktAcked
	pktLost
)

type pkt struct {
	pn    int64
	sent  time.Time
	burst uint64 // burst id, noBurst when detached
	bytes int32
	state pktState
}

const noBurst = math.MaxUint64

type burst struct {
	id           uint64
	start        time.Time // release instant of the first datagram
	released     int       // datagrams released
	pendingBytes int       // released bytes not yet seen in sent packets
	matched      int       // datagrams seen in sent packets
	packets      int       // packets carrying them
	acked, lost  int       // packets
	acks         int       // distinct ACK frames acknowledging part of it
	lastFrame    uint64    // ACK frame sequence that last touched it
	firstAck     time.Time
	lastAck      time.Time
	pilot        time.Duration
	pilotPN      int64
	size         int       // the burst size when it opened
	lastRel      time.Time // release instant of the last datagram
	firstSent    time.Time // OnSent time of its first packet
	lastSent     time.Time // and of its last
	lastPN       int64     // packet number of its last packet
	prevAck      time.Time // lastAck before the last frame that touched it
	ackedPrev    int       // packets acked before that frame
	heldLast     bool      // its settling frame also acked a later packet (see track)
	ackedFirst   int       // packets its first ACK frame acknowledged
	foreign      bool      // the window's first datagrams are not in it: no sample
	live         bool
}

// spread is how long the burst took to leave: from its first release to
// its last, or from its first packet sent to its last when the transport
// spread it more (quic-go's own pacer may spread a burst Wave released at
// once), so the dispersion is judged against what was sent.
func (b *burst) spread() time.Duration {
	return max(b.lastRel.Sub(b.start), b.lastSent.Sub(b.firstSent))
}

func (b *burst) settled() bool {
	return b.matched >= b.released && b.packets > 0 && b.acked+b.lost == b.packets
}

// Pacer is Wave's core. Create it with New.
type Pacer struct {
	cfg Config

	mode                     Mode
	txTime, atd              time.Duration
	minRTT, avgRTT, deltaRTT time.Duration
	alpha                    float64
	pilot, latest, srtt      time.Duration

	// current burst window
	winOpen     bool
	winStart    time.Time
	winReleased int
	winBurst    uint64

	bursts []burst // ring indexed by id % len
	bHead  uint64  // oldest id that may be live
	bNext  uint64  // id of the next burst
	bMatch uint64  // oldest id that may still wait for sent packets

	pkts  []pkt // ring sorted by pn
	pHead int
	pLen  int
	lastP int64
	anyP  bool

	inflight int // bytes of in-flight packet records
	pending  int // released bytes not yet seen sent

	ackSeq  uint64
	settled []burst // bursts settled by the current ACK frame (preallocated)

	predicted bool
	capBytes  int
	cellType  string
	hintRate  float64

	burstN int // current burst size, BurstPackets..MaxBurstPackets

	// ATD filter: the measured bursts' dispersions per packet (ATD /
	// burst size, so that a resize keeps them comparable), a ring of
	// ATDWindow, preallocated; atdN of them valid.
	atdPer  []time.Duration
	atdNext int
	atdN    int
	// ΔRTT noise floor: smoothed ΔRTT (dSmooth, 0: none yet) and the
	// last NoiseWindow values of it, preallocated; floorN valid.
	dSmooth    time.Duration
	floorPer   []time.Duration
	floorNext  int
	floorN     int
	noiseFloor time.Duration
	atdLast    time.Duration

	restartAt time.Time // last executed handover: older packets give no RTT sample

	c Counters
}

// New returns a Pacer in ModeInitial.
func New(cfg Config) (*Pacer, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Pacer{
		cfg:      cfg,
		txTime:   cfg.InitialTxTime,
		burstN:   cfg.BurstPackets,
		bursts:   make([]burst, cfg.MaxBursts),
		pkts:     make([]pkt, cfg.MaxBursts*cfg.BurstPackets),
		settled:  make([]burst, 0, 64),
		atdPer:   make([]time.Duration, cfg.ATDWindow),
		floorPer: make([]time.Duration, max(cfg.NoiseWindow, 1)),
	}
	return p, nil
}

// Config returns the effective configuration (defaults filled in).
func (p *Pacer) Config() Config { return p.cfg }

// TxTime is the current interval between burst starts.
func (p *Pacer) TxTime() time.Duration { return p.txTime }

// nextStart is the earliest start of a new burst window.
func (p *Pacer) nextStart() time.Time {
	if !p.winOpen {
		return time.Time{}
	}
	return p.winStart.Add(p.txTime)
}

// Budget says how much may be released now: up to packets datagrams and
// bytes (math.MaxInt without a cap): a release may go on while the bytes
// it released are below bytes (so it may overshoot by less than one
// packet, as a congestion window does). packets == 0 means wait (see
// Next). While a handover is predicted the bytes budget is ŝ_max minus the
// bytes in flight; with nothing in flight it is all of ŝ_max (> 0), so the
// cap can slow the sender but never stall it (M2HO MobiCom'24: the clamp
// is never 0).
func (p *Pacer) Budget(now time.Time) (packets, bytes int) {
	return p.budget(now, true)
}

func (p *Pacer) budget(now time.Time, count bool) (packets, bytes int) {
	if p.winOpen && now.Before(p.nextStart()) {
		packets = p.burstN - p.winReleased
	} else {
		packets = p.burstN
	}
	if packets <= 0 {
		return 0, 0
	}
	if !p.predicted {
		return packets, math.MaxInt
	}
	// cwnd-like: a release may start while bytes in flight are below ŝ_max
	// and may overshoot it by less than one packet; with nothing in flight
	// the budget is the whole cap, so the cap never stalls the sender.
	used := p.inflight + p.pending
	if used >= p.capBytes {
		if count {
			p.c.CapBlocked++
		}
		return 0, 0
	}
	return packets, p.capBytes - used
}

func (p *Pacer) capBlocked() bool {
	return p.predicted && p.inflight+p.pending >= p.capBytes
}

// Next says when the next release may happen and how many datagrams it
// may hold: at == now with n > 0 when something may go now; at in the
// future (the end of the burst window) when the window is used up; the
// zero time and n == 0 when only an ACK or a loss can open the ŝ_max cap.
func (p *Pacer) Next(now time.Time) (at time.Time, n int) {
	if n, _ = p.budget(now, false); n > 0 {
		return now, n
	}
	if p.capBlocked() {
		return time.Time{}, 0
	}
	return p.nextStart(), p.burstN
}

// OnRelease records that n datagrams of total size bytes were handed to the
// transport at now (after Budget allowed them). It opens a new burst window
// when the previous one has ended.
func (p *Pacer) OnRelease(now time.Time, n, bytes int) {
	if n <= 0 {
		return
	}
	if bytes < 0 {
		bytes = 0
	}
	if !p.winOpen || !now.Before(p.nextStart()) {
		p.rampStartup(now)
		p.winOpen = true
		p.winStart = now
		p.winReleased = 0
		p.newBurst(now)
	}
	b := p.burstByID(p.winBurst)
	if b == nil { // dropped by an adjustment within the window
		b = p.newBurst(now)
		b.foreign = true
	}
	if p.winReleased+n > p.burstN {
		p.c.ReleaseOverrun++
	}
	p.winReleased += n
	p.pending += bytes
	b.lastRel = now
	b.released += n
	b.pendingBytes += bytes
}

// rampStartup is the startup ramp (see the package comment), called when
// a release at now opens a new burst window: before any measurement, a
// window that released a whole burst followed by a release within half a
// TxTime of the window's end means datagrams waited for the window, so
// TxTime halves (down to MinTxTime).
func (p *Pacer) rampStartup(now time.Time) {
	if p.cfg.StartupRampOff || p.mode != ModeInitial || !p.winOpen || p.winReleased < p.burstN {
		return
	}
	if now.Sub(p.nextStart()) > p.txTime/2 {
		return // the flow paused: nothing waited for the window
	}
	if t := max(p.txTime/2, p.cfg.MinTxTime); t < p.txTime {
		p.txTime = t
		p.c.StartupRamps++
	}
}

// newBurst starts a burst record, evicting the oldest when the ring is full.
func (p *Pacer) newBurst(now time.Time) *burst {
	if p.bNext-p.bHead == uint64(len(p.bursts)) {
		old := &p.bursts[p.bHead%uint64(len(p.bursts))]
		if old.live {
			p.c.BurstsEvicted++
			p.killBurst(old)
		}
		p.bHead++
		p.advanceHead()
	}
	id := p.bNext
	p.bNext++
	b := &p.bursts[id%uint64(len(p.bursts))]
	*b = burst{id: id, start: now, lastRel: now, size: p.burstN, live: true, pilotPN: math.MinInt64}
	p.winBurst = id
	p.c.Bursts++
	return b
}

func (p *Pacer) burstByID(id uint64) *burst {
	if id == noBurst {
		return nil
	}
	b := &p.bursts[id%uint64(len(p.bursts))]
	if b.id != id || !b.live {
		return nil
	}
	return b
}

// killBurst frees a record; its released-but-unsent bytes leave pending.
func (p *Pacer) killBurst(b *burst) {
	p.pending -= b.pendingBytes
	if p.pending < 0 {
		p.pending = 0
	}
	b.pendingBytes = 0
	b.live = false
}

func (p *Pacer) advanceHead() {
	for p.bHead < p.bNext && !p.bursts[p.bHead%uint64(len(p.bursts))].live {
		p.bHead++
	}
	if p.bMatch < p.bHead {
		p.bMatch = p.bHead
	}
}

// OnSent records a QUIC packet sent at now with packet number pn, size
// bytes on the wire, carrying datagrams of the datagrams the pacer
// released (FIFO: the oldest released and not yet matched go first).
// Packet numbers must increase (one packet number space, 1-RTT).
func (p *Pacer) OnSent(now time.Time, pn int64, bytes, datagrams int) {
	if p.anyP && pn <= p.lastP {
		p.c.PacketNumberBad++
		return
	}
	if datagrams <= 0 {
		return
	}
	p.anyP, p.lastP = true, pn
	// find the burst these datagrams were released in
	var b *burst
	for p.bMatch < p.bNext {
		c := p.burstByID(p.bMatch)
		if c != nil && c.matched < c.released {
			b = c
			break
		}
		p.bMatch++
	}
	if b == nil {
		p.c.PacketsUnpaced++
		return
	}
	if b.packets == 0 {
		b.firstSent = now
	}
	b.lastSent = now
	b.lastPN = pn
	b.matched += datagrams
	b.packets++
	sub := min(bytes, b.pendingBytes)
	if b.matched >= b.released {
		sub = b.pendingBytes
	}
	b.pendingBytes -= sub
	p.pending -= sub
	if p.pending < 0 {
		p.pending = 0
	}
	if p.pLen == len(p.pkts) {
		p.evictPacket()
	}
	i := (p.pHead + p.pLen) % len(p.pkts)
	p.pkts[i] = pkt{pn: pn, sent: now, burst: b.id, bytes: int32(min(bytes, math.MaxInt32)), state: pktInFlight}
	p.pLen++
	p.inflight += bytes
	p.c.PacketsSent++
}

func (p *Pacer) evictPacket() {
	q := &p.pkts[p.pHead]
	if q.state == pktInFlight {
		p.c.PacketsEvicted++
		p.settlePacket(q, pktLost)
		if b := p.burstByID(q.burst); b != nil && b.settled() {
			p.c.BurstsLossy++
			p.killBurst(b)
			p.advanceHead()
		}
	}
	p.pHead = (p.pHead + 1) % len(p.pkts)
	p.pLen--
}

func (p *Pacer) settlePacket(q *pkt, st pktState) {
	q.state = st
	p.inflight -= int(q.bytes)
	if p.inflight < 0 {
		p.inflight = 0
	}
	if b := p.burstByID(q.burst); b != nil {
		if st == pktAcked {
			b.acked++
		} else {
			b.lost++
		}
	}
}

// trim drops settled packet records from the ring's head.
func (p *Pacer) trim() {
	for p.pLen > 0 && p.pkts[p.pHead].state != pktInFlight {
		p.pHead = (p.pHead + 1) % len(p.pkts)
		p.pLen--
	}
}

// search returns the logical index of the first packet record with
// pn >= x (p.pLen when none).
func (p *Pacer) search(x int64) int {
	lo, hi := 0, p.pLen
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.pkts[(p.pHead+m)%len(p.pkts)].pn < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// OnLost records that the transport declared packet pn lost.
func (p *Pacer) OnLost(now time.Time, pn int64) {
	i := p.search(pn)
	if i == p.pLen {
		return
	}
	q := &p.pkts[(p.pHead+i)%len(p.pkts)]
	if q.pn != pn || q.state != pktInFlight {
		return
	}
	p.c.PacketsLost++
	p.settlePacket(q, pktLost)
	if b := p.burstByID(q.burst); b != nil && b.settled() {
		p.c.BurstsLossy++
		p.killBurst(b)
		p.advanceHead()
	}
	p.trim()
}

// OnAck processes one ACK frame received at now. Ranges may repeat packets
// acknowledged by earlier frames (QUIC ACK frames do); only newly
// acknowledged packets count. It is OnAckDelayed with no ack delay.
func (p *Pacer) OnAck(now time.Time, ranges []AckRange) { p.OnAckDelayed(now, 0, ranges) }

// OnAckDelayed is OnAck for a frame whose ACK Delay field (RFC 9000
// §19.3: the time the receiver held the ACK after receiving its largest
// packet) was ackDelay. The ACK train's timestamps are now − ackDelay:
// when the frame would have arrived had the receiver sent it at once, so
// the delayed ACK of a burst's odd last packet (quic-go holds it up to
// max_ack_delay, 25 ms) does not stretch the burst's dispersion. RTT
// samples stay now − send time (see the package comment).
func (p *Pacer) OnAckDelayed(now time.Time, ackDelay time.Duration, ranges []AckRange) {
	p.c.AckFrames++
	at := now
	if ackDelay > 0 {
		at = now.Add(-min(ackDelay, p.cfg.MaxAckDelay))
	}
	p.ackSeq++
	seq := p.ackSeq
	p.settled = p.settled[:0]
	var largest *pkt
	for _, r := range ranges {
		if r.Smallest > r.Largest {
			p.c.AckRangesBad++
			continue
		}
		for i := p.search(r.Smallest); i < p.pLen; i++ {
			q := &p.pkts[(p.pHead+i)%len(p.pkts)]
			if q.pn > r.Largest {
				break
			}
			if q.state != pktInFlight {
				continue
			}
			p.c.PacketsAcked++
			p.settlePacket(q, pktAcked)
			if largest == nil || q.pn > largest.pn {
				largest = q
			}
			b := p.burstByID(q.burst)
			if b == nil {
				continue
			}
			if b.lastFrame != seq {
				b.lastFrame = seq
				b.prevAck, b.ackedPrev = b.lastAck, b.acked-1
				b.acks++
				if b.acks == 1 {
					b.firstAck = at
				}
				b.lastAck = at
			}
			if b.acks == 1 {
				b.ackedFirst++
			}
			if b.acks == 1 && q.pn > b.pilotPN {
				// pilot: the first frame's RTT, of its largest packet of the burst
				b.pilot = now.Sub(q.sent)
				b.pilotPN = q.pn
			}
			if b.settled() {
				if len(p.settled) < cap(p.settled) {
					p.settled = append(p.settled, *b)
				} else {
					p.c.SettleOverflow++
				}
				p.killBurst(b)
			}
		}
	}
	p.advanceHead()
	p.trim()
	if largest == nil {
		return
	}
	for i := range p.settled {
		b := &p.settled[i]
		b.heldLast = largest.pn > b.lastPN
	}
	// the frame's RTT sample (RFC 9002 latest_rtt, ack delay not subtracted)
	rtt := now.Sub(largest.sent)
	// after an executed handover the old path's packets measure the old
	// path: their ACKs must not seed the new path's min_rtt
	sampleOK := rtt > 0 && !largest.sent.Before(p.restartAt)
	if sampleOK && p.minRTT > 0 && rtt > time.Duration(p.cfg.RTTFilter)*p.minRTT {
		p.c.SamplesFiltered++
		sampleOK = false
	}
	if sampleOK {
		p.latest = rtt
		if p.minRTT == 0 || rtt < p.minRTT {
			p.minRTT = rtt
		}
		if p.srtt == 0 {
			p.srtt = rtt
		} else {
			p.srtt = (7*p.srtt + rtt) / 8
		}
	}
	recovered := false
	for i := range p.settled {
		b := &p.settled[i]
		switch {
		case b.lost > 0:
			p.c.BurstsLossy++
			p.lossy(b)
		case b.foreign:
			p.c.BurstsAppLimited++
		case b.acks >= p.cfg.MinAcks && b.lastAck.Before(b.firstAck):
			// ACK Delay fields that reorder the train: no dispersion
			p.c.BurstsShortTrain++
		case b.acks >= p.cfg.MinAcks:
			if !p.trainIsPath(b) {
				p.c.BurstsAppLimited++
				continue
			}
			if p.track(b) {
				return // adjustment: the other records are gone
			}
		case b.acks == 1:
			// QUIC Wave's recovery situation needs a burst of the size
			// the pacer chose, released as one burst.
			if b.released < b.size || 4*b.spread() > p.txTime {
				p.c.BurstsAppLimited++
				continue
			}
			if recovered || !sampleOK {
				continue
			}
			recovered = true
			if p.recover(rtt) {
				return
			}
		default:
			p.c.BurstsShortTrain++
		}
	}
}

// updateAvg applies Wave's EWMA with α = (sample − min_rtt)/sample and
// returns ΔRTT.
func (p *Pacer) updateAvg(sample time.Duration) time.Duration {
	if p.minRTT == 0 || sample < p.minRTT {
		// min_rtt was forgotten (adjustment, handover) or the sample was
		// filtered out of min_rtt: the sample is the best minimum known.
		p.minRTT = sample
	}
	a := 0.0
	if sample > 0 {
		a = float64(sample-p.minRTT) / float64(sample)
	}
	p.alpha = a
	if p.avgRTT == 0 {
		p.avgRTT = sample
	} else {
		p.avgRTT = time.Duration(a*float64(p.avgRTT) + (1-a)*float64(sample))
	}
	p.deltaRTT = p.avgRTT - p.minRTT
	if p.deltaRTT < 0 {
		p.deltaRTT = 0
	}
	p.updateFloor()
	return p.deltaRTT
}

// updateFloor adds the current ΔRTT to the noise floor: the smallest of
// the last NoiseWindow values of the smoothed ΔRTT, at most the filtered
// ATD (see "ΔRTT noise floor" in the package comment).
func (p *Pacer) updateFloor() {
	if p.cfg.NoiseWindow < 0 {
		return
	}
	if p.dSmooth == 0 {
		p.dSmooth = p.deltaRTT
	} else {
		p.dSmooth += (p.deltaRTT - p.dSmooth) / noiseGain
	}
	p.floorPer[p.floorNext] = p.dSmooth
	p.floorNext = (p.floorNext + 1) % len(p.floorPer)
	p.floorN = min(p.floorN+1, len(p.floorPer))
	m := p.dSmooth
	for _, d := range p.floorPer[:p.floorN] {
		m = min(m, d)
	}
	// at most one burst's dispersion: the queue a burst sender keeps at
	// the bottleneck anyway; more would hide a standing queue
	p.noiseFloor = min(m, p.atd)
}

// queueDelay is the part of ΔRTT the tracking rule answers: ΔRTT above
// the noise floor.
func (p *Pacer) queueDelay() time.Duration {
	return max(p.deltaRTT-p.noiseFloor, 0)
}

// resetFloor empties the noise floor (adjustment, handover restart).
func (p *Pacer) resetFloor() {
	p.dSmooth, p.floorN, p.floorNext, p.noiseFloor = 0, 0, 0, 0
}

// trainIsPath reports whether a burst's ACK train shows the path's
// dispersion rather than the sender's: the burst's datagrams were released
// over at most half of the train's length (see "Partial and spread bursts"
// in the package comment).
func (p *Pacer) trainIsPath(b *burst) bool {
	spread := b.spread()
	return spread <= 0 || 2*spread <= b.lastAck.Sub(b.firstAck)
}

// track is the tracking rule on one settled burst; it reports an adjustment.
// ackTrainDispersion is scaled to the current burst size: a partial burst
// of k datagrams (or one of an older size) took k/burstN of a burst's time.
func (p *Pacer) track(b *burst) bool {
	n := b.acks
	atd := float64(b.lastAck.Sub(b.firstAck)) * float64(n) / float64(n-1)
	perPkt := atd / float64(b.released)
	if k := b.ackedPrev - b.ackedFirst; b.heldLast && n-1 >= p.cfg.MinAcks && k > 0 && !b.prevAck.Before(b.firstAck) {
		// The settling frame was held for a later burst (see "Held last
		// ACK" in the package comment): the train ends at the frame
		// before, and spans the k packets acked after the first frame.
		perPkt = float64(b.prevAck.Sub(b.firstAck)) / float64(k)
		p.c.TrainsTrimmed++
	}
	p.atdLast = time.Duration(perPkt * float64(p.burstN))
	p.atd = p.filterATD(time.Duration(perPkt))
	p.pilot = b.pilot
	d := p.updateAvg(b.pilot)
	p.c.BurstsMeasured++
	if b.released < b.size {
		p.c.BurstsPartial++
	}
	if d > p.cfg.Beta {
		p.adjust()
		return true
	}
	p.mode = ModeTracking
	// growth needs this burst's own train below the floor too: the
	// filter's minimum may be one compressed train (see "ATD filter")
	full := b.released == p.burstN && b.size == p.burstN
	q := p.queueDelay()
	t := p.atd + q/2
	// grow below the TxTime floor, or while noisy trains are shorter than
	// the resolution floor (see "Train resolution"); either way this
	// burst's own train must be below the floor too
	floor := p.growFloor()
	p.setEstimate(t, full && t < floor && p.atdLast+q/2 < floor)
	return false
}

// filterATD adds one burst's dispersion per packet to the ATD filter and
// returns its atdRank-th smallest value (of those it holds) scaled to the
// current burst size.
func (p *Pacer) filterATD(perPkt time.Duration) time.Duration {
	p.atdPer[p.atdNext] = perPkt
	p.atdNext = (p.atdNext + 1) % len(p.atdPer)
	p.atdN = min(p.atdN+1, len(p.atdPer))
	// the atdRank-th smallest (insertion into a fixed array: no allocation)
	k := 1
	if p.atdN >= atdRankFrom {
		k = atdRank
	}
	var lo [8]time.Duration
	n := 0
	for _, d := range p.atdPer[:p.atdN] {
		i := n
		if n < k {
			n++
		} else if d >= lo[k-1] {
			continue
		} else {
			i = k - 1
		}
		for i > 0 && lo[i-1] > d {
			lo[i] = lo[i-1]
			i--
		}
		lo[i] = d
	}
	return lo[k-1] * time.Duration(p.burstN)
}

// atdRank is which of the ATD filter's values tracking uses, smallest
// first (see "ATD filter" in the package comment): the third smallest, so
// that up to two compressed trains per window are ignored. At most 8.
const atdRank = 3

// atdRankFrom is how many values the filter must hold before it ignores
// any: with fewer (just after a restart, or ATDWindow < 8) it keeps the
// minimum.
const atdRankFrom = 8

// resetATD empties the ATD filter (adjustment, handover restart): its
// samples measured a path that is gone.
func (p *Pacer) resetATD() { p.atdN, p.atdNext = 0, 0 }

// recover is QUIC Wave's recovery rule; it reports an adjustment.
func (p *Pacer) recover(rtt time.Duration) bool {
	d := p.updateAvg(rtt)
	p.c.RecoveryUpdates++
	if d > p.cfg.Beta {
		p.adjust()
		return true
	}
	dRTT := rtt - p.minRTT
	p.mode = ModeRecovery
	// no growth in recovery: without an ACK train nothing says the path
	// drained the burst faster than the floor, and the recovery rule
	// already probes (its fixed point is a standing queue of ~3·TxTime).
	p.setEstimate(time.Duration(recoveryKeep*float64(p.txTime)+recoveryGain*float64(dRTT)), false)
	return false
}

// shrinkAt is how far above the shrink floor (shrinkFloor) a new TxTime
// must be for the burst size to halve; growth happens below the grow floor
// (growFloor, never above the shrink floor), so the two leave a band in
// which the size stays.
const shrinkAt = 4

// setEstimate sets TxTime to t, Wave's interval for a burst of burstN
// packets, first adapting burstN (see "Burst size" in the package
// comment): doubled when grow (the caller's measured reason), halved
// while t is shrinkAt times above the shrink floor. Both changes keep the rate
// burstN/TxTime: a doubled burst gets twice t, so only the floor stops
// binding.
func (p *Pacer) setEstimate(t time.Duration, grow bool) {
	switch {
	case grow && p.burstN < p.cfg.MaxBurstPackets:
		p.resize(min(2*p.burstN, p.cfg.MaxBurstPackets), &t)
		p.c.BurstGrows++
	default:
		// halve until inside the band: a shrink keeps the rate, so it
		// needs no measurement per step (a path whose RTT fell 30-fold
		// gets its small bursts from one train, not five)
		for floor := p.shrinkFloor(); t >= shrinkAt*floor && p.burstN > p.cfg.BurstPackets; {
			p.resize(max(p.burstN/2, p.cfg.BurstPackets), &t)
			p.c.BurstShrinks++
		}
	}
	p.setTxTime(t)
}

// growFloor is the burst interval below which a measured burst doubles
// the burst size: the TxTime floor, or the resolution floor while the
// trains are noisy (see "Train resolution" in the package comment).
func (p *Pacer) growFloor() time.Duration {
	return max(p.cfg.MinTxTime, p.resolutionFloor())
}

// shrinkFloor is the burst interval shrinkAt times above which the burst
// size halves: the TxTime floor, or min_rtt/TrainRTTDivisor when that is
// longer, whether the trains are noisy or not (a size grown for
// resolution stays while its trains are short against the RTT, instead
// of halving as soon as the longer trains look clean).
func (p *Pacer) shrinkFloor() time.Duration {
	return max(p.cfg.MinTxTime, p.rttFloor())
}

// rttFloor is min_rtt/TrainRTTDivisor; 0 when the rule is off or min_rtt
// unknown.
func (p *Pacer) rttFloor() time.Duration {
	if d := p.cfg.TrainRTTDivisor; d > 0 && p.minRTT > 0 {
		return p.minRTT / time.Duration(d)
	}
	return 0
}

// resolutionFloor is the train length the burst grows to while the ATD
// filter's trains are noisy and most are short (see "Train resolution" in
// the package comment): min_rtt/TrainRTTDivisor when the filter is full,
// more than half of its trains are over 10 % longer than the filter's
// value and more than half are shorter than that floor; else 0.
func (p *Pacer) resolutionFloor() time.Duration {
	floor := p.rttFloor()
	if floor == 0 || p.atdN < atdRankFrom {
		return 0
	}
	ref := p.atd / time.Duration(p.burstN) // the filter's value, per packet
	stretched, short := 0, 0
	for _, v := range p.atdPer[:p.atdN] {
		if 10*v > 11*ref {
			stretched++
		}
		if v*time.Duration(p.burstN) < floor {
			short++
		}
	}
	if 2*stretched <= p.atdN || 2*short <= p.atdN {
		return 0
	}
	return floor
}

// resize sets burstN to n and scales *t so that the rate stays.
func (p *Pacer) resize(n int, t *time.Duration) {
	*t = time.Duration(float64(*t) * float64(n) / float64(p.burstN))
	p.burstN = n
}

// lossy halves a grown burst size after a loss in a burst of the current
// size, at the same rate (TxTime halves too, floored): the loss may be the
// burst overflowing a shallow bottleneck buffer, which a smaller burst at
// the same rate does not; Wave itself does not slow down on loss.
func (p *Pacer) lossy(b *burst) {
	if b.size != p.burstN || p.burstN <= p.cfg.BurstPackets {
		return
	}
	t := p.txTime
	p.resize(max(p.burstN/2, p.cfg.BurstPackets), &t)
	p.setTxTime(t)
	p.c.BurstShrinks++
}

func (p *Pacer) setTxTime(t time.Duration) {
	if t < p.cfg.MinTxTime {
		t = p.cfg.MinTxTime
	}
	p.txTime = t
}

// adjust is Wave's adjustment: TxTime back to its initial value, min_rtt
// forgotten, avg_rtt = smoothed RTT, burst records dropped.
func (p *Pacer) adjust() {
	p.c.Adjustments++
	p.txTime = p.cfg.InitialTxTime
	p.burstN = p.cfg.BurstPackets
	p.minRTT = 0
	p.avgRTT = p.srtt
	p.deltaRTT = 0
	p.alpha = 0
	p.dropBursts()
	p.resetATD()
	p.resetFloor()
	p.mode = ModeAdjustment
}

// dropBursts frees every burst record; packets in flight stay recorded
// (bytes in flight) but belong to no burst, so their ACKs give no sample.
func (p *Pacer) dropBursts() {
	for id := p.bHead; id < p.bNext; id++ {
		if b := p.burstByID(id); b != nil {
			p.c.BurstsDropped++
			p.killBurst(b)
		}
	}
	for i := 0; i < p.pLen; i++ {
		p.pkts[(p.pHead+i)%len(p.pkts)].burst = noBurst
	}
	p.bHead, p.bMatch = p.bNext, p.bNext
	p.pending = 0
}

// ErrHint is wrapped by the errors of invalid hints.
var ErrHint = errors.New("wave: invalid handover hint")

// OnHandoverPredicted caps bytes in flight at the pipe plus sMaxBytes
// (the target cell's estimated buffer ŝ_max, M2HO MobiCom'24
// Preparation) until the handover is executed or the prediction
// withdrawn: the pipe is Wave's bandwidth-delay estimate at the hint
// (BDPPackets full packets; 0 while min_rtt is unknown, then the cap is
// ŝ_max alone), so what may queue is ŝ_max, as the controller's own cap
// on a window is rate·RTT_min + ŝ_max. A cap of ŝ_max alone starved the
// flow on the bench's 5G drive (2026-12-03): the phone learns ŝ_max from
// the queue it sees, which Wave keeps near empty (3-25 KB against
// 416-695 KB buffers), so in flight fell to a few packets for the whole
// Preparation, and the first RTT on the new cell, still capped,
// delivered 1-9 Mbit/s, which the client measured and sent as c_est.
// A repeated prediction replaces the cap.
func (p *Pacer) OnHandoverPredicted(now time.Time, sMaxBytes int) error {
	if sMaxBytes <= 0 {
		p.c.HintsInvalid++
		return fmt.Errorf("%w: predicted ŝ_max = %d bytes, want > 0", ErrHint, sMaxBytes)
	}
	p.c.HintsPredicted++
	p.predicted = true
	p.capBytes = sMaxBytes + min(p.BDPPackets(), maxCapPipePackets)*p.cfg.NominalPacketBytes
	return nil
}

// maxCapPipePackets bounds the pipe the ŝ_max cap adds (1 Gbit/s for
// 100 ms of 1350-byte packets), so that a corrupt estimate cannot make
// the cap overflow an int.
const maxCapPipePackets = 1 << 14

// OnPredictionWithdrawn undoes the ŝ_max cap.
func (p *Pacer) OnPredictionWithdrawn(now time.Time) {
	p.c.HintsWithdrawn++
	p.predicted = false
	p.capBytes = 0
}

// OnHandoverExecuted restarts the estimate at once for the new cell: the
// cap is lifted, the burst records and min_rtt (the old path's) are
// dropped, and TxTime is set from the hinted capacity cEst (bytes/s) as
// the time a full burst takes at that rate, BurstPackets·NominalPacketBytes
// / cEst, clamped to [MinTxTime, InitialTxTime]: Wave's TxTime is one
// burst's share of the bottleneck, so at rate c_est a burst of B bytes
// needs B/c_est; never slower than Wave's own cold start. A new burst may
// start at once instead of waiting for the old window or the first ACK
// train on the new cell.
//
// cEst == 0 means unknown (HINTS.md; the phone's controller has no rate
// for flows it does not see, e.g. those in the tunnel): the estimate is
// restarted all the same (min_rtt and the smoothed RTT forgotten, the
// old path's packets give no RTT sample, the ATD filter emptied), but the
// rate is kept (TxTime and burst size): the last measured rate is the best
// guess there is, and Wave's cold start (TxTime 200 ms, ~0.5 Mbit/s until
// the first train on the new path, an RTT later) is what the hint exists
// to avoid. Counted in HintsNoRate. A negative, NaN or infinite cEst is
// refused (error, HintsInvalid) and treated as unknown.
func (p *Pacer) OnHandoverExecuted(now time.Time, cellType string, cEstBytesPerSec float64) error {
	p.predicted = false
	p.capBytes = 0
	p.cellType = cellType
	p.restartAt = now
	p.dropBursts()
	p.resetATD()
	p.resetFloor()
	p.minRTT = 0
	p.srtt = 0 // the old path's
	p.avgRTT = 0
	p.deltaRTT = 0
	p.alpha = 0
	p.winOpen = false // the next burst may go now
	if !(cEstBytesPerSec > 0) || math.IsInf(cEstBytesPerSec, 0) {
		// unknown (or refused) rate: keep TxTime and the burst size
		p.hintRate = 0
		p.mode = ModeHinted
		if cEstBytesPerSec == 0 {
			p.c.HintsExecuted++
			p.c.HintsNoRate++
			return nil
		}
		p.c.HintsInvalid++
		return fmt.Errorf("%w: executed c_est = %v bytes/s, want >= 0 (0: unknown) and finite", ErrHint, cEstBytesPerSec)
	}
	p.c.HintsExecuted++
	p.hintRate = cEstBytesPerSec
	// the smallest burst that reaches c_est above the TxTime floor
	pkt := float64(p.cfg.NominalPacketBytes)
	n := int(math.Ceil(cEstBytesPerSec * p.cfg.MinTxTime.Seconds() / pkt))
	p.burstN = min(max(n, p.cfg.BurstPackets), p.cfg.MaxBurstPackets)
	t := time.Duration(float64(p.burstN) * pkt / cEstBytesPerSec * float64(time.Second))
	p.setTxTime(min(t, p.cfg.InitialTxTime))
	p.mode = ModeHinted
	return nil
}

// State returns the state for logs and metrics (no allocation).
func (p *Pacer) State() State {
	live := 0
	for id := p.bHead; id < p.bNext; id++ {
		if p.burstByID(id) != nil {
			live++
		}
	}
	return State{
		Mode:          p.mode,
		TxTime:        p.txTime,
		ATD:           p.atd,
		ATDLast:       p.atdLast,
		MinRTT:        p.minRTT,
		AvgRTT:        p.avgRTT,
		DeltaRTT:      p.deltaRTT,
		NoiseFloor:    p.noiseFloor,
		Alpha:         p.alpha,
		PilotRTT:      p.pilot,
		LatestRTT:     p.latest,
		SmoothedRTT:   p.srtt,
		BurstPackets:  p.burstN,
		NextBurst:     p.nextStart(),
		BytesInFlight: p.inflight + p.pending,
		Predicted:     p.predicted,
		CapBytes:      p.capBytes,
		CellType:      p.cellType,
		HintRate:      p.hintRate,
		LiveBursts:    live,
		Counters:      p.c,
	}
}

// BDPPackets is how many packets the Pacer sends in one min_rtt at its
// current rate (burstN packets per TxTime): its estimate of the path's
// bandwidth-delay product, 0 while min_rtt is unknown. A queue in front of
// the Pacer that carries a loss-based TCP needs about this much room (a
// BDP of buffer keeps a Reno sender busy through its window halving,
// Villamizar and Song, "High performance TCP in ANSNET", CCR 1994) and
// more only adds delay: Wave moves the bottleneck's queue into the pacer's.
func (p *Pacer) BDPPackets() int {
	if p.minRTT <= 0 || p.txTime <= 0 {
		return 0
	}
	return int(math.Ceil(float64(p.minRTT) / float64(p.txTime) * float64(p.burstN)))
}

// queueBDP is how many bandwidth-delay estimates the queue bound holds
// on the current path (Config.QueueBDP, capped by Config.QueueDelay).
func (p *Pacer) queueBDP() float64 {
	f := p.cfg.QueueBDP
	if d := p.cfg.QueueDelay; d > 0 && p.minRTT > 0 {
		f = min(f, max(QueueFloorBDP, float64(d)/float64(p.minRTT)))
	}
	return f
}
