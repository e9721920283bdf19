package tunnel

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"testing"

	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// packetSizes records, on the server, the size of every 1-RTT packet sent
// or received that carries exactly one DATAGRAM frame of dgramLen bytes,
// and the largest 1-RTT packet of any kind.
type packetSizes struct {
	dgramLen int64
	mu       sync.Mutex
	sent     map[int]int // packet size -> count
	recv     map[int]int
	largest  int
}

type sizeTrace struct {
	s     *packetSizes
	inner qlogwriter.Trace
}

func (t sizeTrace) AddProducer() qlogwriter.Recorder {
	var in qlogwriter.Recorder
	if t.inner != nil {
		in = t.inner.AddProducer()
	}
	return sizeRecorder{s: t.s, inner: in}
}

type sizeRecorder struct {
	s     *packetSizes
	inner qlogwriter.Recorder
}

func (r sizeRecorder) RecordEvent(ev qlogwriter.Event) {
	switch e := ev.(type) {
	case qlog.PacketSent:
		r.s.add(r.s.sent, e.Header.PacketType, e.Raw.Length, e.Frames)
	case qlog.PacketReceived:
		r.s.add(r.s.recv, e.Header.PacketType, e.Raw.Length, e.Frames)
	}
	if r.inner != nil {
		r.inner.RecordEvent(ev)
	}
}

func (r sizeRecorder) Close() error {
	if r.inner != nil {
		return r.inner.Close()
	}
	return nil
}

func (s *packetSizes) add(m map[int]int, typ qlog.PacketType, size int, frames []qlog.Frame) {
	if typ != qlog.PacketType1RTT {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.largest = max(s.largest, size)
	n := 0
	for _, f := range frames {
		if d, ok := f.Frame.(*qlog.DatagramFrame); ok {
			if d.Length != s.dgramLen {
				return
			}
			n++
		}
	}
	if n == 1 {
		m[size]++
	}
}

func (s *packetSizes) snapshot() (sent, recv map[int]int, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.sent), maps.Clone(s.recv), s.largest
}

// TestFullPackets holds quic-go v0.65 to fullPacketSize's arithmetic: with
// full packets on (the default) an MTU-sized inner packet fills its QUIC
// packet exactly, in both directions (the precondition of quic-go's GSO
// batches, sendPacketsWithGSO), and no 1-RTT packet exceeds that size;
// with NoFullPackets on both ends (quic-go's defaults) none does, as
// before. The payloads arrive byte-exact either way.
func TestFullPackets(t *testing.T) {
	for _, tc := range []struct {
		mtu  int
		full bool
	}{{DefaultMTU, true}, {maxMTU, true}, {DefaultMTU, false}} {
		t.Run(fmt.Sprintf("mtu%d/full=%v", tc.mtu, tc.full), func(t *testing.T) {
			sizes := &packetSizes{dgramLen: int64(tc.mtu + 2), sent: map[int]int{}, recv: map[int]int{}}
			h := startServer(t, newPKI(t, "phone-1"), func(c *ServerConfig) {
				c.MTU, c.NoFullPackets = tc.mtu, !tc.full
				c.WrapTracer = func(inner func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace) func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
					return func(ctx context.Context, isClient bool, id quic.ConnectionID) qlogwriter.Trace {
						return sizeTrace{s: sizes, inner: inner(ctx, isClient, id)}
					}
				}
			})
			c := mustDial(t, h, func(c *ClientConfig) { c.MTU, c.NoFullPackets = tc.mtu, !tc.full })
			me := netip.AddrPortFrom(c.Addresses()[0].Addr(), 40000)
			full := func(src, dst netip.AddrPort, n int) [][]byte {
				var out [][]byte
				for i := range n {
					pl := make([]byte, tc.mtu-40)
					pl[0] = byte(i)
					out = append(out, packettest.TCP{Src: src, Dst: dst, Seq: uint32(i * len(pl)), Flags: packettest.ACK, Payload: pl}.Build())
				}
				return out
			}
			down := full(b4, me, 64)
			up := full(me, b4, 64)
			gotDown := download(t, c, h.dev, down)
			gotUp := upload(t, c, h.dev, up, nil)
			for _, d := range []struct {
				name      string
				sent, got [][]byte
			}{{"downlink", down, gotDown}, {"uplink", up, gotUp}} {
				want, _ := payloadDigest(t, d.sent)
				if got, _ := payloadDigest(t, d.got); got != want {
					t.Fatalf("%s: payloads differ after the tunnel", d.name)
				}
			}

			sent, recv, largest := sizes.snapshot()
			want := fullPacketSize(tc.mtu)
			if tc.full {
				// Every MTU-sized DATAGRAM alone in its packet fills it.
				if len(sent) != 1 || sent[want] < len(down) {
					t.Errorf("downlink DATAGRAM packets by size %v, want all %d bytes (fullPacketSize(%d))", sent, want, tc.mtu)
				}
				if len(recv) != 1 || recv[want] < len(up) {
					t.Errorf("uplink DATAGRAM packets by size %v, want all %d bytes", recv, want)
				}
				if largest > want {
					t.Errorf("largest 1-RTT packet %d bytes, above the pinned %d", largest, want)
				}
				return
			}
			for size := range sent {
				if size >= want {
					t.Errorf("without full packets a downlink DATAGRAM packet of %d bytes: want them short of %d (quic-go's 4-byte connection IDs)", size, want)
				}
			}
			// Most alone in their packet, 16 bytes of connection ID fewer
			// (some share theirs with an ACK frame).
			if sent[want-16] < len(down)/2 {
				t.Errorf("downlink DATAGRAM packets by size %v, want most of %d bytes (16 fewer bytes of connection ID)", sent, want-16)
			}
		})
	}
}
