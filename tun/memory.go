package tun

import (
	"errors"
	"os"
	"sync"
)

// ChannelTUN is an in-memory Device for tests, after wireguard-go's
// tuntest.ChannelTUN: packets the code under test should read are sent on
// Inbound; packets it writes appear on Outbound. Each packet is a fresh
// copy, so the test may keep it after the device reuses its buffers.
type ChannelTUN struct {
	// Inbound feeds Read: a test sends one IP packet per element.
	Inbound chan []byte
	// Outbound receives every packet Write sends.
	Outbound chan []byte

	mtu, batch int
	closed     chan struct{}
	closeOnce  sync.Once
}

// NewChannelTUN returns an in-memory device. A batch below 1 is taken as 1;
// an mtu below 1 as 1500. The channels are buffered by 1024 packets.
func NewChannelTUN(mtu, batch int) *ChannelTUN {
	if batch < 1 {
		batch = 1
	}
	if mtu < 1 {
		mtu = 1500
	}
	return &ChannelTUN{
		Inbound:  make(chan []byte, 1024),
		Outbound: make(chan []byte, 1024),
		mtu:      mtu,
		batch:    batch,
		closed:   make(chan struct{}),
	}
}

// ErrTooBig is returned when a packet does not fit the caller's buffer.
var ErrTooBig = errors.New("tun: packet larger than the buffer")

// Read blocks for the first packet, then takes whatever else is already
// queued without blocking, up to min(len(bufs), BatchSize()).
func (t *ChannelTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	max := min(len(bufs), len(sizes), t.batch)
	var p []byte
	select {
	case <-t.closed:
		return 0, os.ErrClosed
	case p = <-t.Inbound:
	}
	n := 0
	for {
		if len(bufs[n]) < offset || len(bufs[n])-offset < len(p) {
			return n, ErrTooBig
		}
		sizes[n] = copy(bufs[n][offset:], p)
		n++
		if n == max {
			return n, nil
		}
		select {
		case p = <-t.Inbound:
		default:
			return n, nil
		}
	}
}

// Write copies each bufs[i][offset:] to Outbound. It blocks while Outbound
// is full, unless the device is closed.
func (t *ChannelTUN) Write(bufs [][]byte, offset int) (int, error) {
	for i, b := range bufs {
		if len(b) < offset {
			return i, ErrTooBig
		}
		p := append([]byte(nil), b[offset:]...)
		select {
		case <-t.closed:
			return i, os.ErrClosed
		case t.Outbound <- p:
		}
	}
	return len(bufs), nil
}

// MTU reports the mtu given to NewChannelTUN.
func (t *ChannelTUN) MTU() int { return t.mtu }

// BatchSize reports the batch given to NewChannelTUN.
func (t *ChannelTUN) BatchSize() int { return t.batch }

// Name is empty: the device has no kernel interface.
func (t *ChannelTUN) Name() string { return "" }

// Close unblocks pending Reads and Writes; it is idempotent.
func (t *ChannelTUN) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return nil
}

var _ Device = (*ChannelTUN)(nil)
