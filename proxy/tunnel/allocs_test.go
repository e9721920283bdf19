package tunnel

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/m2ho/m2ho/proxy/packet"
	"github.com/m2ho/m2ho/proxy/packettest"
	"github.com/m2ho/m2ho/tun"
)

// The per-packet paths of this package allocate nothing: Client.Write
// (parse, NAT, clamp, PTB, queue) and the server's TUN dispatch. They are
// checked white-box, without a connection, so no background goroutine's
// allocations are counted. (connect-ip-go's WritePacket and quic-go's
// DATAGRAM receive path below them do allocate, one buffer per packet; see
// README.md.)
func TestClientWriteAllocs(t *testing.T) {
	c := &Client{cfg: ClientConfig{MTU: DefaultMTU, NAT: true}, up: newQueue(4, DefaultMTU), down: newQueue(4, PTBMaxLen)}
	c.assign[0] = netip.MustParseAddr("10.77.0.2")
	c.routes, _ = prefixRoutes([]netip.Prefix{routeV4})
	laptop := netip.MustParseAddrPort("192.168.42.2:50000")
	syn := packettest.TCP{Src: laptop, Dst: b4, Flags: packettest.SYN, MSS: 1460}.Build()
	data := packettest.TCP{Src: laptop, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, 1000)}.Build()
	big := packettest.TCP{Src: laptop, Dst: b4, Flags: packettest.ACK, Payload: make([]byte, 1400)}.Build()
	work := [][]byte{make([]byte, len(syn)), make([]byte, len(data)), make([]byte, len(big))}
	if n := testing.AllocsPerRun(200, func() {
		copy(work[0], syn)
		copy(work[1], data)
		copy(work[2], big)
		c.Write(work, 0)
		for range 4 { // keep the queues from filling
			c.up.pop()
			c.down.pop()
		}
	}); n != 0 {
		t.Fatalf("Client.Write: %v allocations per batch", n)
	}
	if st := c.Stats(); st.MSSClamped == 0 || st.PTBSent == 0 || st.DropRefused != 0 {
		t.Fatalf("the batch did not exercise clamp and PTB: %+v", st)
	}
}

func TestServerDispatchAllocs(t *testing.T) {
	s := &Server{cfg: ServerConfig{MTU: DefaultMTU}, dev: tun.NewChannelTUN(0, 0), byAddr: map[netip.Addr]*session{}}
	me := netip.MustParseAddr("10.77.0.2")
	sess := &session{down: newQueue(4, DefaultMTU)}
	s.byAddr[me] = sess
	to := netip.AddrPortFrom(me, 40000)
	syn := packettest.TCP{Src: b4, Dst: to, Flags: packettest.SYN | packettest.ACK, MSS: 1460}.Build()
	other := packettest.TCP{Src: b4, Dst: netip.MustParseAddrPort("10.77.0.3:1"), Flags: packettest.ACK}.Build()
	work := make([]byte, len(syn))
	ptb := make([]byte, PTBMaxLen)
	var p packet.Parsed
	if n := testing.AllocsPerRun(200, func() {
		copy(work, syn)
		s.dispatch(work, &p, ptb)
		s.dispatch(other, &p, ptb)
		sess.down.pop()
	}); n != 0 {
		t.Fatalf("dispatch: %v allocations per packet pair", n)
	}
	if st := s.st.clamped.Load(); st == 0 {
		t.Fatal("SYN-ACK not clamped")
	}
	if s.st.dropNoSession.Load() == 0 {
		t.Fatal("packet to an unleased address not counted")
	}
}

// The client is the engine's route seam: a Sink (Write like tun.Device)
// and a Source (Read like tun.Device).
var (
	_ interface {
		Write(bufs [][]byte, offset int) (int, error)
		Name() string
	} = (*Client)(nil)
	_ interface {
		Read(bufs [][]byte, sizes []int, offset int) (int, error)
		Name() string
		Close() error
	} = (*Client)(nil)
	_ Device = tun.Device(nil)
)

func TestErrClosedIsBoth(t *testing.T) {
	if !errors.Is(ErrClosed, os.ErrClosed) || !errors.Is(ErrClosed, net.ErrClosed) {
		t.Fatal("ErrClosed must match os.ErrClosed and net.ErrClosed")
	}
}
