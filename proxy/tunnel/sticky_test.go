package tunnel

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// withClient returns a dial option using a certificate of identity cn
// signed by k's CA.
func withClient(t *testing.T, k pki, cn string) func(*ClientConfig) {
	t.Helper()
	cl, err := NewClientCert(k.ca, cn, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	crt, err := cl.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return func(c *ClientConfig) { c.Certificate = crt }
}

// reaches reports whether a downlink packet to c's IPv4 address, written
// to the server's TUN, comes out of c (within 20 s: the machine is loaded).
func reaches(t *testing.T, h *harness, c *Client) bool {
	t.Helper()
	me := netip.AddrPortFrom(c.Addresses()[0].Addr(), 40000)
	pkt := stream(b4, me, 1, DefaultMTU, 9)[0]
	got := make(chan bool, 1)
	go func() {
		bufs, sizes := [][]byte{make([]byte, 2000)}, []int{0}
		n, err := c.Read(bufs, sizes, 0)
		got <- err == nil && n == 1 && sizes[0] == len(pkt)
	}()
	h.dev.Inbound <- pkt
	select {
	case ok := <-got:
		return ok
	case <-time.After(20 * time.Second):
		return false
	}
}

// A phone that redials after its session ended gets the same inner
// addresses back (both families), although another client connected in
// between; the other client never gets the held ones.
func TestRedialGetsSameInnerAddresses(t *testing.T) {
	k := newPKI(t, "phone-1")
	h := startServer(t, k, nil)
	c1 := mustDial(t, h, nil)
	first := c1.Addresses()
	c1.Close()
	eventually(t, "the session to end", func() bool { return h.srv.Stats().SessionsOpen == 0 })
	if st := h.srv.Stats(); st.AddressesHeld != 2 {
		t.Fatalf("held %d addresses after the session ended, want 2 (one per pool)", st.AddressesHeld)
	}
	other := mustDial(t, h, withClient(t, k, "phone-2"))
	for _, p := range other.Addresses() {
		if slices.Contains(first, p) {
			t.Fatalf("phone-2 got %s, held for phone-1 (phone-1 had %v)", p, first)
		}
	}
	c2 := mustDial(t, h, nil)
	if got := c2.Addresses(); !slices.Equal(got, first) {
		t.Fatalf("phone-1 redialled and got %v, want its addresses %v back", got, first)
	}
	if st := h.srv.Stats(); st.AddressesResumed != 2 || st.AddressesHeld != 0 || st.SessionsSuperseded != 0 {
		t.Fatalf("stats %+v: want 2 resumed, 0 held, 0 superseded", st)
	}
	if !reaches(t, h, c2) {
		t.Fatal("a downlink packet to the resumed address did not reach the new session")
	}
}

// The phone lost its uplink and redials while the server still has its
// old session (it notices only at the idle timeout): the new session takes
// the addresses over, the old one is ended, and the downlink goes to the
// new one.
func TestRedialTakesOverOpenSession(t *testing.T) {
	k := newPKI(t, "phone-1")
	h := startServer(t, k, nil)
	old := mustDial(t, h, nil)
	first := old.Addresses()
	c := mustDial(t, h, nil)
	if got := c.Addresses(); !slices.Equal(got, first) {
		t.Fatalf("redial while the old session is open: %v, want %v", got, first)
	}
	eventually(t, "the old session to be ended", func() bool {
		st := h.srv.Stats()
		return st.SessionsSuperseded == 1 && st.SessionsOpen == 1
	})
	select {
	case <-old.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the superseded client was not told its session ended")
	}
	if !reaches(t, h, c) {
		t.Fatal("a downlink packet did not reach the session that took the addresses over")
	}
	// The superseded session's end left the addresses with the new one:
	// another identity still cannot get them.
	other := mustDial(t, h, withClient(t, k, "phone-2"))
	for _, p := range other.Addresses() {
		if slices.Contains(first, p) {
			t.Fatalf("phone-2 got %s, leased to phone-1's new session", p)
		}
	}
	if st := h.srv.Stats(); st.AddressesHeld != 0 {
		t.Fatalf("stats %+v: the superseded session's end must not create a hold", st)
	}
}

// With the holds off the old behaviour stays: a released address is free.
func TestAddressHoldOff(t *testing.T) {
	k := newPKI(t, "phone-1")
	h := startServer(t, k, func(c *ServerConfig) { c.AddressHold = -1 })
	c1 := mustDial(t, h, nil)
	first := c1.Addresses()
	c1.Close()
	eventually(t, "the session to end", func() bool { return h.srv.Stats().SessionsOpen == 0 })
	if got := mustDial(t, h, withClient(t, k, "phone-2")).Addresses(); !slices.Equal(got, first) {
		t.Fatalf("phone-2 got %v, want the released %v (no holds)", got, first)
	}
}
