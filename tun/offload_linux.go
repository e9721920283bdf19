//go:build linux

package tun

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// Offload is a kernel TUN device with the kernel's offloads, on
// wireguard-go's tun package: IFF_VNET_HDR, TSO4/TSO6 with checksum offload
// and, where the kernel has it (Linux 6.2), USO. Read receives one frame of
// up to 64 KiB and splits it into MTU-sized packets (gso_size each, the
// MSS for TCP), every one with complete IP and transport checksums; Write
// merges consecutive segments of a flow into one frame with a GSO header
// (see writeGroups in group.go for how that keeps the proxy's verdicts).
//
// Callers should give every buffer Layout().Headroom bytes of head-room
// (for the virtio-net header wireguard-go writes in front of a packet) and
// Layout().BufSize bytes after it (room to merge in place). With less
// head-room Write copies the batch into buffers of its own, allocated once.
type Offload struct {
	dev   wgtun.Device
	file  *os.File
	fd    int
	name  string
	mtu   int
	batch int
	uso   bool

	wmu     sync.Mutex
	groups  grouper
	scratch [][]byte // for callers with offset < VirtioNetHdrLen
	copies  [][]byte

	frames, segments, writes, runs atomic.Uint64
}

// OffloadConfig says how to create the device.
type OffloadConfig struct {
	Name string // interface name; "" lets the kernel choose (tunN)
	MTU  int    // 0 means 1500
}

// ErrNoOffload is returned by OpenOffload when the kernel opened the TUN
// without the virtio-net header, so there are no offloads to use.
var ErrNoOffload = errors.New("tun: the kernel refused IFF_VNET_HDR (no TUN offloads)")

// OpenOffload creates (or attaches to) a TUN interface with offloads. It
// needs CAP_NET_ADMIN and fails where the kernel refuses IFF_VNET_HDR or
// TUNSETOFFLOAD. The interface is left down.
func OpenOffload(cfg OffloadConfig) (*Offload, error) {
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	if mtu < 68 || mtu > 65535 {
		return nil, fmt.Errorf("tun: %q: mtu %d out of range [68, 65535]", cfg.Name, mtu)
	}
	dev, err := wgtun.CreateTUN(cfg.Name, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: create %q with offloads: %w", cfg.Name, err)
	}
	// wireguard-go's netlink goroutines block on a full event channel;
	// nothing here needs the events, so drain them until Close.
	go func() {
		for range dev.Events() {
		}
	}()
	d := &Offload{dev: dev, file: dev.File(), mtu: mtu, batch: dev.BatchSize()}
	if d.name, err = dev.Name(); err != nil {
		dev.Close()
		return nil, fmt.Errorf("tun: %q: %w", cfg.Name, err)
	}
	if d.batch <= 1 {
		dev.Close()
		return nil, fmt.Errorf("tun: %s: %w", d.name, ErrNoOffload)
	}
	if raw, err := d.file.SyscallConn(); err == nil {
		// Not File.Fd: that would put the descriptor in blocking mode
		// under wireguard-go's poller.
		raw.Control(func(fd uintptr) { d.fd = int(fd) })
	}
	d.uso = d.probeUSO()
	d.groups = newGrouper(d.batch)
	return d, nil
}

// probeUSO reports whether the kernel accepts UDP segmentation offload.
// wireguard-go already asked for it when it set the TCP offloads and keeps
// the answer to itself; asking again with the same flags changes nothing
// when it was granted, and leaves the TCP offloads in place when refused.
func (d *Offload) probeUSO() bool {
	raw, err := d.file.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	raw.Control(func(fd uintptr) {
		const all = unix.TUN_F_CSUM | unix.TUN_F_TSO4 | unix.TUN_F_TSO6 | unix.TUN_F_USO4 | unix.TUN_F_USO6
		ok = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, all) == nil
		if !ok {
			unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD, unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6)
		}
	})
	return ok
}

// Offloads describes what the kernel granted, for the start-up log.
func (d *Offload) Offloads() string {
	if d.uso {
		return "virtio-net header, csum, TSO4, TSO6, USO4, USO6"
	}
	return "virtio-net header, csum, TSO4, TSO6 (no USO: kernel < 6.2)"
}

// Layout asks for the virtio-net header's head-room and buffers that can
// hold a merged 64 KiB segment.
func (d *Offload) Layout() Layout {
	return Layout{Headroom: VirtioNetHdrLen, BufSize: MaxSegment}
}

