package tunnel

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// lossyUDP is the client's UDP socket as quic-go sees it. A phone's
// uplink can lose its address (or its route) before the daemon notices and
// migrates; the kernel then refuses each send with EADDRNOTAVAIL,
// ENETUNREACH, EHOSTUNREACH or ENETDOWN, and quic-go v0.65 closes the
// connection on the first send error (send_queue.go). lossyUDP reports
// those sends as done: the packet is lost, as over a radio link that went
// away, and quic-go's loss recovery and the migration (Client.Migrate) take
// it from there. Other errors pass through. It embeds *net.UDPConn, so
// quic-go still finds the OOB interface (GSO, ECN, batched reads).
type lossyUDP struct {
	*net.UDPConn
	lost *atomic.Uint64
	w    *socketWrites
}

// socketWrites counts what one socket sent. Migrate reads it to tell
// whether quic-go sent its path probe at all (ErrProbeNotSent); gone is
// the tests' switch for an address that went away (every send refused as
// EADDRNOTAVAIL would be), without root to remove one.
type socketWrites struct {
	ok     atomic.Uint64
	gone   atomic.Bool
	notify chan struct{} // a token on each refused send (Client.PathGone); nil: none
}

// refused counts a send the kernel refused for want of an address or a
// route, and tells the client's watcher.
func (c lossyUDP) refused() {
	c.lost.Add(1)
	if c.w.notify != nil {
		select {
		case c.w.notify <- struct{}{}:
		default:
		}
	}
}

// lostTo counts a send's outcome: true when the kernel refused it for
// want of an address or a route (reported to quic-go as sent, i.e. lost).
func (c lossyUDP) lostTo(err error) bool {
	switch {
	case err == nil:
		c.w.ok.Add(1)
	case pathGone(err):
		c.refused()
		return true
	}
	return false
}

func pathGone(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETDOWN)
}

func (c lossyUDP) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (int, int, error) {
	if c.w.gone.Load() {
		c.refused()
		return len(b), len(oob), nil
	}
	n, oobn, err := c.UDPConn.WriteMsgUDP(b, oob, addr)
	if c.lostTo(err) {
		return len(b), len(oob), nil
	}
	return n, oobn, err
}

func (c lossyUDP) WriteTo(b []byte, addr net.Addr) (int, error) {
	if c.w.gone.Load() {
		c.refused()
		return len(b), nil
	}
	n, err := c.UDPConn.WriteTo(b, addr)
	if c.lostTo(err) {
		return len(b), nil
	}
	return n, err
}

// wrapLossy wraps a UDP socket, counting its sends in w; any other
// PacketConn is returned as is (and w counts nothing).
func wrapLossy(pc net.PacketConn, lost *atomic.Uint64, w *socketWrites) net.PacketConn {
	if u, ok := pc.(*net.UDPConn); ok {
		return lossyUDP{UDPConn: u, lost: lost, w: w}
	}
	return pc
}
