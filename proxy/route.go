package proxy

import "fmt"

// Sink takes packets the engine routes away from its TUN device: the QUIC
// tunnel for flows in quic or quic+m2ho mode. Write has tun.Device's
// signature (a tun.Device is a Sink): each bufs[i][offset:] is one IP
// packet, with offset bytes of head-room in front for the sink's own
// headers; it returns how many packets it took. The engine calls Write
// from its packet pump only, once per sink per read batch, never with its
// lock held, and never keeps bufs after Write returns.
type Sink interface {
	Write(bufs [][]byte, offset int) (int, error)
	Name() string
}

// Source yields the packets coming back from a sink (the tunnel's
// downlink), for the engine to write to its TUN device. Read has
// tun.Device's signature; it blocks until a packet is available or the
// source is closed. Run closes every source when it stops, to end the
// source's pump.
type Source interface {
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	Name() string
	Close() error
}

// Route is where the engine sends one packet: RouteDrop, RouteTUN (back to
// the device it came from, or to the engine's device for a packet from a
// Source), or a sink (Engine.Sink names it).
//
// Per mode, for a TCP flow (tethered side = laptop):
//
//	mode       uplink (laptop → internet)     downlink (internet → laptop)
//	pass       TUN                            TUN
//	m2ho       controller, then TUN or drop   controller (observes), TUN
//	quic       its sink                       TUN
//	quic+m2ho  controller, then sink or drop  controller (observes), TUN
//
// A tunnelled flow's downlink comes back through a Source; a downlink
// packet of such a flow read from the TUN (arriving outside the tunnel)
// is forwarded to the TUN unchanged like any other. The controller sees
// both directions of a quic+m2ho flow, as it does for m2ho: its uplink
// ACKs are rewritten or dropped before they enter the tunnel, its
// downlink segments (the bursts it measures) when they come out of it.
// Packets the engine does not track (non-TCP, fragments, pass-through
// addresses, unparseable) always go to the TUN: the tunnel carries TCP
// flows only for now. A packet from a Source is never routed to a sink
// (that would loop it back into the tunnel); it goes to the TUN unless
// the controller dropped it.
type Route int8

const (
	RouteDrop Route = -1
	RouteTUN  Route = 0
	// Routes above RouteTUN are sinks: RouteTUN+1+i is the i-th distinct
	// sink of EngineConfig.Sinks in mode order.
)

func (r Route) String() string {
	switch {
	case r == RouteDrop:
		return "drop"
	case r == RouteTUN:
		return "tun"
	case r > RouteTUN:
		return fmt.Sprintf("sink%d", int(r)-1)
	}
	return fmt.Sprintf("route(%d)", int(r))
}

// numModes is the number of Mode values.
const numModes = len(modeNames)

// usesController reports whether flows of mode m go through the M2HO
// controller.
func (m Mode) usesController() bool { return m == ModeM2HO || m == ModeQUICM2HO }

// tunnelled reports whether uplink packets of mode m go to a sink.
func (m Mode) tunnelled() bool { return m == ModeQUIC || m == ModeQUICM2HO }

// sameSink compares two sinks without panicking on an incomparable
// dynamic type (such sinks are then distinct).
func sameSink(a, b Sink) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
