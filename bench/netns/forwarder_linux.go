//go:build linux

package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/songgao/water"

	"github.com/m2ho/m2ho/tun"
)

// NoopForwarder is the baseline packet path of DESIGN.md "Packet path": a
// TUN in the phone namespace with the phone's policy routing, and a loop
// that reads each packet and writes it back unchanged, one packet per
// system call. It counts what it saw per direction relative to the laptop.
type NoopForwarder struct {
	chain   *Chain
	ifce    *water.Interface
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

// StartNoopForwarder opens TUN tunName inside the chain's phone namespace,
// applies tun.SetupRouting there (tethered side PhoneTetherIf, uplink
// PhoneUplinkIf) and starts forwarding. Close undoes both.
func StartNoopForwarder(c *Chain, tunName string) (*NoopForwarder, error) {
	f := &NoopForwarder{chain: c, laptop4: c.LaptopAddr4, laptop6: c.LaptopAddr6, done: make(chan struct{})}
	err := c.Do(Phone, func() error {
		ifce, err := water.New(water.Config{DeviceType: water.TUN,
			PlatformSpecificParams: water.PlatformSpecificParams{Name: tunName}})
		if err != nil {
			return fmt.Errorf("netns: opening TUN %s in the phone: %w", tunName, err)
		}
		f.ifce = ifce
		f.routing, err = tun.SetupRouting(tun.RoutingConfig{TetherIf: PhoneTetherIf, UplinkIf: PhoneUplinkIf, TUN: tunName})
		return err
	})
	if err != nil {
		if f.ifce != nil {
			err = errors.Join(err, f.ifce.Close())
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
	buf := make([]byte, 65535)
	for {
		n, err := f.ifce.Read(buf)
		if err != nil {
			return // closed
		}
		f.count(buf[:n])
		if _, err := f.ifce.Write(buf[:n]); err != nil {
			f.WriteErrors.Add(1)
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
		err = errors.Join(err, f.ifce.Close())
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