// Read returns the packets of one frame from the kernel: a large TCP or
// UDP segment split at its gso_size, or a single packet. Every checksum is
// complete (wireguard-go computes it for a frame with NEEDS_CSUM, as the
// kernel's own segmentation would), so an RFC 1624 update of the result is
// exact. Each buffer must hold an MTU-sized packet after offset; a frame
// the device cannot deliver (malformed virtio-net header, more pieces than
// buffers, a piece larger than its buffer) is dropped with an error
// matching ErrBadPacket or ErrTooBig, and reading may go on.
func (d *Offload) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	max := min(len(bufs), len(sizes), d.batch)
	if max == 0 {
		return 0, nil
	}
	if offset < 0 {
		return 0, fmt.Errorf("tun: %s: read: negative offset %d", d.name, offset)
	}
	// wireguard-go copies each piece without a bounds check, so give it
	// only buffers that hold an MTU packet.
	k := 0
	for k < max && len(bufs[k])-offset >= d.mtu {
		k++
	}
	if k == 0 {
		return 0, fmt.Errorf("tun: %s: read: buffer of %d bytes after offset %d holds no %d-byte packet: %w",
			d.name, len(bufs[0])-offset, offset, d.mtu, ErrTooBig)
	}
	n, err := d.dev.Read(bufs[:k], sizes[:k], offset)
	for i := 0; i < n; i++ {
		if sizes[i] > len(bufs[i])-offset {
			// Truncated by the copy: refuse the piece and what follows.
			return i, fmt.Errorf("tun: %s: read: a %d-byte piece in a %d-byte buffer: %w", d.name, sizes[i], len(bufs[i])-offset, ErrTooBig)
		}
	}
	if n > 0 {
		d.frames.Add(1)
		d.segments.Add(uint64(n))
	}
	if err != nil {
		return n, d.readError(err)
	}
	return n, nil
}

// readError tells a dead device (closed, or a failed system call) from a
// frame wireguard-go could not split, which its errors do not wrap.
func (d *Offload) readError(err error) error {
	var errno syscall.Errno
	var pe *os.PathError
	switch {
	case errors.Is(err, os.ErrClosed):
		return err
	case errors.Is(err, wgtun.ErrTooManySegments):
		return fmt.Errorf("tun: %s: read: %w: %w", d.name, ErrTooBig, err)
	case errors.As(err, &pe), errors.As(err, &errno):
		return fmt.Errorf("tun: %s: read: %w", d.name, err)
	}
	return fmt.Errorf("tun: %s: read: %w: %w", d.name, ErrBadPacket, err)
}

// Write sends bufs, merging consecutive segments of a flow in place (it
// may extend bufs[i] within its capacity and swap elements of bufs: the
// caller rebuilds bufs before reusing it). Every packet is attempted; on a
// packet the kernel refuses it stops after the run that held it and
// returns the index of that run's last packet with the error, so a caller
// that resumes at n+1 sends nothing twice. A packet shorter than offset+1
// is refused with ErrTooBig at its index, as by the water device.
func (d *Offload) Write(bufs [][]byte, offset int) (int, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.writes.Add(1)
	for i, b := range bufs {
		if len(b) <= offset {
			n, err := d.write(bufs[:i], offset)
			if err != nil {
				return n, err
			}
			return i, fmt.Errorf("tun: %s: write: packet %d: %d bytes with offset %d: %w", d.name, i, len(b), offset, ErrTooBig)
		}
	}
	return d.write(bufs, offset)
}

func (d *Offload) write(bufs [][]byte, offset int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	if offset < VirtioNetHdrLen {
		return d.writeCopied(bufs, offset)
	}
	for start := 0; start < len(bufs); {
		end := d.groups.nextRun(bufs, offset, start)
		d.runs.Add(1)
		if _, err := d.dev.Write(bufs[start:end], offset); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return start, err
			}
			return end - 1, fmt.Errorf("tun: %s: write: %w", d.name, err)
		}
		start = end
	}
	return len(bufs), nil
}

// writeCopied serves a caller without head-room: the batch is copied, a
// device batch at a time, into buffers allocated on first use.
func (d *Offload) writeCopied(bufs [][]byte, offset int) (int, error) {
	if d.scratch == nil {
		d.scratch = make([][]byte, d.batch)
		for i := range d.scratch {
			d.scratch[i] = make([]byte, VirtioNetHdrLen+MaxSegment)
		}
		d.copies = make([][]byte, 0, d.batch)
	}
	done := 0
	for done < len(bufs) {
		d.copies = d.copies[:0]
		for i := done; i < len(bufs) && len(d.copies) < d.batch; i++ {
			p := bufs[i][offset:]
			if len(p) > MaxSegment {
				return i, fmt.Errorf("tun: %s: write: packet %d: %d bytes: %w", d.name, i, len(p), ErrTooBig)
			}
			s := d.scratch[len(d.copies)]
			d.copies = append(d.copies, s[:VirtioNetHdrLen+copy(s[VirtioNetHdrLen:], p)])
		}
		n, err := d.write(d.copies, VirtioNetHdrLen)
		if err != nil {
			return done + n, err
		}
		done += n
	}
	return len(bufs), nil
}

// Stats returns a copy of the device's counters.
func (d *Offload) Stats() OffloadStats {
	return OffloadStats{Frames: d.frames.Load(), Segments: d.segments.Load(), Writes: d.writes.Load(), Runs: d.runs.Load()}
}

// MTU is the interface MTU given at creation.
func (d *Offload) MTU() int { return d.mtu }

// BatchSize is wireguard-go's batch (128): the most packets one Read
// returns and the most one Write merges.
func (d *Offload) BatchSize() int { return d.batch }

// Name is the kernel interface name.
func (d *Offload) Name() string { return d.name }

// Fd is the TUN's file descriptor, for a caller that waits for readability
// itself (ppoll) before calling Read; it stays valid until Close.
func (d *Offload) Fd() int { return d.fd }

// Close closes the device; a blocked Read returns os.ErrClosed.
func (d *Offload) Close() error { return d.dev.Close() }

var _ Device = (*Offload)(nil)
