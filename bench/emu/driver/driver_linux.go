//go:build linux

package driver

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/songgao/water"
	"golang.org/x/sys/unix"

	"github.com/m2ho/m2ho/tun"

	"github.com/m2ho/m2ho/bench/emu"
)

// LinkConfig names the emulator namespace's interfaces.
type LinkConfig struct {
	TUN   string // TUN device to create (e.g. "emu0")
	UEIf  string // faces the phone (netns.EmuInIf)
	NetIf string // faces the server (netns.EmuOutIf)
	// UENets are the UE-side prefixes; empty means every route through
	// UEIf (its connected subnet and what lies behind the phone).
	UENets []netip.Prefix
	// Offload chooses the device: the offload TUN (tun.Offload: 64 KiB
	// frames split on read, merged on write, 128 packets a batch), water
	// (one packet per system call), or auto: offload where the kernel
	// grants it.
	Offload tun.OffloadMode
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
	ifce    *water.Interface // water, or nil with off
	off     *tun.Offload     // the offload device, or nil
	fd      int
	routing *tun.Routing
	// Device says which device was opened, and why.
	Device string
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
			l.UENets = append(l.UENets, emu.RoutePrefixes(string(out))...)
		}
		if len(l.UENets) == 0 {
			return nil, fmt.Errorf("emu: no routes through %s to take the UE prefixes from; give them (--ue-net)", cfg.UEIf)
		}
	}
	if cfg.Offload > tun.OffloadOff {
		return nil, fmt.Errorf("emu: LinkConfig.Offload %d: want auto, on or off", cfg.Offload)
	}
	if cfg.Offload != tun.OffloadOff {
		d, oerr := tun.OpenOffload(tun.OffloadConfig{Name: cfg.TUN})
		switch {
		case oerr == nil:
			l.off, l.fd = d, d.Fd()
			l.Device = "offload device (" + d.Offloads() + ")"
		case cfg.Offload == tun.OffloadOn:
			return nil, fmt.Errorf("emu: %w (--tun-offload on)", oerr)
		default:
			l.Device = fmt.Sprintf("water (one packet per system call): the offload device failed: %v", oerr)
		}
	} else {
		l.Device = "water (one packet per system call): offloads off"
	}
	if off := l.off; off != nil {
		defer func() { // l is nil by then: close the device itself
			if err != nil {
				off.Close()
			}
		}()
		l.routing, err = tun.SetupRouting(tun.RoutingConfig{TetherIf: cfg.UEIf, UplinkIf: cfg.NetIf, TUN: cfg.TUN})
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	l.ifce, err = water.New(water.Config{DeviceType: water.TUN,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: cfg.TUN}})
	if err != nil {
		return nil, fmt.Errorf("emu: opening TUN %s: %w", cfg.TUN, err)
	}
	ifce := l.ifce
	defer func() {
		if err != nil {
			ifce.Close()
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
	if l.off != nil {
		return errors.Join(err, l.off.Close())
	}
	return errors.Join(err, l.ifce.Close())
}

// The packet loop's system calls are raw: they keep the goroutine's P, so
// the runtime never has to hand it back after a sleep or a long TUN write
// (a write runs the kernel's forwarding inline), which under load cost
// milliseconds. Sleeps are bounded by maxWait, so a stop-the-world waits
// at most that long, and the loop allocates nothing, so GC is rare.

func (l *Link) wait(deadline time.Time) error {
	d := time.Until(deadline)
	if d <= 0 {
		return nil
	}
	ts := unix.NsecToTimespec(int64(d))
	fds := [1]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 && e != unix.EINTR {
		return fmt.Errorf("emu: ppoll: %w", e)
	}
	return nil
}

func (l *Link) read(b []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(l.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("emu: TUN read: %w", e)
	}
}

func (l *Link) write(b []byte) error {
	for {
		_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(l.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// readable reports, without blocking, whether the TUN holds a packet.
func (l *Link) readable() (bool, error) {
	var ts unix.Timespec
	fds := [1]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 && e != unix.EINTR {
		return false, fmt.Errorf("emu: ppoll: %w", e)
	}
	return n > 0 && fds[0].Revents&unix.POLLIN != 0, nil
}

// readBatch: on water, one raw read per packet until the kernel has no
// more; on the offload device, one frame (split into its packets) if the
// descriptor is readable, so that its Read never blocks in the poller.
func (l *Link) readBatch(bufs [][]byte, sizes []int, offset int) (int, error) {
	if l.off != nil {
		if ok, err := l.readable(); !ok || err != nil {
			return 0, err
		}
		return l.off.Read(bufs, sizes, offset)
	}
	for i, b := range bufs {
		n, err := l.read(b[offset:])
		if err != nil || n == 0 {
			return i, err
		}
		if n >= len(b)-offset {
			return i, fmt.Errorf("emu: a packet of %d bytes or more: %w", n, tun.ErrTooBig)
		}
		sizes[i] = n
	}
	return len(bufs), nil
}

func (l *Link) writeBatch(bufs [][]byte, offset int) (int, error) {
	if l.off != nil {
		return l.off.Write(bufs, offset)
	}
	for i, b := range bufs {
		if err := l.write(b[offset:]); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

func (l *Link) layout() tun.Layout {
	if l.off != nil {
		return l.off.Layout()
	}
	return tun.Layout{BufSize: bufSize}
}

func (l *Link) batch() int {
	if l.off != nil {
		return l.off.BatchSize()
	}
	return 64
}

// NewDriver prepares a run on l (see DriverConfig); UENets default to the
// link's.
func NewDriver(cfg DriverConfig, l *Link) (*Driver, error) {
	if len(cfg.UENets) == 0 {
		cfg.UENets = l.UENets
	}
	return newDriver(cfg, l)
}

// pinThread prepares the packet loop's scheduling. With rtPrio > 0
// every thread of the process runs SCHED_FIFO at rtPrio, and the loop's
// goroutine is not locked to its thread. The Go runtime preempts a
// goroutine that has run for 10 ms (the loop never blocks in the
// scheduler's view: its system calls are raw), and a goroutine locked to
// its thread is handed back to that thread through another one, which,
// at normal priority on a busy machine, waited for a CPU for up to tens
// of milliseconds (measured on this machine: 12 stalls over 10 ms in
// 12 s with only the loop's thread real-time, 0-2 with every thread
// real-time). With every thread real-time, the preempted goroutine
// resumes at once on whatever thread picks it up, and the publisher's
// thread, which shares locks with the loop (its channel), is not
// preempted by other processes while it holds one. Threads the runtime
// starts later inherit the policy from the thread that starts them.
// Without rtPrio the loop keeps its own thread, with exact timers (timer
// slack 1 ns instead of 50 µs; real-time threads have no slack).
func pinThread(rtPrio int) error {
	if rtPrio <= 0 {
		runtime.LockOSThread()
		unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		return nil
	}
	if err := setProcessSched(unix.SCHED_FIFO, rtPrio); err != nil {
		setProcessSched(unix.SCHED_NORMAL, 0)
		return fmt.Errorf("emu: SCHED_FIFO priority %d for the emulator's threads: %w", rtPrio, err)
	}
	return nil
}

// unpinThread puts the process's threads back to normal scheduling (or
// releases the loop's thread to the runtime).
func unpinThread(rtPrio int) {
	if rtPrio <= 0 {
		runtime.UnlockOSThread()
		return
	}
	setProcessSched(unix.SCHED_NORMAL, 0)
}

// setProcessSched sets the policy of every thread of the process; a
// second pass catches a thread started during the first by a thread not
// yet changed. A thread that exited meanwhile (ESRCH) is no error.
func setProcessSched(policy uint32, prio int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Priority: uint32(prio)}
	for pass := 0; pass < 2; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
	}
	return nil
}
