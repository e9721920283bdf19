// Package tun is the seam between the packet path and a packet device: a
// small batched interface (after wireguard-go's tun.Device), a Linux
// implementation over a kernel TUN device, and an in-memory one for tests.
package tun

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
