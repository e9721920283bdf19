// Package tun is the seam between the packet path and a packet device: a
// small batched interface (after wireguard-go's tun.Device), a Linux
// implementation over a kernel TUN device, and an in-memory one for tests.
package tun

import (
	"errors"
	"fmt"
)

// Device moves IP packets in batches. Every buffer carries head-room: a
// packet starts at bufs[i][offset:], so that a header can be prepended in
// place without copying.
type Device interface {
	// Read fills up to len(bufs) packets, the i-th at bufs[i][offset:],
	// its length in sizes[i]; it returns how many it filled. It blocks
	// until at least one packet is available or the device is closed.
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write sends each bufs[i][offset:] as one packet and returns how many
	// were written.
	Write(bufs [][]byte, offset int) (int, error)
	// MTU is the largest IP packet the device carries.
	MTU() int
	// BatchSize is the most packets one Read or Write moves.
	BatchSize() int
	// Name is the kernel interface name ("" for in-memory devices).
	Name() string
	Close() error
}

// Layout is the buffer shape a device asks of its callers.
type Layout struct {
	// Headroom is the least offset Read and Write take without copying
	// (the offload device writes its virtio-net header there).
	Headroom int
	// BufSize is how many bytes each buffer should hold after the offset:
	// at least the MTU, more when Write merges packets in place.
	BufSize int
}

// Layouter is implemented by a device that needs more than the default
// layout.
type Layouter interface {
	Layout() Layout
}

// LayoutOf returns d's layout. A device without a Layout method needs no
// head-room and buffers of MTU+1 bytes (the spare byte lets it tell an
// oversize packet from a full one), at least 577.
func LayoutOf(d Device) Layout {
	def := Layout{BufSize: max(d.MTU(), 576) + 1}
	l, ok := d.(Layouter)
	if !ok {
		return def
	}
	got := l.Layout()
	return Layout{Headroom: max(got.Headroom, 0), BufSize: max(got.BufSize, def.BufSize)}
}

// ErrBadPacket is returned by Read for a frame the device could not turn
// into packets (a malformed virtio-net header or GSO frame); the frame is
// dropped and reading may go on.
var ErrBadPacket = errors.New("tun: malformed frame from the kernel")

// IsPacketError reports whether err concerns one packet or frame (dropped
// and counted) rather than the device: reading and writing may go on.
func IsPacketError(err error) bool {
	return errors.Is(err, ErrTooBig) || errors.Is(err, ErrBadPacket)
}

// OffloadMode chooses between the offload device and water.
type OffloadMode uint8

const (
	// OffloadAuto opens the offload device and falls back to water where
	// the kernel refuses the offloads.
	OffloadAuto OffloadMode = iota
	// OffloadOn opens the offload device or fails.
	OffloadOn
	// OffloadOff opens water (one packet per system call, no offloads).
	OffloadOff
)

var offloadModeNames = [...]string{"auto", "on", "off"}

func (m OffloadMode) String() string {
	if int(m) < len(offloadModeNames) {
		return offloadModeNames[m]
	}
	return fmt.Sprintf("OffloadMode(%d)", m)
}

// ParseOffloadMode reads "auto", "on" or "off".
func ParseOffloadMode(s string) (OffloadMode, error) {
	for i, n := range offloadModeNames {
		if s == n {
			return OffloadMode(i), nil
		}
	}
	return 0, fmt.Errorf("tun offload %q: want auto, on or off", s)
}

// Set and Type make *OffloadMode a command-line flag value (pflag.Value).
func (m *OffloadMode) Set(s string) error {
	v, err := ParseOffloadMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Type names the flag's value kind in help text.
func (m *OffloadMode) Type() string { return "auto|on|off" }

// UnmarshalText reads the mode from a YAML or JSON string.
func (m *OffloadMode) UnmarshalText(b []byte) error { return m.Set(string(b)) }

// MarshalText writes the mode's name.
func (m OffloadMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Config says how Open creates a kernel TUN device.
type Config struct {
	Name      string // interface name; "" lets the kernel choose (tunN)
	MTU       int    // 0 means 1500
	BatchSize int    // water only: packets per Read; 0 means 64
	Offload   OffloadMode
}

// OffloadStats counts the offload device's work.
type OffloadStats struct {
	// Frames is how many Read calls returned packets; Segments how many
	// packets they returned (Segments/Frames is the split factor).
	Frames, Segments uint64
	// Writes is how many batches Write took, Runs how many calls to
	// wireguard-go's Write they took (runs > writes when a batch had to be
	// cut to keep a verdict; see group.go).
	Writes, Runs uint64
}

// VirtioNetHdrLen is the size of the virtio-net header (struct
// virtio_net_hdr) the kernel puts in front of every packet of a TUN opened
// with IFF_VNET_HDR; it is the offload device's head-room.
const VirtioNetHdrLen = 10

// MaxSegment is the largest packet the offload device builds when it
// coalesces on Write, and the largest frame the kernel hands to Read
// before the split (an IP packet's 16-bit length).
const MaxSegment = 65535
