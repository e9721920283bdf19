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
}

func pathGone(err error) bool {
	return errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETDOWN)
}

func (c lossyUDP) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (int, int, error) {
	n, oobn, err := c.UDPConn.WriteMsgUDP(b, oob, addr)
	if err != nil && pathGone(err) {
		c.lost.Add(1)
		return len(b), len(oob), nil
	}
	return n, oobn, err
}

func (c lossyUDP) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.UDPConn.WriteTo(b, addr)
	if err != nil && pathGone(err) {
		c.lost.Add(1)
		return len(b), nil
	}
	return n, err
}

// wrapLossy wraps a UDP socket; any other PacketConn is returned as is.
func wrapLossy(pc net.PacketConn, lost *atomic.Uint64) net.PacketConn {
	if u, ok := pc.(*net.UDPConn); ok {
		return lossyUDP{UDPConn: u, lost: lost}
	}
	return pc
}
