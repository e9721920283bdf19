package tunnel

import "time"

// Pacer decides when queued packets go to SendDatagram. It is the seam for
// QUIC Wave's burst pacer (package proxy/wave): a pure core on the time it
// is given, driven by the tunnel's sender loop. Inputs are the packets sent
// and the phone's handover hints; ACK timing, which Wave also needs, comes
// from quic-go's Config.Tracer (qlogwriter events), see ServerConfig.Tracer.
// quic-go's own congestion controller (its cubic_sender in Reno mode, with
// HyStart: v0.65 constructs it with "use Reno" at the start and after a
// path migration) and pacer stay underneath whatever a Pacer does (quic-go
// v0.65 has no pluggable controller).
//
// A Pacer is used by one sender loop at a time; Hint may come from another
// goroutine, so an implementation that keeps state guards it.
type Pacer interface {
	// Budget says how many of the queued packets may be sent at now. When
	// it returns 0, wait is how long until it should be asked again (the
	// loop also asks again when more packets are queued).
	Budget(now time.Time, queued int) (n int, wait time.Duration)
	// Sent records a packet of size bytes handed to SendDatagram at now.
	Sent(now time.Time, size int)
	// Hint hands over a handover hint from the phone (HINTS.md).
	Hint(now time.Time, h Hint)
}

// PassThrough is the default Pacer: every queued packet goes at once,
// leaving all pacing to quic-go's own controller (the bench's `quic`
// variant). Hints are accepted and ignored (the tunnel logs and counts
// them before they reach the pacer).
type PassThrough struct{}

func (PassThrough) Budget(_ time.Time, queued int) (int, time.Duration) { return queued, 0 }
func (PassThrough) Sent(time.Time, int)                                 {}
func (PassThrough) Hint(time.Time, Hint)                                {}

// QueueLimiter is an optional interface of a Pacer: when its QueueLimit
// returns n > 0, the sender queue in front of the pacer holds at most n
// packets and tail-drops the excess (counted: ServerStats.DropQueueLimit,
// ClientStats.DropUpQueueLimit); 0 keeps the queue's static bound
// (QueueLen). A pacer that sends at about the bottleneck's rate (QUIC Wave)
// otherwise lets the inner TCP fill the whole static queue: a standing
// queue of QueueLen packets in front of the pacer, the inner RTT up
// instead of down. QueueLimit is called for every packet queued, from the
// producer's goroutine: it must not block (wave.Gate's reads an atomic).
type QueueLimiter interface {
	QueueLimit() int
}
