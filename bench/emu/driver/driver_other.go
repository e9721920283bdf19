//go:build !linux

package driver

import (
	"errors"
	"net/netip"
	"runtime"
	"time"
)

// LinkConfig names the emulator namespace's interfaces (Linux only).
type LinkConfig struct {
	TUN, UEIf, NetIf string
	UENets           []netip.Prefix
}

// Link is the emulator's TUN device; it exists only on Linux.
type Link struct{ UENets []netip.Prefix }

var errNotLinux = errors.New("emu: the real-time driver needs Linux (TUN devices, policy routing)")

// OpenLink fails: TUN devices and policy routing need Linux.
func OpenLink(cfg LinkConfig) (*Link, error) { return nil, errNotLinux }

// Routing is empty off Linux.
func (l *Link) Routing() []string { return nil }

// Close does nothing off Linux.
func (l *Link) Close() error { return nil }

func (l *Link) wait(time.Time) error     { return errNotLinux }
func (l *Link) read([]byte) (int, error) { return 0, errNotLinux }
func (l *Link) write([]byte) error       { return errNotLinux }

// NewDriver fails off Linux.
func NewDriver(cfg DriverConfig, l *Link) (*Driver, error) { return nil, errNotLinux }

func pinThread(int) error { runtime.LockOSThread(); return nil }
func unpinThread(int)     { runtime.UnlockOSThread() }
