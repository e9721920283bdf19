package proxy

import (
	"net/netip"
	"time"

	"github.com/m2ho/m2ho/m2ho"
)

// flowKey names a connection independently of direction: the tethered
// (laptop) endpoint and the internet endpoint. Addresses are stored as
// 16-byte arrays so the key is plain memory (cheap to hash, no pointers).
type flowKey struct {
	laptop, remote [16]byte
	lport, rport   uint16
	proto          uint8
}

func makeKey(proto uint8, laptop netip.Addr, lport uint16, remote netip.Addr, rport uint16) flowKey {
	return flowKey{laptop: laptop.As16(), remote: remote.As16(), lport: lport, rport: rport, proto: proto}
}

// FlowEntry is one row of the flow table. Its m2ho.Flow is handed to the
// controller by pointer; the entry lives in a preallocated slab and is
// reused after expiry or eviction, so creating a flow allocates nothing.
type FlowEntry struct {
	// Flow is the controller's per-flow state (zeroed before Attach).
	Flow m2ho.Flow

	key  flowKey
	Mode Mode

	// Handshake facts, indexed by m2ho.Dir of the packet's sender:
	// [m2ho.Uplink] is what the laptop announced in its SYN.
	synSeen  [2]bool
	wsOpt    [2]int8 // shift in that side's SYN; -1: no option
	mss      [2]uint16
	LastSeen time.Time
	// Closing is set on FIN or RST: the entry then expires sooner.
	Closing bool

	Packets, Bytes [2]uint64

	self       int32 // own slab index
	prev, next int32 // LRU links within list `list`
	list       uint8
}

// WScale is the window scale shift that applies to windows sent by the
// side dir, or -1 while it is not known: both the SYN and the SYN-ACK must
// have been seen (RFC 7323 §2.2: scaling is in effect only if both sent
// the option; if one did not, both shifts are 0).
func (e *FlowEntry) WScale(dir m2ho.Dir) int8 {
	if !e.synSeen[0] || !e.synSeen[1] {
		return -1
	}
	if e.wsOpt[0] < 0 || e.wsOpt[1] < 0 {
		return 0
	}
	return e.wsOpt[dir]
}

// MSS is the smaller of the two announced MSS values (0 if neither seen).
func (e *FlowEntry) MSS() uint16 {
	a, b := e.mss[0], e.mss[1]
	switch {
	case a == 0:
		return b
	case b == 0 || a < b:
		return a
	}
	return b
}

const (
	listOpen    = 0
	listClosing = 1
	nilIndex    = -1
)

// flowTable is a fixed-capacity map from flowKey to a slab entry, with one
// LRU list for open flows and one for closing flows: each list is ordered
// by LastSeen, so the tail of each is the next to expire and expiry costs
// O(expired). When full, the least recently seen of the two tails is
// evicted.
type flowTable struct {
	idx     map[flowKey]int32
	slab    []FlowEntry
	free    []int32
	head    [2]int32 // most recently seen
	tail    [2]int32 // least recently seen
	timeout [2]time.Duration
}

func newFlowTable(capacity int, idle, closing time.Duration) *flowTable {
	t := &flowTable{
		idx:     make(map[flowKey]int32, capacity),
		slab:    make([]FlowEntry, capacity),
		free:    make([]int32, capacity),
		head:    [2]int32{nilIndex, nilIndex},
		tail:    [2]int32{nilIndex, nilIndex},
		timeout: [2]time.Duration{idle, closing},
	}
	for i := range t.free {
		t.free[i] = int32(capacity - 1 - i)
	}
	return t
}

func (t *flowTable) len() int { return len(t.idx) }

func (t *flowTable) lookup(k flowKey) *FlowEntry {
	i, ok := t.idx[k]
	if !ok {
		return nil
	}
	return &t.slab[i]
}

func (t *flowTable) unlink(i int32) {
	e := &t.slab[i]
	l := e.list
	if e.prev != nilIndex {
		t.slab[e.prev].next = e.next
	} else {
		t.head[l] = e.next
	}
	if e.next != nilIndex {
		t.slab[e.next].prev = e.prev
	} else {
		t.tail[l] = e.prev
	}
	e.prev, e.next = nilIndex, nilIndex
}

func (t *flowTable) pushFront(i int32, l uint8) {
	e := &t.slab[i]
	e.list = l
	e.prev = nilIndex
	e.next = t.head[l]
	if t.head[l] != nilIndex {
		t.slab[t.head[l]].prev = i
	} else {
		t.tail[l] = i
	}
	t.head[l] = i
}

// touch records that e was seen at now and moves it to the front of its
// list (the closing list once Closing is set).
func (t *flowTable) touch(e *FlowEntry, now time.Time) {
	i := e.self
	e.LastSeen = now
	l := uint8(listOpen)
	if e.Closing {
		l = listClosing
	}
	if t.head[l] == i {
		return
	}
	t.unlink(i)
	t.pushFront(i, l)
}

// insert returns a fresh, zeroed entry for k. If the table is full it
// first evicts the least recently seen flow and calls onRemove for it
// (evicted reports whether that happened).
func (t *flowTable) insert(k flowKey, now time.Time, onRemove func(*FlowEntry)) (e *FlowEntry, evicted bool) {
	if len(t.free) == 0 {
		victim := t.tail[listOpen]
		c := t.tail[listClosing]
		if victim == nilIndex || (c != nilIndex && t.slab[c].LastSeen.Before(t.slab[victim].LastSeen)) {
			victim = c
		}
		t.remove(victim, onRemove)
		evicted = true
	}
	i := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	e = &t.slab[i]
	*e = FlowEntry{key: k, LastSeen: now, wsOpt: [2]int8{-1, -1}, self: i}
	t.idx[k] = i
	t.pushFront(i, listOpen)
	return e, evicted
}

func (t *flowTable) remove(i int32, onRemove func(*FlowEntry)) {
	e := &t.slab[i]
	if onRemove != nil {
		onRemove(e)
	}
	t.unlink(i)
	delete(t.idx, e.key)
	t.free = append(t.free, i)
}

// expire removes every flow idle for longer than its list's timeout and
// returns how many it removed.
func (t *flowTable) expire(now time.Time, onRemove func(*FlowEntry)) int {
	n := 0
	for l := range t.tail {
		for t.tail[l] != nilIndex && now.Sub(t.slab[t.tail[l]].LastSeen) > t.timeout[l] {
			t.remove(t.tail[l], onRemove)
			n++
		}
	}
	return n
}
