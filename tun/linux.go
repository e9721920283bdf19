//go:build linux

package tun

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/songgao/water"
	"golang.org/x/sys/unix"
)

// Linux is a kernel TUN device opened through water: IFF_TUN|IFF_NO_PI, so
// every read or write is exactly one IP packet, one packet per system call
// (no virtio-net header, no offloads). Read waits for the first packet in
// the Go poller and then drains what the kernel already holds without
// blocking, so a batch costs one wake-up.
type Linux struct {
	ifce  *water.Interface
	file  *os.File
	raw   syscall.RawConn
	mtu   int
	batch int
}

// LinuxConfig says how to create the device.
type LinuxConfig struct {
	Name      string // interface name; "" lets the kernel choose (tunN)
	MTU       int    // 0 keeps the kernel's default (1500)
	BatchSize int    // packets per Read/Write; 0 means 64
}

// OpenLinux creates (or attaches to) a TUN interface. It needs
// CAP_NET_ADMIN. The interface is left down: bring it up with
// `ip link set <name> up` and route to it.
func OpenLinux(cfg LinuxConfig) (*Linux, error) {
	ifce, err := water.New(water.Config{
		DeviceType:             water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: cfg.Name},
	})
	if err != nil {
		return nil, fmt.Errorf("tun: create %q: %w", cfg.Name, err)
	}
	f, ok := ifce.ReadWriteCloser.(*os.File)
	if !ok {
		ifce.Close()
		return nil, errors.New("tun: water returned a non-file device")
	}
	raw, err := f.SyscallConn()
	if err != nil {
		ifce.Close()
		return nil, fmt.Errorf("tun: %s: %w", ifce.Name(), err)
	}
	d := &Linux{ifce: ifce, file: f, raw: raw, mtu: 1500, batch: cfg.BatchSize}
	if d.batch <= 0 {
		d.batch = 64
	}
	if cfg.MTU > 0 {
		if err := d.SetMTU(cfg.MTU); err != nil {
			ifce.Close()
			return nil, err
		}
	} else if m, err := d.kernelMTU(); err == nil {
		d.mtu = m
	}
	return d, nil
}

// SetMTU sets the kernel interface's MTU (SIOCSIFMTU).
func (d *Linux) SetMTU(mtu int) error {
	if mtu < 68 || mtu > 65535 {
		return fmt.Errorf("tun: %s: mtu %d out of range [68, 65535]", d.Name(), mtu)
	}
	err := withIfreq(d.Name(), func(fd int, ifr *unix.Ifreq) error {
		ifr.SetUint32(uint32(mtu))
		return unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr)
	})
	if err != nil {
		return fmt.Errorf("tun: %s: set mtu %d: %w", d.Name(), mtu, err)
	}
	d.mtu = mtu
	return nil
}

func (d *Linux) kernelMTU() (int, error) {
	var mtu int
	err := withIfreq(d.Name(), func(fd int, ifr *unix.Ifreq) error {
		if err := unix.IoctlIfreq(fd, unix.SIOCGIFMTU, ifr); err != nil {
			return err
		}
		mtu = int(ifr.Uint32())
		return nil
	})
	return mtu, err
}

func withIfreq(name string, f func(fd int, ifr *unix.Ifreq) error) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	return f(fd, ifr)
}

// Read blocks until at least one packet is available, then returns it and
// any further packets the kernel already queued, up to the batch size. A
// packet larger than its buffer is truncated by the kernel; Read reports
// ErrTooBig for it rather than pass on a truncated packet.
func (d *Linux) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	max := min(len(bufs), len(sizes), d.batch)
	if max == 0 {
		return 0, nil
	}
	n := 0
	var rerr error
	err := d.raw.Read(func(fd uintptr) bool {
		for n < max {
			b := bufs[n]
			if len(b) <= offset {
				rerr = ErrTooBig
				return true
			}
			m, err := unix.Read(int(fd), b[offset:])
			switch {
			case err == unix.EAGAIN:
				return n > 0 // nothing yet: ask the poller to wait
			case err == unix.EINTR:
				continue
			case err != nil:
				rerr = err
				return true
			case m == len(b)-offset:
				// The kernel truncates silently; a full buffer may be a
				// truncated packet, so refuse it.
				rerr = ErrTooBig
				return true
			}
			sizes[n] = m
			n++
		}
		return true
	})
	if rerr != nil {
		return n, fmt.Errorf("tun: %s: read: %w", d.Name(), rerr)
	}
	if err != nil {
		return n, err
	}
	return n, nil
}

// Write sends each bufs[i][offset:] as one packet, one system call each.
func (d *Linux) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if len(b) < offset {
			return i, ErrTooBig
		}
		if _, err := d.file.Write(b[offset:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

// MTU is the interface MTU as last set or read from the kernel.
func (d *Linux) MTU() int { return d.mtu }

// BatchSize is the most packets one Read returns.
func (d *Linux) BatchSize() int { return d.batch }

// Name is the kernel interface name.
func (d *Linux) Name() string { return d.ifce.Name() }

// Close closes the file descriptor; a blocked Read returns os.ErrClosed.
func (d *Linux) Close() error { return d.ifce.Close() }

var _ Device = (*Linux)(nil)
