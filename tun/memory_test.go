package tun

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestChannelTUNBatchAndOffset(t *testing.T) {
	d := NewChannelTUN(1500, 3)
	pkts := [][]byte{{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}}
	for _, p := range pkts {
		d.Inbound <- p
	}
	const off = 4
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, off+16)
	}
	sizes := make([]int, 8)
	n, err := d.Read(bufs, sizes, off)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 (the batch size), nil", n, err)
	}
	for i := 0; i < n; i++ {
		if got := bufs[i][off : off+sizes[i]]; !bytes.Equal(got, pkts[i]) {
			t.Errorf("packet %d = %v, want %v", i, got, pkts[i])
		}
		if bufs[i][0] != 0 {
			t.Errorf("packet %d written into the head-room", i)
		}
	}
	n, err = d.Read(bufs, sizes, off)
	if err != nil || n != 1 || !bytes.Equal(bufs[0][off:off+sizes[0]], pkts[3]) {
		t.Fatalf("second Read = %d, %v, %v; want the last packet alone", n, err, bufs[0][off:off+sizes[0]])
	}

	bufs[0][off] = 42
	if n, err := d.Write([][]byte{bufs[0][:off+1]}, off); n != 1 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	bufs[0][off] = 0 // the device must have copied
	if got := <-d.Outbound; !bytes.Equal(got, []byte{42}) {
		t.Errorf("Outbound = %v, want [42]", got)
	}
}

func TestChannelTUNTooBig(t *testing.T) {
	d := NewChannelTUN(1500, 2)
	d.Inbound <- make([]byte, 10)
	n, err := d.Read([][]byte{make([]byte, 8)}, []int{0}, 0)
	if n != 0 || !errors.Is(err, ErrTooBig) {
		t.Fatalf("Read = %d, %v; want 0, ErrTooBig", n, err)
	}
}

func TestChannelTUNCloseUnblocksRead(t *testing.T) {
	d := NewChannelTUN(1500, 1)
	done := make(chan error)
	go func() {
		_, err := d.Read([][]byte{make([]byte, 100)}, []int{0}, 0)
		done <- err
	}()
	d.Close()
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after Close = %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
}

func TestLayoutOfDefault(t *testing.T) {
	if l := LayoutOf(NewChannelTUN(1500, 1)); l.Headroom != 0 || l.BufSize != 1501 {
		t.Errorf("LayoutOf(ChannelTUN 1500) = %+v, want no head-room and 1501 bytes", l)
	}
	if l := LayoutOf(NewChannelTUN(100, 1)); l.BufSize != 577 {
		t.Errorf("LayoutOf(ChannelTUN 100) = %+v, want 577 bytes", l)
	}
	for _, s := range []string{"auto", "on", "off"} {
		m, err := ParseOffloadMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseOffloadMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseOffloadMode("yes"); err == nil || !strings.Contains(err.Error(), "auto, on or off") {
		t.Errorf("ParseOffloadMode(yes) = %v", err)
	}
}
