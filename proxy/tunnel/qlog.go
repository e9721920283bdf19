package tunnel

import (
	"bufio"
	"errors"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	cipqlog "github.com/quic-go/connect-ip-go/qlog"
	h3qlog "github.com/quic-go/quic-go/http3/qlog"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// countingTrace is a connection's qlog trace. connect-ip-go reports each
// packet it drops (source not assigned to the peer, destination outside the
// advertised routes, ...) only as a qlog event and a log line, so the
// server counts those events here; with a file, every event (quic-go's and
// connect-ip-go's) is also written as qlog.
//
// quic-go drops a received DATAGRAM when its receive queue (128 frames,
// quic-go v0.65 datagram_queue.go) is full because the reader fell behind,
// and a DATAGRAM to send that fits no packet; both surface only as
// quic:datagram_dropped events, counted here with the reasons
// reasonDatagramRecvQueue and reasonDatagramTooLarge. Each is an inner
// packet lost (the inner TCP sees a loss).
//
// Cost: with a trace set, quic-go builds an event for every packet it sends
// and receives; the recorder ignores those unless a file is open.
type countingTrace struct {
	// count gets each drop's reason; fromPeer: the packet came from the
	// peer (else it was ours to send).
	count func(reason string, fromPeer bool)
	// migrated, when set, gets the peer's new address each time the
	// connection's active path moved to another remote address (quic-go's
	// TupleAssigned event for the active tuple; on the server that is the
	// client's connection migration, RFC 9000 §9).
	migrated func(remote netip.AddrPort)
	file     *qlogwriter.FileSeq

	// parsed and processed count this connection's DATAGRAMs http3 handed
	// to a stream and those connect-ip-go then processed: their
	// difference is what waits in http3's per-stream queue (see
	// yieldToReader).
	parsed, processed atomic.Uint64
	noYield           bool

	// light: the trace leaves quic-go's own events out (see AddProducer):
	// what the client keeps when it has no file and does not count
	// quic-go's drops, so that yieldToReader and the http3 queue's loss
	// cost two events per DATAGRAM instead of quic-go's per packet.
	light     bool
	producers atomic.Int32

	// yieldToReader's wait for a reader running on another P (one waiter:
	// http3's DATAGRAM goroutine, one per connection).
	h3w queueWait
	// waitMax bounds the wait (0: h3WaitMax; < 0: no wait, the yields
	// only, as before it). Tests only.
	waitMax time.Duration

	// recvWait: quic-go's receiving goroutine waits for http3's while
	// quic-go's DATAGRAM receive queue is nearly full (waitForH3). It
	// needs quic-go's events (not a light trace). queued and recvDropped
	// count the DATAGRAMs quic-go queued (its PacketReceived events) and
	// dropped for a full queue; parsed (above) those http3 took out.
	recvWait            bool
	queued, recvDropped atomic.Uint64
	qw                  queueWait     // waitForH3's wait (one waiter: quic-go's receiving goroutine)
	qBudget             time.Duration // waitForH3's time left to wait; quic-go's receiving goroutine only
	qBudgetAt           time.Time     // when qBudget was last topped up
	qWaitsSkipped       atomic.Uint64 // deep queue, but no budget left
	// qWaitMax and qBudgetMax replace quicWaitMax and quicWaitBudget when
	// set (tests only).
	qWaitMax, qBudgetMax time.Duration

	// onEvent, when set (before the trace is handed to quic-go), is
	// called for every event of every producer (tests only).
	onEvent func()
}

// AddProducer gives each layer its recorder: quic-go's connection asks
// first (in Dial or Listen, before the connection is returned), then
// http3 and connect-ip-go (Conn.QlogTrace). A light trace answers quic-go
// with no recorder, so quic-go builds no event at all (it checks for a
// nil recorder before each), while http3's DatagramParsed and
// connect-ip-go's PacketProcessed still come (TestLightTraceSkipsQUICEvents
// holds quic-go v0.65 to that order).
func (t *countingTrace) AddProducer() qlogwriter.Recorder {
	if t.producers.Add(1) == 1 && t.light && t.file == nil {
		return nil
	}
	r := &countingRecorder{t: t, count: t.count, migrated: t.migrated}
	if t.file != nil {
		r.file = t.file.AddProducer()
	}
	return r
}

type countingRecorder struct {
	t        *countingTrace
	count    func(reason string, fromPeer bool)
	migrated func(remote netip.AddrPort)
	file     qlogwriter.Recorder
}

func (r *countingRecorder) RecordEvent(ev qlogwriter.Event) {
	if r.t.onEvent != nil {
		r.t.onEvent()
	}
	if pp, ok := ev.(cipqlog.PacketProcessed); ok {
		if pp.Source == cipqlog.EndpointPeer {
			r.t.processed.Add(1)
			r.count(eventPeerPacketProcessed, true)
			r.t.readerProgress()
		}
		if pp.Outcome == cipqlog.PacketDropped {
			r.count(string(pp.Reason), pp.Source == cipqlog.EndpointPeer)
		}
	}
	if _, ok := ev.(h3qlog.DatagramParsed); ok {
		r.t.parsed.Add(1)
		r.count(eventH3DatagramParsed, true)
		r.t.h3Progress() // before its own wait for the reader, below
		r.t.yieldToReader()
	}
	if pr, ok := ev.(qlog.PacketReceived); ok && r.t.recvWait {
		n := 0
		for _, f := range pr.Frames {
			if _, ok := f.Frame.(*qlog.DatagramFrame); ok {
				n++
			}
		}
		if n > 0 {
			r.t.queued.Add(uint64(n))
			r.t.waitForH3(r.count)
		}
	}
	if dd, ok := ev.(qlog.DatagramDropped); ok {
		if dd.Direction == qlog.DirectionReceiving {
			r.t.recvDropped.Add(1)
			r.count(reasonDatagramRecvQueue, true)
		} else {
			r.count(reasonDatagramTooLarge, false)
		}
	}
	if ta, ok := ev.(qlog.TupleAssigned); ok && ta.TupleID == "" && r.migrated != nil {
		remote := ta.Remote.IPv4
		if !remote.IsValid() {
			remote = ta.Remote.IPv6
		}
		r.migrated(remote)
	}
	if r.file != nil {
		r.file.RecordEvent(ev)
	}
}

func (r *countingRecorder) Close() error {
	if r.file != nil {
		return r.file.Close()
	}
	return nil
}

// The drop reasons countingRecorder adds to connect-ip-go's.
const (
	reasonDatagramRecvQueue = "quic_datagram_receive_queue_full"
	reasonDatagramTooLarge  = "quic_datagram_too_large"
)

// Two more events counted, not drops: a DATAGRAM http3 parsed and handed
// to its stream, and a packet from the peer connect-ip-go processed
// (forwarded or dropped). Between the two, http3 keeps each stream's
// DATAGRAMs in a queue of 32 (quic-go v0.65 http3/state_tracking_stream.go)
// and drops what does not fit without any event or log: the difference,
// less at most 33 in transit, is that silent loss (DropH3DatagramQueue).
const (
	eventH3DatagramParsed    = "h3_datagram_parsed"
	eventPeerPacketProcessed = "peer_packet_processed"
	// A wait of quic-go's receiving goroutine (waitForH3) began, and one
	// ended at quicWaitMax with the queue still deep.
	eventRecvWait    = "recv_wait"
	eventRecvWaitOut = "recv_wait_timed_out"
)

// yieldToReader lets the session's reader drain http3's per-stream
// DATAGRAM queue before http3 adds to it, when the queue is nearly full.
//
// Why: http3 moves each DATAGRAM from quic-go's receive queue (128) into
// the stream's queue (32) in one goroutine, and drops what does not fit
// without a trace. The reader (ReadPacket in Client.recvLoop,
// session.receiveLoop) that empties it is woken by that goroutine, so Go
// runs it next on the same P, but only once that goroutine blocks: after
// a burst quic-go queued, it moves the whole burst first, and on a loaded
// machine no other P steals the reader in time. On the bench's 5G drive
// (2026-12-02) 251 DATAGRAMs were lost there in 60 s, each an inner TCP
// loss, and 5-6 % on loopback at 200 Mbit/s (BenchmarkTunnelBulk).
// http3 records its DatagramParsed event in that goroutine just before
// it queues the DATAGRAM, so the trace's recorder can yield there
// (runtime.Gosched) while the queue holds more than h3YieldDepth, at most
// h3YieldMax times; the reader, first in line, then runs.
//
// A reader that runs on another P meanwhile is not helped by a yield: it
// reads at its own pace while http3's goroutine, yielding to nobody,
// fills the queue (the yield halved the drops on the 5G drive, it did
// not end them). So if the queue is still that deep after the yields,
// http3's goroutine waits, off its P, until the reader has brought the
// queue down to h3ResumeDepth (readerProgress), at most h3WaitMax. What
// arrives meanwhile waits in quic-go's queue of 128, which counts its
// drops (DropDatagramRecvQueue): a burst has 160 places instead of 32
// before it is cut, and a reader that stopped costs at most h3WaitMax per
// DATAGRAM, never a drop of its own.
//
// The depth is parsed less processed: a DATAGRAM for another stream or
// context (counted parsed, never processed) raises it for good, which
// costs yields and waits, never a drop; a session has one stream.
func (t *countingTrace) yieldToReader() {
	if t.noYield {
		return
	}
	for i := 0; i < h3YieldMax && t.depth() > h3YieldDepth; i++ {
		runtime.Gosched()
	}
	if t.depth() <= h3YieldDepth || t.waitMax < 0 {
		return
	}
	d := h3WaitMax
	if t.waitMax > 0 {
		d = t.waitMax
	}
	t.h3w.wait(d, func() bool { return t.depth() > h3ResumeDepth })
}

// readerProgress is the reader's side of yieldToReader's wait, after each
// DATAGRAM connect-ip-go processed.
func (t *countingTrace) readerProgress() {
	t.h3w.progress(func() bool { return t.depth() <= h3ResumeDepth })
}

// depth is how many DATAGRAMs http3 handed to the stream and the reader
// has not processed yet.
func (t *countingTrace) depth() uint64 { return h3Lost(t.parsed.Load(), t.processed.Load()) }

// h3YieldDepth, h3YieldMax, h3ResumeDepth and h3WaitMax set
// yieldToReader: three quarters of http3's per-stream queue (32, quic-go
// v0.65 http3/state_tracking_stream.go); enough yields for a reader that
// was runnable to run; a wait ends with the queue at a quarter, so that
// http3's goroutine then has a burst's room before it waits again; and
// at most about what quic-go's queue of 128 holds at the drive's peak
// DATAGRAM rate (~36 k/s: 3.5 ms).
const (
	h3YieldDepth  = 24
	h3YieldMax    = 4
	h3ResumeDepth = 8
	h3WaitMax     = 2 * time.Millisecond
)

// waitForH3 keeps quic-go's DATAGRAM receive queue (128 frames, quic-go
// v0.65 datagram_queue.go) from overflowing: called in quic-go's receiving
// goroutine after each packet that carried a DATAGRAM (quic-go records
// PacketReceived once the packet's frames are handled, so the DATAGRAM is
// queued by then), it waits, off its P, while the queue holds more than
// quicWaitDepth, until http3's goroutine has taken it down to
// quicResumeDepth (h3Progress), at most quicWaitMax.
//
// Why: the drops left in the tunnel after yieldToReader are there. A
// burst the server sent arrives faster than the reader chain (quic-go's
// goroutine, then http3's, then the session's reader) moves it on two
// cores shared with other work, and quic-go drops what does not fit its
// queue, each an inner TCP loss: on a steady 600 Mbit/s link with no loss
// of its own the tunnelled CUBIC lost 595 packets in 20 s, all there
// (2026-12-07), and sat at 75-100 Mbit/s. While quic-go's goroutine
// waits, what arrives waits in the UDP socket's receive buffer (megabytes),
// and the reader chain, given the CPU, catches up.
//
// A reader chain slower than the link for good would turn that buffer
// into a standing queue of up to its size, seconds of delay where the drop
// told the inner TCP to slow down. So the waits take at most half of
// quic-go's time over a while: a budget that grows by half the time that
// passes, up to quicWaitBudget, pays for each wait; with less than a
// quarter of quicWaitMax left the queue overflows and drops as before.
func (t *countingTrace) waitForH3(count func(string, bool)) {
	if t.qDepth() <= quicWaitDepth {
		return
	}
	waitMax, budgetMax := quicWaitMax, quicWaitBudget
	if t.qWaitMax > 0 {
		waitMax, budgetMax = t.qWaitMax, t.qBudgetMax
	}
	now := time.Now()
	if t.qBudgetAt.IsZero() {
		t.qBudget = budgetMax
	} else {
		t.qBudget = min(budgetMax, t.qBudget+now.Sub(t.qBudgetAt)/2)
	}
	t.qBudgetAt = now
	if t.qBudget < waitMax/4 {
		t.qWaitsSkipped.Add(1)
		return
	}
	count(eventRecvWait, true)
	if t.qw.wait(min(waitMax, t.qBudget), func() bool { return t.qDepth() > quicResumeDepth }) {
		count(eventRecvWaitOut, true)
	}
	end := time.Now()
	t.qBudget = min(budgetMax, t.qBudget+end.Sub(now)/2) - end.Sub(now)
	t.qBudgetAt = end
}

// h3Progress is http3's side of waitForH3, after each DATAGRAM it took
// out of quic-go's queue.
func (t *countingTrace) h3Progress() {
	t.qw.progress(func() bool { return t.qDepth() <= quicResumeDepth })
}

// queueWait is one goroutine's wait for another to bring a queue down:
// wait parks the waiter until progress, called by the other after each
// item it takes out, finds the queue low enough, or until a bound.
type queueWait struct {
	waiting         atomic.Bool
	drained         chan struct{} // cap 1
	timer           *time.Timer
	waits, waitsOut atomic.Uint64 // waits begun; of those, ended by the bound
}

// wait waits while deep() holds, at most d; it tells whether the bound
// ended it. One waiter at a time.
func (w *queueWait) wait(d time.Duration, deep func() bool) (timedOut bool) {
	if w.drained == nil {
		w.drained = make(chan struct{}, 1)
		w.timer = time.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	w.waits.Add(1)
	w.waiting.Store(true)
	// progress loads waiting after the other side counted and signals
	// only when set: progress made before the Store is seen by deep()
	// here, progress after it signals (and drained, made before the
	// Store, is visible to it).
loop:
	for deep() {
		select {
		case <-w.drained:
		case <-w.timer.C:
			w.waitsOut.Add(1)
			timedOut = true
			break loop
		}
	}
	w.waiting.Store(false)
	w.timer.Stop()
	select { // a signal sent after the loop saw the queue fall
	case <-w.drained:
	default:
	}
	return timedOut
}

// progress wakes the waiter, if one waits and low() holds.
func (w *queueWait) progress(low func() bool) {
	if w.waiting.Load() && low() {
		select {
		case w.drained <- struct{}{}:
		default:
		}
	}
}

// qDepth is how many DATAGRAMs wait in quic-go's receive queue: queued
// less dropped less taken out by http3 (a DATAGRAM on a packet quic-go did
// not record, e.g. 0-RTT, would make it read low, never high).
func (t *countingTrace) qDepth() uint64 {
	in, out := t.queued.Load(), t.recvDropped.Load()+t.parsed.Load()
	if in <= out {
		return 0
	}
	return in - out
}

// quicWaitDepth, quicResumeDepth, quicWaitMax and quicWaitBudget set
// waitForH3: three quarters of quic-go's queue of 128; a quarter, so that
// a burst has room before the next wait; longer than a scheduler's slice
// on a busy core (the chain's goroutines wait for a thread that long),
// short against an RTT; and what a run of waits may take before they are
// held to half the time (a few RTTs of a 5G path's queue at most).
const (
	quicWaitDepth   = 96
	quicResumeDepth = 32
	quicWaitMax     = 3 * time.Millisecond
	quicWaitBudget  = 20 * time.Millisecond
)

// h3Lost is the inferred silent loss of http3's DATAGRAM queue from the
// two event counts.
func h3Lost(parsed, processed uint64) uint64 {
	if parsed <= processed {
		return 0
	}
	return parsed - processed
}

// bufferedFile is a qlog file behind a 64 KiB buffer: quic-go's qlogwriter
// writes each JSON token separately, so an unbuffered *os.File costs a
// write system call per token (BenchmarkTunnelBulk: ~0.9 ms of CPU per
// packet, the tunnel down to ~10 Mbit/s, with a qlog file open). Close
// flushes.
type bufferedFile struct {
	*bufio.Writer
	f *os.File
}

func newBufferedFile(f *os.File) *bufferedFile {
	return &bufferedFile{Writer: bufio.NewWriterSize(f, 64<<10), f: f}
}

func (b *bufferedFile) Close() error { return errors.Join(b.Flush(), b.f.Close()) }
