//go:build linux

package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/m2ho/m2ho/tun"
)

// NoopForwarder is the baseline packet path of DESIGN.md "Packet path": a
// TUN in the phone namespace with the phone's policy routing, and a loop
// that reads a batch and writes it back unchanged (on water one packet per
// system call; on the offload device a 64 KiB frame split on read and
// merged again on write). It counts what it saw per direction relative to
// the laptop.
type NoopForwarder struct {
	chain *Chain
	dev   tun.Device
	// Device says which device was opened (tun.Open's note).
	Device  string
	routing *tun.Routing
	laptop4 netip.Addr
	laptop6 netip.Addr
	done    chan struct{}

	closeOnce sync.Once
	closeErr  error

	// Uplink and Downlink count packets from and to the laptop.
	// LinkLocal counts link-local or multicast packets: the phone's own
	// kernel sends IPv6 MLD reports (to ff02::16, from the TUN's fe80::
	// address) into the TUN when it comes up. Other counts the rest, never
	// expected in the chain.
	UplinkPackets, DownlinkPackets, LinkLocalPackets, OtherPackets atomic.Int64
	UplinkBytes, DownlinkBytes                                     atomic.Int64
	// WriteErrors counts packets the TUN refused.
	WriteErrors atomic.Int64
}

// StartNoopForwarder opens TUN tunName (water, one packet per system
// call) inside the chain's phone namespace, applies tun.SetupRouting there
// (tethered side PhoneTetherIf, uplink PhoneUplinkIf) and starts
// forwarding. Close undoes both.
func StartNoopForwarder(c *Chain, tunName string) (*NoopForwarder, error) {
	return StartNoopForwarderOn(c, tunName, tun.OffloadOff)
}

// StartNoopForwarderOn is StartNoopForwarder on the device mode chooses.
func StartNoopForwarderOn(c *Chain, tunName string, mode tun.OffloadMode) (*NoopForwarder, error) {
	f := &NoopForwarder{chain: c, laptop4: c.LaptopAddr4, laptop6: c.LaptopAddr6, done: make(chan struct{})}
	err := c.Do(Phone, func() error {
		dev, note, err := tun.Open(tun.Config{Name: tunName, Offload: mode})
		if err != nil {
			return fmt.Errorf("netns: opening TUN %s in the phone: %w", tunName, err)
		}
		f.dev, f.Device = dev, note
		f.routing, err = tun.SetupRouting(tun.RoutingConfig{TetherIf: PhoneTetherIf, UplinkIf: PhoneUplinkIf, TUN: tunName})
		return err
	})
	if err != nil {
		if f.dev != nil {
			err = errors.Join(err, f.dev.Close())
		}
		return nil, err
	}
	go f.loop()
	return f, nil
}

// Routing describes the policy routing in force.
func (f *NoopForwarder) Routing() []string { return f.routing.Describe() }

func (f *NoopForwarder) loop() {
	defer close(f.done)
	lay := tun.LayoutOf(f.dev)
	off := lay.Headroom
	bs := max(f.dev.BatchSize(), 1)
	bufs := make([][]byte, bs)
	for i := range bufs {
		bufs[i] = make([]byte, off+lay.BufSize)
	}
	sizes := make([]int, bs)
	out := make([][]byte, 0, bs)
	for {
		n, err := f.dev.Read(bufs, sizes, off)
		out = out[:0]
		for i := 0; i < n; i++ {
			f.count(bufs[i][off : off+sizes[i]])
			out = append(out, bufs[i][:off+sizes[i]])
		}
		for len(out) > 0 {
			k, werr := f.dev.Write(out, off)
			if werr == nil {
				break
			}
			f.WriteErrors.Add(1)
			out = out[min(k+1, len(out)):]
		}
		if err != nil && !tun.IsPacketError(err) {
			return // closed
		}
	}
}

// count classifies one IP packet by the laptop's address, without
// allocating.
func (f *NoopForwarder) count(p []byte) {
	var src, dst netip.Addr
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		src, dst = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
	case len(p) >= 40 && p[0]>>4 == 6:
		src, dst = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
	default:
		f.OtherPackets.Add(1)
		return
	}
	switch {
	case src == f.laptop4 || src == f.laptop6:
		f.UplinkPackets.Add(1)
		f.UplinkBytes.Add(int64(len(p)))
	case dst == f.laptop4 || dst == f.laptop6:
		f.DownlinkPackets.Add(1)
		f.DownlinkBytes.Add(int64(len(p)))
	case src.IsLinkLocalUnicast() || dst.IsMulticast() || dst.IsLinkLocalUnicast():
		f.LinkLocalPackets.Add(1)
	default:
		f.OtherPackets.Add(1)
	}
}

// Close undoes the routing (in the phone namespace), closes the TUN (which
// removes it) and waits for the loop to end.
func (f *NoopForwarder) Close() error {
	f.closeOnce.Do(func() {
		err := f.chain.Do(Phone, f.routing.Undo)
		err = errors.Join(err, f.dev.Close())
		<-f.done
		f.closeErr = err
	})
	return f.closeErr
}

// Forwarding is one MeasureForwarding result.
type Forwarding struct {
	Kernel, NoopTUN Iperf3Result
	// TUNUplinkPackets proves the second run crossed the forwarder.
	TUNUplinkPackets, TUNDownlinkPackets int64
}

// MeasureForwarding builds a laptop <-> phone <-> server chain and runs
// iperf3 (options o) from the laptop to the server twice in a row: through
// the phone's kernel forwarding, then through a NoopForwarder on TUN
// tunName. It removes everything before returning.
func MeasureForwarding(prefix, tunName string, o Iperf3Options) (res Forwarding, err error) {
	c, err := NewChain(prefix, false)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	if res.Kernel, err = c.Iperf3(Laptop, Server, c.ServerAddr4, o); err != nil {
		return res, fmt.Errorf("kernel forwarding: %w", err)
	}
	f, err := StartNoopForwarder(c, tunName)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if res.NoopTUN, err = c.Iperf3(Laptop, Server, c.ServerAddr4, o); err != nil {
		return res, fmt.Errorf("no-op TUN forwarder: %w", err)
	}
	res.TUNUplinkPackets, res.TUNDownlinkPackets = f.UplinkPackets.Load(), f.DownlinkPackets.Load()
	if res.TUNUplinkPackets == 0 || res.TUNDownlinkPackets == 0 {
		return res, fmt.Errorf("the TUN run did not cross the forwarder (%d uplink, %d downlink packets)", res.TUNUplinkPackets, res.TUNDownlinkPackets)
	}
	return res, nil
}
