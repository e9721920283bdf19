package netns

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
)

// Logical names of the chain's namespaces and interfaces.
const (
	Laptop = "laptop"
	Phone  = "phone"
	Emu    = "emu"
	Server = "server"

	// LaptopIf is the laptop's only interface; PhoneTetherIf its peer on the
	// phone (the tethered side), PhoneUplinkIf the phone's side towards the
	// network (the "5G" side), ServerIf the server's only interface.
	LaptopIf      = "eth0"
	PhoneTetherIf = "tether0"
	PhoneUplinkIf = "uplink0"
	ServerIf      = "eth0"
	// EmuInIf faces the phone, EmuOutIf the server (emulated chain only).
	EmuInIf  = "emu-in"
	EmuOutIf = "emu-out"
)

// Chain is the standard test path: laptop <-> phone <-> server, or with an
// emulator hop, laptop <-> phone <-> emu <-> server. Every address is
// private to the chain's namespaces (10.77.0.0/16, fd77::/16), so parallel
// chains reuse them without conflict. The middle hops forward (IPv4 and
// IPv6) and every namespace has routes to every other.
type Chain struct {
	*Topo
	// WithEmu tells whether the emu hop exists.
	WithEmu bool

	LaptopAddr4, LaptopAddr6   netip.Addr // laptop's eth0
	PhoneTether4, PhoneTether6 netip.Addr // phone's tether0, the laptop's gateway
	PhoneUplink4, PhoneUplink6 netip.Addr // phone's uplink0
	EmuIn4, EmuIn6             netip.Addr // emu's emu-in (zero without emu)
	EmuOut4, EmuOut6           netip.Addr // emu's emu-out (zero without emu)
	ServerAddr4, ServerAddr6   netip.Addr // server's eth0
}

// Subnets of the chain: 10.77.1.0/24 laptop-phone, 10.77.2.0/24
// phone-(emu|server), 10.77.3.0/24 emu-server; IPv6 fd77:N::/64 likewise.
var (
	laptop4, laptop6     = netip.MustParseAddr("10.77.1.2"), netip.MustParseAddr("fd77:1::2")
	tether4, tether6     = netip.MustParseAddr("10.77.1.1"), netip.MustParseAddr("fd77:1::1")
	uplink4, uplink6     = netip.MustParseAddr("10.77.2.1"), netip.MustParseAddr("fd77:2::1")
	emuIn4, emuIn6       = netip.MustParseAddr("10.77.2.2"), netip.MustParseAddr("fd77:2::2")
	emuOut4, emuOut6     = netip.MustParseAddr("10.77.3.1"), netip.MustParseAddr("fd77:3::1")
	server2x4, server2x6 = netip.MustParseAddr("10.77.2.2"), netip.MustParseAddr("fd77:2::2")
	server3x4, server3x6 = netip.MustParseAddr("10.77.3.2"), netip.MustParseAddr("fd77:3::2")
)

func pfx(a netip.Addr) string {
	if a.Is4() {
		return a.String() + "/24"
	}
	return a.String() + "/64"
}

// NewChain builds the chain with namespaces named after prefix. On error
// everything built so far is removed.
func NewChain(prefix string, withEmu bool) (c *Chain, err error) {
	c = &Chain{Topo: New(prefix), WithEmu: withEmu,
		LaptopAddr4: laptop4, LaptopAddr6: laptop6,
		PhoneTether4: tether4, PhoneTether6: tether6,
		PhoneUplink4: uplink4, PhoneUplink6: uplink6,
		ServerAddr4: server2x4, ServerAddr6: server2x6,
	}
	if withEmu {
		c.EmuIn4, c.EmuIn6, c.EmuOut4, c.EmuOut6 = emuIn4, emuIn6, emuOut4, emuOut6
		c.ServerAddr4, c.ServerAddr6 = server3x4, server3x6
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	names := []string{Laptop, Phone, Server}
	if withEmu {
		names = []string{Laptop, Phone, Emu, Server}
	}
	for _, n := range names {
		if err := c.AddNS(n); err != nil {
			return c, err
		}
	}
	if err := c.Link(Laptop, LaptopIf, []string{pfx(laptop4), pfx(laptop6)},
		Phone, PhoneTetherIf, []string{pfx(tether4), pfx(tether6)}); err != nil {
		return c, err
	}
	// The hop after the phone: emu or server.
	next, nextIf, next4, next6 := Server, ServerIf, server2x4, server2x6
	if withEmu {
		next, nextIf, next4, next6 = Emu, EmuInIf, emuIn4, emuIn6
	}
	if err := c.Link(Phone, PhoneUplinkIf, []string{pfx(uplink4), pfx(uplink6)},
		next, nextIf, []string{pfx(next4), pfx(next6)}); err != nil {
		return c, err
	}
	if withEmu {
		if err := c.Link(Emu, EmuOutIf, []string{pfx(emuOut4), pfx(emuOut6)},
			Server, ServerIf, []string{pfx(server3x4), pfx(server3x6)}); err != nil {
			return c, err
		}
	}

	type route struct{ ns, dst, via string }
	routes := []route{
		{Laptop, "default", tether4.String()},
		{Laptop, "default", tether6.String()},
	}
	if withEmu {
		routes = append(routes,
			route{Phone, "default", emuIn4.String()},
			route{Phone, "default", emuIn6.String()},
			route{Emu, "10.77.1.0/24", uplink4.String()},
			route{Emu, "fd77:1::/64", uplink6.String()},
			route{Server, "default", emuOut4.String()},
			route{Server, "default", emuOut6.String()},
		)
	} else {
		routes = append(routes,
			route{Server, "default", uplink4.String()},
			route{Server, "default", uplink6.String()},
		)
	}
	for _, r := range routes {
		if err := c.Route(r.ns, r.dst, r.via); err != nil {
			return c, err
		}
	}
	fwd := []string{Phone}
	if withEmu {
		fwd = append(fwd, Emu)
	}
	for _, n := range fwd {
		for _, kv := range [][2]string{
			{"net.ipv4.ip_forward", "1"},
			{"net.ipv6.conf.all.forwarding", "1"},
		} {
			if err := c.Sysctl(n, kv[0], kv[1]); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// SealPriority is the preference of SealEmu's rules: after the emulator's
// own "iif ... lookup" rules (tun.DefaultRulePriority) and before the
// main table (32766).
const SealPriority = 30000

// SealEmu makes the emu hop pass nothing the emulator did not carry: for
// packets arriving on emu-in or emu-out (both families) a blackhole rule
// at SealPriority. While the emulator runs, its own rules (earlier) send
// those packets into its TUN; once it exits, or if it dies and its TUN
// goes with it, they are dropped, where the kernel would otherwise
// forward them between the veths at memory speed, an unshaped link that
// a measurement would count as the emulated one's. What the emulator
// writes back arrives on its TUN and leaves through the main table as
// before. The rules die with the namespace.
func (c *Chain) SealEmu() error {
	if !c.WithEmu {
		return errors.New("netns: SealEmu: the chain has no emu hop")
	}
	k, err := c.kernelName(Emu)
	if err != nil {
		return err
	}
	for _, fam := range []string{"-4", "-6"} {
		for _, ifn := range []string{EmuInIf, EmuOutIf} {
			if err := ip("-n", k, fam, "rule", "add", "iif", ifn, "blackhole", "pref", strconv.Itoa(SealPriority)); err != nil {
				return fmt.Errorf("netns: sealing the emu hop: %w", err)
			}
		}
	}
	return nil
}
