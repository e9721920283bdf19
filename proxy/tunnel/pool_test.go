package tunnel

import (
	"net/netip"
	"testing"
	"time"
)

// A /29: the server has .1, clients .2 to .6 (.7 is the broadcast).
var smallV4 = netip.MustParsePrefix("10.80.0.0/29")

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustPool(t *testing.T, p netip.Prefix, hold time.Duration, maxHeld int) *addrPool {
	t.Helper()
	a, err := newAddrPool(p, hold, maxHeld)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustLease(t *testing.T, a *addrPool, id string, now time.Time) (netip.Addr, uint64) {
	t.Helper()
	x, gen, _, ok := a.lease(id, now)
	if !ok {
		t.Fatalf("%s: pool %s spent", id, a.prefix)
	}
	return x, gen
}

// A redial within the hold gets the same address back, whoever leased
// meanwhile.
func TestPoolStickyWithinHold(t *testing.T) {
	a := mustPool(t, smallV4, time.Minute, 8)
	x, gen := mustLease(t, a, "phone-1", t0)
	if x.String() != "10.80.0.2" {
		t.Fatalf("first lease %s", x)
	}
	a.release(x, gen, t0)
	if y, _ := mustLease(t, a, "phone-2", t0.Add(time.Second)); y == x {
		t.Fatalf("phone-2 got %s, held for phone-1", y)
	}
	if y, _ := mustLease(t, a, "phone-1", t0.Add(time.Minute-time.Nanosecond)); y != x {
		t.Fatalf("phone-1 redialled within the hold and got %s, want %s", y, x)
	}
	if a.resumed != 1 || a.holds() != 0 {
		t.Fatalf("resumed %d, holds %d; want 1, 0", a.resumed, a.holds())
	}
}

// Negative: while held, no other identity gets the address, even when the
// pool has nothing else; after the hold it is free.
func TestPoolHeldAddressNeverGoesToAnother(t *testing.T) {
	a := mustPool(t, smallV4, time.Minute, 8)
	x, gen := mustLease(t, a, "phone-1", t0)
	a.release(x, gen, t0)
	for i, id := range []string{"b", "c", "d", "e"} {
		if y, _ := mustLease(t, a, id, t0); y == x {
			t.Fatalf("lease %d (%s) got the held %s", i, id, y)
		}
	}
	// Full but for the hold.
	for _, now := range []time.Time{t0, t0.Add(30 * time.Second), t0.Add(time.Minute - time.Nanosecond)} {
		if y, _, _, ok := a.lease("f", now); ok {
			t.Fatalf("at +%v another identity got %s while it was held for phone-1", now.Sub(t0), y)
		}
	}
	// Expired: free for anyone, and phone-1 no longer has a claim.
	if y, _ := mustLease(t, a, "f", t0.Add(time.Minute)); y != x {
		t.Fatalf("after the hold f got %s, want the freed %s", y, x)
	}
	if _, _, _, ok := a.lease("phone-1", t0.Add(time.Minute)); ok {
		t.Fatal("phone-1 got an address from a full pool after its hold expired")
	}
}

// An expired hold of the identity itself is not resumed: it leases anew.
func TestPoolExpiredHoldNotResumed(t *testing.T) {
	a := mustPool(t, smallV4, time.Minute, 8)
	x, gen := mustLease(t, a, "phone-1", t0)
	a.release(x, gen, t0)
	mustLease(t, a, "phone-1", t0.Add(2*time.Minute))
	if a.resumed != 0 || a.holds() != 0 {
		t.Fatalf("resumed %d, holds %d after an expired hold; want 0, 0", a.resumed, a.holds())
	}
}

// A second lease of an identity that holds one takes it over; the older
// lease's release then does nothing (the address stays leased), the
// newer's turns it into a hold.
func TestPoolTakeoverAndStaleRelease(t *testing.T) {
	a := mustPool(t, smallV4, time.Minute, 8)
	x, gen1 := mustLease(t, a, "phone-1", t0)
	y, gen2, takeover, ok := a.lease("phone-1", t0.Add(time.Second))
	if !ok || y != x || !takeover || gen2 == gen1 {
		t.Fatalf("second lease: %s gen %d takeover %v ok %v; want %s, a new gen, takeover", y, gen2, takeover, ok, x)
	}
	a.release(x, gen1, t0.Add(2*time.Second)) // the superseded session ends
	if _, still := a.leases[x]; !still || a.holds() != 0 {
		t.Fatalf("a stale release freed the address (leased %v, holds %d)", still, a.holds())
	}
	for _, id := range []string{"b", "c", "d", "e"} {
		if z, _ := mustLease(t, a, id, t0); z == x {
			t.Fatalf("%s got %s, leased to phone-1", id, z)
		}
	}
	a.release(x, gen2, t0.Add(3*time.Second))
	if a.holds() != 1 {
		t.Fatalf("holds %d after the current lease's release, want 1", a.holds())
	}
	a.release(x, gen2, t0.Add(4*time.Second)) // twice: nothing
	if a.holds() != 1 {
		t.Fatalf("holds %d after a repeated release, want 1", a.holds())
	}
}

// Holds are bounded: the one expiring first makes room, and its address is
// free at once.
func TestPoolHoldsBounded(t *testing.T) {
	a := mustPool(t, smallV4, time.Minute, 2)
	var addrs []netip.Addr
	for i, id := range []string{"p1", "p2", "p3"} {
		x, gen := mustLease(t, a, id, t0)
		a.release(x, gen, t0.Add(time.Duration(i)*time.Second))
		addrs = append(addrs, x)
		if a.holds() > 2 {
			t.Fatalf("%d holds with maxHeld 2", a.holds())
		}
	}
	// p1's hold (expiring first) was dropped: the scan finds its address.
	if y, _ := mustLease(t, a, "q", t0.Add(3*time.Second)); y != addrs[0] {
		t.Fatalf("q got %s, want p1's dropped hold %s", y, addrs[0])
	}
	if y, _ := mustLease(t, a, "p2", t0.Add(4*time.Second)); y != addrs[1] {
		t.Fatalf("p2 got %s, want its held %s", y, addrs[1])
	}
}

// Holds off: an address is free as soon as it is released.
func TestPoolWithoutHolds(t *testing.T) {
	for _, c := range []struct {
		hold time.Duration
		max  int
	}{{0, 8}, {-1, 8}, {time.Minute, 0}, {time.Minute, -1}} {
		a := mustPool(t, smallV4, c.hold, c.max)
		x, gen := mustLease(t, a, "phone-1", t0)
		a.release(x, gen, t0)
		if y, _ := mustLease(t, a, "phone-2", t0); y != x || a.holds() != 0 {
			t.Fatalf("hold %v max %d: phone-2 got %s (want the released %s), holds %d", c.hold, c.max, y, x, a.holds())
		}
	}
}

// IPv6 pools hold too (no broadcast; the scan starts after the server).
func TestPoolIPv6Sticky(t *testing.T) {
	a := mustPool(t, netip.MustParsePrefix("fd80::/120"), time.Minute, 8)
	x, gen := mustLease(t, a, "phone-1", t0)
	if x.String() != "fd80::2" {
		t.Fatalf("first lease %s", x)
	}
	a.release(x, gen, t0)
	if y, _ := mustLease(t, a, "phone-2", t0); y == x {
		t.Fatalf("phone-2 got phone-1's held %s", y)
	}
	if y, _ := mustLease(t, a, "phone-1", t0.Add(time.Second)); y != x {
		t.Fatalf("phone-1 got %s, want %s", y, x)
	}
}
