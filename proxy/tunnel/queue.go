package tunnel

import (
	"sync"
	"sync/atomic"
)

// queue is a bounded FIFO of packets with its storage allocated up front:
// push copies a packet into the next free slot, so the hot path never
// allocates. Drop policy: tail drop. A packet that finds the queue full is
// refused and counted, never the ones already queued, so that what was
// accepted keeps its order; the inner TCP repairs the loss as it would a
// drop at a router. Any number of producers, one consumer.
//
// A queue in front of a pacer that has a QueueLimit (QueueLimiter) holds
// at most that many packets while it is positive: the excess is
// tail-dropped as above and counted apart (limited).
type queue struct {
	mu       sync.Mutex
	slots    [][]byte // each headroom+slotSize bytes
	lens     []int
	headroom int
	head     int
	n        int
	closed   bool
	notify   chan struct{} // a token whenever the queue goes non-empty
	limiter  QueueLimiter  // nil: the capacity is the only bound

	dropped atomic.Uint64 // refused because full
	limited atomic.Uint64 // refused because of the limiter's QueueLimit
}

func newQueue(capacity, slotSize int) *queue { return newQueueHeadroom(capacity, slotSize, 0) }

// newQueueHeadroom keeps headroom spare bytes in front of each packet, so
// that frontBatch's slots can go to a device that writes a header there
// (the offload TUN's virtio-net header) without a copy.
func newQueueHeadroom(capacity, slotSize, headroom int) *queue {
	q := &queue{
		slots:    make([][]byte, capacity),
		lens:     make([]int, capacity),
		headroom: headroom,
		notify:   make(chan struct{}, 1),
	}
	size := headroom + slotSize
	backing := make([]byte, capacity*size)
	for i := range q.slots {
		q.slots[i] = backing[i*size : (i+1)*size : (i+1)*size]
	}
	return q
}

// push copies pkt in; false when the queue is full or at its limiter's
// QueueLimit (counted), closed, or pkt is larger than a slot.
func (q *queue) push(pkt []byte) bool {
	lim := 0
	if q.limiter != nil {
		lim = q.limiter.QueueLimit() // lock-free by QueueLimiter's contract
	}
	q.mu.Lock()
	if q.closed || q.n == len(q.slots) || len(pkt) > len(q.slots[0])-q.headroom {
		full := !q.closed && q.n == len(q.slots)
		q.mu.Unlock()
		if full {
			q.dropped.Add(1)
		}
		return false
	}
	if lim > 0 && q.n >= lim {
		q.mu.Unlock()
		q.limited.Add(1)
		return false
	}
	i := (q.head + q.n) % len(q.slots)
	q.lens[i] = copy(q.slots[i][q.headroom:], pkt)
	q.n++
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
	return true
}

// front returns the oldest packet without removing it; only the consumer
// calls it, and the slot stays the consumer's until pop.
func (q *queue) front() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return nil, false
	}
	return q.slots[q.head][q.headroom : q.headroom+q.lens[q.head]], true
}

// frontBatch fills dst with the oldest packets, each with the queue's
// headroom in front (dst[i][headroom:] is the packet), and returns how
// many; they stay the consumer's until popN. Their capacity ends at the
// slot, so a device that grows a buffer in place cannot reach the next.
func (q *queue) frontBatch(dst [][]byte) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(q.n, len(dst))
	for j := range k {
		i := (q.head + j) % len(q.slots)
		dst[j] = q.slots[i][:q.headroom+q.lens[i]]
	}
	return k
}

// popN removes the k oldest packets (after frontBatch).
func (q *queue) popN(k int) {
	q.mu.Lock()
	k = min(k, q.n)
	q.head = (q.head + k) % len(q.slots)
	q.n -= k
	q.mu.Unlock()
}

func (q *queue) pop() {
	q.mu.Lock()
	if q.n > 0 {
		q.head = (q.head + 1) % len(q.slots)
		q.n--
	}
	q.mu.Unlock()
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// close makes every later push fail and wakes the consumer.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}
