package wave

import (
	"fmt"
	"time"
)

// QueueConfig bounds a Queue. The zero value of a field means its default.
type QueueConfig struct {
	MaxPackets     int // packets held (default 512)
	MaxBytes       int // bytes held (default 512 KiB)
	MaxPacketBytes int // largest packet accepted, also the slot size (default 1500)
}

// QueueStats counts what a Queue did; the counters are monotonic.
type QueueStats struct {
	Packets, Bytes   int    // held now
	Enqueued         uint64 // packets accepted by Push
	Released         uint64 // packets handed to the send function without error
	ReleasedBytes    uint64
	DroppedHead      uint64 // oldest packets dropped to make room (the drop policy)
	DroppedHeadBytes uint64
	DroppedOversize  uint64 // Push of an empty packet or one above MaxPacketBytes
	SendErrors       uint64 // send returned an error: the packet is dropped
}

// Queue holds packets in front of a send function and releases them in the
// bursts a Pacer allows. It copies each packet into a preallocated slot
// (the caller may reuse its buffer at once), so steady state allocates
// nothing.
//
// Drop policy: head-drop. When a packet does not fit (MaxPackets or
// MaxBytes), the OLDEST packets are dropped until it does, and counted.
// The tunnel carries TCP: dropping from the front makes the inner TCP
// sender see the loss (duplicate ACKs from the newer packets behind it)
// one queueing delay earlier than drop-tail, which would make it wait for
// the whole standing queue to drain first (Lakshman, Neidhardt and Ott,
// "The drop from front strategy in TCP and in TCP over ATM", INFOCOM'96);
// and what the queue delivers is the freshest data. For UDP inner flows
// (voice, games) the oldest packet is also the least useful one.
//
// Queue is not safe for concurrent use; the Pump serialises it.
type Queue struct {
	cfg  QueueConfig
	slab []byte  // MaxPackets slots of MaxPacketBytes
	lens []int32 // ring of packet lengths, parallel to the slots
	head int
	n    int
	st   QueueStats
}

// NewQueue returns an empty Queue.
func NewQueue(cfg QueueConfig) (*Queue, error) {
	if cfg.MaxPackets == 0 {
		cfg.MaxPackets = 512
	}
	if cfg.MaxPacketBytes == 0 {
		cfg.MaxPacketBytes = 1500
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 512 << 10
	}
	switch {
	case cfg.MaxPackets < 1 || cfg.MaxPackets > 1<<20:
		return nil, fmt.Errorf("wave: QueueConfig.MaxPackets = %d, want 1..1048576", cfg.MaxPackets)
	case cfg.MaxPacketBytes < 1 || cfg.MaxPacketBytes > 1<<16:
		return nil, fmt.Errorf("wave: QueueConfig.MaxPacketBytes = %d, want 1..65536", cfg.MaxPacketBytes)
	case cfg.MaxBytes < cfg.MaxPacketBytes:
		return nil, fmt.Errorf("wave: QueueConfig.MaxBytes = %d, want >= MaxPacketBytes (%d)", cfg.MaxBytes, cfg.MaxPacketBytes)
	}
	return &Queue{
		cfg:  cfg,
		slab: make([]byte, cfg.MaxPackets*cfg.MaxPacketBytes),
		lens: make([]int32, cfg.MaxPackets),
	}, nil
}

func (q *Queue) slot(i int) []byte {
	off := i * q.cfg.MaxPacketBytes
	return q.slab[off : off+int(q.lens[i]) : off+q.cfg.MaxPacketBytes]
}

// Push copies p into the queue, dropping the oldest packets if needed. It
// reports false (and counts) only for a packet it can never hold.
func (q *Queue) Push(p []byte) bool {
	if len(p) == 0 || len(p) > q.cfg.MaxPacketBytes {
		q.st.DroppedOversize++
		return false
	}
	for q.n == q.cfg.MaxPackets || q.st.Bytes+len(p) > q.cfg.MaxBytes {
		l := int(q.lens[q.head])
		q.pop()
		q.st.DroppedHead++
		q.st.DroppedHeadBytes += uint64(l)
	}
	i := (q.head + q.n) % q.cfg.MaxPackets
	q.lens[i] = int32(len(p))
	copy(q.slot(i), p)
	q.n++
	q.st.Bytes += len(p)
	q.st.Enqueued++
	return true
}

func (q *Queue) pop() {
	q.st.Bytes -= int(q.lens[q.head])
	q.head = (q.head + 1) % q.cfg.MaxPackets
	q.n--
}

// Len is the number of packets held.
func (q *Queue) Len() int { return q.n }

// Bytes is the number of bytes held.
func (q *Queue) Bytes() int { return q.st.Bytes }

// Stats returns the counters.
func (q *Queue) Stats() QueueStats {
	s := q.st
	s.Packets = q.n
	return s
}

// Release hands to send as many packets as p's Budget allows at now, in
// order, and tells p what went (OnRelease). The slice passed to send is
// valid only during the call (quic-go's SendDatagram copies it). A send
// error drops that packet (counted) and releasing goes on. It returns the
// number of packets sent.
func (q *Queue) Release(now time.Time, p *Pacer, send func([]byte) error) int {
	packets, budget := p.Budget(now)
	sent, bytes := 0, 0
	for sent < packets && q.n > 0 {
		if bytes >= budget {
			break
		}
		l := int(q.lens[q.head])
		err := send(q.slot(q.head))
		q.pop()
		if err != nil {
			q.st.SendErrors++
			continue
		}
		sent++
		bytes += l
	}
	q.st.Released += uint64(sent)
	q.st.ReleasedBytes += uint64(bytes)
	p.OnRelease(now, sent, bytes)
	return sent
}
