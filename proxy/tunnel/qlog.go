package tunnel

import (
	"bufio"
	"errors"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"

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
}

func (t *countingTrace) AddProducer() qlogwriter.Recorder {
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
	if pp, ok := ev.(cipqlog.PacketProcessed); ok {
		if pp.Source == cipqlog.EndpointPeer {
			r.t.processed.Add(1)
			r.count(eventPeerPacketProcessed, true)
		}
		if pp.Outcome == cipqlog.PacketDropped {
			r.count(string(pp.Reason), pp.Source == cipqlog.EndpointPeer)
		}
	}
	if _, ok := ev.(h3qlog.DatagramParsed); ok {
		r.t.parsed.Add(1)
		r.count(eventH3DatagramParsed, true)
		r.t.yieldToReader()
	}
	if dd, ok := ev.(qlog.DatagramDropped); ok {
		if dd.Direction == qlog.DirectionReceiving {
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
// (runtime.Gosched) while the queue holds h3YieldDepth or more, at most
// h3YieldMax times per DATAGRAM; the reader, first in line, then runs.
// What waits meanwhile waits in quic-go's queue of 128, which counts its
// drops (DropDatagramRecvQueue).
//
// The depth is parsed less processed: a DATAGRAM for another stream or
// context (counted parsed, never processed) raises it for good, which
// costs at most h3YieldMax yields per DATAGRAM from then on, never a drop.
func (t *countingTrace) yieldToReader() {
	if t.noYield {
		return
	}
	for i := 0; i < h3YieldMax && t.parsed.Load()-t.processed.Load() > h3YieldDepth; i++ {
		runtime.Gosched()
	}
}

// h3YieldDepth and h3YieldMax set yieldToReader: three quarters of http3's
// per-stream queue (32, quic-go v0.65 http3/state_tracking_stream.go), and
// enough yields for a reader that was runnable to run.
const (
	h3YieldDepth = 24
	h3YieldMax   = 4
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
