// Package quicwave feeds quic-go's packet and ACK events to the Wave pacer
// (package wave). quic-go v0.65 has no pluggable congestion control and no
// `logging` tracer package (removed in v0.56); what it offers is
// quic.Config.Tracer, which returns a qlogwriter.Trace per connection.
// This package implements that Trace: its Recorder looks at three qlog
// events, timestamps them itself (qlog events carry no time) and records
// them in a wave.Events buffer that the wave.Pump drains:
//
//   - qlog.PacketSent of a 1-RTT packet with DATAGRAM frames →
//     Events.Sent(now, packet number, packet length, number of DATAGRAM
//     frames);
//   - qlog.PacketReceived of a 1-RTT packet with an ACK frame →
//     Events.AckedDelayed(now, the frame's ACK Delay, its ranges);
//   - qlog.PacketLost of a 1-RTT packet → Events.Lost(now, packet number).
//
// Mapping a datagram to its QUIC packet number: quic-go's
// Conn.SendDatagram queues the DATAGRAM frame in a FIFO (datagramQueue)
// and the packer takes frames from its head, so the k-th datagram handed
// to SendDatagram is the k-th DATAGRAM frame to appear in a PacketSent
// event. The adapter counts DATAGRAM frames per sent packet and the pacer
// matches them, oldest first, to the datagrams it released
// (wave.Pacer.OnSent); the packet's number then ties its ACK to the burst. This holds
// as long as every datagram on the connection goes through the pacer
// (other DATAGRAM packets are counted as PacketsUnpaced) and SendDatagram
// succeeds for each one the pacer counts (the Queue reports only
// successful sends to the pacer). DATAGRAM frames are ack-eliciting, so
// each such packet is acknowledged (RFC 9221 §5.2), though never
// retransmitted: a lost one is only reported lost.
//
// Packets without DATAGRAM frames (pure ACKs, stream data such as the hint
// control stream, PINGs) are not given to the pacer: they are not paced by
// Wave, and their ACKs carry no burst. The ACK frames the peer sends
// acknowledge them too; the pacer ignores packet numbers it does not know.
//
// The Recorder runs on quic-go's connection goroutine. It never blocks on
// the pump (it only takes the Events buffer's short lock), because the
// pump may itself be blocked in SendDatagram waiting for that goroutine.
package quicwave

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"github.com/m2ho/m2ho/proxy/wave"
)

// Stats counts what the adapter saw; safe to read concurrently.
type Stats struct {
	PacketsSent    atomic.Uint64 // 1-RTT packets with DATAGRAM frames
	DatagramFrames atomic.Uint64 // DATAGRAM frames in them
	AckFrames      atomic.Uint64 // ACK frames received in 1-RTT packets
	PacketsLost    atomic.Uint64 // 1-RTT packets declared lost
}

// Trace is a qlogwriter.Trace that feeds a wave.Events buffer and
// forwards every event to an optional inner trace (e.g. a qlog file).
type Trace struct {
	events *wave.Events
	inner  qlogwriter.Trace
	clock  func() time.Time
	stats  *Stats
}

// NewTrace returns a Trace recording into events. inner may be nil.
// clock nil means time.Now; it must be the clock the wave.Pump uses.
func NewTrace(events *wave.Events, inner qlogwriter.Trace, clock func() time.Time) *Trace {
	if clock == nil {
		clock = time.Now
	}
	return &Trace{events: events, inner: inner, clock: clock, stats: new(Stats)}
}

// Stats returns the adapter's counters.
func (t *Trace) Stats() *Stats { return t.stats }

// Events returns the buffer the Trace records into (give it to
// wave.NewPump).
func (t *Trace) Events() *wave.Events { return t.events }

// AddProducer implements qlogwriter.Trace.
func (t *Trace) AddProducer() qlogwriter.Recorder {
	r := &recorder{t: t}
	if t.inner != nil {
		r.inner = t.inner.AddProducer()
	}
	return r
}

type recorder struct {
	t     *Trace
	inner qlogwriter.Recorder
}

// RecordEvent implements qlogwriter.Recorder. It allocates nothing.
func (r *recorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketSent:
		r.sent(&e)
	case *qlog.PacketSent:
		r.sent(e)
	case qlog.PacketReceived:
		r.received(&e)
	case *qlog.PacketReceived:
		r.received(e)
	case qlog.PacketLost:
		r.lost(&e)
	case *qlog.PacketLost:
		r.lost(e)
	}
	if r.inner != nil {
		r.inner.RecordEvent(ev)
	}
}

func (r *recorder) sent(e *qlog.PacketSent) {
	if e.Header.PacketType != qlog.PacketType1RTT {
		return
	}
	n := 0
	for _, f := range e.Frames {
		switch f.Frame.(type) {
		case *qlog.DatagramFrame, qlog.DatagramFrame:
			n++
		}
	}
	if n == 0 {
		return
	}
	r.t.stats.PacketsSent.Add(1)
	r.t.stats.DatagramFrames.Add(uint64(n))
	r.t.events.Sent(r.t.clock(), int64(e.Header.PacketNumber), e.Raw.Length, n)
}

func (r *recorder) received(e *qlog.PacketReceived) {
	if e.Header.PacketType != qlog.PacketType1RTT {
		return
	}
	for _, f := range e.Frames {
		var ack *qlog.AckFrame
		switch a := f.Frame.(type) {
		case *qlog.AckFrame:
			ack = a
		case qlog.AckFrame:
			ack = &a
		default:
			continue
		}
		var buf [wave.MaxAckRanges]wave.AckRange
		n := 0
		for _, ar := range ack.AckRanges {
			if n == len(buf) {
				break // the highest ranges come first; the rest are old
			}
			buf[n] = wave.AckRange{Smallest: int64(ar.Smallest), Largest: int64(ar.Largest)}
			n++
		}
		r.t.stats.AckFrames.Add(1)
		r.t.events.AckedDelayed(r.t.clock(), ack.DelayTime, buf[:n])
	}
}

func (r *recorder) lost(e *qlog.PacketLost) {
	if e.Header.PacketType != qlog.PacketType1RTT {
		return
	}
	r.t.stats.PacketsLost.Add(1)
	r.t.events.Lost(r.t.clock(), int64(e.Header.PacketNumber))
}

// Close implements qlogwriter.Recorder.
func (r *recorder) Close() error {
	if r.inner != nil {
		return r.inner.Close()
	}
	return nil
}

type ctxKey struct{}

// WithTrace returns a context carrying t. On a server, return it from
// quic.Transport.ConnContext (a new Trace per connection), then after
// Accept find it again with FromContext(conn.Context()) and build that
// connection's wave.Pump on t.Events(); on a client, pass it to Dial.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the Trace WithTrace put in ctx, or nil.
func FromContext(ctx context.Context) *Trace {
	t, _ := ctx.Value(ctxKey{}).(*Trace)
	return t
}

// Tracer is a quic.Config.Tracer that uses the Trace found in the
// connection's context (WithTrace; one Trace per connection: the inner
// trace is attached to it); without one it falls back to inner (which may
// be nil: no tracing).
func Tracer(inner func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
	return func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
		t := FromContext(ctx)
		var in qlogwriter.Trace
		if inner != nil {
			in = inner(ctx, isClient, id)
		}
		if t == nil {
			return in // nil interface when inner is nil or returned nil
		}
		if in != nil {
			t.inner = in
		}
		return t
	}
}
