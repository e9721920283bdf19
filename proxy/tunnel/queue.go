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
type queue struct {
	mu     sync.Mutex
	slots  [][]byte
	lens   []int
	head   int
	n      int
	closed bool
	notify chan struct{} // a token whenever the queue goes non-empty

	dropped atomic.Uint64 // refused because full
}

func newQueue(capacity, slotSize int) *queue {
	q := &queue{
		slots:  make([][]byte, capacity),
		lens:   make([]int, capacity),
		notify: make(chan struct{}, 1),
	}
	backing := make([]byte, capacity*slotSize)
	for i := range q.slots {
		q.slots[i] = backing[i*slotSize : (i+1)*slotSize : (i+1)*slotSize]
	}
	return q
}

// push copies pkt in; false when the queue is full (counted), closed, or
// pkt is larger than a slot.
func (q *queue) push(pkt []byte) bool {
	q.mu.Lock()
	if q.closed || q.n == len(q.slots) || len(pkt) > len(q.slots[0]) {
		full := !q.closed && q.n == len(q.slots)
		q.mu.Unlock()
		if full {
			q.dropped.Add(1)
		}
		return false
	}
	i := (q.head + q.n) % len(q.slots)
	q.lens[i] = copy(q.slots[i], pkt)
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
	return q.slots[q.head][:q.lens[q.head]], true
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
