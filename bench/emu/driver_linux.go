//go:build linux

package emu

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/songgao/water"
	"golang.org/x/sys/unix"

	"github.com/m2ho/m2ho/tun"
)

// LinkConfig names the emulator namespace's interfaces.
type LinkConfig struct {
	TUN   string // TUN device to create (e.g. "emu0")
	UEIf  string // faces the phone (netns.EmuInIf)
	NetIf string // faces the server (netns.EmuOutIf)
	// UENets are the UE-side prefixes; empty means every route through
	// UEIf (its connected subnet and what lies behind the phone).
	UENets []netip.Prefix
}

// Link is the emulator's packet device: one TUN that receives every
// packet arriving on UEIf or NetIf (tun.SetupRouting, DESIGN.md "Packet
// path"); packets written back leave through the main table. One TUN is
// enough because the direction follows from the destination address.
//
// It reads the TUN's file descriptor directly instead of through
// tun.Linux: the driver must sleep until the model's next deadline OR a
// packet, with sub-millisecond precision, which ppoll(2) on the descriptor
// gives and a blocking Read does not.
type Link struct {
	ifce    *water.Interface
	fd      int
	routing *tun.Routing
	// UENets are the prefixes in use (given or discovered).
	UENets []netip.Prefix
}

// OpenLink creates the TUN and the policy routing in the calling thread's
// network namespace (run it inside the emulator's namespace) and, without
// UENets, reads them from the routes through UEIf. Close undoes it all
// (in the same namespace).
func OpenLink(cfg LinkConfig) (l *Link, err error) {
	if cfg.TUN == "" || cfg.UEIf == "" || cfg.NetIf == "" {
		return nil, errors.New("emu: LinkConfig: TUN, UEIf and NetIf are all needed")
	}
	l = &Link{UENets: cfg.UENets, fd: -1}
	if len(l.UENets) == 0 {
		for _, fam := range []string{"-4", "-6"} {
			out, err := exec.Command("ip", fam, "-o", "route", "show", "dev", cfg.UEIf).Output()
			if err != nil {
				return nil, fmt.Errorf("emu: routes of %s (is it the phone-side interface of this namespace?): %w", cfg.UEIf, err)
			}
			l.UENets = append(l.UENets, RoutePrefixes(string(out))...)
		}
		if len(l.UENets) == 0 {
			return nil, fmt.Errorf("emu: no routes through %s to take the UE prefixes from; give them (--ue-net)", cfg.UEIf)
		}
	}
	l.ifce, err = water.New(water.Config{DeviceType: water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: cfg.TUN}})
	if err != nil {
		return nil, fmt.Errorf("emu: opening TUN %s: %w", cfg.TUN, err)
	}
	defer func() {
		if err != nil {
			l.ifce.Close()
		}
	}()
	f, ok := l.ifce.ReadWriteCloser.(*os.File)
	if !ok {
		return nil, errors.New("emu: water returned a non-file TUN")
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	// The descriptor stays valid while l.ifce is open; Go already made it
	// non-blocking.
	raw.Control(func(fd uintptr) { l.fd = int(fd) })
	if err := unix.SetNonblock(l.fd, true); err != nil {
		return nil, err
	}
	l.routing, err = tun.SetupRouting(tun.RoutingConfig{TetherIf: cfg.UEIf, UplinkIf: cfg.NetIf, TUN: cfg.TUN})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Routing describes the policy routing in force.
func (l *Link) Routing() []string { return l.routing.Describe() }

// Close undoes the routing and removes the TUN. Call it in the namespace
// OpenLink ran in.
func (l *Link) Close() error {
	var err error
	if l.routing != nil {
		err = l.routing.Undo()
	}
	return errors.Join(err, l.ifce.Close())
}

func (l *Link) wait(deadline time.Time) error {
	d := time.Until(deadline)
	if d <= 0 {
		return nil
	}
	ts := unix.NsecToTimespec(int64(d))
	fds := [1]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	_, err := unix.Ppoll(fds[:], &ts, nil)
	if err != nil && err != unix.EINTR {
		return fmt.Errorf("emu: ppoll: %w", err)
	}
	return nil
}

func (l *Link) read(b []byte) (int, error) {
	for {
		n, err := unix.Read(l.fd, b)
		switch err {
		case nil:
			return n, nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("emu: TUN read: %w", err)
	}
}

func (l *Link) write(b []byte) error {
	for {
		_, err := unix.Write(l.fd, b)
		if err != unix.EINTR {
			return err
		}
	}
}

// NewDriver prepares a run on l (see DriverConfig); UENets default to the
// link's.
func NewDriver(cfg DriverConfig, l *Link) (*Driver, error) {
	if len(cfg.UENets) == 0 {
		cfg.UENets = l.UENets
	}
	return newDriver(cfg, l)
}

// pinThread keeps the packet loop on one OS thread and makes its kernel
// timers exact (timer slack 1 ns instead of 50 µs), so ppoll wakes at the
// model's deadline.
func pinThread() {
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
}

func unpinThread() { runtime.UnlockOSThread() }
