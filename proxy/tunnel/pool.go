package tunnel

import (
	"fmt"
	"net/netip"
	"time"
)

// Defaults of the sticky leases (ServerConfig.AddressHold, MaxHeldAddresses).
const (
	// DefaultAddressHold covers a phone's redial after a loss: the link's
	// backoff reaches 30 s, and the old session may linger up to the idle
	// timeout (30 s) before it ends and its hold starts.
	DefaultAddressHold = 2 * time.Minute
	// DefaultMaxHeldAddresses bounds the holds per pool: a /24 keeps most
	// of its 253 client addresses free for new identities.
	DefaultMaxHeldAddresses = 64
)

// addrPool hands out one host address per client identity from a prefix;
// the prefix's first host address is the server's own. It is a pure core
// on now (the server holds its lock and passes the clock).
//
// Leases are sticky per identity, so that a phone's redial keeps the
// addresses the laptop's open flows are NATed to:
//   - an identity holds at most one lease; lease for an identity that
//     already holds one returns that address with a new generation (the
//     newer session takes it over, the server ends the older one);
//   - release of the current generation turns the lease into a hold for
//     that identity until now+hold; a release of an older generation (a
//     superseded session) does nothing;
//   - while held, no other identity gets the address; the holder's next
//     lease gets it back;
//   - holds are bounded (maxHeld, the one expiring first is dropped to
//     make room) and expire (an expired hold is a free address).
type addrPool struct {
	prefix  netip.Prefix
	server  netip.Addr
	hold    time.Duration
	maxHeld int

	gen     uint64
	leases  map[netip.Addr]poolLease // address -> its current lease
	byID    map[string]netip.Addr    // identity -> its leased address
	held    map[string]poolHold      // identity -> its address while not leased
	heldBy  map[netip.Addr]string    // address -> the identity holding it
	resumed uint64                   // leases that got the identity's held address back
}

type poolLease struct {
	id  string
	gen uint64
}

type poolHold struct {
	addr  netip.Addr
	until time.Time
}

// newAddrPool makes the pool of p; hold <= 0 or maxHeld <= 0 disable the
// holds (an address is free again as soon as it is released).
func newAddrPool(p netip.Prefix, hold time.Duration, maxHeld int) (*addrPool, error) {
	p = p.Masked()
	maxBits := p.Addr().BitLen()
	if maxBits-p.Bits() < 2 {
		return nil, fmt.Errorf("inner prefix %s: too small (needs room for the server and at least one client)", p)
	}
	if hold <= 0 || maxHeld <= 0 {
		hold, maxHeld = 0, 0
	}
	return &addrPool{prefix: p, server: p.Addr().Next(), hold: hold, maxHeld: maxHeld,
		leases: map[netip.Addr]poolLease{}, byID: map[string]netip.Addr{},
		held: map[string]poolHold{}, heldBy: map[netip.Addr]string{}}, nil
}

// lease returns the address for identity id and the lease's generation
// (for release), or false when the pool is spent: every address leased or
// held by another identity. takeover is true when id already held a lease
// on it (an older session of id still has it).
func (a *addrPool) lease(id string, now time.Time) (addr netip.Addr, gen uint64, takeover, ok bool) {
	a.gen++
	if x, ok := a.byID[id]; ok {
		a.leases[x] = poolLease{id: id, gen: a.gen}
		return x, a.gen, true, true
	}
	if h, ok := a.held[id]; ok {
		a.dropHold(id, h.addr)
		if now.Before(h.until) {
			a.resumed++
			a.take(h.addr, id)
			return h.addr, a.gen, false, true
		}
	}
	// The scan visits at most len(leases)+len(heldBy)+1 addresses: the
	// sessions and the holds are bounded.
	last := lastAddr(a.prefix)
	for x := a.server.Next(); a.prefix.Contains(x); x = x.Next() {
		if a.prefix.Addr().Is4() && x == last {
			break // IPv4 broadcast
		}
		if _, used := a.leases[x]; used {
			continue
		}
		if owner, isHeld := a.heldBy[x]; isHeld {
			if now.Before(a.held[owner].until) {
				continue
			}
			a.dropHold(owner, x) // expired: free
		}
		a.take(x, id)
		return x, a.gen, false, true
	}
	return netip.Addr{}, 0, false, false
}

func (a *addrPool) take(x netip.Addr, id string) {
	a.leases[x] = poolLease{id: id, gen: a.gen}
	a.byID[id] = x
}

func (a *addrPool) dropHold(id string, x netip.Addr) {
	delete(a.held, id)
	delete(a.heldBy, x)
}

// release ends lease gen of x: x is held for its identity until now+hold.
// A release of a lease that was taken over (an older gen) does nothing.
func (a *addrPool) release(x netip.Addr, gen uint64, now time.Time) {
	l, ok := a.leases[x]
	if !ok || l.gen != gen {
		return
	}
	delete(a.leases, x)
	delete(a.byID, l.id)
	if a.maxHeld == 0 {
		return
	}
	if len(a.held) >= a.maxHeld {
		// Full: the hold expiring first makes room (O(maxHeld), once per
		// session end).
		var first string
		var until time.Time
		for id, h := range a.held {
			if first == "" || h.until.Before(until) {
				first, until = id, h.until
			}
		}
		a.dropHold(first, a.held[first].addr)
	}
	a.held[l.id] = poolHold{addr: x, until: now.Add(a.hold)}
	a.heldBy[x] = l.id
}

// holds is the number of addresses held for identities without a session.
func (a *addrPool) holds() int { return len(a.held) }
