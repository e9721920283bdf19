//go:build !linux

package driver

import (
	"errors"
	"net/netip"
	"runtime"
	"time"

	"github.com/m2ho/m2ho/tun"
)

// LinkConfig names the emulator namespace's interfaces (Linux only).
type LinkConfig struct {
	TUN, UEIf, NetIf string
	UENets           []netip.Prefix
	Offload          tun.OffloadMode
}

// Link is the emulator's TUN device; it exists only on Linux.
type Link struct {
	UENets []netip.Prefix
	Device string
}

var errNotLinux = errors.New("emu: the real-time driver needs Linux (TUN devices, policy routing)")

// OpenLink fails: TUN devices and policy routing need Linux.
func OpenLink(cfg LinkConfig) (*Link, error) { return nil, errNotLinux }

// Routing is empty off Linux.
func (l *Link) Routing() []string { return nil }

// Close does nothing off Linux.
func (l *Link) Close() error { return nil }

func (l *Link) wait(time.Time) error                        { return errNotLinux }
func (l *Link) readBatch([][]byte, []int, int) (int, error) { return 0, errNotLinux }
func (l *Link) writeBatch([][]byte, int) (int, error)       { return 0, errNotLinux }
func (l *Link) layout() tun.Layout                          { return tun.Layout{BufSize: bufSize} }
func (l *Link) batch() int                                  { return 1 }

// NewDriver fails off Linux.
func NewDriver(cfg DriverConfig, l *Link) (*Driver, error) { return nil, errNotLinux }

func pinThread(int) error { runtime.LockOSThread(); return nil }
func unpinThread(int)     { runtime.UnlockOSThread() }
